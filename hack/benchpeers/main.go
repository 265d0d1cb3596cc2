// Command benchpeers benchmarks the vllmctl binary next to its peers,
// kubectl (server-side apply + rollout status) and Helm 4, on the local
// cluster (`make bench-peers`).
//
// Every tool runs as a child process against a counting reverse proxy in
// front of the API server, so each run reports its wall time (process
// start to exit), its API requests (watches counted once, when they
// start, and also reported apart), and the child's peak RSS and CPU time
// (from its rusage). Runs of the tools are interleaved (A, B, C, A, B, C,
// ...); each run gets a fresh namespace (prefixed bench-) unless the
// scenario only reads. The scenarios:
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
//   - diff-unchanged: `vllmctl diff` vs `kubectl diff --server-side` of an
//     unchanged release; configmap-install: a one-ConfigMap chart,
//     `vllmctl deploy` vs `helm install`;
//   - large-install, large-upgrade: 1000 replicas without GPUs on fake
//     kwok nodes added for it, maxSurge 25%: vllmctl vs kubectl (skipped
//     by -skip-large and when BENCH_QUICK=1);
//   - list-100-releases, history-100-releases: `vllmctl list` / `history`
//     vs `helm list` / `history` in a namespace holding 100 releases.
//
// The release pods run on fake GPU nodes the benchmark adds (tainted and
// labelled for it), so other users of the shared local cluster neither
// take their capacity nor get theirs taken; namespaces and nodes are
// deleted at the end (also on Ctrl-C).
//
// A table per scenario goes to stdout, progress to stderr, and with
// BENCH_OUT set the figures as one JSON object to that file. BENCH_QUICK=1
// runs each scenario twice (the 10 s and 60 s rollouts once) and skips the
// 1000-replica one. A run during which the shared cluster's API server
// restarted is run again. The exit status is 1 when a tool run failed
// unexpectedly (a crash scenario's exit 3 is expected).
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	runs, largeReplicas                       int
	skipLarge, quick                          bool
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
	flag.IntVar(&o.runs, "runs", 5, "runs per tool and scenario (BENCH_QUICK=1: 2)")
	flag.IntVar(&o.largeReplicas, "large-replicas", 1000, "replicas of the large scenario")
	flag.BoolVar(&o.skipLarge, "skip-large", false, "skip the large scenario (also skipped when BENCH_QUICK=1)")
	flag.StringVar(&only, "only", "", "run only the scenario groups matching this regexp (healthy, failure, diff, large, releases)")
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
	for _, p := range []*string{&o.kubeconfig, &o.vllmctl, &o.kubectl, &o.helm, &o.chart} {
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
// The counting proxy.

// proxy is a TLS reverse proxy in front of the API server that counts the
// requests passing through it. The tools talk to it without credentials
// (their kubeconfig skips TLS verification of its self-signed certificate);
// it reaches the API server with the cluster kubeconfig's own client
// certificate (rest.TransportFor).
type proxy struct {
	addr     string
	server   *http.Server
	requests atomic.Int64
	watches  atomic.Int64
	mu       sync.Mutex
	byKey    map[string]int
}

func startProxy(cfg *rest.Config) (*proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	p := &proxy{byKey: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(os.Stderr, "proxy: ", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				progress("proxy: %s %s: %v", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.count(r)
			rp.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(os.Stderr, "proxy: ", 0),
	}
	go func() { _ = p.server.ServeTLS(ln, "", "") }()
	return p, nil
}

// isWatch reports whether r starts a watch.
func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

var namespacePath = regexp.MustCompile(`/namespaces/[^/]+`)

func (p *proxy) count(r *http.Request) {
	p.requests.Add(1)
	key := r.Method + " " + namespacePath.ReplaceAllString(r.URL.Path, "/namespaces/NS")
	if isWatch(r) {
		p.watches.Add(1)
		key += " (watch)"
	}
	p.mu.Lock()
	p.byKey[key]++
	p.mu.Unlock()
}

// counts are the requests the proxy saw since the last reset.
type counts struct {
	requests, watches int64
	byKey             map[string]int
}

func (p *proxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests.Store(0)
	p.watches.Store(0)
	p.byKey = map[string]int{}
}

func (p *proxy) take() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := counts{requests: p.requests.Load(), watches: p.watches.Load(), byKey: p.byKey}
	p.byKey = map[string]int{}
	return c
}

func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "benchpeers proxy"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
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
	namespaces map[string]bool
	nodes      []string          // fake nodes added, in order
	nodePool   map[string]string // their pools

	failures atomic.Int64
	report   report
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
		namespaces: map[string]bool{}, nodePool: map[string]string{},
		report: report{
			Generated: time.Now().UTC().Format(time.RFC3339), Quick: o.quick, Runs: o.runs,
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
	b.env = []string{"HOME=" + home, "KUBECONFIG=" + b.kcfg, "PATH=" + os.Getenv("PATH"), "LANG=C", "TZ=UTC"}
	progress("proxy on https://%s in front of %s; tools run with HOME=%s", p.addr, cfg.Host, home)
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
// Running tools.

// step is one command of a measured run: its arguments and the exit codes
// it may end with (0 when none are given).
type step struct {
	argv []string
	ok   []int
}

func cmd(argv ...string) step { return step{argv: argv} }

func (s step) expect(codes ...int) step { s.ok = codes; return s }

// result is one process's outcome.
type result struct {
	exit           int
	stdout, stderr []byte
	wall, cpu      time.Duration
	maxRSSKiB      int64
}

// exec runs argv as a child process in the tools' environment.
func (b *bench) exec(ctx context.Context, argv []string) result {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = b.env
	c.Dir = b.dir
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	start := time.Now()
	err := c.Run()
	r := result{wall: time.Since(start), stdout: out.Bytes(), stderr: errOut.Bytes()}
	if c.ProcessState != nil {
		r.exit = c.ProcessState.ExitCode()
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.maxRSSKiB = ru.Maxrss // KiB on Linux
			r.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
		}
	} else if err != nil {
		r.exit = -1
		r.stderr = append(r.stderr, []byte(err.Error())...)
	}
	return r
}

// tail is the last lines of out, for error messages.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run is the outcome of one measured run of a tool: one or more
// processes, back to back.
type run struct {
	Seconds    float64        `json:"seconds"`
	Requests   int64          `json:"requests"`
	Watches    int64          `json:"watches"`
	ExitCode   int            `json:"exitCode"`
	MaxRSSMiB  float64        `json:"maxRSSMiB"`
	CPUSeconds float64        `json:"cpuSeconds"`
	Note       string         `json:"note,omitempty"`
	Error      string         `json:"error,omitempty"`
	byKey      map[string]int // requests by method and path
	stdout     []byte         // of the last step
}

// measure runs steps back to back with the proxy's counters reset first:
// the wall time is from the first start to the last exit, the peak RSS
// the largest of the steps', the CPU time their sum.
func (b *bench) measure(ctx context.Context, steps ...step) (run, error) {
	b.proxy.reset()
	var r run
	var rss int64
	var cpu time.Duration
	start := time.Now()
	for _, s := range steps {
		res := b.exec(ctx, s.argv)
		rss = max(rss, res.maxRSSKiB)
		cpu += res.cpu
		r.ExitCode, r.stdout = res.exit, res.stdout
		ok := s.ok
		if len(ok) == 0 {
			ok = []int{0}
		}
		if !slices.Contains(ok, res.exit) {
			r.Seconds = time.Since(start).Seconds()
			return r, fmt.Errorf("%s: exit %d, expected %v:\n%s%s", strings.Join(shortArgv(s.argv), " "), res.exit, ok,
				tail(res.stdout, 5), tail(res.stderr, 15))
		}
	}
	r.Seconds = time.Since(start).Seconds()
	c := b.proxy.take()
	r.Requests, r.Watches, r.byKey = c.requests, c.watches, c.byKey
	r.MaxRSSMiB = float64(rss) / 1024
	r.CPUSeconds = cpu.Seconds()
	return r, ctx.Err()
}

// setup runs steps unmeasured; any exit but 0 is an error.
func (b *bench) setup(ctx context.Context, steps ...step) error {
	for _, s := range steps {
		if res := b.exec(ctx, s.argv); res.exit != 0 {
			return fmt.Errorf("setup: %s: exit %d:\n%s", strings.Join(shortArgv(s.argv), " "), res.exit, tail(res.stderr, 15))
		}
	}
	return ctx.Err()
}

func shortArgv(argv []string) []string {
	out := slices.Clone(argv)
	out[0] = filepath.Base(out[0])
	return out
}

// apiServerStart is the API server's process_start_time_seconds: other
// users of the shared local cluster restart it, which re-establishes every
// watch and fails requests in flight.
func (b *bench) apiServerStart(ctx context.Context) string {
	var start string
	_ = kwait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		raw, err := b.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "process_start_time_seconds "); ok {
				start = v
				return true, nil
			}
		}
		return true, nil
	})
	return start
}

// attempt runs fn (one run, its setup included) and runs it again, up to
// twice, when the API server restarted meanwhile.
func (b *bench) attempt(ctx context.Context, label string, fn func() (run, error)) (run, error) {
	for i := 1; ; i++ {
		before := b.apiServerStart(ctx)
		r, err := fn()
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if after := b.apiServerStart(ctx); after == before || i == 3 {
			if after != before {
				r.Note = "the API server restarted during the run"
			}
			return r, err
		}
		progress("%s: the API server restarted during the run (another user of the cluster?); running it again", label)
	}
}

// ---------------------------------------------------------------------------
// Cluster helpers (direct client, not counted).

// namespace creates a fresh namespace and waits for its default service
// account (pods are refused before it exists).
func (b *bench) namespace(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("bench-%s-%s-%s", prefix, b.id, utilrand.String(4))
	if len(name) > 63 {
		name = name[:63]
	}
	_, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"vllmctl.io/bench": b.id},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace %s: %w", name, err)
	}
	b.mu.Lock()
	b.namespaces[name] = true
	b.mu.Unlock()
	err = kwait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("default service account of %s: %w", name, err)
	}
	return name, nil
}

// deleteNamespace deletes ns and waits until it is gone, so that its pods
// no longer hold capacity when the next run starts.
func (b *bench) deleteNamespace(ctx context.Context, ns string) error {
	err := b.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	err = kwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not deleted: %w", ns, err)
	}
	b.mu.Lock()
	delete(b.namespaces, ns)
	b.mu.Unlock()
	return nil
}

// addNodes creates n fake kwok nodes (as cmd/devcluster/cluster/nodes.yaml
// defines the local cluster's), labelled and tainted vllmctl.io/pool=pool,
// and waits until they are Ready.
func (b *bench) addNodes(ctx context.Context, prefix, pool string, n int, capacity corev1.ResourceList) error {
	var names []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("%s-%s-%d", prefix, b.id, i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"type": "kwok", "vllmctl.io/pool": pool, "vllmctl.io/bench": b.id,
				},
			},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "vllmctl.io/pool", Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := b.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		b.mu.Lock()
		b.nodes = append(b.nodes, name)
		b.nodePool[name] = pool
		b.mu.Unlock()
		names = append(names, name)
	}
	return kwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			node, err := b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
}

// deleteNodes deletes the fake nodes of pool ("": all of them).
func (b *bench) deleteNodes(ctx context.Context, pool string) {
	b.mu.Lock()
	var nodes, keep []string
	for _, n := range b.nodes {
		if pool == "" || b.nodePool[n] == pool {
			nodes = append(nodes, n)
		} else {
			keep = append(keep, n)
		}
	}
	b.nodes = keep
	b.mu.Unlock()
	if len(nodes) > 0 {
		progress("deleting %d fake node(s)", len(nodes))
	}
	for _, n := range nodes {
		if err := b.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			progress("delete node %s: %v", n, err)
		}
	}
}

// rolledOut checks that the release's Deployment runs image tag tag and
// has rolled out completely (the previous revision serving, after a
// failed upgrade).
func (b *bench) rolledOut(ctx context.Context, ns, tag string) error {
	var d *appsv1.Deployment
	err := kwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		d, err = b.client.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if d == nil {
		return fmt.Errorf("deployment %s/%s: %w", ns, release, err)
	}
	if image := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(image, ":"+tag) {
		return fmt.Errorf("deployment %s/%s runs %s, want tag %s", ns, release, image, tag)
	}
	if err != nil {
		return fmt.Errorf("deployment %s/%s not rolled out (status %+v): %w", ns, release, d.Status, err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Figures.

type stats struct {
	Runs             []run              `json:"runs"`
	Median           float64            `json:"median"`
	Min              float64            `json:"min"`
	Max              float64            `json:"max"`
	MedianRequests   float64            `json:"medianRequests"`
	MinRequests      int64              `json:"minRequests"`
	MaxRequests      int64              `json:"maxRequests"`
	MedianWatches    float64            `json:"medianWatches"`
	MedianMaxRSSMiB  float64            `json:"medianMaxRSSMiB"`
	MedianCPUSeconds float64            `json:"medianCPUSeconds"`
	Failed           int                `json:"failed,omitempty"`
	VllmctlRatio     map[string]float64 `json:"vllmctlRatio,omitempty"`
	// LastRunRequests are the last good run's requests by method and path
	// (namespace generalised).
	LastRunRequests map[string]int `json:"lastRunRequests,omitempty"`
}

type report struct {
	Generated    string                       `json:"generated"`
	Quick        bool                         `json:"quick"`
	Runs         int                          `json:"runsPerTool"`
	Versions     map[string]string            `json:"versions"`
	Descriptions map[string]string            `json:"descriptions"`
	Scenarios    map[string]map[string]*stats `json:"scenarios"`
}

// scenario collects the runs of the tools compared in one scenario.
type scenario struct {
	name, title string
	tools       []string
	runs        map[string][]run
	failed      map[string]int
	resources   bool // show peak RSS and CPU time in the table
}

func newScenario(name, title string, tools ...string) *scenario {
	return &scenario{name: name, title: title, tools: tools, runs: map[string][]run{}, failed: map[string]int{}}
}

// add records one run of tool; a failed run is reported and counted as a
// failure, not as a figure.
func (b *bench) add(s *scenario, tool string, r run, err error) {
	n := len(s.runs[tool]) + s.failed[tool] + 1
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		s.failed[tool]++
		b.failures.Add(1)
		r.Error = err.Error()
		progress("%s: %s run %d FAILED: %v", s.name, tool, n, err)
		return
	}
	s.runs[tool] = append(s.runs[tool], r)
	extra := ""
	if r.Note != "" {
		extra = " (" + r.Note + ")"
	}
	progress("%s: %s run %d: %.2fs, %d requests (%d watches), exit %d, %.0f MiB, %.2f CPU-s%s",
		s.name, tool, n, r.Seconds, r.Requests, r.Watches, r.ExitCode, r.MaxRSSMiB, r.CPUSeconds, extra)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func summarize(runs []run) *stats {
	st := &stats{Runs: runs}
	if len(runs) == 0 {
		st.Median, st.Min, st.Max = math.NaN(), math.NaN(), math.NaN()
		return st
	}
	var secs, reqs, watches, rss, cpu []float64
	st.Min, st.Max = math.Inf(1), math.Inf(-1)
	st.MinRequests, st.MaxRequests = math.MaxInt64, 0
	for _, r := range runs {
		secs = append(secs, r.Seconds)
		reqs = append(reqs, float64(r.Requests))
		watches = append(watches, float64(r.Watches))
		rss = append(rss, r.MaxRSSMiB)
		cpu = append(cpu, r.CPUSeconds)
		st.Min, st.Max = math.Min(st.Min, r.Seconds), math.Max(st.Max, r.Seconds)
		st.MinRequests, st.MaxRequests = min(st.MinRequests, r.Requests), max(st.MaxRequests, r.Requests)
	}
	st.Median, st.MedianRequests, st.MedianWatches = median(secs), median(reqs), median(watches)
	st.MedianMaxRSSMiB, st.MedianCPUSeconds = median(rss), median(cpu)
	st.LastRunRequests = runs[len(runs)-1].byKey
	return st
}

// finish prints the scenario's table and adds it to the report. The first
// tool is the reference: the ratio column is its median over each other
// tool's (wall time, requests).
func (b *bench) finish(s *scenario) {
	all := map[string]*stats{}
	for _, t := range s.tools {
		st := summarize(s.runs[t])
		st.Failed = s.failed[t]
		all[t] = st
	}
	ref := all[s.tools[0]]
	for _, t := range s.tools[1:] {
		all[t].VllmctlRatio = map[string]float64{
			"wall":     ref.Median / all[t].Median,
			"requests": ref.MedianRequests / all[t].MedianRequests,
		}
	}
	b.report.Scenarios[s.name] = all
	b.report.Descriptions[s.name] = s.title

	fmt.Printf("\n%s — %s\n", s.name, s.title)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "tool\truns\tmedian s\tmin s\tmax s\trequests\twatches\t"
	if s.resources {
		header += "peak RSS MiB\tCPU s\t"
	}
	header += fmt.Sprintf("%s/tool wall\t%s/tool requests\t", s.tools[0], s.tools[0])
	fmt.Fprintln(tw, header)
	for _, t := range s.tools {
		st := all[t]
		runs := strconv.Itoa(len(st.Runs))
		if st.Failed > 0 {
			runs += fmt.Sprintf(" (+%d failed)", st.Failed)
		}
		line := fmt.Sprintf("%s\t%s\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t", t, runs, st.Median, st.Min, st.Max, st.MedianRequests, st.MedianWatches)
		if s.resources {
			line += fmt.Sprintf("%.0f\t%.2f\t", st.MedianMaxRSSMiB, st.MedianCPUSeconds)
		}
		if r := st.VllmctlRatio; r != nil {
			line += fmt.Sprintf("%.2fx\t%.2fx\t", r["wall"], r["requests"])
		} else {
			line += "-\t-\t"
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

func (b *bench) writeJSON() error {
	if b.o.out == "" {
		return nil
	}
	data, err := json.MarshalIndent(b.report, "", "  ")
	if err != nil {
		return err
	}
	// NaN (no successful run) is not JSON: it becomes null.
	data = regexp.MustCompile(`\bNaN\b|[+-]Inf\b`).ReplaceAll(data, []byte("null"))
	if err := os.WriteFile(b.o.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	progress("figures written to %s", b.o.out)
	return nil
}

// ---------------------------------------------------------------------------
// Scenarios.

func (b *bench) runAll(ctx context.Context) error {
	b.versions(ctx)
	// The bench GPU pool: pods of the vllm releases land only here.
	err := b.addNodes(ctx, "bench-gpu", b.pool, 2, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8"),
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
		{"diff", b.diffAndConfigMap, false},
		{"large", b.large, b.o.skipLarge},
		{"releases", b.manyReleases, false},
	}
	for _, g := range groups {
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

// Paths of the generated files.
func (b *bench) file(name string) string { return filepath.Join(b.dir, name) }

// writeFiles writes the values files and the ConfigMap-only chart.
func (b *bench) writeFiles() error {
	pool := fmt.Sprintf(`nodeSelector:
  vllmctl.io/pool: %[1]s
tolerations:
  - {key: vllmctl.io/pool, operator: Equal, value: %[1]s, effect: NoSchedule}
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
`, b.pool)
	files := map[string]string{
		// The healthy and failure scenarios: 3 small 1-GPU pods.
		"values.yaml": `replicaCount: 3
image: {tag: ` + goodTag + `}
resources:
  gpu: 1
  requests: {cpu: 500m, memory: 1Gi}
  limits: {cpu: 500m, memory: 1Gi}
strategy: {maxSurge: 1, maxUnavailable: 0}
podAnnotations:
  sim.vllmctl.io/ready-delay: 2s
` + pool,
		// The large scenario: many tiny pods without GPUs on their own nodes.
		"large.yaml": fmt.Sprintf(`replicaCount: %d
image: {tag: %s}
resources:
  gpu: 0
  requests: {cpu: 10m, memory: 16Mi}
  limits: {cpu: 10m, memory: 16Mi}
shm: {enabled: false}
strategy: {maxSurge: 25%%, maxUnavailable: 0}
podAnnotations:
  sim.vllmctl.io/ready-delay: 1s
nodeSelector:
  vllmctl.io/pool: %[3]s-large
tolerations:
  - {key: vllmctl.io/pool, operator: Equal, value: %[3]s-large, effect: NoSchedule}
`, b.o.largeReplicas, goodTag, b.pool),
		"cm/Chart.yaml":  "apiVersion: v2\nname: cm\nversion: 0.1.0\nappVersion: \"1\"\n",
		"cm/values.yaml": "data:\n  greeting: hello\n",
		"cm/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  namespace: {{ .Release.Namespace }}
data:
  {{- toYaml .Values.data | nindent 2 }}
`,
	}
	for name, content := range files {
		path := b.file(name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Commands of the vllm chart release in ns with values file values and
// extra --set values.

func (b *bench) vllmctlDeploy(ns, values string, set ...string) step {
	argv := []string{b.o.vllmctl, "deploy", release, b.o.chart, "-n", ns, "-f", values, "--timeout", budget.String(), "-o", "json"}
	for _, s := range set {
		argv = append(argv, "--set", s)
	}
	return cmd(argv...)
}

func (b *bench) helmUpgrade(ns, values string, extra []string, set ...string) step {
	argv := []string{b.o.helm, "upgrade", "--install", release, b.o.chart, "-n", ns, "-f", values}
	argv = append(argv, extra...)
	for _, s := range set {
		argv = append(argv, "--set", s)
	}
	return cmd(argv...)
}

// render writes the chart rendered by `vllmctl template` (the same chart
// and values) for kubectl, and returns the file's path.
func (b *bench) render(ctx context.Context, ns, values string, set ...string) (string, error) {
	argv := []string{b.o.vllmctl, "template", release, b.o.chart, "-n", ns, "-f", values}
	for _, s := range set {
		argv = append(argv, "--set", s)
	}
	res := b.exec(ctx, argv)
	if res.exit != 0 {
		return "", fmt.Errorf("vllmctl template: exit %d: %s", res.exit, tail(res.stderr, 10))
	}
	f, err := os.CreateTemp(b.dir, "rendered-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(res.stdout); err != nil {
		return "", err
	}
	return f.Name(), nil
}

func (b *bench) kubectlApply(ns, file string) []step {
	return []step{
		cmd(b.o.kubectl, "apply", "--server-side", "-n", ns, "-f", file),
		cmd(b.o.kubectl, "rollout", "status", "deployment/"+release, "-n", ns, "--timeout", budget.String()),
	}
}

// install deploys the vllm release in ns with tool (unmeasured).
func (b *bench) install(ctx context.Context, tool, ns, values string, set ...string) error {
	switch tool {
	case "kubectl":
		file, err := b.render(ctx, ns, values, set...)
		if err != nil {
			return err
		}
		return b.setup(ctx, b.kubectlApply(ns, file)...)
	case "helm":
		return b.setup(ctx, b.helmUpgrade(ns, values, []string{"--wait", "--timeout", budget.String()}, set...))
	default:
		return b.setup(ctx, b.vllmctlDeploy(ns, values, set...))
	}
}

// upgrade is the measured upgrade of the vllm release in ns with tool.
func (b *bench) upgrade(ctx context.Context, tool, ns, values string, set ...string) (run, error) {
	switch tool {
	case "kubectl":
		file, err := b.render(ctx, ns, values, set...)
		if err != nil {
			return run{}, err
		}
		return b.measure(ctx, b.kubectlApply(ns, file)...)
	case "helm":
		return b.measure(ctx, b.helmUpgrade(ns, values, []string{"--wait", "--timeout", budget.String()}, set...))
	default:
		return b.measure(ctx, b.vllmctlDeploy(ns, values, set...))
	}
}

// fresh runs fn in a fresh namespace and deletes it afterwards.
func (b *bench) fresh(ctx context.Context, prefix string, fn func(ns string) (run, error)) (run, error) {
	ns, err := b.namespace(ctx, prefix)
	if err != nil {
		return run{}, err
	}
	r, err := fn(ns)
	if derr := b.deleteNamespace(ctx, ns); derr != nil && err == nil {
		err = derr
	}
	return r, err
}

// deployResult is the part of vllmctl's result document checked here.
type deployResult struct {
	Revision     int    `json:"revision"`
	Status       string `json:"status"`
	RolledBackTo int    `json:"rolledBackTo"`
}

func parseResult(out []byte) (deployResult, error) {
	var d deployResult
	if err := json.Unmarshal(out, &d); err != nil {
		return d, fmt.Errorf("vllmctl result document: %w: %s", err, tail(out, 5))
	}
	return d, nil
}

// healthy: scenario 1.
func (b *bench) healthy(ctx context.Context) error {
	values := b.file("values.yaml")
	s := newScenario("healthy-upgrade",
		"upgrade of a 3-replica release to a new image tag (1 GPU, ready delay 2s, maxSurge 1/maxUnavailable 0); "+
			"kubectl = apply --server-side + rollout status, helm = upgrade --install --wait",
		"vllmctl", "kubectl", "helm")
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "up-"+tool, func(ns string) (run, error) {
					if err := b.install(ctx, tool, ns, values); err != nil {
						return run{}, err
					}
					r, err := b.upgrade(ctx, tool, ns, values, "image.tag="+newTag)
					if err == nil {
						err = b.rolledOut(ctx, ns, newTag)
					}
					return r, err
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)

	// vllmctl alone: a 1-replica rollout taking 10 s vs 60 s (the ready
	// delay of the new pod).
	s = newScenario("vllmctl-rollout-duration",
		"vllmctl deploy of a 1-replica upgrade whose new pod is Ready after 10 s vs 60 s: requests against rollout time",
		"rollout-10s", "rollout-60s")
	runs := b.o.runs
	if b.o.quick {
		runs = 1
	}
	for i := 1; i <= runs; i++ {
		for _, tool := range s.tools {
			delay := strings.TrimPrefix(tool, "rollout-")
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "dur", func(ns string) (run, error) {
					if err := b.install(ctx, "vllmctl", ns, values, "replicaCount=1", setDelay+"1s"); err != nil {
						return run{}, err
					}
					r, err := b.upgrade(ctx, "vllmctl", ns, values, "replicaCount=1", setDelay+delay, "image.tag="+newTag)
					if err == nil {
						err = b.rolledOut(ctx, ns, newTag)
					}
					return r, err
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)

	// vllmctl alone: the healthy upgrade at revision 2 vs revision 20 (18
	// cheap upgrades first, changing a Service annotation: no rollout).
	s = newScenario("vllmctl-revision",
		"vllmctl deploy of the healthy upgrade as revision 2 vs revision 20 (history-max 10): requests against history length",
		"revision-2", "revision-20")
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			want, _ := strconv.Atoi(strings.TrimPrefix(tool, "revision-"))
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "rev", func(ns string) (run, error) {
					if err := b.install(ctx, "vllmctl", ns, values); err != nil {
						return run{}, err
					}
					for rev := 2; rev < want; rev++ {
						if err := b.setup(ctx, b.vllmctlDeploy(ns, values, fmt.Sprintf("service.annotations.bench\\.vllmctl\\.io/rev=r%d", rev))); err != nil {
							return run{}, err
						}
					}
					// The measured upgrade keeps the last Service annotation.
					set := []string{"image.tag=" + newTag}
					if want > 2 {
						set = append(set, fmt.Sprintf("service.annotations.bench\\.vllmctl\\.io/rev=r%d", want-1))
					}
					r, err := b.upgrade(ctx, "vllmctl", ns, values, set...)
					if err != nil {
						return r, err
					}
					d, err := parseResult(r.stdout)
					if err == nil && d.Revision != want {
						err = fmt.Errorf("deployed revision %d, want %d", d.Revision, want)
					}
					return r, err
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)
	return nil
}

// failure: scenario 2, a crash-looping and an OOM-killed upgrade.
func (b *bench) failure(ctx context.Context) error {
	values := b.file("values.yaml")
	for _, fault := range []string{"crash", "oom"} {
		tag := newTag + "-" + fault
		s := newScenario(fault+"-upgrade",
			fmt.Sprintf("upgrade of the 3-replica release to image tag %s, start to exit: vllmctl deploy (exit 3, rolled back) "+
				"vs helm upgrade --rollback-on-failure --timeout 60s (one run)", tag),
			"vllmctl", "helm")
		for i := 1; i <= b.o.runs; i++ {
			for _, tool := range s.tools {
				if tool == "helm" && i > 1 {
					continue
				}
				r, err := b.attempt(ctx, s.name, func() (run, error) {
					return b.fresh(ctx, fault+"-"+tool, func(ns string) (run, error) {
						if err := b.install(ctx, tool, ns, values); err != nil {
							return run{}, err
						}
						var r run
						var err error
						if tool == "helm" {
							// Helm exits 1 after its timeout and rollback.
							r, err = b.measure(ctx, b.helmUpgrade(ns, values,
								[]string{"--rollback-on-failure", "--timeout", "60s"}, "image.tag="+tag).expect(1))
						} else {
							r, err = b.measure(ctx, b.vllmctlDeploy(ns, values, "image.tag="+tag).expect(3))
							if err == nil {
								var d deployResult
								if d, err = parseResult(r.stdout); err == nil && d.RolledBackTo != 1 {
									err = fmt.Errorf("rolled back to revision %d, want 1", d.RolledBackTo)
								}
							}
						}
						if err == nil {
							err = b.rolledOut(ctx, ns, goodTag)
						}
						return r, err
					})
				})
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.add(s, tool, r, err)
			}
		}
		b.finish(s)
	}
	return nil
}

// diffAndConfigMap: scenario 3.
func (b *bench) diffAndConfigMap(ctx context.Context) error {
	values := b.file("values.yaml")
	s := newScenario("diff-unchanged",
		"diff of an unchanged 3-replica release: vllmctl diff vs kubectl diff --server-side (of the vllmctl template output)",
		"vllmctl", "kubectl")
	nsV, err := b.namespace(ctx, "diff-vllmctl")
	if err != nil {
		return err
	}
	nsK, err := b.namespace(ctx, "diff-kubectl")
	if err != nil {
		return err
	}
	if err := b.install(ctx, "vllmctl", nsV, values); err != nil {
		return err
	}
	if err := b.install(ctx, "kubectl", nsK, values); err != nil {
		return err
	}
	rendered, err := b.render(ctx, nsK, values)
	if err != nil {
		return err
	}
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				if tool == "kubectl" {
					return b.measure(ctx, cmd(b.o.kubectl, "diff", "--server-side", "--field-manager", "kubectl", "-n", nsK, "-f", rendered))
				}
				return b.measure(ctx, cmd(b.o.vllmctl, "diff", release, b.o.chart, "-n", nsV, "-f", values))
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)
	for _, ns := range []string{nsV, nsK} {
		if err := b.deleteNamespace(ctx, ns); err != nil {
			return err
		}
	}

	chart := b.file("cm")
	s = newScenario("configmap-install",
		"install of a one-ConfigMap chart in a fresh namespace: vllmctl deploy vs helm install", "vllmctl", "helm")
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "cm-"+tool, func(ns string) (run, error) {
					if tool == "helm" {
						return b.measure(ctx, cmd(b.o.helm, "install", "cm", chart, "-n", ns))
					}
					return b.measure(ctx, cmd(b.o.vllmctl, "deploy", "cm", chart, "-n", ns, "-o", "json"))
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)
	return nil
}

// large: scenario 4, 1000 replicas on fake CPU-only nodes.
func (b *bench) large(ctx context.Context) error {
	values := b.file("large.yaml")
	// Room for the replicas and the 25% surge, and some slack.
	perNode := 200
	nodes := (b.o.largeReplicas*5/4)/perNode + 2
	progress("adding %d fake nodes for %d replicas", nodes, b.o.largeReplicas)
	if err := b.addNodes(ctx, "bench-large", b.pool+"-large", nodes, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse(strconv.Itoa(perNode)), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}); err != nil {
		return err
	}
	title := fmt.Sprintf("%d replicas without GPUs (ready delay 1s, maxSurge 25%%/maxUnavailable 0) on %d fake nodes; kubectl = apply --server-side + rollout status",
		b.o.largeReplicas, nodes)
	install := newScenario("large-install", "install of "+title, "vllmctl", "kubectl")
	upgrade := newScenario("large-upgrade", "image tag upgrade of "+title, "vllmctl", "kubectl")
	install.resources, upgrade.resources = true, true
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range install.tools {
			var up run
			var upErr error
			r, err := b.attempt(ctx, install.name, func() (run, error) {
				return b.fresh(ctx, "large-"+tool, func(ns string) (run, error) {
					r, err := b.upgrade(ctx, tool, ns, values)
					if err != nil {
						return r, err
					}
					up, upErr = b.upgrade(ctx, tool, ns, values, "image.tag="+newTag)
					if upErr == nil {
						upErr = b.rolledOut(ctx, ns, newTag)
					}
					return r, nil
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(install, tool, r, err)
			if err == nil {
				b.add(upgrade, tool, up, upErr)
			}
		}
	}
	b.finish(install)
	b.finish(upgrade)
	b.deleteNodes(ctx, b.pool+"-large")
	return nil
}

// manyReleases: scenario 5, list and history in a namespace of 100
// releases.
func (b *bench) manyReleases(ctx context.Context) error {
	const n = 100
	chart := b.file("cm")
	nsV, err := b.namespace(ctx, "rel-vllmctl")
	if err != nil {
		return err
	}
	nsH, err := b.namespace(ctx, "rel-helm")
	if err != nil {
		return err
	}
	progress("installing %d releases with vllmctl and with helm", n)
	// Two installs at a time: setup only.
	jobs := make(chan step)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for s := range jobs {
				if err := b.setup(ctx, s); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("r%03d", i)
		jobs <- cmd(b.o.vllmctl, "deploy", name, chart, "-n", nsV, "-o", "json")
		jobs <- cmd(b.o.helm, "install", name, chart, "-n", nsH)
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	// r050 gets 3 revisions.
	const name = "r050"
	for v := 2; v <= 3; v++ {
		set := fmt.Sprintf("data.greeting=hello-%d", v)
		if err := b.setup(ctx,
			cmd(b.o.vllmctl, "deploy", name, chart, "-n", nsV, "--set", set, "-o", "json"),
			cmd(b.o.helm, "upgrade", name, chart, "-n", nsH, "--set", set),
		); err != nil {
			return err
		}
	}
	for _, sc := range []struct {
		name, title string
		v, h        []string
	}{
		{"list-100-releases", fmt.Sprintf("list the releases of a namespace holding %d: vllmctl list vs helm list", n),
			[]string{b.o.vllmctl, "list", "-n", nsV}, []string{b.o.helm, "list", "-n", nsH}},
		{"history-100-releases", fmt.Sprintf("history of one release (3 revisions) in a namespace holding %d: vllmctl history vs helm history", n),
			[]string{b.o.vllmctl, "history", name, "-n", nsV}, []string{b.o.helm, "history", name, "-n", nsH}},
	} {
		s := newScenario(sc.name, sc.title, "vllmctl", "helm")
		for i := 1; i <= b.o.runs; i++ {
			for _, tool := range s.tools {
				argv := sc.v
				if tool == "helm" {
					argv = sc.h
				}
				r, err := b.attempt(ctx, s.name, func() (run, error) {
					r, err := b.measure(ctx, cmd(argv...))
					if err == nil && bytes.Count(r.stdout, []byte("\n")) < 2 {
						err = fmt.Errorf("%s printed too little:\n%s", strings.Join(shortArgv(argv), " "), r.stdout)
					}
					return r, err
				})
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.add(s, tool, r, err)
			}
		}
		b.finish(s)
	}
	for _, ns := range []string{nsV, nsH} {
		if err := b.deleteNamespace(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}
