package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/charts/lint"
)

// badLintChart triggers every lint rule.
const badLintChart = "../../testdata/charts/bad-lint"

// runLintCLI runs the root command in-process, hermetically (no kubeconfig,
// no config file, no VLLMCTL_* variables), and returns stdout, stderr and
// the exit code main would return.
func runLintCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(tmp, "no-kubeconfig"))
	t.Setenv("HOME", tmp)
	t.Setenv("XDG_CONFIG_HOME", tmp)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "VLLMCTL_") {
			t.Setenv(name, "")
		}
	}
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	ctx := context.Background()
	cmd := NewRootCommand(ctx, streams)
	cmd.SetArgs(args)
	code := ExitCode(cmd.ErrOrStderr(), cmd.ExecuteContext(ctx))
	require.NoError(t, FlushStreams(cmd))
	return out.String(), errOut.String(), code
}

func decodeLintReport(t *testing.T, stdout string) lintReport {
	t.Helper()
	var r lintReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), "stdout: %s", stdout)
	return r
}

func ruleIDs(findings []lint.Finding) map[string]bool {
	out := map[string]bool{}
	for _, f := range findings {
		out[f.Rule] = true
	}
	return out
}

func TestLintBadChartJSON(t *testing.T) {
	stdout, stderr, code := runLintCLI(t, "lint", badLintChart, "-n", "inference", "-o", "json")
	assert.Equal(t, ExitInvalid, code, "stderr: %s", stderr)
	r := decodeLintReport(t, stdout)
	fired := ruleIDs(r.Findings)
	for _, rule := range lint.Rules() {
		assert.True(t, fired[rule.ID], "rule %s missing from %s", rule.ID, stdout)
	}
	errs, warns, _ := lint.Counts(r.Findings)
	assert.Equal(t, errs, r.Errors)
	assert.Equal(t, warns, r.Warnings)
	assert.Positive(t, r.Errors)
	assert.Contains(t, stderr, "Error: lint: ")
	assert.Contains(t, stdout, `"field": "spec.template.spec.containers[0].resources.requests.nvidia.com/gpu"`)
}

func TestLintBadChartTable(t *testing.T) {
	stdout, _, code := runLintCLI(t, "lint", badLintChart, "-n", "inference")
	assert.Equal(t, ExitInvalid, code)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.NotEmpty(t, lines)
	assert.Equal(t, []string{"SEVERITY", "RULE", "OBJECT", "TEMPLATE", "FIELD", "MESSAGE"}, strings.Fields(lines[0]))
	for _, rule := range lint.Rules() {
		assert.Contains(t, stdout, " "+rule.ID+" ")
	}
	assert.True(t, strings.HasPrefix(lines[1], "error "), "errors come first: %q", lines[1])
	assert.Contains(t, stdout, "Deployment default/release-name-selector   bad-lint/templates/deployment-selector.yaml")
}

// TestLintSubcharts lints charts with subcharts: the subcharts' objects
// are linted and their findings name the subchart's template; the
// warnings of the render (dependencies left out) go to stderr.
func TestLintSubcharts(t *testing.T) {
	const chartsDir = "../../charts/testdata/charts/"
	t.Run("findings on a subchart's objects name its template", func(t *testing.T) {
		stdout, stderr, code := runLintCLI(t, "lint", chartsDir+"umbrella", "-n", "inference", "--set", "tags.backend=false", "-o", "json")
		assert.Equal(t, ExitOK, code, "stderr: %s", stderr)
		r := decodeLintReport(t, stdout)
		require.NotEmpty(t, r.Findings)
		for _, f := range r.Findings {
			assert.Equal(t, "Deployment inference/release-name-web", f.Object)
			assert.Equal(t, "umbrella/charts/web/templates/deployment.yaml", f.Template)
		}
		assert.Contains(t, stdout, `"template": "umbrella/charts/web/templates/deployment.yaml"`)
		assert.Equal(t, "warning: dependency cache ~0.1.0 (file://../umbrella-src/cache) is not in charts/ and is disabled (tags backend): rendering without it\n"+
			"lint umbrella: 0 error(s), 4 warning(s), 0 info\n", stderr)
	})
	t.Run("table", func(t *testing.T) {
		stdout, _, code := runLintCLI(t, "lint", chartsDir+"umbrella", "-n", "inference", "--set", "tags.backend=false")
		assert.Equal(t, ExitOK, code)
		assert.Contains(t, stdout, "Deployment inference/release-name-web   umbrella/charts/web/templates/deployment.yaml   spec.template.spec.containers[0]")
	})
	t.Run("dependencies left out are warned about", func(t *testing.T) {
		stdout, stderr, code := runLintCLI(t, "lint", chartsDir+"missingdeps", "-n", "inference")
		assert.Equal(t, ExitOK, code, "stderr: %s", stderr)
		assert.Empty(t, stdout)
		assert.Equal(t, 3, strings.Count(stderr, "warning: dependency "), stderr)
	})
	t.Run("an enabled dependency not vendored", func(t *testing.T) {
		stdout, stderr, code := runLintCLI(t, "lint", chartsDir+"missingdeps", "-n", "inference", "--set", "tags.extras=true")
		assert.Equal(t, ExitInvalid, code)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "vendor it with `vllmctl dependency update "+chartsDir+"missingdeps`")
	})
	t.Run("a subchart's schema", func(t *testing.T) {
		_, stderr, code := runLintCLI(t, "lint", chartsDir+"umbrella", "--set", "tags.backend=false", "--set", "web.replicas=0")
		assert.Equal(t, ExitInvalid, code)
		assert.Equal(t, "Error: values do not match the schema of chart umbrella/charts/web: web.replicas: minimum: got 0, want 1\n", stderr)
	})
}

func TestLintCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		wantRules  []string // rule ids of the findings, in order (JSON output only)
		errors     int
		warnings   int
		stdout     string // substring of stdout
		stderr     string // substring of stderr
		emptyStdio bool   // stdout must be empty
	}{
		{name: "built-in chart in its own namespace is clean",
			args: []string{"lint", "-n", "inference", "-o", "json"}, wantRules: []string{"VL010"}},
		{name: "built-in chart by name with golden values",
			args: []string{"lint", "vllm", "-n", "inference", "-f", "../../testdata/values/gpu4.yaml", "-o", "json"}, wantRules: []string{}},
		{name: "built-in chart table shows the info finding",
			args: []string{"lint", "--namespace", "inference"}, stdout: "info       VL010   Deployment inference/release-name"},
		{name: "default namespace only warns",
			args: []string{"lint", "-o", "json"}, wantRules: []string{"VL008", "VL010"}, warnings: 1},
		{name: "strict turns the warning into an error",
			args: []string{"lint", "--strict", "-o", "json"}, code: ExitInvalid, wantRules: []string{"VL008", "VL010"}, errors: 1,
			stderr: "1 of them warnings counted as errors with --strict"},
		{name: "values that make a warning, yaml output",
			args:   []string{"lint", "-n", "inference", "--set", "image.tag=latest", "--set", "strategy.maxSurge=0,strategy.maxUnavailable=1", "-o", "yaml"},
			stdout: "rule: VL009", stderr: "0 error(s), 1 warning(s), 0 info"},
		{name: "schema error names the values path",
			args: []string{"lint", "-n", "inference", "--set", "resources.gpu=half"}, code: ExitInvalid,
			stderr: "resources.gpu", emptyStdio: true},
		{name: "typo in a values key",
			args: []string{"lint", "-n", "inference", "--set", "replicaCoutn=2"}, code: ExitInvalid,
			stderr: "replicaCoutn", emptyStdio: true},
		{name: "unknown chart",
			args: []string{"lint", "./no-such-chart"}, code: ExitInvalid, stderr: "no-such-chart", emptyStdio: true},
		{name: "bad output format",
			args: []string{"lint", "-o", "wide"}, code: ExitInvalid, stderr: `--output "wide"`, emptyStdio: true},
		{name: "too many arguments",
			args: []string{"lint", "vllm", "extra"}, code: ExitInvalid, emptyStdio: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runLintCLI(t, tc.args...)
			assert.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", stdout, stderr)
			if tc.wantRules != nil {
				r := decodeLintReport(t, stdout)
				rules := make([]string, 0, len(r.Findings))
				for _, f := range r.Findings {
					rules = append(rules, f.Rule)
				}
				assert.Equal(t, tc.wantRules, rules)
				assert.Equal(t, tc.errors, r.Errors)
				assert.Equal(t, tc.warnings, r.Warnings)
			}
			if tc.stdout != "" {
				assert.Contains(t, stdout, tc.stdout)
			}
			if tc.stderr != "" {
				assert.Contains(t, stderr, tc.stderr)
			}
			if tc.emptyStdio {
				assert.Empty(t, stdout)
			}
		})
	}
}

func TestLintYAMLReportRoundTrips(t *testing.T) {
	stdout, _, code := runLintCLI(t, "lint", badLintChart, "-n", "inference", "-o", "yaml")
	assert.Equal(t, ExitInvalid, code)
	var r lintReport
	require.NoError(t, yaml.Unmarshal([]byte(stdout), &r))
	assert.Len(t, ruleIDs(r.Findings), len(lint.Rules()))
}
