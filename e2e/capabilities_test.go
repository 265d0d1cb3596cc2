//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/testregistry"
	"github.com/vllmctl/vllmctl/release/storage"
)

// capsChart is gated on the cluster's API versions (a ServiceMonitor when
// the cluster serves the kind) and keeps its generated password through
// lookup; capsCRDs holds the CRD it looks for.
const (
	capsChart = "testdata/capschart"
	capsCRDs  = "testdata/capschart-crds"
)

var gvrServiceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// ensureCRDs creates the CRDs of the YAML files in dir that the cluster
// does not have yet (cluster-wide, shared by the tests, never deleted)
// and waits until discovery serves them.
func ensureCRDs(t *testing.T, e *env, dir string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.cfg)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				break
			}
			if obj == nil {
				continue
			}
			crd := &unstructured.Unstructured{Object: obj}
			_, err := dyn.Resource(crdResource()).Create(context.Background(), crd, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, "create CRD %s", crd.GetName())
			}
			group, _, _ := unstructured.NestedString(obj, "spec", "group")
			plural, _, _ := unstructured.NestedString(obj, "spec", "names", "plural")
			versions, _, _ := unstructured.NestedSlice(obj, "spec", "versions")
			version, _ := versions[0].(map[string]any)["name"].(string)
			gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
			eventually(t, time.Minute, "CRD "+crd.GetName()+" served", func(ctx context.Context) (bool, error) {
				_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
				return err == nil, nil
			})
		}
	}
}

// capsState is what must not change when vllmctl takes a Helm release
// over: the Secret's and the ConfigMap's data byte for byte, the
// ServiceMonitor (its UID: not deleted and made again), the Deployment's
// generation, the pods.
type capsState struct {
	secret, configMap map[string]string
	monitorUID        string
	generation        int64
	pods              []string
}

func (f *relFixture) capsState(t *testing.T, rel string) capsState {
	t.Helper()
	ctx := context.Background()
	var s capsState
	sec, err := f.client.CoreV1().Secrets(f.namespace).Get(ctx, rel+"-pw", metav1.GetOptions{})
	require.NoError(t, err)
	s.secret = map[string]string{}
	for k, v := range sec.Data {
		s.secret[k] = string(v)
	}
	cm, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(ctx, rel+"-caps", metav1.GetOptions{})
	require.NoError(t, err)
	s.configMap = cm.Data
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	sm, err := dyn.Resource(gvrServiceMonitors).Namespace(f.namespace).Get(ctx, rel+"-sm", metav1.GetOptions{})
	require.NoError(t, err, "the ServiceMonitor is there")
	s.monitorUID = string(sm.GetUID())
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, rel+"-web", metav1.GetOptions{})
	require.NoError(t, err)
	s.generation = d.Generation
	pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + rel + "-web"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		s.pods = append(s.pods, string(p.UID))
	}
	return s
}

// TestAdoptedReleaseRendersAsHelmUpgrade: a chart gated on the cluster's
// API versions and keeping its password through lookup, installed and
// upgraded by Helm, adopted by vllmctl and deployed with the same chart
// and values: nothing pruned or created, every object as Helm left it, no
// pod restarted; a second deploy too; a deploy that changes the replicas
// keeps the password; `vllmctl diff` before each same-values deploy
// reports no change.
func TestAdoptedReleaseRendersAsHelmUpgrade(t *testing.T) {
	shareCluster(t, 4)
	_, helmBin := testregistry.Bins(t)
	f := newRelFixture(t)
	ensureCRDs(t, f.env, capsCRDs)
	chartDir, err := filepath.Abs(capsChart)
	require.NoError(t, err)
	helm := testregistry.Helm(t, helmBin, []string{"KUBECONFIG=" + f.kubeconfig, "HOME=" + t.TempDir()})
	const rel = "capr"
	helm("", "install", rel, chartDir, "-n", f.namespace, "--wait", "--timeout", "2m")
	helm("", "upgrade", rel, chartDir, "-n", f.namespace, "--wait", "--timeout", "2m")
	before := f.capsState(t, rel)
	assert.Equal(t, "true", before.configMap["serviceMonitorKind"], "Helm saw the CRD")
	require.Len(t, before.pods, 1)

	r := f.run(t, "adopt", rel)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	adopted := f.capsState(t, rel)
	// adopt moves the Deployment's annotations to vllmctl's, which bumps
	// its generation (a Deployment's annotations count); nothing else.
	before.generation = adopted.generation
	assert.Equal(t, before, adopted, "adopt changes nothing else")

	diffNone := func(step string) {
		t.Helper()
		d := f.run(t, "diff", rel, chartDir)
		assert.Equal(t, exitcode.OK, d.code, "%s: diff reports no change\n%s", step, d)
	}
	deploy := func(args ...string) relRun {
		t.Helper()
		return f.run(t, append([]string{"deploy", rel, chartDir, "--progress", "plain", "--timeout", "2m"}, args...)...)
	}

	diffNone("after adopt")
	r = deploy()
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.NotContains(t, r.stdout+r.stderr, "PRUNED")
	assert.NotContains(t, r.stderr, ": created")
	assert.Equal(t, before, f.capsState(t, rel), "the first deploy after adopt changes nothing")
	assert.NotContains(t, r.stdout+r.stderr, before.secret["password"], "the password is never printed")

	diffNone("before the second deploy")
	r = deploy()
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Equal(t, before, f.capsState(t, rel), "nor the second")

	r = deploy("--set", "replicas=2")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	after := f.capsState(t, rel)
	assert.Equal(t, before.secret, after.secret, "the password is kept by lookup")
	assert.Equal(t, before.monitorUID, after.monitorUID)
	revs, err := storage.History(context.Background(), f.store, rel)
	require.NoError(t, err)
	require.Len(t, revs, 3, "Helm's 2 revisions and the upgrade")
	assert.Equal(t, storage.StatusDeployed, revs[len(revs)-1].Status)
	assert.Equal(t, map[string]any{"replicas": float64(2)}, revs[len(revs)-1].Values)
}

// TestDeployRendersForTheCluster: a release vllmctl installs itself sees
// the cluster's API versions (the ServiceMonitor is applied) and keeps
// its password across upgrades; `template` is offline unless asked
// (--dry-run=server, which withholds Secret data), and -a adds versions.
func TestDeployRendersForTheCluster(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ensureCRDs(t, f.env, capsCRDs)
	const rel = "capd"
	r := f.run(t, "deploy", rel, capsChart, "--progress", "plain", "--timeout", "2m")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	first := f.capsState(t, rel)
	assert.Equal(t, "true", first.configMap["serviceMonitorKind"])
	assert.Equal(t, "true", first.configMap["monitoringGroup"])

	r = f.run(t, "deploy", rel, capsChart, "--progress", "plain", "--timeout", "2m", "--set", "replicas=2")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Equal(t, first.secret, f.capsState(t, rel).secret, "the password survives an upgrade")

	off := f.run(t, "template", rel, capsChart)
	require.Equal(t, exitcode.OK, off.code, "%s", off)
	assert.Contains(t, off.stdout, `serviceMonitorKind: "false"`, "template is offline by default")
	assert.NotContains(t, off.stdout, "kind: ServiceMonitor")
	assert.NotContains(t, off.stdout, first.secret["password"])

	withA := f.run(t, "template", rel, capsChart, "-a", "monitoring.coreos.com/v1/ServiceMonitor")
	require.Equal(t, exitcode.OK, withA.code, "%s", withA)
	assert.Contains(t, withA.stdout, "kind: ServiceMonitor")

	srv := f.run(t, "template", rel, capsChart, "--dry-run=server")
	require.Equal(t, exitcode.OK, srv.code, "%s", srv)
	assert.Contains(t, srv.stdout, `serviceMonitorKind: "true"`)
	assert.Contains(t, srv.stdout, "kind: ServiceMonitor")
	assert.Contains(t, srv.stdout, "password: (redacted)")
	assert.NotContains(t, srv.stdout, first.secret["password"], "what lookup read is not printed")

	bad := f.run(t, "template", rel, capsChart, "--dry-run=server", "-a", "x/v1")
	assert.Equal(t, exitcode.Invalid, bad.code, "%s", bad)
}

// TestLookupForbidden: a lookup the deploying identity may not make (a
// ClusterRole, for the namespaced CI account of deploy/rbac) fails the
// render as under Helm: exit 6 naming the template, nothing applied, no
// record. With the rights, the same chart renders what the cluster has.
func TestLookupForbidden(t *testing.T) {
	_, helmBin := testregistry.Bins(t)
	f := newRelFixture(t)
	applyRBAC(t, f, "role.yaml", f.namespace)
	applyRBAC(t, f, "clusterrole.yaml", f.namespace)
	applyRBAC(t, f, "bindings.yaml", f.namespace)
	as := "system:serviceaccount:" + f.namespace + ":vllmctl-ci"
	const chart, rel = "testdata/lookupchart", "lk"

	r := f.run(t, "deploy", rel, chart, "--progress", "plain", "--timeout", "1m", "--as", as)
	assert.Equal(t, exitcode.Cluster, r.code, "%s", r)
	assert.Contains(t, r.stderr, "lookupchart/templates/configmap.yaml")
	assert.Contains(t, r.stderr, "forbidden")
	_, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(context.Background(), rel+"-lookup", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing applied")
	revs, err := f.store.List(context.Background(), rel)
	require.NoError(t, err)
	assert.Empty(t, revs, "no record")
	d := f.run(t, "diff", rel, chart, "--as", as)
	assert.Equal(t, exitcode.Cluster, d.code, "%s", d)

	// Helm, as the same account, refuses the same render.
	chartDir, err := filepath.Abs(chart)
	require.NoError(t, err)
	out := helmFails(t, helmBin, f.kubeconfig, "install", rel, chartDir, "-n", f.namespace, "--kube-as-user", as)
	assert.Contains(t, out, "forbidden")

	r = f.run(t, "deploy", rel, chart, "--progress", "plain", "--timeout", "1m")
	require.Equal(t, exitcode.OK, r.code, "with the rights: %s", r)
	cm, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(context.Background(), rel+"-lookup", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", cm.Data["adminExists"], "the cluster's ClusterRole admin was found")
}

// TestPostRendererDeploy: a deploy through a post-renderer applies what it
// printed, with vllmctl's ownership keys, and records it (path and args,
// shown by status; the post-rendered manifest by get manifest); diff
// through the same post-renderer reports no change, without it the
// change; a failing one is exit 2 with nothing applied and no record
// changed.
func TestPostRendererDeploy(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ensureCRDs(t, f.env, capsCRDs)
	dir := t.TempDir()
	good := filepath.Join(dir, "label.sh")
	require.NoError(t, os.WriteFile(good, []byte("#!/bin/sh\nsed \"s/name: \\(.*\\)-caps$/name: \\1-caps\\n  labels: {post-rendered: \\\"$1\\\"}/\"\n"), 0o755))
	bad := filepath.Join(dir, "fail.sh")
	require.NoError(t, os.WriteFile(bad, []byte("#!/bin/sh\ncat >/dev/null\necho broken >&2\nexit 7\n"), 0o755))
	const rel = "cappr"

	r := f.run(t, "deploy", rel, capsChart, "--progress", "plain", "--timeout", "2m", "--post-renderer", good, "--post-renderer-args", "yes")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	cm, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(context.Background(), rel+"-caps", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "yes", cm.Labels["post-rendered"], "what the post-renderer printed is applied")
	assert.Equal(t, "vllmctl", cm.Labels["app.kubernetes.io/managed-by"])
	assert.Equal(t, rel, cm.Labels["vllmctl.io/release"])
	revs, err := storage.History(context.Background(), f.store, rel)
	require.NoError(t, err)
	require.Len(t, revs, 1)
	require.NotNil(t, revs[0].PostRenderer)
	assert.Equal(t, good, revs[0].PostRenderer.Path)
	assert.Equal(t, []string{"yes"}, revs[0].PostRenderer.Args)
	assert.Contains(t, revs[0].Manifest, "post-rendered: \"yes\"")
	st := f.run(t, "status", rel)
	require.Equal(t, exitcode.OK, st.code, "%s", st)
	assert.Contains(t, st.stdout, "POST-RENDERER: "+good+" yes")
	man := f.run(t, "get", "manifest", rel)
	require.Equal(t, exitcode.OK, man.code, "%s", man)
	assert.Contains(t, man.stdout, "post-rendered: \"yes\"", "get manifest: the manifest as post-rendered and applied")
	same := f.run(t, "diff", rel, capsChart, "--post-renderer", good, "--post-renderer-args", "yes")
	assert.Equal(t, exitcode.OK, same.code, "diff through the same post-renderer: no change\n%s", same)
	without := f.run(t, "diff", rel, capsChart)
	assert.Equal(t, exitcode.Changes, without.code, "diff without it: its label would go\n%s", without)
	assert.Contains(t, without.stdout, "post-rendered")

	r = f.run(t, "deploy", rel, capsChart, "--progress", "plain", "--timeout", "2m", "--set", "replicas=2", "--post-renderer", bad)
	assert.Equal(t, exitcode.Invalid, r.code, "%s", r)
	assert.Contains(t, r.stderr, bad)
	assert.Contains(t, r.stderr, "broken")
	after, err := storage.History(context.Background(), f.store, rel)
	require.NoError(t, err)
	assert.Len(t, after, 1, "no record changed")
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), rel+"-web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), *d.Spec.Replicas, "nothing applied")
}
