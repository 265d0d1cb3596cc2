package charts

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// localDepsCopy copies the localdeps chart and its file:// sources to a
// new directory, keeping their relative layout, and returns the chart's
// copy.
func localDepsCopy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyDir(t, "testdata/charts/localdeps", filepath.Join(root, "localdeps"))
	copyDir(t, "testdata/charts/localdeps-src", filepath.Join(root, "localdeps-src"))
	// An archive no dependency produces: `helm dependency update` deletes it.
	old, err := loader.LoadDir("testdata/charts/localdeps-src/beta")
	require.NoError(t, err)
	old.Metadata.Name, old.Metadata.Version = "gamma", "0.0.1"
	_, err = chartutil.Save(old, filepath.Join(root, "localdeps", "charts"))
	require.NoError(t, err)
	return filepath.Join(root, "localdeps")
}

func archives(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "charts"))
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// archiveFiles is the content of a chart archive, file by file.
func archiveFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	ch, err := loader.LoadFile(path)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range ch.Raw {
		out[f.Name] = string(f.Data)
	}
	return out
}

var generatedRe = regexp.MustCompile(`(?m)^generated: .*\n`)

// TestUpdateDependenciesMatchesHelm vendors the file:// dependencies of
// the same chart with vllmctl and with `helm dependency update`: the same
// archives with the same files, and the same Chart.lock but for its
// generated: time.
func TestUpdateDependenciesMatchesHelm(t *testing.T) {
	bin := helmBin(t)
	ours, theirs := localDepsCopy(t), localDepsCopy(t)
	var progress bytes.Buffer
	require.NoError(t, UpdateDependencies(ours, &progress))
	t.Log(progress.String())
	_, stderr, err := runHelm(t, bin, "dependency", "update", theirs)
	require.NoError(t, err, "helm dependency update: %s", stderr)

	assert.Equal(t, []string{"alpha-0.1.7.tgz", "beta-1.2.3.tgz"}, archives(t, ours))
	assert.Equal(t, archives(t, theirs), archives(t, ours))
	for _, a := range archives(t, theirs) {
		assert.Equal(t, archiveFiles(t, filepath.Join(theirs, "charts", a)), archiveFiles(t, filepath.Join(ours, "charts", a)), a)
	}
	ourLock, err := os.ReadFile(filepath.Join(ours, "Chart.lock"))
	require.NoError(t, err)
	theirLock, err := os.ReadFile(filepath.Join(theirs, "Chart.lock"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^generated: "\d{4}-`, string(ourLock))
	assert.Equal(t, generatedRe.ReplaceAllString(string(theirLock), ""), generatedRe.ReplaceAllString(string(ourLock), ""))

	// Unchanged dependencies: the lock file is left as it is, as by Helm.
	progress.Reset()
	require.NoError(t, UpdateDependencies(ours, &progress))
	assert.Contains(t, progress.String(), "the lock file is up to date")
	again, err := os.ReadFile(filepath.Join(ours, "Chart.lock"))
	require.NoError(t, err)
	assert.Equal(t, string(ourLock), string(again))

	// Vendored, the chart renders as Helm renders it.
	ch, err := Load(ours)
	require.NoError(t, err)
	opts := RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: []string{"beta.enabled=true"}}
	r, err := Render(ch, opts)
	require.NoError(t, err)
	stdout, stderr, err := runHelmTemplate(t, bin, theirs, opts)
	require.NoError(t, err, "helm template: %s", stderr)
	helmObjs, err := parseObjects(map[string]string{"helm template output": stdout})
	require.NoError(t, err)
	assertSameObjects(t, helmObjs, withHooks(r))
}

func TestUpdateDependenciesRefuses(t *testing.T) {
	tests := []struct {
		name  string
		chart func(t *testing.T) string
		msg   []string
	}{
		{"remote repositories", func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "missingdeps")
			copyDir(t, missingDeps, dir)
			return dir
		}, []string{"out of scope", "redis 17.3.2 (https://charts.example.com/stable)", "`vllmctl dependency update "}},
		{"a version outside the range", func(t *testing.T) string {
			dir := localDepsCopy(t)
			data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), bytes.Replace(data, []byte("^0.1.0"), []byte("^0.2.0"), 1), 0o644))
			return dir
		}, []string{`can't get a valid version for 1 subchart(s): "alpha" (repository "file://../localdeps-src/alpha", version "^0.2.0"`, "has 0.1.7"}},
		{"a file:// path that does not exist", func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "localdeps")
			copyDir(t, "testdata/charts/localdeps", dir)
			return dir
		}, []string{"repository file://../localdeps-src/alpha", "directory not found"}},
		{"not a directory", func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "nope")
		}, []string{"no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.chart(t)
			before, _ := os.ReadDir(filepath.Join(dir, "charts"))
			err := UpdateDependencies(dir, &bytes.Buffer{})
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			for _, m := range tt.msg {
				assert.Contains(t, err.Error(), m)
			}
			after, _ := os.ReadDir(filepath.Join(dir, "charts"))
			assert.Equal(t, len(before), len(after), "charts/ unchanged")
			assert.NoFileExists(t, filepath.Join(dir, "Chart.lock"))
		})
	}
}

func TestListDependencies(t *testing.T) {
	wrong := writeChart(t, map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: c\nversion: 0.1.0\ndependencies:\n  - name: x\n    version: 2.0.0\n    repository: file://../x\n",
		"charts/x/Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\n",
	})
	status := func(list []DependencyStatus) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.Name+"/"+s.Alias+" "+s.Status+" "+s.Vendored)
		}
		return out
	}
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{"umbrella without its .tgz", func(*testing.T) string { return umbrella },
			[]string{"web/ ok 1.0.0", "cache/ missing ", "worker/worker-a ok 2.1.0", "worker/worker-b ok 2.1.0"}},
		{"umbrella with its .tgz", umbrellaDir,
			[]string{"web/ ok 1.0.0", "cache/ ok 0.1.4", "worker/worker-a ok 2.1.0", "worker/worker-b ok 2.1.0"}},
		{"disabled by default values, vendored or not", func(*testing.T) string { return missingDeps },
			[]string{"redis/ disabled ", "helper/ disabled ", "api/ ok 0.1.0"}},
		{"file:// not vendored yet", func(*testing.T) string { return "testdata/charts/localdeps" },
			[]string{"alpha/ missing ", "beta/ disabled "}},
		{"wrong version", func(*testing.T) string { return wrong }, []string{"x/ wrong version 1.0.0"}},
		{"no dependencies", func(*testing.T) string { return handwritten }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Load(tt.dir(t))
			require.NoError(t, err)
			fresh := chartState(t, ch)
			list, err := ListDependencies(ch)
			require.NoError(t, err)
			assert.Equal(t, tt.want, status(list))
			assert.Equal(t, fresh, chartState(t, ch), "the chart is not changed")
		})
	}
}
