package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts"
)

// handwrittenChart is the chart the test repositories serve.
const handwrittenChart = "../../charts/testdata/charts/handwritten"

// helmHome gives the test its own Helm paths (config, cache, data and the
// repository files), as the helm CLI reads them from HELM_*; it returns
// the environment that points helm at the same paths.
func helmHome(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{
		"HELM_CONFIG_HOME":       filepath.Join(home, "config"),
		"HELM_CACHE_HOME":        filepath.Join(home, "cache"),
		"HELM_DATA_HOME":         filepath.Join(home, "data"),
		"HELM_REPOSITORY_CONFIG": filepath.Join(home, "config", "repositories.yaml"),
		"HELM_REPOSITORY_CACHE":  filepath.Join(home, "cache", "repository"),
		"HELM_CONTENT_CACHE":     "",
	}
	var out []string
	for k, v := range env {
		t.Setenv(k, v)
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	require.NoError(t, os.Unsetenv("HELM_CONTENT_CACHE")) // t.Setenv restores it
	return out
}

// chartRepo is an HTTP chart repository served from a directory: .tgz
// files packaged by Helm's chartutil.Save and an index.yaml made by
// Helm's repo.IndexDirectory.
type chartRepo struct {
	dir string
	srv *httptest.Server
}

// newChartRepo serves an empty repository; wrap (optional) wraps the file
// server, e.g. to require basic auth.
func newChartRepo(t *testing.T, wrap func(http.Handler) http.Handler) *chartRepo {
	t.Helper()
	r := &chartRepo{dir: t.TempDir()}
	var h http.Handler = http.FileServer(http.Dir(r.dir))
	if wrap != nil {
		h = wrap(h)
	}
	r.srv = httptest.NewServer(h)
	t.Cleanup(r.srv.Close)
	return r
}

// publish packages the handwritten chart at each version and rewrites the
// index; it returns the path of the last .tgz.
func (r *chartRepo) publish(t *testing.T, versions ...string) string {
	t.Helper()
	var last string
	for _, v := range versions {
		ch, err := loader.LoadDir(handwrittenChart)
		require.NoError(t, err)
		ch.Metadata.Version = v
		last, err = chartutil.Save(ch, r.dir)
		require.NoError(t, err)
	}
	idx, err := repo.IndexDirectory(r.dir, r.srv.URL)
	require.NoError(t, err)
	idx.SortEntries()
	require.NoError(t, idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644))
	return last
}

// tgz is the path of the packaged chart of version v.
func (r *chartRepo) tgz(v string) string {
	return filepath.Join(r.dir, "handwritten-"+v+".tgz")
}

// basicAuth requires user:pass.
func basicAuth(user, pass string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		})
	}
}

// templateOf renders the packaged chart at path (the reference output).
func templateOf(t *testing.T, path string) string {
	t.Helper()
	out, stderr, code := runTemplateCLI(t, "template", "demo", path, "-n", "apps")
	require.Equal(t, ExitOK, code, stderr)
	return out
}

func TestRepoAddListRemove(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, nil)
	r.publish(t, "0.1.0")
	other := newChartRepo(t, nil)
	other.publish(t, "0.1.0")

	out, stderr, code := runTemplateCLI(t, "repo", "list", "-o", "json")
	require.Equal(t, ExitOK, code, stderr)
	assert.JSONEq(t, `[]`, out)
	requireValid(t, "repo-list", out)

	steps := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "add", args: []string{"repo", "add", "r", r.srv.URL}, stdout: `"r" has been added`},
		{name: "add again, same", args: []string{"repo", "add", "r", r.srv.URL}, stdout: `"r" already exists with the same configuration, skipping`},
		{name: "add again, other URL", args: []string{"repo", "add", "r", other.srv.URL}, code: ExitInvalid, stderr: "repository r: already added"},
		{name: "add with a slash", args: []string{"repo", "add", "a/b", r.srv.URL}, code: ExitInvalid, stderr: `repository name "a/b": contains "/"`},
		{name: "add other", args: []string{"repo", "add", "o", other.srv.URL}, stdout: `"o" has been added`},
		{name: "list", args: []string{"repo", "list"}, stdout: "NAME   URL\nr      " + r.srv.URL + "\no      " + other.srv.URL + "\n"},
		{name: "remove", args: []string{"repo", "remove", "o"}, stdout: `"o" has been removed`},
		{name: "remove again", args: []string{"repo", "remove", "o"}, code: ExitInvalid, stderr: "repository o: not added"},
		{name: "update unknown", args: []string{"repo", "update", "o"}, code: ExitInvalid, stderr: "repository o: not added"},
		{name: "update", args: []string{"repo", "update"}, stdout: `"r" updated`},
		{name: "no subcommand", args: []string{"repo"}, code: ExitInvalid, stderr: "a subcommand is required"},
		{name: "add without URL", args: []string{"repo", "add", "x"}, code: ExitInvalid, stderr: "accepts 2 arg(s)"},
		{name: "add, not a URL scheme Helm fetches", args: []string{"repo", "add", "x", "ftp://example.com"}, code: ExitInvalid, stderr: "repository URL ftp://example.com"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, stderr, code := runTemplateCLI(t, s.args...)
			require.Equal(t, s.code, code, stderr)
			assert.Contains(t, out, s.stdout)
			assert.Contains(t, stderr, s.stderr)
		})
	}

	// Helm's own files: repositories.yaml read by Helm's repo package, and
	// the index cache where helm keeps it.
	f, err := repo.LoadFile(os.Getenv("HELM_REPOSITORY_CONFIG"))
	require.NoError(t, err)
	require.Len(t, f.Repositories, 1)
	assert.Equal(t, "r", f.Repositories[0].Name)
	assert.Equal(t, r.srv.URL, f.Repositories[0].URL)
	assert.FileExists(t, filepath.Join(os.Getenv("HELM_REPOSITORY_CACHE"), "r-index.yaml"))
	assert.NoFileExists(t, filepath.Join(os.Getenv("HELM_REPOSITORY_CACHE"), "o-index.yaml"), "remove drops the cached index")

	out, stderr, code = runTemplateCLI(t, "repo", "list", "-o", "json")
	require.Equal(t, ExitOK, code, stderr)
	requireValid(t, "repo-list", out)
	var list []map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, []map[string]string{{"name": "r", "url": r.srv.URL}}, list)
}

func TestTemplateFromRepository(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, nil)
	r.publish(t, "0.1.0", "0.1.5", "0.2.0", "0.3.0-rc.1")
	_, stderr, code := runTemplateCLI(t, "repo", "add", "r", r.srv.URL)
	require.Equal(t, ExitOK, code, stderr)

	tests := []struct {
		name string
		args []string
		want string // the version rendered
	}{
		{name: "highest matching ~0.1", args: []string{"r/handwritten", "--version", "~0.1"}, want: "0.1.5"},
		{name: "exact", args: []string{"r/handwritten", "--version", "0.1.0"}, want: "0.1.0"},
		{name: "range", args: []string{"r/handwritten", "--version", ">=0.1.1 <0.2"}, want: "0.1.5"},
		{name: "latest stable", args: []string{"r/handwritten"}, want: "0.2.0"},
		{name: "pre-release asked for", args: []string{"r/handwritten", "--version", "0.3.0-rc.1"}, want: "0.3.0-rc.1"},
		{name: "--repo URL, not added", args: []string{"handwritten", "--repo", r.srv.URL, "--version", "~0.1"}, want: "0.1.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runTemplateCLI(t, append([]string{"template", "demo", "-n", "apps"}, tt.args...)...)
			require.Equal(t, ExitOK, code, stderr)
			assert.Empty(t, stderr)
			assert.Equal(t, templateOf(t, r.tgz(tt.want)), out)
			assert.Contains(t, out, "helm.sh/chart: handwritten-"+tt.want)
		})
	}

	t.Run("cached by digest in Helm's content cache", func(t *testing.T) {
		b, err := os.ReadFile(r.tgz("0.2.0"))
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		assert.FileExists(t, filepath.Join(os.Getenv("HELM_CACHE_HOME"), "content", hex.EncodeToString(sum[:1]), hex.EncodeToString(sum[:])+".chart"))
	})

	t.Run("lint takes the flags too", func(t *testing.T) {
		_, stderr, code := runTemplateCLI(t, "lint", "r/handwritten", "--version", "~0.1")
		require.Equal(t, ExitOK, code, stderr)
	})
}

func TestRepoUpdateSeesNewVersion(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, nil)
	r.publish(t, "0.1.0")
	_, stderr, code := runTemplateCLI(t, "repo", "add", "r", r.srv.URL)
	require.Equal(t, ExitOK, code, stderr)

	r.publish(t, "0.1.7")
	_, stderr, code = runTemplateCLI(t, "template", "demo", "r/handwritten", "-n", "apps", "--version", "0.1.7")
	require.Equal(t, ExitInvalid, code, "the cached index has no 0.1.7 yet")
	assert.Contains(t, stderr, "no version of handwritten in repository "+r.srv.URL+" matches 0.1.7 (versions: 0.1.0)")

	out, stderr, code := runTemplateCLI(t, "repo", "update", "r")
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, "\"r\" updated\n", out)

	out, stderr, code = runTemplateCLI(t, "template", "demo", "r/handwritten", "-n", "apps", "--version", "~0.1")
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, templateOf(t, r.tgz("0.1.7")), out)

	// Index and chart are cached: the repository is not needed any more.
	r.srv.Close()
	again, stderr, code := runTemplateCLI(t, "template", "demo", "r/handwritten", "-n", "apps", "--version", "~0.1")
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, out, again)
}

func TestRepositoryBasicAuth(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, basicAuth("ci", "s3cret"))
	r.publish(t, "0.1.0")
	want := templateOf(t, r.tgz("0.1.0"))

	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{name: "--repo with the password", stdin: "s3cret\n", args: []string{"template", "demo", "handwritten", "-n", "apps", "--repo", r.srv.URL, "--username", "ci", "--password-stdin"}},
		{name: "--repo, wrong password", stdin: "nope\n", args: []string{"template", "demo", "handwritten", "-n", "apps", "--repo", r.srv.URL, "--username", "ci", "--password-stdin"},
			code: ExitClusterErr, stderr: "chart repository " + r.srv.URL + ": fetch index: failed to fetch " + r.srv.URL + "/index.yaml : 401 Unauthorized"},
		{name: "--repo, no credentials", args: []string{"template", "demo", "handwritten", "-n", "apps", "--repo", r.srv.URL},
			code: ExitClusterErr, stderr: "401 Unauthorized"},
		{name: "--password-stdin without --username", stdin: "s3cret\n", args: []string{"template", "demo", "handwritten", "--repo", r.srv.URL, "--password-stdin"},
			code: ExitInvalid, stderr: "--password-stdin needs --username"},
		{name: "repo add, wrong password: not added", stdin: "nope", args: []string{"repo", "add", "p", r.srv.URL, "--username", "ci", "--password-stdin"},
			code: ExitClusterErr, stderr: "repository p: chart repository " + r.srv.URL + ": fetch index"},
		{name: "repo add with the password", stdin: "s3cret", args: []string{"repo", "add", "p", r.srv.URL, "--username", "ci", "--password-stdin"}},
		{name: "REPO/NAME uses the stored credentials", args: []string{"template", "demo", "p/handwritten", "-n", "apps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runCLIWithStdin(t, tt.stdin, tt.args...)
			require.Equal(t, tt.code, code, stderr)
			assert.Contains(t, stderr, tt.stderr)
			assert.NotContains(t, stderr, "s3cret")
			if tt.code == ExitOK && tt.args[0] == "template" {
				assert.Equal(t, want, out)
			}
		})
	}
}

func TestRepositoryErrors(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, nil)
	r.publish(t, "0.1.0", "0.2.0")
	_, stderr, code := runTemplateCLI(t, "repo", "add", "r", r.srv.URL)
	require.Equal(t, ExitOK, code, stderr)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{name: "unreachable --repo", args: []string{"template", "demo", "handwritten", "--repo", gone.URL},
			code: ExitClusterErr, stderr: "Error: chart handwritten: chart repository " + gone.URL + ": fetch index:"},
		{name: "unreachable repo add", args: []string{"repo", "add", "g", gone.URL},
			code: ExitClusterErr, stderr: "connection refused"},
		{name: "unreachable host name", args: []string{"template", "demo", "handwritten", "--repo", "http://charts.invalid"},
			code: ExitClusterErr, stderr: "chart repository http://charts.invalid: fetch index"},
		{name: "unknown chart", args: []string{"template", "demo", "r/nope"},
			code: ExitInvalid, stderr: `Error: chart r/nope: no chart "nope" in repository ` + r.srv.URL},
		{name: "unknown chart, --repo", args: []string{"template", "demo", "nope", "--repo", r.srv.URL},
			code: ExitInvalid, stderr: `Error: chart nope: no chart "nope" in repository`},
		{name: "unknown version", args: []string{"template", "demo", "r/handwritten", "--version", "~9"},
			code: ExitInvalid, stderr: "Error: chart r/handwritten: no version of handwritten in repository " + r.srv.URL + " matches ~9 (versions: 0.2.0, 0.1.0)"},
		{name: "bad constraint", args: []string{"template", "demo", "r/handwritten", "--version", "one point two"},
			code: ExitInvalid, stderr: `Error: --version one point two: not a SemVer constraint (chart r/handwritten)`},
		{name: "repository not added", args: []string{"template", "demo", "q/handwritten"},
			code: ExitInvalid, stderr: `Error: chart q/handwritten: not a chart directory nor a built-in chart, and "q" is not an added repository`},
		{name: "plain name, no --repo: today's error", args: []string{"template", "demo", "handwritten"},
			code: ExitInvalid, stderr: "Error: chart handwritten: not a chart directory nor a built-in chart"},
		{name: "--version of a local chart", args: []string{"template", "demo", handwrittenChart, "--version", "1.2.3"},
			code: ExitInvalid, stderr: "--version and the repository flags apply to a chart of a repository"},
		{name: "--repo with REPO/NAME", args: []string{"template", "demo", "r/handwritten", "--repo", r.srv.URL},
			code: ExitInvalid, stderr: "with --repo, CHART is the name of a chart in the repository"},
		{name: "deploy: nothing applied", args: []string{"deploy", "demo", "r/nope"},
			code: ExitInvalid, stderr: `no chart "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runTemplateCLI(t, tt.args...)
			require.Equal(t, tt.code, code, stderr)
			assert.Contains(t, stderr, tt.stderr)
			assert.Empty(t, out)
		})
	}
	f, err := repo.LoadFile(os.Getenv("HELM_REPOSITORY_CONFIG"))
	require.NoError(t, err)
	assert.False(t, f.Has("g"), "an unreachable repository is not added")
}

// TestTemplateFromRepositoryMatchesHelm: template of NAME --repo URL
// --version renders what `helm template` renders for the same reference,
// and a repository added with helm repo add is seen as REPO/NAME.
func TestTemplateFromRepositoryMatchesHelm(t *testing.T) {
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		t.Skip("HELM_BIN is not set: run with HELM_BIN=$(hack/install-helm.sh)")
	}
	env := helmHome(t)
	r := newChartRepo(t, nil)
	r.publish(t, "0.1.0", "0.1.5", "0.2.0")
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), append(env, "KUBECONFIG="+filepath.Join(t.TempDir(), "kubeconfig"))...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr.String())
		return string(out)
	}

	theirs := helm("template", "demo", "handwritten", "--repo", r.srv.URL, "--version", "~0.1", "-n", "apps")
	ours, stderr, code := runTemplateCLI(t, "template", "demo", "handwritten", "--repo", r.srv.URL, "--version", "~0.1", "-n", "apps")
	require.Equal(t, ExitOK, code, stderr)
	assert.Contains(t, theirs, "helm.sh/chart: handwritten-0.1.5", "helm picks the highest matching version")
	assert.NotEmpty(t, decodeStream(t, ours))
	assert.Equal(t, decodeStream(t, theirs), decodeStream(t, ours))

	helm("repo", "add", "viahelm", r.srv.URL)
	out, stderr, code := runTemplateCLI(t, "repo", "list", "-o", "json")
	require.Equal(t, ExitOK, code, stderr)
	assert.JSONEq(t, `[{"name":"viahelm","url":"`+r.srv.URL+`"}]`, out)
	fromAdded, stderr, code := runTemplateCLI(t, "template", "demo", "viahelm/handwritten", "--version", "~0.1", "-n", "apps")
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, ours, fromAdded)

	_, stderr, code = runTemplateCLI(t, "repo", "add", "viavllmctl", r.srv.URL)
	require.Equal(t, ExitOK, code, stderr)
	assert.Contains(t, helm("repo", "list"), "viavllmctl")
}

// TestDeployFromRepositoryRecordsSource: a deploy of a chart pulled from a
// repository records where it came from (the .tgz's URL) and its digest;
// the result, status and history show them, and a rollback to that
// revision keeps them. A chart directory records neither.
func TestDeployFromRepositoryRecordsSource(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, nil)
	builtin, err := charts.Load("vllm")
	require.NoError(t, err)
	tgz, err := chartutil.Save(builtin, r.dir)
	require.NoError(t, err)
	idx, err := repo.IndexDirectory(r.dir, r.srv.URL)
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644))
	b, err := os.ReadFile(tgz)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	url := r.srv.URL + "/" + filepath.Base(tgz)

	f := newReleaseFakes()
	stdout, stderr, code := f.run(t, append(deployArgs("vllm", "--repo", r.srv.URL, "--version", builtin.Metadata.Version), "-o", "json")...)
	require.Equal(t, ExitOK, code, stderr)
	requireValid(t, "result", stdout)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, url, res["chartSource"])
	assert.Equal(t, digest, res["chartDigest"])

	rec, err := f.store.InNamespace("ml").Get(context.Background(), "chat", 1)
	require.NoError(t, err)
	assert.Equal(t, url, rec.Chart.Source)
	assert.Equal(t, digest, rec.Chart.Digest)

	stdout, stderr, code = f.run(t, "status", "chat")
	require.Equal(t, ExitOK, code, stderr)
	assert.Contains(t, stdout, "CHART SOURCE: "+url+" ("+digest+")")

	// A chart directory records no source; a rollback to revision 1 does.
	_, stderr, code = f.run(t, deployArgs("../../charts/vllm", "--set", "image.tag=v0.11.1")...)
	require.Equal(t, ExitOK, code, stderr)
	_, stderr, code = f.run(t, "rollback", "chat", "--to-revision", "1")
	require.Equal(t, ExitOK, code, stderr)
	stdout, stderr, code = f.runAny(t, "history", "chat", "-o", "json")
	require.Equal(t, ExitOK, code, stderr)
	requireValid(t, "history", stdout)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
	require.Len(t, rows, 3)
	assert.Equal(t, digest, rows[0]["chartDigest"])
	assert.NotContains(t, rows[1], "chartSource", "a directory records no source")
	assert.Equal(t, digest, rows[2]["chartDigest"], "the rollback restored revision 1's chart")
}

// TestRepoNamesAreSafe: repo add refuses a name holding a control
// character (an escape sequence) as Helm refuses one with "/" (exit 2,
// the name quoted, nothing added), and repo list prints the names and
// URLs of a repositories.yaml written by other means sanitised.
func TestRepoNamesAreSafe(t *testing.T) {
	helmHome(t)
	r := newChartRepo(t, nil)
	r.publish(t, "0.1.0")
	cases := []struct {
		name, repo string
		says       string
	}{
		{name: "escape sequence", repo: "evil\x1b[31mred", says: `repository name "evil\x1b[31mred": contains a control character`},
		{name: "newline", repo: "a\nb", says: `repository name "a\nb": contains a control character`},
		{name: "empty", repo: "", says: "repository name: must be non-empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := runTemplateCLI(t, "repo", "add", tc.repo, r.srv.URL)
			assert.Equal(t, ExitInvalid, code, stderr)
			assert.Contains(t, stderr, tc.says)
			assert.NotContains(t, stderr+out, "\x1b")
		})
	}
	f, err := repo.LoadFile(os.Getenv("HELM_REPOSITORY_CONFIG"))
	if err == nil {
		assert.Empty(t, f.Repositories, "nothing added")
	}

	// A name written by hand (or by an older tool) is printed sanitised.
	require.NoError(t, os.MkdirAll(filepath.Dir(os.Getenv("HELM_REPOSITORY_CONFIG")), 0o755))
	require.NoError(t, os.WriteFile(os.Getenv("HELM_REPOSITORY_CONFIG"), []byte(
		"apiVersion: v1\nrepositories:\n- name: \"evil\\e[2Jname\"\n  url: "+r.srv.URL+"\n"), 0o644))
	out, stderr, code := runTemplateCLI(t, "repo", "list")
	require.Equal(t, ExitOK, code, stderr)
	assert.NotContains(t, out, "\x1b")
	assert.Contains(t, out, "evil")
}

// TestSourceInputsCapped: --ca-file, --cert-file and --key-file are read
// at most 4 MiB and --password-stdin at most 64 KiB, on every command
// that takes them: larger ones are exit 2 naming the flag (and the file)
// and the cap, before any request (a larger or endless one was read whole
// by Helm's clients).
func TestSourceInputsCapped(t *testing.T) {
	huge := filepath.Join(t.TempDir(), "huge.pem")
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte("# not a certificate\n"), (maxTLSFileBytes/20)+1), 0o600))
	tooLarge := "file too large: larger than the cap of 4 MiB"
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{name: "template --ca-file", args: []string{"template", "web", "--repo", "http://127.0.0.1:1/", "--ca-file", huge}, want: "--ca-file " + huge + ": " + tooLarge},
		{name: "template oci --cert-file", args: []string{"template", "web", "oci://127.0.0.1:1/charts/web", "--cert-file", huge, "--key-file", huge}, want: "--cert-file " + huge + ": " + tooLarge},
		{name: "repo add --key-file", args: []string{"repo", "add", "x", "http://127.0.0.1:1/", "--cert-file", "/nonexistent", "--key-file", huge}, want: "--key-file " + huge + ": " + tooLarge},
		{name: "registry login --ca-file", stdin: "pw\n", args: []string{"registry", "login", "127.0.0.1:1", "--username", "u", "--password-stdin", "--ca-file", huge}, want: "--ca-file " + huge + ": " + tooLarge},
		{name: "repo add --password-stdin", stdin: strings.Repeat("p", maxPasswordBytes+1), args: []string{"repo", "add", "x", "http://127.0.0.1:1/", "--username", "u", "--password-stdin"}, want: "--password-stdin: stdin holds more than the cap of 64 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLIWithStdin(t, tc.stdin, tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tc.want)
		})
	}
}
