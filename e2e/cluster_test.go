//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func TestClusterNodesAreReadyGPUNodes(t *testing.T) {
	e := newEnv(t)
	nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	gpuNodes := 0
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[gpu]
		if q.Value() == 8 && nodeReady(&n) {
			gpuNodes++
		}
	}
	assert.GreaterOrEqual(t, gpuNodes, 2, "at least 2 Ready nodes with nvidia.com/gpu: 8")
}

func TestClusterIsRealKubernetes(t *testing.T) {
	e := newEnv(t)
	v, err := e.client.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.37.2", v.GitVersion)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deployment(name, image string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "vllm",
						Image: image,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{gpu: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4")},
							Limits:   corev1.ResourceList{gpu: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4")},
						},
					}},
				},
			},
		},
	}
}

func TestDeploymentRollingUpdateMakesNewReplicaSet(t *testing.T) {
	shareCluster(t, 4)
	e := newEnv(t)
	ctx := context.Background()
	deps := e.client.AppsV1().Deployments(e.namespace)
	_, err := deps.Create(ctx, deployment("web", "vllm/vllm-openai:v0.9.0", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	waitRolledOut(t, e, "web")

	d, err := deps.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	d.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.9.1"
	_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitRolledOut(t, e, "web")

	rss, err := e.client.AppsV1().ReplicaSets(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, rss.Items, 2, "an image change makes a second ReplicaSet")
	byRevision := map[string]appsv1.ReplicaSet{}
	for _, rs := range rss.Items {
		byRevision[rs.Annotations["deployment.kubernetes.io/revision"]] = rs
		assert.NotEmpty(t, rs.Labels["pod-template-hash"], "ReplicaSet %s has a pod-template-hash", rs.Name)
	}
	require.Contains(t, byRevision, "1")
	require.Contains(t, byRevision, "2")
	assert.Equal(t, "vllm/vllm-openai:v0.9.1", byRevision["2"].Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int32(2), ptr.Deref(byRevision["2"].Spec.Replicas, -1))
	assert.Equal(t, int32(0), ptr.Deref(byRevision["1"].Spec.Replicas, -1), "old ReplicaSet scaled down")
}

// waitRolledOut waits for kubectl rollout status' success condition.
func waitRolledOut(t *testing.T, e *env, name string) {
	t.Helper()
	eventually(t, 60*time.Second, "deployment "+name+" rolled out", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ObservedGeneration >= d.Generation &&
			d.Status.UpdatedReplicas == want &&
			d.Status.Replicas == want &&
			d.Status.AvailableReplicas == want, nil
	})
}

func TestServerSideApplyRecordsFieldManager(t *testing.T) {
	shareCluster(t, 4)
	e := newEnv(t)
	ctx := context.Background()
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "ssa", "namespace": e.namespace},
		"data":     map[string]any{"model": "meta-llama/Llama-3.1-8B-Instruct"},
	}
	body, err := json.Marshal(cm)
	require.NoError(t, err)
	got, err := e.client.CoreV1().ConfigMaps(e.namespace).Patch(ctx, "ssa", types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: "vllmctl-e2e", Force: ptr.To(false)})
	require.NoError(t, err)
	var found bool
	for _, mf := range got.ManagedFields {
		if mf.Manager == "vllmctl-e2e" {
			found = true
			assert.Equal(t, metav1.ManagedFieldsOperationApply, mf.Operation)
			assert.Contains(t, string(mf.FieldsV1.Raw), `"f:model"`)
		}
	}
	assert.True(t, found, "managedFields name the applying manager: %+v", got.ManagedFields)

	// Another manager changing an owned field conflicts.
	cm["data"] = map[string]any{"model": "other"}
	body, err = json.Marshal(cm)
	require.NoError(t, err)
	_, err = e.client.CoreV1().ConfigMaps(e.namespace).Patch(ctx, "ssa", types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: "someone-else"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "conflict")
}

func pod(name, image string, gpus int64, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "vllm",
				Image: image,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
					Limits:   corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
				},
			}},
		},
	}
}

// TestFaultClasses checks that each fault class of the local cluster
// (docs/local-cluster.md) produces exactly the container statuses it names.
func TestFaultClasses(t *testing.T) {
	shareCluster(t, 4)
	e := newEnv(t)
	ctx := context.Background()
	pods := e.client.CoreV1().Pods(e.namespace)

	t.Run("crash", func(t *testing.T) {
		_, err := pods.Create(ctx, pod("crash", "vllm/vllm-openai:v0.9.0-crash", 1, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		var seenRunning, seenTerminated bool
		var restarts []int32
		eventually(t, 60*time.Second, "crash pod restarts at least 3 times", func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, "crash", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, err
			}
			cs := p.Status.ContainerStatuses[0]
			assert.False(t, cs.Ready, "a crashing container is never ready")
			if cs.State.Running != nil {
				seenRunning = true
			}
			if term := cs.State.Terminated; term != nil {
				seenTerminated = true
				assert.Equal(t, "Error", term.Reason)
				assert.Equal(t, int32(1), term.ExitCode)
			}
			if w := cs.State.Waiting; w != nil {
				assert.Equal(t, "CrashLoopBackOff", w.Reason)
				require.NotNil(t, cs.LastTerminationState.Terminated, "CrashLoopBackOff carries the last termination")
				assert.Equal(t, "Error", cs.LastTerminationState.Terminated.Reason)
				assert.Equal(t, int32(1), cs.LastTerminationState.Terminated.ExitCode)
			}
			if len(restarts) == 0 || restarts[len(restarts)-1] != cs.RestartCount {
				restarts = append(restarts, cs.RestartCount)
			}
			return cs.RestartCount >= 3, nil
		})
		assert.True(t, seenRunning, "container started")
		assert.True(t, seenTerminated || len(restarts) > 1, "container exited")
		assert.IsIncreasing(t, restarts, "restartCount rises")
	})

	t.Run("oom", func(t *testing.T) {
		_, err := pods.Create(ctx, pod("oom", "vllm/vllm-openai:v0.9.0-oom", 1, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 60*time.Second, "oom pod in CrashLoopBackOff with OOMKilled last state and restarts rising", func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, "oom", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, err
			}
			cs := p.Status.ContainerStatuses[0]
			if term := cs.State.Terminated; term != nil {
				assert.Equal(t, "OOMKilled", term.Reason)
				assert.Equal(t, int32(137), term.ExitCode)
			}
			last := cs.LastTerminationState.Terminated
			return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" &&
				last != nil && last.Reason == "OOMKilled" && last.ExitCode == 137 && cs.RestartCount >= 2, nil
		})
	})

	t.Run("pullerr", func(t *testing.T) {
		_, err := pods.Create(ctx, pod("pullerr", "registry.invalid/vllm-pullerr:v1", 1, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		seen := map[string]bool{}
		eventually(t, 60*time.Second, "pullerr pod alternates ErrImagePull and ImagePullBackOff", func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, "pullerr", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, err
			}
			cs := p.Status.ContainerStatuses[0]
			assert.Nil(t, cs.State.Running, "never starts")
			assert.Equal(t, corev1.PodPending, p.Status.Phase)
			if cs.State.Waiting != nil {
				seen[cs.State.Waiting.Reason] = true
			}
			return seen["ErrImagePull"] && seen["ImagePullBackOff"], nil
		})
		assert.Len(t, seen, 2, "only ErrImagePull and ImagePullBackOff: %v", seen)
	})

	t.Run("healthy-with-ready-delay", func(t *testing.T) {
		_, err := pods.Create(ctx, pod("slow", "vllm/vllm-openai:v0.9.0", 1,
			map[string]string{"sim.vllmctl.io/ready-delay": "3s"}), metav1.CreateOptions{})
		require.NoError(t, err)
		var runningUnready bool
		var runningAt, readyAt time.Time
		eventually(t, 60*time.Second, "slow pod becomes Ready", func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, "slow", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, err
			}
			cs := p.Status.ContainerStatuses[0]
			if p.Status.Phase == corev1.PodRunning && !cs.Ready {
				runningUnready = true
				if cs.State.Running != nil {
					runningAt = cs.State.Running.StartedAt.Time
				}
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					readyAt = c.LastTransitionTime.Time
					return true, nil
				}
			}
			return false, nil
		})
		assert.True(t, runningUnready, "Running before Ready")
		// The delay is the simulation's behaviour under test, read from the
		// pod's own timestamps (not a timing of this test).
		assert.GreaterOrEqual(t, readyAt.Sub(runningAt), 2*time.Second, "Ready follows the annotated delay (started %s, ready %s)", runningAt, readyAt)
	})
}

func TestPodAskingTooManyGPUsIsUnschedulable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.client.CoreV1().Pods(e.namespace).Create(ctx, pod("huge", "vllm/vllm-openai:v0.9.0", 16, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "16-GPU pod reported Unschedulable", func(ctx context.Context) (bool, error) {
		p, err := e.client.CoreV1().Pods(e.namespace).Get(ctx, "huge", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				assert.Contains(t, c.Message, "Insufficient nvidia.com/gpu")
				return true, nil
			}
		}
		return false, nil
	})
	p, err := e.client.CoreV1().Pods(e.namespace).Get(ctx, "huge", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Empty(t, p.Spec.NodeName)
}

func TestContainerLogsAreServed(t *testing.T) {
	shareCluster(t, 4)
	e := newEnv(t)
	ctx := context.Background()
	pods := e.client.CoreV1().Pods(e.namespace)
	_, err := pods.Create(ctx, pod("logs", "vllm/vllm-openai:v0.9.0-crash", 1, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "crash pod restarted once", func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, "logs", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, err
		}
		return p.Status.ContainerStatuses[0].RestartCount >= 1, nil
	})
	raw, err := pods.GetLogs("logs", &corev1.PodLogOptions{Container: "vllm", Previous: true, TailLines: ptr.To[int64](20)}).DoRaw(ctx)
	require.NoError(t, err, "logs of the previous container instance")
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	assert.NotEmpty(t, lines)
	assert.Contains(t, string(raw), "Engine core initialization failed", fmt.Sprintf("previous log tail: %q", raw))
}
