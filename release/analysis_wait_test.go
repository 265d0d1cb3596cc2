package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// bakeSpec is a one-measurement analysis of the error ratio, one second
// long, with the inconclusive policy given.
func bakeSpec(t *testing.T, inconclusive string) *analysis.Config {
	t.Helper()
	spec, err := analysis.Parse([]byte("interval: 1s\ncount: 1\nminRequests: 10\ninconclusive: "+inconclusive+
		"\npresets: {errorRatio: {max: 0.05}}\n"), "bake.yaml")
	require.NoError(t, err)
	cfg, err := spec.Validate("bake.yaml", false)
	require.NoError(t, err)
	return cfg
}

// TestWaitAnalysis: `vllmctl wait --analysis` bakes the revision's pods
// once they serve, with deploy's verdicts: a passing analysis is exit 0
// with its measurements in the result; a failing one AnalysisFailed (exit
// 4, or 3 rolled back with --rollback-on-failure); an inconclusive one
// (no traffic) follows the policy, hold never rolling back. The wait
// writes no record: the revision keeps what its deploy recorded.
func TestWaitAnalysis(t *testing.T) {
	for _, tc := range []struct {
		name, image, policy string
		rollback            bool
		exit                int
		outcome             string
		verdict             rollout.Verdict
		statuses            map[int]storage.Status
	}{
		{name: "passed", image: "vllm/vllm-openai:v0.11.0", policy: analysis.InconclusiveFail, outcome: storage.AnalysisPassed,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}},
		{name: "failed", image: "vllm/vllm-openai:v0.11.0-serve-errors", policy: analysis.InconclusiveFail, exit: 4,
			outcome: storage.AnalysisFailed, verdict: rollout.VerdictAnalysisFailed,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}},
		{name: "failed, rolled back", image: "vllm/vllm-openai:v0.11.0-serve-errors", policy: analysis.InconclusiveFail, rollback: true, exit: 3,
			outcome: storage.AnalysisFailed, verdict: rollout.VerdictAnalysisFailed,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusSuperseded, 3: storage.StatusDeployed}},
		{name: "inconclusive, fail", image: "vllm/vllm-openai:v0.11.0-serve-idle", policy: analysis.InconclusiveFail, exit: 4,
			outcome: storage.AnalysisInconclusive, verdict: rollout.VerdictAnalysisInconclusive,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}},
		{name: "inconclusive, hold: never rolled back", image: "vllm/vllm-openai:v0.11.0-serve-idle", policy: analysis.InconclusiveHold,
			rollback: true, exit: 4, outcome: storage.AnalysisInconclusive, verdict: rollout.VerdictAnalysisInconclusive,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}},
		{name: "inconclusive, pass", image: "vllm/vllm-openai:v0.11.0-serve-idle", policy: analysis.InconclusivePass, rollback: true,
			outcome: storage.AnalysisInconclusive, statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFixture(t)
			ctx := context.Background()
			_, err := f.engine.Deploy(ctx, serveOptions("vllm/vllm-openai:v0.10.0"))
			require.NoError(t, err)
			_, err = f.engine.Deploy(ctx, serveOptions(tc.image))
			require.NoError(t, err, "the deploy has no analysis: it serves, so it is deployed")

			res, err := f.engine.Wait(ctx, release.WaitOptions{Name: engRelease, Timeout: time.Minute,
				Analysis: bakeSpec(t, tc.policy), RollbackOnFailure: tc.rollback, RollbackTimeout: time.Minute})
			assert.Equal(t, tc.exit, exitCode(err), "%v", err)
			require.NotNil(t, res)
			require.NotNil(t, res.ServeCheck, "the serve check runs before the analysis")
			assert.Equal(t, rollout.ServePassed, res.ServeCheck.Outcome)
			require.NotNil(t, res.Analysis, "the analysis report is the result's")
			assert.Equal(t, tc.outcome, res.Analysis.Outcome, res.Analysis.Reason)
			assert.Equal(t, analysis.ProviderScrape, res.Analysis.Provider)
			require.Len(t, res.Analysis.Measurements, 1)
			m := res.Analysis.Measurements[0]
			assert.Equal(t, analysis.PresetErrorRatio, m.Metric)
			assert.Equal(t, "value <= 0.05", m.Condition)
			assert.Equal(t, tc.statuses, f.statuses(t))
			assert.Nil(t, f.record(t, 2).Analysis, "wait writes no analysis into the record")
			assert.Positive(t, f.phases()[release.PhaseAnalysis], "measurements are progress events")
			switch tc.outcome {
			case storage.AnalysisPassed:
				require.NotNil(t, m.Value)
				assert.Zero(t, *m.Value)
				assert.Equal(t, float64(20), m.CanaryRequests)
			case storage.AnalysisFailed:
				require.NotNil(t, m.Value)
				assert.InDelta(t, 0.25, *m.Value, 1e-9, "5 of 20 requests answered 500")
			}
			if tc.verdict == "" {
				require.NoError(t, err)
				assert.Nil(t, res.Failure)
				return
			}
			require.Error(t, err)
			require.NotNil(t, res.Failure)
			assert.Equal(t, tc.verdict, res.Failure.Verdict)
			assert.Equal(t, string(tc.verdict), res.Failure.Reason)
			assert.Contains(t, res.Failure.Evidence, "errorRatio")
			if tc.exit == 3 {
				assert.Equal(t, 1, res.RolledBackTo)
			} else {
				assert.Zero(t, res.RolledBackTo)
			}
		})
	}
}

// TestWaitAnalysisRefusedBeforeWaiting: an invalid analysis, or a
// prometheus one without its URL, taken from the built-in chart's
// recorded values, is exit 2 before anything is waited for; values that
// compare with the stable pods (written for deploy --canary) are not
// baked by a wait, which has no canary, but the wait still waits; a
// revision of another chart whose values say analysis.enabled is not
// analysed (its values are its own).
func TestWaitAnalysisRefusedBeforeWaiting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		builtin  bool
		analysis map[string]any
		want     string
	}{
		{"baseline preset", true, map[string]any{"enabled": true, "presets": map[string]any{"ttftP95Ratio": map[string]any{"max": 2}}}, ""},
		{"zero interval", true, map[string]any{"enabled": true, "interval": "0s"}, "interval: 0s: must be positive"},
		{"prometheus without its URL", true, map[string]any{"enabled": true, "provider": "prometheus", "presets": map[string]any{"errorRatio": map[string]any{}}},
			"provider: prometheus needs --prometheus-url"},
		{"another chart", false, map[string]any{"enabled": true, "interval": "0s"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFixture(t)
			ctx := context.Background()
			_, err := f.engine.Deploy(ctx, serveOptions("vllm/vllm-openai:v0.11.0"))
			require.NoError(t, err)
			rec, err := f.store.Get(ctx, engRelease, 1)
			require.NoError(t, err)
			rec.Chart.Builtin = tc.builtin
			rec.ComputedValues = map[string]any{"analysis": tc.analysis}
			require.NoError(t, f.store.Update(ctx, rec))
			waits := f.waiter.Calls()

			res, err := f.engine.Wait(ctx, release.WaitOptions{Name: engRelease, Timeout: time.Minute})
			if tc.want == "" {
				require.NoError(t, err)
				assert.Nil(t, res.Analysis)
				assert.Greater(t, f.waiter.Calls(), waits, "the wait waited")
				return
			}
			require.Error(t, err)
			assert.Equal(t, 2, exitCode(err))
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, res)
			assert.Equal(t, waits, f.waiter.Calls(), "nothing waited for")
		})
	}
}
