package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/release/storage"
)

// TestDeployAnalysisRefused: an invalid analysis spec, from --analysis or
// from the built-in chart's values, is exit 2 with nothing applied and
// nothing recorded, on an upgrade as on an install.
func TestDeployAnalysisRefused(t *testing.T) {
	write := func(t *testing.T, spec string) string {
		p := filepath.Join(t.TempDir(), "analysis.yaml")
		require.NoError(t, os.WriteFile(p, []byte(spec), 0o600))
		return p
	}
	dir := t.TempDir()
	password, emptyPassword := filepath.Join(dir, "password"), filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(password, []byte("pw-never-printed\n"), 0o600))
	require.NoError(t, os.WriteFile(emptyPassword, []byte("\n"), 0o600))
	prom := []string{"--canary", "1", "--prometheus-url", "http://prometheus:9090"}
	for _, tc := range []struct {
		name, spec string
		args       []string
		want       string
	}{
		{"absurd count", "count: 1000000000\n", []string{"--canary", "1"}, "count: 1000000000: must be between 1 and 1000"},
		{"password file without URL", "", []string{"--canary", "1", "--prometheus-username", "u", "--prometheus-password-file", password},
			"--prometheus-username needs --prometheus-url"},
		{"empty password file", "provider: prometheus\n", append([]string{"--prometheus-username", "u", "--prometheus-password-file", emptyPassword}, prom...),
			"--prometheus-password-file: " + emptyPassword + ": the file is empty"},
		{"no such password file", "provider: prometheus\n", append([]string{"--prometheus-username", "u", "--prometheus-password-file", "/nonexistent/pw"}, prom...),
			"--prometheus-password-file: /nonexistent/pw"},
		{"password file a directory", "provider: prometheus\n", append([]string{"--prometheus-username", "u", "--prometheus-password-file", dir}, prom...),
			"--prometheus-password-file: " + dir},
		{"username without password file", "provider: prometheus\n", append([]string{"--prometheus-username", "u"}, prom...),
			"--prometheus-username: needs --prometheus-password-file"},
		{"password file without username", "provider: prometheus\n", append([]string{"--prometheus-password-file", password}, prom...),
			"--prometheus-password-file: needs --prometheus-username"},
		{"basic auth and token", "provider: prometheus\n", append([]string{"--prometheus-username", "u", "--prometheus-password-file", password,
			"--prometheus-token-file", password}, prom...), "basic auth and --prometheus-token-file exclude each other"},
		{"credentials in the URL", "provider: prometheus\n", []string{"--canary", "1", "--prometheus-url", "http://u:pw-never-printed@prometheus:9090"},
			"--prometheus-url: the URL holds credentials"},
		{"zero interval", "interval: 0s\n", []string{"--canary", "1"}, "interval: 0s: must be positive"},
		{"negative interval", "interval: -1m\n", []string{"--canary", "1"}, "interval: -1m: must be positive"},
		{"unknown preset", "presets: {ttftP99: {max: 2}}\n", []string{"--canary", "1"}, "presets.ttftP99: unknown preset"},
		{"unknown key", "interval: 10s\npresetz: {}\n", []string{"--canary", "1"}, "line 2: field presetz not found"},
		{"bad PromQL", "provider: prometheus\nmetrics: [{name: q, query: 'sum(rate(x[1m])', successCondition: 'result[0] < 1'}]\n",
			[]string{"--canary", "1"}, "metrics[0].query"},
		{"baseline preset without --canary", "presets: {ttftP95Ratio: {max: 2}}\n", nil, "presets.ttftP95Ratio: compares the canary with the stable pods: it needs --canary"},
		{"defaults without --canary", "presets: {errorRatio: {max: 0.1}, e2eLatencyP95Ratio: {}}\n", nil, "presets.e2eLatencyP95Ratio: compares the canary with the stable pods: it needs --canary"},
		{"prometheus without its URL", "provider: prometheus\n", []string{"--canary", "1"}, "provider: prometheus needs --prometheus-url"},
		{"values: prometheus without its URL", "", []string{"--canary", "1", "--set", "analysis.enabled=true", "--set", "analysis.provider=prometheus"},
			"invalid analysis values analysis: provider: prometheus needs --prometheus-url"},
		{"bad prometheus URL", "provider: prometheus\n", []string{"--canary", "1", "--prometheus-url", "prometheus:9090"}, `--prometheus-url: "prometheus:9090": want an http or https URL`},
		{"token file without URL", "", []string{"--canary", "1", "--prometheus-token-file", "/tmp/t"}, "--prometheus-token-file needs --prometheus-url"},
		{"values: zero interval", "", []string{"--canary", "1", "--set", "analysis.enabled=true", "--set", "analysis.interval=0s"},
			"invalid analysis values analysis: interval: 0s: must be positive"},
		{"values: unknown preset (schema)", "", []string{"--canary", "1", "--set", "analysis.enabled=true", "--set", "analysis.presets.nope.max=1"}, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReleaseFakes()
			// A deployed revision first: the refused one is an upgrade.
			_, stderr, code := f.run(t, deployArgs()...)
			require.Equal(t, 0, code, stderr)
			refs := f.cluster.Refs()
			args := deployArgs(append([]string{"--set", "image.tag=v0.11.1"}, tc.args...)...)
			if tc.spec != "" {
				args = append(args, "--analysis", write(t, tc.spec))
			}
			stdout, stderr, code := f.run(t, args...)
			assert.Equal(t, 2, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tc.want)
			assert.NotContains(t, stderr, "pw-never-printed", "the password is never printed")
			assert.Empty(t, stdout)
			assert.Equal(t, refs, f.cluster.Refs(), "nothing applied")
			deps, err := f.cluster.Client.AppsV1().Deployments("").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, deps.Items)
			for _, d := range deps.Items {
				assert.NotContains(t, d.Spec.Template.Spec.Containers[0].Image, "v0.11.1", "the Deployment is unchanged")
			}
			all, err := f.store.ListAll(context.Background(), "")
			require.NoError(t, err)
			assert.Len(t, all, 1, "no record but the first revision's")
		})
	}
}

// TestWaitAnalysisFlags: wait --analysis refuses an invalid spec, one
// that compares with stable pods (a wait has no canary) and a prometheus
// one without its URL with exit 2 before anything is waited for; a valid
// one is baked after the wait and its report is the result's, with the
// verdict per the spec's inconclusive policy (the fakes' pods cannot be
// reached: inconclusive).
func TestWaitAnalysisFlags(t *testing.T) {
	write := func(t *testing.T, spec string) string {
		p := filepath.Join(t.TempDir(), "analysis.yaml")
		require.NoError(t, os.WriteFile(p, []byte(spec), 0o600))
		return p
	}
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, stderr)
	for _, tc := range []struct {
		name, spec string
		args       []string
		want       string
	}{
		{"absurd count", "count: 1000000000\n", nil, "count: 1000000000: must be between 1 and 1000"},
		{"baseline preset", "presets: {ttftP95Ratio: {max: 2}}\n", nil, "presets.ttftP95Ratio: compares the canary with the stable pods"},
		{"prometheus without its URL", "provider: prometheus\n", nil, "provider: prometheus needs --prometheus-url"},
		{"token file without URL", "interval: 1s\n", []string{"--prometheus-token-file", "/tmp/t"}, "--prometheus-token-file needs --prometheus-url"},
		{"no such file", "", []string{"--analysis", "/nonexistent/analysis.yaml"}, "/nonexistent/analysis.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.waiter.Calls()
			args := append([]string{"chat"}, tc.args...)
			if tc.spec != "" {
				args = append(args, "--analysis", write(t, tc.spec))
			}
			stdout, stderr, code := f.runWait(t, args...)
			assert.Equal(t, 2, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tc.want)
			assert.Empty(t, stdout)
			assert.Equal(t, before, f.waiter.Calls(), "nothing waited for")
		})
	}
	for _, tc := range []struct {
		policy string
		code   int
	}{{"fail", 4}, {"pass", 0}} {
		t.Run("unreachable pods, inconclusive: "+tc.policy, func(t *testing.T) {
			spec := write(t, "interval: 1s\ncount: 1\ninconclusive: "+tc.policy+"\npresets: {errorRatio: {max: 0.05}}\n")
			stdout, stderr, code := f.runWait(t, "chat", "--analysis", spec, "-o", "json")
			require.Equal(t, tc.code, code, "stderr: %s", stderr)
			var doc struct {
				Analysis *struct {
					Provider, Outcome, Reason string
				}
				Failure *struct{ Verdict string }
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
			require.NotNil(t, doc.Analysis, "the analysis is in the result")
			assert.Equal(t, "scrape", doc.Analysis.Provider)
			assert.Equal(t, "inconclusive", doc.Analysis.Outcome)
			assert.Contains(t, doc.Analysis.Reason, "no way to reach the pods")
			assert.Contains(t, stderr, "analysis: bake: no canary: the new pods are measured alone for 1s")
			if tc.code == 0 {
				assert.Nil(t, doc.Failure)
				stdout, stderr, code := f.runWait(t, "chat", "--analysis", spec)
				require.Equal(t, 0, code, "stderr: %s", stderr)
				assert.Contains(t, stdout, "ANALYSIS: inconclusive (revision 1, scrape provider, 1 × 1s): ")
				return
			}
			require.NotNil(t, doc.Failure)
			assert.Equal(t, "AnalysisInconclusive", doc.Failure.Verdict)
			statuses, _ := f.records(t)
			assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses, "wait changes no record")
		})
	}
}

// TestWaitAnalysisFromEnvironment: --analysis given through
// VLLMCTL_ANALYSIS (root.go binds every flag to the environment and the
// config file) is read capped as on the command line: a directory or an
// endless file is exit 2 before anything is waited for. The prometheus
// files from there are defaults (TestConfigValuesAreDefaults): without
// --prometheus-url they are not refused.
func TestWaitAnalysisFromEnvironment(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, stderr)
	runWait := func(t *testing.T) (string, string, int) {
		build := func(g *GlobalOptions) *cobra.Command {
			cmd := newWaitCommand(g)
			cmd.PreRunE = func(cmd *cobra.Command, _ []string) error { return g.bindConfig(cmd) }
			return cmd
		}
		return runRecordCommand(t, f.factory(), build, "wait", "chat")
	}
	cases := []struct{ name, analysis, want string }{
		{"a directory", t.TempDir(), "read the analysis file"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ name, analysis, want string }{"an endless file", "/dev/zero", "larger than the cap"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, "")
			t.Setenv("VLLMCTL_ANALYSIS", tc.analysis)
			before := f.waiter.Calls()
			stdout, stderr, code := runWait(t)
			assert.Equal(t, 2, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tc.want)
			assert.Empty(t, stdout)
			assert.Equal(t, before, f.waiter.Calls(), "nothing waited for")
		})
	}
	t.Run("token file from the environment", func(t *testing.T) {
		configEnv(t, "")
		t.Setenv("VLLMCTL_PROMETHEUS_TOKEN_FILE", "/tmp/t")
		_, stderr, code := runWait(t)
		assert.Equal(t, 0, code, "a default, not refused: %s", stderr)
	})
}
