package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/provenance"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/testprov"
	"github.com/vllmctl/vllmctl/internal/testregistry"
)

// verifyHelmBin returns HELM_BIN, or skips the test (fails it when CI is
// set), as the other comparisons with helm do.
func verifyHelmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		msg := "HELM_BIN is not set: run with HELM_BIN=$(hack/install-helm.sh)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatal("CI is set, so this test may not be skipped: " + msg)
		}
		t.Skip(msg)
	}
	return bin
}

// runHelm runs helm with args in env (helmHome's); it returns stdout and
// whether helm succeeded, with its stderr.
func runHelm(t *testing.T, bin string, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), append(env, "KUBECONFIG="+filepath.Join(t.TempDir(), "kubeconfig"), "DOCKER_CONFIG="+t.TempDir())...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return string(out), stderr.String(), err
}

// packHandwritten packages the handwritten chart at version v into dir
// (Helm's chartutil.Save: dir/handwritten-v.tgz); edit, if set, changes
// the chart first.
func packHandwritten(t *testing.T, dir, v string, edit func(*chart.Chart)) string {
	t.Helper()
	ch, err := loader.LoadDir(handwrittenChart)
	require.NoError(t, err)
	ch.Metadata.Version = v
	if edit != nil {
		edit(ch)
	}
	p, err := chartutil.Save(ch, dir)
	require.NoError(t, err)
	return p
}

// tamper replaces the chart at tgz with another build of it (same name
// and version, other content): its .prov no longer matches.
func tamper(t *testing.T, tgz, v string) {
	t.Helper()
	tampered := packHandwritten(t, t.TempDir(), v, func(ch *chart.Chart) { ch.Metadata.Description = "tampered" })
	b, err := os.ReadFile(tampered)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tgz, b, 0o644))
}

// digestOf is the "sha256:<hex>" of the file at p, as provenance
// records it.
func digestOf(t *testing.T, p string) string {
	t.Helper()
	d, err := provenance.DigestFile(p)
	require.NoError(t, err)
	return "sha256:" + d
}

// TestVerifyPackagedChartMatchesHelm: template --verify --keyring of a
// local chart accepts or refuses each input as `helm template --verify
// --keyring` does on the same files: a signed .tgz is accepted (and
// renders what helm renders); a tampered .tgz, a tampered .prov, no .prov,
// a keyring without the signer's key, a chart directory and a built-in
// chart are refused with exit 2, naming the chart and what failed.
func TestVerifyPackagedChartMatchesHelm(t *testing.T) {
	bin := verifyHelmBin(t)
	env := helmHome(t)
	keys := t.TempDir()
	signer := testprov.NewKey(t, keys, "signer", "signer@example.com")
	other := testprov.NewKey(t, keys, "other", "other@example.com")

	tests := []struct {
		name string
		// chart returns CHART (made in dir).
		chart   func(t *testing.T, dir string) string
		keyring string
		// wantErr is in our error when refused ("" when accepted).
		wantErr string
	}{
		{"signed", func(t *testing.T, dir string) string {
			tgz := packHandwritten(t, dir, "0.1.0", nil)
			signer.Sign(t, tgz)
			return tgz
		}, signer.Keyring, ""},
		{"keyring with several keys", func(t *testing.T, dir string) string {
			tgz := packHandwritten(t, dir, "0.1.0", nil)
			signer.Sign(t, tgz)
			return tgz
		}, testprov.Keyring(t, keys, "both.gpg", other, signer), ""},
		{"tampered .tgz", func(t *testing.T, dir string) string {
			tgz := packHandwritten(t, dir, "0.1.0", nil)
			signer.Sign(t, tgz)
			tamper(t, tgz, "0.1.0")
			return tgz
		}, signer.Keyring, "sha256 sum does not match for handwritten-0.1.0.tgz"},
		{"tampered .prov", func(t *testing.T, dir string) string {
			tgz := packHandwritten(t, dir, "0.1.0", nil)
			prov := signer.Sign(t, tgz)
			b, err := os.ReadFile(prov)
			require.NoError(t, err)
			require.Contains(t, string(b), "version: 0.1.0")
			require.NoError(t, os.WriteFile(prov, []byte(strings.Replace(string(b), "version: 0.1.0", "version: 0.1.1", 1)), 0o644))
			return tgz
		}, signer.Keyring, "does not verify"},
		{"unsigned", func(t *testing.T, dir string) string {
			return packHandwritten(t, dir, "0.1.0", nil)
		}, signer.Keyring, "no provenance file"},
		{"key not in keyring", func(t *testing.T, dir string) string {
			tgz := packHandwritten(t, dir, "0.1.0", nil)
			signer.Sign(t, tgz)
			return tgz
		}, other.Keyring, "does not verify with keyring " + other.Keyring},
		{"no keyring", func(t *testing.T, dir string) string {
			tgz := packHandwritten(t, dir, "0.1.0", nil)
			signer.Sign(t, tgz)
			return tgz
		}, filepath.Join(keys, "missing.gpg"), "load keyring"},
		{"chart directory", func(t *testing.T, dir string) string {
			return handwrittenChart
		}, signer.Keyring, "unpacked charts cannot be verified"},
		{"built-in chart", func(t *testing.T, dir string) string {
			return "vllm"
		}, signer.Keyring, "a built-in chart cannot be verified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := tt.chart(t, t.TempDir())
			args := []string{"template", "demo", ref, "-n", "apps", "--verify", "--keyring", tt.keyring}
			theirs, helmStderr, helmErr := runHelm(t, bin, env, args...)
			ours, stderr, code := runTemplateCLI(t, args...)
			if tt.wantErr == "" {
				require.NoError(t, helmErr, "helm accepts it: %s", helmStderr)
				require.Equal(t, ExitOK, code, stderr)
				assert.Equal(t, decodeStream(t, theirs), decodeStream(t, ours))
				return
			}
			require.Error(t, helmErr, "helm refuses it too")
			t.Logf("helm: %s", strings.TrimSpace(helmStderr))
			assert.Equal(t, ExitInvalid, code, stderr)
			assert.Empty(t, ours)
			assert.Contains(t, stderr, "chart "+ref+": --verify: ")
			assert.Contains(t, stderr, tt.wantErr)
		})
	}

	t.Run("without --verify the tampered chart is used", func(t *testing.T) {
		tgz := packHandwritten(t, t.TempDir(), "0.1.0", nil)
		signer.Sign(t, tgz)
		tamper(t, tgz, "0.1.0")
		_, stderr, code := runTemplateCLI(t, "template", "demo", tgz, "-n", "apps")
		require.Equal(t, ExitOK, code, stderr)
	})
}

// TestVerifyRepositoryChartMatchesHelm: template NAME --repo URL --verify
// fetches the .prov served beside the .tgz and accepts or refuses as helm
// does: signed (accepted), tampered (the repository serves another .tgz,
// its index updated, with the old .prov: refused), no .prov (refused).
func TestVerifyRepositoryChartMatchesHelm(t *testing.T) {
	bin := verifyHelmBin(t)
	signer := testprov.NewKey(t, t.TempDir(), "signer", "signer@example.com")
	tests := []struct {
		name    string
		publish func(t *testing.T, r *chartRepo)
		wantErr string
	}{
		{"signed", func(t *testing.T, r *chartRepo) {
			signer.Sign(t, r.publish(t, "0.1.0"))
		}, ""},
		{"tampered", func(t *testing.T, r *chartRepo) {
			tgz := r.publish(t, "0.1.0")
			signer.Sign(t, tgz)
			tamper(t, tgz, "0.1.0")
			r.publish(t) // the index has the tampered .tgz's digest
		}, "sha256 sum does not match for handwritten-0.1.0.tgz"},
		{"no .prov", func(t *testing.T, r *chartRepo) {
			r.publish(t, "0.1.0")
		}, "no provenance file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := helmHome(t)
			r := newChartRepo(t, nil)
			tt.publish(t, r)
			args := []string{"template", "demo", "handwritten", "--repo", r.srv.URL, "--version", "0.1.0", "-n", "apps", "--verify", "--keyring", signer.Keyring}
			theirs, helmStderr, helmErr := runHelm(t, bin, env, args...)
			ours, stderr, code := runTemplateCLI(t, args...)
			if tt.wantErr == "" {
				require.NoError(t, helmErr, "helm accepts it: %s", helmStderr)
				require.Equal(t, ExitOK, code, stderr)
				assert.Equal(t, decodeStream(t, theirs), decodeStream(t, ours))
				// Again, from the content cache: the .prov is checked again.
				_, stderr, code = runTemplateCLI(t, args...)
				require.Equal(t, ExitOK, code, stderr)
				return
			}
			require.Error(t, helmErr, "helm refuses it too")
			t.Logf("helm: %s", strings.TrimSpace(helmStderr))
			assert.Equal(t, ExitInvalid, code, stderr)
			assert.Empty(t, ours)
			assert.Contains(t, stderr, "chart handwritten: --verify: ")
			assert.Contains(t, stderr, tt.wantErr)
		})
	}
}

// TestVerifyOCIChartMatchesHelm: a chart pushed with helm push with its
// .prov beside it (Helm pushes it as the provenance layer) is accepted by
// template --verify; one pushed without is refused (exit 2), as helm
// template --verify does on the same references.
func TestVerifyOCIChartMatchesHelm(t *testing.T) {
	regBin, helmBin := testregistry.Bins(t)
	env := helmHome(t)
	r := testregistry.Start(t, regBin, testregistry.Config{})
	helm := testregistry.Helm(t, helmBin, env)
	signer := testprov.NewKey(t, t.TempDir(), "signer", "signer@example.com")
	dir := t.TempDir()
	signed := packHandwritten(t, dir, "0.1.0", nil)
	signer.Sign(t, signed)
	helm("", append([]string{"push", signed, "oci://" + r.Host + "/charts"}, r.Transport()...)...)
	unsigned := packHandwritten(t, dir, "0.2.0", nil)
	helm("", append([]string{"push", unsigned, "oci://" + r.Host + "/charts"}, r.Transport()...)...)

	tests := []struct {
		name, version string
		keyring       string
		wantErr       string
	}{
		{"signed", "0.1.0", signer.Keyring, ""},
		{"unsigned", "0.2.0", signer.Keyring, "has no provenance: the manifest has no layer of media type application/vnd.cncf.helm.chart.provenance.v1.prov"},
		{"key not in keyring", "0.1.0", testprov.NewKey(t, t.TempDir(), "other", "other@example.com").Keyring, "does not verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"template", "demo", r.Ref("handwritten"), "--version", tt.version, "--plain-http", "-n", "apps", "--verify", "--keyring", tt.keyring}
			theirs, helmStderr, helmErr := runHelm(t, helmBin, env, args...)
			ours, stderr, code := runTemplateCLI(t, args...)
			if tt.wantErr == "" {
				require.NoError(t, helmErr, "helm accepts it: %s", helmStderr)
				require.Equal(t, ExitOK, code, stderr)
				assert.Equal(t, decodeStream(t, stripPullLines(theirs)), decodeStream(t, ours))
				return
			}
			require.Error(t, helmErr, "helm refuses it too")
			t.Logf("helm: %s", strings.TrimSpace(helmStderr))
			assert.Equal(t, ExitInvalid, code, stderr)
			assert.Empty(t, ours)
			assert.Contains(t, stderr, "chart "+r.Ref("handwritten")+": --verify: ")
			assert.Contains(t, stderr, tt.wantErr)
		})
	}

	t.Run("deploy records the signer", func(t *testing.T) {
		builtin, err := charts.Load("vllm")
		require.NoError(t, err)
		tgz, err := chartutil.Save(builtin, t.TempDir())
		require.NoError(t, err)
		signer.Sign(t, tgz)
		helm("", append([]string{"push", tgz, "oci://" + r.Host + "/charts"}, r.Transport()...)...)
		f := newReleaseFakes()
		stdout, stderr, code := f.run(t, append(deployArgs(r.Ref("vllm"), "--plain-http", "--version", builtin.Metadata.Version,
			"--verify", "--keyring", signer.Keyring), "-o", "json")...)
		require.Equal(t, ExitOK, code, stderr)
		requireValid(t, "result", stdout)
		rec, err := f.store.InNamespace("ml").Get(context.Background(), "chat", 1)
		require.NoError(t, err)
		assert.Equal(t, signer.Identity, rec.Chart.Signer)
		assert.Equal(t, digestOf(t, tgz), rec.Chart.SignedDigest)
	})
}

// TestDeployVerify: deploy --verify of a signed .tgz records the signer
// and the signed .tgz's digest, which the result, status (table and JSON)
// and history show; a tampered, unsigned or wrongly keyed chart, or a
// chart directory, is refused with exit 2 by deploy, diff and fleet
// deploy: nothing applied, nothing recorded.
func TestDeployVerify(t *testing.T) {
	helmHome(t)
	keys := t.TempDir()
	signer := testprov.NewKey(t, keys, "signer", "signer@example.com")
	other := testprov.NewKey(t, keys, "other", "other@example.com")
	builtin, err := charts.Load("vllm")
	require.NoError(t, err)
	pack := func(t *testing.T) string {
		t.Helper()
		tgz, err := chartutil.Save(builtin, t.TempDir())
		require.NoError(t, err)
		return tgz
	}

	t.Run("signed: recorded and shown", func(t *testing.T) {
		tgz := pack(t)
		signer.Sign(t, tgz)
		digest := digestOf(t, tgz)
		f := newReleaseFakes()
		stdout, stderr, code := f.run(t, append(deployArgs(tgz, "--verify", "--keyring", signer.Keyring), "-o", "json")...)
		require.Equal(t, ExitOK, code, stderr)
		requireValid(t, "result", stdout)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		assert.Equal(t, signer.Identity, res["chartSigner"])
		assert.Equal(t, digest, res["chartSignedDigest"])
		assert.NotContains(t, res, "chartSource", "a local .tgz has no source")

		rec, err := f.store.InNamespace("ml").Get(context.Background(), "chat", 1)
		require.NoError(t, err)
		assert.Equal(t, "signer <signer@example.com>", rec.Chart.Signer)
		assert.Equal(t, digest, rec.Chart.SignedDigest)

		stdout, stderr, code = f.run(t, "status", "chat")
		require.Equal(t, ExitOK, code, stderr)
		assert.Contains(t, stdout, "CHART SIGNED BY: signer <signer@example.com> ("+digest+")")
		stdout, stderr, code = f.run(t, "status", "chat", "-o", "json")
		require.Equal(t, ExitOK, code, stderr)
		requireValid(t, "status", stdout)
		var st map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &st))
		assert.Equal(t, signer.Identity, st["chartSigner"])
		assert.Equal(t, digest, st["chartSignedDigest"])

		// Without --verify nothing is claimed.
		_, stderr, code = f.run(t, deployArgs(tgz, "--set", "image.tag=v0.11.1")...)
		require.Equal(t, ExitOK, code, stderr)
		stdout, stderr, code = f.runAny(t, "history", "chat", "-o", "json")
		require.Equal(t, ExitOK, code, stderr)
		requireValid(t, "history", stdout)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
		require.Len(t, rows, 2)
		assert.Equal(t, signer.Identity, rows[0]["chartSigner"])
		assert.NotContains(t, rows[1], "chartSigner")
	})

	refused := []struct {
		name    string
		chart   func(t *testing.T) string
		keyring string
		wantErr string
	}{
		{"tampered", func(t *testing.T) string {
			tgz := pack(t)
			signer.Sign(t, tgz)
			b, err := os.ReadFile(tgz)
			require.NoError(t, err)
			md := *builtin.Metadata
			md.Description = "tampered"
			changed := *builtin
			changed.Metadata = &md
			other, err := chartutil.Save(&changed, t.TempDir())
			require.NoError(t, err)
			ob, err := os.ReadFile(other)
			require.NoError(t, err)
			require.NotEqual(t, b, ob)
			require.NoError(t, os.WriteFile(tgz, ob, 0o644))
			return tgz
		}, signer.Keyring, "sha256 sum does not match"},
		{"unsigned", pack, signer.Keyring, "no provenance file"},
		{"key not in keyring", func(t *testing.T) string {
			tgz := pack(t)
			signer.Sign(t, tgz)
			return tgz
		}, other.Keyring, "does not verify"},
		{"chart directory", func(t *testing.T) string { return "../../charts/vllm" }, signer.Keyring, "unpacked charts cannot be verified"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			ref := tt.chart(t)
			f := newReleaseFakes()
			for _, args := range [][]string{
				deployArgs(ref, "--verify", "--keyring", tt.keyring),
				{"diff", "chat", ref, "--verify", "--keyring", tt.keyring},
			} {
				stdout, stderr, code := f.run(t, args...)
				assert.Equal(t, ExitInvalid, code, "%s: %s", args[0], stderr)
				assert.Contains(t, stderr, "--verify: ")
				assert.Contains(t, stderr, tt.wantErr)
				assert.Empty(t, stdout)
			}
			fleetChart, err := filepath.Abs(ref)
			require.NoError(t, err)
			_, stderr, code := f.runFleet(t, "deploy", fleetFile(t, "chart: "+fleetChart+"\n"), "--verify", "--keyring", tt.keyring)
			assert.Equal(t, ExitInvalid, code, stderr)
			assert.Contains(t, stderr, tt.wantErr)

			assert.Empty(t, f.cluster.Refs(), "nothing applied")
			all, err := f.store.ListAll(context.Background(), "")
			require.NoError(t, err)
			assert.Empty(t, all, "nothing recorded")
		})
	}

	t.Run("fleet deploy of a signed chart", func(t *testing.T) {
		tgz := pack(t)
		signer.Sign(t, tgz)
		f := newReleaseFakes()
		_, stderr, code := f.runFleet(t, "deploy", fleetFile(t, "chart: "+tgz+"\n"), "--verify", "--keyring", signer.Keyring)
		require.Equal(t, ExitOK, code, stderr)
		rec, err := f.store.InNamespace("ml2").Get(context.Background(), "chat", 1)
		require.NoError(t, err)
		assert.Equal(t, signer.Identity, rec.Chart.Signer)
	})
}
