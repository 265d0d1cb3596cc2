package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestApplyOrderNamespacesAndOptions(t *testing.T) {
	c := newSSACluster(t)
	a := NewApplierFromClients(c, applyMapper())
	clusterRole := u(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "reader", "namespace": "ignored"}})
	objs := []*unstructured.Unstructured{
		configMap("", "config", map[string]any{"a": "1"}),
		clusterRole,
		deploymentObj("other", "web", 2),
		namespaceObj(applyNS),
	}
	res, err := a.Apply(context.Background(), objs, ApplyOptions{Namespace: applyNS})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"v1 Namespace llm created",
		"v1 ConfigMap llm/config created",
		"rbac.authorization.k8s.io/v1 ClusterRole reader created",
		"apps/v1 Deployment other/web created",
	}, refs(res))

	calls := c.calls()
	require.Len(t, calls, 4)
	for i, want := range []struct{ ns, name string }{{"", applyNS}, {applyNS, "config"}, {"", "reader"}, {"other", "web"}} {
		assert.Equal(t, want.ns, calls[i].namespace, "request namespace of call %d", i)
		assert.Equal(t, want.ns, calls[i].obj.GetNamespace(), "body namespace of call %d", i)
		assert.Equal(t, want.name, calls[i].obj.GetName())
		assert.Equal(t, FieldManager, calls[i].opts.FieldManager)
		assert.False(t, *calls[i].opts.Force, "no force without --force-conflicts")
		assert.Empty(t, calls[i].opts.DryRun)
	}
	assert.Empty(t, objs[0].GetNamespace(), "the caller's objects are not modified")
}

func TestApplyActions(t *testing.T) {
	c := newSSACluster(t)
	a := NewApplierFromClients(c, applyMapper())
	ctx := context.Background()
	opts := ApplyOptions{Namespace: applyNS}

	steps := []struct {
		name string
		objs []*unstructured.Unstructured
		opts ApplyOptions
		want []string
	}{
		{"first apply creates", []*unstructured.Unstructured{configMap("", "a", map[string]any{"k": "1"}), configMap("", "b", nil)}, opts,
			[]string{"v1 ConfigMap llm/a created", "v1 ConfigMap llm/b created"}},
		{"same objects are unchanged", []*unstructured.Unstructured{configMap("", "a", map[string]any{"k": "1"}), configMap("", "b", nil)}, opts,
			[]string{"v1 ConfigMap llm/a unchanged", "v1 ConfigMap llm/b unchanged"}},
		{"a change configures", []*unstructured.Unstructured{configMap("", "a", map[string]any{"k": "2"}), configMap("", "b", nil)}, opts,
			[]string{"v1 ConfigMap llm/a configured", "v1 ConfigMap llm/b unchanged"}},
		{"dry run compares content", []*unstructured.Unstructured{configMap("", "a", map[string]any{"k": "3"}), configMap("", "b", nil), configMap("", "c", nil)},
			ApplyOptions{Namespace: applyNS, DryRun: true},
			[]string{"v1 ConfigMap llm/a configured", "v1 ConfigMap llm/b unchanged", "v1 ConfigMap llm/c created"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			res, err := a.Apply(ctx, s.objs, s.opts)
			require.NoError(t, err)
			assert.Equal(t, s.want, refs(res))
		})
	}
	t.Run("dry run persisted nothing", func(t *testing.T) {
		assert.Equal(t, map[string]any{"k": "2"}, c.get(t, gvrConfigMaps, applyNS, "a").Object["data"])
		_, err := c.Resource(gvrConfigMaps).Namespace(applyNS).Get(ctx, "c", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err))
		last := c.calls()[len(c.calls())-1]
		assert.Equal(t, []string{metav1.DryRunAll}, last.opts.DryRun)
	})
}

func TestApplyCreateNamespace(t *testing.T) {
	cases := []struct {
		name        string
		existing    bool
		dryRun      bool
		wantResults []string
		wantApplies int
		unvalidated bool
	}{
		{name: "missing namespace is created", wantResults: []string{"v1 Namespace llm created", "v1 ConfigMap llm/a created"}, wantApplies: 1},
		{name: "existing namespace is left alone", existing: true, wantResults: []string{"v1 ConfigMap llm/a created"}, wantApplies: 1},
		{name: "dry run into a missing namespace", dryRun: true, wantResults: []string{"v1 Namespace llm created", "v1 ConfigMap llm/a created"}, unvalidated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seed []runtime.Object
			if tc.existing {
				seed = append(seed, namespaceObj(applyNS))
			}
			c := newSSACluster(t, seed...)
			a := NewApplierFromClients(c, applyMapper())
			res, err := a.Apply(context.Background(), []*unstructured.Unstructured{configMap("", "a", nil)},
				ApplyOptions{Namespace: applyNS, CreateNamespace: true, DryRun: tc.dryRun})
			require.NoError(t, err)
			assert.Equal(t, tc.wantResults, refs(res))
			assert.Len(t, c.calls(), tc.wantApplies)
			assert.Equal(t, tc.unvalidated, res[len(res)-1].Unvalidated)
			_, err = c.Resource(gvrNamespaces).Get(context.Background(), applyNS, metav1.GetOptions{})
			assert.Equal(t, !tc.dryRun, err == nil, "namespace exists afterwards unless dry run")
		})
	}
}

func TestApplyInvalidInput(t *testing.T) {
	cases := []struct {
		name string
		objs []*unstructured.Unstructured
		opts ApplyOptions
		want string
	}{
		{name: "no kind", objs: []*unstructured.Unstructured{u(map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}})},
			opts: ApplyOptions{Namespace: applyNS}, want: "apiVersion and kind are required"},
		{name: "no name", objs: []*unstructured.Unstructured{configMap("", "", nil)}, opts: ApplyOptions{Namespace: applyNS}, want: "metadata.name is required"},
		{name: "no namespace", objs: []*unstructured.Unstructured{configMap("", "a", nil)}, want: "namespaced object without a namespace"},
		{name: "duplicate", objs: []*unstructured.Unstructured{configMap("", "a", nil), configMap(applyNS, "a", nil)},
			opts: ApplyOptions{Namespace: applyNS}, want: "v1 ConfigMap llm/a: appears more than once"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t)
			_, err := NewApplierFromClients(c, applyMapper()).Apply(context.Background(), tc.objs, tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, c.calls())
		})
	}
}

func TestApplyWrapsAPIErrors(t *testing.T) {
	c := newSSACluster(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("RBAC says no"))
	c.applyErr = func(applyCall) error { return forbidden }
	_, err := NewApplierFromClients(c, applyMapper()).Apply(context.Background(),
		[]*unstructured.Unstructured{configMap("", "a", nil)}, ApplyOptions{Namespace: applyNS})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err))
	assert.Contains(t, err.Error(), "apply v1 ConfigMap llm/a")
	var ce *FieldConflictError
	assert.False(t, errors.As(err, &ce))
}
