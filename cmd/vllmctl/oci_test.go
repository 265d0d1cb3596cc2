package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/vllmctl/vllmctl/charts"
)

// ociRegistry is a distribution registry (REGISTRY_BIN) serving on
// 127.0.0.1 from a temporary storage directory.
type ociRegistry struct {
	// host is 127.0.0.1:PORT.
	host string
	// tls is true when it serves HTTPS with a self-signed certificate
	// (caFile); else plain HTTP.
	tls    bool
	caFile string
	// storage is its storage directory.
	storage string
}

// registryConfig says how a test registry is set up.
type registryConfig struct {
	// user and pass, when set, require basic auth (htpasswd).
	user, pass string
	// tls serves HTTPS with a certificate made by the test.
	tls bool
}

// registryBins returns REGISTRY_BIN and HELM_BIN, skipping the test when
// either is unset (make test sets both).
func registryBins(t *testing.T) (string, string) {
	t.Helper()
	reg, helm := os.Getenv("REGISTRY_BIN"), os.Getenv("HELM_BIN")
	if reg == "" || helm == "" {
		t.Skip("REGISTRY_BIN or HELM_BIN is not set: run make test (or REGISTRY_BIN=$(hack/install-registry.sh) HELM_BIN=$(hack/install-helm.sh))")
	}
	return reg, helm
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns their paths.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// lockedBuffer collects a process's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRegistry starts bin with a config written for cfg and waits until
// its /v2/ endpoint answers; the registry stops when the test ends.
func startRegistry(t *testing.T, bin string, cfg registryConfig) *ociRegistry {
	t.Helper()
	dir := t.TempDir()
	r := &ociRegistry{host: fmt.Sprintf("127.0.0.1:%d", freePort(t)), tls: cfg.tls, storage: filepath.Join(dir, "storage")}
	conf := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, r.storage, r.host)
	if cfg.tls {
		certFile, keyFile := selfSigned(t, dir)
		r.caFile = certFile
		conf += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", certFile, keyFile)
	}
	if cfg.user != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(cfg.pass), bcrypt.MinCost)
		require.NoError(t, err)
		htpasswd := filepath.Join(dir, "htpasswd")
		require.NoError(t, os.WriteFile(htpasswd, []byte(cfg.user+":"+string(hash)+"\n"), 0o600))
		conf += fmt.Sprintf("auth:\n  htpasswd:\n    realm: vllmctl-test\n    path: %s\n", htpasswd)
	}
	confFile := filepath.Join(dir, "config.yml")
	require.NoError(t, os.WriteFile(confFile, []byte(conf), 0o644))

	cmd := exec.Command(bin, "serve", confFile)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	client := &http.Client{Timeout: 2 * time.Second}
	if cfg.tls {
		pool := x509.NewCertPool()
		b, err := os.ReadFile(r.caFile)
		require.NoError(t, err)
		require.True(t, pool.AppendCertsFromPEM(b))
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(30 * time.Second)
	for {
		resp, err := client.Get(r.url() + "/v2/")
		if err == nil {
			resp.Body.Close()
			// 200, or 401 when it asks for credentials: it is serving.
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return r
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("registry exited (%v):\n%s", err, logs.String())
		case <-deadline:
			t.Fatalf("registry at %s did not answer /v2/ in 30s:\n%s", r.host, logs.String())
		case <-ticker.C:
		}
	}
}

// url is the registry's base URL.
func (r *ociRegistry) url() string {
	if r.tls {
		return "https://" + r.host
	}
	return "http://" + r.host
}

// ref is the oci:// reference of chart name under charts/.
func (r *ociRegistry) ref(name string) string { return "oci://" + r.host + "/charts/" + name }

// transport are the flags that reach the registry (helm's and vllmctl's).
func (r *ociRegistry) transport() []string {
	if r.tls {
		return []string{"--ca-file", r.caFile}
	}
	return []string{"--plain-http"}
}

// helmRunner runs HELM_BIN with the test's Helm paths (env).
func helmRunner(t *testing.T, bin string, env []string) func(stdin string, args ...string) string {
	dockerConfig := t.TempDir()
	return func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), append(env,
			"KUBECONFIG="+filepath.Join(dockerConfig, "kubeconfig"), "DOCKER_CONFIG="+dockerConfig)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr.String())
		return string(out) + stderr.String()
	}
}

// pushedDigest is the manifest digest helm push reports.
var pushedDigest = regexp.MustCompile(`Digest: (sha256:[0-9a-f]{64})`)

// pushChart packages ch at version v with Helm's chartutil.Save and pushes
// it with `helm push` to r under charts/; it returns the .tgz's path and
// the manifest digest.
func pushChart(t *testing.T, helm func(string, ...string) string, r *ociRegistry, dir string, v string) (string, string) {
	t.Helper()
	ch, err := loader.LoadDir(handwrittenChart)
	require.NoError(t, err)
	ch.Metadata.Version = v
	tgz, err := chartutil.Save(ch, dir)
	require.NoError(t, err)
	out := helm("", append([]string{"push", tgz, "oci://" + r.host + "/charts"}, r.transport()...)...)
	m := pushedDigest.FindStringSubmatch(out)
	require.NotNil(t, m, "helm push output: %s", out)
	return tgz, m[1]
}

// TestTemplateFromOCIRegistry: a registry with basic auth (htpasswd) over
// plain HTTP, charts pushed with helm push; CHART oci://… by tag, SemVer
// constraint and digest, the credentials of `vllmctl registry login` (in
// Helm's registry config) or of --username/--password-stdin, the errors
// and their codes, and the output of helm template for the same reference.
func TestTemplateFromOCIRegistry(t *testing.T) {
	regBin, helmBin := registryBins(t)
	env := helmHome(t)
	r := startRegistry(t, regBin, registryConfig{user: "ci", pass: "s3cret"})
	helm := helmRunner(t, helmBin, env)
	helm("s3cret", "registry", "login", r.host, "--plain-http", "--username", "ci", "--password-stdin")
	dir := t.TempDir()
	tgz := map[string]string{}
	digest := map[string]string{}
	for _, v := range []string{"0.1.0", "0.1.5", "0.2.0", "0.3.0-rc.1"} {
		tgz[v], digest[v] = pushChart(t, helm, r, dir, v)
	}
	// vllmctl and helm share the registry config: helm's login is seen,
	// and logged out here.
	out, stderr, code := runTemplateCLI(t, "registry", "logout", r.host)
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, "Removing login credentials for "+r.host+"\n", out)

	ref := r.ref("handwritten")
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
		{name: "login, wrong password (6)", stdin: "nope", args: []string{"registry", "login", r.host, "--plain-http", "--username", "ci", "--password-stdin"},
			code: ExitClusterErr, err: "registry oci://" + r.host + ": login: "},
		{name: "login", stdin: "s3cret", args: []string{"registry", "login", r.host, "--plain-http", "--username", "ci", "--password-stdin"}},
		{name: "exact --version", args: tmpl(ref, "--version", "0.1.0"), want: "0.1.0"},
		{name: "constraint ~0.1", args: tmpl(ref, "--version", "~0.1"), want: "0.1.5"},
		{name: "range", args: tmpl(ref, "--version", ">=0.1.1 <0.3"), want: "0.2.0"},
		{name: "latest stable", args: tmpl(ref), want: "0.2.0"},
		{name: "pre-release asked for", args: tmpl(ref, "--version", "0.3.0-rc.1"), want: "0.3.0-rc.1"},
		{name: "tag in the reference", args: tmpl(ref + ":0.1.5"), want: "0.1.5"},
		{name: "digest", args: tmpl(ref + "@" + digest["0.1.0"]), want: "0.1.0"},
		{name: "tag and its digest", args: tmpl(ref + ":0.1.0@" + digest["0.1.0"]), want: "0.1.0"},
		{name: "digest of nothing (2)", args: tmpl(ref + "@sha256:" + strings.Repeat("0", 64)),
			code: ExitInvalid, err: "chart " + ref + "@sha256:" + strings.Repeat("0", 64) + ": oci://" + r.host + "/charts/handwritten@sha256:" + strings.Repeat("0", 64) + ": not found"},
		{name: "digest mismatch (2)", args: tmpl(ref + ":0.2.0@" + digest["0.1.0"]),
			code: ExitInvalid, err: "digest mismatch: tag 0.2.0 is " + digest["0.2.0"] + ", not " + digest["0.1.0"]},
		{name: "digest within --version", args: tmpl(ref+"@"+digest["0.1.5"], "--version", "~0.1"), want: "0.1.5"},
		{name: "digest outside --version (2)", args: tmpl(ref+"@"+digest["0.1.5"], "--version", "~0.2"),
			code: ExitInvalid, err: "is version 0.1.5, which does not match --version ~0.2"},
		{name: "bad digest (2)", args: tmpl(ref + "@sha256:abc"), code: ExitInvalid, err: `digest "sha256:abc" is not sha256:<64 lower-case hex digits>`},
		{name: "unknown tag (2)", args: tmpl(ref, "--version", "9.9.9"), code: ExitInvalid, err: "chart " + ref + ": oci://" + r.host + "/charts/handwritten:9.9.9: not found"},
		{name: "no tag matches (2)", args: tmpl(ref, "--version", "~9"), code: ExitInvalid,
			err: "no tag of " + ref + " matches ~9 (versions: 0.3.0-rc.1, 0.2.0, 0.1.5, 0.1.0)"},
		{name: "tag is not --version (2)", args: tmpl(ref+":0.1.0", "--version", "0.2.0"), code: ExitInvalid, err: "the reference's tag 0.1.0 is not --version 0.2.0"},
		{name: "unknown chart (2)", args: tmpl(r.ref("nope")), code: ExitInvalid, err: "chart " + r.ref("nope") + ": oci://" + r.host + "/charts/nope: not found"},
		{name: "bad reference (2)", args: tmpl("oci://" + r.host), code: ExitInvalid, err: "an OCI reference is oci://HOST/PATH/NAME"},
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
		require.NoError(t, os.Remove(filepath.Join(r.storage, "docker", "registry", "v2", "blobs", "sha256", sum[:2], sum, "data")))
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
		down := fmt.Sprintf("oci://127.0.0.1:%d/charts/handwritten", freePort(t))
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
	regBin, helmBin := registryBins(t)
	env := helmHome(t)
	r := startRegistry(t, regBin, registryConfig{tls: true})
	helm := helmRunner(t, helmBin, env)
	tgz, digest := pushChart(t, helm, r, t.TempDir(), "0.1.0")
	ref := r.ref("handwritten")

	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{name: "--ca-file", args: []string{ref, "--version", "0.1.0", "--ca-file", r.caFile}},
		{name: "--ca-file, by digest", args: []string{ref + "@" + digest, "--ca-file", r.caFile}},
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
		out, stderr, code := runCLIWithStdin(t, "anything", "registry", "login", r.host, "--ca-file", r.caFile, "--username", "ci", "--password-stdin")
		require.Equal(t, ExitOK, code, stderr)
		assert.Equal(t, "Login Succeeded\n", out)
		b, err := os.ReadFile(filepath.Join(os.Getenv("HELM_CONFIG_HOME"), "registry", "config.json"))
		require.NoError(t, err)
		assert.Contains(t, string(b), r.host)
	})
}

// TestDeployFromOCIRegistryRecordsSource: a deploy of a chart pulled from
// an OCI registry records the reference (oci://…:TAG) and the manifest
// digest; status shows them.
func TestDeployFromOCIRegistryRecordsSource(t *testing.T) {
	regBin, helmBin := registryBins(t)
	env := helmHome(t)
	r := startRegistry(t, regBin, registryConfig{})
	helm := helmRunner(t, helmBin, env)
	builtin, err := charts.Load("vllm")
	require.NoError(t, err)
	tgz, err := chartutil.Save(builtin, t.TempDir())
	require.NoError(t, err)
	m := pushedDigest.FindStringSubmatch(helm("", "push", tgz, "oci://"+r.host+"/charts", "--plain-http"))
	require.NotNil(t, m)
	digest := m[1]
	source := r.ref("vllm") + ":" + builtin.Metadata.Version

	f := newReleaseFakes()
	stdout, stderr, code := f.run(t, append(deployArgs(r.ref("vllm"), "--plain-http", "--version", "~"+builtin.Metadata.Version), "-o", "json")...)
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
		byDigest := r.ref("vllm") + "@" + digest
		stdout, stderr, code := f.run(t, append(deployArgs(byDigest, "--plain-http"), "-o", "json")...)
		require.Equal(t, ExitOK, code, stderr)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		assert.Equal(t, byDigest, res["chartSource"])
		assert.Equal(t, digest, res["chartDigest"])
	})

	t.Run("registry down: nothing applied (6)", func(t *testing.T) {
		down := fmt.Sprintf("oci://127.0.0.1:%d/charts/vllm", freePort(t))
		_, stderr, code := f.run(t, deployArgs(down, "--plain-http", "--set", "image.tag=v0.11.1")...)
		require.Equal(t, ExitClusterErr, code, stderr)
		_, err := f.store.InNamespace("ml").Get(context.Background(), "chat", 3)
		require.Error(t, err, "no revision 3 recorded")
	})
}
