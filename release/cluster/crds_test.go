package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// testCRD is the CRD the tests create.
const testCRD = "loraadapters.demo.vllmctl.io"

func testCRDObject(conditions ...any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": testCRD},
		"spec": map[string]any{
			"group": "demo.vllmctl.io", "scope": "Namespaced",
			"names":    map[string]any{"kind": "LoraAdapter", "plural": "loraadapters"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}},
		},
	}}
	if conditions != nil {
		_ = unstructured.SetNestedSlice(o.Object, conditions, "status", "conditions")
	}
	return o
}

func cond(typ, status, reason string) any {
	return map[string]any{"type": typ, "status": status, "reason": reason}
}

// The Applier's CRDClient: create-only (a dry run when asked, never an
// update), a watch of one CRD by name, and discovery asked again for
// kinds it does not know.
func TestApplierCRDClient(t *testing.T) {
	ctx := context.Background()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdResource(): "CustomResourceDefinitionList"})
	var creates []k8stesting.CreateActionImpl
	dyn.PrependReactor("create", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		creates = append(creates, ca)
		if len(ca.CreateOptions.DryRun) > 0 {
			return true, ca.GetObject(), nil
		}
		return false, nil, nil
	})
	var watches []k8stesting.WatchActionImpl
	dyn.PrependWatchReactor("customresourcedefinitions", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watches = append(watches, a.(k8stesting.WatchActionImpl))
		return false, nil, nil
	})
	lora := schema.GroupVersionKind{Group: "demo.vllmctl.io", Version: "v1", Kind: "LoraAdapter"}
	mapper := &resettableMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil), later: []schema.GroupVersionKind{lora}}
	a := NewApplierFromClients(dyn, mapper)

	_, err := a.GetCRD(ctx, testCRD)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Contains(t, err.Error(), "get CustomResourceDefinition "+testCRD)

	withStatus := testCRDObject(cond("Established", "True", ""))
	withStatus.SetResourceVersion("7")
	dry, err := a.CreateCRD(ctx, withStatus, true)
	require.NoError(t, err)
	assert.Equal(t, testCRD, dry.GetName())
	_, err = a.GetCRD(ctx, testCRD)
	require.True(t, apierrors.IsNotFound(err), "a dry run persists nothing")

	_, err = a.CreateCRD(ctx, withStatus, false)
	require.NoError(t, err)
	_, err = a.CreateCRD(ctx, testCRDObject(), false)
	require.True(t, apierrors.IsAlreadyExists(err), "never an update: %v", err)
	require.Len(t, creates, 3)
	assert.Equal(t, []string{metav1.DryRunAll}, creates[0].CreateOptions.DryRun)
	assert.Empty(t, creates[1].CreateOptions.DryRun)
	assert.Equal(t, FieldManager, creates[1].CreateOptions.FieldManager)
	sent := creates[1].GetObject().(*unstructured.Unstructured)
	assert.Empty(t, sent.GetResourceVersion(), "server-owned fields are not sent")
	assert.NotContains(t, sent.Object, "status")

	w, err := a.WatchCRD(ctx, testCRD, "7")
	require.NoError(t, err)
	w.Stop()
	require.Len(t, watches, 1)
	assert.Equal(t, "metadata.name="+testCRD, watches[0].WatchRestrictions.Fields.String())
	assert.Equal(t, "7", watches[0].WatchRestrictions.ResourceVersion)

	missing, err := a.MissingKinds(ctx, []schema.GroupVersionKind{lora})
	require.NoError(t, err)
	assert.Empty(t, missing, "mapped once discovery is asked again")
	assert.Equal(t, 1, mapper.resets)
	other := schema.GroupVersionKind{Group: "other.io", Version: "v1", Kind: "Other"}
	missing, err = a.MissingKinds(ctx, []schema.GroupVersionKind{lora, other})
	require.NoError(t, err)
	assert.Equal(t, []schema.GroupVersionKind{other}, missing)
}
