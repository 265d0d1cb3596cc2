package modelfit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// a100 is an A100-SXM4-80GB as GPU Feature Discovery labels it.
const a100 = 81920

func TestFitOfRealConfigs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		engine Engine
		gpuMiB int64
		want   Verdict
	}{
		{name: "70B bf16 on one 80 GiB GPU", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{TensorParallel: 1}, gpuMiB: a100, want: VerdictGPUOOM},
		{name: "70B on two GPUs at the full 131072 context", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{TensorParallel: 2}, gpuMiB: a100, want: VerdictKVCache},
		{name: "70B on two GPUs at 8192", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{TensorParallel: 2, MaxModelLen: 8192}, gpuMiB: a100, want: VerdictFits},
		{name: "70B on four GPUs at the full context", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{TensorParallel: 4}, gpuMiB: a100, want: VerdictFits},
		{name: "70B pipeline-parallel over two GPUs at 8192", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{PipelineParallel: 2, MaxModelLen: 8192}, gpuMiB: a100, want: VerdictFits},
		{name: "70B fp8 on the fly on one GPU, 4096: the grey zone", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{TensorParallel: 1, MaxModelLen: 4096, Quantization: "fp8"}, gpuMiB: a100, want: VerdictTight},
		{name: "8B on an 80 GiB GPU", config: "meta-llama--Llama-3.1-8B", engine: Engine{}, gpuMiB: a100, want: VerdictFits},
		{name: "8B on a 16 GiB GPU", config: "meta-llama--Llama-3.1-8B", engine: Engine{MaxModelLen: 4096}, gpuMiB: 16384, want: VerdictGPUOOM},
		{name: "Qwen3-30B-A3B MoE on one 80 GiB GPU", config: "Qwen--Qwen3-30B-A3B", engine: Engine{}, gpuMiB: a100, want: VerdictFits},
		{name: "Qwen2.5-32B on one 80 GiB GPU at its full context", config: "Qwen--Qwen2.5-32B", engine: Engine{}, gpuMiB: a100, want: VerdictKVCache},
		{name: "Qwen2.5-32B with an fp8 KV cache at 32768", config: "Qwen--Qwen2.5-32B", engine: Engine{MaxModelLen: 32768, KVCacheDtype: "fp8"}, gpuMiB: a100, want: VerdictFits},
		{name: "Qwen3-0.6B-sized: Qwen2.5-3B on a 24 GiB GPU", config: "Qwen--Qwen2.5-3B", engine: Engine{}, gpuMiB: 24576, want: VerdictFits},
		{name: "Kimi K2 (1T, bf16) on eight 80 GiB GPUs", config: "moonshotai--Kimi-K2-Instruct", engine: Engine{TensorParallel: 8}, gpuMiB: a100, want: VerdictGPUOOM},
		{name: "Qwen3-14B at 0.7 utilization on a 48 GiB GPU", config: "Qwen--Qwen3-14B", engine: Engine{GPUMemoryUtilization: 0.7}, gpuMiB: 49152, want: VerdictKVCache},
		{name: "Gemma 2 9B on a 24 GiB GPU at its 8192 context: the grey zone, a warning", config: "google--gemma-2-9b-it", engine: Engine{}, gpuMiB: 24576, want: VerdictTight},
		{name: "Gemma 2 9B on a 16 GiB GPU", config: "google--gemma-2-9b-it", engine: Engine{MaxModelLen: 4096}, gpuMiB: 16384, want: VerdictGPUOOM},
		{name: "Phi-4 on one 80 GiB GPU at its 16384 context", config: "microsoft--phi-4", engine: Engine{}, gpuMiB: a100, want: VerdictFits},
		{name: "Phi-4 on a 24 GiB GPU", config: "microsoft--phi-4", engine: Engine{MaxModelLen: 4096}, gpuMiB: 24576, want: VerdictGPUOOM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadConfig(t, tc.config)
			f := Compute(c, tc.engine, c.WeightBytes(tc.engine.Dtype, tc.engine.Quantization), "parameter count", tc.gpuMiB)
			assert.Equal(t, tc.want, f.Verdict, f.Summary())
		})
	}
}

func TestKVBytesPerToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		engine Engine
		want   int64
	}{
		// 80 layers × 8 KV heads × 128 × 2 (K and V) × 2 bytes.
		{name: "GQA", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{}, want: 80 * 8 * 128 * 2 * 2},
		{name: "GQA over TP 4: two heads per GPU", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{TensorParallel: 4}, want: 80 * 2 * 128 * 2 * 2},
		{name: "fewer KV heads than ranks are replicated", config: "Qwen--Qwen2.5-3B", engine: Engine{TensorParallel: 4}, want: 36 * 1 * 128 * 2 * 2},
		{name: "PP splits the layers", config: "meta-llama--Llama-3.3-70B-Instruct", engine: Engine{PipelineParallel: 2}, want: 40 * 8 * 128 * 2 * 2},
		{name: "fp8 KV cache", config: "meta-llama--Llama-3.1-8B", engine: Engine{KVCacheDtype: "fp8_e4m3"}, want: 32 * 8 * 128 * 2 * 1},
		{name: "float32 served as bfloat16 unless --dtype", config: "meta-llama--Llama-3.1-8B", engine: Engine{Dtype: "float32"}, want: 32 * 8 * 128 * 2 * 4},
		// MLA: one latent of kv_lora_rank + qk_rope_head_dim per layer,
		// the same on every rank.
		{name: "MLA", config: "moonshotai--Kimi-K2-Instruct", engine: Engine{TensorParallel: 8}, want: 61 * (512 + 64) * 2},
		// Gemma 2: head_dim 256 as stated, not hidden/heads (224); the 21
		// sliding layers cache as much per token as the 21 full ones.
		{name: "explicit head_dim", config: "google--gemma-2-9b-it", engine: Engine{}, want: 42 * 8 * 256 * 2 * 2},
		{name: "10 KV heads over TP 4: three per GPU", config: "microsoft--phi-4", engine: Engine{TensorParallel: 4}, want: 40 * 3 * 128 * 2 * 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadConfig(t, tc.config)
			f := Compute(c, tc.engine, 0, "test", a100)
			assert.Equal(t, tc.want, f.KVBytesPerToken)
		})
	}
}

// slidingConfig is written for this test (not a real model's file): a
// gpt-oss-like layout of 4 layers alternating sliding and full attention,
// window 128, experts in mxfp4.
const slidingConfig = `{
  "model_type": "gpt_oss", "hidden_size": 1024, "intermediate_size": 1024,
  "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
  "vocab_size": 1000, "max_position_embeddings": 131072, "sliding_window": 128,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "num_local_experts": 8, "torch_dtype": "bfloat16",
  "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}
}`

func TestSlidingWindowAndMXFP4(t *testing.T) {
	c, err := ParseConfig([]byte(slidingConfig))
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.SlidingLayers)
	assert.Equal(t, int64(128), c.SlidingWindow)
	perLayer := int64(4 * 64 * 2 * 2)
	f := Compute(c, Engine{MaxModelLen: 100000}, 0, "test", a100)
	// Full layers hold every token, sliding ones their window.
	assert.InDelta(t, float64(2*perLayer*100000+2*perLayer*128)/GiB, f.KVNeededGiB, 1e-9)

	p := c.Params()
	assert.Positive(t, p.Experts)
	want := float64(p.Embedding+p.Other)*2 + float64(p.Experts)*4.25/8
	assert.InDelta(t, want, c.WeightBytes("", ""), 1)
}

func TestQwenSlidingWindowIsOff(t *testing.T) {
	// Qwen2.5 configs carry sliding_window with use_sliding_window false.
	c := loadConfig(t, "Qwen--Qwen2.5-7B")
	assert.Zero(t, c.SlidingLayers)
}

func TestGreyZoneWarnsNeverRefuses(t *testing.T) {
	c := loadConfig(t, "meta-llama--Llama-3.1-8B")
	w := c.WeightBytes("", "")
	// Find the GPU size whose budget leaves, after the weights, just
	// more than the least reserve and one 8192-token sequence: inside
	// the grey zone.
	need := float64(8192 * 32 * 8 * 128 * 2 * 2)
	budget := w + minReserve + need + 0.25*GiB
	mib := int64(budget / 0.9 / (1 << 20))
	f := Compute(c, Engine{MaxModelLen: 8192}, w, "parameter count", mib)
	assert.Equal(t, VerdictTight, f.Verdict, f.Summary())
	assert.False(t, f.Verdict.Refuses())
	assert.Greater(t, f.ReserveEstimateGiB, f.ReserveMinGiB)
	assert.Less(t, f.ReserveEstimateGiB, 6.0, "the estimate stays a few GiB")
}

func TestEstimatedWeightsRefuseOnlyBeyondTheMargin(t *testing.T) {
	c := loadConfig(t, "meta-llama--Llama-3.1-8B")
	w := c.WeightBytes("", "")
	mib := int64(w / 0.9 / (1 << 20) / 1.01) // weights 1% over the budget
	assert.Equal(t, VerdictTight, Compute(c, Engine{MaxModelLen: 1}, w, "parameter count", mib).Verdict)
	assert.Equal(t, VerdictGPUOOM, Compute(c, Engine{MaxModelLen: 1}, w, fromIndex, mib).Verdict, "an index-measured size has no margin")
}

func TestIndexWeightBytes(t *testing.T) {
	c := loadConfig(t, "meta-llama--Llama-3.1-8B")
	assert.InDelta(t, 16.06e9, c.IndexWeightBytes(16_060_522_496, "", ""), 1e6)
	// fp8 on the fly: everything but the embeddings at one byte.
	fp8 := c.IndexWeightBytes(16_060_522_496, "", "fp8")
	assert.Less(t, fp8, 9.2e9)
	assert.Greater(t, fp8, 8.0e9)
}

// hybridConfig is written for this test (not a real model's file): 8
// layers of which every 4th is full attention, the rest linear attention.
const hybridConfig = `{
  "model_type": "qwen3_next", "hidden_size": 1024, "intermediate_size": 1024,
  "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
  "vocab_size": 1000, "max_position_embeddings": 262144, "full_attention_interval": 4, "torch_dtype": "bfloat16"
}`

func TestHybridLayersCacheNoTokens(t *testing.T) {
	c, err := ParseConfig([]byte(hybridConfig))
	require.NoError(t, err)
	assert.Equal(t, int64(6), c.StateLayers)
	f := Compute(c, Engine{}, 0, "test", a100)
	assert.Equal(t, int64(2*2*256*2*2), f.KVBytesPerToken, "only the 2 full-attention layers cache tokens")
}

func TestQuantizationConfigs(t *testing.T) {
	// Real Llama-3.1-8B dimensions with quantization_config blocks as
	// checkpoints carry them (written for this test).
	base := loadConfig(t, "meta-llama--Llama-3.1-8B")
	p := base.Params()
	for _, tc := range []struct {
		name  string
		quant string
		bits  float64
	}{
		{name: "awq 4 bits", quant: `{"quant_method": "awq", "bits": 4, "group_size": 128}`, bits: 4.25},
		{name: "gptq 8 bits", quant: `{"quant_method": "gptq", "bits": 8}`, bits: 8.25},
		{name: "fp8", quant: `{"quant_method": "fp8", "activation_scheme": "dynamic"}`, bits: 8},
		{name: "compressed-tensors w4a16", quant: `{"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4}}}}`, bits: 4},
		{name: "bitsandbytes 4 bit", quant: `{"quant_method": "bitsandbytes", "load_in_4bit": true}`, bits: 4.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(`{"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
				"num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16", "quantization_config": ` + tc.quant + `}`))
			require.NoError(t, err)
			assert.InDelta(t, tc.bits, c.Quant.Bits, 1e-9)
			want := float64(p.Embedding)*2 + float64(p.Other)*tc.bits/8
			assert.InDelta(t, want, c.WeightBytes("", ""), 1)
		})
	}
}
