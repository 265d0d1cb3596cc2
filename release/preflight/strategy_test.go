package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
