//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestGroupedCanaryAnalysis: the canary of an engine group is measured on
// its leader against the other group's leader (the pods the release's
// Service sends traffic to; the synthetic load reaches both): a healthy
// canary group is promoted with its measurements, a serve-errors one is
// refused (AnalysisFailed, exit 3) and rolled back before the second
// group is touched; a bake (wait --analysis) measures the groups'
// leaders.
func TestGroupedCanaryAnalysis(t *testing.T) {
	f := newRelFixture(t)
	r := f.deployGroups(t)
	require.Equal(t, 0, r.code, "install\n%s", r)
	spec := analysisSpec(t, `interval: 3s
count: 2
minRequests: 2
load: {rps: 6, maxTokens: 4}
presets:
  errorRatio: {max: 0.05}
`)

	r = f.deployGroups(t, "--set", "image.tag=v0.11.1", "--canary", "1", "--canary-hold", "1s", "--analysis", spec)
	require.Equal(t, 0, r.code, "healthy group canary\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Canary)
	assert.Equal(t, storage.CanaryPromoted, res.Canary.Outcome, "%+v", res.Canary)
	require.NotNil(t, res.Analysis, "the group canary was analysed\n%s", r.stderr)
	assert.Equal(t, storage.AnalysisPassed, res.Analysis.Outcome, "%s", describe(res.Analysis.Measurements))
	for _, m := range res.Analysis.Measurements {
		assert.GreaterOrEqual(t, m.CanaryRequests, 2.0, "the load reached the canary group's leader: %+v", m)
		assert.GreaterOrEqual(t, m.StableRequests, 2.0, "and the other group's leader: %+v", m)
	}
	t.Logf("healthy group canary: %s", describe(res.Analysis.Measurements))
	assert.NotContains(t, r.stderr, "not analysed")

	g1 := podUIDs(f.groupPods(t, "chat-g1"))
	r = f.deployGroups(t, "--set", "image.tag=v0.11.0-serve-errors", "--canary", "1", "--canary-hold", "1s", "--analysis", spec)
	require.Equal(t, 3, r.code, "serve-errors group canary\n%s", r)
	res = result(t, r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict, "%+v", res.Failure)
	require.NotNil(t, res.Analysis)
	ms := measured(res.Analysis, "errorRatio")
	require.NotEmpty(t, ms)
	last := ms[len(ms)-1]
	require.NotNil(t, last.Canary)
	require.NotNil(t, last.Stable)
	assert.Greater(t, *last.Canary, 0.05, "%+v", last)
	assert.Zero(t, *last.Stable, "the other group's leader answers every request")
	t.Logf("serve-errors group canary: %s", describe(res.Analysis.Measurements))
	assert.NotContains(t, r.stderr, "wave 2 of 2")
	assert.Equal(t, g1, podUIDs(f.groupPods(t, "chat-g1")), "the second group is never touched")

	// A bake (wait --analysis, as fleet soaks run it) measures the leaders
	// of the revision's groups.
	r = f.run(t, "wait", relName, "--analysis", spec, "--timeout", "2m", "-o", "json")
	require.Equal(t, 0, r.code, "wait --analysis on the grouped release\n%s", r)
	res = result(t, r)
	require.NotNil(t, res.Analysis, "%s", r.stderr)
	assert.Equal(t, storage.AnalysisPassed, res.Analysis.Outcome, "%s", describe(res.Analysis.Measurements))
	for _, m := range res.Analysis.Measurements {
		assert.GreaterOrEqual(t, m.CanaryRequests, 2.0, "the load reached the groups' leaders: %+v", m)
	}
	t.Logf("grouped bake: %s", describe(res.Analysis.Measurements))
}
