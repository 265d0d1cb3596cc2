package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/release/storage"
)

// Bounds of the synthetic load.
const (
	// maxLoadInFlight bounds the requests in flight at once: a tick that
	// finds them all busy drops its request (counted) instead of piling
	// up goroutines behind a slow pod.
	maxLoadInFlight = 64
	// loadRequestTimeout bounds one request.
	loadRequestTimeout = 60 * time.Second
)

// Loader sends the synthetic load of an analysis: OpenAI /v1/completions
// requests (the spec's prompt and max_tokens) at RPS in all, alternately
// to a canary pod and to a stable pod (equal shares; all to the canary
// without stable pods), round-robin within a side, like Flagger's load
// tester for clusters with no user traffic.
type Loader struct {
	Load    *Load
	Targets Targets
	Client  ClientFunc
	Clock   clock.WithTicker
	// MaxInFlight bounds the requests in flight (0: maxLoadInFlight).
	MaxInFlight int

	sent, failed, dropped, inFlight atomic.Int64
}

// Run sends the load until ctx ends, then waits for the requests in
// flight (each bounded by its own timeout and by ctx) and returns what
// was sent. It leaves no goroutine behind.
func (l *Loader) Run(ctx context.Context) *storage.LoadReport {
	limit := l.MaxInFlight
	if limit <= 0 {
		limit = maxLoadInFlight
	}
	type client struct {
		t    Target
		c    *http.Client
		done func()
	}
	open := func(ts []Target) []client {
		out := make([]client, 0, len(ts))
		for _, t := range ts {
			c, done := l.Client(t.Pod, t.Port, loadRequestTimeout)
			out = append(out, client{t, c, done})
		}
		return out
	}
	sides := [][]client{open(l.Targets.Canary), open(l.Targets.Stable)}
	defer func() {
		for _, side := range sides {
			for _, c := range side {
				c.done()
			}
		}
	}()
	body, _ := json.Marshal(completionRequest{Model: l.Load.Model, Prompt: l.Load.Prompt, MaxTokens: l.Load.MaxTokens})
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := l.Clock.NewTicker(time.Duration(float64(time.Second) / l.Load.RPS))
	defer ticker.Stop()
	next := [2]int{}
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return l.report()
		case <-ticker.C():
		}
		side := n % 2
		if len(sides[side]) == 0 {
			side = 1 - side
		}
		if len(sides[side]) == 0 {
			continue
		}
		c := sides[side][next[side]%len(sides[side])]
		next[side]++
		select {
		case slots <- struct{}{}:
		default:
			l.dropped.Add(1)
			continue
		}
		wg.Add(1)
		l.inFlight.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots; l.inFlight.Add(-1) }()
			l.send(ctx, c.c, c.t, body)
		}()
	}
}

// report is what was sent so far.
func (l *Loader) report() *storage.LoadReport {
	return &storage.LoadReport{RPS: l.Load.RPS, Sent: l.sent.Load(), Failed: l.failed.Load(), Dropped: l.dropped.Load()}
}

type completionRequest struct {
	Model     string `json:"model,omitempty"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
}

// send sends one request; an error or a status other than 200 counts as
// failed, except a request the end of the analysis cancelled.
func (l *Loader) send(ctx context.Context, c *http.Client, t Target, body []byte) {
	l.sent.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Pod+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		l.failed.Add(1)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			// Not one the end of the analysis cut short.
			l.failed.Add(1)
		}
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.failed.Add(1)
	}
}
