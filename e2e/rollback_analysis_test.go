//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestRollbackAnalysis: rollback --analysis measures the restored pods
// (with the synthetic load): restoring a healthy revision passes, with
// the figures in the result and the record; restoring a revision that
// serves errors is refused (AnalysisFailed, exit 4), the rollback
// revision recorded failed.
func TestRollbackAnalysis(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	for _, tag := range []string{"v0.11.0-serve-errors", "v0.11.1"} {
		r := f.run(t, canaryArgs("--set", "image.tag="+tag, "-o", "json")...)
		require.Equal(t, 0, r.code, "revision with %s\n%s", tag, r)
	}
	spec := analysisSpec(t, `interval: 3s
count: 2
minRequests: 3
load: {rps: 6, maxTokens: 4}
presets:
  errorRatio: {max: 0.05}
`)

	r := f.run(t, "rollback", relName, "--to-revision", "1", "--analysis", spec, "--timeout", "2m", "-o", "json")
	require.Equal(t, 0, r.code, "rollback to a healthy revision\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Analysis, "%s", r.stderr)
	assert.Equal(t, storage.AnalysisPassed, res.Analysis.Outcome, "%s", describe(res.Analysis.Measurements))
	for _, m := range res.Analysis.Measurements {
		assert.GreaterOrEqual(t, m.CanaryRequests, 3.0, "the load reached the restored pods: %+v", m)
	}
	hist := f.history(t)
	require.NotNil(t, hist[len(hist)-1].Analysis, "the rollback's record keeps the report")

	r = f.run(t, "rollback", relName, "--to-revision", "2", "--analysis", spec, "--timeout", "2m", "-o", "json")
	require.Equal(t, 4, r.code, "rollback to the serve-errors revision\n%s", r)
	res = result(t, r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict, "%+v", res.Failure)
	ms := measured(res.Analysis, "errorRatio")
	require.NotEmpty(t, ms)
	require.NotNil(t, ms[len(ms)-1].Value)
	assert.Greater(t, *ms[len(ms)-1].Value, 0.05, "%+v", ms[len(ms)-1])
	t.Logf("rollback to serve-errors: %s", describe(res.Analysis.Measurements))
	hist = f.history(t)
	last := hist[len(hist)-1]
	assert.Equal(t, storage.StatusFailed, last.Status)
	assert.Contains(t, last.Description, "Rollback to 2 failed: AnalysisFailed")

	// A spec that needs a baseline is refused before anything changes.
	before := len(f.history(t))
	base := analysisSpec(t, "interval: 3s\ncount: 1\npresets: {ttftP95Ratio: {max: 2}}\n")
	r = f.run(t, "rollback", relName, "--to-revision", "1", "--analysis", base)
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Len(t, f.history(t), before, "no record written")
}
