package wait

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

func readyPod(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	p.Status.ContainerStatuses[0].Ready = true
	return p
}

// TestCanaryGoal checks a canary phase's wait: it ends when the canary
// pods are Ready (and not before Until is closed), names them, never
// claims the rollout done, and fails on a canary restart beyond the
// allowed number.
func TestCanaryGoal(t *testing.T) {
	t.Run("ends when the canary pods are Ready and Until is closed", func(t *testing.T) {
		until := make(chan struct{})
		h := startHarness(t, harnessOptions{
			wait:  Options{Canary: &CanaryGoal{Pods: map[string]int32{ns + "/chat": 1}, Until: until}},
			extra: []*unstructured.Unstructured{toUnstructured(t, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "cfg"}})},
		})
		p := testPod(h.newRS, "a", running("vllm", 0))
		h.createPod(p)
		h.progressed()
		h.updatePod(readyPod(p))
		h.awaitIdleAfter("the pod Ready", func(e rollout.Event) bool {
			return e.Rollout != nil && len(e.Rollout.Pods) == 1 && e.Rollout.Pods[0].Phase == rollout.PhaseReady
		})
		assert.True(t, h.running(), "held until Until is closed")
		close(until)
		res, err := h.result()
		require.NoError(t, err)
		assert.Equal(t, OutcomeCurrent, res.Outcome)
		assert.Equal(t, []string{"chat-new-a"}, res.CanaryPods)
		require.Len(t, res.Objects, 1, "a canary phase waits for Deployments only")
		for _, e := range h.eventsCopy() {
			if e.Rollout != nil {
				assert.NotEqual(t, rollout.VerdictRolledOut, e.Rollout.Verdict, "a canary phase never reports the rollout done")
			}
		}
	})
	t.Run("waits for as many Ready canary pods as asked", func(t *testing.T) {
		h := startHarness(t, harnessOptions{wait: Options{Canary: &CanaryGoal{Pods: map[string]int32{ns + "/chat": 2}}}})
		a := testPod(h.newRS, "a", running("vllm", 0))
		h.createPod(readyPod(a))
		h.progressed()
		h.awaitIdleAfter("pod a Ready", func(e rollout.Event) bool {
			return e.Rollout != nil && len(e.Rollout.Pods) == 1 && e.Rollout.Pods[0].Phase == rollout.PhaseReady
		})
		assert.True(t, h.running(), "1 of 2 canary pods Ready")
		h.createPod(readyPod(testPod(h.newRS, "b", running("vllm", 0))))
		res, err := h.result()
		require.NoError(t, err)
		assert.Equal(t, []string{"chat-new-a", "chat-new-b"}, res.CanaryPods)
	})
	t.Run("one restart fails a canary (max restarts 0)", func(t *testing.T) {
		until := make(chan struct{})
		h := startHarness(t, harnessOptions{wait: Options{Canary: &CanaryGoal{Until: until}}})
		p := testPod(h.newRS, "a", running("vllm", 0))
		h.createPod(readyPod(p))
		h.progressed()
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://c/1")}}}
		h.updatePod(p)
		res, err := h.result()
		d := requireFailure(t, res, err, rollout.VerdictCanaryRestarted)
		assert.Equal(t, "chat-new-a", d.Pod)
		assert.Equal(t, int32(1), d.RestartCount)
		assert.Equal(t, int32(1), d.ExitCode)
	})
	t.Run("a restart within --canary-max-restarts is tolerated", func(t *testing.T) {
		h := startHarness(t, harnessOptions{wait: Options{Canary: &CanaryGoal{MaxRestarts: 1}}})
		p := testPod(h.newRS, "a", corev1.ContainerStatus{Name: "vllm", RestartCount: 1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://c/1")}})
		h.createPod(readyPod(p))
		h.progressed()
		res, err := h.result()
		require.NoError(t, err)
		assert.Equal(t, []string{"chat-new-a"}, res.CanaryPods)
	})
	t.Run("a held canary whose restart's log names a decisive cause fails at once", func(t *testing.T) {
		until := make(chan struct{})
		h := startHarness(t, harnessOptions{wait: Options{Canary: &CanaryGoal{MaxRestarts: 3, Until: until}},
			logs: func(*corev1.PodLogOptions) (string, error) { return gpuOOMLog, nil }})
		p := testPod(h.newRS, "a", running("vllm", 0))
		h.createPod(readyPod(p))
		h.progressed()
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://c/1")}}}
		h.updatePod(p)
		res, err := h.result()
		d := requireFailure(t, res, err, rollout.VerdictKnownCause)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.Equal(t, int32(1), d.RestartCount)
	})
}
