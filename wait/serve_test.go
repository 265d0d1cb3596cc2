package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
)

// fakePods serves each pod by a handler of an httptest server; a pod's
// first refuse dials fail as a port-forward to a port nothing listens on
// does.
type fakePods struct {
	servers map[string]*httptest.Server
	refuse  map[string]int
	mu      sync.Mutex
	dials   map[string]int
}

func newFakePods(t *testing.T, handlers map[string]http.Handler) *fakePods {
	f := &fakePods{servers: map[string]*httptest.Server{}, refuse: map[string]int{}, dials: map[string]int{}}
	for pod, h := range handlers {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		f.servers[pod] = s
	}
	return f
}

func (f *fakePods) Client(namespace, pod string, port int, timeout time.Duration) (*http.Client, func()) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		f.mu.Lock()
		f.dials[pod]++
		n := f.dials[pod]
		f.mu.Unlock()
		s := f.servers[pod]
		if s == nil || n <= f.refuse[pod] {
			return nil, fmt.Errorf("port-forward to %s/%s:%d: connection refused", namespace, pod, port)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.Listener.Addr().String())
	}}
	return &http.Client{Transport: tr, Timeout: timeout}, tr.CloseIdleConnections
}

// engine is a minimal OpenAI server: it lists models and completes
// requests for the first; completion, when set, answers completions.
func engine(models []string, completion http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		var ids []string
		for _, m := range models {
			ids = append(ids, fmt.Sprintf(`{"id":%q,"object":"model"}`, m))
		}
		fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(ids, ","))
	})
	if completion == nil {
		completion = func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(b), `"model":"`+models[0]+`"`) {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"object":"error","message":"The model does not exist.","code":404}`)
				return
			}
			fmt.Fprint(w, `{"object":"text_completion","choices":[{"text":" hello","finish_reason":"length"}]}`)
		}
	}
	mux.HandleFunc("POST /v1/completions", completion)
	return mux
}

func answer(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

func TestCheckServing(t *testing.T) {
	var flaky atomic.Int32
	for _, tc := range []struct {
		name    string
		handler http.Handler
		refuse  int
		spec    ServeSpec
		// want: the pod's outcome, status, and what its message (and the
		// diagnosis) says.
		outcome, message, body string
		status                 int
	}{
		{name: "serving", handler: engine([]string{"m"}, nil), spec: ServeSpec{Model: "m"}, outcome: rollout.ServePassed, status: 200},
		{name: "any model when none named", handler: engine([]string{"other"}, nil), outcome: rollout.ServePassed, status: 200},
		{name: "wrong model listed", handler: engine([]string{"facebook/opt-125m"}, nil), spec: ServeSpec{Model: "m"},
			outcome: rollout.ServeFailed, status: 200, message: "GET /v1/models lists facebook/opt-125m, not m", body: `"id":"facebook/opt-125m"`},
		{name: "completion 404", handler: engine([]string{"m"}, answer(404, `{"message":"The model `+"`m`"+` does not exist."}`)), spec: ServeSpec{Model: "m"},
			outcome: rollout.ServeFailed, status: 404, message: "POST /v1/completions answered 404 Not Found", body: "does not exist"},
		{name: "completion 500 after retries", handler: engine([]string{"m"}, answer(500, `{"message":"EngineCore encountered an issue"}`)), spec: ServeSpec{Model: "m"},
			outcome: rollout.ServeFailed, status: 500, message: "POST /v1/completions answered 500 Internal Server Error", body: "EngineCore"},
		{name: "one 500 then ok", handler: engine([]string{"m"}, func(w http.ResponseWriter, r *http.Request) {
			if flaky.Add(1) == 1 {
				w.WriteHeader(500)
				return
			}
			fmt.Fprint(w, `{"choices":[{"text":"hi"}]}`)
		}), spec: ServeSpec{Model: "m"}, outcome: rollout.ServePassed, status: 200},
		{name: "models 404", handler: http.NotFoundHandler(), spec: ServeSpec{Model: "m"},
			outcome: rollout.ServeFailed, status: 404, message: "GET /v1/models answered 404 Not Found"},
		{name: "not a model list", handler: answer(200, "<html>welcome</html>"), spec: ServeSpec{Model: "m"},
			outcome: rollout.ServeFailed, status: 200, message: "the answer is not an OpenAI model list", body: "<html>welcome</html>"},
		{name: "no choices", handler: engine([]string{"m"}, answer(200, `{"choices":[]}`)), spec: ServeSpec{Model: "m"},
			outcome: rollout.ServeFailed, status: 200, message: "the completion has no choices"},
		{name: "connection refused then ok", handler: engine([]string{"m"}, nil), refuse: 3, spec: ServeSpec{Model: "m", Timeout: 10 * time.Second},
			outcome: rollout.ServePassed, status: 200},
		{name: "refused until the timeout", handler: engine([]string{"m"}, nil), refuse: 1000, spec: ServeSpec{Model: "m", Timeout: 1200 * time.Millisecond},
			outcome: rollout.ServeFailed, status: 0, message: "GET /v1/models: no answer within 1.2s (last error: "},
		{name: "503 until the timeout", handler: answer(503, "loading"), spec: ServeSpec{Model: "m", Timeout: 1200 * time.Millisecond},
			outcome: rollout.ServeFailed, status: 503, message: "GET /v1/models answered 503", body: "loading"},
		{name: "hang", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }),
			spec: ServeSpec{Model: "m", Timeout: 700 * time.Millisecond}, outcome: rollout.ServeFailed, status: 0, message: "GET /v1/models: no answer within 700ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := newFakePods(t, map[string]http.Handler{"p-1": tc.handler})
			pods.refuse["p-1"] = tc.refuse
			var seen []rollout.ServePod
			start := time.Now()
			rep, f := CheckServing(context.Background(), pods, "ns", []ServeTarget{{Pod: "p-1", Port: 8000, Node: "n1"}}, tc.spec,
				func(p rollout.ServePod) { seen = append(seen, p) })
			require.Len(t, rep.Pods, 1)
			require.Equal(t, rep.Pods, seen, "one progress report per pod")
			p := rep.Pods[0]
			assert.Equal(t, tc.outcome, p.Outcome, "%+v", p)
			assert.Equal(t, tc.status, p.Status, "%+v", p)
			assert.Equal(t, tc.outcome, rep.Outcome)
			if tc.spec.Timeout > 0 {
				assert.Less(t, time.Since(start), tc.spec.Timeout+2*time.Second, "bounded by the timeout")
			}
			if tc.outcome == rollout.ServePassed {
				require.Nil(t, f)
				assert.NotEmpty(t, p.Model)
				return
			}
			require.NotNil(t, f)
			assert.Equal(t, rollout.VerdictNotServing, f.Verdict)
			assert.Equal(t, "NotServing", f.Reason)
			assert.Equal(t, "p-1", f.Pod)
			assert.Equal(t, "n1", f.Node)
			assert.Contains(t, p.Message, tc.message)
			assert.Contains(t, f.Message, tc.message)
			assert.Contains(t, f.Evidence, fmt.Sprintf("%dms", p.LatencyMs))
			assert.Contains(t, p.Body, tc.body)
			assert.Contains(t, f.Evidence, tc.body)
			assert.NotEmpty(t, f.Hints)
		})
	}
}

// A pod is judged on its own: one failing pod fails the check, the
// diagnosis names it, every pod is reported.
func TestCheckServingSeveralPods(t *testing.T) {
	pods := newFakePods(t, map[string]http.Handler{
		"a": engine([]string{"m"}, nil),
		"b": engine([]string{"wrong"}, nil),
		"c": engine([]string{"m"}, nil),
	})
	targets := []ServeTarget{{Pod: "a", Port: 8000}, {Pod: "b", Port: 8000}, {Pod: "c", Port: 8000}}
	rep, f := CheckServing(context.Background(), pods, "ns", targets, ServeSpec{Model: "m"}, nil)
	require.NotNil(t, f)
	assert.Equal(t, "b", f.Pod)
	assert.Equal(t, rollout.ServeFailed, rep.Outcome)
	outcomes := map[string]string{}
	for _, p := range rep.Pods {
		outcomes[p.Pod] = p.Outcome
	}
	assert.Equal(t, map[string]string{"a": rollout.ServePassed, "b": rollout.ServeFailed, "c": rollout.ServePassed}, outcomes)
	assert.Equal(t, "b", rep.Failed().Pod)
}

// An interrupted check ends at once.
func TestCheckServingCancelled(t *testing.T) {
	pods := newFakePods(t, map[string]http.Handler{"p": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, f := CheckServing(ctx, pods, "ns", []ServeTarget{{Pod: "p", Port: 8000}}, ServeSpec{Timeout: time.Hour}, nil)
	require.NotNil(t, f)
	assert.Equal(t, rollout.ServeFailed, rep.Outcome)
	assert.Contains(t, rep.Pods[0].Message, "GET /v1/models")
	assert.Less(t, rep.Pods[0].LatencyMs, int64(5000), "not held for the timeout")
}

func TestBodyExcerpt(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"json kept", `{"message":"The model does not exist."}`, `{"message":"The model does not exist."}`},
		{"control characters removed", "a\x1b]0;title\x07b\x00c", "a]0;titlebc"},
		{"line breaks become one space", "line 1\r\n\r\n  line 2\n", "line 1 line 2"},
		{"invalid UTF-8 dropped", "ok\xff\xfe!", "ok!"},
		{"bidi override escaped", "abc\u202edef", `abc\u202edef`},
		{"CI command defused", "::set-output name=x::y", `\x3a:set-output name=x::y`},
		{"clipped", long, strings.Repeat("x", ServeBodyExcerptBytes) + " …"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BodyExcerpt([]byte(tc.in))
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), ServeBodyExcerptBytes+16)
			assert.Equal(t, got, termout.SanitizeLine(got), "sanitised")
		})
	}
}

// forbiddenPods refuses every port-forward as an API server does for an
// account without create on pods/portforward.
type forbiddenPods struct{ dials atomic.Int32 }

func (f *forbiddenPods) Client(namespace, pod string, port int, timeout time.Duration) (*http.Client, func()) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		f.dials.Add(1)
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/portforward"}, pod, errors.New(`User "ci" cannot create resource "pods/portforward"`))
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", namespace, pod, err)
	}}
	return &http.Client{Transport: tr, Timeout: timeout}, tr.CloseIdleConnections
}

// TestCheckServingForbidden: the API server refusing the port-forward is
// not the pods' doing: no retry until the timeout, no NotServing (which
// would roll back a healthy rollout, and fail its rollback the same way),
// but a skipped check that says what right it needs.
func TestCheckServingForbidden(t *testing.T) {
	pods := &forbiddenPods{}
	rep, f := CheckServing(context.Background(), pods, "ns", []ServeTarget{{Pod: "a", Port: 8000}, {Pod: "b", Port: 8000}},
		ServeSpec{Model: "m", Timeout: time.Hour}, nil)
	assert.Nil(t, f, "no NotServing")
	assert.Equal(t, rollout.ServeSkipped, rep.Outcome)
	assert.Contains(t, rep.Reason, "create on pods/portforward in namespace ns")
	assert.Contains(t, rep.Reason, "--serve-check=false")
	assert.Equal(t, int32(2), pods.dials.Load(), "one dial per pod: not retried")
}
