package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/testregistry"
)

// pushChart pushes the handwritten chart at version v with `helm push`
// to r under charts/; it returns the .tgz's path and the manifest digest.
func pushChart(t *testing.T, helm testregistry.HelmFunc, r *testregistry.Registry, dir string, v string) (string, string) {
	t.Helper()
	ch, err := loader.LoadDir(handwrittenChart)
	require.NoError(t, err)
	ch.Metadata.Version = v
	return r.Push(t, helm, ch, dir)
}

// TestTemplateFromOCIRegistry: a registry with basic auth (htpasswd) over
// plain HTTP, charts pushed with helm push; CHART oci://… by tag, SemVer
// constraint and digest, the credentials of `vllmctl registry login` (in
// Helm's registry config) or of --username/--password-stdin, the errors
// and their codes, and the output of helm template for the same reference.
func TestTemplateFromOCIRegistry(t *testing.T) {
	regBin, helmBin := testregistry.Bins(t)
	env := helmHome(t)
	r := testregistry.Start(t, regBin, testregistry.Config{User: "ci", Pass: "s3cret"})
	helm := testregistry.Helm(t, helmBin, env)
	helm("s3cret", "registry", "login", r.Host, "--plain-http", "--username", "ci", "--password-stdin")
	dir := t.TempDir()
	tgz := map[string]string{}
	digest := map[string]string{}
	for _, v := range []string{"0.1.0", "0.1.5", "0.2.0", "0.3.0-rc.1"} {
		tgz[v], digest[v] = pushChart(t, helm, r, dir, v)
	}
	// vllmctl and helm share the registry config: helm's login is seen,
	// and logged out here.
	out, stderr, code := runTemplateCLI(t, "registry", "logout", r.Host)
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, "Removing login credentials for "+r.Host+"\n", out)

	ref := r.Ref("handwritten")
	tmpl := func(args ...string) []string {
		return append([]string{"template", "demo", "-n", "apps", "--plain-http"}, args...)
	}
	t.Run("logged out: refused (6)", func(t *testing.T) {
		out, stderr, code := runTemplateCLI(t, tmpl(ref, "--version", "0.1.0")...)
		require.Equal(t, ExitClusterErr, code, stderr)
		assert.Contains(t, stderr, "chart "+ref+":")
		assert.Empty(t, out)
	})

	steps := []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string // version rendered
		err   string
	}{
		{name: "--username/--password-stdin for the pull", stdin: "s3cret\n", args: tmpl(ref, "--version", "0.1.0", "--username", "ci", "--password-stdin"), want: "0.1.0"},
		{name: "wrong password (6)", stdin: "nope\n", args: tmpl(ref, "--version", "0.1.0", "--username", "ci", "--password-stdin"),
			code: ExitClusterErr, err: "chart " + ref + ": registry " + ref + ":0.1.0: pull:"},
		{name: "login, wrong password (6)", stdin: "nope", args: []string{"registry", "login", r.Host, "--plain-http", "--username", "ci", "--password-stdin"},
			code: ExitClusterErr, err: "registry oci://" + r.Host + ": login: "},
		{name: "login", stdin: "s3cret", args: []string{"registry", "login", r.Host, "--plain-http", "--username", "ci", "--password-stdin"}},
		{name: "exact --version", args: tmpl(ref, "--version", "0.1.0"), want: "0.1.0"},
		{name: "constraint ~0.1", args: tmpl(ref, "--version", "~0.1"), want: "0.1.5"},
		{name: "range", args: tmpl(ref, "--version", ">=0.1.1 <0.3"), want: "0.2.0"},
		{name: "latest stable", args: tmpl(ref), want: "0.2.0"},
		{name: "pre-release asked for", args: tmpl(ref, "--version", "0.3.0-rc.1"), want: "0.3.0-rc.1"},
		{name: "tag in the reference", args: tmpl(ref + ":0.1.5"), want: "0.1.5"},
		{name: "digest", args: tmpl(ref + "@" + digest["0.1.0"]), want: "0.1.0"},
		{name: "tag and its digest", args: tmpl(ref + ":0.1.0@" + digest["0.1.0"]), want: "0.1.0"},
		{name: "digest of nothing (2)", args: tmpl(ref + "@sha256:" + strings.Repeat("0", 64)),
			code: ExitInvalid, err: "chart " + ref + "@sha256:" + strings.Repeat("0", 64) + ": oci://" + r.Host + "/charts/handwritten@sha256:" + strings.Repeat("0", 64) + ": not found"},
		{name: "digest mismatch (2)", args: tmpl(ref + ":0.2.0@" + digest["0.1.0"]),
			code: ExitInvalid, err: "digest mismatch: tag 0.2.0 is " + digest["0.2.0"] + ", not " + digest["0.1.0"]},
		{name: "digest within --version", args: tmpl(ref+"@"+digest["0.1.5"], "--version", "~0.1"), want: "0.1.5"},
		{name: "digest outside --version (2)", args: tmpl(ref+"@"+digest["0.1.5"], "--version", "~0.2"),
			code: ExitInvalid, err: "is version 0.1.5, which does not match --version ~0.2"},
		{name: "bad digest (2)", args: tmpl(ref + "@sha256:abc"), code: ExitInvalid, err: `digest "sha256:abc" is not sha256:<64 lower-case hex digits>`},
		{name: "unknown tag (2)", args: tmpl(ref, "--version", "9.9.9"), code: ExitInvalid, err: "chart " + ref + ": oci://" + r.Host + "/charts/handwritten:9.9.9: not found"},
		{name: "no tag matches (2)", args: tmpl(ref, "--version", "~9"), code: ExitInvalid,
			err: "no tag of " + ref + " matches ~9 (versions: 0.3.0-rc.1, 0.2.0, 0.1.5, 0.1.0)"},
		{name: "tag is not --version (2)", args: tmpl(ref+":0.1.0", "--version", "0.2.0"), code: ExitInvalid, err: "the reference's tag 0.1.0 is not --version 0.2.0"},
		{name: "unknown chart (2)", args: tmpl(r.Ref("nope")), code: ExitInvalid, err: "chart " + r.Ref("nope") + ": oci://" + r.Host + "/charts/nope: not found"},
		{name: "bad reference (2)", args: tmpl("oci://" + r.Host), code: ExitInvalid, err: "an OCI reference is oci://HOST/PATH/NAME"},
		{name: "--plain-http of a local chart (2)", args: tmpl(handwrittenChart), code: ExitInvalid, err: "--plain-http applies to an OCI registry (oci://…)"},
		{name: "deploy: nothing applied (2)", args: []string{"deploy", "demo", ref, "--plain-http", "--version", "~9"}, code: ExitInvalid, err: "no tag of " + ref},
		{name: "lint takes the flags too", args: []string{"lint", ref, "--plain-http", "--version", "~0.1"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, stderr, code := runCLIWithStdin(t, s.stdin, s.args...)
			require.Equal(t, s.code, code, stderr)
			assert.Contains(t, stderr, s.err)
			assert.NotContains(t, stderr, "s3cret")
			if s.want != "" {
				assert.Empty(t, stderr)
				assert.Equal(t, templateOf(t, tgz[s.want]), out)
				assert.Contains(t, out, "helm.sh/chart: handwritten-"+s.want)
			}
			if s.code != ExitOK {
				assert.Empty(t, out)
			}
		})
	}

	t.Run("cached by digest in Helm's content cache", func(t *testing.T) {
		b, err := os.ReadFile(tgz["0.2.0"])
		require.NoError(t, err)
		h := sha256.Sum256(b)
		sum := hex.EncodeToString(h[:])
		cached := filepath.Join(os.Getenv("HELM_CACHE_HOME"), "content", sum[:2], sum+".chart")
		assert.FileExists(t, cached)

		// The registry loses the .tgz layer: the cached one is used (only
		// the manifest and config are fetched); without it the pull fails.
		require.NoError(t, os.Remove(filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", sum[:2], sum, "data")))
		out, stderr, code := runTemplateCLI(t, tmpl(ref, "--version", "0.2.0")...)
		require.Equal(t, ExitOK, code, stderr)
		assert.Equal(t, templateOf(t, tgz["0.2.0"]), out)
		require.NoError(t, os.Remove(cached))
		_, stderr, code = runTemplateCLI(t, tmpl(ref, "--version", "0.2.0")...)
		assert.NotEqual(t, ExitOK, code, stderr)
	})

	t.Run("helm sees vllmctl's login and renders the same", func(t *testing.T) {
		for _, args := range [][]string{
			{ref, "--version", "~0.1"},
			{ref + "@" + digest["0.1.0"]},
		} {
			theirs := helm("", append([]string{"template", "demo", "-n", "apps", "--plain-http"}, args...)...)
			ours, stderr, code := runTemplateCLI(t, tmpl(args...)...)
			require.Equal(t, ExitOK, code, stderr)
			// helm writes "Pulled:"/"Digest:" lines to stderr; the
			// manifests are the same objects.
			assert.NotEmpty(t, decodeStream(t, ours))
			assert.Equal(t, decodeStream(t, stripPullLines(theirs)), decodeStream(t, ours), "%v", args)
		}
	})

	t.Run("registry down (6)", func(t *testing.T) {
		down := fmt.Sprintf("oci://127.0.0.1:%d/charts/handwritten", testregistry.FreePort(t))
		out, stderr, code := runTemplateCLI(t, tmpl(down, "--version", "~0.1")...)
		require.Equal(t, ExitClusterErr, code, stderr)
		assert.Contains(t, stderr, "chart "+down+": registry "+down+": list tags:")
		assert.Contains(t, stderr, "connection refused")
		assert.Empty(t, out)
	})
}

// stripPullLines drops helm's "Pulled:" and "Digest:" lines (helmRunner
// appends stderr to stdout).
func stripPullLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "Pulled: ") || strings.HasPrefix(l, "Digest: ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// TestOCIRegistryTLS: a registry serving HTTPS with a self-signed
// certificate: --ca-file verifies it, without it the pull fails (6),
// --repo-insecure-skip-tls-verify skips the check; registry login takes
// --ca-file too.
func TestOCIRegistryTLS(t *testing.T) {
	regBin, helmBin := testregistry.Bins(t)
	env := helmHome(t)
	r := testregistry.Start(t, regBin, testregistry.Config{TLS: true})
	helm := testregistry.Helm(t, helmBin, env)
	tgz, digest := pushChart(t, helm, r, t.TempDir(), "0.1.0")
	ref := r.Ref("handwritten")

	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{name: "--ca-file", args: []string{ref, "--version", "0.1.0", "--ca-file", r.CAFile}},
		{name: "--ca-file, by digest", args: []string{ref + "@" + digest, "--ca-file", r.CAFile}},
		{name: "--repo-insecure-skip-tls-verify", args: []string{ref, "--version", "~0.1", "--repo-insecure-skip-tls-verify"}},
		{name: "unknown authority (6)", args: []string{ref, "--version", "0.1.0"}, code: ExitClusterErr, err: "certificate"},
		{name: "missing --ca-file (2)", args: []string{ref, "--version", "0.1.0", "--ca-file", filepath.Join(t.TempDir(), "nope.pem")}, code: ExitInvalid, err: "--ca-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runTemplateCLI(t, append([]string{"template", "demo", "-n", "apps"}, tt.args...)...)
			require.Equal(t, tt.code, code, stderr)
			assert.Contains(t, stderr, tt.err)
			if tt.code == ExitOK {
				assert.Equal(t, templateOf(t, tgz), out)
			} else {
				assert.Empty(t, out)
			}
		})
	}
	t.Run("registry login with --ca-file", func(t *testing.T) {
		out, stderr, code := runCLIWithStdin(t, "anything", "registry", "login", r.Host, "--ca-file", r.CAFile, "--username", "ci", "--password-stdin")
		require.Equal(t, ExitOK, code, stderr)
		assert.Equal(t, "Login Succeeded\n", out)
		b, err := os.ReadFile(filepath.Join(os.Getenv("HELM_CONFIG_HOME"), "registry", "config.json"))
		require.NoError(t, err)
		assert.Contains(t, string(b), r.Host)
	})
}

// TestDeployFromOCIRegistryRecordsSource: a deploy of a chart pulled from
// an OCI registry records the reference (oci://…:TAG) and the manifest
// digest; status shows them.
func TestDeployFromOCIRegistryRecordsSource(t *testing.T) {
	regBin, helmBin := testregistry.Bins(t)
	env := helmHome(t)
	r := testregistry.Start(t, regBin, testregistry.Config{})
	helm := testregistry.Helm(t, helmBin, env)
	builtin, err := charts.Load("vllm")
	require.NoError(t, err)
	_, digest := r.Push(t, helm, builtin, t.TempDir())
	source := r.Ref("vllm") + ":" + builtin.Metadata.Version

	f := newReleaseFakes()
	stdout, stderr, code := f.run(t, append(deployArgs(r.Ref("vllm"), "--plain-http", "--version", "~"+builtin.Metadata.Version), "-o", "json")...)
	require.Equal(t, ExitOK, code, stderr)
	requireValid(t, "result", stdout)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, source, res["chartSource"])
	assert.Equal(t, digest, res["chartDigest"])

	rec, err := f.store.InNamespace("ml").Get(context.Background(), "chat", 1)
	require.NoError(t, err)
	assert.Equal(t, source, rec.Chart.Source)
	assert.Equal(t, digest, rec.Chart.Digest)

	stdout, stderr, code = f.run(t, "status", "chat")
	require.Equal(t, ExitOK, code, stderr)
	assert.Contains(t, stdout, "CHART SOURCE: "+source+" ("+digest+")")

	t.Run("by digest", func(t *testing.T) {
		byDigest := r.Ref("vllm") + "@" + digest
		stdout, stderr, code := f.run(t, append(deployArgs(byDigest, "--plain-http"), "-o", "json")...)
		require.Equal(t, ExitOK, code, stderr)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		assert.Equal(t, byDigest, res["chartSource"])
		assert.Equal(t, digest, res["chartDigest"])
	})

	t.Run("registry down: nothing applied (6)", func(t *testing.T) {
		down := fmt.Sprintf("oci://127.0.0.1:%d/charts/vllm", testregistry.FreePort(t))
		_, stderr, code := f.run(t, deployArgs(down, "--plain-http", "--set", "image.tag=v0.11.1")...)
		require.Equal(t, ExitClusterErr, code, stderr)
		_, err := f.store.InNamespace("ml").Get(context.Background(), "chat", 3)
		require.Error(t, err, "no revision 3 recorded")
	})
}
