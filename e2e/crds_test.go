//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
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
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/release"
)

// Issue 15: a chart's crds/ on the local control plane. The CRD is
// cluster-scoped, so the test removes it before and after.

const (
	crdChart = "testdata/charts/crds-demo"
	crdName  = "loraadapters.demo.vllmctl.io"
)

var (
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	loraGVR = schema.GroupVersionResource{Group: "demo.vllmctl.io", Version: "v1", Resource: "loraadapters"}
)

// removeCRD deletes the demo CRD and waits until it is gone.
func removeCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	err := dyn.Resource(crdGVR).Delete(context.Background(), crdName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	eventually(t, 60*time.Second, "CRD "+crdName+" gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// changedCRDChart copies the demo chart with a changed CRD file (an extra
// printer column) and a changed ConfigMap.
func changedCRDChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "crds-demo")
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", crdChart))))
	path := filepath.Join(dir, "crds", "loraadapters.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "      storage: true\n",
		"      storage: true\n      additionalPrinterColumns:\n        - name: Base\n          type: string\n          jsonPath: .spec.baseModel\n", 1)
	require.NotEqual(t, string(data), changed, "the CRD file changed")
	require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
	return dir
}

func TestCRDsCreatedFirstAndNeverChanged(t *testing.T) {
	f := newRelFixture(t)
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	removeCRD(t, dyn)
	t.Cleanup(func() { removeCRD(t, dyn) })
	ctx := context.Background()

	// One deploy: the CRD created first, Established, then the resource.
	r := f.run(t, "deploy", relName, filepath.Join("..", crdChart), "--progress", "plain", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	crdLine := strings.Index(r.stderr, "crds: apiextensions.k8s.io/v1 CustomResourceDefinition "+crdName+": created")
	establishedLine := strings.Index(r.stderr, crdName+": Established")
	resourceLine := strings.Index(r.stderr, "apply: demo.vllmctl.io/v1 LoraAdapter")
	require.GreaterOrEqual(t, crdLine, 0, "the CRD is created\n%s", r.stderr)
	assert.Less(t, crdLine, establishedLine, "then Established")
	assert.Less(t, establishedLine, resourceLine, "then the resource is applied")
	crd, err := dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	lora, err := dyn.Resource(loraGVR).Namespace(f.namespace).Get(ctx, relName+"-adapter", metav1.GetOptions{})
	require.NoError(t, err, "the custom resource exists")
	base, _, _ := unstructured.NestedString(lora.Object, "spec", "baseModel")
	assert.Equal(t, "Qwen/Qwen2.5-7B-Instruct", base)
	revs := f.history(t)
	require.Len(t, revs, 1)
	assert.Equal(t, []string{crdName}, revs[0].CRDs, "the record lists the CRD it created")

	// An upgrade with a changed CRD file leaves the CRD untouched (as Helm).
	r = f.run(t, "deploy", relName, changedCRDChart(t), "--set", "greeting=changed", "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	after, err := dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, crd.GetResourceVersion(), after.GetResourceVersion(), "the CRD is never updated")
	assert.Equal(t, crd.GetGeneration(), after.GetGeneration())
	cols, _, _ := unstructured.NestedSlice(after.Object, "spec", "versions")
	assert.NotContains(t, mustJSON(t, cols), "additionalPrinterColumns")
	assert.Equal(t, "changed", f.configMapData(t, relName+"-config")["greeting"])
	assert.Empty(t, f.history(t)[1].CRDs, "revision 2 created no CRD")

	// Uninstall leaves the CRD and says so.
	r = f.run(t, "uninstall", relName)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout+r.stderr, crdName)
	_, err = dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	assert.NoError(t, err, "the CRD stays after uninstall")
	// Deleted in the foreground: gone, or going once the garbage collector
	// has its finalizer done.
	lora, err = dyn.Resource(loraGVR).Namespace(f.namespace).Get(ctx, relName+"-adapter", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err) || (err == nil && lora.GetDeletionTimestamp() != nil),
		"the release's custom resource is deleted: %v\n%s", err, r)
}

func TestCRDsSkipped(t *testing.T) {
	f := newRelFixture(t)
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	removeCRD(t, dyn)
	t.Cleanup(func() { removeCRD(t, dyn) })

	// --skip-crds without the CRD in the cluster: the LoraAdapter cannot be
	// applied; nothing is created, no CRD either.
	r := f.run(t, "deploy", relName, filepath.Join("..", crdChart), "--skip-crds", "--progress", "plain")
	assert.NotEqual(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "LoraAdapter", "names the kind that cannot be applied")
	_, err = dyn.Resource(crdGVR).Get(context.Background(), crdName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "--skip-crds created no CRD: %v", err)
	for _, rev := range f.history(t) {
		assert.NotEqual(t, release.StatusDeployed, rev.Status)
	}

	// diff and deploy --dry-run create no CRD; diff shows it as a create.
	d := f.run(t, "diff", relName, filepath.Join("..", crdChart))
	assert.Equal(t, 1, d.code, "%s", d)
	assert.Contains(t, d.stdout, crdName)
	dr := f.run(t, "deploy", relName, filepath.Join("..", crdChart), "--dry-run")
	t.Logf("dry run: %s", dr)
	_, err = dyn.Resource(crdGVR).Get(context.Background(), crdName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "diff and --dry-run created no CRD: %v", err)

	// With the CRD in place, --skip-crds works.
	r = f.run(t, "deploy", "other", filepath.Join("..", crdChart), "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	r = f.run(t, "deploy", relName, filepath.Join("..", crdChart), "--skip-crds", "--progress", "plain", "--force-unlock")
	assert.Equal(t, 0, r.code, "%s", r)
	assert.NotContains(t, r.stderr, "CustomResourceDefinition "+crdName+": created")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
