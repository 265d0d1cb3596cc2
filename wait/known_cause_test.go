// Tests of VerdictKnownCause: a decisive cause in the log of a container's
// first termination fails the rollout at once; other causes wait for
// MaxRestarts; WaitOnKnownCause restores the old rule.

package wait

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// fixtureLog returns a fixture of internal/vllmcause/testdata/causes as a
// log.
func fixtureLog(t *testing.T, name string) func(*corev1.PodLogOptions) (string, error) {
	t.Helper()
	log := strings.Join(fixture(t, name), "\n") + "\n"
	return func(*corev1.PodLogOptions) (string, error) { return log, nil }
}

func (h *harness) logReads() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.logs)
}

// TestKnownCauseFailsAtFirstCrash: a new pod whose container terminated
// once, with a vLLM CUDA OOM in its previous log, fails the rollout at
// once with the cause and the restart count at that moment.
func TestKnownCauseFailsAtFirstCrash(t *testing.T) {
	h := startHarness(t, harnessOptions{logs: fixtureLog(t, "gpu-oom-weights.log")})
	h.progressed()
	p := testPod(h.newRS, "a", crashLoopStatus(1))
	h.createPod(p)
	res, err := h.result()
	d := requireFailure(t, res, err, rollout.VerdictKnownCause)
	assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
	assert.Contains(t, d.Evidence, "CUDA out of memory")
	assert.Equal(t, int32(1), d.RestartCount)
	assert.Equal(t, int32(1), d.ExitCode)
	assert.Equal(t, "CrashLoopBackOff", d.Reason)
	assert.Equal(t, "chat-new-a", d.Pod)
	assert.Contains(t, d.Message, "the log names cause gpu-oom")
	assert.NotEmpty(t, d.Hints)
	assert.Contains(t, d.Summary(), "CrashLoopBackOff (cause gpu-oom)")
	require.Len(t, h.logs, 1, "the termination's log, read once: the diagnosis shows it")
	assert.Contains(t, strings.Join(d.LogTail, "\n"), "CUDA out of memory")
	assert.Len(t, d.LogTail, int(DefaultLogTailLines))
	assert.Empty(t, d.LogNote, "the previous instance's log, as the diagnosis reads it")
	assert.True(t, h.logs[0].Previous, "the container restarted: its previous instance's log")
	assert.Equal(t, int64(causeLogLines), *h.logs[0].TailLines)
	assert.Equal(t, causeLogBytes, *h.logs[0].LimitBytes)
	for _, e := range h.eventsCopy() {
		if e.Rollout != nil {
			assert.NotContains(t, e.Rollout.Warning, "restarts 1/", "no restart waited for")
		}
	}
	last := h.eventsCopy()[len(h.eventsCopy())-1]
	require.NotNil(t, last.Rollout)
	assert.Equal(t, rollout.VerdictKnownCause, last.Rollout.Verdict)
	assert.Equal(t, vllmcause.CauseGPUOOM, last.Rollout.Cause)
}

// TestKnownCauseTerminatedNotRestarted: a container terminated and not
// restarted yet (restartCount 0): its current log is the one read.
func TestKnownCauseTerminatedNotRestarted(t *testing.T) {
	h := startHarness(t, harnessOptions{logs: fixtureLog(t, "model-auth-gated.log")})
	h.progressed()
	h.createPod(testPod(h.newRS, "a", corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://c/0")}}))
	res, err := h.result()
	d := requireFailure(t, res, err, rollout.VerdictKnownCause)
	assert.Equal(t, vllmcause.CauseModelAuth, d.Cause)
	assert.Equal(t, "Error", d.Reason)
	assert.Equal(t, int32(0), d.RestartCount)
	require.Len(t, h.logs, 1)
	assert.False(t, h.logs[0].Previous, "not restarted: the current instance is the one that ended")
	assert.Equal(t, "the log of the current instance of container vllm", d.LogNote)
	assert.NotEmpty(t, d.LogTail)
}

// TestKnownCauseNotDecisiveWaits: an nccl or unknown cause waits for
// MaxRestarts, and the log of one termination is read once however many
// times the pod is observed.
func TestKnownCauseNotDecisiveWaits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		log   string
		cause vllmcause.Cause
	}{
		{"nccl", "nccl-p2p.log", vllmcause.CauseNCCL},
		{"unknown", "unknown-keyerror.log", vllmcause.CauseUnknown},
		{"shm", "shm-nccl-segment.log", vllmcause.CauseShm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, harnessOptions{logs: fixtureLog(t, tc.log)})
			h.progressed()
			p := testPod(h.newRS, "a", crashLoopStatus(1))
			h.createPod(p)
			h.awaitIdleAfter("the first restart", h.warned("CrashLoopBackOff (restarts 1/2)"))
			require.True(t, h.running(), "one restart with a %s log is not a verdict", tc.cause)
			for i := range 3 {
				p.Annotations = map[string]string{"touch": string(rune('a' + i))}
				h.updatePod(p)
			}
			h.createEvent(testEvent("ev1", "Pod", p.Name, p.UID, "Warning", "BackOff", "Back-off restarting failed container", t0))
			h.awaitIdleAfter("the BackOff event", h.warned("Warning BackOff"))
			require.True(t, h.running())
			assert.Equal(t, 1, h.logReads(), "one read per termination")
			p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
			h.updatePod(p)
			res, err := h.result()
			d := requireFailure(t, res, err, rollout.VerdictCrashLoop)
			assert.Equal(t, tc.cause, d.Cause)
			assert.Equal(t, int32(2), d.RestartCount)
		})
	}
}

// TestKnownCauseWaitOnKnownCause: with WaitOnKnownCause
// (--fail-on-known-cause=false) a decisive cause waits for MaxRestarts,
// and no log is read before the verdict.
func TestKnownCauseWaitOnKnownCause(t *testing.T) {
	h := startHarness(t, harnessOptions{rollout: RolloutOptions{WaitOnKnownCause: true}, logs: fixtureLog(t, "gpu-oom-weights.log")})
	h.progressed()
	p := testPod(h.newRS, "a", crashLoopStatus(1))
	h.createPod(p)
	h.awaitIdleAfter("the first restart", h.warned("CrashLoopBackOff (restarts 1/2)"))
	require.True(t, h.running(), "the old rule: one restart is not a verdict")
	assert.Zero(t, h.logReads())
	p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
	h.updatePod(p)
	res, err := h.result()
	d := requireFailure(t, res, err, rollout.VerdictCrashLoop)
	assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
	assert.Equal(t, int32(2), d.RestartCount)
}

// TestKnownCauseJobPod: a hook Job's pod whose first termination's log
// names a decisive cause fails the Job at once, before its backoffLimit
// or restarts.
func TestKnownCauseJobPod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		pod    *corev1.Pod
	}{
		{"OnFailure, restarted once", corev1.RestartPolicyOnFailure, testJobPod("a", corev1.PodRunning, crashLoopStatus(1))},
		{"Never, failed", corev1.RestartPolicyNever, testJobPod("a", corev1.PodFailed,
			corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://a/0")}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startRunHarness(t, testJob(tc.policy), func(*corev1.PodLogOptions) (string, error) { return gpuOOMLog, nil })
			tc.pod.Spec.Containers[0].Name = "vllm"
			h.createPod(tc.pod)
			d := requireRunFailure(t, h, rollout.VerdictKnownCause, "job.batch/migrate")
			assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
			assert.Equal(t, "migrate-a", d.Pod)
			assert.Equal(t, tc.pod.Status.ContainerStatuses[0].RestartCount, d.RestartCount)
			assert.Contains(t, d.Evidence, "CUDA out of memory")
		})
	}
}

// TestKnownCauseBarePod: a bare Pod that runs to completion fails with
// the known cause rather than waiting for its phase.
func TestKnownCauseBarePod(t *testing.T) {
	pod := testBarePod(corev1.RestartPolicyOnFailure)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("test", "CrashLoopBackOff", 1, terminated("Error", 1, "sim://t/0"))}
	h := startRunHarness(t, pod, fixtureLog(t, "kv-cache-no-blocks.log"))
	d := requireRunFailure(t, h, rollout.VerdictKnownCause, "pod/chat-test")
	assert.Equal(t, vllmcause.CauseKVCache, d.Cause)
	assert.Equal(t, int32(1), d.RestartCount)
}
