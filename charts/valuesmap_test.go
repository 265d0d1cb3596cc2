package charts_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/charts"
)

// TestValuesMapOf: the built-in chart declares where its values set what
// the failure hints name; production-stack's chart, unchanged, declares
// nothing; a malformed declaration is invalid input naming Chart.yaml and
// the annotation.
func TestValuesMapOf(t *testing.T) {
	builtin := charts.BuiltinValuesMap("vllm")
	assert.Equal(t, "model.maxModelLen", builtin.Path("max-model-len"))
	assert.Equal(t, "resources.gpu", builtin.Path("gpu"))
	assert.Equal(t, "extraArgs", builtin.Path("extra-args"))
	assert.Nil(t, charts.BuiltinValuesMap("no-such-chart"))

	stack, err := charts.Load(filepath.Join("..", "testdata", "charts", "vllm-stack"))
	require.NoError(t, err)
	m, err := charts.ValuesMapOf(stack)
	require.NoError(t, err)
	assert.Nil(t, m, "vllm-stack declares no mapping")

	stack.Metadata.Annotations = map[string]string{"vllmctl.io/values.max-model-len": "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen"}
	m, err = charts.ValuesMapOf(stack)
	require.NoError(t, err)
	assert.Equal(t, "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen", m.Path("max-model-len"))

	stack.Metadata.Annotations = map[string]string{"vllmctl.io/values.maxModelLen": "x.y"}
	_, err = charts.ValuesMapOf(stack)
	var ie *charts.InputError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 2, ie.ExitCode())
	assert.Equal(t, "vllm-stack/Chart.yaml", ie.File)
	assert.Contains(t, err.Error(), "vllmctl.io/values.maxModelLen")
}
