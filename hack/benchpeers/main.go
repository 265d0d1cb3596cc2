// main.go holds flags, main, the benchmark's state and the orchestration of the scenario groups.

// Command benchpeers benchmarks the vllmctl binary next to its peers,
// kubectl (server-side apply + rollout status) and Helm 4, on the local
// cluster (`make bench-peers`).
//
// Every tool runs as a child process against a counting reverse proxy in
// front of the API server, so each run reports its wall time (process
// start to exit), its API requests (watches counted once, when they
// start, and also reported apart), and the child's peak RSS and CPU time
// (from its rusage). With -direct the tools talk to the API server
// itself: the proxy's cost (it decrypts and encrypts again every byte a
// tool reads, on the machine that runs the control plane) is left out of
// the wall times, and requests are not counted. Runs of the tools are
// interleaved (A, B, C, A, B, C, ...); each run gets a fresh namespace
// (prefixed bench-) unless the scenario only reads. The scenarios:
//
//   - healthy-upgrade: a 3-replica release (1 GPU, ready delay 2s,
//     maxSurge 1 / maxUnavailable 0) upgraded to a new image tag:
//     `vllmctl deploy` vs `kubectl apply --server-side` + `kubectl rollout
//     status` vs `helm upgrade --install --wait`; and vllmctl alone for a
//     1-replica rollout of 10 s vs 60 s (ready delay), and for the same
//     upgrade at revision 2 vs revision 20;
//   - crash-upgrade, oom-upgrade: an upgrade to a crash-looping or
//     OOM-killed image, `vllmctl deploy` (exit 3, previous revision
//     serving) vs `helm upgrade --rollback-on-failure --timeout 60s` (one
//     run);
//   - stuck-rollout: a crash-looping upgrade of a 2-replica StatefulSet
//     with the default policies (e2e/testdata/stschart, OrderedReady),
//     start to every pod Ready on the old revision, capped at 180 s:
//     `vllmctl deploy` (exit 3, rolled back, the stuck pod evicted) vs
//     `kubectl apply` + `rollout status --timeout 60s` + `rollout undo` +
//     `rollout status --timeout 60s` vs `helm upgrade
//     --rollback-on-failure --timeout 60s` (one run each); kubectl's undo
//     and Helm's rollback leave the crash-looping pod on the bad revision
//     (kubernetes#67250), reported as stuck;
//   - diff-unchanged: `vllmctl diff` vs `kubectl diff --server-side` of an
//     unchanged release; configmap-install: a one-ConfigMap chart,
//     `vllmctl deploy` vs `helm install`;
//   - large-install, large-upgrade: 1000 replicas without GPUs on fake
//     kwok nodes added for it, maxSurge 25%: vllmctl vs kubectl (skipped
//     by -skip-large and when BENCH_QUICK=1);
//   - list-100-releases, history-100-releases: `vllmctl list` / `history`
//     vs `helm list` / `history` in a namespace holding 100 releases.
//   - fleet-install, fleet-upgrade: `vllmctl fleet deploy` of
//     e2e/testdata/relchart (1 replica, Ready after 1s) installing, then
//     upgrading (new greeting and image: the pod rolls), one target
//     (local-a) vs a wave of 3 (local-a, local-b, local-a; maxParallel 3)
//     in fresh namespaces, with the contexts of -fleet-kubeconfig (skipped
//     when that file does not exist); each target talks to a proxy of its
//     own, so the table also shows the requests per target.
//   - vllmctl-canary-analysis (group analysis): vllmctl alone, the
//     healthy upgrade through a 1-pod canary held 12 s without an
//     analysis vs held 1 s with a 3 × 4 s analysis (scrape provider, the
//     synthetic load): the note gives what the analysis adds beyond its
//     window and its API requests per measurement.
//
// The release pods run on fake GPU nodes the benchmark adds (tainted and
// labelled for it), so other users of the shared local cluster neither
// take their capacity nor get theirs taken; namespaces and nodes are
// deleted at the end (also on Ctrl-C).
//
// A table per scenario goes to stdout, progress to stderr, and with
// BENCH_OUT set the figures as one JSON object to that file. BENCH_QUICK=1
// runs each scenario twice (the 10 s and 60 s rollouts once; kubectl and
// Helm in stuck-rollout once, as always) and skips the 1000-replica one. A run during which the shared cluster's API server
// restarted is run again. The exit status is 1 when a tool run failed
// unexpectedly (a crash scenario's exit 3 is expected).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

const (
	release  = "chat"
	goodTag  = "v0.11.0"
	newTag   = "v0.11.1"
	budget   = 10 * time.Minute
	setRun   = "podAnnotations.bench\\.vllmctl\\.io/run="
	setDelay = "podAnnotations.sim\\.vllmctl\\.io/ready-delay="
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("benchpeers: ")
	os.Exit(realMain())
}

type options struct {
	kubeconfig, vllmctl, kubectl, helm, chart string
	stsChart, fleetKubeconfig, relChart       string
	runs, largeReplicas                       int
	skipLarge, quick, direct                  bool
	only                                      *regexp.Regexp
	out                                       string
}

func realMain() int {
	var o options
	var only string
	flag.StringVar(&o.kubeconfig, "kubeconfig", ".cluster/kubeconfig", "kubeconfig of the local cluster")
	flag.StringVar(&o.vllmctl, "vllmctl", "bin/vllmctl", "vllmctl binary")
	flag.StringVar(&o.kubectl, "kubectl", "", "kubectl binary (required)")
	flag.StringVar(&o.helm, "helm", "", "helm v4 binary (required)")
	flag.StringVar(&o.chart, "chart", "charts/vllm", "directory of the vllm chart (the built-in one)")
	flag.StringVar(&o.stsChart, "sts-chart", "e2e/testdata/stschart", "directory of the StatefulSet chart of the stuck-rollout scenario")
	flag.StringVar(&o.fleetKubeconfig, "fleet-kubeconfig", ".cluster-b/fleet-kubeconfig", "kubeconfig with the contexts local-a and local-b of the fleet scenarios (make cluster-b); the scenarios are skipped when it does not exist")
	flag.StringVar(&o.relChart, "fleet-chart", "e2e/testdata/relchart", "directory of the chart of the fleet scenarios")
	flag.IntVar(&o.runs, "runs", 5, "runs per tool and scenario (BENCH_QUICK=1: 2)")
	flag.IntVar(&o.largeReplicas, "large-replicas", 1000, "replicas of the large scenario")
	flag.BoolVar(&o.skipLarge, "skip-large", false, "skip the large scenario (also skipped when BENCH_QUICK=1)")
	flag.BoolVar(&o.direct, "direct", false, "the tools talk to the API server directly with -kubeconfig's credentials, not through the counting proxy: wall and CPU times without the proxy's own cost, which grows with the bytes a tool reads and takes CPU from the control plane; requests and bytes are not counted (shown as -; the fleet scenarios keep their proxies)")
	flag.StringVar(&only, "only", "", "run only the scenario groups matching this regexp (healthy, failure, stuck, diff, large, busy, releases, fleet, analysis)")
	flag.StringVar(&o.out, "out", os.Getenv("BENCH_OUT"), "write the figures as JSON to this file (default $BENCH_OUT)")
	flag.Parse()
	if o.kubectl == "" || o.helm == "" {
		log.Print("-kubectl and -helm are required (make bench-peers sets them)")
		return 2
	}
	if q := os.Getenv("BENCH_QUICK"); q != "" && q != "0" {
		o.quick, o.skipLarge = true, true
		if !flagSet("runs") {
			o.runs = 2
		}
	}
	if o.runs < 1 {
		log.Print("-runs must be 1 or more")
		return 2
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			log.Printf("-only: %v", err)
			return 2
		}
		o.only = re
	}
	for _, p := range []*string{&o.kubeconfig, &o.vllmctl, &o.kubectl, &o.helm, &o.chart, &o.stsChart, &o.fleetKubeconfig, &o.relChart} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			log.Print(err)
			return 2
		}
		*p = abs
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBench(ctx, o)
	if err != nil {
		log.Print(err)
		return 1
	}
	defer b.cleanup()
	if err := b.runAll(ctx); err != nil {
		log.Print(err)
		return 1
	}
	if n := b.failures.Load(); n > 0 {
		log.Printf("%d tool run(s) failed unexpectedly (see above)", n)
		return 1
	}
	return 0
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// progress prints a timestamped progress line to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// ---------------------------------------------------------------------------
// The benchmark's state.

type bench struct {
	o      options
	client kubernetes.Interface
	proxy  *proxy
	dir    string   // temp dir: HOME of the tools, kubeconfig, values, charts
	kcfg   string   // the tools' kubeconfig (the proxy)
	env    []string // the tools' environment
	id     string   // random suffix of names
	pool   string   // label/taint value of the bench GPU nodes

	mu         sync.Mutex
	namespaces map[string]kubernetes.Interface // the client that created each
	nodes      []string                        // fake nodes added, in order
	nodePool   map[string]string               // their pools

	failures atomic.Int64
	report   report
	out      io.Writer // the tables; nil: stdout
}

func newBench(ctx context.Context, o options) (*bench, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s (run make cluster): %w", o.kubeconfig, err)
	}
	direct := rest.CopyConfig(cfg)
	direct.QPS, direct.Burst = 200, 400
	client, err := kubernetes.NewForConfig(direct)
	if err != nil {
		return nil, err
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("the local cluster does not answer (make cluster): %w", err)
	}
	p, err := startProxy(cfg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "benchpeers-")
	if err != nil {
		return nil, err
	}
	id := utilrand.String(5)
	b := &bench{
		o: o, client: client, proxy: p, dir: dir, id: id, pool: "bench-" + id,
		namespaces: map[string]kubernetes.Interface{}, nodePool: map[string]string{},
		report: report{
			Generated: time.Now().UTC().Format(time.RFC3339), Quick: o.quick, Direct: o.direct, Runs: o.runs,
			Versions: map[string]string{}, Descriptions: map[string]string{},
			Scenarios: map[string]map[string]*stats{},
		},
	}
	b.kcfg = filepath.Join(dir, "kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: https://%s
    insecure-skip-tls-verify: true
users:
- name: bench
  user: {token: benchpeers}
contexts:
- name: bench
  context: {cluster: bench, user: bench}
current-context: bench
`, p.addr)
	if err := os.WriteFile(b.kcfg, []byte(kubeconfig), 0o600); err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	if o.direct {
		if b.kcfg, err = filepath.Abs(o.kubeconfig); err != nil {
			return nil, err
		}
	}
	b.env = []string{"HOME=" + home, "KUBECONFIG=" + b.kcfg, "PATH=" + os.Getenv("PATH"), "LANG=C", "TZ=UTC"}
	if p := os.Getenv("VLLMCTL_CPUPROFILE"); p != "" {
		// vllmctl's CPU profile of its last run, for `go tool pprof`.
		b.env = append(b.env, "VLLMCTL_CPUPROFILE="+p)
	}
	if o.direct {
		progress("tools talk to %s directly (-direct: requests not counted); they run with HOME=%s", cfg.Host, home)
	} else {
		progress("proxy on https://%s in front of %s; tools run with HOME=%s", p.addr, cfg.Host, home)
	}
	return b, nil
}

// cleanup deletes what the benchmark created: namespaces, then nodes.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.mu.Lock()
	nss := make([]string, 0, len(b.namespaces))
	for ns := range b.namespaces {
		nss = append(nss, ns)
	}
	b.mu.Unlock()
	if len(nss) > 0 {
		progress("deleting %d namespace(s)", len(nss))
		for _, ns := range nss {
			_ = b.deleteNamespace(ctx, ns)
		}
	}
	b.deleteNodes(ctx, "")
	_ = b.proxy.server.Close()
	_ = os.RemoveAll(b.dir)
}

// ---------------------------------------------------------------------------
// Scenarios.

func (b *bench) runAll(ctx context.Context) error {
	b.versions(ctx)
	// The bench GPU pool: pods of the vllm releases land only here.
	err := b.addNodes(ctx, "bench-gpu", b.pool, 2, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), vllm.GPUResource: resource.MustParse("8"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	})
	if err != nil {
		return err
	}
	if err := b.writeFiles(); err != nil {
		return err
	}
	// Warm the tools' discovery caches (in HOME, keyed by the proxy's
	// address): every measured run is a tool's second invocation or later.
	if err := b.setup(ctx,
		cmd(b.o.kubectl, "api-resources", "-o", "name"),
		cmd(b.o.vllmctl, "list", "-A"),
		cmd(b.o.helm, "list", "-A"),
	); err != nil {
		return err
	}
	groups := []struct {
		name string
		fn   func(context.Context) error
		skip bool
	}{
		{"healthy", b.healthy, false},
		{"failure", b.failure, false},
		{"stuck", b.stuck, false},
		{"diff", b.diffAndConfigMap, false},
		{"large", b.large, b.o.skipLarge},
		{"busy", b.busy, b.o.quick},
		{"releases", b.manyReleases, false},
		{"fleet", b.fleet, false},
		{"analysis", b.analysis, false},
	}
	for _, g := range groups {
		if g.name == "fleet" && (b.o.only == nil || b.o.only.MatchString(g.name)) {
			if _, err := os.Stat(b.o.fleetKubeconfig); err != nil {
				progress("skipping the fleet scenarios: no fleet kubeconfig %s (make cluster-b writes it; -fleet-kubeconfig)", b.o.fleetKubeconfig)
				continue
			}
		}
		if g.skip || (b.o.only != nil && !b.o.only.MatchString(g.name)) {
			progress("skipping the %s scenarios", g.name)
			continue
		}
		if err := g.fn(ctx); err != nil {
			_ = b.writeJSON()
			return err
		}
	}
	return b.writeJSON()
}

func (b *bench) versions(ctx context.Context) {
	for tool, argv := range map[string][]string{
		"vllmctl": {b.o.vllmctl, "version"},
		"kubectl": {b.o.kubectl, "version", "--client"},
		"helm":    {b.o.helm, "version", "--short"},
	} {
		v := strings.TrimSpace(string(b.exec(ctx, argv).stdout))
		v = strings.Join(strings.Fields(strings.SplitN(v, "\n", 2)[0]), " ")
		v = strings.TrimPrefix(v, "Client Version: ")
		b.report.Versions[tool] = v
		progress("%s: %s", tool, v)
	}
	if v, err := b.client.Discovery().ServerVersion(); err == nil {
		b.report.Versions["server"] = v.GitVersion
	}
}
