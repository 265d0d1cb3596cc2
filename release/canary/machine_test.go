package canary

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// canaryHarness drives a canaryRun on a fake clock: watch blocks like the
// watcher (until its until is closed, or fails when told), gate and
// promote are recorded.
type canaryHarness struct {
	clk      *testingclock.FakeClock
	run      *Machine
	mu       sync.Mutex
	events   []string
	watches  int
	gateRan  bool
	promoted bool
	failOn   int // the watch call (1-based) that fails
	gateExit int
}

func newCanaryHarness(o Options) *canaryHarness {
	h := &canaryHarness{clk: testingclock.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))}
	h.run = &Machine{
		Clock: h.clk, Opts: o, Report: NewReport(o), Tick: 15 * time.Second,
		Emit: func(phase, msg string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, phase+": "+msg)
		},
		Watch: func(ctx context.Context, until <-chan struct{}) (wait.Result, error) {
			h.mu.Lock()
			h.watches++
			n := h.watches
			h.mu.Unlock()
			if n == h.failOn {
				return wait.Result{Outcome: wait.OutcomeFailed}, errors.New("pod chat-new-a: CrashLoopBackOff")
			}
			if until != nil {
				select {
				case <-until:
				case <-ctx.Done():
					return wait.Result{Outcome: wait.OutcomeCanceled}, ctx.Err()
				}
			}
			return wait.Result{Outcome: wait.OutcomeCurrent, CanaryPods: []string{"chat-new-a"}}, nil
		},
		Gate: func(ctx context.Context, pods []string) (*storage.GateResult, error) {
			h.mu.Lock()
			h.gateRan = true
			h.mu.Unlock()
			h.clk.Step(3 * time.Second)
			return &storage.GateResult{Command: "smoke", ExitCode: h.gateExit, DurationSeconds: 3, OutputTail: []string{"HTTP 503 from " + pods[0]}}, nil
		},
		Promote: func(context.Context) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.promoted = true
			return nil
		},
	}
	return h
}

// start runs the machine in the background.
func (h *canaryHarness) start(ctx context.Context) <-chan *rollout.Diagnosis {
	out := make(chan *rollout.Diagnosis, 1)
	go func() {
		_, f, err := h.run.Run(ctx)
		if err != nil && f == nil {
			f = &rollout.Diagnosis{Reason: "watch", Message: err.Error()}
		}
		out <- f
	}()
	return out
}

// holdTimers waits until the hold's timer and ticker wait on the clock.
func (h *canaryHarness) holdTimers(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return h.clk.HasWaiters() }, 5*time.Second, time.Millisecond)
}

func (h *canaryHarness) phases() []string {
	var out []string
	for _, p := range h.run.Report.Phases {
		out = append(out, p.Name)
	}
	return out
}

func (h *canaryHarness) eventLog() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.events, "\n")
}

func TestCanaryPhases(t *testing.T) {
	opts := Options{Count: intstr.FromInt32(1), Hold: time.Minute, Gate: "smoke", GateTimeout: time.Minute}

	t.Run("healthy: held, gate passes, promoted", func(t *testing.T) {
		h := newCanaryHarness(opts)
		done := h.start(context.Background())
		h.holdTimers(t)
		h.clk.Step(15 * time.Second)
		require.Eventually(t, func() bool { return strings.Contains(h.eventLog(), "holding 15s of 1m0s") }, 5*time.Second, time.Millisecond)
		h.clk.Step(45 * time.Second)
		f := <-done
		assert.Nil(t, f)
		assert.True(t, h.gateRan)
		assert.True(t, h.promoted)
		assert.Equal(t, []string{PhaseStarting, PhaseHolding, PhaseGate, PhasePromoting, PhaseRollout}, h.phases())
		assert.Equal(t, storage.CanaryPromoted, h.run.Report.Outcome)
		assert.Equal(t, []string{"chat-new-a"}, h.run.Report.Pods)
		assert.InDelta(t, 60, h.run.Report.Phases[1].DurationSeconds, 0.001, "the hold lasted a minute of the fake clock")
		assert.InDelta(t, 3, h.run.Report.Phases[2].DurationSeconds, 0.001)
		assert.Equal(t, 63*time.Second, h.run.Held, "hold and gate are not counted against --timeout")
	})

	t.Run("a canary failing during the hold is never promoted and the gate never runs", func(t *testing.T) {
		h := newCanaryHarness(opts)
		h.failOn = 2
		f := <-h.start(context.Background())
		require.NotNil(t, f)
		assert.Contains(t, f.Message, "CrashLoopBackOff")
		assert.False(t, h.gateRan)
		assert.False(t, h.promoted)
		assert.Equal(t, storage.CanaryFailed, h.run.Report.Outcome)
		assert.Equal(t, []string{PhaseStarting, PhaseHolding}, h.phases())
	})

	t.Run("a gate that exits 1 fails the canary with its output", func(t *testing.T) {
		h := newCanaryHarness(opts)
		h.gateExit = 1
		done := h.start(context.Background())
		h.holdTimers(t)
		h.clk.Step(time.Minute)
		f := <-done
		require.NotNil(t, f)
		assert.Equal(t, "CanaryGateFailed", f.Reason)
		assert.Contains(t, f.Message, `"smoke" exited 1`)
		assert.Equal(t, []string{"HTTP 503 from chat-new-a"}, f.LogTail)
		assert.False(t, h.promoted)
		assert.Equal(t, storage.CanaryFailed, h.run.Report.Outcome)
		require.NotNil(t, h.run.Report.Gate)
		assert.Equal(t, 1, h.run.Report.Gate.ExitCode)
	})

	t.Run("Ctrl-C during the hold: interrupted, not promoted", func(t *testing.T) {
		h := newCanaryHarness(opts)
		ctx, cancel := context.WithCancel(context.Background())
		done := h.start(ctx)
		h.holdTimers(t)
		cancel()
		f := <-done
		require.NotNil(t, f)
		assert.False(t, h.gateRan)
		assert.False(t, h.promoted)
		assert.Equal(t, storage.CanaryInterrupted, h.run.Report.Outcome)
	})

	t.Run("no hold, no gate: straight to promotion once the canary is Ready", func(t *testing.T) {
		h := newCanaryHarness(Options{Count: intstr.FromString("34%"), GateTimeout: time.Minute})
		assert.Nil(t, <-h.start(context.Background()))
		assert.Equal(t, []string{PhaseStarting, PhasePromoting, PhaseRollout}, h.phases())
		assert.Equal(t, "34%", h.run.Report.Count)
	})
}

func TestRunGate(t *testing.T) {
	env := GateEnv{Release: "chat", Namespace: "ml", Revision: 3, Pods: []string{"a", "b"}, Service: "chat"}
	t.Run("exit code and output, with the release in the environment", func(t *testing.T) {
		g, err := RunGate(context.Background(), `echo "$VLLMCTL_RELEASE $VLLMCTL_NAMESPACE $VLLMCTL_REVISION [$VLLMCTL_CANARY_PODS] $VLLMCTL_SERVICE"; echo oops >&2; exit 7`, env, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 7, g.ExitCode)
		assert.False(t, g.Passed())
		assert.Equal(t, []string{"chat ml 3 [a b] chat", "oops"}, g.OutputTail)
	})
	t.Run("a gate that hangs is killed at its timeout, children too", func(t *testing.T) {
		start := time.Now()
		g, err := RunGate(context.Background(), `sleep 30 & sleep 30; echo never`, env, 300*time.Millisecond)
		require.NoError(t, err)
		assert.True(t, g.TimedOut)
		assert.False(t, g.Passed())
		assert.Less(t, time.Since(start), 10*time.Second)
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := RunGate(ctx, `sleep 30`, env, time.Minute)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("exit 0 passes", func(t *testing.T) {
		g, err := RunGate(context.Background(), `true`, env, time.Minute)
		require.NoError(t, err)
		assert.True(t, g.Passed())
	})
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"1", "1", true}, {"34%", "34%", true}, {"100%", "100%", true},
		{"0", "", false}, {"-1", "", false}, {"0%", "", false}, {"101%", "", false}, {"x", "", false},
		{"99999999999999999999", "", false}, {"1.5", "", false}, {"%", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCount(tc.in)
			if !tc.ok {
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, exitcode.Invalid, ie.ExitCode())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.String())
		})
	}
}

// TestCanaryServeCheck: the serve check runs on the Ready canary pods
// while they are watched, before the hold: a pod that does not serve
// fails the canary there (NotServing), and neither the hold nor the gate
// runs; one that serves goes on to the hold.
func TestCanaryServeCheck(t *testing.T) {
	opts := Options{Count: intstr.FromInt32(1), Hold: time.Minute, Gate: "smoke", GateTimeout: time.Minute}
	for _, tc := range []struct {
		name    string
		serving bool
	}{{"not serving", false}, {"serving", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCanaryHarness(opts)
			var checked []string
			h.run.ServeTimeout = 5 * time.Second
			h.run.Serve = func(ctx context.Context, pods []string) (*rollout.ServeReport, *rollout.Diagnosis, error) {
				checked = append(checked, pods...)
				if tc.serving {
					return &rollout.ServeReport{Outcome: rollout.ServePassed, Pods: []rollout.ServePod{{Pod: pods[0], Outcome: rollout.ServePassed, Status: 200}}}, nil, nil
				}
				f := &rollout.Diagnosis{Reason: "NotServing", Verdict: rollout.VerdictNotServing, Pod: pods[0], Message: "pod chat-new-a is Ready but does not serve: GET /v1/models lists x, not m"}
				return &rollout.ServeReport{Outcome: rollout.ServeFailed, Pods: []rollout.ServePod{{Pod: pods[0], Outcome: rollout.ServeFailed}}}, f, errors.New(f.Message)
			}
			done := h.start(context.Background())
			if tc.serving {
				h.holdTimers(t)
				assert.Equal(t, []string{PhaseStarting, PhaseServeCheck, PhaseHolding}, h.phases())
				h.clk.Step(time.Minute)
				require.Nil(t, <-done)
				assert.True(t, h.gateRan)
				assert.Equal(t, storage.CanaryPromoted, h.run.Report.Outcome)
				assert.Equal(t, rollout.ServePassed, h.run.Served.Outcome)
				return
			}
			f := <-done
			require.NotNil(t, f)
			assert.Equal(t, rollout.VerdictNotServing, f.Verdict)
			assert.Equal(t, []string{"chat-new-a"}, checked)
			assert.Equal(t, []string{PhaseStarting, PhaseServeCheck}, h.phases(), "no hold, no gate")
			assert.False(t, h.gateRan)
			assert.False(t, h.promoted)
			assert.Equal(t, storage.CanaryFailed, h.run.Report.Outcome)
			assert.Contains(t, h.run.Report.Reason, "does not serve")
			assert.Equal(t, 2, h.watches, "the canary pods stay watched during the check")
			assert.Equal(t, rollout.ServeFailed, h.run.Served.Outcome)
		})
	}
}
