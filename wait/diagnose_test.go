// Tests of the diagnosis helpers: events, log tails, hints.

package wait

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

func TestFormatEvents(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	events := []*corev1.Event{
		testEvent("e3", "Pod", "p", "u", "Warning", "BackOff", "Back-off restarting failed container", at(3)),
		testEvent("e1", "Pod", "p", "u", "Normal", "Scheduled", "Successfully assigned llm/p to gpu-node-1", at(1)),
		testEvent("e2", "Pod", "p", "u", "Warning", "BackOff", "Back-off restarting failed container", at(2)),
		testEvent("e4", "Pod", "p", "u", "Normal", "Killing", "Stopping container vllm", at(4)),
	}
	assert.Equal(t, []string{
		"Normal Scheduled: Successfully assigned llm/p to gpu-node-1",
		"Warning BackOff: Back-off restarting failed container",
		"Normal Killing: Stopping container vllm",
	}, formatEvents(events, 10), "oldest first, repeats once")
	assert.Equal(t, []string{
		"Warning BackOff: Back-off restarting failed container",
		"Normal Killing: Stopping container vllm",
	}, formatEvents(events, 2), "the most recent")
}

func TestLastLines(t *testing.T) {
	raw := []byte("a\n\nb\r\nc\nd\n")
	assert.Equal(t, []string{"b", "c", "d"}, lastLines(raw, 3))
	assert.Equal(t, []string{"a", "b", "c", "d"}, lastLines(raw, 20))
	assert.Empty(t, lastLines(nil, 20))
}

func TestHints(t *testing.T) {
	gpuPod := podWith()
	gpuPod.Spec.Containers = []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.9.0",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
	cpuPod := podWith()
	cpuPod.Spec.Containers = []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.9.0"}}
	cases := []struct {
		name  string
		d     rollout.Diagnosis
		pod   *corev1.Pod
		cause string
		want  []string
	}{
		{"oom", rollout.Diagnosis{Verdict: rollout.VerdictOOMKilled}, gpuPod, "OOMKilled", []string{"memory limit", "loads the weights", "/dev/shm"}},
		{"crash loop", rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Pod: "p", Container: "vllm", Namespace: "llm"}, gpuPod, "CrashLoopBackOff",
			[]string{"kubectl logs p -c vllm --previous -n llm", "args", "model path"}},
		{"image pull", rollout.Diagnosis{Verdict: rollout.VerdictImagePull, Container: "vllm"}, gpuPod, "ErrImagePull", []string{"vllm/vllm-openai:v0.9.0", "registry credentials"}},
		{"unschedulable GPU", rollout.Diagnosis{Verdict: rollout.VerdictUnschedulable, Namespace: "llm"}, gpuPod, "Unschedulable",
			[]string{"GPU capacity", "taints and tolerations", "kubectl describe quota -n llm"}},
		{"unschedulable GPU by message", rollout.Diagnosis{Verdict: rollout.VerdictUnschedulable, Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}, nil, "Unschedulable",
			[]string{"GPU capacity"}},
		{"unschedulable without GPUs", rollout.Diagnosis{Verdict: rollout.VerdictUnschedulable}, cpuPod, "Unschedulable", []string{"FailedScheduling"}},
		{"config error", rollout.Diagnosis{Verdict: rollout.VerdictContainerError}, gpuPod, "CreateContainerConfigError", []string{"ConfigMap, Secret or key"}},
		{"quota", rollout.Diagnosis{Verdict: rollout.VerdictFailedCreate, Message: "exceeded quota: gpu"}, nil, "FailedCreate", []string{"ResourceQuota"}},
		{"not ready", rollout.Diagnosis{Verdict: rollout.VerdictTimeout}, gpuPod, "ContainersNotReady", []string{"readiness probe"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(hints(&tc.d, tc.pod, tc.cause), "\n")
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
	t.Run("unschedulable without GPUs says nothing of GPUs", func(t *testing.T) {
		assert.NotContains(t, strings.Join(hints(&rollout.Diagnosis{Verdict: rollout.VerdictUnschedulable}, cpuPod, "Unschedulable"), "\n"), "GPU")
	})
}
