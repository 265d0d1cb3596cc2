package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const model0 = "Qwen/Qwen3-0.6B"

func newServer(t *testing.T, b Behaviour) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(NewEngine(Config{Model: model0, ServedNames: []string{model0}, Behaviour: b}))
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, s *httptest.Server, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func get(t *testing.T, s *httptest.Server, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// scrape parses /metrics with the Prometheus text parser.
func scrape(t *testing.T, s *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, b := get(t, s, "/metrics")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, b)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want (counter, gauge, or a histogram's sample count).
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.Counter.GetValue()
		case dto.MetricType_GAUGE:
			return m.Gauge.GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

func TestHealthAndModels(t *testing.T) {
	s := newServer(t, Healthy)
	if resp, _ := get(t, s, "/health"); resp.StatusCode != 200 {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	resp, b := get(t, s, "/v1/models")
	var list modelList
	if resp.StatusCode != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("/v1/models: %d %s", resp.StatusCode, b)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != model0 || list.Data[0].Object != "model" ||
		list.Data[0].OwnedBy != "vllm" || list.Data[0].Root != model0 || list.Data[0].MaxModelLen != 40960 {
		t.Fatalf("/v1/models: %s", b)
	}
}

func TestCompletion(t *testing.T) {
	s := newServer(t, Healthy)
	start := time.Now()
	resp, b := post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"Say hello to the cluster","max_tokens":4}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if d := time.Since(start); d < HealthyTTFT+3*HealthyITL {
		t.Fatalf("answered in %v, faster than the simulated latency", d)
	}
	var c struct {
		ID, Object, Model string
		Choices           []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		Usage usage
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || c.Model != model0 || len(c.Choices) != 1 ||
		c.Choices[0].FinishReason != "length" || c.Choices[0].Text == "" {
		t.Fatalf("completion: %s", b)
	}
	if c.Usage.PromptTokens != 5 || c.Usage.CompletionTokens != 4 || c.Usage.TotalTokens != 9 {
		t.Fatalf("usage: %+v", c.Usage)
	}
	// Without max_tokens the answer stops by itself.
	_, b = post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"hi"}`)
	if !strings.Contains(string(b), `"finish_reason":"stop"`) {
		t.Fatalf("completion: %s", b)
	}
	fams := scrape(t, s)
	labels := map[string]string{"model_name": model0, "engine": "0"}
	if v := value(t, fams, "vllm:request_success_total", map[string]string{"model_name": model0, "engine": "0", "finished_reason": "length"}); v != 1 {
		t.Fatalf("request_success_total{length} = %v", v)
	}
	if v := value(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": "stop"}); v != 1 {
		t.Fatalf("request_success_total{stop} = %v", v)
	}
	if v := value(t, fams, "vllm:time_to_first_token_seconds", labels); v != 2 {
		t.Fatalf("ttft count = %v", v)
	}
	if v := value(t, fams, "vllm:inter_token_latency_seconds", labels); v != 3+7 {
		t.Fatalf("itl count = %v", v)
	}
	if v := value(t, fams, "vllm:generation_tokens_total", labels); v != 12 {
		t.Fatalf("generation tokens = %v", v)
	}
	if v := value(t, fams, "http_requests_total", map[string]string{"handler": "/v1/completions", "method": "POST", "status": "2xx"}); v != 2 {
		t.Fatalf("http_requests_total = %v", v)
	}
}

func TestMetricsNamesTypesLabels(t *testing.T) {
	s := newServer(t, Healthy)
	post(t, s, "/v1/chat/completions", `{"model":"`+model0+`","messages":[{"role":"user","content":"hi"}]}`)
	fams := scrape(t, s)
	want := map[string]dto.MetricType{
		"vllm:time_to_first_token_seconds":   dto.MetricType_HISTOGRAM,
		"vllm:e2e_request_latency_seconds":   dto.MetricType_HISTOGRAM,
		"vllm:inter_token_latency_seconds":   dto.MetricType_HISTOGRAM,
		"vllm:time_per_output_token_seconds": dto.MetricType_HISTOGRAM,
		"vllm:request_queue_time_seconds":    dto.MetricType_HISTOGRAM,
		"vllm:request_prompt_tokens":         dto.MetricType_HISTOGRAM,
		"vllm:request_generation_tokens":     dto.MetricType_HISTOGRAM,
		"vllm:request_success_total":         dto.MetricType_COUNTER,
		"vllm:num_requests_running":          dto.MetricType_GAUGE,
		"vllm:num_requests_waiting":          dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc":           dto.MetricType_GAUGE,
		"vllm:num_preemptions_total":         dto.MetricType_COUNTER,
		"vllm:prompt_tokens_total":           dto.MetricType_COUNTER,
		"vllm:generation_tokens_total":       dto.MetricType_COUNTER,
		"http_requests_total":                dto.MetricType_COUNTER,
		"http_request_duration_seconds":      dto.MetricType_HISTOGRAM,
	}
	for name, typ := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("missing %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
		}
		if strings.HasPrefix(name, "vllm:") {
			for _, m := range f.Metric {
				got := map[string]string{}
				for _, l := range m.Label {
					got[l.GetName()] = l.GetValue()
				}
				if got["model_name"] != model0 || got["engine"] != "0" {
					t.Errorf("%s: labels %v", name, got)
				}
			}
		}
	}
	// vLLM's buckets: the TTFT histogram's first and last bounds.
	h := fams["vllm:time_to_first_token_seconds"].Metric[0].Histogram
	if b := h.Bucket; len(b) < 22 || b[0].GetUpperBound() != 0.001 || b[21].GetUpperBound() != 2560 {
		t.Errorf("ttft buckets: %v", b)
	}
	// Every finish reason is pre-created.
	for _, r := range finishReasons {
		value(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": r})
	}
	// /metrics and /health are not counted by the instrumentator.
	for _, m := range fams["http_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "handler" && (l.GetValue() == "/metrics" || l.GetValue() == "/health") {
				t.Errorf("http_requests_total counts %s", l.GetValue())
			}
		}
	}
}

func TestChatAndStream(t *testing.T) {
	s := newServer(t, Healthy)
	resp, b := post(t, s, "/v1/chat/completions", `{"model":"`+model0+`","messages":[{"role":"user","content":"hello there"}],"max_tokens":3}`)
	var c struct {
		Object  string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage usage
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &c) != nil || c.Object != "chat.completion" || len(c.Choices) != 1 ||
		c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content == "" || c.Choices[0].FinishReason != "length" ||
		c.Usage.CompletionTokens != 3 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}

	for _, tc := range []struct{ path, body, object string }{
		{"/v1/completions", `{"model":"` + model0 + `","prompt":"a b","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, "text_completion"},
		{"/v1/chat/completions", `{"model":"` + model0 + `","messages":[{"role":"user","content":"x"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, "chat.completion.chunk"},
	} {
		resp, err := http.Post(s.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("%s: content type %q", tc.path, ct)
		}
		var events []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				if !strings.HasPrefix(line, "data: ") {
					t.Fatalf("%s: line %q", tc.path, line)
				}
				events = append(events, strings.TrimPrefix(line, "data: "))
			}
		}
		resp.Body.Close()
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("%s: no [DONE]: %v", tc.path, events)
		}
		finishes, usages := 0, 0
		for _, ev := range events[:len(events)-1] {
			var ch struct {
				Object  string
				Choices []struct {
					FinishReason *string `json:"finish_reason"`
				}
				Usage *usage
			}
			if err := json.Unmarshal([]byte(ev), &ch); err != nil || ch.Object != tc.object {
				t.Fatalf("%s: chunk %s", tc.path, ev)
			}
			for _, c := range ch.Choices {
				if c.FinishReason != nil {
					finishes++
					if *c.FinishReason != "length" {
						t.Fatalf("%s: finish %s", tc.path, *c.FinishReason)
					}
				}
			}
			if ch.Usage != nil {
				usages++
				if ch.Usage.CompletionTokens != 5 {
					t.Fatalf("%s: usage %+v", tc.path, ch.Usage)
				}
			}
		}
		if finishes != 1 || usages != 1 {
			t.Fatalf("%s: %d finish reasons, %d usage chunks: %v", tc.path, finishes, usages, events)
		}
	}
}

func TestUnknownModel(t *testing.T) {
	s := newServer(t, Healthy)
	resp, b := post(t, s, "/v1/completions", `{"model":"nope","prompt":"x"}`)
	var e errorResponse
	if resp.StatusCode != 404 || json.Unmarshal(b, &e) != nil || e.Error.Type != "NotFoundError" || e.Error.Code != 404 ||
		e.Error.Message != "The model `nope` does not exist." {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if v := value(t, scrape(t, s), "http_requests_total", map[string]string{"handler": "/v1/completions", "status": "4xx"}); v != 1 {
		t.Fatalf("4xx = %v", v)
	}
}

func TestWrongModel(t *testing.T) {
	s := newServer(t, WrongModel)
	_, b := get(t, s, "/v1/models")
	var list modelList
	_ = json.Unmarshal(b, &list)
	if len(list.Data) != 1 || list.Data[0].ID != OtherModel {
		t.Fatalf("/v1/models: %s", b)
	}
	if resp, _ := post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"x"}`); resp.StatusCode != 404 {
		t.Fatalf("the expected model: %d", resp.StatusCode)
	}
	if resp, _ := post(t, s, "/v1/completions", `{"model":"`+OtherModel+`","prompt":"x"}`); resp.StatusCode != 200 {
		t.Fatalf("the other model: %d", resp.StatusCode)
	}
	value(t, scrape(t, s), "vllm:num_requests_running", map[string]string{"model_name": OtherModel})
}

func TestSlow(t *testing.T) {
	ttft := func(b Behaviour) float64 {
		s := newServer(t, b)
		post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"x","max_tokens":1}`)
		f := scrape(t, s)["vllm:time_to_first_token_seconds"].Metric[0].Histogram
		return f.GetSampleSum() / float64(f.GetSampleCount())
	}
	healthy, slow := ttft(Healthy), ttft(Slow)
	if slow < 3*healthy {
		t.Fatalf("slow TTFT %v is not 3x the healthy %v", slow, healthy)
	}
}

func TestErrors(t *testing.T) {
	s := newServer(t, Errors)
	var codes []int
	for i := 0; i < 10; i++ {
		resp, b := post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"x","max_tokens":1}`)
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 500 {
			var e errorResponse
			if json.Unmarshal(b, &e) != nil || e.Error.Code != 500 {
				t.Fatalf("500 body: %s", b)
			}
		}
	}
	for i, c := range codes {
		want := 200
		if (i+1)%5 == 0 {
			want = 500
		}
		if c != want {
			t.Fatalf("codes %v", codes)
		}
	}
	if resp, _ := get(t, s, "/health"); resp.StatusCode != 200 {
		t.Fatalf("/health %d", resp.StatusCode)
	}
	fams := scrape(t, s)
	if v := value(t, fams, "http_requests_total", map[string]string{"handler": "/v1/completions", "status": "5xx"}); v != 2 {
		t.Fatalf("5xx = %v", v)
	}
	if v := value(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": "abort"}); v != 2 {
		t.Fatalf("abort = %v", v)
	}
}

func TestHang(t *testing.T) {
	s := newServer(t, Hang)
	for _, req := range []func(ctx context.Context) (*http.Request, error){
		func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, "GET", s.URL+"/v1/models", nil)
		},
		func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		r, _ := req(ctx)
		_, err := http.DefaultClient.Do(r)
		cancel()
		if err == nil {
			t.Fatal("a serve-hang engine answered")
		}
	}
	// /metrics still answers.
	scrape(t, s)
}

func TestPreempt(t *testing.T) {
	s := newServer(t, Preempt)
	fams := scrape(t, s)
	if v := value(t, fams, "vllm:kv_cache_usage_perc", nil); v < 0.95 {
		t.Fatalf("kv cache usage %v", v)
	}
	post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"x","max_tokens":1}`)
	post(t, s, "/v1/completions", `{"model":"`+model0+`","prompt":"x","max_tokens":1}`)
	fams = scrape(t, s)
	if v := value(t, fams, "vllm:num_preemptions_total", nil); v != 2*PreemptionsPerRequest {
		t.Fatalf("preemptions %v", v)
	}
	if v := value(t, fams, "vllm:kv_cache_usage_perc", nil); v < 0.95 {
		t.Fatalf("kv cache usage %v", v)
	}
}

func TestBehaviourOf(t *testing.T) {
	for img, want := range map[string]Behaviour{
		"vllm/vllm-openai:v0.11.0":            Healthy,
		"vllm/vllm-openai:v0.11.0-serve-slow": Slow,
		"vllm/vllm-openai:serve-errors":       Errors,
		"reg.example/vllm:serve-wrongmodel-1": WrongModel,
		"vllm/vllm-openai:v1-serve-hang":      Hang,
		"vllm/vllm-openai:v1-serve-preempt":   Preempt,
	} {
		if got := BehaviourOf(img); got != want {
			t.Errorf("%s: %s, want %s", img, got, want)
		}
	}
}

func TestTargetOf(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "side", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}},
			{Name: "server", Image: "vllm/vllm-openai:v0.11.0-serve-wrongmodel",
				Args:  []string{"--model", "/models/qwen", "--served-model-name", "qwen", "qwen-alias", "--max-model-len=4096", "--port", "8000"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "server", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	tg, ok := TargetOf(pod)
	if !ok || tg.Container != "server" || tg.Port != 8000 || tg.Config.Model != "/models/qwen" ||
		strings.Join(tg.Config.ServedNames, ",") != "qwen,qwen-alias" || tg.Config.MaxModelLen != 4096 || tg.Config.Behaviour != WrongModel {
		t.Fatalf("%+v %v", tg, ok)
	}
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
	if _, ok := TargetOf(pod); ok {
		t.Fatal("a waiting container serves")
	}
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod.Spec.Containers[1].Image = "vllm/vllm-openai:crash"
	if _, ok := TargetOf(pod); ok {
		t.Fatal("a crash pod serves")
	}
	c := ConfigOf(corev1.Container{Command: []string{"vllm", "serve", "org/m"}, Args: []string{"--dtype", "auto"}})
	if c.Model != "org/m" || len(c.ServedNames) != 0 {
		t.Fatalf("%+v", c)
	}
}

// TestBodyBound: an inference request's body is read up to MaxBodyBytes;
// a larger one is refused with 413 (not read whole into memory), counted
// as a 4xx; a long prompt below the bound is served.
func TestBodyBound(t *testing.T) {
	s := newServer(t, Healthy)
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		prefix, suffix := `{"model":"`+model0+`","prompt":"`, `"}`
		if strings.Contains(path, "chat") {
			prefix, suffix = `{"model":"`+model0+`","max_tokens":4,"messages":[{"role":"user","content":"`, `"}]}`
		}
		big := prefix + strings.Repeat("a ", MaxBodyBytes/2) + suffix
		resp, body := post(t, s, path, big)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: a body of %d bytes: %d %s, want 413", path, len(big), resp.StatusCode, body)
		}
		if !strings.Contains(string(body), "larger than") {
			t.Errorf("%s: %s", path, body)
		}
		ok := prefix + strings.Repeat("a ", 1<<18) + suffix
		if resp, body := post(t, s, path, ok); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: a body of %d bytes: %d %s", path, len(ok), resp.StatusCode, body)
		}
	}
}
