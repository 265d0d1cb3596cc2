package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/internal/testregistry"
)

// publishAs packages the handwritten chart named name at each version
// into r (without its values schema) and rewrites its index.
func (r *chartRepo) publishAs(t *testing.T, name string, versions ...string) {
	t.Helper()
	for _, v := range versions {
		ch, err := loader.LoadDir(handwrittenChart)
		require.NoError(t, err)
		ch.Metadata.Name, ch.Metadata.Version = name, v
		ch.Schema = nil // it refuses the global values a parent passes
		_, err = chartutil.Save(ch, r.dir)
		require.NoError(t, err)
	}
	idx, err := repo.IndexDirectory(r.dir, r.srv.URL)
	require.NoError(t, err)
	idx.SortEntries()
	require.NoError(t, idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644))
}

// pushChartAs packages the handwritten chart named name at version v and
// pushes it with `helm push` to r under charts/ (without its values
// schema).
func pushChartAs(t *testing.T, helm testregistry.HelmFunc, r *testregistry.Registry, name, v string) {
	t.Helper()
	ch, err := loader.LoadDir(handwrittenChart)
	require.NoError(t, err)
	ch.Metadata.Name, ch.Metadata.Version = name, v
	ch.Schema = nil // it refuses the global values a parent passes
	tgz, err := chartutil.Save(ch, t.TempDir())
	require.NoError(t, err)
	helm("", append([]string{"push", tgz, "oci://" + r.Host + "/charts"}, r.Transport()...)...)
}

// umbrellaChart writes a chart "app" whose Chart.yaml declares deps (YAML
// list items) into a new directory and returns it.
func umbrellaChart(t *testing.T, deps string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"),
		[]byte("apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n"+deps), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\n"), 0o644))
	return dir
}

// chartFiles is the content of each chart archive of dir/charts, file by
// file, by archive name.
func chartFiles(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "charts"))
	require.NoError(t, err)
	out := map[string]map[string]string{}
	for _, e := range entries {
		ch, err := loader.LoadFile(filepath.Join(dir, "charts", e.Name()))
		require.NoError(t, err)
		files := map[string]string{}
		for _, f := range ch.Raw {
			files[f.Name] = string(f.Data)
		}
		out[e.Name()] = files
	}
	return out
}

// chartsDir lists dir/charts (nil when it does not exist).
func chartsDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "charts"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

var lockGenerated = regexp.MustCompile(`(?m)^generated: .*\n`)

// readLock is dir's Chart.lock without its generated: time.
func readLock(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "Chart.lock"))
	require.NoError(t, err)
	return lockGenerated.ReplaceAllString(string(b), "")
}

// TestDependencyUpdateRemote vendors, with vllmctl and with `helm
// dependency update`, a chart with a dependency in an HTTP chart
// repository given by URL (not added), one in a repository with basic
// auth added with `vllmctl repo add` (@models), and one in an OCI registry
// with basic auth (charts pushed with helm push, credentials from `helm
// registry login`): the same archives with the same files, the same
// Chart.lock but for its generated: time, and the subcharts render. Then
// the failures: a repository or registry that cannot be reached or
// refuses the credentials (6), a version or chart that is not there, a
// repository name not added (2); charts/ is not changed by any.
func TestDependencyUpdateRemote(t *testing.T) {
	regBin, helmBin := testregistry.Bins(t)
	env := helmHome(t)
	reg := testregistry.Start(t, regBin, testregistry.Config{User: "ci", Pass: "s3cret"})
	helm := testregistry.Helm(t, helmBin, env)
	helm("s3cret", "registry", "login", reg.Host, "--plain-http", "--username", "ci", "--password-stdin")
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0"} {
		pushChartAs(t, helm, reg, "ocichart", v)
	}
	public := newChartRepo(t, nil)
	public.publishAs(t, "handwritten", "0.1.0", "0.1.5", "0.2.0")
	private := newChartRepo(t, basicAuth("u", "pw"))
	private.publishAs(t, "private", "0.2.0", "1.0.0")
	_, stderr, code := runCLIWithStdin(t, "pw\n", "repo", "add", "models", private.srv.URL, "--username", "u", "--password-stdin")
	require.Equal(t, ExitOK, code, stderr)

	// Distinct chart names: Helm's downloader keys the repository of a
	// dependency by chart name (not alias), so one chart name from two
	// repositories is resolved in the wrong one, by helm too.
	deps := fmt.Sprintf(`  - name: handwritten
    alias: fromurl
    version: ~0.1
    repository: %s
  - name: private
    alias: fromalias
    version: 0.2.0
    repository: "@models"
  - name: ocichart
    alias: fromoci
    version: ~0.3
    repository: oci://%s/charts
`, public.srv.URL, reg.Host)
	ours, theirs := umbrellaChart(t, deps), umbrellaChart(t, deps)

	stdout, stderr, code := runTemplateCLI(t, "dependency", "update", ours, "--plain-http")
	require.Equal(t, ExitOK, code, stderr)
	t.Log(stderr)
	assert.Empty(t, stdout, "progress goes to stderr")
	assert.Contains(t, stderr, "Wrote "+filepath.Join(ours, "Chart.lock"))
	assert.NotContains(t, stderr, "pw@")
	helm("", "dependency", "update", theirs, "--plain-http")

	assert.Equal(t, []string{"handwritten-0.1.5.tgz", "ocichart-0.3.1.tgz", "private-0.2.0.tgz"}, chartsDir(t, ours))
	assert.Equal(t, chartFiles(t, theirs), chartFiles(t, ours))
	lock := readLock(t, ours)
	assert.Equal(t, readLock(t, theirs), lock)
	assert.Contains(t, lock, "repository: "+private.srv.URL, "@models is locked by its URL, as by Helm")

	out, stderr, code := runTemplateCLI(t, "template", "demo", ours, "-n", "apps")
	require.Equal(t, ExitOK, code, stderr)
	for _, want := range []string{"helm.sh/chart: fromurl-0.1.5", "helm.sh/chart: fromalias-0.2.0", "helm.sh/chart: fromoci-0.3.1", "name: demo-app"} {
		assert.Contains(t, out, want)
	}
	out, stderr, code = runTemplateCLI(t, "dependency", "list", ours)
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, 3, strings.Count(out, " ok\n"), out)

	// Again: the same versions, the lock file stays.
	_, stderr, code = runTemplateCLI(t, "dep", "up", ours, "--plain-http")
	require.Equal(t, ExitOK, code, stderr)
	assert.Contains(t, stderr, "the lock file is up to date")

	vendored := chartsDir(t, ours)
	failures := []struct {
		name  string
		stdin string
		deps  string // "" = the chart above
		args  []string
		code  int
		err   []string
	}{
		{name: "repository down (6)", deps: fmt.Sprintf("  - name: handwritten\n    version: ~0.1\n    repository: http://127.0.0.1:%d/charts\n", testregistry.FreePort(t)),
			code: ExitClusterErr, err: []string{"chart repository http://127.0.0.1:", "fetch index", "connection refused"}},
		{name: "registry down (6)", deps: fmt.Sprintf("  - name: handwritten\n    version: ~0.3\n    repository: oci://127.0.0.1:%d/charts\n", testregistry.FreePort(t)),
			code: ExitClusterErr, err: []string{"registry oci://127.0.0.1:", "connection refused"}},
		{name: "wrong registry password (6)", stdin: "nope\n", args: []string{"--username", "ci", "--password-stdin"},
			code: ExitClusterErr, err: []string{"registry oci://" + reg.Host + "/charts", "401"}},
		{name: "no such version in a repository (2)", deps: "  - name: private\n    version: 9.9.9\n    repository: \"@models\"\n",
			code: ExitInvalid, err: []string{`"private" (repository "` + private.srv.URL + `", version "9.9.9")`}},
		{name: "no such chart in a repository (2)", deps: fmt.Sprintf("  - name: nope\n    version: ~0.1\n    repository: %s\n", public.srv.URL),
			code: ExitInvalid, err: []string{"dependency nope (repository " + public.srv.URL + ")", "nope chart not found in repo " + public.srv.URL}},
		{name: "no tag in range in a registry (2)", deps: fmt.Sprintf("  - name: ocichart\n    version: ~9\n    repository: oci://%s/charts\n", reg.Host),
			code: ExitInvalid, err: []string{"dependency ocichart (repository oci://" + reg.Host + "/charts)", "could not locate a version matching provided version string ~9"}},
		{name: "no such version in a registry (2)", deps: fmt.Sprintf("  - name: ocichart\n    version: 9.9.9\n    repository: oci://%s/charts\n", reg.Host),
			code: ExitInvalid, err: []string{"dependency ocichart (repository oci://" + reg.Host + "/charts)", "ocichart:9.9.9", "not found"}},
		{name: "no such chart in a registry (2)", deps: fmt.Sprintf("  - name: nope\n    version: ~0.1\n    repository: oci://%s/charts\n", reg.Host),
			code: ExitInvalid, err: []string{"dependency nope (repository oci://" + reg.Host + "/charts)"}},
		{name: "repository name not added (2)", deps: "  - name: handwritten\n    version: ~0.1\n    repository: \"@nope\"\n",
			code: ExitInvalid, err: []string{`no repository definition for handwritten (repository "@nope")`, "vllmctl repo add"}},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			dir := ours
			if f.deps != "" {
				dir = umbrellaChart(t, f.deps)
			}
			out, stderr, code := runCLIWithStdin(t, f.stdin, append([]string{"dependency", "update", dir, "--plain-http"}, f.args...)...)
			require.Equal(t, f.code, code, stderr)
			t.Log(stderr)
			assert.Empty(t, out)
			for _, e := range f.err {
				assert.Contains(t, stderr, e)
			}
			assert.NotContains(t, stderr, "nope@")
			assert.NotContains(t, stderr, "Save error occurred")
			if f.deps != "" {
				assert.Empty(t, chartsDir(t, dir), "charts/ unchanged")
				assert.NoFileExists(t, filepath.Join(dir, "Chart.lock"))
			} else {
				assert.Equal(t, vendored, chartsDir(t, dir), "charts/ unchanged")
			}
		})
	}

	t.Run("the URL of an added repository: its stored credentials", func(t *testing.T) {
		dir := umbrellaChart(t, "  - name: private\n    version: ^1\n    repository: "+private.srv.URL+"/\n")
		_, stderr, code := runTemplateCLI(t, "dependency", "update", dir)
		require.Equal(t, ExitOK, code, stderr)
		assert.Contains(t, stderr, `...Successfully got an update from the "models" chart repository`)
		assert.Equal(t, []string{"private-1.0.0.tgz"}, chartsDir(t, dir))
	})

	t.Run("a repository down, with the archives vendored: nothing changes (6)", func(t *testing.T) {
		before := chartFiles(t, ours)
		lockBefore, err := os.ReadFile(filepath.Join(ours, "Chart.lock"))
		require.NoError(t, err)
		public.srv.Close()
		out, stderr, code := runTemplateCLI(t, "dependency", "update", ours, "--plain-http")
		require.Equal(t, ExitClusterErr, code, stderr)
		assert.Empty(t, out)
		assert.Contains(t, stderr, "chart repository "+public.srv.URL)
		assert.Equal(t, before, chartFiles(t, ours))
		lockAfter, err := os.ReadFile(filepath.Join(ours, "Chart.lock"))
		require.NoError(t, err)
		assert.Equal(t, string(lockBefore), string(lockAfter))
	})
}

// TestDependencyUpdateRegistryTLS: an OCI dependency of a registry serving
// HTTPS with a certificate of its own, reached with --ca-file or
// --repo-insecure-skip-tls-verify; without either the certificate is not
// verified (6). `dependency list` takes the chart source flags for an
// oci:// CHART.
func TestDependencyUpdateRegistryTLS(t *testing.T) {
	regBin, helmBin := testregistry.Bins(t)
	env := helmHome(t)
	r := testregistry.Start(t, regBin, testregistry.Config{TLS: true})
	helm := testregistry.Helm(t, helmBin, env)
	pushChartAs(t, helm, r, "ocichart", "0.3.1")
	deps := fmt.Sprintf("  - name: ocichart\n    version: ~0.3\n    repository: oci://%s/charts\n", r.Host)

	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{name: "unknown authority (6)", code: ExitClusterErr, err: "registry oci://" + r.Host + "/charts: update dependencies:"},
		{name: "--ca-file", args: []string{"--ca-file", r.CAFile}},
		{name: "--repo-insecure-skip-tls-verify", args: []string{"--repo-insecure-skip-tls-verify"}},
		{name: "missing --ca-file (2)", args: []string{"--ca-file", filepath.Join(t.TempDir(), "nope.pem")}, code: ExitInvalid, err: "--ca-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := umbrellaChart(t, deps)
			out, stderr, code := runTemplateCLI(t, append([]string{"dependency", "update", dir}, tt.args...)...)
			require.Equal(t, tt.code, code, stderr)
			assert.Empty(t, out)
			assert.Contains(t, stderr, tt.err)
			if tt.code == ExitOK {
				assert.Equal(t, []string{"ocichart-0.3.1.tgz"}, chartsDir(t, dir))
				assert.FileExists(t, filepath.Join(dir, "Chart.lock"))
			} else {
				assert.Empty(t, chartsDir(t, dir))
				assert.NoFileExists(t, filepath.Join(dir, "Chart.lock"))
			}
		})
	}

	t.Run("dependency list of an oci:// CHART with the source flags", func(t *testing.T) {
		out, stderr, code := runTemplateCLI(t, "dependency", "list", "oci://"+r.Host+"/charts/ocichart", "--version", "~0.3", "--ca-file", r.CAFile)
		require.Equal(t, ExitOK, code, stderr)
		assert.Empty(t, out)
		assert.Contains(t, stderr, "has no dependencies")
		_, stderr, code = runTemplateCLI(t, "dependency", "list", "oci://"+r.Host+"/charts/ocichart", "--version", "~0.3")
		assert.Equal(t, ExitClusterErr, code, stderr)
	})
}
