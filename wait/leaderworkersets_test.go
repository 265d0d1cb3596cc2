// Tests of the RolloutWatcher on LeaderWorkerSets, against a fake
// clientset and a fake dynamic client, and of LeaderWorkerSetRolledOut.

package wait

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

const lwsUID = types.UID("lws-uid")

// testLWS is the LeaderWorkerSet llm: 2 groups of 2 pods, mid-rollout to
// its generation 2 (observed): 1 group updated, 1 ready.
func testLWS() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1",
		"kind":       "LeaderWorkerSet",
		"metadata":   map[string]any{"name": "llm", "namespace": ns, "uid": string(lwsUID), "generation": int64(2)},
		"spec": map[string]any{
			"replicas": int64(2),
			"leaderWorkerTemplate": map[string]any{
				"size": int64(2), "restartPolicy": "RecreateGroupOnPodRestart",
				"workerTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "vllm", "image": "vllm/vllm-openai:v0.9.1"}}}},
			},
		},
		"status": map[string]any{
			"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(1), "readyReplicas": int64(1),
			"conditions": []any{
				map[string]any{"type": "Progressing", "status": "True", "reason": "GroupsProgressing", "message": "Replicas are progressing", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-30T01:02:03Z"},
				map[string]any{"type": "Available", "status": "False", "reason": "AllGroupsReady", "message": "All replicas are ready", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-30T01:02:03Z"},
			},
		},
	}}
}

// lwsAvailableNow marks the LeaderWorkerSet rolled out: every group
// updated and ready, Available.
func lwsAvailableNow(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(u.Object, int64(2), "status", "updatedReplicas")
	_ = unstructured.SetNestedField(u.Object, int64(2), "status", "readyReplicas")
	_ = unstructured.SetNestedSlice(u.Object, []any{
		map[string]any{"type": "Progressing", "status": "False", "reason": "GroupsProgressing", "message": "Replicas are progressing", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-30T01:02:03Z"},
		map[string]any{"type": "Available", "status": "True", "reason": "AllGroupsReady", "message": "All replicas are ready", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-30T01:02:03Z"},
	}, "status", "conditions")
}

// testLeaderSts is the leader StatefulSet of llm at template revision rev.
func testLeaderSts(rev string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns, UID: "leader-sts-uid",
			Labels:          map[string]string{LeaderWorkerSetNameLabel: "llm", LeaderWorkerSetRevisionLabel: rev},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "llm", UID: lwsUID, Controller: ptr.To(true)}},
		},
	}
}

// testLWSPod is the pod of group g (worker w: 0 is the leader, llm-<g>)
// of template revision rev; uid tells apart the pods of a recreated
// group.
func testLWSPod(g, w, rev, uid string, statuses ...corev1.ContainerStatus) *corev1.Pod {
	name := "llm-" + g
	if w != "0" {
		name += "-" + w
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(name + "-" + uid),
			Labels: map[string]string{LeaderWorkerSetNameLabel: "llm", lwsGroupIndexLabel: g, lwsWorkerIndexLabel: w, LeaderWorkerSetRevisionLabel: rev},
		},
		Spec:   corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.9.1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: statuses},
	}
}

// lwsHarness runs the watcher on the harness's Deployment (rolled out) and
// the LeaderWorkerSet lws, with the leader StatefulSet and pods given.
type lwsHarness struct {
	*harness
	dyn *dynamicfake.FakeDynamicClient
}

func startLWSHarness(t *testing.T, ro RolloutOptions, lws *unstructured.Unstructured, logs func(*corev1.PodLogOptions) (string, error), objects ...runtime.Object) *lwsHarness {
	t.Helper()
	return startLWSHarnessWait(t, ro, Options{}, lws, logs, objects...)
}

// startLWSHarnessWait is startLWSHarness with the wait's options wo.
func startLWSHarnessWait(t *testing.T, ro RolloutOptions, wo Options, lws *unstructured.Unstructured, logs func(*corev1.PodLogOptions) (string, error), objects ...runtime.Object) *lwsHarness {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{LeaderWorkerSetResource(): "LeaderWorkerSetList"}, lws.DeepCopy())
	in := lws.DeepCopy()
	in.SetNamespace("")
	unstructured.RemoveNestedField(in.Object, "status")
	h := startHarness(t, harnessOptions{
		rollout: ro,
		wait:    wo,
		extra:   []*unstructured.Unstructured{in},
		objects: objects,
		logs:    logs,
		dyn:     dyn,
		setup: func(c *fake.Clientset) {
			d, err := c.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
			require.NoError(t, err)
			rolledOut(d)
			_, err = c.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
			require.NoError(t, err)
		},
	})
	return &lwsHarness{harness: h, dyn: dyn}
}

func (h *lwsHarness) updateLWS(mutate func(u *unstructured.Unstructured)) {
	h.t.Helper()
	c := h.dyn.Resource(LeaderWorkerSetResource()).Namespace(ns)
	u, err := c.Get(context.Background(), "llm", metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(u)
	_, err = c.Update(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

func (h *lwsHarness) deletePod(name string) {
	h.t.Helper()
	require.NoError(h.t, h.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

// awaitIdleAfterNth waits until the run loop went idle after the nth event
// that satisfies pred (or Wait returned).
func (h *lwsHarness) awaitIdleAfterNth(what string, n int, pred func(rollout.Event) bool) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		if !h.running() {
			return true
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		seen := 0
		for i, e := range h.events {
			if !pred(e) {
				continue
			}
			if seen++; seen == n {
				return slices.ContainsFunc(h.idles, func(sent int) bool { return sent > i })
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "waiting for the loop to go idle after %s; events:\n%s", what, h.eventLines())
}

// requireLWSFailure checks a failed wait on the LeaderWorkerSet: its
// outcome, error and a diagnosis of llm with verdict v.
func requireLWSFailure(t *testing.T, res Result, err error, v rollout.Verdict) *rollout.Diagnosis {
	t.Helper()
	var rfe *RolloutFailedError
	require.ErrorAs(t, err, &rfe)
	require.ErrorIs(t, err, ErrFailed)
	assert.Equal(t, OutcomeFailed, res.Outcome)
	require.NotNil(t, res.Diagnosis)
	assert.Equal(t, v, res.Diagnosis.Verdict)
	assert.Equal(t, "leaderworkerset.leaderworkerset.x-k8s.io/llm", res.Diagnosis.Object)
	require.Len(t, res.Objects, 2)
	assert.Equal(t, rollout.StatusFailed, res.Objects[1].Status)
	assert.Contains(t, err.Error(), "rollout of leaderworkerset.leaderworkerset.x-k8s.io/llm failed: ")
	return res.Diagnosis
}

// isLLM selects the events of the LeaderWorkerSet.
func isLLM(pred func(rollout.Event) bool) func(rollout.Event) bool {
	return func(e rollout.Event) bool { return e.Object.Kind == "LeaderWorkerSet" && e.Rollout != nil && pred(e) }
}

// watchedLWS waits until the watcher judged the LeaderWorkerSet's pods of
// revision rev once.
func (h *lwsHarness) watchedLWS(rev string) {
	h.t.Helper()
	h.awaitIdleAfter("the LeaderWorkerSet at "+rev, isLLM(func(e rollout.Event) bool { return e.Rollout.UpdateRevision == rev }))
}

func TestLeaderWorkerSetRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(u *unstructured.Unstructured)
		done   bool
		msg    string
	}{
		{"spec not observed", func(u *unstructured.Unstructured) { u.SetGeneration(3) }, false, "Waiting for leaderworkerset spec update to be observed..."},
		{"a group not updated", func(*unstructured.Unstructured) {}, false, "Waiting for rolling update to finish: 1 out of 2 groups updated..."},
		{"updated, a group not ready", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(2), "status", "updatedReplicas")
		}, false, "Waiting for 1 groups to be ready..."},
		{"a surge group left", func(u *unstructured.Unstructured) {
			lwsAvailableNow(u)
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "replicas")
		}, false, "Waiting for 1 surge groups to be removed..."},
		{"counts right, not Available yet", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(2), "status", "updatedReplicas")
			_ = unstructured.SetNestedField(u.Object, int64(2), "status", "readyReplicas")
		}, false, "Waiting for the leaderworkerset to be Available..."},
		{"Available of an older generation", func(u *unstructured.Unstructured) {
			lwsAvailableNow(u)
			u.SetGeneration(3)
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "observedGeneration")
		}, false, "Waiting for the leaderworkerset to be Available..."},
		{"rolled out", lwsAvailableNow, true, "leaderworkerset rolled out: 2 groups updated and ready"},
		{"replicas unset is 1", func(u *unstructured.Unstructured) {
			lwsAvailableNow(u)
			unstructured.RemoveNestedField(u.Object, "spec", "replicas")
			_ = unstructured.SetNestedField(u.Object, int64(1), "status", "replicas")
		}, true, "leaderworkerset rolled out: 1 groups updated and ready"},
		{"no observedGeneration (older controllers)", func(u *unstructured.Unstructured) {
			lwsAvailableNow(u)
			unstructured.RemoveNestedField(u.Object, "status", "observedGeneration")
		}, true, "leaderworkerset rolled out: 2 groups updated and ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testLWS()
			tc.mutate(u)
			done, msg, err := LeaderWorkerSetRolledOut(u)
			require.NoError(t, err)
			assert.Equal(t, tc.done, done)
			assert.Equal(t, tc.msg, msg)
		})
	}
	_, _, err := LeaderWorkerSetRolledOut(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}, "status": "broken"}})
	assert.Error(t, err)
}

func TestIsLWSPodOf(t *testing.T) {
	for name, want := range map[string]bool{"llm-0": true, "llm-12": true, "llm-1-3": true, "llm-": false, "llm-a": false, "llm-1-x": false, "llmx-1": false, "llm-1-2-3": false} {
		assert.Equal(t, want, isLWSPodOf(name, "llm"), name)
	}
}

// TestRolloutWatcherLWSSucceeds: the progress counts groups and names the
// current revision's pods only; done once updated, ready and Available.
func TestRolloutWatcherLWSSucceeds(t *testing.T) {
	h := startLWSHarness(t, RolloutOptions{}, testLWS(), nil, testLeaderSts("new"),
		testLWSPod("0", "0", "old", "a", running("vllm", 0)), testLWSPod("0", "1", "old", "a", running("vllm", 0)),
		testLWSPod("1", "0", "new", "a", running("vllm", 0)), testLWSPod("1", "1", "new", "a", running("vllm", 0)))
	h.watchedLWS("new")
	first := h.await("the pods", isLLM(func(e rollout.Event) bool { return len(e.Rollout.Pods) == 2 }))
	assert.Equal(t, []string{"llm-1", "llm-1-1"}, []string{first.Rollout.Pods[0].Pod, first.Rollout.Pods[1].Pod}, "the current revision's pods only")
	assert.Equal(t, "Waiting for rolling update to finish: 1 out of 2 groups updated...", first.Message)
	assert.Equal(t, &rollout.RolloutProgress{LeaderWorkerSet: "llm", UpdateRevision: "new",
		Desired: 2, Updated: 1, Ready: 1, Available: 1, Verdict: rollout.VerdictProgressing, Pods: first.Rollout.Pods}, first.Rollout)
	assert.True(t, h.running())

	h.updateLWS(lwsAvailableNow)
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
	require.Len(t, res.Objects, 2)
	assert.Equal(t, rollout.StatusCurrent, res.Objects[1].Status)
	assert.Equal(t, "leaderworkerset rolled out: 2 groups updated and ready", res.Objects[1].Message)
	last := h.await("rolled out", isLLM(func(e rollout.Event) bool { return e.Rollout.Verdict == rollout.VerdictRolledOut }))
	assert.Contains(t, eventLine(last), "leaderworkerset.leaderworkerset.x-k8s.io/llm: 2/2 updated, 2 ready, 2 available (update revision new): rolled out")
}

// TestRolloutWatcherLWSGroupRecreated: a crash of the current revision's
// worker never reaches CrashLoopBackOff: the LWS controller deletes the
// group and recreates it. The log of each termination is read while the
// pod exists; the second recreation of the group fails the rollout, with
// that log (not the log of the pod now holding the name); an old
// revision's pods are not judged as the current ones.
func TestRolloutWatcherLWSGroupRecreated(t *testing.T) {
	var mu sync.Mutex
	reads := 0
	logs := func(o *corev1.PodLogOptions) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return fmt.Sprintf("INFO starting\nRuntimeError: worker died (read %d, previous %v)\n", reads, o.Previous), nil
	}
	crashed := corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://a/0")}}
	h := startLWSHarness(t, RolloutOptions{}, testLWS(), logs, testLeaderSts("new"),
		testLWSPod("0", "0", "old", "a", running("vllm", 0)), testLWSPod("0", "1", "old", "a", running("vllm", 0)))
	h.watchedLWS("new")

	for i, uid := range []string{"a", "b"} {
		h.createPod(testLWSPod("1", "0", "new", uid, running("vllm", 0)))
		// The worker's container ended (exit 1), not restarted yet.
		worker := testLWSPod("1", "1", "new", uid, *crashed.DeepCopy())
		worker.Status.ContainerStatuses[0].State.Terminated.ContainerID = "sim://" + uid
		h.createPod(worker)
		h.awaitIdleAfterNth("the termination of "+uid, i+1, h.warned("pod llm-1-1 container vllm: Error: Error, exit code 1"))
		require.True(t, h.running(), "recreation %d is not a verdict yet", i)
		h.deletePod("llm-1")
		h.deletePod("llm-1-1")
	}
	// The group's third leader: its second recreation.
	h.createPod(testLWSPod("1", "0", "new", "c", running("vllm", 0)))
	res, err := h.result()
	d := requireLWSFailure(t, res, err, rollout.VerdictGroupRecreated)
	assert.Equal(t, "leaderworkerset.leaderworkerset.x-k8s.io/llm", d.Object)
	assert.Equal(t, "RecreateGroup", d.Reason)
	assert.Equal(t, "llm-1-1", d.Pod)
	assert.Equal(t, "vllm", d.Container)
	assert.Equal(t, int32(1), d.ExitCode)
	assert.Contains(t, d.Message, "group 1 recreated 2 times (restartPolicy RecreateGroupOnPodRestart)")
	assert.Contains(t, d.Message, "last termination: Error, exit code 1")
	mu.Lock()
	total := reads
	mu.Unlock()
	require.NotEmpty(t, d.LogTail)
	assert.Equal(t, "RuntimeError: worker died (read 2, previous false)", d.LogTail[len(d.LogTail)-1],
		"the log read at the last termination, of its instance (the current one: not restarted yet)")
	assert.Equal(t, 2, total, "one log read per termination, none more for the diagnosis")
	assert.Contains(t, d.LogNote, "read at its termination")
	require.NotEmpty(t, d.Hints)
	assert.Contains(t, d.Hints[0], "kubectl describe leaderworkerset.leaderworkerset.x-k8s.io/llm -n "+ns)
	for _, hint := range d.Hints {
		assert.NotContains(t, hint, "--previous", "the pod that crashed is gone")
	}
}

// TestRolloutWatcherLWSVerdicts: the pod verdicts apply to the current
// revision's pods; an old revision's failing pod is a warning.
func TestRolloutWatcherLWSVerdicts(t *testing.T) {
	t.Run("a decisive cause at the first termination", func(t *testing.T) {
		logs := func(*corev1.PodLogOptions) (string, error) {
			return "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB\n", nil
		}
		crashed := corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://x/0")}}
		h := startLWSHarness(t, RolloutOptions{}, testLWS(), logs, testLeaderSts("new"),
			testLWSPod("1", "0", "new", "a", crashed), testLWSPod("1", "1", "new", "a", running("vllm", 0)))
		res, err := h.result()
		d := requireLWSFailure(t, res, err, rollout.VerdictKnownCause)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.Equal(t, "llm-1", d.Pod)
		assert.Equal(t, "leaderworkerset.leaderworkerset.x-k8s.io/llm", d.Object)
	})
	t.Run("OOMKilled at once, with the log read at the termination", func(t *testing.T) {
		var mu sync.Mutex
		reads := 0
		logs := func(*corev1.PodLogOptions) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return "INFO loading weights\n", nil
		}
		oom := corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("OOMKilled", 137, "sim://x/0")}}
		h := startLWSHarness(t, RolloutOptions{}, testLWS(), logs, testLeaderSts("new"),
			testLWSPod("1", "0", "new", "a", running("vllm", 0)), testLWSPod("1", "1", "new", "a", oom))
		res, err := h.result()
		d := requireLWSFailure(t, res, err, rollout.VerdictOOMKilled)
		assert.Equal(t, "llm-1-1", d.Pod)
		assert.Equal(t, []string{"INFO loading weights"}, d.LogTail)
		assert.Contains(t, d.LogNote, "read at its termination")
		mu.Lock()
		assert.Equal(t, 1, reads, "one read, at the termination")
		mu.Unlock()
	})
	t.Run("an old revision's crash is a warning", func(t *testing.T) {
		h := startLWSHarness(t, RolloutOptions{}, testLWS(), nil, testLeaderSts("new"),
			testLWSPod("0", "0", "old", "a", crashLoopStatus(3)), testLWSPod("1", "0", "new", "a", running("vllm", 0)))
		h.awaitIdleAfter("the warning", h.warned("pod llm-0 (revision old) container vllm: CrashLoopBackOff"))
		assert.True(t, h.running(), "not a verdict")
	})
	t.Run("the revision is known only once the generation is observed", func(t *testing.T) {
		lws := testLWS()
		lws.SetGeneration(3)
		h := startLWSHarness(t, RolloutOptions{}, lws, nil, testLeaderSts("new"),
			testLWSPod("1", "0", "new", "a", crashLoopStatus(3)))
		h.awaitIdleAfter("the first progress", isLLM(func(e rollout.Event) bool {
			return strings.Contains(e.Message, "spec update to be observed")
		}))
		assert.True(t, h.running(), "the leader StatefulSet's revision may be the previous generation's")
		h.updateLWS(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "observedGeneration")
		})
		res, err := h.result()
		d := requireLWSFailure(t, res, err, rollout.VerdictCrashLoop)
		assert.Equal(t, "llm-1", d.Pod)
	})
}

// TestRolloutWatcherLWSTimeout: the timeout's diagnosis names the
// LeaderWorkerSet and its current revision's pod not ready.
func TestRolloutWatcherLWSTimeout(t *testing.T) {
	p := testLWSPod("1", "0", "new", "a", running("vllm", 0))
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	h := startLWSHarnessWait(t, RolloutOptions{}, Options{Timeout: 30 * time.Second}, testLWS(), nil, testLeaderSts("new"), p)
	h.awaitIdleAfter("the pod starting", isLLM(func(e rollout.Event) bool { return len(e.Rollout.Pods) == 1 }))
	require.Eventually(t, func() bool { return h.clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	h.clock.Step(31 * time.Second)
	res, err := h.result()
	require.ErrorIs(t, err, ErrTimeout)
	require.NotNil(t, res.Diagnosis)
	d := res.Diagnosis
	assert.Equal(t, rollout.VerdictTimeout, d.Verdict)
	assert.Equal(t, "leaderworkerset.leaderworkerset.x-k8s.io/llm", d.Object)
	assert.Equal(t, "llm-1", d.Pod)
	assert.Contains(t, d.Message, "waiting for rollout to finish: Waiting for rolling update to finish: 1 out of 2 groups updated...")
	assert.Contains(t, d.Message, "container vllm is running but not ready")
	assert.Contains(t, err.Error(), "rollout of leaderworkerset.leaderworkerset.x-k8s.io/llm timed out after 30s: ")
}

// TestRolloutWatcherLWSWithoutDynamicClient: without a dynamic client a
// LeaderWorkerSet is another object, for the other waiter.
func TestRolloutWatcherLWSWithoutDynamicClient(t *testing.T) {
	w := NewRolloutWatcher(fake.NewClientset(), nil, RolloutOptions{})
	_, err := w.Wait(context.Background(), []*unstructured.Unstructured{testLWS()}, Options{Namespace: ns})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no waiter for objects other than")
}

// TestLWSCaptureKeepsTheCrashWithALog: the LWS controller deletes a group
// at its first crash, so the log of a second pod that ended with it may no
// longer be served: the group's last crash stays the one whose log was
// read; a later crash with a log replaces it, as does any crash when the
// earlier one had no log either.
func TestLWSCaptureKeepsTheCrashWithALog(t *testing.T) {
	lw := &lwsWatch{crashes: map[string]*podFinding{}}
	term := terminated("Error", 1, "sim://x/0")
	leader, worker, again := testLWSPod("1", "0", "new", "a"), testLWSPod("1", "1", "new", "a"), testLWSPod("1", "1", "new", "b")
	read := &capturedLog{container: "vllm", lines: []string{"RuntimeError: leader died"}}
	gone := &capturedLog{container: "vllm", err: errors.New(`pods "llm-1-1" not found`)}

	lw.capture(leader, "vllm", false, term, read)
	lw.capture(worker, "vllm", false, term, gone)
	require.Equal(t, "llm-1", lw.crashes["1"].Pod.Name, "the crash with a log stays")

	lw.capture(again, "vllm", false, term, &capturedLog{container: "vllm", lines: []string{"RuntimeError: worker died"}})
	require.Equal(t, "llm-1-1", lw.crashes["1"].Pod.Name, "a later crash with a log replaces it")
	assert.Equal(t, []string{"RuntimeError: worker died"}, lw.crashes["1"].log.lines)

	lw = &lwsWatch{crashes: map[string]*podFinding{}}
	lw.capture(leader, "vllm", false, term, &capturedLog{container: "vllm", err: errors.New("gone")})
	lw.capture(worker, "vllm", false, term, gone)
	assert.Equal(t, "llm-1-1", lw.crashes["1"].Pod.Name, "no log either way: the last crash")
}
