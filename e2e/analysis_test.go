//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The canary analysis on the local cluster: revision 1 is 3 healthy
// replicas; revision 2 goes through a canary of 1 pod analysed against
// them by the scrape provider (each pod's /metrics through the API
// server's port-forward), with the synthetic load where the spec has one.

// analysisSpec writes an analysis file and returns its path.
func analysisSpec(t *testing.T, spec string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "analysis.yaml")
	require.NoError(t, os.WriteFile(p, []byte(spec), 0o600))
	return p
}

// analysisUpgrade deploys revision 2 with image tag through a canary
// analysed by spec.
func (f *relFixture) analysisUpgrade(t *testing.T, tag, spec string, extra ...string) (relRun, *release.Result) {
	t.Helper()
	args := append([]string{"--set", "image.tag=" + tag, "--canary", "1", "--canary-hold", "1s", "--analysis", analysisSpec(t, spec), "-o", "json"}, extra...)
	r := f.run(t, canaryArgs(args...)...)
	return r, result(t, r)
}

// measured returns the measurements of metric.
func measured(r *storage.AnalysisReport, metric string) []storage.AnalysisMeasurement {
	var out []storage.AnalysisMeasurement
	for _, m := range r.Measurements {
		if m.Metric == metric {
			out = append(out, m)
		}
	}
	return out
}

func TestAnalysisHealthyPromoted(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	r, res := f.analysisUpgrade(t, "v0.11.1", `
interval: 4s
count: 3
minRequests: 4
load: {rps: 6, maxTokens: 4, prompt: "Say hello"}
presets:
  errorRatio: {max: 0.05}
  ttftP95Ratio: {max: 2}
  e2eLatencyP95Ratio: {max: 2}
`)
	require.Equal(t, 0, r.code, "%s", r)
	require.NotNil(t, res.Analysis, "%s", r)
	a := res.Analysis
	assert.Equal(t, storage.AnalysisPassed, a.Outcome, "%s", r)
	assert.Equal(t, "scrape", a.Provider)
	require.Len(t, a.Measurements, 9, "3 measurements of 3 presets")
	for _, m := range a.Measurements {
		assert.Equal(t, storage.AnalysisPassed, m.Outcome, "%+v", m)
		require.NotNil(t, m.Value, "%+v", m)
		assert.GreaterOrEqual(t, m.CanaryRequests, 4.0, "the load reached the canary")
		assert.GreaterOrEqual(t, m.StableRequests, 4.0, "the load reached the stable pods")
	}
	for _, m := range measured(a, "ttftP95Ratio") {
		require.NotNil(t, m.Canary)
		require.NotNil(t, m.Stable)
		assert.InDelta(t, 1, *m.Value, 0.5, "healthy against healthy: %+v", m)
	}
	require.NotNil(t, a.Load)
	assert.Greater(t, a.Load.Sent, int64(30))
	assert.Zero(t, a.Load.Failed)
	assert.Equal(t, storage.CanaryPromoted, res.Canary.Outcome)
	// What the analysis adds beyond its window (3 × 4s): the hold (1s,
	// shorter) lasts as long as the analysis, plus its last scrape.
	// The phases: starting, serve check (the built-in chart's), holding.
	require.Equal(t, canary.PhaseHolding, res.Canary.Phases[2].Name)
	held := res.Canary.Phases[2].DurationSeconds
	t.Logf("holding with the analysis: %.3fs for a 12s window", held)
	assert.GreaterOrEqual(t, held, 12.0)
	assert.Less(t, held, 13.0, "the analysis adds at most 1s to its window")
	lines := 0
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "#2 analysis: passed: ") && strings.Contains(l, "; requests ") {
			lines++
		}
	}
	assert.Equal(t, 9, lines, "one progress line per measurement:\n%s", r.stderr)

	revs := f.history(t)
	require.Len(t, revs, 2)
	require.NotNil(t, revs[1].Analysis, "the record keeps the analysis")
	assert.Len(t, revs[1].Analysis.Measurements, 9)
	assert.Contains(t, revs[1].Description, "analysis passed (9 measurement(s))")
	status := f.run(t, "status", relName)
	assert.Contains(t, status.stdout, "ANALYSIS: passed (revision 2, scrape provider, 3 × 4s)")
	assert.Contains(t, status.stdout, "ttftP95Ratio")
}

func TestAnalysisServeSlowRolledBack(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, uids := f.canaryInstall(t)
	ready := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), canaryReplicas)
	r, res := f.analysisUpgrade(t, "v0.11.0-serve-slow", `
interval: 4s
count: 3
minRequests: 4
load: {rps: 6, maxTokens: 4}
presets:
  ttftP95Ratio: {max: 2}
`)
	require.Equal(t, 3, r.code, "%s", r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Analysis)
	assert.Equal(t, storage.AnalysisFailed, res.Analysis.Outcome)
	ms := measured(res.Analysis, "ttftP95Ratio")
	require.Len(t, ms, 1, "failureLimit 0: the first failed measurement ends it")
	require.NotNil(t, ms[0].Value)
	assert.GreaterOrEqual(t, *ms[0].Value, 3.0, "TTFT of serve-slow is ≥ 3× a healthy pod's: %+v", ms[0])
	assert.Contains(t, res.Failure.Evidence, "ttftP95Ratio")
	assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome)
	assert.Nil(t, res.Canary.Gate)
	f.assertOldKept(t, rev1.ReplicaSets[0].PodTemplateHash, uids, ready)

	status := f.run(t, "status", relName, "-o", "json")
	require.Equal(t, 0, status.code, "%s", status)
	requireSchemaValid(t, "status", status.stdout)
	assert.Contains(t, status.stdout, `"analysisRevision": 2`)
	assert.Contains(t, status.stdout, `"outcome": "failed"`)
	table := f.run(t, "status", relName)
	assert.Contains(t, table.stdout, "ANALYSIS: failed (revision 2")
	hist := f.run(t, "history", relName, "-o", "json")
	requireSchemaValid(t, "history", hist.stdout)
	assert.Contains(t, hist.stdout, `"metric": "ttftP95Ratio"`)
}

func TestAnalysisServeErrorsRolledBack(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	r, res := f.analysisUpgrade(t, "v0.11.0-serve-errors", `
interval: 4s
count: 3
minRequests: 4
load: {rps: 6, maxTokens: 4}
presets:
  errorRatio: {max: 0.05}
`)
	require.Equal(t, 3, r.code, "%s", r)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
	ms := measured(res.Analysis, "errorRatio")
	require.NotEmpty(t, ms)
	last := ms[len(ms)-1]
	require.NotNil(t, last.Canary)
	require.NotNil(t, last.Stable)
	assert.InDelta(t, 0.2, *last.Canary, 0.15, "a fifth of the canary's requests answered 500: %+v", last)
	assert.Zero(t, *last.Stable, "the stable pods answer every request")
	assert.Equal(t, 1, res.RolledBackTo)
}

func TestAnalysisNoTrafficInconclusive(t *testing.T) {
	shareCluster(t, 5)
	spec := func(policy string) string {
		return "interval: 3s\ncount: 2\nminRequests: 1\ninconclusive: " + policy + "\npresets: {errorRatio: {max: 0.05}}\n"
	}
	t.Run("fail", func(t *testing.T) {
		f := newRelFixture(t)
		f.canaryInstall(t)
		r, res := f.analysisUpgrade(t, "v0.11.1", spec("fail"))
		require.Equal(t, 3, r.code, "%s", r)
		assert.Equal(t, rollout.VerdictAnalysisInconclusive, res.Failure.Verdict)
		assert.Equal(t, storage.AnalysisInconclusive, res.Analysis.Outcome)
		assert.Contains(t, res.Analysis.Reason, "fewer than minRequests 1")
		assert.Equal(t, 1, res.RolledBackTo)
	})
	t.Run("hold", func(t *testing.T) {
		f := newRelFixture(t)
		f.canaryInstall(t)
		r, res := f.analysisUpgrade(t, "v0.11.1", spec("hold"))
		require.Equal(t, 4, r.code, "%s", r)
		assert.Equal(t, rollout.VerdictAnalysisInconclusive, res.Failure.Verdict)
		assert.Zero(t, res.RolledBackTo, "not rolled back")
		d := f.deployment(t)
		assert.Equal(t, "2", d.Annotations[canary.Annotation], "the canary is kept held")
		status := f.run(t, "status", relName)
		assert.Contains(t, status.stdout, "CANARY HELD")
		assert.Contains(t, status.stdout, "ANALYSIS: inconclusive (revision 2")
	})
}

func TestAnalysisBadSpecNothingApplied(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	before := f.deployment(t)
	for _, spec := range []string{
		"count: 1000000000\n",
		"interval: 0s\n",
		"interval: -10s\n",
		"presets: {ttftP99Ratio: {max: 2}}\n",
		"provider: prometheus\nmetrics: [{name: q, query: 'sum(rate(vllm:e2e_request_latency_seconds_count[1m]', successCondition: 'result[0] < 1'}]\n",
	} {
		r := f.run(t, canaryArgs("--set", "image.tag=v0.11.1", "--canary", "1", "--analysis", analysisSpec(t, spec))...)
		assert.Equal(t, 2, r.code, "%s\n%s", spec, r)
		assert.Contains(t, r.stderr, "invalid analysis")
	}
	after := f.deployment(t)
	assert.Equal(t, before.Generation, after.Generation, "the Deployment was not changed")
	assert.Equal(t, before.Spec.Template.Spec.Containers[0].Image, after.Spec.Template.Spec.Containers[0].Image)
	entries, err := f.store.List(context.Background(), relName)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no record was written")
}

// TestAnalysisChartValues: the built-in chart's analysis values, without
// --analysis, catch a serve-errors canary.
func TestAnalysisChartValues(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	r := f.run(t, canaryArgs("--set", "image.tag=v0.11.0-serve-errors", "--canary", "1", "--canary-hold", "1s", "-o", "json",
		"--set", "analysis.enabled=true", "--set", "analysis.interval=3s", "--set", "analysis.count=2", "--set", "analysis.minRequests=3",
		"--set", "analysis.load.rps=6", "--set-json", `analysis.presets={"errorRatio":{"max":0.05}}`)...)
	require.Equal(t, 3, r.code, "%s", r)
	res := result(t, r)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
	require.NotNil(t, res.Analysis)
	assert.Equal(t, "3s", res.Analysis.Interval)
	assert.NotEmpty(t, measured(res.Analysis, "errorRatio"))
	assert.Equal(t, 1, res.RolledBackTo)
}

// TestAnalysisBakeWithoutCanary: without --canary the analysis measures
// the new pods alone once the rollout is complete; a serve-errors
// revision is rolled back.
func TestAnalysisBakeWithoutCanary(t *testing.T) {
	shareCluster(t, 5)
	spec := "interval: 3s\ncount: 2\nminRequests: 3\nload: {rps: 4}\npresets: {errorRatio: {max: 0.05}}\n"
	for _, tc := range []struct {
		tag, outcome string
		code         int
	}{
		{"v0.11.1", storage.AnalysisPassed, 0},
		{"v0.11.0-serve-errors", storage.AnalysisFailed, 3},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			f := newRelFixture(t)
			f.canaryInstall(t)
			r := f.run(t, canaryArgs("--set", "image.tag="+tc.tag, "--analysis", analysisSpec(t, spec), "-o", "json")...)
			require.Equal(t, tc.code, r.code, "%s", r)
			res := result(t, r)
			require.NotNil(t, res.Analysis, "%s", r)
			assert.Equal(t, tc.outcome, res.Analysis.Outcome)
			ms := measured(res.Analysis, "errorRatio")
			require.NotEmpty(t, ms)
			for _, m := range ms {
				assert.Nil(t, m.Stable, "no baseline without a canary")
				assert.GreaterOrEqual(t, m.CanaryRequests, 3.0, "the load reached the new pods")
			}
			if tc.code == 3 {
				assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
				assert.Contains(t, res.Failure.Message, "the analysis after the rollout failed")
				assert.Equal(t, 1, res.RolledBackTo)
			}
		})
	}
}

// TestWaitAnalysis: `vllmctl wait --analysis` bakes the current
// revision's pods on the local cluster with the synthetic load, with
// deploy's verdicts: a healthy revision passes with its measurements in
// the result; a serve-errors revision (deployed without an analysis: it
// serves) fails with AnalysisFailed, exit 4, and with
// --rollback-on-failure the revision before it is restored, exit 3. The
// records keep no analysis of a wait.
func TestWaitAnalysis(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	spec := analysisSpec(t, "interval: 3s\ncount: 2\nminRequests: 3\nload: {rps: 6, maxTokens: 4}\npresets: {errorRatio: {max: 0.05}}\n")
	wait1 := func(extra ...string) (relRun, *release.Result) {
		r := f.run(t, append([]string{"wait", relName, "--analysis", spec, "--progress", "plain", "-o", "json"}, extra...)...)
		return r, result(t, r)
	}

	r, res := wait1()
	require.Equal(t, 0, r.code, "%s", r)
	require.NotNil(t, res.Analysis, "%s", r)
	assert.Equal(t, storage.AnalysisPassed, res.Analysis.Outcome)
	ms := measured(res.Analysis, "errorRatio")
	require.Len(t, ms, 2)
	for _, m := range ms {
		require.NotNil(t, m.Value)
		assert.Zero(t, *m.Value)
		assert.GreaterOrEqual(t, m.CanaryRequests, 3.0, "the load reached the pods")
		assert.Nil(t, m.Stable, "no baseline in a wait")
	}
	require.NotNil(t, res.Analysis.Load)
	assert.Positive(t, res.Analysis.Load.Sent)
	t.Logf("healthy: %s; load sent %d", describe(ms), res.Analysis.Load.Sent)
	assert.Contains(t, r.stderr, "analysis: bake: no canary: the new pods are measured alone for 6s")

	up := f.run(t, canaryArgs("--set", "image.tag=v0.11.0-serve-errors", "-o", "json")...)
	require.Equal(t, 0, up.code, "revision 2 has no analysis: it serves\n%s", up)

	r, res = wait1()
	require.Equal(t, 4, r.code, "%s", r)
	require.NotNil(t, res.Failure, "%s", r)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
	assert.Equal(t, storage.AnalysisFailed, res.Analysis.Outcome)
	ms = measured(res.Analysis, "errorRatio")
	require.NotEmpty(t, ms)
	require.NotNil(t, ms[len(ms)-1].Value)
	assert.Greater(t, *ms[len(ms)-1].Value, 0.05, "a fifth of the requests answered 500: %+v", ms)
	t.Logf("serve-errors: %s", describe(ms))

	r, res = wait1("--rollback-on-failure")
	require.Equal(t, 3, r.code, "%s", r)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
	assert.Equal(t, 1, res.RolledBackTo, "the revision below the refused one")
	assert.NotContains(t, f.deployment(t).Spec.Template.Spec.Containers[0].Image, "serve-errors", "revision 1's image serves again")

	for _, rec := range f.history(t) {
		if rec.Revision == 2 {
			assert.Nil(t, rec.Analysis, "wait writes no analysis into the record")
		}
	}

	bad := f.run(t, "wait", relName, "--analysis", analysisSpec(t, "presets: {ttftP95Ratio: {max: 2}}\n"))
	assert.Equal(t, 2, bad.code, "%s", bad)
	assert.Contains(t, bad.stderr, "compares the canary with the stable pods")
}

// describe is the measurements as the progress lines show them.
func describe(ms []storage.AnalysisMeasurement) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = analysis.DescribeMeasurement(m)
	}
	return strings.Join(out, "; ")
}
