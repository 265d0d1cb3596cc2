package modelfit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configsDir holds real config.json files (sources in its README.md).
const configsDir = "../../../testdata/modelfit/configs"

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(configsDir, name+".json"))
	require.NoError(t, err)
	c, err := ParseConfig(data)
	require.NoError(t, err)
	return c
}

// TestParamsOfRealConfigs checks the parameter count each real config
// implies against the count its publisher states (model card), within
// 2%, and what the KV cache arithmetic reads of it.
func TestParamsOfRealConfigs(t *testing.T) {
	for _, tc := range []struct {
		name string
		// params is the published parameter count, billions.
		params float64
		// kvHeads, headDim: GQA as configured; mla: a latent cache;
		// experts: routed experts (0: dense).
		kvHeads, headDim, experts int64
		mla                       bool
		// sliding is the sliding-window layers.
		sliding int64
		// tied: the output layer shares the embedding.
		tied bool
	}{
		{name: "meta-llama--Llama-3.1-8B", params: 8.03, kvHeads: 8, headDim: 128},
		{name: "meta-llama--Llama-3.2-3B", params: 3.21, kvHeads: 8, headDim: 128, tied: true},
		{name: "meta-llama--Llama-3.3-70B-Instruct", params: 70.6, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen2.5-3B", params: 3.09, kvHeads: 2, headDim: 128, tied: true},
		{name: "Qwen--Qwen2.5-7B", params: 7.61, kvHeads: 4, headDim: 128},
		{name: "Qwen--Qwen2.5-14B", params: 14.7, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen2.5-32B", params: 32.5, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-4B", params: 4.02, kvHeads: 8, headDim: 128, tied: true},
		{name: "Qwen--Qwen3-8B", params: 8.19, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-14B", params: 14.8, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-32B", params: 32.8, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-30B-A3B", params: 30.5, kvHeads: 4, headDim: 128, experts: 128},
		{name: "moonshotai--Kimi-K2-Instruct", params: 1026, kvHeads: 64, headDim: 112, experts: 384, mla: true},
		{name: "mistralai--Mixtral-8x7B-v0.1", params: 46.7, kvHeads: 8, headDim: 128, experts: 8},
		{name: "openai--gpt-oss-20b", params: 20.9, kvHeads: 8, headDim: 64, experts: 32, sliding: 12},
		{name: "openai--gpt-oss-120b", params: 116.8, kvHeads: 8, headDim: 64, experts: 128, sliding: 18},
		// Gemma 2: embeddings tied by default (the config does not say
		// so), head_dim 256 stated (16 × 256 ≠ hidden 3584), even layers
		// sliding over 4096 tokens (21 of 42).
		{name: "google--gemma-2-9b-it", params: 9.24, kvHeads: 8, headDim: 256, sliding: 21, tied: true},
		// Phi-4 (Phi3ForCausalLM): its sliding_window equals the context,
		// so no layer slides.
		{name: "microsoft--phi-4", params: 14.7, kvHeads: 10, headDim: 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadConfig(t, tc.name)
			got := float64(c.Params().Total()) / 1e9
			assert.InEpsilon(t, tc.params, got, 0.02, "parameters: %.2fB", got)
			assert.Equal(t, tc.kvHeads, c.KVHeads)
			assert.Equal(t, tc.headDim, c.HeadDim)
			assert.Equal(t, tc.experts, c.Experts)
			assert.Equal(t, tc.mla, c.KVLoraRank > 0)
			assert.Equal(t, tc.sliding, c.SlidingLayers, "sliding-window layers (Qwen's sliding_window is off; gpt-oss alternates)")
			assert.Equal(t, tc.tied, c.TiedEmbeddings)
			assert.Positive(t, c.MaxPosition)
		})
	}
}

// TestHostileConfigs: absurd, negative or wrongly typed sizes are refused
// as a config this check does not know (the check is skipped), or ignored,
// never a panic, an overflow or a refusal of the rollout.
func TestHostileConfigs(t *testing.T) {
	base := `"hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 128256, "intermediate_size": 14336, "max_position_embeddings": 8192`
	for name, cfg := range map[string]string{
		"1e308 layers":     `{` + base + `, "num_hidden_layers": 1e308}`,
		"negative heads":   `{"hidden_size": 4096, "num_attention_heads": -32, "num_hidden_layers": 32}`,
		"zero heads":       `{"hidden_size": 4096, "num_attention_heads": 0, "num_hidden_layers": 32}`,
		"string layers":    `{` + base + `, "num_hidden_layers": "32"}`,
		"overflowing dims": `{"hidden_size": 60000000, "num_attention_heads": 60000000, "num_hidden_layers": 60000000, "head_dim": 60000000}`,
		"huge experts":     `{` + base + `, "num_hidden_layers": 32, "num_local_experts": 60000000, "moe_intermediate_size": 60000000}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(cfg))
			assert.Error(t, err)
		})
	}
	// Wrong types and negative optional sizes are ignored; layer_types
	// longer than the layers count no more layers than there are.
	c, err := ParseConfig([]byte(`{` + base + `, "num_hidden_layers": 4, "num_key_value_heads": -8, "head_dim": "x",
		"sliding_window": 4096, "max_position_embeddings": 131072,
		"layer_types": ["sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","linear_attention"]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(32), c.KVHeads)
	assert.Equal(t, int64(128), c.HeadDim)
	assert.LessOrEqual(t, c.SlidingLayers+c.StateLayers, c.Layers)
	f := Compute(c, Engine{TensorParallel: 3}, c.WeightBytes("", ""), "", 81920)
	assert.GreaterOrEqual(t, f.KVBytesPerToken, int64(0))
	assert.Equal(t, VerdictFits, f.Verdict)
	assert.Zero(t, indexTotal([]byte(`{"metadata": {"total_size": 1e308}}`)))
}

// TestWeightsOfRealMXFP4Configs: gpt-oss's experts are MXFP4 (4 bits and
// a shared 8-bit scale per 32 values) and the rest bfloat16; the weight
// bytes the config implies are within 5% of the checkpoint sizes OpenAI's
// model card gives (gpt-oss-20b 12.8 GiB, gpt-oss-120b 60.8 GiB).
func TestWeightsOfRealMXFP4Configs(t *testing.T) {
	for name, gib := range map[string]float64{"openai--gpt-oss-20b": 12.8, "openai--gpt-oss-120b": 60.8} {
		t.Run(name, func(t *testing.T) {
			c := loadConfig(t, name)
			assert.Equal(t, "mxfp4", c.Quant.Method)
			assert.True(t, c.Quant.ExpertsOnly, "attention, router and embeddings stay bfloat16")
			got := c.WeightBytes("", "") / (1 << 30)
			assert.InEpsilon(t, gib, got, 0.05, "weights: %.2f GiB", got)
		})
	}
}

// TestGemma3AndPhi3Features reads configs written for this test (not real
// models' files, which were not found in a citable form; the sizes are
// Gemma 3 27B's and Phi-3-mini-128k's): Gemma 3's language model under
// text_config, one full-attention layer in every sliding_window_pattern
// layers (transformers: layer i slides unless (i+1) % pattern == 0) and
// embeddings tied by default; Phi-3's longrope rope_scaling changes no
// size, and its sliding_window as long as the context slides nothing.
func TestGemma3AndPhi3Features(t *testing.T) {
	for _, tc := range []struct {
		name, config                     string
		layers, sliding, window, headDim int64
		tied                             bool
	}{
		{name: "gemma 3 multimodal", config: `{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
			"text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
			"num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024, "sliding_window_pattern": 6,
			"max_position_embeddings": 131072, "vocab_size": 262208}, "torch_dtype": "bfloat16"}`,
			layers: 62, sliding: 52, window: 1024, headDim: 128, tied: true},
		{name: "phi-3 longrope", config: `{"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
			"intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
			"max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "sliding_window": 262144,
			"rope_scaling": {"type": "longrope", "long_factor": [1.08, 1.11], "short_factor": [1.0, 1.02]},
			"tie_word_embeddings": false, "vocab_size": 32064, "torch_dtype": "bfloat16"}`,
			layers: 32, headDim: 96},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.config))
			require.NoError(t, err)
			assert.Equal(t, tc.layers, c.Layers)
			assert.Equal(t, tc.sliding, c.SlidingLayers)
			if tc.sliding > 0 {
				assert.Equal(t, tc.window, c.SlidingWindow)
			}
			assert.Equal(t, tc.headDim, c.HeadDim)
			assert.Equal(t, tc.tied, c.TiedEmbeddings)
		})
	}
}
