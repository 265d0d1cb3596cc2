package preflight

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/vllm"
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
			assert.Contains(t, []int64{500, podPageSize}, opts.Limit, "the page size: the pager's for nodes, podPageSize for pods")
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
			// Two pages of nodes, then two of pods for each node (a list
			// per node), then two of pending pods; with an expired token
			// each ends in a full list.
			per := 2
			if expire {
				per = 3
			}
			require.Len(t, *calls, 4*per)
			for i, c := range *calls {
				switch {
				case i < per:
					assert.Empty(t, c.FieldSelector, "nodes")
				case i < 3*per:
					assert.Regexp(t, "^spec.nodeName=[ab],", c.FieldSelector, "pods, by node")
				default:
					assert.Equal(t, pendingSelector, c.FieldSelector)
				}
			}
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

// pendingSelector selects the unbound pending pods.
const pendingSelector = "spec.nodeName=,status.phase=Pending"

// listsSeen are the list requests a preflight made: how many of each
// resource, each pod list's field selector and each node list's label
// selector.
type listsSeen struct {
	lists         map[string]int
	podSelectors  []string
	nodeSelectors []string
}

// countLists records the list requests in seen and serves them from the
// fake's tracker (which ignores field selectors: the preflight filters
// what it is given).
func countLists(c *fake.Clientset, seen *listsSeen) {
	seen.lists = map[string]int{}
	c.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		seen.lists[a.GetResource().Resource]++
		opts := a.(k8stesting.ListActionImpl).GetListOptions()
		switch a.GetResource().Resource {
		case "pods":
			seen.podSelectors = append(seen.podSelectors, opts.FieldSelector)
		case "nodes":
			seen.nodeSelectors = append(seen.nodeSelectors, opts.LabelSelector)
		}
		return false, nil, nil
	})
}

// TestPodsAreReadOnTheNodesTheReleaseCanUse checks that what the preflight
// reads depends on the nodes the release's pods may go to, not on the
// cluster: nodes without the GPUs a pod requests, or that its nodeSelector
// or taints leave out, and the pods bound to them, cost no request, and
// their pods do not count. Above maxNodeLists candidate nodes one list of
// all pods replaces the per-node lists.
func TestPodsAreReadOnTheNodesTheReleaseCanUse(t *testing.T) {
	cpuOnly := func(n *corev1.Node) { delete(n.Status.Allocatable, vllm.GPUResource) }
	cluster := func(gpuNodes, cpuNodes int) []runtime.Object {
		var objs []runtime.Object
		for i := range gpuNodes {
			name := fmt.Sprintf("gpu-%02d", i)
			objs = append(objs, pfNode(name), pfPod("busy-"+name, name, 4, nil))
		}
		for i := range cpuNodes {
			name := fmt.Sprintf("cpu-%03d", i)
			objs = append(objs, pfNode(name, cpuOnly))
			for j := range 5 {
				objs = append(objs, pfPod(fmt.Sprintf("web-%s-%d", name, j), name, 0, nil, func(p *corev1.Pod) { p.Namespace = "web" }))
			}
		}
		return objs
	}
	run := func(t *testing.T, objs []runtime.Object, rendered ...runtime.Object) (*Report, listsSeen, error) {
		t.Helper()
		var seen listsSeen
		r, err := runPreflight(t, pfCase{cluster: objs, rendered: rendered,
			clientMods: func(c *fake.Clientset) { countLists(c, &seen) }}, SurgePolicyStrict)
		return r, seen, err
	}

	t.Run("the same reads on a cluster 50 times bigger", func(t *testing.T) {
		var got []listsSeen
		for _, cpuNodes := range []int{0, 10, 500} {
			// 3 GPU nodes with 4 free GPUs each: 3 pods of 4 fit, 4 do not.
			_, _, err := run(t, cluster(3, cpuNodes), pfDeploy("chat", 4, 4))
			require.Error(t, err, "%d CPU nodes: their room is no room for a GPU pod", cpuNodes)
			assert.Contains(t, err.Error(), "nvidia.com/gpu: need 16, free 12 on nodes gpu-00, gpu-01, gpu-02")
			_, rd, err := run(t, cluster(3, cpuNodes), pfDeploy("chat", 3, 4))
			require.NoError(t, err)
			got = append(got, rd)
		}
		for _, rd := range got {
			assert.Equal(t, map[string]int{"horizontalpodautoscalers": 1, "nodes": 1, "pods": 4, "resourcequotas": 1}, rd.lists)
			assert.ElementsMatch(t, []string{
				pendingSelector,
				"spec.nodeName=gpu-00,status.phase!=Succeeded,status.phase!=Failed",
				"spec.nodeName=gpu-01,status.phase!=Succeeded,status.phase!=Failed",
				"spec.nodeName=gpu-02,status.phase!=Succeeded,status.phase!=Failed",
			}, rd.podSelectors)
		}
	})

	t.Run("an upgrade reads its own pods once", func(t *testing.T) {
		// 3 GPU nodes of 8 GPUs, each with a busy pod of 4 in the namespace
		// llm, and the live Deployment's 3 old pods of 2 GPUs, one per node:
		// the namespace is listed whole for the old pods, and the lists by
		// node leave it out; its pods still count against their nodes.
		live := pfDeploy("chat", 3, 2)
		objs := append(cluster(3, 10), live)
		objs = append(objs, pfOldPods(live, "gpu-00", "gpu-01", "gpu-02")...)
		r, rd, err := run(t, objs, pfDeploy("chat", 3, 2, image("v2")))
		require.NoError(t, err)
		assert.Equal(t, VerdictFits, r.Deployments[0].Verdict)
		assert.ElementsMatch(t, []string{
			"status.phase!=Succeeded,status.phase!=Failed", // the namespace llm, whole
			pendingSelector,
			"spec.nodeName=gpu-00,metadata.namespace!=llm,status.phase!=Succeeded,status.phase!=Failed",
			"spec.nodeName=gpu-01,metadata.namespace!=llm,status.phase!=Succeeded,status.phase!=Failed",
			"spec.nodeName=gpu-02,metadata.namespace!=llm,status.phase!=Succeeded,status.phase!=Failed",
		}, rd.podSelectors)

		// Each node holds 4 (busy) + 2 (old) of its 8 GPUs, all pods of
		// the namespace llm, taken from its list: a new pod of 3 has no
		// room to surge into (it would have, were either not counted).
		_, _, err = run(t, objs, pfDeploy("chat", 3, 3, image("v2")))
		require.Error(t, err, "the namespace's pods counted against their nodes")
		assert.Contains(t, err.Error(), "at most 2 free on one node")
	})

	t.Run("more candidates than maxNodeLists in an upgrade: its namespace left out of the list of all pods", func(t *testing.T) {
		n := maxNodeLists + 1
		live := pfDeploy("chat", 1, 4)
		objs := append(cluster(n, 10), live)
		objs = append(objs, pfOldPods(live, "gpu-00")...)
		r, rd, err := run(t, objs, pfDeploy("chat", int32(n-1), 4, image("v2")))
		require.NoError(t, err)
		assert.Equal(t, []string{"status.phase!=Succeeded,status.phase!=Failed",
			"metadata.namespace!=llm,status.phase!=Succeeded,status.phase!=Failed", pendingSelector}, rd.podSelectors)
		assert.Len(t, r.Deployments[0].Checks[0].Nodes, n)
		_, _, err = run(t, objs, pfDeploy("chat", int32(n+1), 4, image("v2")))
		require.Error(t, err, "the busy pods (in llm, taken from the namespace's list) were counted")
	})

	t.Run("a nodeSelector narrows the nodes read", func(t *testing.T) {
		objs := cluster(3, 10)
		objs[0].(*corev1.Node).Labels["pool"] = "a100"
		_, rd, err := run(t, objs, pfDeploy("chat", 1, 4, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a100"}
		}))
		require.NoError(t, err)
		assert.Equal(t, []string{"pool=a100"}, rd.nodeSelectors, "the API server filters the nodes")
		assert.Equal(t, []string{"spec.nodeName=gpu-00,status.phase!=Succeeded,status.phase!=Failed", pendingSelector}, rd.podSelectors)
	})

	t.Run("a single required node affinity term narrows the nodes read", func(t *testing.T) {
		objs := cluster(3, 10)
		objs[0].(*corev1.Node).Labels["gpu"] = "h100"
		objs[2].(*corev1.Node).Labels["gpu"] = "a100"
		affinity := func(terms ...corev1.NodeSelectorTerm) func(d *appsv1.Deployment) {
			return func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
			}
		}
		in := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}},
			{Key: "gpu-count", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}, // not a label selector: checked per node
		}}
		_, rd, err := run(t, objs, pfDeploy("chat", 1, 4, affinity(in)))
		require.Error(t, err, "Gt leaves every node out")
		assert.Equal(t, []string{"gpu in (h100)"}, rd.nodeSelectors)
		assert.Empty(t, rd.podSelectors)

		// Two terms are ORed: no label selector says that.
		other := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"a100"}}}}
		in.MatchExpressions = in.MatchExpressions[:1]
		_, rd, err = run(t, objs, pfDeploy("chat", 2, 4, affinity(in, other)))
		require.NoError(t, err)
		assert.Equal(t, []string{""}, rd.nodeSelectors)
		assert.Len(t, rd.podSelectors, 3, "gpu-00 and gpu-02, and the pending pods")
	})

	t.Run("no node has the labels: named in the refusal", func(t *testing.T) {
		_, rd, err := run(t, cluster(3, 10), pfDeploy("chat", 1, 4, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "b200"}
		}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "none of 0 labelled pool=b200; 0 Ready and schedulable")
		assert.Empty(t, rd.podSelectors)
	})

	t.Run("Deployments on a pool and on every node: the pool's nodes are one state", func(t *testing.T) {
		objs := cluster(2, 3)
		objs[0].(*corev1.Node).Labels["pool"] = "a100"
		// gpu-00 has 4 free GPUs: the pool's Deployment takes them, the
		// other finds only gpu-01's 4.
		_, rd, err := run(t, objs,
			pfDeploy("pinned", 1, 4, func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a100"} }),
			pfDeploy("anywhere", 2, 4))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "nvidia.com/gpu: need 8, free 4 on nodes gpu-00, gpu-01")
		assert.Equal(t, []string{"pool=a100", ""}, rd.nodeSelectors)
		assert.Len(t, rd.podSelectors, 3, "each GPU node read once, and the pending pods")
	})

	t.Run("each node is read once for every Deployment", func(t *testing.T) {
		_, rd, err := run(t, cluster(3, 10), pfDeploy("chat", 1, 2), pfDeploy("embed", 1, 1))
		require.NoError(t, err)
		assert.Len(t, rd.podSelectors, 4, "3 nodes and the pending pods")
	})

	t.Run("no node can host a pod: no pod is read", func(t *testing.T) {
		_, rd, err := run(t, cluster(3, 10), pfDeploy("chat", 1, 16))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "one pod needs more than any matching node has allocatable")
		assert.Empty(t, rd.podSelectors)
	})

	t.Run("more candidates than maxNodeLists: one list of all pods", func(t *testing.T) {
		n := maxNodeLists + 1
		r, rd, err := run(t, cluster(n, 10), pfDeploy("chat", int32(n), 4))
		require.NoError(t, err, "every GPU node has room for one pod of 4")
		assert.Equal(t, []string{"status.phase!=Succeeded,status.phase!=Failed", pendingSelector}, rd.podSelectors)
		assert.Len(t, r.Deployments[0].Checks[0].Nodes, n)
		_, _, err = run(t, cluster(n, 10), pfDeploy("chat", int32(n+1), 4))
		require.Error(t, err, "the busy pods were counted")
	})

	t.Run("pods not readable: only quotas", func(t *testing.T) {
		objs := cluster(3, 10)
		c := pfCase{cluster: objs, rendered: []runtime.Object{pfDeploy("chat", 8, 4)}, clientMods: func(c *fake.Clientset) {
			c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetNamespace() == "" {
					return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", fmt.Errorf("no"))
				}
				return false, nil, nil
			})
		}}
		r, err := runPreflight(t, c, SurgePolicyStrict)
		require.NoError(t, err, "node room unknown: not refused")
		assert.Contains(t, strings.Join(r.Notes, "\n"), "pods of all namespaces not readable")
	})
}

// TestPendingPodsThatMayTakeTheRoomAreNamed checks the note on pending
// pods of other workloads that may take the same nodes first: only those
// asking for a scarce resource the release asks for, allowed on one of its
// nodes and small enough for one; never the Deployment's own pods; not
// counted against the room.
func TestPendingPodsThatMayTakeTheRoomAreNamed(t *testing.T) {
	pending := func(name, ns string, gpus int64, mods ...func(*corev1.Pod)) *corev1.Pod {
		return pfPod(name, "", gpus, map[string]string{"app": name}, append([]func(*corev1.Pod){func(p *corev1.Pod) {
			p.Namespace, p.Status.Phase = ns, corev1.PodPending
		}}, mods...)...)
	}
	cluster := []runtime.Object{pfNode("a"), pfNode("b"),
		pending("train-0", "ml", 4),
		pending("train-1", "ml", 4),
		pending("web", "web", 0), // no GPU: competes for nothing scarce
		pending("big", "ml", 16), // larger than any node
		pending("pinned", "ml", 1, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "elsewhere"} }),
		pending("chat-new", pfNS, 1, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "chat"} }), // its own
	}
	r, err := runPreflight(t, pfCase{cluster: cluster, rendered: []runtime.Object{pfDeploy("chat", 2, 1)}}, SurgePolicyStrict)
	require.NoError(t, err, "pending pods are not counted against the room")
	assert.Contains(t, r.Notes, "Deployment chat: 2 pending pod(s) of other workloads may take the same nodes first (ml/train-0, ml/train-1), "+
		"requesting nvidia.com/gpu 8; the scheduler places pods by priority, so the room counted here may go to them")

	r, err = runPreflight(t, pfCase{cluster: cluster[:2], rendered: []runtime.Object{pfDeploy("chat", 2, 1)}}, SurgePolicyStrict)
	require.NoError(t, err)
	for _, n := range r.Notes {
		assert.NotContains(t, n, "pending pod")
	}
}
