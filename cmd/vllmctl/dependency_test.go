package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testCharts = "../../charts/testdata/charts/"

func TestDependencyListCommand(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		golden string // stdout; "" = empty
		code   int
		stderr string // substring; "" = empty stderr when the code is 0
	}{
		{name: "table: ok, missing, aliases", args: []string{"dependency", "list", testCharts + "umbrella"},
			golden: "dependency-list-umbrella"},
		{name: "json: disabled by the default values", args: []string{"dep", "ls", testCharts + "missingdeps", "-o", "json"},
			golden: "dependency-list-missingdeps-json"},
		{name: "yaml", args: []string{"dependency", "list", testCharts + "localdeps", "-o", "yaml"},
			golden: "dependency-list-localdeps-yaml"},
		{name: "no dependencies", args: []string{"dependency", "list", testCharts + "handwritten"},
			stderr: "chart " + testCharts + "handwritten has no dependencies\n"},
		{name: "built-in chart", args: []string{"dependency", "list", "vllm", "-o", "json"}, golden: "dependency-list-none-json"},
		{name: "unknown chart", args: []string{"dependency", "list", "./nope"}, code: ExitInvalid, stderr: "Error: chart ./nope: not a chart directory"},
		{name: "bad output", args: []string{"dependency", "list", testCharts + "umbrella", "-o", "wide"}, code: ExitInvalid, stderr: `--output "wide"`},
		{name: "no CHART", args: []string{"dependency", "list"}, code: ExitInvalid, stderr: "Error: accepts 1 arg(s)"},
		{name: "no subcommand", args: []string{"dependency"}, code: ExitInvalid, stderr: "a subcommand is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runTemplateCLI(t, tt.args...)
			assert.Equal(t, tt.code, code, "stderr: %s", stderr)
			if tt.golden != "" {
				assertGolden(t, tt.golden+".golden", stdout)
			} else {
				assert.Empty(t, stdout)
			}
			if tt.stderr == "" {
				assert.Empty(t, stderr)
			} else {
				assert.Contains(t, stderr, tt.stderr)
			}
		})
	}
}

// copyLocalDeps copies the localdeps chart and its file:// sources,
// keeping their relative layout, and returns the chart's copy.
func copyLocalDeps(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(root, "localdeps"), os.DirFS(testCharts+"localdeps")))
	require.NoError(t, os.CopyFS(filepath.Join(root, "localdeps-src"), os.DirFS(testCharts+"localdeps-src")))
	return filepath.Join(root, "localdeps")
}

func TestDependencyUpdateCommand(t *testing.T) {
	dir := copyLocalDeps(t)
	stdout, stderr, code := runTemplateCLI(t, "dependency", "update", dir)
	require.Equal(t, ExitOK, code, stderr)
	assert.Empty(t, stdout, "progress goes to stderr")
	assert.Contains(t, stderr, "Saved "+filepath.Join(dir, "charts", "alpha-0.1.7.tgz"))
	assert.Contains(t, stderr, "Wrote "+filepath.Join(dir, "Chart.lock"))
	assert.FileExists(t, filepath.Join(dir, "charts", "beta-1.2.3.tgz"))

	// Now vendored: listed ok, and it renders without warnings.
	stdout, stderr, code = runTemplateCLI(t, "dependency", "list", dir)
	require.Equal(t, ExitOK, code, stderr)
	assertGolden(t, "dependency-list-localdeps-vendored.golden", stdout)
	stdout, stderr, code = runTemplateCLI(t, "template", "shop", dir, "--set", "beta.enabled=true")
	require.Equal(t, ExitOK, code, stderr)
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "name: shop-alpha")
	assert.Contains(t, stdout, "name: shop-beta")

	// Again: nothing changed, the lock file stays.
	_, stderr, code = runTemplateCLI(t, "dep", "up", dir)
	require.Equal(t, ExitOK, code, stderr)
	assert.Contains(t, stderr, "the lock file is up to date")
}

func TestDependencyUpdateRefuses(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "missingdeps")
	require.NoError(t, os.CopyFS(remote, os.DirFS(testCharts+"missingdeps")))
	tests := []struct {
		name   string
		args   []string
		stderr []string
	}{
		{"remote repositories and a file:// path that is not there: checked before any fetch", []string{"dependency", "update", remote}, []string{
			"Error: chart " + remote + ": repository file://../missingdeps-src/helper: " + filepath.Join(remote, "../missingdeps-src/helper") + ": directory not found",
		}},
		{"a built-in chart", []string{"dependency", "update", "vllm"}, []string{"Error: chart vllm: is a built-in chart"}},
		{"not a directory", []string{"dependency", "update", "./nope"}, []string{"Error: chart ./nope: no such file or directory"}},
		{"no CHART", []string{"dependency", "update"}, []string{"Error: accepts 1 arg(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runTemplateCLI(t, tt.args...)
			assert.Equal(t, ExitInvalid, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			for _, s := range tt.stderr {
				assert.Contains(t, stderr, s)
			}
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one error line: %q", stderr)
		})
	}
	assert.NoFileExists(t, filepath.Join(remote, "Chart.lock"), "nothing written")
	entries, err := os.ReadDir(filepath.Join(remote, "charts"))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "charts/ unchanged")
}
