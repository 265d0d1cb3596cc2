//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release/preflight"
)

// The GPUs of the local cluster are shared with other tests running at the
// same time, so these tests derive their GPU counts from the live headroom
// and pin their pods to one node (kubernetes.io/hostname), or skip when the
// cluster stays too busy to set their situation up.

// preflightDeployment is a Deployment of replicas pods of gpus GPUs each,
// maxSurge 1 / maxUnavailable 0 like the vllm chart, pinned to node when
// node is not "".
func preflightDeployment(name, image string, replicas int32, gpus int64, node string) *appsv1.Deployment {
	l := map[string]string{"app": name}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: map[string]string{"sim.vllmctl.io/ready-delay": "100ms"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "vllm", Image: image, Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("1")},
						Limits:   corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
					}}},
				},
			},
		},
	}
	if node != "" {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	return d
}

// rendered turns d into what charts.RenderContext hands the preflight.
func rendered(t *testing.T, ns string, d *appsv1.Deployment) []*unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d.DeepCopy())
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetNamespace(ns)
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return []*unstructured.Unstructured{u}
}

// freeGPUs returns the GPUs of each Ready, schedulable, untainted node not
// requested by pods that still hold them. Tainted nodes (the isolated pool)
// are left out: these tests' pods do not tolerate them.
func freeGPUs(ctx context.Context, e *env) (map[string]int64, error) {
	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	free := map[string]int64{}
	for _, n := range nodes.Items {
		q, ok := n.Status.Allocatable[vllm.GPUResource]
		if !ok || n.Spec.Unschedulable || len(n.Spec.Taints) > 0 || !preflightNodeReady(&n) {
			continue
		}
		free[n.Name] = q.Value()
	}
	pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if _, ok := free[p.Spec.NodeName]; !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Requests[vllm.GPUResource]
			free[p.Spec.NodeName] -= q.Value()
		}
	}
	return free, nil
}

func preflightNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitForGPUs waits up to a minute for the emptiest node to have at least
// want GPUs free (total: the cluster), and skips the test when it never
// does: other tests hold the GPUs.
func waitForGPUs(t *testing.T, e *env, want int64, total bool) (node string, free int64) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		byNode, err := freeGPUs(ctx, e)
		if err != nil {
			return false, err
		}
		node, free = "", 0
		var sum int64
		for n, f := range byNode {
			sum += max(f, 0)
			if f > free || (f == free && n < node) {
				node, free = n, f
			}
		}
		if total {
			return sum >= want, nil
		}
		return free >= want, nil
	})
	if err != nil {
		skipOrFail(t, "the shared cluster stayed too busy for this test: wanted %d free GPUs (whole cluster: %v), the emptiest node %q has %d", want, total, node, free)
	}
	return node, free
}

// waitAvailable waits until Deployment name has rolled out and all its
// replicas are available.
func waitAvailable(t *testing.T, e *env, name string) {
	t.Helper()
	eventually(t, 90*time.Second, "Deployment "+name+" available", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.Replicas == want && d.Status.AvailableReplicas == want, nil
	})
}

func gpuCheck(t *testing.T, d preflight.DeploymentPreflight, step string) preflight.CapacityCheck {
	t.Helper()
	for _, c := range d.Checks {
		if c.Step == step && c.Resource == string(vllm.GPUResource) {
			return c
		}
	}
	require.Failf(t, "no GPU check", "step %s in %+v", step, d.Checks)
	return preflight.CapacityCheck{}
}

func preflightError(t *testing.T, err error) *preflight.Error {
	t.Helper()
	var pe *preflight.Error
	require.True(t, errors.As(err, &pe), "a *PreflightError, got %v", err)
	assert.Equal(t, 2, pe.ExitCode())
	return pe
}

// TestPreflightSurgeBlockedOnAFullNode fills the emptiest GPU node with two
// replicas (gpus-per-pod = half its free GPUs, so a surge pod cannot fit),
// then checks a template change under each surge policy.
func TestPreflightSurgeBlockedOnAFullNode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	node, free := waitForGPUs(t, e, 4, false)
	g := free / 2
	live := preflightDeployment("big", "vllm/vllm-openai:v0.9.0", 2, g, node)
	_, err := e.client.AppsV1().Deployments(e.namespace).Create(ctx, live, metav1.CreateOptions{})
	require.NoError(t, err)
	waitAvailable(t, e, "big")
	t.Logf("2 replicas × %d GPUs on %s (%d GPUs were free)", g, node, free)

	t.Run("unchanged template needs nothing", func(t *testing.T) {
		r, err := preflight.Run(ctx, e.client, rendered(t, e.namespace, live), preflight.Options{Namespace: e.namespace, Policy: preflight.SurgePolicyStrict})
		require.NoError(t, err, "the server-side dry run sees the defaulted template as unchanged")
		require.Len(t, r.Deployments, 1)
		assert.Equal(t, preflight.ChangeUnchanged, r.Deployments[0].Change, "notes: %v", r.Notes)
		assert.Empty(t, r.Deployments[0].Checks)
	})

	changed := rendered(t, e.namespace, preflightDeployment("big", "vllm/vllm-openai:v0.9.1", 2, g, node))

	t.Run("strict refuses", func(t *testing.T) {
		r, err := preflight.Run(ctx, e.client, changed, preflight.Options{Namespace: e.namespace, Policy: preflight.SurgePolicyStrict})
		pe := preflightError(t, err)
		t.Log(pe)
		assert.Contains(t, err.Error(), fmt.Sprintf("nvidia.com/gpu: need %d, free ", g))
		assert.Contains(t, err.Error(), "nodes "+node)
		d := r.Deployments[0]
		assert.Equal(t, preflight.VerdictSurgeBlocked, d.Verdict)
		assert.Equal(t, preflight.ChangeChanged, d.Change)
		assert.Nil(t, d.Effective, "strict never changes the strategy")
		c := gpuCheck(t, d, preflight.StepSurge)
		assert.Equal(t, fmt.Sprint(g), c.Needed)
		assert.Equal(t, []string{node}, c.Nodes)
		assert.False(t, c.OK)
		f := resource.MustParse(c.Free)
		assert.Less(t, f.Value(), g, "free GPUs on %s in whole pods", node)
	})

	t.Run("auto replaces one pod at a time", func(t *testing.T) {
		r, err := preflight.Run(ctx, e.client, changed, preflight.Options{Namespace: e.namespace, Policy: preflight.SurgePolicyAuto})
		require.NoError(t, err)
		d := r.Deployments[0]
		require.NotNil(t, d.Effective, "auto adjusts: %s", d.Message)
		assert.True(t, d.Adjusted)
		assert.Equal(t, intstr.FromInt32(0), *d.Effective.MaxSurge)
		assert.Equal(t, intstr.FromInt32(1), *d.Effective.MaxUnavailable)
		assert.Contains(t, r.Description(), "surge policy auto: Deployment big maxSurge 1→0, maxUnavailable 0→1 (nvidia.com/gpu: need")
		require.Len(t, r.Messages(), 1)
		t.Log(r.Messages()[0])

		objs, err := preflight.ApplyOverrides(changed, r)
		require.NoError(t, err)
		ru, _, _ := unstructured.NestedMap(objs[0].Object, "spec", "strategy", "rollingUpdate")
		assert.Equal(t, map[string]any{"maxSurge": int64(0), "maxUnavailable": int64(1)}, ru)
	})

	t.Run("off only reports", func(t *testing.T) {
		r, err := preflight.Run(ctx, e.client, changed, preflight.Options{Namespace: e.namespace, Policy: preflight.SurgePolicyOff})
		require.NoError(t, err)
		assert.Equal(t, preflight.VerdictSurgeBlocked, r.Deployments[0].Verdict)
		assert.False(t, r.Changed())
	})

	t.Run("a pod asking 16 GPUs fails in both modes", func(t *testing.T) {
		huge := rendered(t, e.namespace, preflightDeployment("big", "vllm/vllm-openai:v0.9.1", 2, 16, ""))
		for _, policy := range []preflight.SurgePolicy{preflight.SurgePolicyAuto, preflight.SurgePolicyStrict} {
			r, err := preflight.Run(ctx, e.client, huge, preflight.Options{Namespace: e.namespace, Policy: policy})
			preflightError(t, err)
			assert.Contains(t, err.Error(), "nvidia.com/gpu: need 16, free 8 on allocatable of the largest matching node", "policy %s", policy)
			assert.Equal(t, preflight.VerdictImpossible, r.Deployments[0].Verdict)
		}
	})
}

// TestPreflightRoomForTheSurge: 3 replicas × 1 GPU with room for a surge
// pod: nothing changes.
func TestPreflightRoomForTheSurge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	node, _ := waitForGPUs(t, e, 4, false)
	live := preflightDeployment("small", "vllm/vllm-openai:v0.9.0", 3, 1, node)
	_, err := e.client.AppsV1().Deployments(e.namespace).Create(ctx, live, metav1.CreateOptions{})
	require.NoError(t, err)
	waitAvailable(t, e, "small")

	changed := rendered(t, e.namespace, preflightDeployment("small", "vllm/vllm-openai:v0.9.1", 3, 1, node))
	for _, policy := range []preflight.SurgePolicy{preflight.SurgePolicyAuto, preflight.SurgePolicyStrict} {
		byNode, err := freeGPUs(ctx, e)
		require.NoError(t, err)
		if byNode[node] < 1 {
			skipOrFail(t, "another test took the free GPUs of %s", node)
		}
		r, err := preflight.Run(ctx, e.client, changed, preflight.Options{Namespace: e.namespace, Policy: policy})
		require.NoError(t, err, "policy %s", policy)
		d := r.Deployments[0]
		assert.Equal(t, preflight.VerdictFits, d.Verdict, "policy %s: %s", policy, d.Message)
		assert.Nil(t, d.Effective)
		assert.False(t, r.Changed())
		c := gpuCheck(t, d, preflight.StepSurge)
		assert.Equal(t, "1", c.Needed)
		assert.True(t, c.OK)
	}
}

// TestPreflightQuota: a ResourceQuota of 4 GPUs held by 2 × 2-GPU pods
// leaves no room for a surge pod.
func TestPreflightQuota(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	node, _ := waitForGPUs(t, e, 4, false)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-quota"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")}},
	}
	_, err := e.client.CoreV1().ResourceQuotas(e.namespace).Create(ctx, quota, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "quota status computed", func(ctx context.Context) (bool, error) {
		q, err := e.client.CoreV1().ResourceQuotas(e.namespace).Get(ctx, "gpu-quota", metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) > 0, err
	})
	live := preflightDeployment("q", "vllm/vllm-openai:v0.9.0", 2, 2, node)
	_, err = e.client.AppsV1().Deployments(e.namespace).Create(ctx, live, metav1.CreateOptions{})
	require.NoError(t, err)
	waitAvailable(t, e, "q")
	eventually(t, 30*time.Second, "quota usage 4", func(ctx context.Context) (bool, error) {
		q, err := e.client.CoreV1().ResourceQuotas(e.namespace).Get(ctx, "gpu-quota", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used := q.Status.Used["requests.nvidia.com/gpu"]
		return used.Value() == 4, nil
	})

	changed := rendered(t, e.namespace, preflightDeployment("q", "vllm/vllm-openai:v0.9.1", 2, 2, node))
	r, err := preflight.Run(ctx, e.client, changed, preflight.Options{Namespace: e.namespace, Policy: preflight.SurgePolicyStrict})
	preflightError(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "requests.nvidia.com/gpu: need 2, free 0 on quota gpu-quota (hard 4, used 4; 1 surge pod next to the old ones), short 2")
	assert.Equal(t, preflight.VerdictSurgeBlocked, r.Deployments[0].Verdict)

	r, err = preflight.Run(ctx, e.client, changed, preflight.Options{Namespace: e.namespace, Policy: preflight.SurgePolicyAuto})
	require.NoError(t, err)
	d := r.Deployments[0]
	require.NotNil(t, d.Effective, "auto replaces in place within the quota: %s", d.Message)
	assert.Equal(t, "0", d.Effective.MaxSurge.String())
	assert.Equal(t, "1", d.Effective.MaxUnavailable.String())
}
