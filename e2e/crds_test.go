//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/release/storage"
)

// A chart's crds/ on the local control plane.

// crdChart is the demo chart: crds/ with the LoraAdapter CRD (group
// demo.vllmctl.io), a LoraAdapter and a ConfigMap.
const crdChart = "testdata/charts/crds-demo"

// crdResource is the resource of CustomResourceDefinitions.
func crdResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
}

// crdDemo is a copy of the demo chart whose API group is the test's own
// (CRDs are cluster-scoped: tests running at the same time on the shared
// cluster never touch each other's), and its CRD, deleted when the test
// ends.
type crdDemo struct {
	dir   string // the chart
	group string
	name  string                      // of the CRD
	gvr   schema.GroupVersionResource // of the LoraAdapters
	dyn   dynamic.Interface
}

func newCRDDemo(t *testing.T, f *relFixture) *crdDemo {
	t.Helper()
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	group := rand.String(6) + ".demo.vllmctl.io"
	c := &crdDemo{group: group, name: "loraadapters." + group, dyn: dyn,
		gvr: schema.GroupVersionResource{Group: group, Version: "v1", Resource: "loraadapters"}}
	c.dir = copyChart(t, filepath.Join("..", crdChart), func(s string) string { return strings.ReplaceAll(s, "demo.vllmctl.io", group) })
	t.Cleanup(func() {
		err := dyn.Resource(crdResource()).Delete(context.Background(), c.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", c.name, err)
		}
	})
	return c
}

// copyChart copies the chart at src to a temporary directory, each file's
// content passed through edit.
func copyChart(t *testing.T, src string, edit func(string) string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "crds-demo")
	require.NoError(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), []byte(edit(string(data))), 0o644)
	}))
	return dir
}

// changed copies the chart with a changed CRD file (an extra printer
// column).
func (c *crdDemo) changed(t *testing.T) string {
	t.Helper()
	edited := false
	dir := copyChart(t, c.dir, func(s string) string {
		if !strings.Contains(s, "kind: CustomResourceDefinition") {
			return s
		}
		edited = true
		return strings.Replace(s, "      storage: true\n",
			"      storage: true\n      additionalPrinterColumns:\n        - name: Base\n          type: string\n          jsonPath: .spec.baseModel\n", 1)
	})
	require.True(t, edited, "the CRD file changed")
	return dir
}

// crd returns the live CRD (nil when absent).
func (c *crdDemo) crd(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	crd, err := c.dyn.Resource(crdResource()).Get(context.Background(), c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return crd
}

// adapter returns the live LoraAdapter name of namespace ns.
func (c *crdDemo) adapter(t *testing.T, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return c.dyn.Resource(c.gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// One deploy creates the CRD first (under the lock), waits until it is
// Established, then applies the LoraAdapter; an upgrade whose CRD file
// changed leaves the live CRD as it is; uninstall leaves it and says so.
func TestCRDsCreatedFirstAndNeverChanged(t *testing.T) {
	f := newRelFixture(t)
	c := newCRDDemo(t, f)
	require.Nil(t, c.crd(t))

	r := f.run(t, "deploy", relName, c.dir, "--progress", "plain", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	at := func(s string) int {
		t.Helper()
		i := strings.Index(r.stderr, s)
		require.GreaterOrEqual(t, i, 0, "%q in\n%s", s, r.stderr)
		return i
	}
	notDryRun := at("crds: not dry-run: " + c.group + "/v1 LoraAdapter " + f.namespace + "/" + relName + "-adapter")
	lock := at("lock: pending-install")
	created := at("crds: apiextensions.k8s.io/v1 CustomResourceDefinition " + c.name + ": created")
	established := at("crds: apiextensions.k8s.io/v1 CustomResourceDefinition " + c.name + ": Established")
	configMap := at("apply: v1 ConfigMap " + f.namespace + "/" + relName + "-config")
	adapter := at("apply: " + c.group + "/v1 LoraAdapter " + f.namespace + "/" + relName + "-adapter: created")
	assert.Less(t, notDryRun, lock, "the custom resource is not dry-run before the lock")
	assert.Less(t, lock, created, "the CRD is created under the lock")
	assert.Less(t, created, established)
	assert.Less(t, established, min(configMap, adapter), "before any other object")
	assert.Equal(t, []string{c.name}, result(t, r).CRDs, "the result lists the CRD created")

	crd := c.crd(t)
	require.NotNil(t, crd)
	lora, err := c.adapter(t, f.namespace, relName+"-adapter")
	require.NoError(t, err, "the custom resource exists")
	base, _, _ := unstructured.NestedString(lora.Object, "spec", "baseModel")
	assert.Equal(t, "Qwen/Qwen2.5-7B-Instruct", base)
	revs := f.history(t)
	require.Len(t, revs, 1)
	assert.Equal(t, []string{c.name}, revs[0].CRDs, "the record lists the CRD it created")

	// An upgrade with a changed CRD file leaves the CRD untouched (as Helm).
	r = f.run(t, "deploy", relName, c.changed(t), "--set", "greeting=changed", "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "crds: exists: left as it is (vllmctl never updates or deletes a CustomResourceDefinition): "+c.name)
	assert.NotContains(t, r.stderr, ": created", "nothing created, the CRD least of all")
	after := c.crd(t)
	require.NotNil(t, after)
	assert.Equal(t, crd.GetResourceVersion(), after.GetResourceVersion(), "the CRD is never updated")
	assert.Equal(t, crd.GetGeneration(), after.GetGeneration())
	assert.Equal(t, crd.Object["spec"], after.Object["spec"])
	assert.NotContains(t, mustJSON(t, after.Object["spec"]), "additionalPrinterColumns")
	assert.Equal(t, "changed", f.configMapData(t, relName+"-config")["greeting"])
	revs = f.history(t)
	require.Len(t, revs, 2)
	assert.Empty(t, revs[1].CRDs, "revision 2 created no CRD")

	// Uninstall leaves the CRD and says so on stderr.
	r = f.run(t, "uninstall", relName, "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "kept: CustomResourceDefinitions are left in place, vllmctl never deletes one")
	assert.Contains(t, r.stderr, c.name)
	assert.Contains(t, r.stdout, "CRDS KEPT: "+c.name)
	assert.NotNil(t, c.crd(t), "the CRD stays after uninstall")
	// Deleted in the foreground: gone, or going once the garbage collector
	// has its finalizer done.
	lora, err = c.adapter(t, f.namespace, relName+"-adapter")
	assert.True(t, apierrors.IsNotFound(err) || (err == nil && lora.GetDeletionTimestamp() != nil),
		"the release's custom resource is deleted: %v\n%s", err, r)
}

// --skip-crds with the CRD absent fails before anything is applied or
// recorded (exit 6, naming the kind); diff and deploy --dry-run create no
// CRD (diff shows it as a create); with the CRD in place --skip-crds works.
func TestCRDsSkippedDiffAndDryRun(t *testing.T) {
	f := newRelFixture(t)
	c := newCRDDemo(t, f)

	r := f.run(t, "deploy", relName, c.dir, "--skip-crds", "--progress", "plain")
	assert.Equal(t, 6, r.code, "%s", r)
	assert.Contains(t, r.stderr, "LoraAdapter")
	assert.Contains(t, r.stderr, "is its CRD installed?")
	assert.Nil(t, c.crd(t), "--skip-crds created no CRD")
	assert.Empty(t, f.history(t), "nothing recorded")

	d := f.run(t, "diff", relName, c.dir)
	assert.Equal(t, 1, d.code, "%s", d)
	assert.Contains(t, d.stdout, "CustomResourceDefinition "+c.name)
	assert.Contains(t, d.stdout, "LoraAdapter "+f.namespace+"/"+relName+"-adapter")
	dr := f.run(t, "deploy", relName, c.dir, "--dry-run", "--progress", "plain")
	assert.Equal(t, 0, dr.code, "%s", dr)
	assert.Contains(t, dr.stdout, "apiextensions.k8s.io/v1 CustomResourceDefinition "+c.name+": created")
	assert.Nil(t, c.crd(t), "diff and --dry-run created no CRD")
	assert.Empty(t, f.history(t), "nothing recorded")

	// Another release creates the CRD; then --skip-crds works.
	r = f.run(t, "deploy", "other", c.dir, "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	require.NotNil(t, c.crd(t))
	r = f.run(t, "deploy", relName, c.dir, "--skip-crds", "--progress", "plain")
	assert.Equal(t, 0, r.code, "%s", r)
	assert.NotContains(t, r.stderr, "crds:", "no CRD read or created")
	_, err := c.adapter(t, f.namespace, relName+"-adapter")
	assert.NoError(t, err)
}

// The least-privilege CI account with clusterrole-crds.yaml bound (and its
// Role extended to the chart's own kind) deploys and uninstalls a chart
// with crds/.
func TestCRDsLeastPrivilege(t *testing.T) {
	f := newRelFixture(t)
	c := newCRDDemo(t, f)
	for _, file := range []string{"role.yaml", "clusterrole.yaml", "clusterrole-crds.yaml", "bindings.yaml"} {
		applyRBAC(t, f, file, f.namespace)
	}
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: "vllmctl-ci", Namespace: f.namespace}
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vllmctl-crds-" + f.namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "vllmctl-crds"},
		Subjects: []rbacv1.Subject{sa}}
	_, err := f.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	// "Add the kinds your own charts render to the Role".
	own := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "vllmctl-loraadapters"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{c.group}, Resources: []string{"loraadapters"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}}}}
	_, err = f.client.RbacV1().Roles(f.namespace).Create(ctx, own, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.client.RbacV1().RoleBindings(f.namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vllmctl-loraadapters"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: own.Name},
		Subjects:   []rbacv1.Subject{sa}}, metav1.CreateOptions{})
	require.NoError(t, err)
	as := "system:serviceaccount:" + f.namespace + ":vllmctl-ci"

	r := f.run(t, "deploy", relName, c.dir, "--progress", "plain", "--as", as)
	require.Equal(t, 0, r.code, "%s", r)
	assert.NotNil(t, c.crd(t))
	r = f.run(t, "uninstall", relName, "--as", as)
	assert.Equal(t, 0, r.code, "%s", r)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestMissingDisabledDependenciesDeploy: a chart whose dependencies are
// declared but not vendored, all disabled by its values (as vLLM's
// production stack ships), deploys with one line per left-out dependency
// on stderr; enabling one is exit 2 naming it, nothing applied.
func TestMissingDisabledDependenciesDeploy(t *testing.T) {
	f := newRelFixture(t)
	chart := filepath.Join("..", "charts", "testdata", "charts", "missingdeps")
	r := f.run(t, "deploy", relName, chart, "--progress", "plain", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "dependency redis 17.3.2 (https://charts.example.com/stable) is not in charts/ and is disabled (condition redis.enabled): rendering without it")
	assert.Equal(t, "api", f.configMapData(t, relName+"-missingdeps")["subcharts"], "only the vendored subchart renders")
	assert.Equal(t, storage.StatusDeployed, result(t, r).Status)

	r = f.run(t, "deploy", relName, chart, "--set", "redis.enabled=true")
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "dependency redis 17.3.2 (https://charts.example.com/stable) is enabled (condition redis.enabled) but not in charts/")
	revs := f.history(t)
	require.Len(t, revs, 1, "no record written")
	assert.Equal(t, storage.StatusDeployed, revs[0].Status)
}
