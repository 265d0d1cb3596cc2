package modelfit

import (
	"strings"
)

// Params is a model's parameter count as its config implies it, split by
// what quantization treats differently.
type Params struct {
	// Embedding is the input embedding and, when not tied, the output
	// layer: quantization methods leave both at 16 bits.
	Embedding int64
	// Experts are the routed and shared experts' weights of MoE layers.
	Experts int64
	// Other are the attention and dense MLP weights (and the routers).
	Other int64
}

// Total is the whole parameter count.
func (p Params) Total() int64 { return p.Embedding + p.Experts + p.Other }

// Params counts the parameters: embeddings, per layer the attention
// projections (MLA's low-rank ones when KVLoraRank is set) and the gated
// MLP (three matrices), or, in a MoE layer, every expert's gated MLP, the
// shared experts and the router. Norms and biases are left out (well
// under 0.1%).
func (c *Config) Params() Params {
	var p Params
	p.Embedding = c.Vocab * c.Hidden
	if !c.TiedEmbeddings {
		p.Embedding *= 2
	}
	var attn int64
	if c.KVLoraRank > 0 {
		qHead := c.QKNopeHeadDim + c.QKRopeHeadDim
		if c.QLoraRank > 0 {
			attn += c.Hidden*c.QLoraRank + c.QLoraRank*c.Heads*qHead
		} else {
			attn += c.Hidden * c.Heads * qHead
		}
		attn += c.Hidden * (c.KVLoraRank + c.QKRopeHeadDim)
		attn += c.KVLoraRank * c.Heads * (c.QKNopeHeadDim + c.VHeadDim)
		attn += c.Heads * c.VHeadDim * c.Hidden
	} else {
		attn = c.Hidden*c.Heads*c.HeadDim + 2*c.Hidden*c.KVHeads*c.HeadDim + c.Heads*c.HeadDim*c.Hidden
	}
	p.Other = c.Layers * attn
	dense := 3 * c.Hidden * c.Intermediate
	if c.Experts <= 0 {
		p.Other += c.Layers * dense
		return p
	}
	moeLayers := c.Layers - min(c.DenseLayers, c.Layers)
	p.Other += (c.Layers - moeLayers) * dense
	p.Other += moeLayers * c.Hidden * c.Experts // routers
	p.Experts = moeLayers * (c.Experts*3*c.Hidden*c.MoEIntermediate + 3*c.Hidden*c.SharedIntermediate)
	return p
}

// dtypeBytes is the size of one value of a torch dtype name ("bfloat16",
// "float16", "half", "float32", "fp8_e4m3", ...), 2 when unknown.
func dtypeBytes(dtype string) float64 {
	d := strings.ToLower(strings.TrimPrefix(dtype, "torch."))
	switch {
	case d == "float32" || d == "float" || d == "fp32":
		return 4
	case strings.HasPrefix(d, "fp8") || strings.HasPrefix(d, "float8") || d == "int8":
		return 1
	default:
		return 2
	}
}

// servedDtype is the dtype vLLM loads the weights in: --dtype when set
// and not auto, else the config's torch_dtype, with float32 served as
// bfloat16 (vLLM's auto: FP32 checkpoints run in 16 bits).
func servedDtype(flag, config string) string {
	if flag != "" && flag != "auto" {
		return flag
	}
	if config == "" || dtypeBytes(config) == 4 {
		return "bfloat16"
	}
	return config
}

// onTheFly is the bits per weight of a --quantization vLLM applies while
// loading an unquantized checkpoint (fp8, bitsandbytes), 0 for none or a
// method that needs a quantized checkpoint.
func onTheFly(method string) float64 {
	switch strings.ToLower(method) {
	case "fp8", "fbgemm_fp8", "ptpc_fp8", "experts_int8":
		return 8
	case "bitsandbytes":
		return 4.5
	}
	return 0
}

// WeightBytes is what the weights take in GPU memory, all GPUs together:
// the parameters at the served dtype, the quantized ones at their bits.
func (c *Config) WeightBytes(dtypeFlag, quantFlag string) float64 {
	p := c.Params()
	full := dtypeBytes(servedDtype(dtypeFlag, c.Dtype))
	q := c.Quant
	if q.Method == "" {
		if b := onTheFly(quantFlag); b > 0 {
			q = Quantization{Method: quantFlag, Bits: b}
		}
	}
	if q.Method == "" {
		return float64(p.Total()) * full
	}
	qb := q.Bits / 8
	if q.ExpertsOnly {
		return float64(p.Embedding+p.Other)*full + float64(p.Experts)*qb
	}
	return float64(p.Embedding)*full + float64(p.Experts+p.Other)*qb
}

// IndexWeightBytes turns a checkpoint index's total_size into the bytes
// the weights take once loaded: as stored for a quantized checkpoint,
// else scaled from the stored dtype to the served one (a float32
// checkpoint served in 16 bits takes half) or by an on-the-fly
// quantization.
func (c *Config) IndexWeightBytes(total int64, dtypeFlag, quantFlag string) float64 {
	if c.Quant.Method != "" {
		return float64(total)
	}
	stored := dtypeBytes(c.Dtype)
	if c.Dtype == "" {
		stored = 2
	}
	b := float64(total) * dtypeBytes(servedDtype(dtypeFlag, c.Dtype)) / stored
	if q := onTheFly(quantFlag); q > 0 {
		// Embeddings stay at 16 bits: scale only the rest.
		p := c.Params()
		if t := p.Total(); t > 0 {
			emb := b * float64(p.Embedding) / float64(t)
			b = emb + (b-emb)*(q/8)/dtypeBytes(servedDtype(dtypeFlag, c.Dtype))
		}
	}
	return b
}
