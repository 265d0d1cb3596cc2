package release

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
	"github.com/vllmctl/vllmctl/release/storage"
)

// StatusModelFit is the status of the model-fit preflight's progress
// lines (phase preflight): a fit and its numbers, a skip and why; its
// warnings (the grey zone) have status "warning".
const StatusModelFit = "model-fit"

// checkModelFit runs the model-fit preflight once per plan: a model that
// cannot fit the GPUs its pods may use refuses the deploy (exit code 2)
// before anything is applied; notes (a skip and why, a fit in the grey
// zone) go to the progress. A deploy whose ModelFit source is not
// configured (library callers, tests) runs no check.
func (e *Engine) checkModelFit(ctx context.Context, p *deployPlan) error {
	if p.modelFit != nil || !p.opts.ModelFit.Configured() {
		return nil
	}
	rep, err := runModelFit(ctx, e, e.Client, p.opts.Name, p.objs, p.computed, p.chart.ValuesMap, p.opts.ModelFit)
	p.modelFit = rep
	return err
}

// runModelFit is the model-fit preflight of a release's rendered objects,
// its notes emitted as preflight progress of release name.
func runModelFit(ctx context.Context, e *Engine, client kubernetes.Interface, name string, objs []*unstructured.Unstructured, values map[string]any, vm vllm.ValuesMap, src modelfit.Source) (*modelfit.Report, error) {
	return modelfit.Check(ctx, client, objs, modelfit.Options{
		Namespace:    e.Namespace(),
		Source:       src,
		GPUMemoryMiB: GPUMemoryOverride(values),
		Values:       vm,
		Progress: func(line string, warning bool) {
			status := StatusModelFit
			if warning {
				status = "warning"
			}
			e.emit(name, 0, PhasePreflight, "", status, line)
		},
	})
}

// ChartValuesMap is the values mapping of a recorded chart: the one it
// declared, else, for a built-in chart recorded before records kept it,
// the built-in chart's own (nil: the hints name flags only).
func ChartValuesMap(c storage.Chart) vllm.ValuesMap {
	if c.ValuesMap != nil {
		return c.ValuesMap
	}
	if c.Builtin {
		return charts.BuiltinValuesMap(c.Name)
	}
	return nil
}

// GPUMemoryOverride is the values' modelFit.gpuMemoryMiB (0 when unset):
// one GPU's memory, for clusters whose nodes carry no
// nvidia.com/gpu.memory label.
// A value outside 1..maxGPUMemoryMiB (16 TiB) is ignored, as unset: no
// float64 beyond int64 is converted.
func GPUMemoryOverride(values map[string]any) int64 {
	mf, ok := values["modelFit"].(map[string]any)
	if !ok {
		return 0
	}
	var n float64
	switch v := mf["gpuMemoryMiB"].(type) {
	case int:
		n = float64(v)
	case int64:
		n = float64(v)
	case float64:
		n = v
	case string:
		n, _ = strconv.ParseFloat(v, 64)
	}
	if !(n >= 1 && n <= maxGPUMemoryMiB) { // NaN included
		return 0
	}
	return int64(n)
}

// maxGPUMemoryMiB bounds modelFit.gpuMemoryMiB: 16 TiB.
const maxGPUMemoryMiB = 16 << 20
