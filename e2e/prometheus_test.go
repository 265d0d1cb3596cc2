//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/vllmctl/vllmctl/internal/podhttp"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The canary analysis' prometheus provider against a real Prometheus
// (PROMETHEUS_BIN, built from its Go module by hack/install-prometheus.sh)
// that scrapes the release's simulated pods: Kubernetes service discovery
// (role pod) against the local API server finds them, with their
// namespace and pod labels, and the relabelling sends each scrape to a
// proxy of the test that reaches the pod's port through the API server's
// port-forward (internal/podhttp, as vllmctl's serve check and scrape
// provider do): nothing listens on a kwok pod's IP.

// prometheusBin returns PROMETHEUS_BIN; without it the test is skipped
// (failed in CI).
func prometheusBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PROMETHEUS_BIN")
	if bin == "" {
		skipOrFail(t, "PROMETHEUS_BIN is not set: run make e2e (or PROMETHEUS_BIN=$(hack/install-prometheus.sh))")
	}
	return bin
}

// podProxy serves GET /pods/NAMESPACE/POD/PORT/PATH by sending it to the
// pod's port through the API server's port-forward: Prometheus' scrape
// address for a pod of the local cluster.
type podProxy struct {
	fwd *podhttp.Forwarder
	mu  sync.Mutex
	// clients keeps one client per pod port, so that a scrape reuses the
	// port-forward session of the previous one.
	clients map[string]*http.Client
	closers []func()
}

func (p *podProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/pods/"), "/", 4)
	if len(parts) != 4 || r.Method != http.MethodGet {
		http.Error(w, "want GET /pods/NAMESPACE/POD/PORT/PATH", http.StatusNotFound)
		return
	}
	port, err := strconv.Atoi(parts[2])
	if err != nil {
		http.Error(w, "bad port "+parts[2], http.StatusNotFound)
		return
	}
	key := parts[0] + "/" + parts[1] + ":" + parts[2]
	p.mu.Lock()
	c, ok := p.clients[key]
	if !ok {
		var closeIdle func()
		c, closeIdle = p.fwd.Client(parts[0], parts[1], port, 5*time.Second)
		p.clients[key] = c
		p.closers = append(p.closers, closeIdle)
	}
	p.mu.Unlock()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://pod/"+parts[3], nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Accept", r.Header.Get("Accept"))
	resp, err := c.Do(req)
	if err != nil {
		http.Error(w, fmt.Sprintf("pod %s: %v", key, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *podProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.closers {
		c()
	}
}

// prometheus is one Prometheus server of a test.
type prometheus struct {
	url    string
	out    *syncBuffer
	exited chan struct{}
}

// prometheusConfig scrapes every pod of namespace that has an IP and a
// port named http, each second, through the proxy at proxyAddr; the
// series are labelled namespace and pod, as the usual Kubernetes
// relabelling does (what the provider's queries select on). Pods that are
// not Ready yet are targets too: a canary pod is scraped from the moment
// it serves, not a discovery update after it turned Ready.
func prometheusConfig(kubeconfig, namespace, proxyAddr string) string {
	return fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
- job_name: vllm
  kubernetes_sd_configs:
  - role: pod
    kubeconfig_file: %q
    namespaces: {names: [%q]}
  relabel_configs:
  - source_labels: [__meta_kubernetes_pod_container_port_name]
    regex: http
    action: keep
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: instance
  - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name, __meta_kubernetes_pod_container_port_number]
    regex: (.+);(.+);(.+)
    target_label: __metrics_path__
    replacement: /pods/$1/$2/$3/metrics
  - target_label: __address__
    replacement: %q
`, kubeconfig, namespace, proxyAddr)
}

// startPrometheus starts a Prometheus scraping e's namespace, and stops
// it when the test ends.
func startPrometheus(t *testing.T, e *env) *prometheus {
	t.Helper()
	bin := prometheusBin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	proxy := &podProxy{fwd: podhttp.New(e.cfg, e.client), clients: map[string]*http.Client{}}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		proxy.close()
	})

	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(conf, []byte(prometheusConfig(os.Getenv("VLLMCTL_E2E_KUBECONFIG"), e.namespace, l.Addr().String())), 0o600))
	port, err := freePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--config.file", conf, "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", addr, "--log.level", "warn",
		// Targets follow the pods within a second (default 5s): a
		// canary pod is scraped from the start of its analysis.
		"--scrape.discovery-reload-interval", "1s")
	p := &prometheus{url: "http://" + addr, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	require.NoError(t, cmd.Start(), "start %s", bin)
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	err = kwait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("prometheus exited")
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "prometheus ready on %s; output:\n%s", addr, p.out.tail(8<<10))
	return p
}

// query runs an instant query and returns its vector's values.
func (p *prometheus) query(t *testing.T, q string) []float64 {
	t.Helper()
	resp, err := http.PostForm(p.url+"/api/v1/query", url.Values{"query": {q}})
	require.NoError(t, err)
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	require.Equal(t, "success", a.Status, "query %s", q)
	out := make([]float64, 0, len(a.Data.Result))
	for _, s := range a.Data.Result {
		v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// awaitScraped waits until Prometheus has scraped n pods of the
// namespace successfully.
func (p *prometheus) awaitScraped(t *testing.T, namespace string, n int) {
	t.Helper()
	q := fmt.Sprintf(`sum(up{namespace=%q})`, namespace)
	var last []float64
	err := kwait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = p.query(t, q)
		return len(last) == 1 && last[0] == float64(n), nil
	})
	require.NoError(t, err, "%s = %v, want %d; prometheus output:\n%s", q, last, n, p.out.tail(8<<10))
}

// promSpec is an analysis with the prometheus provider. A new pod's
// series begin with its first scrape, and increase() needs two samples in
// the interval: the canary's first interval may have too few
// (inconclusive), as with any Prometheus, hence inconclusiveLimit 1.
const promSpec = `provider: prometheus
interval: 4s
count: 3
minRequests: 4
inconclusiveLimit: 1
load: {rps: 6, maxTokens: 4, prompt: "Say hello"}
presets:
`

func TestPrometheusAnalysisHealthyPromoted(t *testing.T) {
	f := newRelFixture(t)
	prom := startPrometheus(t, f.env)
	f.canaryInstall(t)
	prom.awaitScraped(t, f.namespace, canaryReplicas)
	r, res := f.analysisUpgrade(t, "v0.11.1", promSpec+"  errorRatio: {max: 0.05}\n  ttftP95Ratio: {max: 2}\n",
		"--prometheus-url", prom.url)
	require.Equal(t, 0, r.code, "%s\nprometheus:\n%s", r, prom.out.tail(4<<10))
	require.NotNil(t, res.Analysis, "%s", r)
	a := res.Analysis
	assert.Equal(t, "prometheus", a.Provider)
	assert.Equal(t, storage.AnalysisPassed, a.Outcome, "%s", r)
	require.Len(t, a.Measurements, 6, "3 measurements of 2 presets")
	for i, m := range a.Measurements {
		if i < 2 && m.Outcome == storage.AnalysisInconclusive {
			// The canary's first interval, before Prometheus had two
			// samples of it (inconclusiveLimit 1).
			assert.Contains(t, m.Message, "fewer than minRequests", "%+v", m)
			continue
		}
		assert.Equal(t, storage.AnalysisPassed, m.Outcome, "%+v", m)
		require.NotNil(t, m.Value, "%+v", m)
		assert.GreaterOrEqual(t, m.CanaryRequests, 4.0, "Prometheus saw the load reach the canary: %+v", m)
		assert.GreaterOrEqual(t, m.StableRequests, 4.0, "Prometheus saw the load reach the stable pods: %+v", m)
	}
	for _, m := range measured(a, "ttftP95Ratio")[1:] {
		require.NotNil(t, m.Canary)
		require.NotNil(t, m.Stable)
		assert.Greater(t, *m.Canary, 0.0, "a measured TTFT: %+v", m)
		assert.InDelta(t, 1, *m.Value, 0.5, "healthy against healthy: %+v", m)
	}
	for _, m := range measured(a, "errorRatio")[1:] {
		require.NotNil(t, m.Value, "%+v", m)
		assert.Zero(t, *m.Value, "%+v", m)
	}
	t.Logf("prometheus, healthy: %s", describe(a.Measurements))
	assert.Equal(t, storage.CanaryPromoted, res.Canary.Outcome)

	revs := f.history(t)
	require.Len(t, revs, 2)
	require.NotNil(t, revs[1].Analysis, "the record keeps the analysis")
	assert.Equal(t, "prometheus", revs[1].Analysis.Provider)
	assert.Len(t, revs[1].Analysis.Measurements, 6)
	status := f.run(t, "status", relName)
	assert.Contains(t, status.stdout, "ANALYSIS: passed (revision 2, prometheus provider, 3 × 4s)")
}

// promRefusedCanary runs a canary of tag whose analysis (the Prometheus
// provider, preset) refuses it: exit 3, AnalysisFailed, rolled back to 1
// with revision 1's pods kept; it returns the fixture and the last
// measurement of metric, which failed.
func promRefusedCanary(t *testing.T, tag, preset, metric string) (*relFixture, storage.AnalysisMeasurement) {
	t.Helper()
	f := newRelFixture(t)
	prom := startPrometheus(t, f.env)
	rev1, uids := f.canaryInstall(t)
	ready := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), canaryReplicas)
	prom.awaitScraped(t, f.namespace, canaryReplicas)
	r, res := f.analysisUpgrade(t, tag, promSpec+preset, "--prometheus-url", prom.url)
	require.Equal(t, 3, r.code, "%s\nprometheus:\n%s", r, prom.out.tail(4<<10))
	require.NotNil(t, res.Failure, "%s", r)
	assert.Equal(t, rollout.VerdictAnalysisFailed, res.Failure.Verdict)
	assert.Contains(t, res.Failure.Evidence, metric)
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Analysis)
	assert.Equal(t, "prometheus", res.Analysis.Provider)
	assert.Equal(t, storage.AnalysisFailed, res.Analysis.Outcome)
	ms := measured(res.Analysis, metric)
	require.NotEmpty(t, ms)
	last := ms[len(ms)-1]
	assert.Equal(t, storage.AnalysisFailed, last.Outcome, "%+v", last)
	t.Logf("prometheus, %s: %s", tag, describe(ms))
	f.assertOldKept(t, rev1.ReplicaSets[0].PodTemplateHash, uids, ready)
	return f, last
}

func TestPrometheusAnalysisServeErrorsRolledBack(t *testing.T) {
	f, last := promRefusedCanary(t, "v0.11.0-serve-errors", "  errorRatio: {max: 0.05}\n", "errorRatio")
	require.NotNil(t, last.Canary)
	require.NotNil(t, last.Stable)
	// Every 5th request answers 500, which vllm-sim also counts as
	// finished_reason abort, as vLLM does; the preset counts such a
	// failure once (docs/canary.md): about 0.2, give or take Prometheus'
	// extrapolation of increase() over a short window.
	assert.GreaterOrEqual(t, *last.Canary, 0.1, "a fifth of the canary's requests answered 500: %+v", last)
	assert.LessOrEqual(t, *last.Canary, 0.35, "a fifth of the canary's requests answered 500, each counted once: %+v", last)
	assert.Zero(t, *last.Stable, "the stable pods answer every request")

	status := f.run(t, "status", relName)
	assert.Contains(t, status.stdout, "ANALYSIS: failed (revision 2, prometheus provider")
}

// TestPrometheusAnalysisServeSlowRolledBack: a serve-slow canary (time to
// first token ≥ 3× a healthy pod's) is refused by ttftP95Ratio computed by
// Prometheus (histogram_quantile over the canary's and the stable pods'
// buckets), rolled back, with the measured ratio in the result.
func TestPrometheusAnalysisServeSlowRolledBack(t *testing.T) {
	_, last := promRefusedCanary(t, "v0.11.0-serve-slow", "  ttftP95Ratio: {max: 2}\n", "ttftP95Ratio")
	require.NotNil(t, last.Value)
	assert.GreaterOrEqual(t, *last.Value, 2.0, "serve-slow's TTFT p95 against the stable pods': %+v", last)
}

// Prometheus down: every query is a measurement error; more than
// consecutiveErrorLimit in a row make the analysis inconclusive, and the
// policy decides (docs/canary.md), not exit 6.
func TestPrometheusAnalysisDown(t *testing.T) {
	port, err := freePort()
	require.NoError(t, err)
	down := fmt.Sprintf("http://127.0.0.1:%d", port) // nothing listens
	spec := func(policy string) string {
		return "provider: prometheus\ninterval: 2s\ncount: 2\nconsecutiveErrorLimit: 1\ninconclusive: " + policy +
			"\npresets: {errorRatio: {max: 0.05}}\n"
	}
	for _, tc := range []struct {
		policy     string
		code       int
		rolledBack int
		canary     string
	}{
		{"fail", 3, 1, storage.CanaryFailed},
		{"pass", 0, 0, storage.CanaryPromoted},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := newRelFixture(t)
			f.canaryInstall(t)
			r, res := f.analysisUpgrade(t, "v0.11.1", spec(tc.policy), "--prometheus-url", down)
			require.Equal(t, tc.code, r.code, "%s", r)
			require.NotNil(t, res.Analysis, "%s", r)
			assert.Equal(t, storage.AnalysisInconclusive, res.Analysis.Outcome)
			assert.Contains(t, res.Analysis.Reason, "127.0.0.1:"+strconv.Itoa(port), "the reason names the Prometheus that did not answer")
			assert.Len(t, res.Analysis.Measurements, 2, "two errors in a row (consecutiveErrorLimit 1) end it")
			for _, m := range res.Analysis.Measurements {
				assert.Equal(t, storage.AnalysisError, m.Outcome, "%+v", m)
			}
			assert.Equal(t, tc.rolledBack, res.RolledBackTo)
			assert.Equal(t, tc.canary, res.Canary.Outcome)
			if tc.code != 0 {
				require.NotNil(t, res.Failure)
				assert.Equal(t, rollout.VerdictAnalysisInconclusive, res.Failure.Verdict)
			} else {
				assert.Nil(t, res.Failure)
				assert.Equal(t, canary.PhaseHolding, res.Canary.Phases[2].Name)
			}
		})
	}
}
