package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// VLLMVersion is the vLLM release whose OpenAI server this simulator
// imitates: response shapes (vllm/entrypoints/openai/protocol.py), metric
// names, types, labels and buckets (vllm/v1/metrics/loggers.py) and the
// HTTP metrics of prometheus-fastapi-instrumentator as vLLM configures it
// (vllm/entrypoints/openai/api_server.py). It is the built-in chart's
// default image tag.
const VLLMVersion = "v0.11.0"

// Behaviour is how a simulated engine serves, chosen by its image.
type Behaviour string

const (
	Healthy    Behaviour = "healthy"
	Slow       Behaviour = "serve-slow"       // time to first token 6x a healthy pod's
	Errors     Behaviour = "serve-errors"     // every 5th inference request answered 500
	WrongModel Behaviour = "serve-wrongmodel" // serves (and lists) another model
	Hang       Behaviour = "serve-hang"       // accepts, never answers (until the client goes)
	Preempt    Behaviour = "serve-preempt"    // preemptions rising, KV cache usage near 1
)

// BehaviourOf returns the serving behaviour an image chooses: the first
// serve-<kind> it contains, healthy otherwise.
func BehaviourOf(image string) Behaviour {
	for _, b := range []Behaviour{Slow, Errors, WrongModel, Hang, Preempt} {
		if strings.Contains(image, string(b)) {
			return b
		}
	}
	return Healthy
}

// Timing of a simulated request. A healthy engine answers the first token
// after HealthyTTFT and every further one after HealthyITL; a slow one
// takes SlowFactor times as long for both.
const (
	HealthyTTFT = 20 * time.Millisecond
	HealthyITL  = 5 * time.Millisecond
	SlowFactor  = 6
	// ErrorEvery: with serve-errors every ErrorEvery-th inference request
	// (completions and chat completions, counted per pod) is answered 500.
	ErrorEvery = 5
	// PreemptionsPerRequest is what a serve-preempt engine adds to
	// vllm:num_preemptions_total per inference request.
	PreemptionsPerRequest = 3
	// PreemptKVUsage is a serve-preempt engine's vllm:kv_cache_usage_perc.
	PreemptKVUsage = 0.985
	// OtherModel is what a serve-wrongmodel engine serves (vLLM's old
	// default model), or DefaultModel when that is the expected one.
	OtherModel = "facebook/opt-125m"
	// DefaultModel is served when the pod names no model (vLLM's default).
	DefaultModel = "Qwen/Qwen3-0.6B"
	// DefaultMaxTokens is vLLM's default max_tokens of /v1/completions; the
	// simulator also caps every answer at it.
	DefaultMaxTokens = 16
	// naturalTokens is the length of an answer that stops by itself
	// (finish_reason "stop") when max_tokens allows more.
	naturalTokens = 8
	// MaxBodyBytes bounds an inference request's body: far above any prompt
	// of MaxModelLen tokens, small enough that a runaway client cannot make
	// the simulator hold it in memory (413 beyond it).
	MaxBodyBytes = 8 << 20
)

// Config is what an engine serves.
type Config struct {
	Model       string // --model (the root of /v1/models)
	ServedNames []string
	MaxModelLen int
	Behaviour   Behaviour
}

// Engine is one simulated vLLM server: its OpenAI API, its /metrics and the
// in-memory state behind them.
type Engine struct {
	cfg     Config
	served  []string // what /v1/models lists and requests may name
	created int64
	reg     *prometheus.Registry
	handler http.Handler

	mu       sync.Mutex
	requests int // inference requests so far (serve-errors counts them)
	running  int

	mRunning, mWaiting, mKV            prometheus.Gauge
	mPreempt, mPromptTok, mGenTok      prometheus.Counter
	mSuccess                           *prometheus.CounterVec
	mTTFT, mITL, mTPOT, mE2E, mQueue   prometheus.Observer
	mPromptHist, mGenHist, mMaxTokHist prometheus.Observer
	mHTTP                              *prometheus.CounterVec
	mHTTPDuration                      *prometheus.HistogramVec
}

// vLLM's buckets (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	latencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	// prometheus-fastapi-instrumentator's default latency buckets.
	httpBuckets = []float64{0.1, 0.5, 1}
)

// build125Buckets is vLLM's build_1_2_5_buckets(max).
func build125Buckets(max int) []float64 {
	var out []float64
	for e := 1; ; e *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*e > max {
				return out
			}
			out = append(out, float64(m*e))
		}
	}
}

// finishReasons are vLLM v1's FinishReason values, each pre-created as a
// vllm:request_success_total series.
var finishReasons = []string{"stop", "length", "abort"}

// NewEngine returns an engine serving cfg.
func NewEngine(cfg Config) *Engine {
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if len(cfg.ServedNames) == 0 {
		cfg.ServedNames = []string{cfg.Model}
	}
	if cfg.MaxModelLen <= 0 {
		cfg.MaxModelLen = 40960
	}
	if cfg.Behaviour == "" {
		cfg.Behaviour = Healthy
	}
	e := &Engine{cfg: cfg, served: cfg.ServedNames, created: time.Now().Unix(), reg: prometheus.NewRegistry()}
	if cfg.Behaviour == WrongModel {
		other := OtherModel
		if cfg.ServedNames[0] == OtherModel {
			other = DefaultModel
		}
		e.served = []string{other}
	}
	// vLLM labels every engine metric with the (first) served model name
	// and the engine index.
	labels := prometheus.Labels{"model_name": e.served[0], "engine": "0"}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		e.reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		e.reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		e.reg.MustRegister(h)
		return h
	}
	e.mRunning = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	e.mWaiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	e.mKV = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	e.mPreempt = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	e.mPromptTok = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	e.mGenTok = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	e.mSuccess = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
		Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"})
	e.reg.MustRegister(e.mSuccess)
	for _, r := range finishReasons {
		e.mSuccess.WithLabelValues(r)
	}
	tokBuckets := build125Buckets(cfg.MaxModelLen)
	e.mPromptHist = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokBuckets)
	e.mGenHist = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokBuckets)
	e.mMaxTokHist = hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokBuckets)
	e.mTTFT = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	e.mITL = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	// Deprecated in v0.11 in favour of the two above; still exported.
	e.mTPOT = hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", itlBuckets)
	e.mE2E = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", latencyBuckets)
	e.mQueue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", latencyBuckets)
	e.mHTTP = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total",
		Help: "Total number of requests by method, status and handler."}, []string{"handler", "method", "status"})
	e.mHTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_duration_seconds",
		Help: "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important.", Buckets: httpBuckets},
		[]string{"handler", "method"})
	e.reg.MustRegister(e.mHTTP, e.mHTTPDuration)
	if cfg.Behaviour == Preempt {
		e.mKV.Set(PreemptKVUsage)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", e.health)
	mux.Handle("GET /v1/models", e.instrument("/v1/models", e.models))
	mux.Handle("POST /v1/completions", e.instrument("/v1/completions", e.completions))
	mux.Handle("POST /v1/chat/completions", e.instrument("/v1/chat/completions", e.chatCompletions))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// vLLM (FastAPI) answers unknown paths {"detail":"Not Found"}.
		e.mHTTP.WithLabelValues("none", r.Method, "4xx").Inc()
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	})
	e.handler = mux
	return e
}

// Served returns the model names the engine serves.
func (e *Engine) Served() []string { return append([]string(nil), e.served...) }

// Registry returns the engine's metrics registry.
func (e *Engine) Registry() *prometheus.Registry { return e.reg }

func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.handler.ServeHTTP(w, r) }

// statusWriter records the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// instrument counts a handler's answers as prometheus-fastapi-instrumentator
// does for vLLM: http_requests_total{handler,method,status} with status
// grouped (2xx, 4xx, 5xx); /metrics and /health are excluded, as vLLM
// configures it. A request never answered (serve-hang) is not counted.
func (e *Engine) instrument(handler string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		if e.cfg.Behaviour == Hang {
			e.hang(r)
			return
		}
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		e.mHTTP.WithLabelValues(handler, r.Method, fmt.Sprintf("%dxx", sw.status/100)).Inc()
		e.mHTTPDuration.WithLabelValues(handler, r.Method).Observe(time.Since(start).Seconds())
	})
}

// hang holds a request open until its client goes, counted as running.
func (e *Engine) hang(r *http.Request) {
	// The server notices a client that went away only once the body is read.
	_, _ = io.Copy(io.Discard, r.Body)
	e.setRunning(+1)
	defer e.setRunning(-1)
	<-r.Context().Done()
}

func (e *Engine) health(w http.ResponseWriter, r *http.Request) {
	if e.cfg.Behaviour == Hang {
		e.hang(r)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *Engine) setRunning(d int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running += d
	e.mRunning.Set(float64(e.running))
	if e.cfg.Behaviour != Preempt {
		// A few percent per running request of a small test model.
		kv := 0.03 * float64(e.running)
		if kv > 0.9 {
			kv = 0.9
		}
		e.mKV.Set(kv)
	}
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen int               `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

func (e *Engine) models(w http.ResponseWriter, r *http.Request) {
	root := e.cfg.Model
	if e.cfg.Behaviour == WrongModel {
		root = e.served[0]
	}
	list := modelList{Object: "list"}
	for _, name := range e.served {
		list.Data = append(list.Data, modelCard{ID: name, Object: "model", Created: e.created, OwnedBy: "vllm",
			Root: root, MaxModelLen: e.cfg.MaxModelLen, Permission: []modelPermission{{
				ID: "modelperm-" + randomID(), Object: "model_permission", Created: e.created,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}}})
	}
	writeJSON(w, http.StatusOK, list)
}

// errorResponse is vLLM's ErrorResponse (nested ErrorInfo, code the HTTP
// status).
type errorResponse struct {
	Error errorInfo `json:"error"`
}

type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorResponse{Error: errorInfo{Message: msg, Type: typ, Code: status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Request bodies (the fields the simulator reads).
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Messages      []chatMessage   `json:"messages"`
	MaxTokens     *int            `json:"max_tokens"`
	MaxCompTokens *int            `json:"max_completion_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type usage struct {
	PromptTokens        int  `json:"prompt_tokens"`
	TotalTokens         int  `json:"total_tokens"`
	CompletionTokens    int  `json:"completion_tokens"`
	PromptTokensDetails *any `json:"prompt_tokens_details"`
}

// words are the simulated answer's tokens, one word each.
var words = []string{" The", " simulated", " engine", " answers", " with", " deterministic", " tokens", " from",
	" vllmctl's", " local", " cluster", " so", " tests", " can", " rely", " on"}

// countTokens approximates a tokenizer: one token per word, at least one.
func countTokens(s string) int {
	n := len(strings.Fields(s))
	if n == 0 {
		return 1
	}
	return n
}

func (req *completionRequest) promptTokens(chat bool) int {
	if !chat {
		var s string
		if json.Unmarshal(req.Prompt, &s) == nil {
			return countTokens(s)
		}
		var list []string
		if json.Unmarshal(req.Prompt, &list) == nil {
			return countTokens(strings.Join(list, " "))
		}
		var ids []int
		if json.Unmarshal(req.Prompt, &ids) == nil && len(ids) > 0 {
			return len(ids)
		}
		return 1
	}
	n := 0
	for _, m := range req.Messages {
		// The chat template adds a few tokens per message.
		n += 4
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			n += countTokens(s)
		} else {
			n += countTokens(string(m.Content))
		}
	}
	return n + 1
}

// request is one inference request in flight.
type request struct {
	chat      bool
	model     string
	id        string
	created   int64
	prompt    int
	maxTokens int
	tokens    int    // to generate
	finish    string // stop or length
	stream    bool
	usage     bool
}

// admit parses and checks an inference request: nil and an answer already
// written when it is refused.
func (e *Engine) admit(w http.ResponseWriter, r *http.Request, chat bool) *request {
	var req completionRequest
	// Read to its end (bounded): the server notices a client that went away
	// only once the body is read.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "BadRequestError", fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit))
		return nil
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON body: "+err.Error())
		return nil
	}
	model := req.Model
	if model == "" {
		model = e.served[0]
	}
	known := false
	for _, s := range e.served {
		known = known || s == model
	}
	if !known {
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", model))
		return nil
	}
	if chat && len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "BadRequestError", "messages: Field required")
		return nil
	}
	if !chat && len(req.Prompt) == 0 {
		writeError(w, http.StatusBadRequest, "BadRequestError", "prompt: Field required")
		return nil
	}
	q := &request{chat: chat, model: model, created: time.Now().Unix(), stream: req.Stream,
		usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	q.prompt = req.promptTokens(chat)
	max := req.MaxTokens
	if req.MaxCompTokens != nil {
		max = req.MaxCompTokens
	}
	q.maxTokens = DefaultMaxTokens
	if max != nil {
		q.maxTokens = *max
	} else if chat {
		q.maxTokens = e.cfg.MaxModelLen - q.prompt
	}
	if q.maxTokens < 1 {
		writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("max_tokens must be at least 1, got %d.", q.maxTokens))
		return nil
	}
	q.tokens, q.finish = naturalTokens, "stop"
	if q.maxTokens <= naturalTokens {
		q.tokens, q.finish = q.maxTokens, "length"
	}
	if chat {
		q.id = "chatcmpl-" + randomID()
	} else {
		q.id = "cmpl-" + randomID()
	}

	e.mu.Lock()
	e.requests++
	n := e.requests
	e.mu.Unlock()
	if e.cfg.Behaviour == Errors && n%ErrorEvery == 0 {
		// The engine fails the request: vLLM counts it as aborted.
		e.mSuccess.WithLabelValues("abort").Inc()
		writeError(w, http.StatusInternalServerError, "InternalServerError", "EngineCore encountered an issue. See stack trace (above) for the root cause.")
		return nil
	}
	return q
}

func (e *Engine) timing() (ttft, itl time.Duration) {
	ttft, itl = HealthyTTFT, HealthyITL
	switch e.cfg.Behaviour {
	case Slow:
		ttft, itl = ttft*SlowFactor, itl*SlowFactor
	case Preempt:
		// Preempted requests are recomputed: later first tokens.
		ttft *= 2
	}
	return ttft, itl
}

// generate produces the request's tokens, calling emit for each (after the
// time to first token, then every inter-token latency), and records the
// request's metrics. false when the client went away.
func (e *Engine) generate(r *http.Request, q *request, emit func(i int, tok string)) bool {
	arrival := time.Now()
	e.setRunning(+1)
	defer e.setRunning(-1)
	e.mQueue.Observe(0)
	if e.cfg.Behaviour == Preempt {
		e.mPreempt.Add(PreemptionsPerRequest)
	}
	ttft, itl := e.timing()
	e.mPromptTok.Add(float64(q.prompt))
	last := arrival
	for i := 0; i < q.tokens; i++ {
		d := itl
		if i == 0 {
			d = ttft
		}
		select {
		case <-r.Context().Done():
			e.mSuccess.WithLabelValues("abort").Inc()
			return false
		case <-time.After(d):
		}
		now := time.Now()
		if i == 0 {
			e.mTTFT.Observe(now.Sub(arrival).Seconds())
		} else {
			e.mITL.Observe(now.Sub(last).Seconds())
			e.mTPOT.Observe(now.Sub(last).Seconds())
		}
		last = now
		e.mGenTok.Inc()
		emit(i, words[i%len(words)])
	}
	e.mSuccess.WithLabelValues(q.finish).Inc()
	e.mE2E.Observe(time.Since(arrival).Seconds())
	e.mPromptHist.Observe(float64(q.prompt))
	e.mGenHist.Observe(float64(q.tokens))
	e.mMaxTokHist.Observe(float64(q.maxTokens))
	return true
}

func (q *request) usageInfo() usage {
	return usage{PromptTokens: q.prompt, CompletionTokens: q.tokens, TotalTokens: q.prompt + q.tokens}
}

func (e *Engine) completions(w http.ResponseWriter, r *http.Request) {
	e.serve(w, r, false)
}

func (e *Engine) chatCompletions(w http.ResponseWriter, r *http.Request) {
	e.serve(w, r, true)
}

func (e *Engine) serve(w http.ResponseWriter, r *http.Request, chat bool) {
	q := e.admit(w, r, chat)
	if q == nil {
		return
	}
	if q.stream {
		e.stream(w, r, q)
		return
	}
	var text strings.Builder
	if !e.generate(r, q, func(_ int, tok string) { text.WriteString(tok) }) {
		return
	}
	obj := "text_completion"
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": q.finish, "stop_reason": nil}
	if chat {
		obj = "chat.completion"
		choice["message"] = map[string]any{"role": "assistant", "content": text.String(), "refusal": nil,
			"annotations": nil, "audio": nil, "function_call": nil, "tool_calls": []any{}, "reasoning_content": nil}
	} else {
		choice["text"] = text.String()
		choice["prompt_logprobs"] = nil
	}
	resp := map[string]any{"id": q.id, "object": obj, "created": q.created, "model": q.model,
		"choices": []any{choice}, "usage": q.usageInfo(), "service_tier": nil, "system_fingerprint": nil,
		"prompt_logprobs": nil, "kv_transfer_params": nil}
	writeJSON(w, http.StatusOK, resp)
}

// stream answers with server-sent events as vLLM does: one `data: {json}`
// chunk per token (chat: a first chunk with the assistant role), the last
// one carrying finish_reason, a usage chunk when stream_options asks for
// it, then `data: [DONE]`.
func (e *Engine) stream(w http.ResponseWriter, r *http.Request, q *request) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		flush()
	}
	obj := "text_completion"
	if q.chat {
		obj = "chat.completion.chunk"
	}
	chunk := func(choice map[string]any) map[string]any {
		return map[string]any{"id": q.id, "object": obj, "created": q.created, "model": q.model, "choices": []any{choice}}
	}
	if q.chat {
		send(chunk(map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""},
			"logprobs": nil, "finish_reason": nil}))
	}
	ok := e.generate(r, q, func(i int, tok string) {
		var finish any
		if i == q.tokens-1 {
			finish = q.finish
		}
		c := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish, "stop_reason": nil}
		if q.chat {
			c["delta"] = map[string]any{"content": tok}
		} else {
			c["text"] = tok
		}
		send(chunk(c))
	})
	if !ok {
		return
	}
	if q.usage {
		send(map[string]any{"id": q.id, "object": obj, "created": q.created, "model": q.model,
			"choices": []any{}, "usage": q.usageInfo()})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	flush()
}
