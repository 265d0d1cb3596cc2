package source_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/charts/source"
	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// settings returns Helm settings whose paths are the test's own.
func settings(t *testing.T) *cli.EnvSettings {
	t.Helper()
	home := t.TempDir()
	for k, v := range map[string]string{
		"HELM_CONFIG_HOME":       filepath.Join(home, "config"),
		"HELM_CACHE_HOME":        filepath.Join(home, "cache"),
		"HELM_DATA_HOME":         filepath.Join(home, "data"),
		"HELM_REPOSITORY_CONFIG": filepath.Join(home, "repositories.yaml"),
		"HELM_REPOSITORY_CACHE":  filepath.Join(home, "repository"),
	} {
		t.Setenv(k, v)
	}
	return source.Settings()
}

func TestLocateOrder(t *testing.T) {
	s := settings(t)
	dir := t.TempDir()
	t.Chdir(dir)
	// A local directory that reads like REPO/NAME is the directory.
	require.NoError(t, os.MkdirAll(filepath.Join("r", "handwritten"), 0o755))

	tests := []struct {
		name     string
		ref      string
		opts     source.Options
		want     source.Chart
		wantCode int
	}{
		{name: "built-in", ref: "vllm", want: source.Chart{Ref: "vllm", Builtin: true}},
		{name: "default", ref: "", want: source.Chart{Ref: charts.DefaultChart, Builtin: true}},
		{name: "local path before REPO/NAME", ref: "r/handwritten", want: source.Chart{Ref: "r/handwritten", Path: "r/handwritten"}},
		{name: "plain unknown name", ref: "nope", wantCode: exitcode.Invalid},
		{name: "REPO not added", ref: "q/handwritten", wantCode: exitcode.Invalid},
		{name: "relative path that is missing", ref: "./q/handwritten", wantCode: exitcode.Invalid},
		{name: "oci without a path", ref: "oci://example.com", wantCode: exitcode.Invalid},
		{name: "oci, bad digest", ref: "oci://example.com/charts/x@sha256:abc", wantCode: exitcode.Invalid},
		{name: "oci, empty tag", ref: "oci://example.com/charts/x:", wantCode: exitcode.Invalid},
		{name: "oci, bad name", ref: "oci://example.com/Charts/X", wantCode: exitcode.Invalid},
		{name: "oci with --repo", ref: "oci://example.com/charts/x", opts: source.Options{RepoURL: "https://example.com"}, wantCode: exitcode.Invalid},
		{name: "--plain-http of a built-in chart", ref: "vllm", opts: source.Options{PlainHTTP: true}, wantCode: exitcode.Invalid},
		{name: "--version of a built-in chart", ref: "vllm", opts: source.Options{Version: "1.0.0"}, wantCode: exitcode.Invalid},
		{name: "bad constraint", ref: "r/x", opts: source.Options{Version: "!!"}, wantCode: exitcode.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := source.Locate(context.Background(), s, tt.ref, tt.opts)
			if tt.wantCode != 0 {
				require.Error(t, err)
				var ie *charts.InputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, tt.wantCode, exitcode.Of(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, *got)
		})
	}
}

func TestRepoErrorCodes(t *testing.T) {
	s := settings(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	t.Cleanup(refusing.Close)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name string
		ctx  context.Context
		url  string
		want int
	}{
		{name: "connection refused", ctx: context.Background(), url: gone.URL, want: exitcode.Cluster},
		{name: "403", ctx: context.Background(), url: refusing.URL, want: exitcode.Cluster},
		{name: "interrupted", ctx: cancelled, url: refusing.URL, want: exitcode.Interrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := source.Locate(tt.ctx, s, "x", source.Options{RepoURL: tt.url})
			require.Error(t, err)
			var re *source.RepoError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.url, re.URL)
			assert.Equal(t, tt.want, exitcode.Of(err))
		})
	}

	t.Run("credentials in the URL are not shown", func(t *testing.T) {
		u := "http://ci:s3cret@" + gone.Listener.Addr().String()
		_, err := source.Locate(context.Background(), s, "x", source.Options{RepoURL: u})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "s3cret")
		assert.True(t, errors.As(err, new(*source.RepoError)))
	})
}

// TestRepositoryURLCredentials: a repository added with its credentials in
// the URL (http://user:password@host/) works, and the password appears
// nowhere: not in an error that repeats a chart URL resolved against it,
// not in the chart's source (what a record keeps, without the user too).
func TestRepositoryURLCredentials(t *testing.T) {
	s := settings(t)
	dir := t.TempDir()
	ch, err := loader.LoadDir("../testdata/charts/handwritten")
	require.NoError(t, err)
	_, err = chartutil.Save(ch, dir)
	require.NoError(t, err)
	idx, err := repo.IndexDirectory(dir, "") // relative chart URLs
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	withCreds := "http://ci:s3cret@" + srv.Listener.Addr().String()

	_, err = source.AddRepository(context.Background(), s, repo.Entry{Name: "r", URL: withCreds}, false)
	require.NoError(t, err)
	info, err := os.Stat(s.RepositoryConfig)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	left, err := filepath.Glob(s.RepositoryConfig + ".tmp-*")
	require.NoError(t, err)
	assert.Empty(t, left, "written through a temporary file renamed into place")

	loc, err := source.Locate(context.Background(), s, "r/handwritten", source.Options{})
	require.NoError(t, err)
	assert.NotContains(t, loc.URL, "s3cret")
	assert.NotContains(t, loc.URL, "ci:", "a record keeps no user either")
	assert.NotContains(t, loc.RepoURL, "s3cret")

	// The chart is gone: Helm's getter repeats the URL it fetched.
	require.NoError(t, os.Remove(filepath.Join(dir, "handwritten-"+ch.Metadata.Version+".tgz")))
	require.NoError(t, os.RemoveAll(s.ContentCache))
	_, err = source.Locate(context.Background(), s, "r/handwritten", source.Options{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), "xxxxx", "the URL is there, its password masked")
}

// TestChartReferenceCredentialsMasked: no form of chart reference prints
// the password it holds: an oci:// reference with user:password@ is
// refused (exit 2, the reference named with its password masked), a
// URL-like path and a --repo URL are masked in their errors.
func TestChartReferenceCredentialsMasked(t *testing.T) {
	const password = "HUNTER2pw"
	cases := []struct {
		name string
		ref  string
		opts source.Options
		code int
		says string
	}{
		{name: "oci reference", ref: "oci://alice:" + password + "@127.0.0.1:1/charts/web", opts: source.Options{PlainHTTP: true},
			code: exitcode.Invalid, says: "chart oci://alice:xxxxx@127.0.0.1:1/charts/web: an oci:// reference takes no credentials"},
		{name: "oci reference with a tag", ref: "oci://alice:" + password + "@127.0.0.1:1/charts/web:1.0",
			code: exitcode.Invalid, says: "oci://alice:xxxxx@"},
		{name: "URL as a path", ref: "https://alice:" + password + "@127.0.0.1:1/charts/web.tgz",
			code: exitcode.Invalid, says: "https://alice:xxxxx@"},
		{name: "--repo URL", ref: "web", opts: source.Options{RepoURL: "http://alice:" + password + "@127.0.0.1:1/charts"},
			code: exitcode.Cluster, says: "http://alice:xxxxx@127.0.0.1:1/charts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := source.Load(context.Background(), settings(t), tc.ref, tc.opts)
			require.Error(t, err)
			assert.Equal(t, tc.code, exitcode.Of(err), "%v", err)
			assert.NotContains(t, err.Error(), password)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}
