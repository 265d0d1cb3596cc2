//go:build e2e

package e2e

// Benchmarks on the local cluster (make bench), not timed tests: they
// report figures and fail only when the operation itself goes wrong.
//
//   - BenchmarkFailureToRollback: a deploy of a crashing image, and one
//     whose log names a decisive cause (CUDA out of memory), with the
//     default verdict thresholds, the automatic rollback on; how long from
//     the first container termination of the new ReplicaSet (seen by a
//     separate pod watch) to the rollback starting and to the previous
//     revision serving again (the rollback's revision deployed), median
//     over the runs.
//   - BenchmarkDeployRequests: the API requests of one healthy deploy
//     whose rollout takes 10 s, and one taking 60 s.
//
// Both run the deploy in-process through the release package, built as
// `vllmctl deploy` builds it (cmd/vllmctl: clusterEngine, the capacity
// preflight, the automatic rollback), on kubectl-style flags whose REST
// config counts requests.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

const (
	benchRelease = "chat"
	// benchGood is the image tag of the good revision; crashing ones add
	// "-crash" (the local cluster crash-loops such pods).
	benchGood = "v0.11.0"
	// benchBudget bounds a deploy and its automatic rollback.
	benchBudget = 5 * time.Minute
)

// benchFixture is a fresh namespace on the local cluster, the built-in
// vllm chart and what the in-process deploys need.
type benchFixture struct {
	kubeconfig string
	cacheDir   string
	namespace  string
	client     kubernetes.Interface
	chart      *chart.Chart
	// base are the --set values of every deploy: small pods, 1 GPU each.
	base []string
}

func newBenchFixture(b *testing.B, replicas int) *benchFixture {
	b.Helper()
	path := os.Getenv("VLLMCTL_E2E_KUBECONFIG")
	require.NotEmpty(b, path, "VLLMCTL_E2E_KUBECONFIG must point at the local cluster's kubeconfig (run `make bench`)")
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(b, err, "load kubeconfig %s", path)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	ch, err := charts.Load("vllm")
	require.NoError(b, err)

	ns := fmt.Sprintf("bench-%s-%s", sanitize(b.Name()), rand.String(5))
	ctx := context.Background()
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(b, err, "create namespace %s", ns)
	b.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	require.NoError(b, kwait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}), "default service account in %s", ns)

	return &benchFixture{
		kubeconfig: path,
		cacheDir:   filepath.Join(b.TempDir(), "kube-cache"),
		namespace:  ns,
		client:     client,
		chart:      ch,
		base: []string{
			fmt.Sprintf("replicaCount=%d", replicas), "resources.gpu=1",
			"resources.requests.cpu=500m", "resources.limits.cpu=500m",
			"resources.requests.memory=1Gi", "resources.limits.memory=1Gi",
		},
	}
}

// engine builds the release engine as `vllmctl deploy` does
// (cmd/vllmctl clusterEngine: kubectl-style flags, with their on-disk
// discovery cache), its requests counted by counter.
func (f *benchFixture) engine(b *testing.B, counter *requestCounter) *release.Engine {
	b.Helper()
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &f.kubeconfig
	flags.Namespace = &f.namespace
	flags.CacheDir = &f.cacheDir
	flags.WrapConfigFn = counter.wrap
	cfg, err := flags.ToRESTConfig()
	require.NoError(b, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	applier, err := cluster.NewApplier(flags)
	require.NoError(b, err)
	others := wait.NewKstatusWaiter(applier.DynamicClient(), applier.RESTMapper())
	return &release.Engine{
		Store:   storage.NewSecrets(client, f.namespace),
		Objects: applier,
		Lookup:  applier.Lookup,
		Waiter:  wait.NewRolloutWatcher(client, others, wait.RolloutOptions{}),
		Client:  client,
	}
}

// deploy deploys the built-in chart with the fixture's values and set
// through the release engine's pipeline, as `vllmctl deploy` does (the
// capacity preflight with surge policy auto, the automatic rollback on its
// own budget). progress, when set, receives the events.
func (f *benchFixture) deploy(ctx context.Context, b *testing.B, counter *requestCounter, progress func(release.ProgressEvent), set ...string) (*release.Result, error) {
	b.Helper()
	engine := f.engine(b, counter)
	engine.Progress = progress
	return engine.Deploy(ctx, release.DeployOptions{
		Name: benchRelease,
		Render: release.RenderInput{Chart: f.chart, Options: charts.RenderOptions{
			Namespace: f.namespace, Set: append(slices.Clone(f.base), set...),
		}},
		Timeout:           benchBudget,
		RollbackTimeout:   benchBudget,
		HistoryMax:        10,
		RollbackOnFailure: true,
	})
}

// apiServerRestarted runs fn and reports whether the API server restarted
// meanwhile (its process_start_time_seconds metric changed): other tests
// on the shared local cluster restart it, which re-establishes every
// watch and skews the figures.
func (f *benchFixture) apiServerRestarted(ctx context.Context, b *testing.B, fn func()) bool {
	b.Helper()
	start := func() string {
		var raw []byte
		err := kwait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			raw, err = f.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			return err == nil, nil
		})
		require.NoError(b, err, "read the API server's metrics")
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "process_start_time_seconds "); ok {
				return v
			}
		}
		b.Fatal("no process_start_time_seconds in the API server's metrics")
		return ""
	}
	before := start()
	fn()
	return start() != before
}

// terminations records, from a watch of the namespace's pods, when each
// pod-template-hash first had a container that terminated.
type terminations struct {
	mu    sync.Mutex
	first map[string]time.Time
}

// watchTerminations watches the pods of namespace until ctx ends (again
// after a dropped watch).
func watchTerminations(ctx context.Context, b *testing.B, client kubernetes.Interface, namespace string) *terminations {
	b.Helper()
	t := &terminations{first: map[string]time.Time{}}
	w, err := client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{})
	require.NoError(b, err, "watch the pods of %s", namespace)
	go func() {
		for ctx.Err() == nil {
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok || !terminated(pod) {
					continue
				}
				now := time.Now()
				hash := pod.Labels["pod-template-hash"]
				t.mu.Lock()
				if _, seen := t.first[hash]; !seen {
					t.first[hash] = now
				}
				t.mu.Unlock()
			}
			w.Stop()
			for ctx.Err() == nil {
				if w, err = client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{}); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
		}
	}()
	return t
}

// terminated reports whether a container of pod terminated (now or
// before its last restart).
func terminated(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil || cs.RestartCount > 0 {
			return true
		}
	}
	return false
}

// of returns when pods of hash first had a terminated container.
func (t *terminations) of(hash string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.first[hash]
	return at, ok
}

// moments are what one failed deploy's progress events say: the first
// warning about a new pod, the failure verdict and the rollback's
// revision deployed.
type moments struct {
	mu                                                sync.Mutex
	revision                                          int
	firstWarning, verdict, rollbackStarted, rolledOut time.Time
}

func (m *moments) record(ev release.ProgressEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case ev.Phase == release.PhaseLock && m.revision == 0:
		m.revision = ev.Revision
	case ev.Phase == release.PhaseWait && ev.Revision == m.revision && ev.Rollout != nil:
		p := ev.Rollout
		if m.firstWarning.IsZero() && p.Warning != "" && !strings.Contains(p.Warning, "old ReplicaSet") {
			m.firstWarning = ev.Time
		}
		if m.verdict.IsZero() && p.Verdict.Failed() {
			m.verdict = ev.Time
		}
	case ev.Phase == release.PhaseRollback && m.rollbackStarted.IsZero():
		m.rollbackStarted = ev.Time
	case ev.Phase == release.PhaseDone && ev.Revision > m.revision && ev.Status == string(storage.StatusDeployed) && m.rolledOut.IsZero():
		m.rolledOut = ev.Time
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func seconds(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

// BenchmarkFailureToRollback measures, per failing deploy, the time from
// the first container termination of the new ReplicaSet (a separate pod
// watch) to the rollback starting and to the previous revision serving
// again (the rollback's revision deployed), with the default verdict
// thresholds, for two faults:
//   - crash: a container that crash-loops without saying why waits for
//     CrashLoopBackOff with 2 restarts (target: a median of 5 s or less
//     to the previous revision serving);
//   - gpu-oom: a container whose log names CUDA out of memory, a decisive
//     cause, fails the rollout at its first termination (target: a median
//     of 0.5 s or less to the rollback starting).
func BenchmarkFailureToRollback(b *testing.B) {
	for _, fault := range []struct {
		name, tag, target string
		// limit is the target of the figure named by target, in seconds.
		limit float64
	}{
		{"crash", "crash", "signal-to-rollback", 5},
		{"gpu-oom", "fault-gpumem", "signal-to-rollback-start", 0.5},
	} {
		b.Run(fault.name, func(b *testing.B) {
			benchFailure(b, fault.tag, fault.target, fault.limit)
		})
	}
}

// benchFailure runs the failing deploys of BenchmarkFailureToRollback
// with image tags ending in -tag.
func benchFailure(b *testing.B, tag, target string, limit float64) {
	f := newBenchFixture(b, 2)
	ctx := context.Background()
	readyDelay := "podAnnotations.sim\\.vllmctl\\.io/ready-delay=1s"
	res, err := f.deploy(ctx, b, &requestCounter{}, nil, "image.tag="+benchGood, readyDelay)
	require.NoError(b, err, "install release %s", benchRelease)
	goodHash := res.ReplicaSets[0].PodTemplateHash

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	terms := watchTerminations(wctx, b, f.client, f.namespace)

	figures := map[string][]float64{}
	run := 0
	for b.Loop() {
		run++
		var m *moments
		var res *release.Result
		var err error
		for attempt := 1; ; attempt++ {
			m = &moments{}
			restarted := f.apiServerRestarted(ctx, b, func() {
				res, err = f.deploy(ctx, b, &requestCounter{}, m.record, fmt.Sprintf("image.tag=%s-%s-r%d-%d", benchGood, tag, run, attempt), readyDelay)
			})
			if !restarted {
				break
			}
			b.Logf("run %d: the API server restarted during the deploy (another test?); measuring again", run)
			require.Less(b, attempt, 3, "the API server keeps restarting")
		}
		require.Error(b, err, "run %d: the failing deploy must fail", run)
		require.NotNil(b, res, "run %d: %v", run, err)
		require.Positive(b, res.RolledBackTo, "run %d: rolled back: %v", run, err)
		require.NotEmpty(b, res.ReplicaSets, "run %d", run)
		badHash := res.ReplicaSets[0].PodTemplateHash
		require.NotEqual(b, goodHash, badHash)
		require.Equal(b, goodHash, res.Rollback.ReplicaSets[0].PodTemplateHash, "run %d: the good ReplicaSet serves", run)

		m.mu.Lock()
		first, ok := terms.of(badHash)
		require.True(b, ok, "run %d: no container termination of ReplicaSet %s seen", run, res.ReplicaSets[0].Name)
		// A decisive cause's verdict can come before any warning.
		require.False(b, m.verdict.IsZero() || m.rollbackStarted.IsZero() || m.rolledOut.IsZero(),
			"run %d: progress events missing: %+v", run, m)
		figures["signal-to-rollback"] = append(figures["signal-to-rollback"], m.rolledOut.Sub(first).Seconds())
		figures["signal-to-rollback-start"] = append(figures["signal-to-rollback-start"], m.rollbackStarted.Sub(first).Seconds())
		figures["detect"] = append(figures["detect"], m.verdict.Sub(first).Seconds())
		figures["rollback"] = append(figures["rollback"], m.rolledOut.Sub(m.rollbackStarted).Seconds())
		if !m.firstWarning.IsZero() {
			figures["from-warning"] = append(figures["from-warning"], m.rolledOut.Sub(m.firstWarning).Seconds())
		}
		m.mu.Unlock()
	}
	for _, k := range []string{"signal-to-rollback", "signal-to-rollback-start", "detect", "rollback"} {
		b.ReportMetric(median(figures[k]), "s-"+k)
	}
	b.Logf("%d deploys of image tags ending in -%s, 2 replicas x 1 GPU, default thresholds (--max-restarts 2, --fail-on-known-cause)", run, tag)
	b.Logf("target: %s median <= %.1fs: %s", target, limit, map[bool]string{true: "met", false: "NOT met"}[median(figures[target]) <= limit])
	for _, k := range []struct{ key, what string }{
		{"signal-to-rollback", "first container termination (pod watch) -> previous revision serving"},
		{"signal-to-rollback-start", "first container termination -> rollback started"},
		{"detect", "  detection (termination -> verdict)"},
		{"rollback", "  rollback (started -> rollback deployed)"},
		{"from-warning", "  from the watcher's first warning to the previous revision serving"},
	} {
		if len(figures[k.key]) > 0 {
			b.Logf("%s: median %.2fs (runs: %s)", k.what, median(figures[k.key]), seconds(figures[k.key]))
		}
	}
}

// BenchmarkDeployRequests counts the API requests of one healthy deploy
// (an upgrade of a 1-replica release whose new pod is Ready after the
// ready delay, so the rollout takes about that long), on a warm discovery
// cache as a second `vllmctl deploy` has.
func BenchmarkDeployRequests(b *testing.B) {
	for _, delay := range []time.Duration{10 * time.Second, 60 * time.Second} {
		b.Run(fmt.Sprintf("rollout=%s", delay), func(b *testing.B) {
			f := newBenchFixture(b, 1)
			ctx := context.Background()
			readyDelay := "podAnnotations.sim\\.vllmctl\\.io/ready-delay="
			_, err := f.deploy(ctx, b, &requestCounter{}, nil, "image.tag="+benchGood, readyDelay+"1s")
			require.NoError(b, err, "install release %s", benchRelease)

			var counts []float64
			var last *requestCounter
			var took time.Duration
			run := 0
			for b.Loop() {
				run++
				for attempt := 1; ; attempt++ {
					counter := &requestCounter{}
					restarted := f.apiServerRestarted(ctx, b, func() {
						start := time.Now()
						res, err := f.deploy(ctx, b, counter, nil, "image.tag="+benchGood, readyDelay+delay.String(),
							fmt.Sprintf("podAnnotations.bench\\.vllmctl\\.io/run=r%d-%d", run, attempt))
						took = time.Since(start)
						require.NoError(b, err, "run %d", run)
						require.Equal(b, storage.StatusDeployed, res.Status)
					})
					if !restarted {
						counts = append(counts, float64(counter.n.Load()))
						last = counter
						break
					}
					b.Logf("run %d: the API server restarted during the deploy (another test?): its watches were re-established; counting again", run)
					require.Less(b, attempt, 3, "the API server keeps restarting")
				}
			}
			b.ReportMetric(median(counts), "requests/deploy")
			b.ReportMetric(float64(countWatches(last.requests())), "watches/deploy")
			b.Logf("healthy upgrade, rollout of %s (deploy took %s): %.0f API requests (runs: %s)",
				delay, took.Round(100*time.Millisecond), median(counts), seconds(counts))
			b.Logf("  by request: %s", strings.Join(requestSummary(last.requests(), f.namespace), "; "))
		})
	}
}

// countWatches counts the watch requests among reqs.
func countWatches(reqs []string) int {
	n := 0
	for _, r := range reqs {
		if strings.Contains(r, "watch=true") {
			n++
		}
	}
	return n
}

// requestSummary groups requests by method, path (namespace and
// release names generalised) and watch, most frequent first.
func requestSummary(reqs []string, namespace string) []string {
	counts := map[string]int{}
	for _, r := range reqs {
		method, rest, _ := strings.Cut(r, " ")
		path, query, _ := strings.Cut(rest, "?")
		path = strings.ReplaceAll(path, "/namespaces/"+namespace, "/namespaces/NS")
		for _, p := range []string{"/secrets/", "/deployments/", "/services/"} {
			if i := strings.Index(path, p); i >= 0 {
				path = path[:i+len(p)] + "NAME"
			}
		}
		key := method + " " + path
		if v, err := url.ParseQuery(query); err == nil && v.Get("watch") == "true" {
			key += " (watch)"
		}
		counts[key]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return out
}
