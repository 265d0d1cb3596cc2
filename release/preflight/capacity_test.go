package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// TestUsageLibrary covers what k8s.io/component-helpers/resource adds to
// TestPodRequests, and that the defaulting for it leaves the spec alone.
func TestUsageLibrary(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	tests := []struct {
		name           string
		spec           corev1.PodSpec
		requests, lims map[string]string
	}{
		{name: "init container limits stand for its requests", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "4")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "2")}}},
		}, requests: map[string]string{"nvidia.com/gpu": "4", "pods": "1"}, lims: map[string]string{"nvidia.com/gpu": "4"}},
		{name: "sidecar limits add up", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{RestartPolicy: always, Resources: corev1.ResourceRequirements{Limits: rl("cpu", "1")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: rl("cpu", "2")}}},
		}, requests: map[string]string{"cpu": "3", "pods": "1"}, lims: map[string]string{"cpu": "3"}},
		{name: "overhead on limits only where a limit is set", spec: corev1.PodSpec{Overhead: rl("cpu", "250m", "memory", "64Mi"),
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("memory", "2Gi")}}}},
			requests: map[string]string{"cpu": "1250m", "memory": "1088Mi", "pods": "1"}, lims: map[string]string{"memory": "2112Mi"}},
		{name: "pod-level limits stand for pod-level requests", spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "4", "memory", "8Gi")},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "1")}}}},
			requests: map[string]string{"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1", "pods": "1"}, lims: map[string]string{"cpu": "4", "memory": "8Gi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.spec.DeepCopy()
			u := usageOf(&tt.spec)
			assert.Equal(t, tt.requests, u.requests.strings(), "requests")
			assert.Equal(t, tt.lims, u.limits.strings(), "limits")
			assert.Equal(t, before, &tt.spec, "the spec is not modified")
		})
	}
}
