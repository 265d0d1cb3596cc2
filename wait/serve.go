// The serve check: a pod that is Ready must also serve. Every pod checked
// must list the served model on GET /v1/models and complete one short
// request (POST /v1/completions) within a timeout, both reached through
// the API server's pod port-forward (internal/podhttp). A pod that is
// Ready but does not serve is VerdictNotServing.

package wait

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
)

// Defaults of [ServeSpec].
const (
	DefaultServeTimeout   = 60 * time.Second
	DefaultServePrompt    = "Say hello"
	DefaultServeMaxTokens = 4
	// MaxServeTimeout bounds a serve check's timeout (and
	// --serve-check-timeout).
	MaxServeTimeout = time.Hour
	// MaxServeMaxTokens bounds the completion the check asks for: a short
	// request, not a benchmark.
	MaxServeMaxTokens = 1024
	// MaxServePromptBytes bounds the check's prompt.
	MaxServePromptBytes = 4096
	// ServeBodyExcerptBytes bounds the body excerpt a serve check keeps
	// as evidence.
	ServeBodyExcerptBytes = 200
	// serveRetryInterval is the pause between two attempts of a pod that
	// could not be reached (a connection error, a 503).
	serveRetryInterval = 500 * time.Millisecond
	// serveServerErrorAttempts is how many 5xx answers (other than 503) a
	// request may get before the check fails.
	serveServerErrorAttempts = 3
	// serveParallel bounds the pods checked at once.
	serveParallel = 8
	// serveReadLimit bounds what the check reads of an answer.
	serveReadLimit = 1 << 20
)

// PodHTTP opens HTTP clients to pods' ports (podhttp.Forwarder: through
// the API server's port-forward).
type PodHTTP interface {
	Client(namespace, pod string, port int, timeout time.Duration) (*http.Client, func())
}

// PodHTTPFunc is a function that opens HTTP clients to pods' ports, as a
// PodHTTP.
type PodHTTPFunc func(namespace, pod string, port int, timeout time.Duration) (*http.Client, func())

// Client calls f.
func (f PodHTTPFunc) Client(namespace, pod string, port int, timeout time.Duration) (*http.Client, func()) {
	return f(namespace, pod, port, timeout)
}

// ServeSpec is what a serve check asks of each pod.
type ServeSpec struct {
	// Model is the model /v1/models must list and the completion names;
	// "" takes the first model the pod lists.
	Model string
	// Prompt and MaxTokens make the completion request.
	Prompt    string
	MaxTokens int
	// Timeout bounds the check of each pod: retries included.
	Timeout time.Duration
}

func (s ServeSpec) withDefaults() ServeSpec {
	if s.Prompt == "" {
		s.Prompt = DefaultServePrompt
	}
	if s.MaxTokens <= 0 {
		s.MaxTokens = DefaultServeMaxTokens
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultServeTimeout
	}
	return s
}

// ServeTarget is one pod to check and the container port it serves on.
type ServeTarget struct {
	Pod  string
	Port int
	// Node is the node the pod runs on (for the diagnosis).
	Node string
}

// CheckServing runs the serve check of spec on every target (at most a few
// at once), each through a client of clients, and reports each pod's
// result to progress (when set; never concurrently) as it is known. It
// returns the report and, when a pod failed, the diagnosis
// (VerdictNotServing) of the first that failed, in targets' order.
func CheckServing(ctx context.Context, clients PodHTTP, namespace string, targets []ServeTarget, spec ServeSpec, progress func(rollout.ServePod)) (*rollout.ServeReport, *rollout.Diagnosis) {
	spec = spec.withDefaults()
	rep := &rollout.ServeReport{Outcome: rollout.ServePassed, Model: spec.Model, Timeout: spec.Timeout.String(), Pods: make([]rollout.ServePod, len(targets))}
	refusals := make([]error, len(targets))
	var mu sync.Mutex
	sem := make(chan struct{}, serveParallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p := checkPod(ctx, clients, namespace, t, spec)
			mu.Lock()
			defer mu.Unlock()
			rep.Pods[i], refusals[i] = p.ServePod, p.refusedBy
			if progress != nil {
				progress(p.ServePod)
			}
		}()
	}
	wg.Wait()
	for _, refusedBy := range refusals {
		if refusedBy != nil {
			// Not the pods' doing: the check cannot run. It is skipped,
			// said in the report, rather than failing a rollout (and its
			// rollback) that Kubernetes judged healthy.
			rep.Outcome = rollout.ServeSkipped
			rep.Reason = fmt.Sprintf("the API server refused the port-forward to the pods (%v): the serve check needs create on pods/portforward in namespace %s (deploy/rbac/role.yaml); --serve-check=false turns it off", refusedBy, namespace)
			return rep, nil
		}
	}
	for i, p := range rep.Pods {
		if p.Outcome == rollout.ServeFailed {
			rep.Outcome = rollout.ServeFailed
			return rep, notServing(namespace, targets[i], p, spec)
		}
	}
	return rep, nil
}

// notServing is the diagnosis of pod p that failed the check.
func notServing(namespace string, t ServeTarget, p rollout.ServePod, spec ServeSpec) *rollout.Diagnosis {
	evidence := fmt.Sprintf("HTTP %d in %dms", p.Status, p.LatencyMs)
	if p.Status == 0 {
		evidence = fmt.Sprintf("no answer (%dms)", p.LatencyMs)
	}
	if p.Body != "" {
		evidence += ": " + p.Body
	}
	model := spec.Model
	if model == "" {
		model = "a model"
	}
	hints := []string{
		"the serve check asks for model " + model + ": the served model name (--served-model-name; the built-in chart's model.servedModelName or model.name) must match serveCheck.model",
		fmt.Sprintf("a pod that needs longer than %s to answer its first request: raise --serve-check-timeout (or serveCheck.timeout)", spec.Timeout),
		"--serve-check=false (or serveCheck.enabled: false) turns the check off",
	}
	return &rollout.Diagnosis{Reason: string(rollout.VerdictNotServing), Verdict: rollout.VerdictNotServing, Namespace: namespace, Pod: p.Pod, Node: t.Node,
		Message: fmt.Sprintf("pod %s is Ready but does not serve: %s", p.Pod, p.Message), Evidence: termout.SanitizeLine(evidence), Hints: hints}
}

// serveAttempt is the outcome of one request of a check.
type serveAttempt struct {
	status  int
	body    []byte
	latency time.Duration
	err     error
}

// retryable reports whether the attempt may be tried again within the
// timeout: the pod could not be reached (a connection refused, the
// port-forward not ready yet) or answered 503. The API server refusing
// the port-forward itself (forbidden, unauthorized) is not retried.
func (a serveAttempt) retryable() bool {
	return (a.err != nil && !refused(a.err)) || a.status == http.StatusServiceUnavailable
}

// refused reports whether err is the API server refusing the caller the
// port-forward (RBAC: create on pods/portforward), not the pod's doing.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// checkedPod is the check of one pod and, when that is why the pod could
// not be checked, the API server's refusal of the port-forward.
type checkedPod struct {
	rollout.ServePod
	refusedBy error
}

// checkPod runs the check of one pod within spec.Timeout.
func checkPod(ctx context.Context, clients PodHTTP, namespace string, t ServeTarget, spec ServeSpec) checkedPod {
	p := checkedPod{ServePod: rollout.ServePod{Pod: t.Pod, Model: spec.Model}}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	client, done := clients.Client(namespace, t.Pod, t.Port, 0)
	defer done()

	fail := func(a serveAttempt, msg string) checkedPod {
		p.Outcome, p.Status, p.LatencyMs = rollout.ServeFailed, a.status, a.latency.Milliseconds()
		p.Message, p.Body = termout.SanitizeLine(msg), BodyExcerpt(a.body)
		return p
	}
	unanswered := func(what string, a serveAttempt) checkedPod {
		if a.err != nil && refused(a.err) {
			p = fail(a, fmt.Sprintf("%s: %v", what, a.err))
			p.refusedBy = a.err
			return p
		}
		if a.err != nil && ctx.Err() != nil {
			return fail(a, fmt.Sprintf("%s: no answer within %s (last error: %v)", what, spec.Timeout, a.err))
		}
		return fail(a, what+" "+attemptSummary(a))
	}

	a := retry(ctx, func() serveAttempt { return request(ctx, client, http.MethodGet, "/v1/models", nil) })
	if a.err != nil || a.status != http.StatusOK {
		return unanswered("GET /v1/models", a)
	}
	listed, err := listedModels(a.body)
	if err != nil {
		return fail(a, "GET /v1/models: "+err.Error())
	}
	switch {
	case len(listed) == 0:
		return fail(a, "GET /v1/models lists no model")
	case spec.Model == "":
		p.Model = listed[0]
	case !slices.Contains(listed, spec.Model):
		return fail(a, fmt.Sprintf("GET /v1/models lists %s, not %s", strings.Join(listed, ", "), spec.Model))
	}

	body, _ := json.Marshal(map[string]any{"model": p.Model, "prompt": spec.Prompt, "max_tokens": spec.MaxTokens})
	a = retry(ctx, func() serveAttempt { return request(ctx, client, http.MethodPost, "/v1/completions", body) })
	if a.err != nil || a.status != http.StatusOK {
		return unanswered("POST /v1/completions", a)
	}
	if err := completed(a.body); err != nil {
		return fail(a, "POST /v1/completions: "+err.Error())
	}
	p.Outcome, p.Status, p.LatencyMs = rollout.ServePassed, a.status, a.latency.Milliseconds()
	return p
}

// retry runs do until it gives an answer that is not retryable, a 5xx
// (other than 503) was answered serveServerErrorAttempts times, or ctx
// ends; it returns the last attempt.
func retry(ctx context.Context, do func() serveAttempt) serveAttempt {
	serverErrors := 0
	for {
		a := do()
		if a.status >= 500 && a.status != http.StatusServiceUnavailable {
			serverErrors++
			if serverErrors >= serveServerErrorAttempts {
				return a
			}
		} else if !a.retryable() {
			return a
		}
		t := time.NewTimer(serveRetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			if a.err == nil && a.status == 0 {
				a.err = ctx.Err()
			}
			return a
		case <-t.C:
		}
	}
}

// request sends one request to the pod and reads its answer (bounded).
func request(ctx context.Context, client *http.Client, method, path string, body []byte) serveAttempt {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://pod"+path, rd)
	if err != nil {
		return serveAttempt{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return serveAttempt{err: err, latency: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, serveReadLimit))
	a := serveAttempt{status: resp.StatusCode, body: b, latency: time.Since(start)}
	if err != nil && resp.StatusCode == http.StatusOK {
		a.err = fmt.Errorf("read the answer: %w", err)
	}
	return a
}

// attemptSummary says how a request that was not answered 200 ended.
func attemptSummary(a serveAttempt) string {
	if a.err != nil {
		return "failed: " + a.err.Error()
	}
	return fmt.Sprintf("answered %d %s", a.status, http.StatusText(a.status))
}

// listedModels reads the ids of an OpenAI /v1/models answer.
func listedModels(body []byte) ([]string, error) {
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil {
		return nil, errors.New("the answer is not an OpenAI model list")
	}
	out := make([]string, 0, len(models.Data))
	for _, m := range models.Data {
		out = append(out, m.ID)
	}
	return out, nil
}

// completed checks an OpenAI completion answer: at least one choice.
func completed(body []byte) error {
	var c struct {
		Choices []json.RawMessage `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return errors.New("the answer is not an OpenAI completion")
	}
	if len(c.Choices) == 0 {
		return errors.New("the completion has no choices")
	}
	return nil
}

// BodyExcerpt is what a serve check keeps of an answer: its first
// ServeBodyExcerptBytes bytes on one line, control characters removed,
// blanks collapsed, then sanitised as SanitizeLine does (bidirectional
// overrides, CI commands). Secret values are the release layer's to
// withhold (its Redactor).
func BodyExcerpt(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	clipped := len(b) > 4*ServeBodyExcerptBytes
	if clipped {
		b = b[:4*ServeBodyExcerptBytes]
	}
	var sb strings.Builder
	space := false
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == utf8.RuneError && size == 1:
			continue
		case unicode.IsSpace(r):
			space = sb.Len() > 0
			continue
		case unicode.IsControl(r):
			continue
		}
		if space {
			sb.WriteByte(' ')
			space = false
		}
		if sb.Len()+size > ServeBodyExcerptBytes {
			clipped = true
			break
		}
		sb.WriteRune(r)
	}
	s := sb.String()
	if clipped {
		s += " …"
	}
	return termout.SanitizeLine(s)
}
