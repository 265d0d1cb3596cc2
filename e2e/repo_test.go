//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// A chart repository on the local cluster: an HTTP repository (charts
// packaged by Helm, index made by Helm's repo package) served from a
// directory. The release is deployed by REPO/NAME at a --version
// constraint; the record keeps the .tgz's URL and digest; `repo update`
// sees a new version; a version the index lacks (exit 2) and a repository
// that is down (exit 6) apply nothing and record nothing.
func TestDeployFromChartRepository(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	dir := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	publish := func(version string) (url, digest string) {
		t.Helper()
		ch, err := loader.LoadDir(relChart)
		require.NoError(t, err)
		ch.Metadata.Version = version
		tgz, err := chartutil.Save(ch, dir)
		require.NoError(t, err)
		idx, err := repo.IndexDirectory(dir, srv.URL)
		require.NoError(t, err)
		require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
		b, err := os.ReadFile(tgz)
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		return srv.URL + "/" + filepath.Base(tgz), "sha256:" + hex.EncodeToString(sum[:])
	}
	url1, digest1 := publish("0.1.0")
	run := f.run(t, "repo", "add", "r", srv.URL)
	require.Equal(t, exitcode.OK, run.code, "%s", run)

	deploy := func(args ...string) relRun {
		return f.run(t, append([]string{"deploy", relName, "--progress", "plain", "--timeout", "2m", "-o", "json"}, args...)...)
	}
	r1 := deploy("r/relchart", "--version", "~0.1")
	require.Equal(t, exitcode.OK, r1.code, "%s", r1)
	res := result(t, r1)
	assert.Equal(t, "relchart-0.1.0", res.Chart)
	assert.Equal(t, url1, res.ChartSource)
	assert.Equal(t, digest1, res.ChartDigest)
	revs := f.history(t)
	require.Len(t, revs, 1)
	assert.Equal(t, digest1, revs[0].Chart.Digest, "the record on the cluster keeps the digest")

	url2, digest2 := publish("0.2.0")
	run = f.run(t, "repo", "update")
	require.Equal(t, exitcode.OK, run.code, "%s", run)
	r2 := deploy("r/relchart", "--set", "image=example.com/vllm:v2")
	require.Equal(t, exitcode.OK, r2.code, "%s", r2)
	res = result(t, r2)
	assert.Equal(t, "relchart-0.2.0", res.Chart, "repo update saw the new version")
	assert.Equal(t, url2, res.ChartSource)
	assert.Equal(t, digest2, res.ChartDigest)

	bad := deploy("r/relchart", "--version", "9.9.9")
	assert.Equal(t, exitcode.Invalid, bad.code, "%s", bad)
	assert.Contains(t, bad.stderr, "9.9.9")
	srv.Close()
	down := deploy("relchart", "--repo", srv.URL, "--set", "image=example.com/vllm:v3")
	assert.Equal(t, exitcode.Cluster, down.code, "%s", down)
	assert.Contains(t, down.stderr, srv.URL)
	revs = f.history(t)
	require.Len(t, revs, 2, "nothing recorded by the refused deploys")
	assert.Equal(t, "example.com/vllm:v2", f.image(t), "nothing applied")
}
