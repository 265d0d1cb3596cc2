package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/object"
)

// resettableMapper learns the kinds of later only when reset.
type resettableMapper struct {
	*meta.DefaultRESTMapper
	later  []schema.GroupVersionKind
	resets int
}

func (m *resettableMapper) Reset() {
	m.resets++
	for _, gvk := range m.later {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
}

func TestApplyUnknownKinds(t *testing.T) {
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	obj := u(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}})
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

	t.Run("a stale mapper is reset once", func(t *testing.T) {
		c := newSSACluster(t)
		m := &resettableMapper{DefaultRESTMapper: applyMapper(), later: []schema.GroupVersionKind{widget}}
		a := NewApplierFromClients(c, m)
		res, err := a.Apply(context.Background(), []*unstructured.Unstructured{obj}, ApplyOptions{Namespace: applyNS})
		require.NoError(t, err)
		assert.Equal(t, []string{"example.com/v1 Widget llm/w created"}, refs(res))
		assert.Equal(t, 1, m.resets)
		assert.Equal(t, widgets, c.calls()[0].gvr)
	})
	t.Run("an unknown kind applies nothing", func(t *testing.T) {
		c := newSSACluster(t)
		m := &resettableMapper{DefaultRESTMapper: applyMapper()}
		a := NewApplierFromClients(c, m)
		obj2 := obj.DeepCopy()
		obj2.SetName("w2")
		_, err := a.Apply(context.Background(), []*unstructured.Unstructured{configMap("", "a", nil), obj, obj2}, ApplyOptions{Namespace: applyNS})
		var uk *UnknownKindError
		require.ErrorAs(t, err, &uk)
		assert.Equal(t, 6, uk.ExitCode())
		assert.True(t, meta.IsNoMatchError(err))
		assert.Contains(t, err.Error(), "example.com/v1 Widget w: the cluster does not serve kind Widget")
		assert.Empty(t, c.calls(), "nothing applied")
		assert.Equal(t, 1, m.resets, "reset at most once per operation")
	})
}

func TestObjectRefString(t *testing.T) {
	cases := []struct {
		ref  object.Ref
		want string
	}{
		{object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}, "apps/v1 Deployment ns/web"},
		{object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c"}, "v1 ConfigMap ns/c"},
		{object.Ref{Version: "v1", Kind: "Namespace", Name: "ns"}, "v1 Namespace ns"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) { assert.Equal(t, tc.want, tc.ref.String()) })
	}
}
