package preflight

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestSetStrategy(t *testing.T) {
	dep := func(strategy any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": pfNS},
			"spec":     map[string]any{"strategy": strategy},
		}}
	}
	obj := dep(map[string]any{"type": "Recreate"})
	require.NoError(t, SetStrategy(obj, ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromString("50%"))))
	s, _, _ := unstructured.NestedMap(obj.Object, "spec", "strategy")
	assert.Equal(t, map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(0), "maxUnavailable": "50%"}}, s)

	obj = dep(map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)}})
	require.NoError(t, SetStrategy(obj, nil, ptr.To(intstr.FromInt32(2))))
	s, _, _ = unstructured.NestedMap(obj.Object, "spec", "strategy")
	assert.Equal(t, map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(2)}}, s, "nil leaves a value as it is")

	err := SetStrategy(dep("bogus"), ptr.To(intstr.FromInt32(0)), nil)
	assert.ErrorContains(t, err, "apps/v1 Deployment llm/web: set strategy")
}

func TestCheckStrategies(t *testing.T) {
	strategy := func(s, u intstr.IntOrString) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
		}
	}
	tests := []struct {
		name string
		dep  *appsv1.Deployment
		want string
	}{
		{name: "valid", dep: pfDeploy("web", 3, 1)},
		{name: "both zero", dep: pfDeploy("web", 3, 1, strategy(intstr.FromInt32(0), intstr.FromString("0%"))),
			want: "apps/v1 Deployment " + pfNS + "/web: maxSurge and maxUnavailable may not both be 0"},
		{name: "unavailable over 100%", dep: pfDeploy("web", 3, 1, strategy(intstr.FromInt32(1), intstr.FromString("150%"))),
			want: "apps/v1 Deployment " + pfNS + "/web: maxUnavailable 150% is more than 100%"},
		{name: "surge percentage that wraps the controller's 32-bit count", dep: pfDeploy("web", 3, 1, strategy(intstr.FromString("1000000000000%"), intstr.FromInt32(0))),
			want: "apps/v1 Deployment " + pfNS + "/web: maxSurge 1000000000000% resolves to 30000000000 pods for 3 replica(s): the Deployment controller adds it to the replica count in 32 bits, where this wraps: how many new pods it starts is then arbitrary, for some values none; use at most 100% or a pod count"},
		{name: "largest surge count", dep: pfDeploy("web", 3, 1, strategy(intstr.FromInt32(math.MaxInt32), intstr.FromInt32(0))),
			want: "apps/v1 Deployment " + pfNS + "/web: maxSurge 2147483647 resolves to 2147483647 pods for 3 replica(s): the Deployment controller adds it to the replica count in 32 bits, where this wraps: how many new pods it starts is then arbitrary, for some values none; use at most 100% or a pod count"},
		{name: "surge 1000% is a lot, and fine", dep: pfDeploy("web", 3, 1, strategy(intstr.FromString("1000%"), intstr.FromInt32(0)))},
		{name: "unknown type", dep: pfDeploy("web", 3, 1, func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }),
			want: `apps/v1 Deployment ` + pfNS + `/web: unknown strategy type "BlueGreen"`},
		{name: "recreate", dep: pfDeploy("web", 3, 1, func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckStrategies([]*unstructured.Unstructured{pfUnstructured(t, tt.dep)}, "")
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			var se *StrategyInputError
			require.ErrorAs(t, err, &se)
			assert.EqualError(t, err, tt.want)
		})
	}
	t.Run("namespace of the release", func(t *testing.T) {
		dep := pfDeploy("web", 3, 1, strategy(intstr.FromInt32(0), intstr.FromInt32(0)))
		dep.Namespace = ""
		err := CheckStrategies([]*unstructured.Unstructured{pfUnstructured(t, dep)}, "serving")
		assert.EqualError(t, err, "apps/v1 Deployment serving/web: maxSurge and maxUnavailable may not both be 0")
	})
}

// TestCheckStrategiesPlainStatefulSet: a StatefulSet that is no engine
// group is noted, not checked, and does not stop the check.
func TestCheckStrategiesPlainStatefulSet(t *testing.T) {
	sts := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "cache", "namespace": pfNS},
		"spec":     map[string]any{"replicas": int64(2)},
	}}
	require.NoError(t, CheckStrategies([]*unstructured.Unstructured{sts, pfUnstructured(t, pfDeploy("web", 3, 1))}, ""))
}
