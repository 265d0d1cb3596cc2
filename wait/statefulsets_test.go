// Tests of the RolloutWatcher on StatefulSets, against a fake clientset,
// and of StatefulSetRolledOut.

package wait

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

const stsUID = types.UID("sts-uid")

// testStatefulSet is web, 2 replicas, mid-rollout from revision web-old
// to web-new: web-1 updated, web-0 not yet, one pod ready.
func testStatefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: stsUID, Generation: 2},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.9.1"}}},
			},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, CurrentReplicas: 1,
			UpdatedReplicas: 1, CurrentRevision: "web-old", UpdateRevision: "web-new"},
	}
}

// testStatefulSetPod is web-<ordinal> at revision rev.
func testStatefulSetPod(ordinal, rev string, statuses ...corev1.ContainerStatus) *corev1.Pod {
	name := "web-" + ordinal
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(name + "-" + rev),
			Labels:          map[string]string{"app": "web", appsv1.ControllerRevisionHashLabelKey: rev},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: stsUID, Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.9.1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: statuses},
	}
}

func (h *harness) updateStatefulSet(mutate func(s *appsv1.StatefulSet)) {
	h.t.Helper()
	h.awaitWatch("statefulsets")
	s, err := h.client.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(s)
	_, err = h.client.AppsV1().StatefulSets(ns).Update(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

// stsRolledOut: every pod ready at the update revision.
func stsRolledOut(s *appsv1.StatefulSet) {
	s.Status.ReadyReplicas, s.Status.AvailableReplicas, s.Status.UpdatedReplicas, s.Status.CurrentReplicas = 2, 2, 2, 2
	s.Status.CurrentRevision = s.Status.UpdateRevision
}

// isWeb selects the events of the StatefulSet.
func isWeb(pred func(rollout.Event) bool) func(rollout.Event) bool {
	return func(e rollout.Event) bool { return e.Object.Kind == "StatefulSet" && e.Rollout != nil && pred(e) }
}

// watchedStatefulSet waits until the watcher has judged the StatefulSet's
// pods once (the informers of the StatefulSet and its pods synced).
func (h *harness) watchedStatefulSet() {
	h.t.Helper()
	h.awaitIdleAfter("the StatefulSet", isWeb(func(e rollout.Event) bool { return e.Rollout.UpdateRevision == "web-new" }))
}

func TestStatefulSetRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *appsv1.StatefulSet)
		done   bool
		msg    string
	}{
		{"spec not observed", func(s *appsv1.StatefulSet) { s.Status.ObservedGeneration = 1 }, false, "Waiting for statefulset spec update to be observed..."},
		{"never observed", func(s *appsv1.StatefulSet) { s.Generation, s.Status.ObservedGeneration = 0, 0 }, false, "Waiting for statefulset spec update to be observed..."},
		{"a pod not ready", func(*appsv1.StatefulSet) {}, false, "Waiting for 1 pods to be ready..."},
		{"ready, revisions differ", func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas, s.Status.UpdatedReplicas = 2, 2 }, false,
			"waiting for statefulset rolling update to complete 2 pods at revision web-new..."},
		{"rolled out", stsRolledOut, true, "statefulset rolling update complete 2 pods at revision web-new..."},
		{"minReadySeconds: not available yet", func(s *appsv1.StatefulSet) {
			stsRolledOut(s)
			s.Spec.MinReadySeconds, s.Status.AvailableReplicas = 10, 1
		}, false, "Waiting for 1 pods to be available..."},
		{"partition 1: one pod updated is done", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
			s.Status.ReadyReplicas = 2
		}, true, "partitioned roll out complete: 1 new pods have been updated..."},
		{"partition 1: no pod updated yet", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
			s.Status.ReadyReplicas, s.Status.UpdatedReplicas = 2, 0
		}, false, "Waiting for partitioned roll out to finish: 0 out of 1 new pods have been updated..."},
		{"partition 0 is no partition", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
			s.Status.ReadyReplicas = 2
		}, false, "waiting for statefulset rolling update to complete 1 pods at revision web-new..."},
		{"OnDelete: every pod ready", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			s.Status.ReadyReplicas = 2
		}, true, "statefulset has 2 ready pods (updateStrategy OnDelete: pods take the update revision when deleted)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStatefulSet()
			tc.mutate(s)
			done, msg := StatefulSetRolledOut(s)
			assert.Equal(t, tc.done, done)
			assert.Equal(t, tc.msg, msg)
		})
	}
}

func TestPodRevision(t *testing.T) {
	assert.Equal(t, "web-new", PodRevision(testStatefulSetPod("0", "web-new")))
	assert.Empty(t, PodRevision(&corev1.Pod{}))
}

// TestRolloutWatcherStatefulSetSucceeds: not done while currentRevision
// differs from updateRevision, done once they are equal; the progress
// names the revisions and the update revision's pods.
func TestRolloutWatcherStatefulSetSucceeds(t *testing.T) {
	h := startRunHarness(t, testStatefulSet(), nil,
		testStatefulSetPod("0", "web-old", running("vllm", 0)), testStatefulSetPod("1", "web-new", running("vllm", 0)))
	h.watchedStatefulSet()
	first := h.await("the first progress", isWeb(func(e rollout.Event) bool { return len(e.Rollout.Pods) == 1 }))
	assert.Equal(t, "web-1", first.Rollout.Pods[0].Pod, "the update revision's pods only")
	assert.Equal(t, "Waiting for 1 pods to be ready...", first.Message)
	assert.Equal(t, &rollout.RolloutProgress{StatefulSet: "web", UpdateRevision: "web-new", CurrentRevision: "web-old",
		Desired: 2, Updated: 1, Ready: 1, Available: 1, Verdict: rollout.VerdictProgressing, Pods: first.Rollout.Pods}, first.Rollout)

	h.updateStatefulSet(func(s *appsv1.StatefulSet) {
		s.Status.ReadyReplicas, s.Status.AvailableReplicas, s.Status.UpdatedReplicas = 2, 2, 2
	})
	const waiting = "waiting for statefulset rolling update to complete 2 pods at revision web-new..."
	h.awaitIdleAfter("every pod ready, the revisions differ", isWeb(func(e rollout.Event) bool { return e.Message == waiting }))
	assert.True(t, h.running(), "currentRevision is not updateRevision yet")

	h.updateStatefulSet(stsRolledOut)
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
	require.Len(t, res.Objects, 2)
	assert.Equal(t, rollout.StatusCurrent, res.Objects[1].Status)
	assert.Equal(t, "statefulset rolling update complete 2 pods at revision web-new...", res.Objects[1].Message)
	last := h.await("rolled out", isWeb(func(e rollout.Event) bool { return e.Rollout.Verdict == rollout.VerdictRolledOut }))
	assert.Equal(t, rollout.StatusCurrent, last.Status)
	assert.Equal(t, "web-new", last.Rollout.CurrentRevision)
	assert.Empty(t, last.Rollout.Pods)
	assert.Contains(t, eventLine(last), "statefulset/web: 2/2 updated, 2 ready, 2 available (update revision web-new): rolled out")
}

// TestRolloutWatcherStatefulSetPartition: with a partition, the rollout
// is done once the ordinals above it are updated.
func TestRolloutWatcherStatefulSetPartition(t *testing.T) {
	s := testStatefulSet()
	s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
	h := startRunHarness(t, s, nil, testStatefulSetPod("1", "web-new", running("vllm", 0)))
	h.watchedStatefulSet()
	assert.True(t, h.running())
	h.updateStatefulSet(func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 2 })
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, "partitioned roll out complete: 1 new pods have been updated...", res.Objects[1].Message)
}

func TestRolloutWatcherStatefulSetVerdicts(t *testing.T) {
	cases := []struct {
		name    string
		opts    RolloutOptions
		logs    func(*corev1.PodLogOptions) (string, error)
		drive   func(h *harness)
		verdict rollout.Verdict
		check   func(t *testing.T, h *harness, d *rollout.Diagnosis)
	}{
		{
			name: "CrashLoopBackOff of an update-revision pod, after 2 restarts",
			drive: func(h *harness) {
				p := testStatefulSetPod("1", "web-new", running("vllm", 0))
				h.createPod(p)
				h.watchedStatefulSet()
				p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(1)}
				h.updatePod(p)
				h.awaitIdleAfter("the first restart", isWeb(func(e rollout.Event) bool {
					return strings.Contains(e.Rollout.Warning, "pod web-1 container vllm: CrashLoopBackOff (restarts 1/2)")
				}))
				assert.True(h.t, h.running(), "one restart is not a verdict")
				p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
				h.updatePod(p)
			},
			verdict: rollout.VerdictCrashLoop,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "CrashLoopBackOff", d.Reason)
				assert.Equal(t, "web-1", d.Pod)
				assert.Equal(t, "vllm", d.Container)
				assert.Equal(t, int32(1), d.ExitCode)
				assert.Equal(t, int32(2), d.RestartCount)
				assert.Contains(t, d.LogTail, "RuntimeError: Engine core initialization failed. See root cause above.")
				assert.Contains(t, d.Summary(), "pod web-1")
			},
		},
		{
			name: "OOMKilled at once",
			drive: func(h *harness) {
				h.createPod(testStatefulSetPod("1", "web-new", corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("OOMKilled", 137, "c0")}}))
			},
			verdict: rollout.VerdictOOMKilled,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "OOMKilled", d.Reason)
				assert.Equal(t, int32(137), d.ExitCode)
				assert.Equal(t, "web-1", d.Pod)
			},
		},
		{
			name: "CreateContainerConfigError at once",
			drive: func(h *harness) {
				h.createPod(testStatefulSetPod("1", "web-new", waiting("vllm", "CreateContainerConfigError", 0, nil)))
			},
			verdict: rollout.VerdictContainerError,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "CreateContainerConfigError", d.Reason)
			},
		},
		{
			name: "unschedulable longer than UnschedulableTimeout",
			opts: RolloutOptions{UnschedulableTimeout: 5 * time.Second},
			drive: func(h *harness) {
				p := unschedulablePod()
				q := testStatefulSetPod("1", "web-new")
				p.Name, p.UID, p.Labels, p.OwnerReferences = q.Name, q.UID, q.Labels, q.OwnerReferences
				h.createPod(p)
				h.awaitIdleAfter("unschedulable", isWeb(func(e rollout.Event) bool { return strings.Contains(e.Rollout.Warning, "pod web-1: Unschedulable") }))
				require.Eventually(h.t, h.clock.HasWaiters, 5*time.Second, time.Millisecond)
				h.clock.Step(6 * time.Second)
			},
			verdict: rollout.VerdictUnschedulable,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "web-1", d.Pod)
				assert.Contains(t, d.Message, "Insufficient nvidia.com/gpu")
			},
		},
		{
			name: "a decisive known cause at the first crash",
			logs: func(*corev1.PodLogOptions) (string, error) { return gpuOOMLog, nil },
			drive: func(h *harness) {
				h.createPod(testStatefulSetPod("1", "web-new", corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://w/0")}}))
			},
			verdict: rollout.VerdictKnownCause,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
				assert.Equal(t, "web-1", d.Pod)
				assert.Equal(t, int32(0), d.RestartCount)
				last := h.events[len(h.events)-1].Rollout // h.mu is held
				assert.Equal(t, vllmcause.CauseGPUOOM, last.Cause)
			},
		},
		{
			name: "FailedCreate: an event of the StatefulSet while it lacks pods",
			drive: func(h *harness) {
				h.watchedStatefulSet()
				h.updateStatefulSet(func(s *appsv1.StatefulSet) { s.Status.Replicas = 1 })
				h.createEvent(testEvent("ev1", "StatefulSet", "web", stsUID, "Warning", "FailedCreate",
					`create Pod web-1 in StatefulSet web failed error: pods "web-1" is forbidden: error looking up service account llm/vllm: serviceaccount "vllm" not found`, t0))
			},
			verdict: rollout.VerdictFailedCreate,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "FailedCreate", d.Reason)
				assert.Contains(t, d.Message, "StatefulSet web: create Pod web-1")
				assert.Contains(t, d.Events[0], `Warning FailedCreate: create Pod web-1 in StatefulSet web failed error`)
				assert.Equal(t, "no pod was created: there are no logs", d.LogNote)
				assert.Contains(t, strings.Join(d.Hints, "\n"), "kubectl describe statefulset web -n llm")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// web-0 runs the old revision, healthy.
			h := startRunHarnessWith(t, tc.opts, testStatefulSet(), tc.logs, testStatefulSetPod("0", "web-old", running("vllm", 0)))
			tc.drive(h)
			d := requireRunFailure(t, h, tc.verdict, "statefulset/web")
			t.Logf("diagnosis: %s", d.Summary())
			last := h.eventsCopy()[len(h.eventsCopy())-1]
			assert.Equal(t, "StatefulSet", last.Object.Kind)
			require.NotNil(t, last.Rollout)
			assert.Equal(t, tc.verdict, last.Rollout.Verdict, "the last event carries the verdict")
			assert.Equal(t, "web", last.Rollout.StatefulSet)
			h.mu.Lock()
			defer h.mu.Unlock()
			tc.check(t, h, d)
		})
	}
}

// TestRolloutWatcherStatefulSetOldRevisionFailures: a pod of the old
// revision crash-looping is a warning, not a failure.
func TestRolloutWatcherStatefulSetOldRevisionFailures(t *testing.T) {
	old := testStatefulSetPod("0", "web-old", crashLoopStatus(7))
	h := startRunHarness(t, testStatefulSet(), nil, old, testStatefulSetPod("1", "web-new", running("vllm", 0)))
	h.watchedStatefulSet()
	h.await("the old pod's crash loop", isWeb(func(e rollout.Event) bool {
		return strings.Contains(e.Rollout.Warning, "pod web-0 (revision web-old) container vllm: CrashLoopBackOff (restarts 7/2)")
	}))
	h.createEvent(testEvent("ev-old", "Pod", old.Name, old.UID, "Warning", "BackOff", "Back-off restarting failed container", t0))
	h.awaitIdleAfter("the old pod's BackOff", isWeb(func(e rollout.Event) bool {
		return e.Rollout.Warning == "pod web-0 (revision web-old): Warning BackOff: Back-off restarting failed container"
	}))
	assert.True(t, h.running())
	h.updateStatefulSet(stsRolledOut)
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Empty(t, h.logs, "no log of an old pod is read")
}

// TestRolloutWatcherStatefulSetTimeout: the timeout's diagnosis names the
// StatefulSet and its update revision's pod not ready.
func TestRolloutWatcherStatefulSetTimeout(t *testing.T) {
	p := testStatefulSetPod("1", "web-new", running("vllm", 0))
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	u := toUnstructured(t, testStatefulSet())
	u.SetNamespace("")
	h := startHarness(t, harnessOptions{
		wait:    Options{Timeout: 30 * time.Second},
		extra:   []*unstructured.Unstructured{u},
		objects: []runtime.Object{testStatefulSet(), p},
		setup: func(c *fake.Clientset) {
			d, err := c.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
			require.NoError(t, err)
			rolledOut(d)
			_, err = c.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
			require.NoError(t, err)
		},
	})
	h.awaitIdleAfter("the pod starting", isWeb(func(e rollout.Event) bool {
		return len(e.Rollout.Pods) == 1 && e.Rollout.Pods[0].Phase == rollout.PhaseStarting
	}))
	require.Eventually(t, func() bool { return h.clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	h.clock.Step(31 * time.Second)
	res, err := h.result()
	require.ErrorIs(t, err, ErrTimeout)
	require.NotNil(t, res.Diagnosis)
	d := res.Diagnosis
	assert.Equal(t, rollout.VerdictTimeout, d.Verdict)
	assert.Equal(t, "statefulset/web", d.Object)
	assert.Equal(t, ns, d.Namespace)
	assert.Equal(t, "web-1", d.Pod)
	assert.Contains(t, d.Message, "waiting for rollout to finish: Waiting for 1 pods to be ready...")
	assert.Contains(t, d.Message, "container vllm is running but not ready")
	assert.Contains(t, err.Error(), "rollout of statefulset/web timed out after 30s: ")
}

// TestRolloutWatcherStatefulSetQuota: a quota refusal while a pod of the
// StatefulSet terminates waits for it to be gone, and then quotaSettle.
func TestRolloutWatcherStatefulSetQuota(t *testing.T) {
	terminating := testStatefulSetPod("1", "web-old", running("vllm", 0))
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	terminating.Finalizers = []string{"sim.vllmctl.io/hold"}
	h := startRunHarness(t, testStatefulSet(), nil, testStatefulSetPod("0", "web-old", running("vllm", 0)), terminating)
	h.watchedStatefulSet()
	h.updateStatefulSet(func(s *appsv1.StatefulSet) { s.Status.Replicas = 1 })
	refuse := func(name string, n int) {
		msg := fmt.Sprintf(`create Pod web-1 in StatefulSet web failed error: pods "web-1" is forbidden: exceeded quota: gpu (%d)`, n)
		h.createEvent(testEvent(name, "StatefulSet", "web", stsUID, "Warning", "FailedCreate", msg, h.clock.Now()))
		h.awaitIdleAfter(name, isWeb(func(e rollout.Event) bool {
			return strings.Contains(e.Rollout.Warning, fmt.Sprintf("exceeded quota: gpu (%d)", n))
		}))
	}
	refuse("ev1", 1)
	assert.True(t, h.running(), "a pod of the StatefulSet is terminating")
	h.clock.Step(time.Minute)
	refuse("ev2", 2)
	assert.True(t, h.running(), "it still is")
	require.NoError(t, h.client.CoreV1().Pods(ns).Delete(context.Background(), terminating.Name, metav1.DeleteOptions{}))
	// The pods' informer delivers in order: once the watcher reports
	// web-0's restart, it has seen web-1 go.
	restarted := testStatefulSetPod("0", "web-old", running("vllm", 1))
	restarted.Status.ContainerStatuses[0].LastTerminationState.Terminated = terminated("Error", 1, "sim://w0/0")
	h.updatePod(restarted)
	h.awaitIdleAfter("the pod gone", isWeb(func(e rollout.Event) bool {
		return strings.HasPrefix(e.Rollout.Warning, "pod web-0 (revision web-old) container vllm: Restarted")
	}))
	h.clock.Step(quotaSettle - time.Second)
	refuse("ev3", 3)
	assert.True(t, h.running(), "the quota may not be recomputed yet")
	h.clock.Step(2 * time.Second)
	h.createEvent(testEvent("ev4", "StatefulSet", "web", stsUID, "Warning", "FailedCreate",
		`create Pod web-1 in StatefulSet web failed error: pods "web-1" is forbidden: exceeded quota: gpu (4)`, h.clock.Now()))
	d := requireRunFailure(t, h, rollout.VerdictFailedCreate, "statefulset/web")
	assert.Contains(t, d.Message, "exceeded quota: gpu (4)")
	assert.Contains(t, strings.Join(d.Hints, "\n"), "kubectl describe quota -n llm")
}

// TestRolloutWatcherStatefulSetParallel: podManagementPolicy Parallel with
// maxUnavailable 2 replaces both pods at once; one of them failing fails
// the StatefulSet, and a pod recreated under an old pod's name is judged
// afresh.
func TestRolloutWatcherStatefulSetParallel(t *testing.T) {
	s := testStatefulSet()
	s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	s.Status.ReadyReplicas, s.Status.UpdatedReplicas = 0, 2
	old := testStatefulSetPod("0", "web-old", crashLoopStatus(1))
	h := startRunHarness(t, s, nil, old, testStatefulSetPod("1", "web-new", running("vllm", 0)))
	h.await("the old web-0's restart", isWeb(func(e rollout.Event) bool {
		return strings.Contains(e.Rollout.Warning, "pod web-0 (revision web-old) container vllm: CrashLoopBackOff (restarts 1/2)")
	}))
	require.NoError(t, h.client.CoreV1().Pods(ns).Delete(context.Background(), old.Name, metav1.DeleteOptions{}))
	again := testStatefulSetPod("0", "web-new", crashLoopStatus(1))
	h.createPod(again)
	h.await("the new web-0's restart", isWeb(func(e rollout.Event) bool {
		return e.Rollout.Warning != "" && strings.HasPrefix(e.Rollout.Warning, "pod web-0 container vllm: CrashLoopBackOff (restarts 1/2)")
	}))
	h.createEvent(testEvent("ev-old", "Pod", old.Name, old.UID, "Warning", "BackOff", "Back-off restarting failed container", t0))
	h.awaitIdleAfter("the old web-0's event", isWeb(func(e rollout.Event) bool {
		return e.Rollout.Warning == "pod web-0 (an earlier pod of that name): Warning BackOff: Back-off restarting failed container"
	}))
	assert.True(t, h.running())
	again.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
	h.updatePod(again)
	d := requireRunFailure(t, h, rollout.VerdictCrashLoop, "statefulset/web")
	assert.Equal(t, "web-0", d.Pod)
}
