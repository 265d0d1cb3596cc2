package wait

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// StartupBudget is the largest startup probe budget plus readiness
// initial delay among the Deployments' containers.
func TestStartupBudget(t *testing.T) {
	slow := testDeployment("vllm/vllm-openai:v0.11.0")
	slow.Spec.Template.Spec = chartPod(nil).Spec // 180 × 10s
	slow.Spec.Template.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 30
	fast := testDeployment("vllm/vllm-openai:v0.11.0")
	fast.Name = "small"
	fast.Spec.Template.Spec = chartPod(nil).Spec
	fast.Spec.Template.Spec.Containers[0].StartupProbe.FailureThreshold = 30
	none := testDeployment("vllm/vllm-openai:v0.11.0")
	none.Name = "plain"

	assert.Equal(t, 30*time.Minute+30*time.Second, StartupBudget(objsOf(toUnstructured(t, fast), toUnstructured(t, slow), toUnstructured(t, none))))
	assert.Equal(t, 5*time.Minute, StartupBudget(objsOf(toUnstructured(t, fast))))
	assert.Zero(t, StartupBudget(objsOf(toUnstructured(t, none))), "no startup probe")
	assert.Zero(t, StartupBudget(nil))
}
