//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vllmctl/vllmctl/internal/podhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// servingValues deploy the built-in chart small: one replica, one GPU, a
// short ready delay.
var servingValues = []string{
	"--set", "replicaCount=1",
	"--set", "resources.gpu=1",
	"--set", "resources.requests.cpu=100m",
	"--set", "resources.limits.cpu=100m",
	"--set", "resources.requests.memory=128Mi",
	"--set", "resources.limits.memory=128Mi",
	"--set", "model.servedModelName=e2e-model",
	"--set-string", "podAnnotations.sim\\.vllmctl\\.io/ready-delay=1s",
}

// TestServingThroughPortForward: the local cluster's pods of the built-in
// chart serve vLLM's OpenAI API and metrics (cmd/devcluster/vllmsim),
// reached as a real pod is, through the API server's pod port-forward; a
// serve-wrongmodel image lists another model.
func TestServingThroughPortForward(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	for _, tc := range []struct {
		rel, tag, model string
	}{
		{"healthy", "v0.11.0", "e2e-model"},
		{"wrong", "v0.11.0-serve-wrongmodel", "facebook/opt-125m"},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			// The simulator is under test here, not vllmctl's serve check
			// (servecheck_test.go): off, so that the metrics count this
			// test's requests only and the wrong-model pods stay.
			r := f.run(t, append([]string{"deploy", tc.rel, "vllm", "--progress", "plain", "--timeout", "2m",
				"--serve-check=false", "--set", "image.tag=" + tc.tag}, servingValues...)...)
			require.Equal(t, 0, r.code, "deploy\n%s", r)
			pod := f.runningPod(t, tc.rel)
			base := f.portForward(t, pod, 8000)

			var models struct {
				Object string
				Data   []struct{ ID, Object, OwnedBy string }
			}
			body := getRetry(t, base+"/v1/models")
			require.NoError(t, json.Unmarshal(body, &models), "%s", body)
			require.Len(t, models.Data, 1, "%s", body)
			require.Equal(t, tc.model, models.Data[0].ID, "/v1/models of %s", tc.tag)

			// A completion of the model the chart names: the wrong-model
			// pod answers vLLM's 404.
			resp, body := postJSON(t, base+"/v1/completions", `{"model":"e2e-model","prompt":"Say hello","max_tokens":4}`)
			if tc.model != "e2e-model" {
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
				require.Contains(t, string(body), "The model `e2e-model` does not exist.")
				resp, body = postJSON(t, base+"/v1/completions", `{"model":"`+tc.model+`","prompt":"Say hello","max_tokens":4}`)
			}
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			var c struct {
				Object  string
				Model   string
				Choices []struct {
					Text         string
					FinishReason string `json:"finish_reason"`
				}
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			require.NoError(t, json.Unmarshal(body, &c), "%s", body)
			require.Equal(t, "text_completion", c.Object)
			require.Equal(t, tc.model, c.Model)
			require.Len(t, c.Choices, 1)
			require.Equal(t, "length", c.Choices[0].FinishReason)
			require.Equal(t, 4, c.Usage.CompletionTokens)

			// Streaming: data: chunks, then data: [DONE].
			resp, body = postJSON(t, base+"/v1/completions", `{"model":"`+tc.model+`","prompt":"hi","max_tokens":3,"stream":true}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
			var events []string
			sc := bufio.NewScanner(strings.NewReader(string(body)))
			for sc.Scan() {
				if l := sc.Text(); l != "" {
					require.True(t, strings.HasPrefix(l, "data: "), "SSE line %q", l)
					events = append(events, strings.TrimPrefix(l, "data: "))
				}
			}
			require.Len(t, events, 4, "3 token chunks and [DONE]: %v", events)
			require.Equal(t, "[DONE]", events[3])
			require.Contains(t, events[2], `"finish_reason":"length"`)

			metrics := string(getRetry(t, base+"/metrics"))
			require.Contains(t, metrics, "# TYPE vllm:time_to_first_token_seconds histogram")
			require.Contains(t, metrics, fmt.Sprintf(`vllm:request_success_total{engine="0",finished_reason="length",model_name=%q} 2`, tc.model))
			require.Contains(t, metrics, `http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 2`)

			// internal/podhttp, vllmctl's own way to a pod (one
			// port-forward stream per connection), reads the same.
			client, done := podhttp.New(f.cfg, f.client).Client(f.namespace, pod, 8000, 10*time.Second)
			defer done()
			for i := 0; i < 3; i++ { // connections are reused and survive each request
				resp, err := client.Get("http://pod/v1/models")
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
				require.Contains(t, string(b), `"id":"`+tc.model+`"`)
			}
			// A port nothing listens on: an error naming the pod, not a hang.
			closed, done2 := podhttp.New(f.cfg, f.client).Client(f.namespace, pod, 8001, 10*time.Second)
			defer done2()
			_, err := closed.Get("http://pod/health")
			require.Error(t, err)
			require.Contains(t, err.Error(), pod)
		})
	}
}

// runningPod waits for a Running, Ready pod of release rel.
func (f *relFixture) runningPod(t *testing.T, rel string) string {
	t.Helper()
	var name string
	eventually(t, 90*time.Second, "a ready pod of "+rel, func(ctx context.Context) (bool, error) {
		pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + rel})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					name = p.Name
					return true, nil
				}
			}
		}
		return false, nil
	})
	return name
}

// portForward forwards a local port to the pod's port through the API
// server, as kubectl port-forward does, and returns its base URL.
func (f *relFixture) portForward(t *testing.T, pod string, port int) string {
	t.Helper()
	req := f.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.namespace).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(f.cfg)
	require.NoError(t, err)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	t.Cleanup(func() { close(stop) })
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward to %s: %v", pod, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("port-forward to %s not ready", pod)
	}
	ports, err := fw.GetPorts()
	require.NoError(t, err)
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local)
}

// getRetry GETs url until it answers 200: the simulator sets up a pod's
// forward shortly after the pod runs.
func getRetry(t *testing.T, url string) []byte {
	t.Helper()
	var body []byte
	var last string
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return body
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("GET %s: %s", url, last)
	return nil
}

func postJSON(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err, "POST %s", url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}
