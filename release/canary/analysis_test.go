package canary

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// withAnalysis makes h's canary analysed: the analysis runs until finish
// is sent its outcome (or its context ends), with one measurement.
func withAnalysis(h *canaryHarness, policy string) (finish chan<- string, started <-chan []string) {
	fin, st := make(chan string), make(chan []string, 1)
	h.run.Name, h.run.Revision = "chat", 2
	h.run.Analyze = func(ctx context.Context, pods []string, r *storage.AnalysisReport) error {
		r.Provider, r.Inconclusive = analysis.ProviderScrape, policy
		st <- pods
		select {
		case outcome := <-fin:
			v := 6.1
			r.Measurements = append(r.Measurements, storage.AnalysisMeasurement{Metric: "ttftP95Ratio", Value: &v, Condition: "value <= 2", Outcome: outcome})
			r.Outcome, r.Reason = outcome, "ttftP95Ratio "+outcome
			if outcome == storage.AnalysisPassed {
				r.Reason = ""
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fin, st
}

func TestCanaryAnalysisLongerThanHold(t *testing.T) {
	h := newCanaryHarness(Options{Count: intstr.FromInt32(1), Hold: time.Minute, Gate: "smoke", GateTimeout: time.Minute})
	finish, started := withAnalysis(h, analysis.InconclusiveFail)
	done := h.start(context.Background())
	assert.Equal(t, []string{"chat-new-a"}, <-started, "the analysis runs on the Ready canary pods")
	h.holdTimers(t)
	h.clk.Step(time.Minute)
	require.Eventually(t, func() bool { return strings.Contains(h.eventLog(), "the hold lasts until the analysis ends") }, 5*time.Second, time.Millisecond)
	h.mu.Lock()
	assert.False(t, h.gateRan, "the gate waits for the analysis")
	h.mu.Unlock()
	finish <- storage.AnalysisPassed
	require.Nil(t, <-done)
	assert.True(t, h.gateRan, "the gate runs after a passing analysis")
	assert.True(t, h.promoted)
	assert.Equal(t, storage.AnalysisPassed, h.run.Analysis.Outcome)
	assert.Equal(t, storage.CanaryPromoted, h.run.Report.Outcome)
}

func TestCanaryAnalysisHoldLongerThanAnalysis(t *testing.T) {
	h := newCanaryHarness(Options{Count: intstr.FromInt32(1), Hold: time.Minute})
	finish, started := withAnalysis(h, analysis.InconclusiveFail)
	done := h.start(context.Background())
	<-started
	finish <- storage.AnalysisPassed
	h.holdTimers(t)
	select {
	case <-done:
		t.Fatal("promoted before the hold ended")
	default:
	}
	h.clk.Step(time.Minute)
	require.Nil(t, <-done)
	assert.True(t, h.promoted)
}

func TestCanaryAnalysisRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, policy, outcome string
		verdict               rollout.Verdict
		hold                  bool
		promoted              bool
	}{
		{"failed", analysis.InconclusivePass, storage.AnalysisFailed, rollout.VerdictAnalysisFailed, false, false},
		{"inconclusive, fail", analysis.InconclusiveFail, storage.AnalysisInconclusive, rollout.VerdictAnalysisInconclusive, false, false},
		{"inconclusive, hold", analysis.InconclusiveHold, storage.AnalysisInconclusive, rollout.VerdictAnalysisInconclusive, true, false},
		{"inconclusive, pass", analysis.InconclusivePass, storage.AnalysisInconclusive, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCanaryHarness(Options{Count: intstr.FromInt32(1), Hold: 10 * time.Minute, Gate: "smoke", GateTimeout: time.Minute})
			finish, started := withAnalysis(h, tc.policy)
			var f *rollout.Diagnosis
			var err error
			done := make(chan struct{})
			go func() { defer close(done); _, f, err = h.run.Run(context.Background()) }()
			<-started
			// Refused before the hold's 10m passed: the hold ends at once.
			finish <- tc.outcome
			<-done
			assert.Equal(t, tc.promoted, h.promoted)
			if tc.promoted {
				require.NoError(t, err)
				assert.True(t, h.gateRan)
				return
			}
			require.Error(t, err)
			require.NotNil(t, f)
			assert.False(t, h.gateRan, "no gate after a refusing analysis")
			assert.Equal(t, tc.verdict, f.Verdict)
			assert.Equal(t, string(tc.verdict), f.Reason)
			assert.Contains(t, f.Evidence, "ttftP95Ratio 6.1 (canary -, stable -; value <= 2; requests 0/0): "+tc.outcome)
			assert.Equal(t, storage.CanaryFailed, h.run.Report.Outcome)
			var holdErr *analysis.HoldError
			assert.Equal(t, tc.hold, errors.As(err, &holdErr))
			if tc.hold {
				assert.Equal(t, exitcode.Failed, exitcode.Of(err))
			} else {
				assert.ErrorIs(t, err, analysis.ErrFailed)
			}
		})
	}
}

func TestCanaryAnalysisStoppedByAFailingCanary(t *testing.T) {
	h := newCanaryHarness(Options{Count: intstr.FromInt32(1), Hold: 10 * time.Minute})
	h.failOn = 2 // the hold's watch: a canary pod crash-loops
	_, started := withAnalysis(h, analysis.InconclusiveFail)
	done := h.start(context.Background())
	<-started
	f := <-done
	require.NotNil(t, f)
	assert.Contains(t, f.Message, "CrashLoopBackOff")
	assert.Equal(t, storage.AnalysisStopped, h.run.Analysis.Outcome, "the analysis is cut short with the canary")
	assert.False(t, h.promoted)
}
