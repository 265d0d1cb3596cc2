// Tests of the RolloutWatcher on Jobs and on Pods that run to completion,
// against a fake clientset.

package wait

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

const jobUID = types.UID("job-uid")

func testJob(policy corev1.RestartPolicy) *batchv1.Job {
	labels := map[string]string{batchv1.ControllerUidLabel: string(jobUID)}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns, UID: jobUID},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](6),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: policy,
					Containers: []corev1.Container{{Name: "migrate", Image: "example.com/migrate:v1"}}},
			},
		},
		Status: batchv1.JobStatus{Active: 1},
	}
}

// testJobPod is a pod of testJob, in phase, with statuses.
func testJobPod(suffix string, phase corev1.PodPhase, statuses ...corev1.ContainerStatus) *corev1.Pod {
	j := testJob(corev1.RestartPolicyOnFailure)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "migrate-" + suffix, Namespace: ns, UID: types.UID("migrate-" + suffix), Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: "gpu-node-1", Containers: j.Spec.Template.Spec.Containers},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: statuses},
	}
}

// testBarePod is a Pod with policy, not owned by anything.
func testBarePod(policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "chat-test", Namespace: ns, UID: "chat-test-uid"},
		Spec: corev1.PodSpec{RestartPolicy: policy, NodeName: "gpu-node-1",
			Containers: []corev1.Container{{Name: "test", Image: "example.com/test:v1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("test", 0)}},
	}
}

// startRunHarness waits for the Deployment of the harness (rolled out
// from the start) and for obj, which the cluster holds with objects.
func startRunHarness(t *testing.T, obj runtime.Object, logs func(*corev1.PodLogOptions) (string, error), objects ...runtime.Object) *harness {
	t.Helper()
	return startRunHarnessWith(t, RolloutOptions{}, obj, logs, objects...)
}

// startRunHarnessWith is startRunHarness with the watcher's options ro.
func startRunHarnessWith(t *testing.T, ro RolloutOptions, obj runtime.Object, logs func(*corev1.PodLogOptions) (string, error), objects ...runtime.Object) *harness {
	t.Helper()
	u := toUnstructured(t, obj)
	u.SetNamespace("")
	return startHarness(t, harnessOptions{
		rollout: ro,
		extra:   []*unstructured.Unstructured{u},
		objects: append([]runtime.Object{obj}, objects...),
		logs:    logs,
		setup: func(c *fake.Clientset) {
			d, err := c.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
			require.NoError(t, err)
			rolledOut(d)
			_, err = c.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
			require.NoError(t, err)
		},
	})
}

func (h *harness) updateJob(mutate func(j *batchv1.Job)) {
	h.t.Helper()
	h.awaitWatch("jobs")
	j, err := h.client.BatchV1().Jobs(ns).Get(context.Background(), "migrate", metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(j)
	_, err = h.client.BatchV1().Jobs(ns).Update(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

// requireRunFailure checks a failed wait on a Job or Pod: its outcome,
// error, and a diagnosis of object with verdict v.
func requireRunFailure(t *testing.T, h *harness, v rollout.Verdict, object string) *rollout.Diagnosis {
	t.Helper()
	res, err := h.result()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrFailed)
	var rfe *RolloutFailedError
	require.ErrorAs(t, err, &rfe)
	assert.Equal(t, OutcomeFailed, res.Outcome)
	require.NotNil(t, res.Diagnosis)
	d := res.Diagnosis
	assert.Equal(t, v, d.Verdict)
	assert.Equal(t, object, d.Object)
	assert.Equal(t, ns, d.Namespace)
	require.Len(t, res.Objects, 2)
	assert.NotEqual(t, rollout.StatusFailed, res.Objects[0].Status, "the Deployment did not fail (it may not be judged yet when the run fails)")
	assert.Equal(t, rollout.StatusFailed, res.Objects[1].Status)
	assert.Contains(t, err.Error(), "rollout of "+object+" failed: ")
	last := h.eventsCopy()
	require.NotEmpty(t, last)
	assert.Equal(t, rollout.StatusFailed, last[len(last)-1].Status, "the last event is the failure")
	return d
}

const gpuOOMLog = "INFO loading\n(EngineCore_DP0 pid=1) ERROR [linear.py:210] Failed to create unquantized linear weights: CUDA out of memory. Tried to allocate 896.00 MiB.\n"

func TestRolloutWatcherJobCompletes(t *testing.T) {
	h := startRunHarness(t, testJob(corev1.RestartPolicyNever), nil)
	h.createPod(testJobPod("a", corev1.PodRunning, running("migrate", 0)))
	h.awaitIdleAfter("the Job in progress", func(e rollout.Event) bool { return e.Object.Kind == "Job" && e.Status == rollout.StatusInProgress })
	assert.True(t, h.running(), "the Job has not completed")
	h.updateJob(func(j *batchv1.Job) {
		j.Status = batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	})
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
	require.Len(t, res.Objects, 2)
	assert.Equal(t, rollout.ObjectStatus{Object: res.Objects[1].Object, Status: rollout.StatusCurrent, Message: "job completed: 1 succeeded"}, res.Objects[1])
	assert.Equal(t, "batch", res.Objects[1].Object.Group)
	assert.Equal(t, ns, res.Objects[1].Object.Namespace)
	h.await("the Job's progress", func(e rollout.Event) bool {
		return e.Object.Kind == "Job" && e.Message == "1 active, 0 succeeded, 0 failed"
	})
}

func TestRolloutWatcherJobFailed(t *testing.T) {
	job := testJob(corev1.RestartPolicyNever)
	job.Status = batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}
	failed := testJobPod("a", corev1.PodFailed, corev1.ContainerStatus{Name: "migrate",
		State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://a/0")}})
	ev := testEvent("ev-a", "Pod", failed.Name, failed.UID, "Normal", "Started", "Started container migrate", t0)
	h := startRunHarness(t, job, nil, failed, ev)
	d := requireRunFailure(t, h, rollout.VerdictJobFailed, "job.batch/migrate")
	assert.Equal(t, "Error", d.Reason)
	assert.Equal(t, "migrate-a", d.Pod)
	assert.Equal(t, "migrate", d.Container)
	assert.Equal(t, int32(1), d.ExitCode)
	assert.Contains(t, d.Message, "BackoffLimitExceeded: Job has reached the specified backoff limit")
	assert.Equal(t, []string{"Normal Started: Started container migrate"}, d.Events)
	assert.Contains(t, d.LogTail, "RuntimeError: Engine core initialization failed. See root cause above.")
}

func TestRolloutWatcherJobPodCrashLoopFailsFast(t *testing.T) {
	h := startRunHarnessWith(t, RolloutOptions{WaitOnKnownCause: true}, testJob(corev1.RestartPolicyOnFailure),
		func(*corev1.PodLogOptions) (string, error) { return gpuOOMLog, nil })
	pod := testJobPod("a", corev1.PodRunning, crashLoopStatus(1))
	pod.Spec.Containers[0].Name = "vllm"
	h.createPod(pod)
	h.awaitIdleAfter("one restart", func(e rollout.Event) bool { return e.Object.Kind == "Job" && e.Status == rollout.StatusInProgress })
	assert.True(t, h.running(), "one restart is not a crash loop yet")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
	h.updatePod(pod)
	d := requireRunFailure(t, h, rollout.VerdictCrashLoop, "job.batch/migrate")
	assert.Equal(t, "CrashLoopBackOff", d.Reason)
	assert.Equal(t, "migrate-a", d.Pod)
	assert.Equal(t, "vllm", d.Container)
	assert.Equal(t, int32(2), d.RestartCount)
	assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
	assert.NotEmpty(t, d.LogTail)
}

func TestRolloutWatcherJobPodOOMKilled(t *testing.T) {
	h := startRunHarness(t, testJob(corev1.RestartPolicyOnFailure), nil)
	h.createPod(testJobPod("a", corev1.PodRunning, waiting("migrate", "CrashLoopBackOff", 1, terminated("OOMKilled", 137, "sim://a/0"))))
	d := requireRunFailure(t, h, rollout.VerdictOOMKilled, "job.batch/migrate")
	assert.Equal(t, "OOMKilled", d.Reason)
	assert.Equal(t, "migrate-a", d.Pod)
	assert.Equal(t, int32(137), d.ExitCode)
}

func TestRolloutWatcherPodSucceeds(t *testing.T) {
	pod := testBarePod(corev1.RestartPolicyNever)
	h := startRunHarness(t, pod, nil)
	h.awaitIdleAfter("the Pod running", func(e rollout.Event) bool { return e.Object.Kind == "Pod" && e.Status == rollout.StatusInProgress })
	assert.True(t, h.running(), "the Pod has not succeeded")
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "test", State: corev1.ContainerState{Terminated: terminated("Completed", 0, "sim://t/0")}}}
	h.updatePod(pod)
	res, err := h.result()
	require.NoError(t, err)
	require.Len(t, res.Objects, 2)
	assert.Equal(t, rollout.StatusCurrent, res.Objects[1].Status)
	assert.Equal(t, "pod succeeded", res.Objects[1].Message)
}

func TestRolloutWatcherPodFailed(t *testing.T) {
	pod := testBarePod(corev1.RestartPolicyNever)
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "test", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://t/0")}}}
	h := startRunHarnessWith(t, RolloutOptions{WaitOnKnownCause: true}, pod, func(*corev1.PodLogOptions) (string, error) { return gpuOOMLog, nil })
	d := requireRunFailure(t, h, rollout.VerdictPodFailed, "pod/chat-test")
	assert.Equal(t, "Error", d.Reason)
	assert.Equal(t, "chat-test", d.Pod)
	assert.Equal(t, "test", d.Container)
	assert.Equal(t, int32(1), d.ExitCode)
	assert.Contains(t, d.Summary(), "exit code 1")
	assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
}

// TestRolloutWatcherPodAlwaysIsOther: a Pod with restartPolicy Always is
// left to the other waiter, as before.
func TestRolloutWatcherPodAlwaysIsOther(t *testing.T) {
	pod := testBarePod(corev1.RestartPolicyAlways)
	ok, _ := runsToCompletion(toUnstructured(t, pod))
	assert.False(t, ok)
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	ok, isJob := runsToCompletion(toUnstructured(t, pod))
	assert.True(t, ok)
	assert.False(t, isJob)
	ok, isJob = runsToCompletion(toUnstructured(t, testJob(corev1.RestartPolicyNever)))
	assert.True(t, ok)
	assert.True(t, isJob)
}
