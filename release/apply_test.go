package release

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

const applyNS = "llm"

var (
	gvrNamespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrConfigMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrHPAs        = schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	gvrClusterRole = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// applyMapper knows the kinds the apply tests use.
func applyMapper() *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	return m
}

// applyCall is one server-side apply the fake cluster received.
type applyCall struct {
	gvr       schema.GroupVersionResource
	namespace string
	obj       *unstructured.Unstructured
	opts      metav1.PatchOptions
}

// ssaCluster is a dynamic fake with a crude server-side apply: an apply
// stores the applied object (creating it, or replacing it and bumping the
// resourceVersion when its content changed), unless it is a dry run.
// applyErr, when set, may refuse an apply.
type ssaCluster struct {
	*dynamicfake.FakeDynamicClient
	mu       sync.Mutex
	rv       int
	applies  []applyCall
	applyErr func(c applyCall) error
}

func newSSACluster(t *testing.T, objs ...runtime.Object) *ssaCluster {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{
		gvrNamespaces: "NamespaceList", gvrConfigMaps: "ConfigMapList", gvrDeployments: "DeploymentList",
		gvrHPAs: "HorizontalPodAutoscalerList", gvrClusterRole: "ClusterRoleList",
	}
	c := &ssaCluster{FakeDynamicClient: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...), rv: 100}
	c.PrependReactor("patch", "*", c.react)
	c.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca := action.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) > 0 {
			return true, ca.GetObject(), nil // the tracker ignores dry runs
		}
		return false, nil, nil
	})
	return c
}

func (c *ssaCluster) react(action k8stesting.Action) (bool, runtime.Object, error) {
	pa, ok := action.(k8stesting.PatchActionImpl)
	if !ok || pa.GetPatchType() != types.ApplyPatchType {
		return false, nil, nil
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(pa.GetPatch()); err != nil {
		return true, nil, err
	}
	call := applyCall{gvr: pa.GetResource(), namespace: pa.GetNamespace(), obj: obj.DeepCopy(), opts: pa.PatchOptions}
	c.mu.Lock()
	c.applies = append(c.applies, call)
	c.mu.Unlock()
	if c.applyErr != nil {
		if err := c.applyErr(call); err != nil {
			return true, nil, err
		}
	}
	dry := len(pa.PatchOptions.DryRun) > 0
	tr := c.Tracker()
	cur, err := tr.Get(call.gvr, call.namespace, pa.GetName())
	if apierrors.IsNotFound(err) {
		obj.SetResourceVersion(c.nextRV())
		if !dry {
			if err := tr.Create(call.gvr, obj, call.namespace); err != nil {
				return true, nil, err
			}
		}
		return true, obj, nil
	}
	if err != nil {
		return true, nil, err
	}
	live := cur.(*unstructured.Unstructured)
	obj.SetResourceVersion(live.GetResourceVersion())
	obj.SetManagedFields(live.GetManagedFields())
	if apiequality.Semantic.DeepEqual(obj.Object, live.Object) {
		return true, live, nil
	}
	obj.SetResourceVersion(c.nextRV())
	if !dry {
		if err := tr.Update(call.gvr, obj, call.namespace); err != nil {
			return true, nil, err
		}
	}
	return true, obj, nil
}

func (c *ssaCluster) nextRV() string {
	c.rv++
	return strconv.Itoa(c.rv)
}

func (c *ssaCluster) calls() []applyCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]applyCall(nil), c.applies...)
}

func (c *ssaCluster) get(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := c.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return obj
}

func u(obj map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: obj} }

func configMap(ns, name string, data map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return u(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data})
}

func namespaceObj(name string) *unstructured.Unstructured {
	return u(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
}

func deploymentObj(ns, name string, replicas int64) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return u(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0"}}},
			},
		},
	})
}

func hpaObj(ns, name, target string, labels map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	if labels != nil {
		md["labels"] = labels
	}
	return u(map[string]any{
		"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": md,
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
			"minReplicas":    int64(1), "maxReplicas": int64(4),
		},
	})
}

// withReplicasOwner sets managedFields saying manager applied .spec.replicas.
func withReplicasOwner(obj *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{},"f:template":{}}}`)},
	}})
	obj.SetResourceVersion("7")
	return obj
}

func refs(results []ApplyResult) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = r.Object.String() + " " + string(r.Action)
	}
	return out
}

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

func TestApplyHPARule(t *testing.T) {
	release := map[string]any{LabelInstance: "chat", LabelManagedBy: ManagedByVllmctl}
	cases := []struct {
		name string
		live []runtime.Object
		objs []*unstructured.Unstructured
		opts ApplyOptions
		// wantReplicas is the replicas the main apply of web carries
		// (-1: none).
		wantReplicas int64
		// wantHandover is the replicas the handover apply carries (-1: no
		// handover apply).
		wantHandover int64
	}{
		{name: "no HPA keeps replicas", objs: []*unstructured.Unstructured{deploymentObj("", "web", 3)},
			wantReplicas: 3, wantHandover: -1},
		{name: "HPA in the release drops replicas",
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			wantReplicas: -1, wantHandover: -1},
		{name: "live HPA in the namespace drops replicas",
			live:         []runtime.Object{hpaObj(applyNS, "external", "web", nil)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3)},
			wantReplicas: -1, wantHandover: -1},
		{name: "HPA of another Deployment keeps replicas",
			live:         []runtime.Object{hpaObj(applyNS, "other", "api", nil)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "x", "api", nil)},
			wantReplicas: 3, wantHandover: -1},
		{name: "live HPA of this release about to be pruned is ignored",
			live:         []runtime.Object{hpaObj(applyNS, "web", "web", release)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3)},
			opts:         ApplyOptions{Release: "chat"},
			wantReplicas: 3, wantHandover: -1},
		{name: "replicas vllmctl owned are handed over before being dropped",
			live:         []runtime.Object{withReplicasOwner(deploymentObj(applyNS, "web", 5), FieldManager)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			wantReplicas: -1, wantHandover: 5},
		{name: "replicas another manager owns need no handover",
			live:         []runtime.Object{withReplicasOwner(deploymentObj(applyNS, "web", 5), "kube-controller-manager")},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			wantReplicas: -1, wantHandover: -1},
		{name: "dry run predicts the handover without writing it",
			live:         []runtime.Object{withReplicasOwner(deploymentObj(applyNS, "web", 5), FieldManager)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			opts:         ApplyOptions{DryRun: true},
			wantReplicas: 5, wantHandover: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t, tc.live...)
			a := NewApplierFromClients(c, applyMapper())
			tc.opts.Namespace = applyNS
			_, err := a.Apply(context.Background(), tc.objs, tc.opts)
			require.NoError(t, err)

			var main, handover *applyCall
			for i, call := range c.calls() {
				if call.gvr != gvrDeployments {
					continue
				}
				switch call.opts.FieldManager {
				case FieldManager:
					main = &c.calls()[i]
				case FieldManager + HandoverManagerSuffix:
					require.Nil(t, main, "the handover comes before the main apply")
					handover = &c.calls()[i]
				}
			}
			require.NotNil(t, main)
			replicas, found, err := unstructured.NestedInt64(main.obj.Object, "spec", "replicas")
			require.NoError(t, err)
			if tc.wantReplicas < 0 {
				assert.False(t, found, "replicas left out of the apply")
			} else {
				assert.Equal(t, tc.wantReplicas, replicas)
			}
			// The input objects keep their replicas.
			r, _, _ := unstructured.NestedInt64(tc.objs[0].Object, "spec", "replicas")
			assert.Equal(t, int64(3), r)

			if tc.wantHandover < 0 {
				assert.Nil(t, handover, "no handover apply")
				return
			}
			require.NotNil(t, handover)
			got, _, _ := unstructured.NestedInt64(handover.obj.Object, "spec", "replicas")
			assert.Equal(t, tc.wantHandover, got)
			assert.Equal(t, []string{"replicas"}, mapKeys(handover.obj.Object["spec"].(map[string]any)), "the handover applies replicas only")
		})
	}
}

func mapKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func applyConflict(causes ...metav1.StatusCause) error {
	return apierrors.NewApplyConflict(causes, "Apply failed with conflicts")
}

func conflictCause(msg, field string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: msg, Field: field}
}

func TestConflictError(t *testing.T) {
	ref := ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "llm", Name: "web"}
	cases := []struct {
		name string
		err  error
		want []FieldConflict
	}{
		{name: "update manager", err: applyConflict(conflictCause(`conflict with "kubectl-scale" using apps/v1`, ".spec.replicas")),
			want: []FieldConflict{{Manager: "kubectl-scale", Field: ".spec.replicas"}}},
		{name: "subresource with time", err: applyConflict(
			conflictCause(`conflict with "kube-controller-manager" with subresource "scale" using apps/v1 at 2026-03-01T10:00:00Z`, ".spec.replicas"),
			conflictCause(`conflict with "helm"`, `.spec.template.spec.containers[name="vllm"].image`)),
			want: []FieldConflict{
				{Manager: "kube-controller-manager", Subresource: "scale", Field: ".spec.replicas"},
				{Manager: "helm", Field: `.spec.template.spec.containers[name="vllm"].image`},
			}},
		{name: "quoted manager", err: applyConflict(conflictCause(`conflict with "my \"tool\""`, ".data.x")),
			want: []FieldConflict{{Manager: `my "tool"`, Field: ".data.x"}}},
		{name: "wrapped", err: errors.Join(errors.New("context"), applyConflict(conflictCause(`conflict with "a"`, ".x"))),
			want: []FieldConflict{{Manager: "a", Field: ".x"}}},
		{name: "plain conflict is not a field conflict", err: apierrors.NewConflict(schema.GroupResource{Resource: "deployments"}, "web", errors.New("modified"))},
		{name: "not a conflict", err: apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "web", errors.New("no"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ce := conflictError(ref, tc.err)
			if tc.want == nil {
				assert.Nil(t, ce)
				return
			}
			require.NotNil(t, ce)
			assert.Equal(t, tc.want, ce.Conflicts)
			assert.Equal(t, 6, ce.ExitCode())
			assert.ErrorIs(t, ce, tc.err)
			msg := ce.Error()
			assert.Contains(t, msg, "apps/v1 Deployment llm/web")
			assert.Contains(t, msg, "--force-conflicts")
			for _, c := range tc.want {
				assert.Contains(t, msg, strconv.Quote(c.Manager))
				assert.Contains(t, msg, c.Field)
			}
		})
	}
}

func TestApplyConflicts(t *testing.T) {
	scale := applyConflict(conflictCause(`conflict with "kubectl-scale" using apps/v1`, ".spec.replicas"))
	handover := applyConflict(conflictCause(`conflict with "vllmctl-hpa-handover"`, ".spec.replicas"))
	cases := []struct {
		name       string
		refuse     error // returned by the server to unforced applies
		force      bool
		wantErr    bool
		wantForced bool
	}{
		{name: "another manager's field is a conflict", refuse: scale, wantErr: true},
		{name: "force takes it over", refuse: scale, force: true, wantForced: true},
		{name: "our handover manager's field is taken back", refuse: handover, wantForced: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t)
			c.applyErr = func(call applyCall) error {
				if call.gvr == gvrDeployments && !*call.opts.Force {
					return tc.refuse
				}
				return nil
			}
			a := NewApplierFromClients(c, applyMapper())
			objs := []*unstructured.Unstructured{configMap("", "a", nil), deploymentObj("", "web", 2), configMap("", "z", nil)}
			res, err := a.Apply(context.Background(), objs, ApplyOptions{Namespace: applyNS, Force: tc.force})
			if tc.wantErr {
				var ce *FieldConflictError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, []string{"kubectl-scale"}, ce.Managers())
				assert.Equal(t, []string{".spec.replicas"}, ce.Fields())
				assert.Equal(t, "apps/v1 Deployment llm/web", ce.Object.String())
				assert.True(t, apierrors.IsConflict(err), "the API error stays reachable")
				assert.Equal(t, []string{"v1 ConfigMap llm/a created"}, refs(res), "results so far come with the error")
				return
			}
			require.NoError(t, err)
			last := c.calls()[len(c.calls())-2]
			assert.Equal(t, gvrDeployments, last.gvr)
			assert.Equal(t, tc.wantForced, *last.opts.Force)
		})
	}
}

func TestApplyForceOnConflictPreviews(t *testing.T) {
	scale := applyConflict(conflictCause(`conflict with "kubectl-scale" with subresource "scale" using apps/v1`, ".spec.replicas"))
	cases := []struct {
		name         string
		opts         ApplyOptions
		wantErr      bool
		wantConflict bool
	}{
		{name: "dry run: forced again, conflict reported", opts: ApplyOptions{DryRun: true, ForceOnConflict: true}, wantConflict: true},
		{name: "without the option the conflict is an error", opts: ApplyOptions{DryRun: true}, wantErr: true},
		{name: "never outside a dry run", opts: ApplyOptions{ForceOnConflict: true}, wantErr: true},
		{name: "with --force-conflicts there is nothing to report", opts: ApplyOptions{DryRun: true, ForceOnConflict: true, Force: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t, withReplicasOwner(deploymentObj(applyNS, "web", 3), "kubectl-scale"))
			c.applyErr = func(call applyCall) error {
				if call.gvr == gvrDeployments && !*call.opts.Force {
					return scale
				}
				return nil
			}
			a := NewApplierFromClients(c, applyMapper())
			opts := tc.opts
			opts.Namespace = applyNS
			res, err := a.Apply(context.Background(), []*unstructured.Unstructured{deploymentObj("", "web", 2), configMap("", "z", nil)}, opts)
			if tc.wantErr {
				var ce *FieldConflictError
				require.ErrorAs(t, err, &ce)
				return
			}
			require.NoError(t, err)
			require.Len(t, res, 2)
			assert.Nil(t, res[1].Conflict)
			if !tc.wantConflict {
				assert.Nil(t, res[0].Conflict)
				return
			}
			require.NotNil(t, res[0].Conflict)
			assert.Equal(t, []FieldConflict{{Manager: "kubectl-scale", Subresource: "scale", Field: ".spec.replicas"}}, res[0].Conflict.Conflicts)
			assert.Equal(t, ActionConfigured, res[0].Action)
			replicas, _, _ := unstructured.NestedInt64(res[0].Live.Object, "spec", "replicas")
			assert.Equal(t, int64(2), replicas, "the forced dry run's outcome")
			assert.Equal(t, int64(3), func() int64 {
				r, _, _ := unstructured.NestedInt64(c.get(t, gvrDeployments, applyNS, "web").Object, "spec", "replicas")
				return r
			}(), "nothing written")
			for _, call := range c.calls() {
				assert.NotEmpty(t, call.opts.DryRun, "only dry runs")
			}
		})
	}
}

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

func TestOwnsField(t *testing.T) {
	d := withReplicasOwner(deploymentObj(applyNS, "web", 1), FieldManager)
	assert.True(t, ownsField(d, FieldManager, "spec", "replicas"))
	assert.True(t, ownsField(d, FieldManager, "spec", "template"))
	assert.False(t, ownsField(d, FieldManager, "spec", "selector"))
	assert.False(t, ownsField(d, "other", "spec", "replicas"))
	mf := d.GetManagedFields()
	mf[0].Operation = metav1.ManagedFieldsOperationUpdate
	d.SetManagedFields(mf)
	assert.False(t, ownsField(d, FieldManager, "spec", "replicas"), "an update is not an apply")
}

func TestObjectRefString(t *testing.T) {
	cases := []struct {
		ref  ObjectRef
		want string
	}{
		{ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}, "apps/v1 Deployment ns/web"},
		{ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c"}, "v1 ConfigMap ns/c"},
		{ObjectRef{Version: "v1", Kind: "Namespace", Name: "ns"}, "v1 Namespace ns"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) { assert.Equal(t, tc.want, tc.ref.String()) })
	}
}
