package release_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// servedSecret is the value of the fixture's Secret, which a
// serve-secret pod answers with.
const servedSecret = "sk-live-0123456789abcdef"

// simPods serve the fake cluster's pods by their image, as the local
// cluster's simulator does: an image containing serve-wrongmodel lists
// another model, serve-secret answers 404 quoting the release's Secret,
// any other lists the model m and completes.
type simPods struct {
	client  kubernetes.Interface
	servers map[string]*httptest.Server
}

func newSimPods(t *testing.T, client kubernetes.Interface) *simPods {
	models := func(id string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q}]}`, id)
		}
	}
	complete := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[{"text":"hello"}]}`)
	}
	healthy, wrong, secret := http.NewServeMux(), http.NewServeMux(), http.NewServeMux()
	errs, idle := http.NewServeMux(), http.NewServeMux()
	for _, m := range []*http.ServeMux{healthy, errs, idle} {
		m.HandleFunc("GET /v1/models", models("m"))
		m.HandleFunc("POST /v1/completions", complete)
	}
	healthy.Handle("GET /metrics", &simMetrics{perScrape: 20})
	errs.Handle("GET /metrics", &simMetrics{perScrape: 20, errorsPerScrape: 5})
	idle.Handle("GET /metrics", &simMetrics{})
	wrong.HandleFunc("GET /v1/models", models("facebook/opt-125m"))
	secret.HandleFunc("GET /v1/models", models("m"))
	secret.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"message":"no such model; key=%s`+"\x1b[2J\x07"+`"}`, servedSecret)
	})
	p := &simPods{client: client, servers: map[string]*httptest.Server{}}
	for name, h := range map[string]http.Handler{"healthy": healthy, "serve-wrongmodel": wrong, "serve-secret": secret,
		"serve-errors": errs, "serve-idle": idle} {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		p.servers[name] = s
	}
	return p
}

// simMetrics is a pod's /metrics in vLLM's names: every scrape finds
// perScrape more requests finished, errorsPerScrape of them answered 500
// (none: a pod without traffic).
type simMetrics struct {
	perScrape, errorsPerScrape int

	mu       sync.Mutex
	ok, errs int
}

func (m *simMetrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	m.ok += m.perScrape - m.errorsPerScrape
	m.errs += m.errorsPerScrape
	ok, errs := m.ok, m.errs
	m.mu.Unlock()
	fmt.Fprintf(w, "# TYPE http_requests_total counter\n"+
		"http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"} %d\n"+
		"http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"5xx\"} %d\n"+
		"# TYPE vllm:request_success_total counter\n"+
		"vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} %d\n", ok, errs, ok)
}

func (p *simPods) Client(namespace, pod string, port int, timeout time.Duration) (*http.Client, func()) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		po, err := p.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("port-forward to %s/%s:%d: %w", namespace, pod, port, err)
		}
		s := p.servers["healthy"]
		for behaviour, srv := range p.servers {
			if strings.Contains(po.Spec.Containers[0].Image, behaviour) {
				s = srv
			}
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.Listener.Addr().String())
	}}
	return &http.Client{Transport: tr, Timeout: timeout}, tr.CloseIdleConnections
}

// runPods makes the fake cluster's pods follow its ReplicaSets: one
// Ready pod per ReplicaSet with replicas, none for the others.
func runPods(ctx context.Context, client kubernetes.Interface) error {
	rss, err := client.AppsV1().ReplicaSets(engNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, rs := range rss.Items {
		name := rs.Name + "-p"
		if rs.Spec.Replicas == nil || *rs.Spec.Replicas == 0 {
			_ = client.CoreV1().Pods(engNS).Delete(ctx, name, metav1.DeleteOptions{})
			continue
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: engNS, Labels: rs.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: rs.Spec.Template.Spec,
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		if _, err := client.CoreV1().Pods(engNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
	}
	return nil
}

// serveFixture is an engine whose waits run the pods and whose pods serve
// (simPods), checked with --serve-check (the fixture chart is not the
// built-in one), the model m, and a Secret in the chart.
func serveFixture(t *testing.T) *engFixture {
	f := newEngFixture(t)
	f.waiter.Script = func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		if err := runPods(ctx, f.cluster.Client); err != nil {
			return wait.Result{}, err
		}
		return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
	}
	on := true
	f.engine.PodHTTP = newSimPods(t, f.cluster.Client).Client
	f.engine.ServeCheck = servecheck.Options{Enabled: &on, Timeout: 5 * time.Second}
	f.engine.UseRedactor(diff.NewRedactor())
	return f
}

func serveOptions(image string) release.DeployOptions {
	s := baseSpec()
	s.image = image
	objs := append(s.objects(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "chat-key", "namespace": engNS, "labels": labels()},
		"stringData": map[string]any{"key": servedSecret},
	}})
	opts := withObjects(s.options(), objs, nil, image)
	opts.Render.Options.Set = []string{"serveCheck.model=m"}
	return opts
}

// TestDeployServeCheck: a healthy upgrade passes the serve check and
// records it; a pod that lists another model fails the rollout with
// NotServing and is rolled back (exit 3), or not (exit 4); what it
// answered is kept sanitised, never with the Secret's value.
func TestDeployServeCheck(t *testing.T) {
	for _, tc := range []struct {
		name, image string
		rollback    bool
		exit        int
		statuses    map[int]storage.Status
		message     string
	}{
		{name: "healthy", image: "vllm/vllm-openai:v0.11.0", statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}},
		{name: "wrong model, rolled back", image: "vllm/vllm-openai:v0.11.0-serve-wrongmodel", rollback: true, exit: 3,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusFailed, 3: storage.StatusDeployed},
			message:  "GET /v1/models lists facebook/opt-125m, not m"},
		{name: "wrong model, no rollback", image: "vllm/vllm-openai:v0.11.0-serve-wrongmodel", exit: 4,
			statuses: map[int]storage.Status{1: storage.StatusDeployed, 2: storage.StatusFailed},
			message:  "GET /v1/models lists facebook/opt-125m, not m"},
		{name: "an answer quoting a Secret", image: "vllm/vllm-openai:v0.11.0-serve-secret", rollback: true, exit: 3,
			statuses: map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusFailed, 3: storage.StatusDeployed},
			message:  "POST /v1/completions answered 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFixture(t)
			ctx := context.Background()
			first, err := f.engine.Deploy(ctx, serveOptions("vllm/vllm-openai:v0.10.0"))
			require.NoError(t, err)
			require.NotNil(t, first.ServeCheck)
			assert.Equal(t, rollout.ServePassed, first.ServeCheck.Outcome)

			opts := serveOptions(tc.image)
			opts.RollbackOnFailure, opts.RollbackTimeout = tc.rollback, time.Minute
			res, err := f.engine.Deploy(ctx, opts)
			assert.Equal(t, tc.statuses, f.statuses(t))
			rec := f.record(t, 2)
			require.NotNil(t, rec.ServeCheck, "the record keeps the check")
			require.Len(t, rec.ServeCheck.Pods, 1, "only the new ReplicaSet's pod: %+v", rec.ServeCheck.Pods)
			pod := rec.ServeCheck.Pods[0]
			assert.Equal(t, rec.ReplicaSets[0].Name+"-p", pod.Pod)
			if tc.exit == 0 {
				require.NoError(t, err)
				assert.Equal(t, rollout.ServePassed, res.ServeCheck.Outcome)
				assert.Equal(t, rollout.ServePod{Pod: pod.Pod, Model: "m", Status: 200, LatencyMs: pod.LatencyMs, Outcome: rollout.ServePassed}, pod)
				assert.Equal(t, "m", rec.ServeCheck.Model)
				assert.Equal(t, "5s", rec.ServeCheck.Timeout)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.exit, exitCode(err))
			require.NotNil(t, res.Failure)
			assert.Equal(t, rollout.VerdictNotServing, res.Failure.Verdict)
			assert.Equal(t, "NotServing", res.Failure.Reason)
			assert.Equal(t, pod.Pod, res.Failure.Pod)
			assert.Equal(t, "deployment/chat", res.Failure.Object)
			assert.Contains(t, res.Failure.Message, tc.message)
			assert.Contains(t, res.Failure.Evidence, "HTTP ")
			assert.Equal(t, rollout.ServeFailed, rec.ServeCheck.Outcome)
			assert.Equal(t, rollout.ServeFailed, pod.Outcome)
			assert.Contains(t, rec.Description, "failed: NotServing (deployment/chat)")
			if tc.rollback {
				assert.Equal(t, 1, res.RolledBackTo)
				rb := f.record(t, 3)
				require.NotNil(t, rb.ServeCheck, "the rollback checks the restored pods too")
				assert.Equal(t, rollout.ServePassed, rb.ServeCheck.Outcome)
				assert.Equal(t, first.ReplicaSets[0].Name+"-p", rb.ServeCheck.Pods[0].Pod, "the old ReplicaSet serves again")
			}
			// Nothing written or returned holds the Secret (the record's
			// manifest aside: the record is itself a Secret), nor the
			// control characters the pod answered.
			check := func(what string, v any) {
				b, err := json.Marshal(v)
				require.NoError(t, err)
				assert.NotContains(t, string(b), servedSecret, what)
				assert.NotContains(t, string(b), `\u001b`, what)
				assert.NotContains(t, string(b), `\u0007`, what)
			}
			check("record's serve check", rec.ServeCheck)
			check("record's failure", rec.Failure)
			check("record's description", rec.Description)
			check("result", diff.RedactCopy(f.engine.Redactor, res))
			f.mu.Lock()
			check("progress", f.events)
			f.mu.Unlock()
			if strings.Contains(tc.image, "secret") {
				assert.Contains(t, pod.Body, "key=(redacted)", "the record's excerpt")
				assert.Contains(t, diff.RedactCopy(f.engine.Redactor, res).Failure.Evidence, "key=(redacted)", "the result, as the command prints it")
			}
		})
	}
}

// TestDeployServeCheckOff: --serve-check=false (and a chart that does
// not ask) runs no check.
func TestDeployServeCheckOff(t *testing.T) {
	f := serveFixture(t)
	off := false
	f.engine.ServeCheck.Enabled = &off
	res, err := f.engine.Deploy(context.Background(), serveOptions("vllm/vllm-openai:v0.11.0-serve-wrongmodel"))
	require.NoError(t, err)
	assert.Nil(t, res.ServeCheck)
	assert.Zero(t, f.phases()[release.PhaseServe])
}

// TestDeployServeCheckBadValues: a serveCheck value of the wrong type is
// refused before anything is applied (exit 2), naming the value.
func TestDeployServeCheckBadValues(t *testing.T) {
	f := serveFixture(t)
	opts := serveOptions("vllm/vllm-openai:v0.11.0")
	opts.Render.Options.Set = []string{"serveCheck.timeout=0s"}
	_, err := f.engine.Deploy(context.Background(), opts)
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err))
	assert.Contains(t, err.Error(), "serveCheck.timeout")
	assert.Zero(t, f.cluster.Applies())
	assert.Empty(t, f.statuses(t))
}

// TestWaitServeCheck: vllmctl wait runs the check after the wait and
// fails on a pod that does not serve (exit 4), writing no record.
func TestWaitServeCheck(t *testing.T) {
	f := serveFixture(t)
	ctx := context.Background()
	off := false
	f.engine.ServeCheck.Enabled = &off
	_, err := f.engine.Deploy(ctx, serveOptions("vllm/vllm-openai:v0.11.0-serve-wrongmodel"))
	require.NoError(t, err)
	on := true
	f.engine.ServeCheck.Enabled = &on
	res, err := f.engine.Wait(ctx, release.WaitOptions{Name: engRelease, Timeout: time.Minute})
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err))
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictNotServing, res.Failure.Verdict)
	require.NotNil(t, res.ServeCheck)
	assert.Equal(t, rollout.ServeFailed, res.ServeCheck.Outcome)
	assert.Nil(t, f.record(t, 1).ServeCheck, "wait writes no record")
}

// TestTestServeCheck: vllmctl test checks the pods that serve now, and
// fails (exit 4) without running the hooks when one does not.
func TestTestServeCheck(t *testing.T) {
	for _, tc := range []struct {
		image string
		exit  int
	}{{"vllm/vllm-openai:v0.11.0", 0}, {"vllm/vllm-openai:v0.11.0-serve-wrongmodel", 4}} {
		t.Run(tc.image, func(t *testing.T) {
			f := serveFixture(t)
			ctx := context.Background()
			off := false
			f.engine.ServeCheck.Enabled = &off
			_, err := f.engine.Deploy(ctx, serveOptions(tc.image))
			require.NoError(t, err)
			on := true
			f.engine.ServeCheck.Enabled = &on
			res, err := f.engine.Test(ctx, release.TestOptions{Name: engRelease})
			assert.Equal(t, tc.exit, exitCode(err), "%v", err)
			require.NotNil(t, res)
			require.NotNil(t, res.ServeCheck)
			require.Len(t, res.ServeCheck.Pods, 1)
			if tc.exit == 0 {
				assert.True(t, res.Passed)
				assert.Equal(t, rollout.ServePassed, res.ServeCheck.Outcome)
				return
			}
			assert.False(t, res.Passed)
			assert.Contains(t, err.Error(), "serve check: pod ")
			assert.Contains(t, err.Error(), "lists facebook/opt-125m, not m")
		})
	}
}
