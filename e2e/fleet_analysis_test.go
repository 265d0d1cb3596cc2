//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vllmctl/vllmctl/fleet"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestFleetAnalysis: `fleet deploy --analysis` bakes each target's new
// pods after its rollout with the scrape provider and the synthetic load,
// on the built-in chart, two targets in two waves (two namespaces of the
// first local cluster, its own context: no second cluster needed). A
// healthy revision passes on both, the measurements in each row; a
// serve-errors revision fails wave 1's bake with AnalysisFailed: that
// target is rolled back (exit 3) and, under onFailure stop, wave 2 is not
// started (docs/canary.md#analysis-in-wait-and-in-fleet-soaks).
func TestFleetAnalysis(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	other := newEnv(t)
	raw, err := clientcmd.LoadFromFile(f.kubeconfig)
	require.NoError(t, err)
	ctxName := raw.CurrentContext
	dir := t.TempDir()
	spec := analysisSpec(t, `interval: 2s
count: 2
minRequests: 2
load: {rps: 8, maxTokens: 4}
presets:
  errorRatio: {max: 0.05}
`)
	fleetFile := func(tag string, policy ...string) string {
		set := []string{"image.tag=" + tag}
		for i := 1; i < len(rolloutValues); i += 2 {
			set = append(set, rolloutValues[i])
		}
		q := make([]string, len(set))
		for i, s := range set {
			q[i] = fmt.Sprintf("%q", s)
		}
		body := fmt.Sprintf(`release: %s
chart: vllm
set: [%s]
targets:
  - {name: a, context: %s, namespace: %s}
  - {name: b, context: %s, namespace: %s}
waves:
  - [a]
  - [b]
policy:
  onFailure: stop
%s`, relName, strings.Join(q, ", "), ctxName, f.namespace, ctxName, other.namespace, strings.Join(policy, ""))
		p := filepath.Join(dir, "fleet.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	deploy := func(tag string, policy ...string) (relRun, *fleet.Result) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, stdout, stderr := f.command(ctx, "fleet", "deploy", fleetFile(tag, policy...), "-o", "json", "--timeout", "90s", "--analysis", spec)
		r := relRun{code: exitCodeOf(t, cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
		res := &fleet.Result{}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), res), "fleet result\n%s", r)
		requireSchemaValid(t, "fleet", r.stdout)
		return r, res
	}

	r, res := deploy("v0.11.0")
	require.Equal(t, 0, r.code, "healthy fleet\n%s", r)
	for _, name := range []string{"a", "b"} {
		row := row(t, res, name)
		assert.Equal(t, fleet.Deployed, row.Outcome, "%+v", row)
		require.NotNil(t, row.Analysis, "target %s: its deploy baked", name)
		assert.Equal(t, storage.AnalysisPassed, row.Analysis.Outcome)
		require.Len(t, row.Analysis.Measurements, 2)
		for _, m := range row.Analysis.Measurements {
			assert.Equal(t, storage.AnalysisPassed, m.Outcome, "%+v", m)
			assert.GreaterOrEqual(t, m.CanaryRequests, 2.0, "the load reached target %s's pods: %+v", name, m)
		}
	}

	r, res = deploy("v0.11.0-serve-errors")
	require.Equal(t, 3, r.code, "serve-errors fleet\n%s", r)
	assert.Equal(t, fleet.FleetFailed, res.Outcome)
	a := row(t, res, "a")
	assert.Equal(t, fleet.RolledBack, a.Outcome, "%+v", a)
	assert.Equal(t, string(rollout.VerdictAnalysisFailed), a.Verdict, "%+v", a)
	assert.Equal(t, 1, a.RolledBackTo)
	require.NotNil(t, a.Analysis)
	assert.Equal(t, storage.AnalysisFailed, a.Analysis.Outcome)
	ms := measured(a.Analysis, "errorRatio")
	require.NotEmpty(t, ms)
	require.NotNil(t, ms[len(ms)-1].Value)
	assert.Greater(t, *ms[len(ms)-1].Value, 0.05, "%+v", ms[len(ms)-1])
	t.Logf("fleet, serve-errors on a: %s", describe(a.Analysis.Measurements))
	b := row(t, res, "b")
	assert.Equal(t, fleet.NotStarted, b.Outcome, "onFailure stop: wave 2 not started: %+v", b)
	revs, err := storage.History(context.Background(), storage.NewSecrets(other.client, other.namespace), relName)
	require.NoError(t, err)
	assert.Len(t, revs, 1, "target b keeps its one revision")
	assert.NotContains(t, f.deployment(t).Spec.Template.Spec.Containers[0].Image, "serve-errors", "a serves revision 1's image again")

	// The soak: target a already runs serve-errors, deployed by hand
	// without an analysis, so the fleet's deploy finds it up to date and
	// bakes nothing; the soak after wave 1 measures its pods and fails
	// them (AnalysisFailed, as `vllmctl wait` does), and wave 2 is not
	// started.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	byHand := append([]string{"deploy", relName, "vllm", "--timeout", "90s", "--set", "image.tag=v0.11.0-serve-errors"}, rolloutValues...)
	cmd, stdout, stderr := f.command(ctx, byHand...)
	require.NoError(t, cmd.Run(), "deploy by hand\n%s\n%s", stdout, stderr)
	r, res = deploy("v0.11.0-serve-errors", "  soak: 5s\n")
	a = row(t, res, "a")
	require.Equal(t, fleet.FleetFailed, res.Outcome, "soak of serve-errors\n%s", r)
	assert.NotEqual(t, 0, r.code, "%s", r)
	assert.Equal(t, a.RevisionBefore, a.RevisionAfter, "a was up to date: nothing rolled out, nothing baked: %+v", a)
	assert.Equal(t, "soak", a.Phase, "%+v", a)
	assert.Equal(t, string(rollout.VerdictAnalysisFailed), a.Verdict, "%+v", a)
	require.NotNil(t, a.Analysis, "the soak's analysis is the row's")
	assert.Equal(t, storage.AnalysisFailed, a.Analysis.Outcome)
	t.Logf("fleet soak, serve-errors on a: %s", describe(a.Analysis.Measurements))
	assert.Equal(t, fleet.NotStarted, row(t, res, "b").Outcome)
}
