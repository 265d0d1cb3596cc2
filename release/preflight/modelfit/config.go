package modelfit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Config is what the arithmetic needs of a model's config.json
// (transformers' PretrainedConfig). Multimodal configs whose language
// model sits under text_config (Gemma 3/4, Llama 4, Qwen-VL) are read
// from there; the top level's dtype and quantization still count.
type Config struct {
	ModelType     string
	Architectures []string

	Hidden       int64
	Intermediate int64
	Layers       int64
	Heads        int64
	// KVHeads is num_key_value_heads (GQA/MQA); Heads when absent.
	KVHeads int64
	// HeadDim is head_dim when given, else Hidden / Heads.
	HeadDim int64
	Vocab   int64
	// TiedEmbeddings: the output layer shares the embedding's weights.
	TiedEmbeddings bool
	// MaxPosition is max_position_embeddings (vLLM's default
	// max_model_len), 0 when absent.
	MaxPosition int64
	// Dtype is torch_dtype (or dtype), "" when absent.
	Dtype string

	// Experts is the routed experts of a MoE layer (num_local_experts,
	// num_experts, n_routed_experts); 0 for a dense model.
	Experts int64
	// SharedExperts (n_shared_experts) and SharedIntermediate
	// (shared_expert_intermediate_size) are the always-active experts.
	SharedExperts      int64
	SharedIntermediate int64
	// MoEIntermediate is one expert's intermediate size
	// (moe_intermediate_size; Intermediate when absent).
	MoEIntermediate int64
	// DenseLayers are the first layers that are dense
	// (first_k_dense_replace).
	DenseLayers int64

	// MLA (DeepSeek V2/V3, Kimi K2): KVLoraRank > 0. One latent of
	// KVLoraRank + QKRopeHeadDim values per token and layer is cached.
	KVLoraRank    int64
	QLoraRank     int64
	QKRopeHeadDim int64
	QKNopeHeadDim int64
	VHeadDim      int64

	// SlidingWindow is the window of the sliding-window layers;
	// SlidingLayers how many of the Layers use it (0: none).
	SlidingWindow int64
	SlidingLayers int64
	// StateLayers are the layers of a hybrid model that keep a fixed-size
	// state instead of a KV cache (linear attention, Mamba: layer_types
	// other than attention, or all but every full_attention_interval-th
	// layer); they hold no per-token cache.
	StateLayers int64

	// Quant is the checkpoint's quantization (quantization_config), the
	// zero value when none.
	Quant Quantization
}

// Quantization is a checkpoint's quantization_config.
type Quantization struct {
	// Method is quant_method (awq, gptq, fp8, mxfp4, compressed-tensors,
	// bitsandbytes, ...), "" when the checkpoint is not quantized.
	Method string
	// Bits is the bits per quantized weight.
	Bits float64
	// ExpertsOnly: only the MoE experts are quantized (mxfp4 as gpt-oss
	// ships it: attention, router and embeddings stay bf16).
	ExpertsOnly bool
}

// ParseConfig reads a config.json.
func ParseConfig(data []byte) (*Config, error) {
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	raw := top
	if tc, ok := top["text_config"].(map[string]any); ok && num(top, "num_hidden_layers") == 0 {
		raw = map[string]any{}
		for k, v := range top {
			raw[k] = v
		}
		for k, v := range tc {
			raw[k] = v
		}
	}
	c := &Config{
		ModelType:       str(raw, "model_type"),
		Hidden:          num(raw, "hidden_size", "n_embd", "d_model"),
		Intermediate:    num(raw, "intermediate_size", "n_inner", "ffn_dim"),
		Layers:          num(raw, "num_hidden_layers", "n_layer", "num_layers"),
		Heads:           num(raw, "num_attention_heads", "n_head", "num_heads"),
		KVHeads:         num(raw, "num_key_value_heads", "num_kv_heads", "multi_query_group_num"),
		HeadDim:         num(raw, "head_dim"),
		Vocab:           num(raw, "vocab_size"),
		MaxPosition:     num(raw, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
		Dtype:           firstStr(top, raw, "torch_dtype", "dtype"),
		Experts:         num(raw, "num_local_experts", "n_routed_experts", "num_experts"),
		SharedExperts:   num(raw, "n_shared_experts"),
		MoEIntermediate: num(raw, "moe_intermediate_size"),
		DenseLayers:     num(raw, "first_k_dense_replace"),
		KVLoraRank:      num(raw, "kv_lora_rank"),
		QLoraRank:       num(raw, "q_lora_rank"),
		QKRopeHeadDim:   num(raw, "qk_rope_head_dim"),
		QKNopeHeadDim:   num(raw, "qk_nope_head_dim"),
		VHeadDim:        num(raw, "v_head_dim"),
	}
	c.SharedIntermediate = num(raw, "shared_expert_intermediate_size")
	for _, a := range anyList(raw["architectures"]) {
		if s, ok := a.(string); ok {
			c.Architectures = append(c.Architectures, s)
		}
	}
	c.TiedEmbeddings = boolean(raw, "tie_word_embeddings", tiedByDefault(c.ModelType))
	if c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 {
		return nil, errors.New("config.json: no hidden_size, num_hidden_layers or num_attention_heads: not a decoder model this check knows")
	}
	if c.KVHeads <= 0 {
		c.KVHeads = c.Heads
		if boolean(raw, "multi_query", false) {
			c.KVHeads = 1
		}
	}
	if c.HeadDim <= 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.Intermediate <= 0 {
		c.Intermediate = 4 * c.Hidden
	}
	if c.Experts > 0 && c.MoEIntermediate <= 0 {
		c.MoEIntermediate = c.Intermediate
	}
	if c.SharedIntermediate <= 0 && c.SharedExperts > 0 {
		c.SharedIntermediate = c.SharedExperts * c.MoEIntermediate
	}
	if b := c.paramsBound(); b > maxParams {
		return nil, fmt.Errorf("config.json: its sizes imply %.3g parameters: not a model this check knows", b)
	}
	c.readHybrid(raw)
	c.readSliding(raw)
	// layer_types longer than num_hidden_layers: no more special layers
	// than layers.
	c.SlidingLayers = min(c.SlidingLayers, c.Layers)
	c.StateLayers = min(c.StateLayers, c.Layers-c.SlidingLayers)
	c.Quant = readQuant(top)
	if c.Quant.Method == "" {
		c.Quant = readQuant(raw)
	}
	return c, nil
}

// tiedByDefault is transformers' default of tie_word_embeddings for a
// model_type when the config.json leaves it out: true for the Gemma
// family (GemmaConfig, Gemma2Config and Gemma3TextConfig default to
// tie_word_embeddings=True, and their Hub configs do not repeat it),
// false for the Llama-like configs this check reads otherwise, which
// state it when they tie.
func tiedByDefault(modelType string) bool {
	return strings.HasPrefix(modelType, "gemma")
}

// readHybrid counts the layers of a hybrid model that cache no tokens.
func (c *Config) readHybrid(raw map[string]any) {
	for _, t := range anyList(raw["layer_types"]) {
		if s, _ := t.(string); s != "" && (!strings.Contains(s, "attention") || strings.Contains(s, "linear")) {
			c.StateLayers++
		}
	}
	if n := num(raw, "full_attention_interval"); c.StateLayers == 0 && n > 1 {
		c.StateLayers = c.Layers - c.Layers/n
	}
}

// readSliding finds the sliding-window layers: layer_types when the
// config lists them (gpt-oss, Gemma 3n/4, Qwen3-Next), Gemma 2's
// alternation, Gemma 3's sliding_window_pattern, else every layer when
// sliding_window is set and use_sliding_window is not false (Mistral
// v0.1); Qwen2/Qwen3 configs carry a sliding_window they do not use.
func (c *Config) readSliding(raw map[string]any) {
	w := num(raw, "sliding_window")
	if w <= 0 || !boolean(raw, "use_sliding_window", true) {
		return
	}
	if w >= c.MaxPosition && c.MaxPosition > 0 {
		return
	}
	c.SlidingWindow = w
	if types := anyList(raw["layer_types"]); len(types) > 0 {
		for _, t := range types {
			if s, _ := t.(string); strings.Contains(s, "sliding") {
				c.SlidingLayers++
			}
		}
		return
	}
	switch {
	case c.ModelType == "gemma2":
		c.SlidingLayers = (c.Layers + 1) / 2
	case num(raw, "sliding_window_pattern") > 1:
		p := num(raw, "sliding_window_pattern")
		c.SlidingLayers = c.Layers - c.Layers/p
	case strings.HasPrefix(c.ModelType, "gemma3"):
		c.SlidingLayers = c.Layers - c.Layers/6
	default:
		c.SlidingLayers = c.Layers
	}
}

// readQuant reads quantization_config (or compression_config).
func readQuant(raw map[string]any) Quantization {
	qc, ok := raw["quantization_config"].(map[string]any)
	if !ok {
		if qc, ok = raw["compression_config"].(map[string]any); !ok {
			return Quantization{}
		}
	}
	method := strings.ToLower(str(qc, "quant_method"))
	q := Quantization{Method: method}
	switch method {
	case "fp8", "fbgemm_fp8", "modelopt":
		q.Bits = 8
		if algo := strings.ToLower(str(qc, "quant_algo")); strings.Contains(algo, "fp4") {
			q.Bits = 4.5
		}
	case "mxfp4":
		q.Bits, q.ExpertsOnly = 4.25, true
	case "bitsandbytes":
		q.Bits = 8
		if boolean(qc, "load_in_4bit", false) {
			q.Bits = 4.5
		}
	case "compressed-tensors":
		q.Bits = 8
		if groups, ok := qc["config_groups"].(map[string]any); ok {
			for _, g := range groups {
				gm, _ := g.(map[string]any)
				if w, ok := gm["weights"].(map[string]any); ok {
					if b := num(w, "num_bits"); b > 0 {
						q.Bits = float64(b)
					}
				}
			}
		}
	default:
		// awq, gptq, marlin, aqlm, ...: bits (w_bit), 4 by default; the
		// group scales add a little.
		b := num(qc, "bits", "w_bit", "weight_bits")
		if b <= 0 {
			b = 4
		}
		q.Bits = float64(b) + 0.25
	}
	if method == "" {
		return Quantization{}
	}
	return q
}

// maxDim bounds every size read from a config.json: a value outside
// 1..maxDim (negative, zero, 1e308, NaN) counts as absent. The largest
// real ones are max_position_embeddings of a few million tokens.
const maxDim = 1 << 26

// maxParams bounds the parameter count a config may imply (a thousand
// times the largest published model): above it the config is refused as
// not a model this check knows, and the integer arithmetic of Params
// cannot overflow.
const maxParams = 1e15

// num is the first of keys that holds a number in 1..maxDim (0 when
// none).
func num(m map[string]any, keys ...string) int64 {
	for _, k := range keys {
		var f float64
		switch v := m[k].(type) {
		case float64:
			f = v
		case json.Number:
			f, _ = v.Float64()
		default:
			continue
		}
		if f >= 1 && f <= maxDim {
			return int64(f)
		}
		return 0
	}
	return 0
}

// paramsBound is an upper bound of every term Params adds, computed in
// floating point so that it cannot overflow whatever the sizes.
func (c *Config) paramsBound() float64 {
	f := func(v ...int64) float64 {
		p := 1.0
		for _, x := range v {
			p *= float64(x)
		}
		return p
	}
	perLayer := 2*f(c.Hidden, c.Heads, c.HeadDim) + f(2, c.Hidden, c.KVHeads, c.HeadDim) +
		f(3, c.Hidden, c.Intermediate) + f(c.Hidden, c.Experts) +
		f(3, c.Hidden, c.Experts, c.MoEIntermediate) + f(3, c.Hidden, c.SharedIntermediate) +
		f(c.Hidden, c.QLoraRank) + f(c.QLoraRank+c.Hidden, c.Heads, c.QKNopeHeadDim+c.QKRopeHeadDim) +
		f(c.Hidden, c.KVLoraRank+c.QKRopeHeadDim) + f(c.KVLoraRank, c.Heads, c.QKNopeHeadDim+c.VHeadDim) +
		f(c.Heads, c.VHeadDim, c.Hidden)
	return f(c.Layers)*perLayer + f(2, c.Vocab, c.Hidden)
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// firstStr is the first of keys set in a, then in b.
func firstStr(a, b map[string]any, keys ...string) string {
	for _, m := range []map[string]any{a, b} {
		for _, k := range keys {
			if s := str(m, k); s != "" {
				return s
			}
		}
	}
	return ""
}

func boolean(m map[string]any, key string, def bool) bool {
	if b, ok := m[key].(bool); ok {
		return b
	}
	return def
}

func anyList(v any) []any {
	l, _ := v.([]any)
	return l
}
