package cluster

import (
	"context"
	"strconv"
	"sync"
	"testing"

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
