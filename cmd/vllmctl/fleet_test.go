package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/fleet"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/wait"
)

// fleetFile writes a fleet file of two targets on the test context (ml,
// ml2) in two waves.
func fleetFile(t *testing.T, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`release: chat
set: [resources.gpu=0, shm.enabled=false]
targets:
  - name: a
    context: test
  - name: b
    context: test
    namespace: ml2
    set: [image.tag=v0.11.1]
waves: [[a], [b]]
`+extra), 0o600))
	return path
}

// runFleet runs `fleet <op> ...` on the fakes: every context is theirs.
func (f *releaseFakes) runFleet(t *testing.T, op string, args ...string) (string, string, int) {
	t.Helper()
	build := func(g *GlobalOptions) *cobra.Command {
		parent := &cobra.Command{Use: "fleet"}
		parent.AddCommand(fleetCommand(&fleetOptions{g: g, op: op, newFactory: func(string) (Factory, error) { return g.Factory, nil }}))
		return parent
	}
	return runRecordCommand(t, f.factory(), build, append([]string{"fleet", op}, args...)...)
}

func TestFleetDeployCommand(t *testing.T) {
	f := newReleaseFakes()
	path := fleetFile(t, "")
	stdout, stderr, code := f.runFleet(t, "deploy", path, "-o", "json")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	requireValid(t, "fleet", stdout)
	var res fleet.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, fleet.Succeeded, res.Outcome)
	require.Len(t, res.Targets, 2)
	assert.Equal(t, "ml", res.Targets[0].Namespace, "the context's namespace")
	assert.Equal(t, fleet.Deployed, res.Targets[0].Outcome)
	assert.Equal(t, 1, res.Targets[1].RevisionAfter)
	assert.Contains(t, stderr, "[a] ")
	assert.Contains(t, stderr, "[b] ")
	assert.Contains(t, stderr, "[fleet] wave 2/2: b")

	// Again (the fake cluster's dry run always differs: a new revision;
	// up-to-date targets are tested in package fleet).
	stdout, stderr, code = f.runFleet(t, "deploy", path)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "OUTCOME: succeeded")
	assert.Regexp(t, `(?m)^b +test +ml2 +2 +1 +2 +deployed +0 `, stdout)

	stdout, _, code = f.runFleet(t, "status", path, "-o", "json")
	require.Equal(t, 0, code)
	requireValid(t, "fleet-status", stdout)
	assert.Contains(t, stdout, `"status": "deployed"`)

	stdout, _, code = f.runFleet(t, "diff", path, "-o", "json")
	assert.Equal(t, ExitChanges, code, stdout)
	requireValid(t, "fleet-diff", stdout)

	stdout, _, code = f.runFleet(t, "diff", path)
	assert.Equal(t, ExitChanges, code)
	assert.Contains(t, stdout, "=== b (context test, namespace ml2, wave 2):")
}

func TestFleetDeployFailureRollsBackFleet(t *testing.T) {
	f := newReleaseFakes()
	path := fleetFile(t, "")
	_, stderr, code := f.runFleet(t, "deploy", path)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	upgrade := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(upgrade, []byte(strings.Replace(mustRead(t, path), "set: [resources.gpu=0", "set: [image.tag=crash, resources.gpu=0", 1)), 0o600))
	fail := releasetest.FailKind("Deployment", wait.OutcomeFailed, "Progress deadline exceeded")
	waits := 0
	f.waiter.Script = func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		if waits++; waits == 1 { // the upgrade fails; its rollback succeeds
			return fail(ctx, objs, opts)
		}
		return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
	}
	stdout, stderr, code := f.runFleet(t, "deploy", upgrade, "-o", "json")
	// The preflight passes, a fails and rolls itself back: 3.
	assert.Equal(t, 3, code, "stderr: %s", stderr)
	requireValid(t, "fleet", stdout)
	var res fleet.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, fleet.RolledBack, res.Targets[0].Outcome)
	assert.Equal(t, fleet.NotStarted, res.Targets[1].Outcome)
	assert.Equal(t, 3, res.ExitCode)
}

func TestFleetInvalidFile(t *testing.T) {
	f := newReleaseFakes()
	path := fleetFile(t, "policy: {onFailure: undo}\n")
	_, stderr, code := f.runFleet(t, "deploy", path)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, path+":11: policy.onFailure:")

	bad := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("release: chat\ntargets: [{name: a, context: elsewhere}]\nwaves: [[a]]\n"), 0o600))
	_, stderr, code = f.runFleet(t, "deploy", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, bad+`:2: targets[0].context: "elsewhere": no such context in the kubeconfig`)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestPrefixWriter(t *testing.T) {
	var out strings.Builder
	w := &prefixWriter{out: &out, prefix: "a"}
	_, _ = w.Write([]byte("one\ntw"))
	_, _ = w.Write([]byte("o\n"))
	assert.Equal(t, "[a] one\n[a] two\n", out.String())

	out.Reset()
	j := &prefixWriter{out: &out, prefix: "b", json: true}
	_, _ = j.Write([]byte(`{"phase":"done"}` + "\n"))
	j.line("wave 1")
	assert.Equal(t, `{"target":"b","phase":"done"}`+"\n"+`{"target":"b","message":"wave 1"}`+"\n", out.String())
}

func TestFleetDeployTimeout(t *testing.T) {
	f := newReleaseFakes()
	waits := f.recordWaits()
	_, stderr, code := f.runFleet(t, "deploy", fleetFile(t, ""), "--timeout", "7m")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	got := waits()
	require.NotEmpty(t, got)
	for _, d := range got {
		assert.Equal(t, "7m0s", d.String())
	}
}

// TestFleetDeployAnalysis: fleet deploy --analysis FILE bakes each
// target's new pods after its rollout as deploy does: a refusing analysis
// (here inconclusive under fail: the fakes' pods cannot be reached) rolls
// the target back and is its row's verdict; a spec that needs a baseline
// is refused before anything is applied (a fleet holds no canary).
func TestFleetDeployAnalysis(t *testing.T) {
	f := newReleaseFakes()
	path := fleetFile(t, "")
	_, stderr, code := f.runFleet(t, "deploy", path)
	require.Equal(t, 0, code, "stderr: %s", stderr)

	dir := t.TempDir()
	baseline := filepath.Join(dir, "baseline.yaml")
	require.NoError(t, os.WriteFile(baseline, []byte("presets: {ttftP95Ratio: {max: 2}}\n"), 0o600))
	before := f.waiter.Calls()
	_, stderr, code = f.runFleet(t, "deploy", path, "--analysis", baseline)
	assert.Equal(t, 2, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, "presets.ttftP95Ratio: compares the canary with the stable pods")
	assert.Equal(t, before, f.waiter.Calls(), "nothing deployed")

	spec := filepath.Join(dir, "bake.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("interval: 1s\ncount: 1\npresets: {errorRatio: {max: 0.05}}\n"), 0o600))
	stdout, stderr, code := f.runFleet(t, "deploy", path, "--analysis", spec, "-o", "json")
	assert.Equal(t, 3, code, "stderr: %s", stderr)
	requireValid(t, "fleet", stdout)
	var res fleet.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	a := res.Targets[0]
	assert.Equal(t, fleet.RolledBack, a.Outcome)
	assert.Equal(t, "deploy", a.Phase)
	assert.Equal(t, "AnalysisInconclusive", a.Verdict)
	require.NotNil(t, a.Analysis, "the row carries what the target's deploy measured")
	assert.Equal(t, "inconclusive", a.Analysis.Outcome)
	assert.Equal(t, "scrape", a.Analysis.Provider)
	assert.Equal(t, fleet.NotStarted, res.Targets[1].Outcome)
	assert.Contains(t, stderr, "[a] ")
	assert.Contains(t, stderr, "analysis: bake: no canary: the new pods are measured alone for 1s")
}

// TestFleetGateIsRedacted: a fleet whose chart renders a Secret, with a
// gate that echoes the Secret's value and its base64 form: neither is
// printed, in the plain or JSON progress (the "[fleet] gate after wave
// 1: …" line included) nor in the table or -o json result (the gate's
// command and output tail). The fleet's own output goes through the
// command's redacting streams, which its targets' engines teach.
func TestFleetGateIsRedacted(t *testing.T) {
	const value = "FLEETSECRETVALUE123"
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	chart, err := filepath.Abs("../../testdata/charts/diffdemo")
	require.NoError(t, err)
	for _, tc := range []struct{ progress, output string }{
		{"plain", "json"}, {"plain", "table"}, {"json", "json"}, {"json", "yaml"},
	} {
		t.Run(tc.progress+"/"+tc.output, func(t *testing.T) {
			f := newReleaseFakes()
			path := fleetFile(t, "chart: "+chart+"\npolicy:\n  onFailure: stop\n  gate: \"echo leak "+value+"; echo "+b64+"; exit 1\"\n")
			require.NoError(t, os.WriteFile(path, []byte(strings.Replace(mustRead(t, path), "set: [", "set: [secret.token="+value+", ", 1)), 0o600))
			stdout, stderr, code := f.runFleet(t, "deploy", path, "--skip-preflight", "--progress", tc.progress, "-o", tc.output)
			assert.Equal(t, 4, code, "the gate fails: %s", stderr)
			for what, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
				assert.NotContains(t, out, value, what)
				assert.NotContains(t, out, b64, what)
			}
			assert.Contains(t, stderr, "gate after wave 1: echo leak (redacted)", "the gate ran and its line is printed")
			if tc.output == "json" {
				var res fleet.Result
				require.NoError(t, json.Unmarshal([]byte(stdout), &res))
				require.Len(t, res.Gates, 1)
				assert.Equal(t, 1, res.Gates[0].ExitCode)
				assert.Contains(t, res.Gates[0].Command, "(redacted)")
				assert.Equal(t, []string{"leak (redacted)", "(redacted)"}, res.Gates[0].OutputTail)
			}
		})
	}
}
