package testregistry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// Registry is a distribution registry serving on 127.0.0.1 from a
// temporary storage directory.
type Registry struct {
	// Host is 127.0.0.1:PORT.
	Host string
	// TLS is true when it serves HTTPS with a self-signed certificate
	// (CAFile); else plain HTTP.
	TLS    bool
	CAFile string
	// Storage is its storage directory.
	Storage string

	stop func()
}

// Config says how a registry is set up.
type Config struct {
	// User and Pass, when set, require basic auth (htpasswd).
	User, Pass string
	// TLS serves HTTPS with a certificate made for the test.
	TLS bool
}

// Bins returns REGISTRY_BIN and HELM_BIN. When either is unset the test
// is skipped, or fails when CI is set (CI must not pass without them).
func Bins(t testing.TB) (registry, helm string) {
	t.Helper()
	registry, helm = os.Getenv("REGISTRY_BIN"), os.Getenv("HELM_BIN")
	if registry == "" || helm == "" {
		msg := "REGISTRY_BIN or HELM_BIN is not set: run make test (or REGISTRY_BIN=$(hack/install-registry.sh) HELM_BIN=$(hack/install-helm.sh))"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatal("CI is set, so this test may not be skipped: " + msg)
		}
		t.Skip(msg)
	}
	return registry, helm
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns their paths.
func selfSigned(t testing.TB, dir string) (certFile, keyFile string) {
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

// config is the registry's configuration file for cfg.
func (r *Registry) config(t testing.TB, dir string, cfg Config) string {
	t.Helper()
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
`, r.Storage, r.Host)
	if cfg.TLS {
		certFile, keyFile := selfSigned(t, dir)
		r.CAFile = certFile
		conf += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", certFile, keyFile)
	}
	if cfg.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(cfg.Pass), bcrypt.MinCost)
		require.NoError(t, err)
		htpasswd := filepath.Join(dir, "htpasswd")
		require.NoError(t, os.WriteFile(htpasswd, []byte(cfg.User+":"+string(hash)+"\n"), 0o600))
		conf += fmt.Sprintf("auth:\n  htpasswd:\n    realm: vllmctl-test\n    path: %s\n", htpasswd)
	}
	confFile := filepath.Join(dir, "config.yml")
	require.NoError(t, os.WriteFile(confFile, []byte(conf), 0o644))
	return confFile
}

// Start starts bin with a configuration written for cfg and waits until
// its /v2/ endpoint answers; the registry stops when the test ends (or at
// Stop).
func Start(t testing.TB, bin string, cfg Config) *Registry {
	t.Helper()
	dir := t.TempDir()
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), TLS: cfg.TLS, Storage: filepath.Join(dir, "storage")}
	cmd := exec.Command(bin, "serve", r.config(t, dir, cfg))
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	t.Cleanup(r.stop)

	client := &http.Client{Timeout: 2 * time.Second}
	if cfg.TLS {
		pool := x509.NewCertPool()
		b, err := os.ReadFile(r.CAFile)
		require.NoError(t, err)
		require.True(t, pool.AppendCertsFromPEM(b))
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(30 * time.Second)
	for {
		resp, err := client.Get(r.URL() + "/v2/")
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
			t.Fatalf("registry at %s did not answer /v2/ in 30s:\n%s", r.Host, logs.String())
		case <-ticker.C:
		}
	}
}

// Stop stops the registry (the port then refuses connections).
func (r *Registry) Stop() { r.stop() }

// URL is the registry's base URL.
func (r *Registry) URL() string {
	if r.TLS {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// Ref is the oci:// reference of chart name under charts/.
func (r *Registry) Ref(name string) string { return "oci://" + r.Host + "/charts/" + name }

// Transport are the flags that reach the registry (Helm's and vllmctl's).
func (r *Registry) Transport() []string {
	if r.TLS {
		return []string{"--ca-file", r.CAFile}
	}
	return []string{"--plain-http"}
}

// HelmFunc runs Helm with args and stdin and returns its stdout and
// stderr; it fails the test when Helm fails.
type HelmFunc func(stdin string, args ...string) string

// Helm returns a HelmFunc running bin with env added to the test's
// environment (the Helm and registry config paths the test shares with
// vllmctl), without a kubeconfig and with its own docker config unless env
// names one.
func Helm(t testing.TB, bin string, env []string) HelmFunc {
	dockerConfig := t.TempDir()
	return func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dockerConfig, "kubeconfig"), "DOCKER_CONFIG="+dockerConfig)
		cmd.Env = append(cmd.Env, env...)
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

// Push packages ch with Helm's chartutil.Save into dir and pushes it with
// `helm push` to r under charts/; it returns the .tgz's path and the
// manifest digest.
func (r *Registry) Push(t testing.TB, helm HelmFunc, ch *chart.Chart, dir string) (tgz, digest string) {
	t.Helper()
	tgz, err := chartutil.Save(ch, dir)
	require.NoError(t, err)
	out := helm("", append([]string{"push", tgz, "oci://" + r.Host + "/charts"}, r.Transport()...)...)
	m := pushedDigest.FindStringSubmatch(out)
	require.NotNil(t, m, "helm push output: %s", out)
	return tgz, m[1]
}
