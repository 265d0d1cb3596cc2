package modelfit

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outcome is a real vLLM start-up from a public thread: the model (its
// config among testdata/modelfit/configs), the GPU (its memory as GPU
// Feature Discovery labels it, MiB), the engine flags, and what happened.
type outcome struct {
	url    string
	config string
	gpuMiB int64
	engine Engine
	// failed is the cause vLLM failed with ("" when it ran); decisive
	// says the failure follows from the arithmetic alone (not from CUDA
	// graphs, an engine version or another process), so the preflight
	// must refuse it with that cause.
	failed   string
	decisive bool
}

// outcomes are the rows of docs/model-fit.md's table.
func outcomes() []outcome {
	return []outcome{
		{url: "https://github.com/vllm-project/vllm/issues/5711", config: "meta-llama--Llama-3.3-70B-Instruct", gpuMiB: 81920,
			engine: Engine{TensorParallel: 1, MaxModelLen: 8192}, failed: "gpu-oom", decisive: true},
		{url: "https://github.com/vllm-project/vllm/issues/6689", config: "meta-llama--Llama-3.1-8B", gpuMiB: 23034,
			engine: Engine{TensorParallel: 1, MaxModelLen: 1024}},
		{url: "https://github.com/Graph-COM/SubgraphRAG/issues/19", config: "meta-llama--Llama-3.1-8B", gpuMiB: 24576,
			engine: Engine{TensorParallel: 1}, failed: "kv-cache", decisive: true},
		{url: "https://github.com/vllm-project/vllm/issues/2140", config: "Qwen--Qwen2.5-7B", gpuMiB: 22190,
			engine: Engine{TensorParallel: 1, MaxModelLen: 512, Dtype: "float"}, failed: "gpu-oom", decisive: true},
		{url: "https://github.com/vllm-project/vllm/issues/15815", config: "Qwen--Qwen2.5-32B", gpuMiB: 46068,
			engine: Engine{TensorParallel: 2, MaxModelLen: 10000}},
		{url: "https://github.com/vllm-project/vllm/issues/17327", config: "Qwen--Qwen3-30B-A3B", gpuMiB: 23028,
			engine: Engine{TensorParallel: 4, MaxModelLen: 1024}},
		{url: "https://github.com/vllm-project/vllm/issues/17469", config: "Qwen--Qwen3-30B-A3B", gpuMiB: 23028,
			engine: Engine{TensorParallel: 4, MaxModelLen: 8192}, failed: "gpu-oom"},
		{url: "https://github.com/vllm-project/vllm/issues/17462", config: "Qwen--Qwen3-32B", gpuMiB: 46068,
			engine: Engine{TensorParallel: 2}, failed: "gpu-oom"},
		// One user's three runs on one RTX 3090: 29000 tokens failed
		// where 35000 ran (vLLM's profiling peak changed): not decisive.
		{url: "https://github.com/vllm-project/vllm/issues/10517", config: "meta-llama--Llama-3.1-8B", gpuMiB: 24576,
			engine: Engine{TensorParallel: 1, MaxModelLen: 20000}},
		{url: "https://github.com/vllm-project/vllm/issues/10517", config: "meta-llama--Llama-3.1-8B", gpuMiB: 24576,
			engine: Engine{TensorParallel: 1, MaxModelLen: 29000}, failed: "kv-cache"},
		{url: "https://github.com/vllm-project/vllm/issues/10517", config: "meta-llama--Llama-3.1-8B", gpuMiB: 24576,
			engine: Engine{TensorParallel: 1, MaxModelLen: 35000}},
		{url: "https://github.com/vllm-project/vllm/issues/13061", config: "Qwen--Qwen2.5-14B", gpuMiB: 24564,
			engine: Engine{TensorParallel: 2, GPUMemoryUtilization: 0.98}, failed: "kv-cache", decisive: true},
	}
}

// TestRealOutcomes checks the preflight against what vLLM did in public
// threads: every decisive failure is refused with its cause, and no
// configuration that ran (or failed for reasons the arithmetic cannot
// see: CUDA graphs, an engine version) is refused.
func TestRealOutcomes(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/model-fit.md")
	require.NoError(t, err)
	for _, o := range outcomes() {
		t.Run(fmt.Sprintf("%s/%d", o.url[strings.LastIndex(o.url, "github.com/")+len("github.com/"):], o.engine.MaxModelLen), func(t *testing.T) {
			assert.Contains(t, string(doc), o.url, "docs/model-fit.md lists every outcome the test checks")
			c := loadConfig(t, o.config)
			f := Compute(c, o.engine, c.WeightBytes(o.engine.Dtype, o.engine.Quantization), "parameter count", o.gpuMiB)
			t.Logf("%s: %s", f.Verdict, f.Summary())
			if o.decisive {
				assert.Equal(t, Verdict(o.failed), f.Verdict)
				return
			}
			assert.False(t, f.Verdict.Refuses(), "a configuration that ran, or failed for a reason the arithmetic cannot see, is never refused")
		})
	}
}
