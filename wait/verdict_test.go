// Tests of the pod verdicts and of kubectl rollout status' rules.

package wait

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

var t0 = time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)

// Container statuses of the simulation's fault classes.
func running(name string, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(name, reason string, restarts int32, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: name, RestartCount: restarts,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: reason + " message"}}}
	if last != nil {
		cs.LastTerminationState.Terminated = last
	}
	return cs
}

func terminated(reason string, code int32, id string) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, ContainerID: id}
}

func podWith(statuses ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "chat-new-a", Namespace: ns, UID: "pod-a"},
		Spec:       corev1.PodSpec{NodeName: "gpu-node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: statuses},
	}
}

func unschedulablePod() *corev1.Pod {
	p := podWith()
	p.Spec.NodeName = ""
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}
	return p
}

// TestPodJudge plays observations of one pod and checks the verdict after
// each.
func TestPodJudge(t *testing.T) {
	type step struct {
		pod   *corev1.Pod
		after time.Duration   // since t0
		want  rollout.Verdict // "" = no failure
	}
	crashLoop := func(restarts int32) *corev1.Pod {
		return podWith(waiting("vllm", "CrashLoopBackOff", restarts, terminated("Error", 1, "c"+string(rune('0'+restarts)))))
	}
	cases := []struct {
		name       string
		opts       RolloutOptions
		steps      []step
		wantReason string
		wantExit   int32
		wantCont   string
	}{
		{
			name: "CrashLoopBackOff fails once restarts reach MaxRestarts",
			steps: []step{
				{pod: podWith(running("vllm", 0))},
				{pod: podWith(corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "c0")}})},
				{pod: crashLoop(1)},
				{pod: podWith(corev1.ContainerStatus{Name: "vllm", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
					LastTerminationState: corev1.ContainerState{Terminated: terminated("Error", 1, "c0")}})},
				{pod: crashLoop(2), want: rollout.VerdictCrashLoop},
			},
			wantReason: "CrashLoopBackOff", wantExit: 1, wantCont: "vllm",
		},
		{
			name:       "MaxRestarts is configurable",
			opts:       RolloutOptions{MaxRestarts: 3},
			steps:      []step{{pod: crashLoop(2)}, {pod: crashLoop(3), want: rollout.VerdictCrashLoop}},
			wantReason: "CrashLoopBackOff", wantExit: 1, wantCont: "vllm",
		},
		{
			name:       "OOMKilled in the current state fails at once",
			steps:      []step{{pod: podWith(corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("OOMKilled", 137, "c0")}}), want: rollout.VerdictOOMKilled}},
			wantReason: "OOMKilled", wantExit: 137, wantCont: "vllm",
		},
		{
			name:       "OOMKilled in the last state fails at once",
			steps:      []step{{pod: podWith(waiting("vllm", "CrashLoopBackOff", 1, terminated("OOMKilled", 137, "c0"))), want: rollout.VerdictOOMKilled}},
			wantReason: "OOMKilled", wantExit: 137, wantCont: "vllm",
		},
		{
			name: "MaxOOMKills counts distinct terminations",
			opts: RolloutOptions{MaxOOMKills: 2},
			steps: []step{
				{pod: podWith(waiting("vllm", "CrashLoopBackOff", 1, terminated("OOMKilled", 137, "c0")))},
				{pod: podWith(waiting("vllm", "CrashLoopBackOff", 1, terminated("OOMKilled", 137, "c0")))},
				{pod: podWith(waiting("vllm", "CrashLoopBackOff", 1, terminated("OOMKilled", 137, "c1"))), want: rollout.VerdictOOMKilled},
			},
			wantReason: "OOMKilled", wantExit: 137, wantCont: "vllm",
		},
		{
			name: "image pull errors fail after 2 consecutive observations",
			steps: []step{
				{pod: podWith(waiting("vllm", "ErrImagePull", 0, nil))},
				{pod: podWith(waiting("vllm", "ImagePullBackOff", 0, nil)), want: rollout.VerdictImagePull},
			},
			wantReason: "ImagePullBackOff", wantCont: "vllm",
		},
		{
			name: "an interrupted image pull streak starts over",
			steps: []step{
				{pod: podWith(waiting("vllm", "ErrImagePull", 0, nil))},
				{pod: podWith(waiting("vllm", "ContainerCreating", 0, nil))},
				{pod: podWith(waiting("vllm", "InvalidImageName", 0, nil))},
				{pod: podWith(waiting("vllm", "InvalidImageName", 0, nil)), want: rollout.VerdictImagePull},
			},
			wantReason: "InvalidImageName", wantCont: "vllm",
		},
		{
			name:       "CreateContainerConfigError fails at once",
			steps:      []step{{pod: podWith(waiting("vllm", "CreateContainerConfigError", 0, nil)), want: rollout.VerdictContainerError}},
			wantReason: "CreateContainerConfigError", wantCont: "vllm",
		},
		{
			name:       "CreateContainerError fails at once",
			steps:      []step{{pod: podWith(waiting("vllm", "CreateContainerError", 0, nil)), want: rollout.VerdictContainerError}},
			wantReason: "CreateContainerError", wantCont: "vllm",
		},
		{
			name:       "RunContainerError fails at once",
			steps:      []step{{pod: podWith(waiting("vllm", "RunContainerError", 0, nil)), want: rollout.VerdictContainerError}},
			wantReason: "RunContainerError", wantCont: "vllm",
		},
		{
			name: "init containers are judged too",
			steps: []step{{pod: func() *corev1.Pod {
				p := podWith(waiting("vllm", "PodInitializing", 0, nil))
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{waiting("fetch-weights", "CrashLoopBackOff", 2, terminated("Error", 2, "i1"))}
				return p
			}(), want: rollout.VerdictCrashLoop}},
			wantReason: "CrashLoopBackOff", wantExit: 2, wantCont: "fetch-weights",
		},
		{
			name: "unschedulable fails after UnschedulableTimeout",
			steps: []step{
				{pod: unschedulablePod()},
				{pod: unschedulablePod(), after: 59 * time.Second},
				{pod: unschedulablePod(), after: 60 * time.Second, want: rollout.VerdictUnschedulable},
			},
			wantReason: "Unschedulable",
		},
		{
			name: "UnschedulableTimeout is configurable and the timer restarts once scheduled",
			opts: RolloutOptions{UnschedulableTimeout: 5 * time.Second},
			steps: []step{
				{pod: unschedulablePod()},
				{pod: podWith(running("vllm", 0)), after: 4 * time.Second},
				{pod: unschedulablePod(), after: 6 * time.Second},
				{pod: unschedulablePod(), after: 10 * time.Second},
				{pod: unschedulablePod(), after: 11 * time.Second, want: rollout.VerdictUnschedulable},
			},
			wantReason: "Unschedulable",
		},
		{
			name: "healthy and slow is no failure",
			steps: []step{
				{pod: podWith(waiting("vllm", "ContainerCreating", 0, nil))},
				{pod: podWith(running("vllm", 0)), after: time.Minute},
				{pod: podWith(running("vllm", 0)), after: 10 * time.Minute},
			},
		},
		{
			name: "a single restart then running is no failure",
			steps: []step{
				{pod: crashLoop(1)},
				{pod: podWith(running("vllm", 1))},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := newPodJudge(tc.opts.withDefaults())
			var fail *podFinding
			for i, s := range tc.steps {
				var recheck time.Time
				fail, _, recheck = j.judge(s.pod, i+1, t0.Add(s.after))
				if s.want == "" {
					require.Nil(t, fail, "step %d: no failure yet, got %+v", i, fail)
					if c := podCondition(s.pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
						assert.False(t, recheck.IsZero(), "step %d: an unschedulable pod asks to be judged again", i)
					}
					continue
				}
				require.NotNil(t, fail, "step %d: want %s", i, s.want)
				assert.Equal(t, s.want, fail.Verdict, "step %d", i)
			}
			if tc.wantReason == "" {
				return
			}
			require.NotNil(t, fail)
			assert.Equal(t, tc.wantReason, fail.Reason)
			assert.Equal(t, tc.wantExit, fail.ExitCode)
			assert.Equal(t, tc.wantCont, fail.Container)
			assert.NotEmpty(t, fail.Message)
		})
	}
}

func TestPodJudgeCountsObservationsNotEvaluations(t *testing.T) {
	j := newPodJudge(RolloutOptions{}.withDefaults())
	p := podWith(waiting("vllm", "ErrImagePull", 0, nil))
	for range 3 {
		fail, suspects, _ := j.judge(p, 1, t0) // the same observation, judged again
		require.Nil(t, fail)
		require.Len(t, suspects, 1)
		assert.Equal(t, "ErrImagePull", suspects[0].Reason)
	}
	fail, _, _ := j.judge(p, 2, t0)
	require.NotNil(t, fail)
	assert.Equal(t, rollout.VerdictImagePull, fail.Verdict)
}

func TestUnschedulableMessage(t *testing.T) {
	j := newPodJudge(RolloutOptions{UnschedulableTimeout: 5 * time.Second}.withDefaults())
	_, suspects, recheck := j.judge(unschedulablePod(), 1, t0)
	require.Len(t, suspects, 1)
	assert.Equal(t, t0.Add(5*time.Second), recheck)
	fail, _, _ := j.judge(unschedulablePod(), 1, t0.Add(7*time.Second))
	require.NotNil(t, fail)
	assert.Equal(t, "unschedulable for 7s: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", fail.Message)
}

func deploymentStatus(gen, observed int64, replicas, updated, total, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, Replicas: total,
			AvailableReplicas: available, Conditions: conds},
	}
}

// TestRolloutStatus checks kubectl rollout status' rules.
func TestRolloutStatus(t *testing.T) {
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
		Message: `ReplicaSet "chat-7d9f" has timed out progressing.`}
	cases := []struct {
		name         string
		d            *appsv1.Deployment
		done, failed bool
		msg          string
	}{
		{"spec not observed", deploymentStatus(3, 2, 2, 2, 2, 2), false, false, "waiting for the deployment spec update to be observed"},
		{"progress deadline", deploymentStatus(2, 2, 2, 1, 3, 2, deadline), false, true, `deployment "chat" exceeded its progress deadline: ReplicaSet "chat-7d9f" has timed out progressing.`},
		{"not all updated", deploymentStatus(2, 2, 2, 1, 3, 2), false, false, "1 out of 2 new replicas have been updated"},
		{"old replicas left", deploymentStatus(2, 2, 2, 2, 3, 2), false, false, "1 old replicas are pending termination"},
		{"not all available", deploymentStatus(2, 2, 2, 2, 2, 1), false, false, "1 of 2 updated replicas are available"},
		{"rolled out", deploymentStatus(2, 2, 2, 2, 2, 2), true, false, "successfully rolled out"},
		{"scaled to zero", deploymentStatus(2, 2, 0, 0, 0, 0), true, false, "successfully rolled out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done, failed, msg := rolloutStatus(tc.d)
			assert.Equal(t, tc.done, done)
			assert.Equal(t, tc.failed, failed)
			assert.Equal(t, tc.msg, msg)
		})
	}
}
