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
	}{
		{name: "meta-llama--Llama-3.1-8B", params: 8.03, kvHeads: 8, headDim: 128},
		{name: "meta-llama--Llama-3.2-3B", params: 3.21, kvHeads: 8, headDim: 128},
		{name: "meta-llama--Llama-3.3-70B-Instruct", params: 70.6, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen2.5-3B", params: 3.09, kvHeads: 2, headDim: 128},
		{name: "Qwen--Qwen2.5-7B", params: 7.61, kvHeads: 4, headDim: 128},
		{name: "Qwen--Qwen2.5-14B", params: 14.7, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen2.5-32B", params: 32.5, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-4B", params: 4.02, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-8B", params: 8.19, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-14B", params: 14.8, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-32B", params: 32.8, kvHeads: 8, headDim: 128},
		{name: "Qwen--Qwen3-30B-A3B", params: 30.5, kvHeads: 4, headDim: 128, experts: 128},
		{name: "moonshotai--Kimi-K2-Instruct", params: 1026, kvHeads: 64, headDim: 112, experts: 384, mla: true},
		{name: "mistralai--Mixtral-8x7B-v0.1", params: 46.7, kvHeads: 8, headDim: 128, experts: 8},
		{name: "openai--gpt-oss-20b", params: 20.9, kvHeads: 8, headDim: 64, experts: 32, sliding: 12},
		{name: "openai--gpt-oss-120b", params: 116.8, kvHeads: 8, headDim: 64, experts: 128, sliding: 18},
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
