//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// causeFault is a fault class of the local cluster and what the diagnosis
// of a revision running it must say.
type causeFault struct {
	class    string // in the image tag
	cause    string
	evidence string   // substring of failure.evidence
	hints    []string // substrings of failure.hints: the setting to change
	exitCode int32
}

// The fault classes, deployed with rolloutValues: the built-in chart with
// 1 GPU, --gpu-memory-utilization 0.9, model Qwen/Qwen3-0.6B, no /dev/shm
// volume, no Hugging Face token.
var causeFaults = []causeFault{
	{"fault-gpumem", "gpu-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
		[]string{"lower `--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.9) or `--max-model-len` (model.maxModelLen",
			"raise `gpu` to 2 (resources.gpu, now 1) and `--tensor-parallel-size` to 2"}, 1},
	{"fault-kvcache", "kv-cache", "KV cache is needed, which is larger than the available KV cache memory",
		[]string{"lower `--max-model-len` (model.maxModelLen, not set: the model's full context) to at most 34480"}, 1},
	{"fault-hfauth", "model-auth", "Access to model meta-llama/Llama-3.1-8B-Instruct is restricted",
		[]string{"no Hugging Face token", "hfToken.secretName"}, 1},
	{"fault-model404", "model-not-found", "Invalid repository ID or local directory specified: 'Qwen/Qwen3-0.7B'",
		[]string{"`--model` is Qwen/Qwen3-0.6B (model.name)"}, 1},
	{"fault-shm", "shm", "Error while creating shared memory segment /dev/shm/nccl-",
		[]string{"nothing is mounted at /dev/shm", "shm.enabled"}, 1},
	{"fault-nccl", "nccl", "ncclUnhandledCudaError: Call to CUDA function failed.",
		[]string{"NCCL_DEBUG=INFO", "NCCL_P2P_DISABLE=1"}, 1},
	{"fault-bf16", "dtype-unsupported", "Bfloat16 is only supported on GPUs with compute capability of at least 8.0",
		[]string{"add `--dtype=half` to extraArgs"}, 1},
	{"fault-tp", "tensor-parallel", "Total number of attention heads (64) must be divisible by tensor parallel size (3)",
		[]string{"`--tensor-parallel-size` (model.tensorParallelSize, now 1) must divide the model's 64 attention heads"}, 1},
	{"fault-driver", "cuda-driver", "The NVIDIA driver on your system is too old",
		[]string{"image.tag"}, 1},
	{"fault-startup", "startup-probe", "Container server failed startup probe, will be restarted",
		[]string{"killed the container after its budget of 30m0s (failureThreshold 180 × periodSeconds 10 + initialDelaySeconds 0)",
			"probes.startup.failureThreshold (now 180)"}, 137},
	{"crash", "unknown", "", []string{"kubectl logs", "--previous"}, 1},
}

// progressTimes are the moments of a failed, rolled back deploy, read
// from its --progress json lines.
type progressTimes struct {
	firstSignal time.Time // the first warning about a new pod
	verdict     time.Time // the failure verdict
	rolledBack  time.Time // the rollback revision deployed
	failed      *release.ProgressEvent
}

func readProgress(t *testing.T, stderr string) progressTimes {
	t.Helper()
	var pt progressTimes
	for _, ev := range progressEvents(stderr) {
		switch {
		case ev.Phase == release.PhaseWait && ev.Revision == 2 && ev.Rollout != nil && ev.Rollout.Warning != "" && pt.firstSignal.IsZero():
			pt.firstSignal = ev.Time
		case ev.Phase == release.PhaseWait && ev.Revision == 2 && ev.Rollout != nil && ev.Rollout.Verdict.Failed() && pt.failed == nil:
			pt.verdict, pt.failed = ev.Time, &ev
		case ev.Phase == release.PhaseDone && ev.Status == string(storage.StatusDeployed) && strings.HasPrefix(ev.Message, "Rollback to"):
			pt.rolledBack = ev.Time
		}
	}
	require.NotNil(t, pt.failed, "no failure verdict in the progress:\n%s", stderr)
	require.False(t, pt.rolledBack.IsZero(), "no rollback deployed in the progress:\n%s", stderr)
	if pt.firstSignal.IsZero() {
		pt.firstSignal = pt.verdict
	}
	return pt
}

// TestCausesFaultClasses: every fault class of a bad revision 2 is rolled
// back (exit 3) with its cause, evidence and a hint naming the setting to
// change, in the result document, the release record and the progress;
// the plain crash class is unknown, with the generic hints. Reading the
// logs keeps detection and rollback as quick as the crash class'.
func TestCausesFaultClasses(t *testing.T) {
	shareCluster(t, 4)
	type timing struct {
		class               string
		detection, rollback time.Duration
	}
	var timings []timing
	for _, fault := range causeFaults {
		t.Run(fault.class, func(t *testing.T) {
			f := newRelFixture(t)
			f.rolloutInstall(t)
			r := f.rolloutDeploy(t, "--set", "image.tag=v0.11.1-"+fault.class, "-o", "json", "--progress", "json")
			require.Equal(t, 3, r.code, "%s", r)
			res := result(t, r)
			fl := res.Failure
			require.NotNil(t, fl)
			pt := readProgress(t, r.stderr)
			checkRestartRule(t, fault.cause, fl, pt, r.stderr)
			assert.Equal(t, fault.exitCode, fl.ExitCode)
			assert.Equal(t, fault.cause, string(fl.Cause))
			if fault.evidence == "" {
				assert.Empty(t, fl.Evidence)
			} else {
				assert.Contains(t, fl.Evidence, fault.evidence)
			}
			hints := strings.Join(fl.Hints, "\n")
			for _, h := range fault.hints {
				assert.Contains(t, hints, h)
			}

			revs := f.history(t)
			require.Len(t, revs, 3)
			if assert.NotNil(t, revs[1].Failure, "revision 2's diagnosis is recorded") {
				assert.Equal(t, fault.cause, string(revs[1].Failure.Cause))
				assert.Equal(t, fl.Evidence, revs[1].Failure.Evidence)
				assert.Equal(t, fl.Hints, revs[1].Failure.Hints)
			}

			assert.Equal(t, fault.cause, string(pt.failed.Rollout.Cause), "the failure's progress line")
			assert.Equal(t, fl.Evidence, pt.failed.Rollout.Evidence)
			assert.Equal(t, fl.Hints, pt.failed.Rollout.Hints)
			tm := timing{fault.class, pt.verdict.Sub(pt.firstSignal), pt.rolledBack.Sub(pt.verdict)}
			timings = append(timings, tm)
			t.Logf("%s: cause %s, detection %s, rollback %s; evidence %q", fault.class, fl.Cause,
				tm.detection.Round(100*time.Millisecond), tm.rollback.Round(100*time.Millisecond), fl.Evidence)
			assert.Less(t, tm.rollback, 5*time.Second, "verdict to rollback deployed")
		})
	}
	var crash time.Duration
	for _, tm := range timings {
		if tm.class == "crash" {
			crash = tm.detection
		}
	}
	for _, tm := range timings {
		// fault-startup's container runs 1.5 s before its kill, a crash's 1 s.
		assert.Less(t, tm.detection, crash+3*time.Second, "%s: detection %s, crash's %s", tm.class, tm.detection, crash)
	}
}

// checkRestartRule checks --fail-on-known-cause's rule (the default) on
// the failure of a revision whose log names cause: a decisive cause fails
// the rollout at the first termination (verdict KnownCause, restartCount
// at most 1, no warning of a restart waited for before the verdict);
// others wait for --max-restarts (2).
func checkRestartRule(t *testing.T, cause string, fl *rollout.Diagnosis, pt progressTimes, stderr string) {
	t.Helper()
	if !vllmcause.Cause(cause).Decisive() {
		assert.Equal(t, "CrashLoopBackOff", fl.Reason)
		assert.Equal(t, rollout.VerdictCrashLoop, fl.Verdict)
		assert.GreaterOrEqual(t, fl.RestartCount, int32(2), "--max-restarts 2")
		return
	}
	assert.Equal(t, rollout.VerdictKnownCause, fl.Verdict)
	assert.Contains(t, []string{"Error", "CrashLoopBackOff"}, fl.Reason)
	assert.LessOrEqual(t, fl.RestartCount, int32(1), "failed at the first termination")
	assert.Contains(t, fl.Message, "the log names cause "+cause)
	assert.Equal(t, rollout.VerdictKnownCause, pt.failed.Rollout.Verdict)
	for _, ev := range progressEvents(stderr) {
		if ev.Phase == release.PhaseWait && ev.Revision == 2 && ev.Rollout != nil {
			assert.NotContains(t, ev.Rollout.Warning, "(restarts ", "no restart waited for: %s", ev.Rollout.Warning)
		}
	}
}

// TestCausesFailOnKnownCauseFalse: --fail-on-known-cause=false restores
// the old rule: a fault-gpumem revision waits for --max-restarts, and is
// then rolled back with the same cause.
func TestCausesFailOnKnownCauseFalse(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	f.rolloutInstall(t)
	r := f.rolloutDeploy(t, "--set", "image.tag=v0.11.1-fault-gpumem", "--fail-on-known-cause=false", "-o", "json", "--progress", "json")
	require.Equal(t, 3, r.code, "%s", r)
	fl := result(t, r).Failure
	require.NotNil(t, fl)
	assert.Equal(t, rollout.VerdictCrashLoop, fl.Verdict)
	assert.Equal(t, "CrashLoopBackOff", fl.Reason)
	assert.GreaterOrEqual(t, fl.RestartCount, int32(2), "--max-restarts 2")
	assert.Equal(t, "gpu-oom", string(fl.Cause))
	assert.Contains(t, fl.Evidence, "CUDA out of memory")
	pt := readProgress(t, r.stderr)
	assert.Equal(t, rollout.VerdictCrashLoop, pt.failed.Rollout.Verdict)
}

// TestCausesTextAndPhases: the plain progress shows a new pod's phases
// (Loading under its startup probe, with the budget left), the cause and
// hints after the failure line; the text result shows the cause and
// evidence; deploy warns before applying that --timeout is shorter than
// the startup probe's budget.
func TestCausesTextAndPhases(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	f.rolloutInstall(t)
	r := f.rolloutDeploy(t, "--set", "image.tag=v0.11.1-fault-startup")
	require.Equal(t, 3, r.code, "%s", r)
	assert.Contains(t, r.stderr, "preflight: warning: deployment/chat container server: --timeout 2m0s is shorter than the startup probe's budget of 30m0s")
	assert.Contains(t, r.stderr, "new pods: 1 Loading (startup probe: ")
	assert.Contains(t, r.stderr, "Warning Unhealthy: Startup probe failed: ")
	assert.Contains(t, r.stderr, "failed: CrashLoopBackOff (cause startup-probe): pod chat-")
	assert.Contains(t, r.stderr, "deployment/chat: cause: startup-probe: Normal Killing: Container server failed startup probe, will be restarted\n")
	assert.Contains(t, r.stderr, "deployment/chat: hint: the startup probe (GET :http/health) killed the container after its budget of 30m0s")
	assert.Contains(t, r.stdout, "  cause:     startup-probe\n")
	assert.Contains(t, r.stdout, "  evidence:  Normal Killing: Container server failed startup probe, will be restarted\n")
	assert.Contains(t, r.stdout, "  hints:\n    the startup probe (GET :http/health) killed the container")

	// Within the probe's budget, no warning.
	r = f.rolloutDeploy(t, "--set", "image.tag=v0.11.2", "--timeout", "31m")
	require.Equal(t, 0, r.code, "%s", r)
	assert.NotContains(t, r.stderr, "is shorter than the startup probe's budget")
}
