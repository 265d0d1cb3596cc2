package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// loadPods counts completions per pod; block, when set, holds requests
// until it is closed.
type loadPods struct {
	mu      sync.Mutex
	byPod   map[string]int
	bodies  []string
	block   chan struct{}
	entered chan string
	srv     *httptest.Server
}

func newLoadPods(t *testing.T, block bool) *loadPods {
	p := &loadPods{byPod: map[string]int{}, entered: make(chan string, 100)}
	if block {
		p.block = make(chan struct{})
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 512)
		n, _ := r.Body.Read(buf)
		p.mu.Lock()
		p.byPod[r.Header.Get("X-Pod")]++
		p.bodies = append(p.bodies, r.Method+" "+r.URL.Path+" "+string(buf[:n]))
		p.mu.Unlock()
		p.entered <- r.Header.Get("X-Pod")
		if p.block != nil {
			<-p.block
		}
		_, _ = w.Write([]byte(`{"choices":[{"text":"hi"}]}`))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *loadPods) client(pod string, _ int, timeout time.Duration) (*http.Client, func()) {
	u, _ := url.Parse(p.srv.URL)
	tr := &http.Transport{}
	return &http.Client{Timeout: timeout, Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Host, r.URL.Scheme = u.Host, "http"
		r.Header.Set("X-Pod", pod)
		return tr.RoundTrip(r)
	})}, tr.CloseIdleConnections
}

// stepAndWait steps the clock one tick and waits for the request it sends.
func stepAndWait(t *testing.T, clk *testingclock.FakeClock, tick time.Duration, entered <-chan string) string {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	clk.Step(tick)
	select {
	case pod := <-entered:
		return pod
	case <-time.After(5 * time.Second):
		t.Fatal("no request after a tick")
		return ""
	}
}

func TestLoaderEqualShares(t *testing.T) {
	before := runtime.NumGoroutine()
	pods := newLoadPods(t, false)
	clk := testingclock.NewFakeClock(time.Now())
	l := &Loader{Load: &Load{RPS: 4, MaxTokens: 3, Prompt: "ping"}, Clock: clk, Client: pods.client,
		Targets: Targets{Canary: []Target{{"c1", 8000}}, Stable: []Target{{"s1", 8000}, {"s2", 8000}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var sent int64
	go func() { defer close(done); sent = l.Run(ctx).Sent }()
	var order []string
	for range 8 {
		order = append(order, stepAndWait(t, clk, 250*time.Millisecond, pods.entered))
	}
	require.Eventually(t, func() bool { return l.inFlight.Load() == 0 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.Equal(t, int64(8), sent)
	// Alternately canary and stable, round-robin within the stable side.
	assert.Equal(t, []string{"c1", "s1", "c1", "s2", "c1", "s1", "c1", "s2"}, order)
	assert.Equal(t, map[string]int{"c1": 4, "s1": 2, "s2": 2}, pods.byPod)
	assert.Equal(t, `POST /v1/completions {"prompt":"ping","max_tokens":3}`, pods.bodies[0])
	assert.Equal(t, int64(0), l.failed.Load())
	pods.srv.CloseClientConnections()
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+3 }, 5*time.Second, 10*time.Millisecond,
		"the loader's goroutines end with it")
}

func TestLoaderBoundsInFlight(t *testing.T) {
	pods := newLoadPods(t, true)
	clk := testingclock.NewFakeClock(time.Now())
	l := &Loader{Load: &Load{RPS: 10, MaxTokens: 1, Prompt: "p"}, Clock: clk, Client: pods.client, MaxInFlight: 1,
		Targets: Targets{Canary: []Target{{"c1", 8000}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	assert.Equal(t, "c1", stepAndWait(t, clk, 100*time.Millisecond, pods.entered))
	// The one slot is busy: the next ticks drop their requests.
	for i := int64(1); i <= 3; i++ {
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		clk.Step(100 * time.Millisecond)
		require.Eventually(t, func() bool { return l.dropped.Load() == i }, 5*time.Second, time.Millisecond)
	}
	// Ending the analysis cancels the request in flight; Run waits for it.
	cancel()
	<-done
	close(pods.block)
	r := l.report()
	assert.Equal(t, int64(1), r.Sent)
	assert.Equal(t, int64(3), r.Dropped)
	assert.Equal(t, int64(0), r.Failed, "cancelled with the analysis: not a failure")
}
