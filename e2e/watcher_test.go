//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/wait"
)

const (
	healthyImage  = "vllm/vllm-openai:v0.9.0"
	readyDelayKey = "sim.vllmctl.io/ready-delay"
)

// requestCounter counts the requests a rest.Config makes (a watch counts
// once, when it starts).
type requestCounter struct {
	n    atomic.Int64
	mu   sync.Mutex
	seen []string
}

func (c *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			c.n.Add(1)
			c.mu.Lock()
			c.seen = append(c.seen, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
			c.mu.Unlock()
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

func (c *requestCounter) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watchedDeployment is a Deployment of the shape the watcher tests use:
// maxSurge 1, maxUnavailable 0, 1 GPU and little cpu/memory per pod.
func watchedDeployment(name, image string, replicas int32, readyDelay string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "vllm",
						Image: image,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{gpu: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
							Limits:   corev1.ResourceList{gpu: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
						},
					}},
				},
			},
		},
	}
	if readyDelay != "" {
		d.Spec.Template.Annotations = map[string]string{readyDelayKey: readyDelay}
	}
	return d
}

// watcherFixture is an e2e env with a RolloutWatcher whose requests are
// counted.
type watcherFixture struct {
	*env
	counter *requestCounter
	watcher *wait.RolloutWatcher
}

func newWatcherFixture(t *testing.T, opts wait.RolloutOptions) *watcherFixture {
	t.Helper()
	e := newEnv(t)
	counter := &requestCounter{}
	w, err := newRolloutWatcherForConfig(counter.wrap(e.cfg), opts)
	require.NoError(t, err)
	return &watcherFixture{env: e, counter: counter, watcher: w}
}

// watchResult is what a watch returned, with the events it sent.
type watchResult struct {
	res    wait.Result
	err    error
	events []rollout.Event
}

// warnings returns the warnings the watch reported.
func (r watchResult) warnings() []string {
	var out []string
	for _, e := range r.events {
		if e.Rollout != nil && e.Rollout.Warning != "" {
			out = append(out, e.Rollout.Warning)
		}
	}
	return out
}

// newReplicaSet returns the last new ReplicaSet the watch reported.
func (r watchResult) newReplicaSet() string {
	name := ""
	for _, e := range r.events {
		if e.Rollout != nil && e.Rollout.NewReplicaSet != "" {
			name = e.Rollout.NewReplicaSet
		}
	}
	return name
}

// watch runs the watcher on the Deployment name, printing its progress
// (plain lines) to the test log.
func (f *watcherFixture) watch(t *testing.T, ctx context.Context, name string, timeout time.Duration) watchResult {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	require.NoError(t, err)
	return f.watchObjects(t, ctx, []*unstructured.Unstructured{{Object: m}}, timeout)
}

// watchObjects runs the watcher on objs, printing its progress (plain
// lines) to the test log.
func (f *watcherFixture) watchObjects(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) watchResult {
	t.Helper()
	events := make(chan rollout.Event)
	var out watchResult
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := termout.NewPlainPrinter(&log)
		for e := range events {
			out.events = append(out.events, e)
			_ = p.Print(e)
		}
	}()
	out.res, out.err = f.watcher.Wait(ctx, objs, wait.Options{Timeout: timeout, Namespace: f.namespace, Events: events})
	<-done
	t.Logf("progress:\n%s", log.String())
	if out.res.Diagnosis != nil {
		var b strings.Builder
		_ = termout.WriteDiagnosis(&b, out.res.Diagnosis)
		t.Logf("diagnosis:\n%s", b.String())
	}
	return out
}

// deployHealthy creates the Deployment with the healthy image and waits
// (with the watcher) until it rolled out.
func (f *watcherFixture) deployHealthy(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	_, err := f.client.AppsV1().Deployments(f.namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	r := f.watch(t, ctx, d.Name, 90*time.Second)
	require.NoError(t, r.err, "the healthy Deployment rolls out")
	require.Equal(t, wait.OutcomeCurrent, r.res.Outcome)
}

// update changes the Deployment's pod template.
func (f *watcherFixture) update(t *testing.T, name string, mutate func(*corev1.PodTemplateSpec)) {
	t.Helper()
	ctx := context.Background()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	mutate(&d.Spec.Template)
	_, err = f.client.AppsV1().Deployments(f.namespace).Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func setImage(image string) func(*corev1.PodTemplateSpec) {
	return func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = image }
}

// TestRolloutWatcherVerdictsOnTheCluster switches a healthy Deployment to
// each fault class of the simulation and checks the verdict: the right
// reason, pod (of the new ReplicaSet) and container, found quickly.
func TestRolloutWatcherVerdictsOnTheCluster(t *testing.T) {
	shareCluster(t, 4)
	cases := []struct {
		name    string
		change  func(*corev1.PodTemplateSpec)
		verdict rollout.Verdict
		within  time.Duration
		check   func(t *testing.T, d *rollout.Diagnosis)
	}{
		{
			name:    "crash",
			change:  setImage("vllm/vllm-openai:v0.9.0-crash"),
			verdict: rollout.VerdictCrashLoop,
			within:  45 * time.Second,
			check: func(t *testing.T, d *rollout.Diagnosis) {
				assert.Equal(t, "CrashLoopBackOff", d.Reason)
				assert.Equal(t, int32(1), d.ExitCode)
				assert.GreaterOrEqual(t, d.RestartCount, int32(2))
				assert.NotEmpty(t, d.Node)
				assert.Contains(t, d.Events, "Warning BackOff: Back-off restarting failed container")
				assert.LessOrEqual(t, len(d.LogTail), 20)
				assert.Contains(t, strings.Join(d.LogTail, "\n"), "RuntimeError: Engine core initialization failed", "the previous instance's traceback")
				assert.Contains(t, strings.Join(d.Hints, "\n"), "--previous")
			},
		},
		{
			name:    "oom",
			change:  setImage("vllm/vllm-openai:v0.9.0-oom"),
			verdict: rollout.VerdictOOMKilled,
			within:  30 * time.Second,
			check: func(t *testing.T, d *rollout.Diagnosis) {
				assert.Equal(t, "OOMKilled", d.Reason)
				assert.Equal(t, int32(137), d.ExitCode)
				assert.Contains(t, strings.Join(d.LogTail, "\n"), "Engine core initialization failed")
				assert.Contains(t, strings.Join(d.Hints, "\n"), "/dev/shm")
			},
		},
		{
			name:    "pullerr",
			change:  setImage("registry.invalid/vllm-pullerr:v1"),
			verdict: rollout.VerdictImagePull,
			within:  30 * time.Second,
			check: func(t *testing.T, d *rollout.Diagnosis) {
				assert.Contains(t, []string{"ErrImagePull", "ImagePullBackOff"}, d.Reason)
				assert.Contains(t, d.Message, "registry.invalid/vllm-pullerr:v1")
				assert.Empty(t, d.LogTail)
				assert.Contains(t, d.LogNote, "never started")
				assert.Contains(t, strings.Join(d.Hints, "\n"), "registry credentials")
			},
		},
		{
			name: "16 GPUs",
			change: func(t *corev1.PodTemplateSpec) {
				r := &t.Spec.Containers[0].Resources
				r.Requests[gpu] = resource.MustParse("16")
				r.Limits[gpu] = resource.MustParse("16")
			},
			verdict: rollout.VerdictUnschedulable,
			within:  30 * time.Second,
			check: func(t *testing.T, d *rollout.Diagnosis) {
				assert.Equal(t, "Unschedulable", d.Reason)
				assert.Contains(t, d.Message, "Insufficient nvidia.com/gpu")
				assert.Empty(t, d.Node)
				assert.Empty(t, d.Container)
				assert.Contains(t, strings.Join(d.Hints, "\n"), "GPU capacity")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newWatcherFixture(t, wait.RolloutOptions{UnschedulableTimeout: 5 * time.Second})
			f.deployHealthy(t, watchedDeployment("chat", healthyImage, 2, ""))
			f.update(t, "chat", tc.change)

			r := f.watch(t, context.Background(), "chat", 2*time.Minute)
			require.Error(t, r.err)
			require.ErrorIs(t, r.err, wait.ErrFailed)
			var rfe *wait.RolloutFailedError
			require.ErrorAs(t, r.err, &rfe)
			assert.Equal(t, wait.OutcomeFailed, r.res.Outcome)
			assert.Less(t, r.res.Elapsed, tc.within, "detected quickly")
			d := r.res.Diagnosis
			require.NotNil(t, d)
			assert.Equal(t, tc.verdict, d.Verdict)
			assert.Equal(t, "deployment/chat", d.Object)
			newRS := r.newReplicaSet()
			require.NotEmpty(t, newRS)
			assert.True(t, strings.HasPrefix(d.Pod, newRS+"-"), "pod %s of the new ReplicaSet %s", d.Pod, newRS)
			if tc.verdict != rollout.VerdictUnschedulable {
				assert.Equal(t, "vllm", d.Container)
			}
			tc.check(t, d)
			assert.Contains(t, r.err.Error(), "deployment/chat")
		})
	}
}

// TestRolloutWatcherSlowButHealthy: pods that take longer to become ready
// than a crash takes to be caught are no failure.
func TestRolloutWatcherSlowButHealthy(t *testing.T) {
	shareCluster(t, 4)
	f := newWatcherFixture(t, wait.RolloutOptions{})
	f.deployHealthy(t, watchedDeployment("chat", healthyImage, 2, ""))
	f.update(t, "chat", func(p *corev1.PodTemplateSpec) {
		p.Spec.Containers[0].Image = "vllm/vllm-openai:v0.9.1"
		p.Annotations = map[string]string{readyDelayKey: "8s"}
	})
	r := f.watch(t, context.Background(), "chat", 2*time.Minute)
	require.NoError(t, r.err)
	assert.Equal(t, wait.OutcomeCurrent, r.res.Outcome)
	assert.Nil(t, r.res.Diagnosis)
	assert.GreaterOrEqual(t, r.res.Elapsed, 8*time.Second, "it was slow")
	for _, e := range r.events {
		assert.NotEqual(t, rollout.StatusFailed, e.Status)
		if e.Rollout != nil {
			assert.False(t, e.Rollout.Verdict.Failed(), "no false verdict: %+v", e.Rollout)
		}
	}
	last := r.events[len(r.events)-1]
	require.NotNil(t, last.Rollout)
	assert.Equal(t, rollout.VerdictRolledOut, last.Rollout.Verdict)
	assert.Equal(t, int32(2), last.Rollout.Available)
}

// TestRolloutWatcherIgnoresOldReplicaSetFailures: replacing a crashing
// Deployment with a healthy one succeeds although the old pods fail.
func TestRolloutWatcherIgnoresOldReplicaSetFailures(t *testing.T) {
	shareCluster(t, 4)
	f := newWatcherFixture(t, wait.RolloutOptions{})
	ctx := context.Background()
	_, err := f.client.AppsV1().Deployments(f.namespace).Create(ctx, watchedDeployment("chat", "vllm/vllm-openai:v0.9.0-crash", 2, ""), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the crashing pods restarted", func(ctx context.Context) (bool, error) {
		pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=chat"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount >= 1 {
					return true, nil
				}
			}
		}
		return false, nil
	})

	// Slow new pods: the old ones keep crashing during the rollout.
	f.update(t, "chat", func(p *corev1.PodTemplateSpec) {
		p.Spec.Containers[0].Image = healthyImage
		p.Annotations = map[string]string{readyDelayKey: "6s"}
	})
	r := f.watch(t, ctx, "chat", 2*time.Minute)
	require.NoError(t, r.err, "old pods failing do not fail the new rollout")
	assert.Equal(t, wait.OutcomeCurrent, r.res.Outcome)
	oldBackOffs := 0
	for _, w := range r.warnings() {
		if strings.Contains(w, "BackOff") {
			assert.Contains(t, w, "(old ReplicaSet ", "only old pods crash: %s", w)
			oldBackOffs++
		}
	}
	assert.NotZero(t, oldBackOffs, "the old pods' crashes are reported: %q", r.warnings())
}

// TestRolloutWatcherCostsTheSameRequestsHoweverLong: watching, not
// polling, a 10s and a 60s healthy rollout make about as many requests.
func TestRolloutWatcherCostsTheSameRequestsHoweverLong(t *testing.T) {
	shareCluster(t, 4)
	counts := map[string]int64{}
	var mu sync.Mutex
	for _, delay := range []string{"10s", "60s"} {
		t.Run(delay, func(t *testing.T) {
			t.Parallel()
			f := newWatcherFixture(t, wait.RolloutOptions{})
			f.deployHealthy(t, watchedDeployment("chat", healthyImage, 1, ""))
			before := f.counter.n.Load()
			f.update(t, "chat", func(p *corev1.PodTemplateSpec) {
				p.Spec.Containers[0].Image = "vllm/vllm-openai:v0.9.1"
				p.Annotations = map[string]string{readyDelayKey: delay}
			})
			r := f.watch(t, context.Background(), "chat", 3*time.Minute)
			require.NoError(t, r.err)
			d, _ := time.ParseDuration(delay)
			assert.GreaterOrEqual(t, r.res.Elapsed, d)
			n := f.counter.n.Load() - before
			all := f.counter.requests()
			t.Logf("%d requests during a %s rollout (%s):\n%s", n, delay, r.res.Elapsed.Round(time.Second), strings.Join(all[before:], "\n"))
			mu.Lock()
			counts[delay] = n
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		short, long := counts["10s"], counts["60s"]
		assert.NotZero(t, short)
		assert.LessOrEqual(t, long, short+2, "a 60s rollout costs about what a 10s one does: %d vs %d requests", long, short)
	})
}

// TestRolloutWatcherCanceled: canceling ctx ends the wait, Canceled.
func TestRolloutWatcherCanceled(t *testing.T) {
	shareCluster(t, 4)
	f := newWatcherFixture(t, wait.RolloutOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := f.client.AppsV1().Deployments(f.namespace).Create(ctx, watchedDeployment("chat", healthyImage, 1, "60s"), metav1.CreateOptions{})
	require.NoError(t, err)
	time.AfterFunc(3*time.Second, cancel)
	start := time.Now()
	r := f.watch(t, ctx, "chat", 2*time.Minute)
	require.Error(t, r.err)
	assert.True(t, errors.Is(r.err, context.Canceled), "got %v", r.err)
	assert.Equal(t, wait.OutcomeCanceled, r.res.Outcome)
	assert.Nil(t, r.res.Diagnosis)
	assert.Less(t, time.Since(start), 15*time.Second, "ends promptly")
}
