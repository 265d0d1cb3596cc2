// Tests of the new pods' phases, the startup warnings, and the progress
// lines of phases and failure causes.

package wait

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

func TestPodPhase(t *testing.T) {
	withStatus := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := chartPod(nil)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
		edit(p)
		return p
	}
	started := metav1.NewTime(t0)
	cases := []struct {
		name    string
		pod     *corev1.Pod
		pulling bool
		want    rollout.PodPhase
	}{
		{"unscheduled", withStatus(func(p *corev1.Pod) { p.Spec.NodeName = "" }), false, rollout.PodPhase{Phase: rollout.PhasePending}},
		{"scheduled", withStatus(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("server", "ContainerCreating", 0, nil)}
		}), false, rollout.PodPhase{Phase: rollout.PhaseScheduled}},
		{"pulling", withStatus(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("server", "ContainerCreating", 0, nil)}
		}), true, rollout.PodPhase{Phase: rollout.PhasePulling}},
		{"init container running", withStatus(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{running("fetch-weights", 0)}
		}), false, rollout.PodPhase{Phase: rollout.PhaseInitializing}},
		{"loading under the startup probe", withStatus(func(p *corev1.Pod) {
			cs := running("server", 0)
			cs.State.Running.StartedAt = started
			cs.Started = ptr.To(false)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		}), false, rollout.PodPhase{Phase: rollout.PhaseLoading, StartupDeadline: t0.Add(30 * time.Minute)}},
		{"started, not ready", withStatus(func(p *corev1.Pod) {
			cs := running("server", 0)
			cs.Started = ptr.To(true)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		}), false, rollout.PodPhase{Phase: rollout.PhaseStarting}},
		{"exited", withStatus(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", State: corev1.ContainerState{Terminated: terminated("Error", 137, "c1")}}}
		}), false, rollout.PodPhase{Phase: rollout.PhaseExited}},
		{"crash loop", withStatus(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(1)}
		}), false, rollout.PodPhase{Phase: "CrashLoopBackOff"}},
		{"ready", withStatus(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), false, rollout.PodPhase{Phase: rollout.PhaseReady}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Pod = tc.pod.Name
			assert.Equal(t, tc.want, podPhase(tc.pod, tc.pulling))
		})
	}
}

func TestPullingPods(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	got := pullingPods([]*corev1.Event{
		testEvent("e1", "Pod", "a", "", "Normal", "Pulling", `Pulling image "vllm/vllm-openai:v0.11.0"`, at(1)),
		testEvent("e2", "Pod", "b", "", "Normal", "Pulling", `Pulling image "vllm/vllm-openai:v0.11.0"`, at(1)),
		testEvent("e3", "Pod", "b", "", "Normal", "Pulled", `Successfully pulled image "vllm/vllm-openai:v0.11.0"`, at(2)),
		testEvent("e4", "Pod", "c", "", "Normal", "Scheduled", "Successfully assigned llm/c to gpu-node-1", at(1)),
	})
	assert.Equal(t, map[string]bool{"a": true}, got)
}

func TestStartupWarnings(t *testing.T) {
	dep := testDeployment("vllm/vllm-openai:v0.11.0")
	dep.Spec.Template.Spec = chartPod(nil).Spec
	dep.Spec.Template.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 30
	obj := toUnstructured(t, dep)

	got := StartupWarnings(objsOf(obj), 10*time.Minute)
	require.Len(t, got, 1)
	assert.Equal(t, "deployment/chat container server: --timeout 10m0s is shorter than the startup probe's budget of 30m0s (failureThreshold 180 × periodSeconds 10 + initialDelaySeconds 0) plus the readiness probe's initial delay of 30s: "+
		"a pod still loading its weights when the timeout passes fails the rollout as Timeout, though the kubelet would let it load; raise --timeout to 30m30s or more, or lower probes.startup.failureThreshold", got[0])
	assert.Empty(t, StartupWarnings(objsOf(obj), 30*time.Minute+30*time.Second), "the budget fits")
	assert.Empty(t, StartupWarnings(objsOf(obj), 0), "no timeout")
	dep.Spec.Template.Spec.Containers[0].StartupProbe = nil
	assert.Empty(t, StartupWarnings(objsOf(toUnstructured(t, dep)), time.Minute), "no startup probe")
}

func objsOf(objs ...*unstructured.Unstructured) []*unstructured.Unstructured { return objs }
