//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/testregistry"
)

// runStdin runs vllmctl args with stdin.
func (f *relFixture) runStdin(t *testing.T, stdin string, args ...string) relRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, stdout, stderr := f.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	code := exitCodeOf(t, cmd.Run())
	return relRun{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// A chart in an OCI registry on the local cluster: a distribution registry
// with basic auth, charts put there by `helm push`, the credentials of
// `vllmctl registry login` (Helm's registry config, shared with helm). The
// release is deployed by tag, by --version constraint and by digest, and
// the record on the cluster keeps the reference and the manifest digest.
// A digest of nothing or of another tag (exit 2), a wrong password and a
// registry that is down (exit 6) apply nothing and record nothing.
func TestDeployFromOCIRegistry(t *testing.T) {
	shareCluster(t, 4)
	regBin, helmBin := testregistry.Bins(t)
	f := newRelFixture(t)
	r := testregistry.Start(t, regBin, testregistry.Config{User: "ci", Pass: "s3cret"})
	// helm and vllmctl share HOME, so Helm's registry config.
	helm := testregistry.Helm(t, helmBin, []string{"HOME=" + f.home, "XDG_CONFIG_HOME=" + f.home})
	helm("s3cret", "registry", "login", r.Host, "--plain-http", "--username", "ci", "--password-stdin")
	ch, err := loader.LoadDir(relChart)
	require.NoError(t, err)
	digests := map[string]string{}
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.1.5", "0.2.0"} {
		ch.Metadata.Version = v
		_, digests[v] = r.Push(t, helm, ch, dir)
	}
	ref := r.Ref("relchart")

	deploy := func(chartRef string, args ...string) relRun {
		return f.run(t, append([]string{"deploy", relName, chartRef, "--plain-http", "--progress", "plain", "--timeout", "2m", "-o", "json"}, args...)...)
	}
	check := func(r relRun, chart, source, digest string) {
		t.Helper()
		require.Equal(t, exitcode.OK, r.code, "%s", r)
		res := result(t, r)
		assert.Equal(t, chart, res.Chart)
		assert.Equal(t, source, res.ChartSource)
		assert.Equal(t, digest, res.ChartDigest)
		rec, err := f.store.Get(context.Background(), relName, res.Revision)
		require.NoError(t, err)
		assert.Equal(t, source, rec.Chart.Source, "the record on the cluster keeps the reference")
		assert.Equal(t, digest, rec.Chart.Digest, "and the digest")
	}

	check(deploy(ref+":0.1.0"), "relchart-0.1.0", ref+":0.1.0", digests["0.1.0"])
	check(deploy(ref, "--version", "~0.1", "--set", "image=example.com/vllm:v2"), "relchart-0.1.5", ref+":0.1.5", digests["0.1.5"])
	check(deploy(ref+"@"+digests["0.2.0"], "--set", "image=example.com/vllm:v3"), "relchart-0.2.0", ref+"@"+digests["0.2.0"], digests["0.2.0"])
	st := f.run(t, "status", relName)
	require.Equal(t, exitcode.OK, st.code, "%s", st)
	assert.Contains(t, st.stdout, "CHART SOURCE: "+ref+"@"+digests["0.2.0"])
	hist := f.run(t, "history", relName, "-o", "json")
	require.Equal(t, exitcode.OK, hist.code, "%s", hist)
	assert.Contains(t, hist.stdout, digests["0.1.5"], "history shows each revision's digest")

	refused := func(name string, code int, want string, r relRun) {
		t.Helper()
		assert.Equal(t, code, r.code, "%s: %s", name, r)
		assert.Contains(t, r.stderr, want, name)
		assert.Len(t, f.history(t), 3, "%s: nothing recorded", name)
		assert.Equal(t, "example.com/vllm:v3", f.image(t), "%s: nothing applied", name)
	}
	zero := "sha256:" + strings.Repeat("0", 64)
	refused("digest of nothing", exitcode.Invalid, ref+"@"+zero, deploy(ref+"@"+zero, "--set", "image=example.com/vllm:v4"))
	refused("digest of another tag", exitcode.Invalid, "digest mismatch: tag 0.1.0 is "+digests["0.1.0"],
		deploy(ref+":0.1.0@"+digests["0.2.0"], "--set", "image=example.com/vllm:v4"))
	refused("wrong password", exitcode.Cluster, "chart "+ref,
		f.runStdin(t, "nope\n", "deploy", relName, ref, "--plain-http", "--username", "ci", "--password-stdin",
			"--version", "0.2.0", "--set", "image=example.com/vllm:v4", "--timeout", "2m"))
	r.Stop()
	refused("registry down", exitcode.Cluster, "chart "+ref, deploy(ref, "--version", "0.2.0", "--set", "image=example.com/vllm:v4"))
}
