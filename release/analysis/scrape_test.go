package analysis

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name string
		q    float64
		b    map[float64]float64
		want float64
	}{
		// rank 9.5 of 10 in (0.1, 0.25], all 10 there: 0.1 + 0.15 × 9.5/10.
		{"interpolated", 0.95, map[float64]float64{0.1: 0, 0.25: 10, 0.5: 10, inf: 10}, 0.2425},
		// rank 1 of 2 in the first bucket (lower bound 0): 0.1 × 1/1.
		{"first bucket", 0.5, map[float64]float64{0.1: 1, 0.25: 2, 0.5: 2, inf: 2}, 0.1},
		// rank 9.5 beyond the last finite bucket: its upper bound.
		{"in +Inf", 0.95, map[float64]float64{0.1: 0, 0.25: 0, 0.5: 1, inf: 10}, 0.5},
		// rank 50 of 100: 40 below 0.02, 60 in (0.02, 0.04]: 0.02 + 0.02 × 10/60.
		{"vllm buckets", 0.5, map[float64]float64{0.01: 0, 0.02: 40, 0.04: 100, inf: 100}, 0.02 + 0.02*10.0/60},
		// A cumulative count that falls is raised to the previous one.
		{"non-monotonic", 0.5, map[float64]float64{0.1: 4, 0.2: 3, inf: 4}, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, histogramQuantile(tc.q, tc.b), 1e-12)
		})
	}
	assert.True(t, math.IsNaN(histogramQuantile(0.95, map[float64]float64{0.1: 0, inf: 0})), "no observation")
	assert.True(t, math.IsNaN(histogramQuantile(0.95, map[float64]float64{0.1: 3})), "no +Inf bucket")
	assert.True(t, math.IsNaN(histogramQuantile(0.95, nil)))
}

// metricsText renders a pod's /metrics as vLLM's: requests counted by
// status, finished reasons, preemptions, KV usage and a TTFT histogram of
// cumulative bucket counts (le 0.02, 0.04, 0.1, 0.25).
func metricsText(ok, errs, aborts, preempt int, kv float64, ttft [4]int, total int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE http_requests_total counter\n")
	fmt.Fprintf(&b, "http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"} %d\n", ok)
	if errs > 0 {
		fmt.Fprintf(&b, "http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"5xx\"} %d\n", errs)
	}
	fmt.Fprintf(&b, "http_requests_total{handler=\"/v1/models\",method=\"GET\",status=\"5xx\"} 7\n")
	fmt.Fprintf(&b, "# TYPE vllm:request_success_total counter\n")
	fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} %d\n", ok-aborts)
	fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"m\"} %d\n", aborts)
	fmt.Fprintf(&b, "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} %d\n", preempt)
	fmt.Fprintf(&b, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} %g\n", kv)
	fmt.Fprintf(&b, "# TYPE vllm:time_to_first_token_seconds histogram\n")
	for i, le := range []string{"0.02", "0.04", "0.1", "0.25"} {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"m\",le=\"%s\"} %d\n", le, ttft[i])
	}
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"m\",le=\"+Inf\"} %d\n", total)
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 1\nvllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} %d\n", total)
	return b.String()
}

// fakePods serves each pod's /metrics from what the test sets.
type fakePods struct {
	mu    sync.Mutex
	text  map[string]string
	fail  map[string]bool
	srv   *httptest.Server
	calls map[string]int
}

func newFakePods(t *testing.T) *fakePods {
	f := &fakePods{text: map[string]string{}, fail: map[string]bool{}, calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pod := r.Header.Get("X-Pod")
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls[pod+" "+r.URL.Path]++
		if f.fail[pod] {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/metrics" {
			_, _ = w.Write([]byte(f.text[pod]))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePods) set(pod, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.text[pod] = text
}

func (f *fakePods) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// client routes a pod's requests to the fake server, naming the pod.
func (f *fakePods) client(pod string, port int, timeout time.Duration) (*http.Client, func()) {
	u, _ := url.Parse(f.srv.URL)
	tr := &http.Transport{}
	return &http.Client{Timeout: timeout, Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Host, r.URL.Scheme = u.Host, "http"
		r.Header.Set("X-Pod", pod)
		return tr.RoundTrip(r)
	})}, tr.CloseIdleConnections
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestScraperPresets(t *testing.T) {
	pods := newFakePods(t)
	targets := Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}}, Stable: []Target{{"s1", 8000}, {"s2", 8000}}}
	checks := []Check{{Name: PresetErrorRatio, Preset: PresetErrorRatio, Max: 0.05}, {Name: PresetTTFTP95Ratio, Preset: PresetTTFTP95Ratio, Max: 2, Baseline: true},
		{Name: PresetPreemptionRate, Preset: PresetPreemptionRate, Max: 0.1}, {Name: PresetKVCacheUsage, Preset: PresetKVCacheUsage, Max: 0.95}}
	// Start: some history on every pod.
	pods.set("c1", metricsText(10, 0, 0, 0, 0.1, [4]int{10, 10, 10, 10}, 10))
	pods.set("s1", metricsText(10, 0, 0, 0, 0.1, [4]int{10, 10, 10, 10}, 10))
	pods.set("s2", metricsText(10, 0, 0, 0, 0.1, [4]int{10, 10, 10, 10}, 10))
	s := NewScraper(targets, pods.client, time.Second, 5)
	require.NoError(t, s.Start(context.Background()))

	// Interval: the canary finished 20 requests (4 of them 5xx, which vLLM
	// also finishes "abort", and 2 more aborted by their clients: 6
	// aborts), 6 preemptions, TTFT all in (0.1, 0.25]; the
	// stable pods 15, TTFT all in (0.02, 0.04]. s2's process
	// restarted: its counters count from 0.
	pods.set("c1", metricsText(26, 4, 6, 6, 0.5, [4]int{10, 10, 10, 30}, 30))
	pods.set("s1", metricsText(20, 0, 0, 0, 0.97, [4]int{10, 20, 20, 20}, 20))
	pods.set("s2", metricsText(5, 0, 0, 0, 0.2, [4]int{0, 5, 5, 5}, 5))
	got, err := s.Measure(context.Background(), checks)
	require.NoError(t, err)
	require.Len(t, got, 4)

	er := got[0]
	assert.Equal(t, 20.0, er.CanaryRequests)
	assert.Equal(t, 15.0, er.StableRequests, "s1 +10, s2 restarted (its counters fell): 5")
	require.NotNil(t, er.Value)
	assert.InDelta(t, 6.0/20, *er.Value, 1e-12, "the larger count (6 aborts, not 4 + 6) over requests; /v1/models not counted")
	assert.InDelta(t, 0, *er.Stable, 1e-12)
	assert.Empty(t, er.Inconclusive)

	tt := got[1]
	require.NotNil(t, tt.Canary)
	require.NotNil(t, tt.Stable)
	assert.InDelta(t, 0.1+0.15*0.95, *tt.Canary, 1e-12)
	assert.InDelta(t, 0.02+0.02*0.95, *tt.Stable, 1e-12)
	assert.InDelta(t, (0.1+0.15*0.95)/(0.02+0.02*0.95), *tt.Value, 1e-12)

	assert.InDelta(t, 6.0/20, *got[2].Value, 1e-12)
	assert.InDelta(t, 0.5, *got[3].Value, 1e-12, "the canary's KV usage, not the stable pods'")
	assert.InDelta(t, 0.97, *got[3].Stable, 1e-12)

	// Next interval: nothing on the stable side: inconclusive (minRequests 5).
	pods.set("c1", metricsText(36, 4, 2, 6, 0.5, [4]int{10, 10, 10, 40}, 40))
	got, err = s.Measure(context.Background(), checks)
	require.NoError(t, err)
	assert.Contains(t, got[1].Inconclusive, "the stable pods finished 0 request(s), fewer than minRequests 5")
	assert.Nil(t, got[1].Stable)

	// A pod that cannot be scraped is an error; nothing of the round is
	// kept, so the next measurement spans both intervals.
	pods.mu.Lock()
	pods.fail["s1"] = true
	pods.mu.Unlock()
	pods.set("c1", metricsText(46, 4, 2, 6, 0.5, [4]int{10, 10, 10, 50}, 50))
	_, err = s.Measure(context.Background(), checks)
	require.ErrorContains(t, err, "scrape pod ns/s1: /metrics answered 503")
	pods.mu.Lock()
	pods.fail["s1"] = false
	pods.mu.Unlock()
	pods.set("c1", metricsText(56, 4, 2, 6, 0.5, [4]int{10, 10, 10, 60}, 60))
	got, err = s.Measure(context.Background(), checks)
	require.NoError(t, err)
	assert.Equal(t, 20.0, got[0].CanaryRequests)
}

func TestScraperStartFailureIsMeasuredAgain(t *testing.T) {
	pods := newFakePods(t)
	targets := Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}}}
	pods.set("c1", metricsText(1, 0, 0, 0, 0, [4]int{1, 1, 1, 1}, 1))
	pods.mu.Lock()
	pods.fail["c1"] = true
	pods.mu.Unlock()
	s := NewScraper(targets, pods.client, time.Second, 0)
	require.Error(t, s.Start(context.Background()))
	pods.mu.Lock()
	pods.fail["c1"] = false
	pods.mu.Unlock()
	checks := []Check{{Name: PresetErrorRatio, Preset: PresetErrorRatio, Max: 0.05}}
	_, err := s.Measure(context.Background(), checks)
	require.ErrorContains(t, err, "no earlier scrape of pod(s) c1")
	pods.set("c1", metricsText(5, 0, 0, 0, 0, [4]int{5, 5, 5, 5}, 5))
	got, err := s.Measure(context.Background(), checks)
	require.NoError(t, err)
	assert.Equal(t, 4.0, got[0].CanaryRequests)
	assert.Nil(t, got[0].Stable, "no stable pods: no baseline")
}

// TestScrapeRefusesAnEndlessBody: a pod whose /metrics never ends is a
// failed scrape once maxMetricsBytes are read, not a truncated answer
// whose figures count (an answer cut at a line's end parses).
func TestScrapeRefusesAnEndlessBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(metricsText(1, 0, 0, 0, 0, [4]int{1, 1, 1, 1}, 1)))
		line := []byte(strings.Repeat("# endless\n", 1000))
		for {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	client := func(string, int, time.Duration) (*http.Client, func()) {
		tr := &http.Transport{}
		return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.URL.Host, r.URL.Scheme = u.Host, "http"
			return tr.RoundTrip(r)
		})}, tr.CloseIdleConnections
	}
	s := NewScraper(Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}}}, client, 10*time.Second, 0)
	require.ErrorContains(t, s.Start(context.Background()), "larger than its cap")
}

func TestFailedRequests(t *testing.T) {
	assert.Equal(t, 6.0, failedRequests(4, 6), "an engine failure is a 5xx and an abort: counted once")
	assert.Equal(t, 5.0, failedRequests(5, 0), "a proxy's 5xx the engine never saw")
	assert.Equal(t, 0.0, failedRequests(0, 0))
}
