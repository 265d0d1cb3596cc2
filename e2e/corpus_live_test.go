//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/testregistry"
)

// The corpus's live comparison: the public charts of
// charts/testdata/corpus that use .Capabilities.APIVersions or lookup,
// installed by Helm into cluster A and deployed by vllmctl into cluster B
// (the same namespace and release names; two clusters so that their
// cluster-scoped objects do not collide), both clusters serving the CRDs
// of corpusLiveCRDs. Value files of corpusLiveValues switch the gated
// features on.
const (
	corpusLiveDir    = "../charts/testdata/corpus"
	corpusLiveValues = "testdata/corpus-live-values"
	corpusLiveCRDs   = "testdata/corpus-crds"
)

// corpusLiveCase is one chart of the live comparison.
type corpusLiveCase struct {
	chart string
	// gated are the objects ("apiVersion Kind name") whose presence (or,
	// for an APIService, apiVersion) follows the cluster's API versions:
	// both releases must hold them.
	gated []string
	// refusal, when set, is the reason both tools refuse the chart (a text
	// both error messages hold).
	refusal string
	// alone: the chart runs before the others, not beside them. The
	// prometheus chart's subcharts (kube-state-metrics,
	// prometheus-node-exporter) make the same cluster-scoped objects, of
	// the same names under the release "cl", as those charts do: beside
	// them, whichever installs second is refused (both tools refuse to
	// take over another release's ClusterRole).
	alone bool
}

// Some of these releases hold cluster-scoped objects of fixed names
// (kserve-crd-minimal's CRDs, prometheus-adapter's APIService
// v1beta1.custom.metrics.k8s.io and ClusterRoles): one run of this test at
// a time per pair of clusters. prometheus-adapter's APIService points at
// a simulated pod, so while it exists discovery reports
// custom.metrics.k8s.io as unavailable (both tools render without it, with
// a warning, as Helm does); the subtest deletes it when it ends.

// corpusLiveCases are the corpus charts that use .Capabilities.APIVersions
// or lookup (grep -rlE 'Capabilities.APIVersions|lookup '
// charts/testdata/corpus), each with what it gates. The release is
// "cl" (short: names derive from it).
var corpusLiveCases = []corpusLiveCase{
	// autoscaling/v2 or v2beta2 for the HPA (v2 is also among the offline
	// defaults, so this one is gated in form only).
	{chart: "ingress-nginx", gated: []string{
		"autoscaling/v2 HorizontalPodAutoscaler cl-ingress-nginx-controller",
		"monitoring.coreos.com/v1 ServiceMonitor cl-ingress-nginx-controller",
		"monitoring.coreos.com/v1 PrometheusRule cl-ingress-nginx-controller",
	}},
	// lookup of its own CRD clusterstoragecontainers.serving.kserve.io:
	// rendered unless it exists with another release's
	// meta.helm.sh/release-name (corpusLiveForeignCRD covers that case).
	{chart: "kserve-crd-minimal", gated: []string{
		"apiextensions.k8s.io/v1 CustomResourceDefinition clusterstoragecontainers.serving.kserve.io",
	}},
	// autoscaling.k8s.io/v1: the VerticalPodAutoscaler.
	{chart: "kube-state-metrics", gated: []string{
		"autoscaling.k8s.io/v1 VerticalPodAutoscaler cl-kube-state-metrics",
		"monitoring.coreos.com/v1 ServiceMonitor cl-kube-state-metrics",
	}},
	// apiregistration.k8s.io/v1 or v1beta1 for the APIService (offline:
	// v1beta1, which no current cluster serves).
	{chart: "prometheus-adapter", gated: []string{
		"apiregistration.k8s.io/v1 APIService v1beta1.custom.metrics.k8s.io",
	}},
	{chart: "prometheus-blackbox-exporter", gated: []string{
		"autoscaling.k8s.io/v1 VerticalPodAutoscaler cl-prometheus-blackbox-exporter",
		"monitoring.coreos.com/v1 ServiceMonitor cl-prometheus-blackbox-exporter",
		"monitoring.coreos.com/v1 PrometheusRule cl-prometheus-blackbox-exporter",
	}},
	{chart: "prometheus-node-exporter", gated: []string{
		"autoscaling.k8s.io/v1 VerticalPodAutoscaler cl-prometheus-node-exporter",
		"monitoring.coreos.com/v1 ServiceMonitor cl-prometheus-node-exporter",
		"monitoring.coreos.com/v1 PodMonitor cl-prometheus-node-exporter",
	}},
	// monitoring.coreos.com/v1: the ServiceMonitor; rbac.authorization.k8s.io/v1
	// or v1beta1 for the Role and RoleBinding.
	{chart: "prometheus-redis-exporter", gated: []string{
		"monitoring.coreos.com/v1 ServiceMonitor cl-prometheus-redis-exporter",
		"rbac.authorization.k8s.io/v1 Role cl-prometheus-redis-exporter",
		"monitoring.coreos.com/v1 PrometheusRule cl-prometheus-redis-exporter",
	}},
	// autoscaling.k8s.io/v1 in its subcharts kube-state-metrics and
	// prometheus-node-exporter (the server's own VPA is not gated).
	{chart: "prometheus", alone: true, gated: []string{
		"autoscaling.k8s.io/v1 VerticalPodAutoscaler cl-kube-state-metrics",
		"autoscaling.k8s.io/v1 VerticalPodAutoscaler cl-prometheus-node-exporter",
		"autoscaling.k8s.io/v1 VerticalPodAutoscaler cl-prometheus-server-vpa",
	}},
}

const corpusLiveRelease = "cl"

// corpusCluster is one of the two clusters: a kubeconfig file whose
// current context is the cluster, and its clients.
type corpusCluster struct {
	name       string
	kubeconfig string
	cfg        *rest.Config
	client     kubernetes.Interface
	dynamic    dynamic.Interface
	mapper     meta.RESTMapper
}

func newCorpusCluster(t *testing.T, name, kubeconfig string) *corpusCluster {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err, "load kubeconfig %s", kubeconfig)
	cfg.QPS, cfg.Burst = 100, 200
	c := &corpusCluster{name: name, kubeconfig: kubeconfig, cfg: cfg}
	c.client, err = kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	c.dynamic, err = dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return c
}

// clusterBKubeconfig writes a kubeconfig whose current context is local-b of the
// fleet kubeconfig (cluster B).
func clusterBKubeconfig(t *testing.T) string {
	t.Helper()
	path := os.Getenv("VLLMCTL_E2E_FLEET_KUBECONFIG")
	if path == "" {
		skipOrFail(t, "VLLMCTL_E2E_FLEET_KUBECONFIG is not set: run make e2e (it starts the second local cluster)")
	}
	cfg, err := clientcmd.LoadFromFile(path)
	require.NoError(t, err)
	require.Contains(t, cfg.Contexts, "local-b", "context local-b of %s", path)
	cfg.CurrentContext = "local-b"
	out := filepath.Join(t.TempDir(), "kubeconfig-b")
	require.NoError(t, clientcmd.WriteToFile(*cfg, out))
	return out
}

// TestCorpusLive renders, for each corpus chart that uses
// .Capabilities.APIVersions or lookup (corpusLiveCases), the chart live
// both ways, with its corpusLiveValues file switching the gated features
// on: `helm install` (no --wait) into cluster A and `vllmctl deploy` into
// cluster B, the same namespace and release, both clusters serving the
// CRDs of corpusLiveCRDs (VerticalPodAutoscaler, ServiceMonitor,
// PodMonitor, PrometheusRule; created if missing, never deleted). Then:
//
//   - `helm get manifest` (A) and `vllmctl get manifest` (B), parsed, are
//     the same objects field for field, vllmctl's own keys aside
//     (corpusLiveComparable), and hold the case's gated objects (with the
//     offline defaults most would be absent, or of another apiVersion);
//   - on A, `vllmctl adopt` of the Helm release, `vllmctl diff` with the
//     same chart and values (exit 0: no change) and `vllmctl deploy` with
//     them change nothing: exit 0, nothing pruned or created, every
//     object of the release the same (UID; resourceVersion, or generation
//     for the kinds whose status controllers update; ConfigMap and Secret
//     data byte for byte).
//
// kserve-crd-minimal's lookup is also run against a CRD owned by another
// release (corpusLiveForeignCRD). Each chart is a parallel subtest (but
// the ones that run alone, first: see corpusLiveCase.alone) and
// uninstalls its releases (with their cluster-scoped objects) when it
// ends.
func TestCorpusLive(t *testing.T) {
	_, helmBin := testregistry.Bins(t)
	a := newCorpusCluster(t, "A", os.Getenv("VLLMCTL_E2E_KUBECONFIG"))
	b := newCorpusCluster(t, "B", clusterBKubeconfig(t))
	for _, c := range []*corpusCluster{a, b} {
		ensureCRDs(t, &env{cfg: c.cfg, client: c.client}, corpusLiveCRDs)
	}
	bin, err := relBinary()
	require.NoError(t, err)
	start := time.Now()
	t.Run("charts", func(t *testing.T) {
		for _, tc := range corpusLiveCases {
			t.Run(tc.chart, func(t *testing.T) {
				if !tc.alone {
					// Parallel subtests wait for the loop to end: the
					// charts that run alone go first, their cleanup done.
					t.Parallel()
				}
				runCorpusLive(t, a, b, bin, helmBin, tc)
			})
		}
	})
	t.Logf("the charts took %s", time.Since(start).Round(time.Second))
}

// corpusLivePair is one chart's namespace on both clusters and the tools.
type corpusLivePair struct {
	a, b      *corpusCluster
	bin, helm string
	home      string
	namespace string
	chartDir  string
	values    []string // -f flags
}

func runCorpusLive(t *testing.T, a, b *corpusCluster, bin, helmBin string, tc corpusLiveCase) {
	chartDir, err := filepath.Abs(filepath.Join(corpusLiveDir, tc.chart))
	require.NoError(t, err)
	p := &corpusLivePair{a: a, b: b, bin: bin, helm: helmBin, home: t.TempDir(), chartDir: chartDir,
		namespace: corpusLiveNamespace(t, a, b, tc.chart)}
	if vf, err := filepath.Abs(filepath.Join(corpusLiveValues, tc.chart+".yaml")); err == nil {
		if _, err := os.Stat(vf); err == nil {
			p.values = []string{"-f", vf}
		}
	}
	rel := corpusLiveRelease
	p.cleanup(t, rel)

	helmOut, helmErr := p.helmRun("install", rel, chartDir, "-n", p.namespace, "--timeout", "2m")
	ours := p.vllmctl(t, b, append([]string{"deploy", rel, chartDir, "--progress", "plain", "--timeout", "2m"}, p.values...)...)
	if tc.refusal != "" || helmErr != nil || ours.code != exitcode.OK {
		require.NotEmpty(t, tc.refusal, "only one tool, or both unexpectedly, refuse the chart\nhelm: %v\n%s\nvllmctl: %s", helmErr, helmOut, ours)
		require.Error(t, helmErr, "helm installs what vllmctl refuses")
		assert.NotEqual(t, exitcode.OK, ours.code, "vllmctl deploys what helm refuses")
		assert.Contains(t, helmOut, tc.refusal, "helm's reason")
		assert.Contains(t, ours.stdout+ours.stderr, tc.refusal, "vllmctl's reason")
		return
	}

	helmManifest, err := p.helmRun("get", "manifest", rel, "-n", p.namespace)
	require.NoError(t, err, "%s", helmManifest)
	got := p.vllmctl(t, b, "get", "manifest", rel)
	require.Equal(t, exitcode.OK, got.code, "%s", got)
	theirs, objs := parseManifest(t, helmManifest), parseManifest(t, got.stdout)
	compareLiveObjects(t, theirs, objs)
	t.Logf("%d objects compared: %s", len(theirs), strings.Join(sortedKeys(theirs), ", "))
	for _, g := range tc.gated {
		if _, ok := theirs[g]; !ok {
			t.Errorf("%s: not in helm's release (gated object)", g)
		}
		if _, ok := objs[g]; !ok {
			t.Errorf("%s: not in vllmctl's release: it was not rendered for the cluster's API versions", g)
		}
	}

	// Adopt the Helm release on A, then the same chart and values change
	// nothing.
	r := p.vllmctl(t, a, "adopt", rel)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	before := p.liveState(t, a, theirs)
	d := p.vllmctl(t, a, append([]string{"diff", rel, chartDir}, p.values...)...)
	assert.Equal(t, exitcode.OK, d.code, "diff after adopt reports no change\n%s", d)
	r = p.vllmctl(t, a, append([]string{"deploy", rel, chartDir, "--progress", "plain", "--timeout", "2m"}, p.values...)...)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	out := r.stdout + r.stderr
	for _, bad := range []string{"PRUNED", "prune:", ": created", ": configured"} {
		if strings.Contains(out, bad) {
			t.Errorf("the deploy after adopt says %q: it should change nothing", bad)
		}
	}
	if !strings.Contains(out, "is up to date") {
		t.Errorf("the deploy after adopt does not say the release is up to date (nothing to change, no new revision)")
	}
	if t.Failed() {
		t.Logf("the deploy after adopt:\n%s", r)
	}
	after := p.liveState(t, a, theirs)
	assert.Equal(t, before, after, "the deploy after adopt changes no object\n%s", r)

	if tc.chart == "kserve-crd-minimal" {
		// The CRDs are cluster-scoped: the next releases make them again
		// once these are gone. They are uninstalled once the API server
		// serves their resources (crdsServed).
		crdsServed(t, []*corpusCluster{a, b}, theirs)
		p.uninstall(t, rel)
		if !crdsGone(t, []*corpusCluster{a, b}, theirs) {
			return
		}
		corpusLiveForeignCRD(t, p)
	}
}

// crdsServed waits up to a minute until the API server serves the
// resources of every CRD among objs on clusters from its watch cache (a
// list at resourceVersion 0 succeeds). A CRD deleted before that, within
// a second or so of its creation on a young cluster, can stay being
// deleted for minutes: the API server's CRD finalizer
// (apiextensions-apiserver, pkg/controller/finalizer) fails its first try
// with "could not list instances: storage is (re)initializing", its retry
// a few milliseconds later updates the CRD from its stale informer copy,
// gets a conflict and drops the key, and the informer event that follows
// changes only the Terminating condition, which it does not requeue: the
// CRD waits for the informer's resync. That is the API server's, not the
// uninstall's, and no user deletes a CRD a second after making it.
func crdsServed(t *testing.T, clusters []*corpusCluster, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	for _, c := range clusters {
		for _, k := range sortedKeys(objs) {
			c.crdServed(t, objs[k])
		}
	}
}

// crdServed waits up to a minute until c serves the resources of crd, if
// it is a CRD, from its watch cache (crdsServed).
func (c *corpusCluster) crdServed(t *testing.T, crd *unstructured.Unstructured) {
	t.Helper()
	if crd.GetKind() != "CustomResourceDefinition" {
		return
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if served, _ := vm["served"].(bool); !served {
			continue
		}
		name, _ := vm["name"].(string)
		gvr := schema.GroupVersionResource{Group: group, Version: name, Resource: plural}
		var last error
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, last = c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1})
			return last == nil, nil
		})
		require.NoError(t, err, "%s on %s not served from the watch cache after a minute: %v", gvr, c.name, last)
	}
}

// crdsGone waits up to 3 minutes for the CRDs among objs to be gone from
// clusters, after the uninstall deleted them. A CRD the uninstall did not
// delete fails the test. One that the API server has not finished deleting
// (it has a deletionTimestamp) is logged with its finalizers and
// conditions, and crdsGone returns false: the chart's CRDs cannot be made
// again on that cluster yet (see crdsServed for how the API server can
// leave a young CRD so).
func crdsGone(t *testing.T, clusters []*corpusCluster, objs map[string]*unstructured.Unstructured) bool {
	t.Helper()
	gone := true
	for _, c := range clusters {
		for _, k := range sortedKeys(objs) {
			if objs[k].GetKind() != "CustomResourceDefinition" {
				continue
			}
			name := objs[k].GetName()
			err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := c.dynamic.Resource(crdResource()).Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err == nil {
				continue
			}
			// A read of its own: the poll's last one may have been cut
			// short by its deadline.
			live, err := c.dynamic.Resource(crdResource()).Get(context.Background(), name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			require.NoError(t, err, "CRD %s on %s", name, c.name)
			require.NotNil(t, live.GetDeletionTimestamp(), "CRD %s on %s: the uninstall did not delete it", name, c.name)
			conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			t.Logf("CRD %s on %s is still being deleted by the API server after 3m (finalizers %v, conditions %v): the chart's CRDs cannot be made again there, so the foreign-CRD case is not run", name, c.name, live.GetFinalizers(), conds)
			gone = false
		}
	}
	return gone
}

// corpusLiveForeignCRD: kserve-crd-minimal renders its CRD
// clusterstoragecontainers.serving.kserve.io unless lookup finds it
// owned by another release (meta.helm.sh/release-name). With such a CRD
// on both clusters (created here, deleted at the end), neither tool's
// release holds it (offline, lookup finds nothing and it would), and both
// hold the chart's other CRDs alike.
func corpusLiveForeignCRD(t *testing.T, p *corpusLivePair) {
	const name = "clusterstoragecontainers.serving.kserve.io"
	data, err := os.ReadFile(filepath.Join(p.chartDir, "files", "serving.kserve.io_clusterstoragecontainers.yaml"))
	require.NoError(t, err)
	for _, c := range []*corpusCluster{p.a, p.b} {
		crd := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(data, &crd.Object))
		crd.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "someone-else"})
		_, err := c.dynamic.Resource(crdResource()).Create(context.Background(), crd, metav1.CreateOptions{})
		require.NoError(t, err, "CRD %s owned by another release on %s", name, c.name)
		c.crdServed(t, crd)
		t.Cleanup(func() {
			_ = c.dynamic.Resource(crdResource()).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	const rel = "cl2"
	p.cleanup(t, rel)
	out, err := p.helmRun("install", rel, p.chartDir, "-n", p.namespace, "--timeout", "2m")
	require.NoError(t, err, "%s", out)
	r := p.vllmctl(t, p.b, "deploy", rel, p.chartDir, "--progress", "plain", "--timeout", "2m")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	helmManifest, err := p.helmRun("get", "manifest", rel, "-n", p.namespace)
	require.NoError(t, err, "%s", helmManifest)
	got := p.vllmctl(t, p.b, "get", "manifest", rel)
	require.Equal(t, exitcode.OK, got.code, "%s", got)
	theirs, ours := parseManifest(t, helmManifest), parseManifest(t, got.stdout)
	compareLiveObjects(t, theirs, ours)
	key := "apiextensions.k8s.io/v1 CustomResourceDefinition " + name
	assert.NotContains(t, theirs, key, "helm's lookup found it owned by another release")
	assert.NotContains(t, ours, key, "vllmctl's lookup found it owned by another release")
	assert.Contains(t, ours, "apiextensions.k8s.io/v1 CustomResourceDefinition inferenceservices.serving.kserve.io")
}

// corpusLiveNamespace creates a namespace of the same name on both
// clusters, deleted when the test ends.
func corpusLiveNamespace(t *testing.T, a, b *corpusCluster, chart string) string {
	t.Helper()
	ns := fmt.Sprintf("e2e-corpuslive-%s-%s", sanitize(chart), rand.String(5))
	if len(ns) > 63 {
		ns = ns[:63]
	}
	for _, c := range []*corpusCluster{a, b} {
		_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err, "namespace %s on %s", ns, c.name)
		t.Cleanup(func() { _ = c.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		eventually(t, 30*time.Second, "default service account in "+ns+" on "+c.name, func(ctx context.Context) (bool, error) {
			_, err := c.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
	return ns
}

// helmRun runs helm against cluster A.
func (p *corpusLivePair) helmRun(args ...string) (string, error) {
	if args[0] == "install" {
		args = append(args, p.values...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.a.kubeconfig, "HOME="+p.home, "XDG_CONFIG_HOME="+p.home,
		"XDG_CACHE_HOME="+p.home, "XDG_DATA_HOME="+p.home)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// vllmctl runs vllmctl against cluster c in the pair's namespace.
func (p *corpusLivePair) vllmctl(t *testing.T, c *corpusCluster, args ...string) relRun {
	t.Helper()
	f := &relFixture{env: &env{namespace: p.namespace}, bin: p.bin, kubeconfig: c.kubeconfig, home: p.home}
	return f.run(t, args...)
}

// cleanup uninstalls rel from both clusters when the test ends: on A
// with vllmctl once adopted, else with helm; on B with vllmctl. Then
// the cluster-scoped objects the releases held are deleted if still
// there (uninstall deletes them; this is for a test that failed midway).
func (p *corpusLivePair) cleanup(t *testing.T, rel string) {
	var clusterScoped [][2]any // cluster, object
	t.Cleanup(func() {
		for _, c := range []*corpusCluster{p.a, p.b} {
			if out, err := p.manifestOf(t, c, rel); err == nil {
				for _, o := range parseManifest(t, out) {
					if o.GetNamespace() == "" {
						clusterScoped = append(clusterScoped, [2]any{c, o})
					}
				}
			}
		}
		for _, co := range clusterScoped {
			co[0].(*corpusCluster).crdServed(t, co[1].(*unstructured.Unstructured))
		}
		p.uninstall(t, rel)
		for _, co := range clusterScoped {
			c, o := co[0].(*corpusCluster), co[1].(*unstructured.Unstructured)
			m, err := c.mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
			if err != nil || m.Scope.Name() != meta.RESTScopeNameRoot {
				continue
			}
			_ = c.dynamic.Resource(m.Resource).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		}
	})
}

// manifestOf is rel's manifest on c, as vllmctl, else helm, records it.
func (p *corpusLivePair) manifestOf(t *testing.T, c *corpusCluster, rel string) (string, error) {
	if r := p.vllmctl(t, c, "get", "manifest", rel); r.code == exitcode.OK {
		return r.stdout, nil
	}
	if c != p.a {
		return "", errors.New("no release")
	}
	return p.helmRun("get", "manifest", rel, "-n", p.namespace)
}

func (p *corpusLivePair) uninstall(t *testing.T, rel string) {
	for _, c := range []*corpusCluster{p.a, p.b} {
		if r := p.vllmctl(t, c, "uninstall", rel); r.code != exitcode.OK && c == p.a {
			_, _ = p.helmRun("uninstall", rel, "-n", p.namespace, "--timeout", "1m")
		}
	}
}

// parseManifest parses a release's manifest the way Helm's kube client
// reads one (Kubernetes' YAML stream reader, then YAML to JSON) and
// indexes its objects by "apiVersion Kind name" (one namespace).
func parseManifest(t *testing.T, manifest string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &obj))
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		key := u.GetAPIVersion() + " " + u.GetKind() + " " + u.GetName()
		require.NotContains(t, out, key, "duplicate object")
		out[key] = u
	}
	return out
}

// corpusLiveComparable returns copies of Helm's object and vllmctl's
// without vllmctl's own keys, and only those (as charts/corpus_test.go's
// corpusComparable): label app.kubernetes.io/managed-by when vllmctl's
// is "vllmctl" (left out on both sides), label vllmctl.io/release and
// annotation vllmctl.io/release-namespace (left out of vllmctl's). A
// labels or annotations map left empty is removed, on both sides alike.
func corpusLiveComparable(helm, ours *unstructured.Unstructured) (map[string]any, map[string]any) {
	h, o := helm.DeepCopy(), ours.DeepCopy()
	var both []string
	if o.GetLabels()[owner.LabelManagedBy] == owner.ManagedByVllmctl {
		both = []string{owner.LabelManagedBy}
	}
	strip := func(u *unstructured.Unstructured, labels, annotations []string) {
		l, a := u.GetLabels(), u.GetAnnotations()
		for _, k := range labels {
			delete(l, k)
		}
		for _, k := range annotations {
			delete(a, k)
		}
		if len(l) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		} else {
			u.SetLabels(l)
		}
		if len(a) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		} else {
			u.SetAnnotations(a)
		}
	}
	strip(h, both, nil)
	strip(o, append(both, owner.LabelRelease), []string{owner.AnnotationNamespace})
	return h.Object, o.Object
}

// compareLiveObjects asserts that Helm's release and vllmctl's hold the
// same objects, each equal field for field once vllmctl's own keys are
// left out, naming every differing field.
func compareLiveObjects(t *testing.T, theirs, ours map[string]*unstructured.Unstructured) {
	t.Helper()
	for _, k := range sortedKeys(theirs) {
		if _, ok := ours[k]; !ok {
			t.Errorf("%s: in helm's release, not in vllmctl's", k)
		}
	}
	for _, k := range sortedKeys(ours) {
		if _, ok := theirs[k]; !ok {
			t.Errorf("%s: in vllmctl's release, not in helm's", k)
		}
	}
	for _, k := range sortedKeys(theirs) {
		o, ok := ours[k]
		if !ok {
			continue
		}
		h, g := corpusLiveComparable(theirs[k], o)
		if diffs := fieldDiffs("", h, g); len(diffs) > 0 {
			t.Errorf("%s differs from helm's:\n  %s", k, strings.Join(diffs, "\n  "))
		}
	}
	require.NotEmpty(t, theirs, "helm's release holds objects")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fieldDiffs names the fields where helm's value (want) and vllmctl's
// (got) differ.
func fieldDiffs(path string, want, got any) []string {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		var out []string
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			out = append(out, fieldDiffs(path+"."+k, wm[k], gm[k])...)
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []string
		for i := range wl {
			out = append(out, fieldDiffs(fmt.Sprintf("%s[%d]", path, i), wl[i], gl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: helm %s, vllmctl %s", path, short(want), short(got))}
}

func short(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// statusChurn are the kinds whose status a controller of the cluster
// updates by itself (a Deployment's as its pods become ready, an
// APIService's availability): their resourceVersion moves without any
// write of vllmctl's, so their generation (which only spec writes move)
// is compared instead.
var statusChurn = []string{"Deployment", "DaemonSet", "StatefulSet", "HorizontalPodAutoscaler",
	"PodDisruptionBudget", "APIService", "CustomResourceDefinition", "Service"}

// liveObject is what must not change of one live object.
type liveObject struct {
	UID, Version string
	Generation   int64
	Data         string // a ConfigMap's or Secret's data and binaryData, as JSON
}

// liveState reads the objects of the release (keys of objs) on c.
func (p *corpusLivePair) liveState(t *testing.T, c *corpusCluster, objs map[string]*unstructured.Unstructured) map[string]liveObject {
	t.Helper()
	ctx := context.Background()
	out := map[string]liveObject{}
	for _, k := range sortedKeys(objs) {
		o := objs[k]
		gvk := o.GroupVersionKind()
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", k)
		var ri dynamic.ResourceInterface = c.dynamic.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = p.namespace
			}
			ri = c.dynamic.Resource(m.Resource).Namespace(ns)
		}
		live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out[k] = liveObject{UID: "absent"}
			continue
		}
		require.NoError(t, err, "%s", k)
		s := liveObject{UID: string(live.GetUID()), Generation: live.GetGeneration()}
		if !slices.Contains(statusChurn, gvk.Kind) {
			s.Version = live.GetResourceVersion()
		}
		if gvk.Kind == "ConfigMap" || gvk.Kind == "Secret" {
			data, _ := yaml.Marshal([]any{live.Object["data"], live.Object["binaryData"]})
			s.Data = string(data)
		}
		out[k] = s
	}
	return out
}
