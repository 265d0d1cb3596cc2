package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/storage"
)

func labelled(obj *unstructured.Unstructured, release string) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	obj.SetLabels(map[string]string{owner.LabelRelease: release, storage.LabelManagedBy: storage.ManagedByVllmctl})
	return obj
}

func withUID(obj *unstructured.Unstructured, uid string) *unstructured.Unstructured {
	obj.SetUID(types.UID(uid))
	return obj
}

// deletion is one delete the fake cluster received.
type deletion struct {
	ref  string
	opts metav1.DeleteOptions
}

func recordDeletes(c *ssaCluster) *[]deletion {
	var got []deletion
	c.PrependReactor("delete", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		da := action.(k8stesting.DeleteActionImpl)
		got = append(got, deletion{ref: da.GetResource().Resource + " " + da.GetNamespace() + "/" + da.GetName(), opts: da.DeleteOptions})
		if len(da.DeleteOptions.DryRun) > 0 {
			return true, nil, nil
		}
		return false, nil, nil
	})
	return &got
}

func pruneRefs(results []PruneResult) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = r.Object.String() + " " + string(r.Action)
	}
	return out
}

func TestPrune(t *testing.T) {
	live := []runtime.Object{
		withUID(labelled(configMap(applyNS, "kept", nil), "chat"), "u-kept"),
		withUID(labelled(configMap(applyNS, "removed", nil), "chat"), "u-removed"),
		withUID(labelled(deploymentObj(applyNS, "old", 1), "chat"), "u-old"),
		withUID(configMap(applyNS, "adopted", nil), "u-adopted"),                        // labels removed by someone
		withUID(labelled(configMap(applyNS, "other-release", nil), "other"), "u-other"), // another release's
		withUID(labelled(namespaceObj(applyNS), "chat"), "u-ns"),
	}
	previous := []*unstructured.Unstructured{
		namespaceObj(applyNS),
		configMap("", "kept", nil),
		configMap("", "removed", nil),
		configMap("", "adopted", nil),
		configMap("", "other-release", nil),
		configMap("", "vanished", nil),
		deploymentObj("", "old", 1),
	}
	current := []*unstructured.Unstructured{configMap(applyNS, "kept", map[string]any{"new": "data"})}

	t.Run("deletes only what the release still manages", func(t *testing.T) {
		c := newSSACluster(t, live...)
		deletes := recordDeletes(c)
		res, err := NewApplierFromClients(c, applyMapper()).Prune(context.Background(), previous, current,
			PruneOptions{Release: "chat", Namespace: applyNS})
		require.NoError(t, err)
		assert.Equal(t, []string{
			"apps/v1 Deployment llm/old deleted",
			"v1 ConfigMap llm/vanished gone",
			"v1 ConfigMap llm/removed deleted",
			"v1 ConfigMap llm/other-release kept",
			"v1 ConfigMap llm/adopted kept",
			"v1 Namespace llm kept",
		}, pruneRefs(res), "reverse apply order")
		assert.Contains(t, res[3].Reason, "not managed by release chat")
		assert.Contains(t, res[5].Reason, "never pruned")

		require.Len(t, *deletes, 2)
		assert.Equal(t, "deployments llm/old", (*deletes)[0].ref)
		assert.Equal(t, "configmaps llm/removed", (*deletes)[1].ref)
		for _, d := range *deletes {
			assert.Equal(t, metav1.DeletePropagationForeground, *d.opts.PropagationPolicy)
			require.NotNil(t, d.opts.Preconditions)
			assert.NotEmpty(t, *d.opts.Preconditions.UID)
			assert.Empty(t, d.opts.DryRun)
		}
		assert.Equal(t, types.UID("u-old"), *(*deletes)[0].opts.Preconditions.UID)

		for name, gone := range map[string]bool{"removed": true, "kept": false, "adopted": false, "other-release": false} {
			_, err := c.Resource(gvrConfigMaps).Namespace(applyNS).Get(context.Background(), name, metav1.GetOptions{})
			assert.Equal(t, gone, apierrors.IsNotFound(err), "ConfigMap %s deleted: %v", name, gone)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		c := newSSACluster(t, live...)
		deletes := recordDeletes(c)
		res, err := NewApplierFromClients(c, applyMapper()).Prune(context.Background(), previous, current,
			PruneOptions{Release: "chat", Namespace: applyNS, DryRun: true})
		require.NoError(t, err)
		assert.Len(t, res, 6)
		require.Len(t, *deletes, 2)
		assert.Equal(t, []string{metav1.DryRunAll}, (*deletes)[0].opts.DryRun)
		c.get(t, gvrConfigMaps, applyNS, "removed")
	})

	t.Run("several revisions: reverse apply order, newest copy", func(t *testing.T) {
		c := newSSACluster(t, live...)
		deletes := recordDeletes(c)
		oldDeployment := deploymentObj("", "old", 1)
		oldDeployment.SetAPIVersion("apps/v1beta2") // no longer served
		prev := []*unstructured.Unstructured{
			// revision 1, then revision 2, as the engine concatenates them
			oldDeployment, configMap("", "removed", nil),
			configMap("", "removed", nil), deploymentObj("", "old", 1),
		}
		res, err := NewApplierFromClients(c, applyMapper()).Prune(context.Background(), prev, nil,
			PruneOptions{Release: "chat", Namespace: applyNS})
		require.NoError(t, err)
		assert.Equal(t, []string{
			"apps/v1 Deployment llm/old deleted",
			"v1 ConfigMap llm/removed deleted",
		}, pruneRefs(res))
		require.Len(t, *deletes, 2)
	})

	t.Run("identity ignores the version and defaults the namespace", func(t *testing.T) {
		c := newSSACluster(t, live...)
		deletes := recordDeletes(c)
		prev := []*unstructured.Unstructured{configMap(applyNS, "removed", nil)}
		cur := []*unstructured.Unstructured{configMap("", "removed", nil)}
		res, err := NewApplierFromClients(c, applyMapper()).Prune(context.Background(), prev, cur,
			PruneOptions{Release: "chat", Namespace: applyNS})
		require.NoError(t, err)
		assert.Empty(t, res)
		assert.Empty(t, *deletes)
	})

	t.Run("a kind no longer served is gone", func(t *testing.T) {
		c := newSSACluster(t)
		widget := u(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}})
		res, err := NewApplierFromClients(c, applyMapper()).Prune(context.Background(), []*unstructured.Unstructured{widget}, nil,
			PruneOptions{Release: "chat", Namespace: applyNS})
		require.NoError(t, err)
		assert.Equal(t, []string{"example.com/v1 Widget llm/w gone"}, pruneRefs(res))
	})

	t.Run("API errors name the object", func(t *testing.T) {
		c := newSSACluster(t, live...)
		c.PrependReactor("delete", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(gvrConfigMaps.GroupResource(), "removed", errors.New("no"))
		})
		_, err := NewApplierFromClients(c, applyMapper()).Prune(context.Background(),
			[]*unstructured.Unstructured{configMap("", "removed", nil)}, nil, PruneOptions{Release: "chat", Namespace: applyNS})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err))
		assert.Contains(t, err.Error(), "prune v1 ConfigMap llm/removed")
	})

	t.Run("a release name is required", func(t *testing.T) {
		_, err := NewApplierFromClients(newSSACluster(t), applyMapper()).Prune(context.Background(), nil, nil, PruneOptions{})
		require.Error(t, err)
	})
}

func TestParseManifest(t *testing.T) {
	cases := []struct {
		name     string
		manifest string
		want     []string
		wantErr  string
	}{
		{name: "empty", manifest: "", want: nil},
		{name: "stream with empty and comment documents", manifest: `---
# Source: vllm/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: chat
spec:
  ports:
  - port: 8000
---
---
# only a comment
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: chat
  namespace: llm
spec:
  replicas: 2
`, want: []string{"v1 Service chat", "apps/v1 Deployment llm/chat"}},
		{name: "JSON document", manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, want: []string{"v1 ConfigMap c"}},
		{name: "no kind", manifest: "apiVersion: v1\nmetadata:\n  name: x\n", wantErr: "document 1"},
		{name: "bad YAML", manifest: "apiVersion: v1\nkind: ConfigMap\n---\n: : :\n  - [", wantErr: "document 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ParseManifest(tc.manifest)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, o := range objs {
				got = append(got, object.RefOf(o).String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("integers stay integers", func(t *testing.T) {
		objs, err := ParseManifest("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 3\n")
		require.NoError(t, err)
		r, found, err := unstructured.NestedInt64(objs[0].Object, "spec", "replicas")
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, int64(3), r)
	})
}

// A prune result's JSON (uninstall's kept objects) uses the same
// lower-case keys as every other document.
func TestPruneResultJSON(t *testing.T) {
	b, err := json.Marshal(PruneResult{Object: object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "ml", Name: "cfg"}, Action: PruneKept, Reason: "owned by release other"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"object":{"version":"v1","kind":"ConfigMap","namespace":"ml","name":"cfg"},"action":"kept","reason":"owned by release other"}`, string(b))
}

// TestPropagation: deletions are foreground, but a CRD's is background:
// nothing names a CRD as its owner, and a foreground deletion would wait
// for the garbage collector as well.
func TestPropagation(t *testing.T) {
	for _, tc := range []struct {
		ref  object.Ref
		want metav1.DeletionPropagation
	}{
		{object.Ref{Group: "apps", Kind: "Deployment", Namespace: "llm", Name: "chat"}, metav1.DeletePropagationForeground},
		{object.Ref{Kind: "ConfigMap", Namespace: "llm", Name: "c"}, metav1.DeletePropagationForeground},
		{object.Ref{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "isvc.serving.kserve.io"}, metav1.DeletePropagationBackground},
		{object.Ref{Group: "example.com", Kind: "CustomResourceDefinition", Name: "not-a-crd"}, metav1.DeletePropagationForeground},
	} {
		t.Run(tc.ref.String(), func(t *testing.T) {
			assert.Equal(t, tc.want, propagation(tc.ref))
		})
	}
}
