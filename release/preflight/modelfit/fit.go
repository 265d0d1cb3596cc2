package modelfit

import (
	"fmt"
	"math"
)

// GiB is 2^30 bytes.
const GiB = float64(1 << 30)

// The activation and CUDA-graph reserve: what vLLM needs besides the
// weights and the KV cache inside --gpu-memory-utilization. It is an
// estimate, so the check refuses only what does not fit even with the
// least vLLM has been seen to take (minReserve), and warns in the grey
// zone between that and the estimate (Fit.ReserveEstimate).
const (
	// minReserve is the floor: the profiling run's activations of a small
	// model with a small batch, the CUDA context's share inside the
	// budget. Below it, vLLM never started in any report we read.
	minReserve = 0.5 * GiB
	// nonTorchReserve is what vLLM's profiling counts outside PyTorch's
	// allocator (cuBLAS workspaces, NCCL buffers with tensor parallelism).
	nonTorchReserve = 0.75 * GiB
	// cudaGraphReserve is what captured CUDA graphs take (vLLM logs
	// 0.2-2 GiB; v0.11 counts them inside the budget).
	cudaGraphReserve = 1.0 * GiB
	// batchTokens is the token budget of vLLM's profiling run
	// (--max-num-batched-tokens for online serving since v0.8: 8192).
	batchTokens = 8192
	// estimateMargin: a weight size estimated from the parameter count
	// (no checkpoint index) refuses only above the budget by this share.
	estimateMargin = 0.03
)

// Verdict is the outcome of a fit.
type Verdict string

// The verdicts.
const (
	// VerdictFits: the weights and one max_model_len sequence fit with the
	// estimated reserve.
	VerdictFits Verdict = "fits"
	// VerdictTight: it fits only if vLLM's activations and CUDA graphs take
	// less than the estimate (the grey zone): a warning, not a refusal.
	VerdictTight Verdict = "tight"
	// VerdictGPUOOM: the weights alone exceed the budget: refused.
	VerdictGPUOOM Verdict = "gpu-oom"
	// VerdictKVCache: one max_model_len sequence cannot fit what the
	// weights and the least reserve leave: refused.
	VerdictKVCache Verdict = "kv-cache"
	// VerdictSkipped: the check could not be made (a line says why).
	VerdictSkipped Verdict = "skipped"
)

// Refuses reports whether v refuses the deploy.
func (v Verdict) Refuses() bool { return v == VerdictGPUOOM || v == VerdictKVCache }

// Engine is how vLLM runs the model: its flags as the pod runs them.
type Engine struct {
	TensorParallel   int64
	PipelineParallel int64
	// MaxModelLen is --max-model-len (0: the config's
	// max_position_embeddings).
	MaxModelLen int64
	// GPUMemoryUtilization is --gpu-memory-utilization (0: 0.9).
	GPUMemoryUtilization float64
	// Dtype, KVCacheDtype and Quantization are --dtype, --kv-cache-dtype
	// and --quantization ("" or auto: the config's).
	Dtype, KVCacheDtype, Quantization string
}

// Fit is the arithmetic of one model on one GPU size.
type Fit struct {
	Verdict Verdict `json:"verdict"`
	// GPUMemoryGiB is one GPU's memory; BudgetGiB the share vLLM may use
	// (gpu_memory_utilization × it).
	GPUMemoryGiB         float64 `json:"gpuMemoryGiB"`
	GPUMemoryUtilization float64 `json:"gpuMemoryUtilization"`
	BudgetGiB            float64 `json:"budgetGiB"`
	TensorParallel       int64   `json:"tensorParallel"`
	PipelineParallel     int64   `json:"pipelineParallel"`
	// WeightsGiB is the weights per GPU (all of them ÷ TP × PP);
	// WeightsFrom says how they were found (checkpoint index, or the
	// parameter count and dtype).
	WeightsGiB  float64 `json:"weightsGiB"`
	WeightsFrom string  `json:"weightsFrom"`
	// MaxModelLen is the sequence length checked; MaxModelLenFrom where it
	// comes from (--max-model-len, max_position_embeddings).
	MaxModelLen     int64  `json:"maxModelLen"`
	MaxModelLenFrom string `json:"maxModelLenFrom"`
	// KVBytesPerToken is the KV cache of one token on one GPU (full
	// attention layers; sliding-window layers hold at most their window);
	// KVNeededGiB what one MaxModelLen sequence needs.
	KVBytesPerToken int64   `json:"kvBytesPerToken"`
	KVNeededGiB     float64 `json:"kvNeededGiB"`
	// ReserveMinGiB and ReserveEstimateGiB bound the activation and CUDA
	// graph reserve: below the minimum it is refused, between the two it
	// is tight.
	ReserveMinGiB      float64 `json:"reserveMinGiB"`
	ReserveEstimateGiB float64 `json:"reserveEstimateGiB"`
	// KVFreeGiB is what is left for the KV cache after the weights and
	// the estimated reserve (negative when nothing is).
	KVFreeGiB float64 `json:"kvFreeGiB"`
	// MaxLenFits is the longest sequence the memory left holds with the
	// least reserve (0 when none).
	MaxLenFits int64 `json:"maxLenFits"`
}

// Compute fits a model with weightBytes of weights (all GPUs together) on
// GPUs of gpuMiB MiB.
func Compute(c *Config, e Engine, weightBytes float64, weightsFrom string, gpuMiB int64) Fit {
	tp, pp := max(e.TensorParallel, 1), max(e.PipelineParallel, 1)
	gmu := e.GPUMemoryUtilization
	if gmu <= 0 {
		gmu = 0.9
	}
	f := Fit{
		GPUMemoryGiB: float64(gpuMiB) / 1024, GPUMemoryUtilization: gmu,
		TensorParallel: tp, PipelineParallel: pp, WeightsFrom: weightsFrom,
		MaxModelLen: e.MaxModelLen, MaxModelLenFrom: "--max-model-len",
	}
	if f.MaxModelLen <= 0 {
		f.MaxModelLen, f.MaxModelLenFrom = c.MaxPosition, "max_position_embeddings of config.json"
	}
	budget := gmu * float64(gpuMiB) * (1 << 20)
	weights := weightBytes / float64(tp*pp)
	f.BudgetGiB, f.WeightsGiB = budget/GiB, weights/GiB
	reserve := c.reserveEstimate(e, tp)
	f.ReserveMinGiB, f.ReserveEstimateGiB = minReserve/GiB, reserve/GiB

	full, sliding := c.kvPerToken(e, tp, pp)
	f.KVBytesPerToken = full + sliding
	need := c.kvNeeded(full, sliding, f.MaxModelLen)
	f.KVNeededGiB = need / GiB
	f.KVFreeGiB = (budget - weights - reserve) / GiB
	leftMin := budget - weights - minReserve
	f.MaxLenFits = c.maxLen(full, sliding, leftMin)

	margin := 0.0
	if weightsFrom != fromIndex {
		margin = estimateMargin
	}
	switch {
	case weights > budget*(1+margin):
		f.Verdict = VerdictGPUOOM
	case weights > budget:
		f.Verdict = VerdictTight
	case f.MaxModelLen > 0 && need > leftMin:
		f.Verdict = VerdictKVCache
	case f.MaxModelLen > 0 && need > budget-weights-reserve:
		f.Verdict = VerdictTight
	default:
		f.Verdict = VerdictFits
	}
	return f
}

// fromIndex is WeightsFrom for a size read from the checkpoint index.
const fromIndex = "checkpoint index (model.safetensors.index.json)"

// kvDtypeBytes is the size of one cached value: --kv-cache-dtype fp8*
// takes 1 byte, auto the served dtype's.
func (c *Config) kvDtypeBytes(e Engine) float64 {
	if e.KVCacheDtype != "" && e.KVCacheDtype != "auto" {
		return dtypeBytes(e.KVCacheDtype)
	}
	return dtypeBytes(servedDtype(e.Dtype, c.Dtype))
}

// kvPerToken is the KV cache of one token on one GPU, split into the
// full-attention layers' and the sliding-window layers' bytes. MLA caches
// one latent (kv_lora_rank + qk_rope_head_dim) per layer, the same on
// every tensor-parallel rank; other attention caches K and V of its KV
// heads, divided over the tensor-parallel ranks (at least one head per
// rank: fewer KV heads than ranks are replicated). Pipeline parallelism
// splits the layers.
func (c *Config) kvPerToken(e Engine, tp, pp int64) (full, sliding int64) {
	size := c.kvDtypeBytes(e)
	var perLayer float64
	if c.KVLoraRank > 0 {
		perLayer = float64(c.KVLoraRank+c.QKRopeHeadDim) * size
	} else {
		heads := max(ceilDiv(c.KVHeads, tp), 1)
		perLayer = float64(2*heads*c.HeadDim) * size
	}
	slidingLayers := ceilDiv(c.SlidingLayers, pp)
	fullLayers := ceilDiv(c.Layers-c.SlidingLayers-c.StateLayers, pp)
	return int64(perLayer * float64(fullLayers)), int64(perLayer * float64(slidingLayers))
}

// kvNeeded is the KV cache one sequence of n tokens needs: sliding-window
// layers hold at most their window.
func (c *Config) kvNeeded(full, sliding, n int64) float64 {
	return float64(full)*float64(n) + float64(sliding)*float64(min(n, max(c.SlidingWindow, 1)))
}

// maxLen is the longest sequence left bytes hold.
func (c *Config) maxLen(full, sliding int64, left float64) int64 {
	if left <= 0 {
		return 0
	}
	if full == 0 {
		if float64(sliding)*float64(c.SlidingWindow) <= left {
			return math.MaxInt32
		}
		return int64(left / float64(max(sliding, 1)))
	}
	left -= float64(sliding) * float64(c.SlidingWindow)
	if left <= 0 {
		return 0
	}
	return int64(left / float64(full))
}

// reserveEstimate is the activation and CUDA-graph reserve on one GPU:
// the profiling run's peak for batchTokens tokens (the hidden states and
// the tensor-parallel share of the MLP's gate and up projections, in 16
// bits, a few alive at once, and the sampler's float32 logits of 256
// sequences), what PyTorch does not allocate, and the CUDA graphs.
func (c *Config) reserveEstimate(e Engine, tp int64) float64 {
	inter := c.Intermediate
	if c.Experts > 0 {
		inter = max(c.MoEIntermediate*2, c.SharedIntermediate)
	}
	act := float64(batchTokens) * float64(4*c.Hidden+2*inter/tp) * 2
	logits := float64(256*c.Vocab) * 4
	return act + logits + nonTorchReserve + cudaGraphReserve
}

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	return (a + b - 1) / b
}

// Summary says in one line what the fit found.
func (f Fit) Summary() string {
	s := fmt.Sprintf("weights %.1f GiB per GPU (TP %d × PP %d, %s) of a budget of %.2f × %.1f GiB = %.1f GiB",
		f.WeightsGiB, f.TensorParallel, f.PipelineParallel, f.WeightsFrom, f.GPUMemoryUtilization, f.GPUMemoryGiB, f.BudgetGiB)
	if f.MaxModelLen > 0 {
		s += fmt.Sprintf("; one sequence of %d tokens (%s) needs %.2f GiB of KV cache (%d bytes per token per GPU)",
			f.MaxModelLen, f.MaxModelLenFrom, f.KVNeededGiB, f.KVBytesPerToken)
		most := f.BudgetGiB - f.WeightsGiB - f.ReserveMinGiB
		if most <= 0 {
			s += fmt.Sprintf("; nothing is left for the KV cache after the weights and at least %.1f GiB for activations", f.ReserveMinGiB)
		} else {
			s += fmt.Sprintf("; left for the KV cache after the weights and %.1f-%.1f GiB for activations and CUDA graphs: %.2f-%.2f GiB",
				f.ReserveMinGiB, f.ReserveEstimateGiB, max(f.KVFreeGiB, 0), most)
		}
	}
	return s
}
