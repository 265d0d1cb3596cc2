package charts

import (
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// ValuesMapOf is the values mapping chart c declares in its Chart.yaml
// annotations (vllm.ValuesAnnotationPrefix + setting: values path), nil
// when it declares none. A malformed one is an *InputError naming the
// chart's Chart.yaml and the annotation.
func ValuesMapOf(c *chart.Chart) (vllm.ValuesMap, error) {
	if c == nil || c.Metadata == nil {
		return nil, nil
	}
	m, err := vllm.ParseValuesMap(c.Metadata.Annotations)
	if err != nil {
		return nil, &InputError{Source: "chart", File: c.Name() + "/Chart.yaml", Msg: err.Error(), Err: err}
	}
	return m, nil
}

// BuiltinValuesMap is the values mapping of built-in chart name (nil when
// it is not one, or declares none): for the records of built-in releases
// written before records kept the mapping.
func BuiltinValuesMap(name string) vllm.ValuesMap {
	if !IsBuiltin(name) {
		return nil
	}
	c, err := loadBuiltin(name)
	if err != nil {
		return nil
	}
	m, _ := ValuesMapOf(c)
	return m
}
