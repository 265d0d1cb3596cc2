package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// pagedLists serves node and pod lists two items a page, as an API server
// with --limit does; with expire set, the second page's continue token has
// expired and only a full list (no limit) answers.
func pagedLists(t *testing.T, c *fake.Clientset, nodes []corev1.Node, pods []corev1.Pod, expire bool) (calls *[]metav1.ListOptions) {
	calls = &[]metav1.ListOptions{}
	page := func(opts metav1.ListOptions, n int) (lo, hi int, next string, err error) {
		*calls = append(*calls, opts)
		switch {
		case opts.Limit == 0:
			return 0, n, "", nil
		case opts.Continue == "":
			assert.Equal(t, int64(500), opts.Limit, "the pager's page size")
			return 0, min(1, n), "page-2", nil
		case expire:
			return 0, 0, "", apierrors.NewResourceExpired("continue token expired")
		}
		return 1, n, "", nil
	}
	c.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lo, hi, next, err := page(a.(k8stesting.ListActionImpl).GetListOptions(), len(nodes))
		if err != nil {
			return true, nil, err
		}
		return true, &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: next}, Items: nodes[lo:hi]}, nil
	})
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lo, hi, next, err := page(a.(k8stesting.ListActionImpl).GetListOptions(), len(pods))
		if err != nil {
			return true, nil, err
		}
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{Continue: next}, Items: pods[lo:hi]}, nil
	})
	return calls
}

// TestListsArePaged checks that nodes and pods are read over every page
// (k8s.io/client-go/tools/pager), and that an expired continue token falls
// back to a full list.
func TestListsArePaged(t *testing.T) {
	nodes := []corev1.Node{*pfNode("a"), *pfNode("b")}
	pods := []corev1.Pod{*pfPod("x", "a", 8, nil), *pfPod("y", "b", 8, nil)}
	for _, expire := range []bool{false, true} {
		t.Run(map[bool]string{false: "pages", true: "expired"}[expire], func(t *testing.T) {
			var calls *[]metav1.ListOptions
			_, err := runPreflight(t, pfCase{
				rendered:   []runtime.Object{pfDeploy("one", 1, 8)},
				clientMods: func(c *fake.Clientset) { calls = pagedLists(t, c, nodes, pods, expire) },
			}, SurgePolicyStrict)
			// Both nodes are seen, and both are full: had a page been
			// missed, a node would be missing or free.
			require.Error(t, err)
			assert.Contains(t, err.Error(), "nvidia.com/gpu: need 8, free 0 on nodes a, b (1 new pod)")
			want := 4 // two pages of nodes, two of pods
			if expire {
				want = 6 // and a full list of each
			}
			assert.Len(t, *calls, want)
		})
	}
}

// TestCompactPod checks that a listed pod, made small, still counts the
// same: its requests (containers, sidecars, init containers, overhead), the
// quota scopes it falls in, its node, phase and deletion.
func TestCompactPod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "llm", Labels: map[string]string{"app": "chat"}, DeletionTimestamp: &now,
			Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{
			NodeName: "gpu-node-1", PriorityClassName: "high", ActiveDeadlineSeconds: ptr.To[int64](60),
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			InitContainers: []corev1.Container{
				{Name: "fetch", Resources: req("2", "1Gi"), Args: []string{"download"}},
				{Name: "proxy", RestartPolicy: &always, Resources: req("250m", "64Mi")},
			},
			Containers: []corev1.Container{{Name: "vllm", Resources: req("1", "4Gi"),
				Env: []corev1.EnvVar{{Name: "HF_TOKEN", Value: "x"}}, ReadinessProbe: &corev1.Probe{PeriodSeconds: 5}}},
			Volumes: []corev1.Volume{{Name: "shm"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	got := compactPod(pod)
	assert.Equal(t, podRequests(&pod.Spec), podRequests(&got.Spec))
	assert.Equal(t, usageOf(&pod.Spec), usageOf(&got.Spec))
	assert.Equal(t, "gpu-node-1", got.Spec.NodeName)
	assert.Equal(t, "high", got.Spec.PriorityClassName)
	assert.Equal(t, ptr.To[int64](60), got.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, corev1.PodRunning, got.Status.Phase)
	assert.Equal(t, pod.Labels, got.Labels)
	assert.Equal(t, &now, got.DeletionTimestamp)
	assert.Nil(t, got.ManagedFields)
	assert.Nil(t, got.Annotations)
	assert.Nil(t, got.Spec.Volumes)
	assert.Nil(t, got.Spec.Containers[0].Env)
	assert.Nil(t, got.Spec.Containers[0].ReadinessProbe)
	assert.Equal(t, "download", pod.Spec.InitContainers[0].Args[0], "the listed pod is not modified")
}
