package llama

import "github.com/weft-inference/weft/runtime/quant"

// HParams are a model's hyper-parameters, read from GGUF metadata.
type HParams struct {
	Arch       string // "llama" or "qwen2"
	VocabSize  int
	Dim        int // n_embd
	Layers     int
	Heads      int
	KVHeads    int
	HeadDim    int
	FFN        int // n_ff
	ContextLen int
	RopeBase   float32
	// RopeNeox selects the NEOX rotation (pairs i and i+HeadDim/2, as qwen2
	// uses); false rotates adjacent pairs (2i, 2i+1) as llama does.
	RopeNeox bool
	// RopeScaling is non-nil for llama3-style frequency scaling.
	RopeScaling *Llama3Scaling
	// Yarn is non-nil for YaRN rotary scaling (gpt-oss).
	Yarn    *YaRN
	NormEps float32
	// MoE describes the mixture-of-experts FFN (qwen3moe, gpt-oss); its
	// Experts is 0 for a dense FFN.
	MoE MoEParams
}

// Llama3Scaling is the "llama3" rope frequency scaling.
type Llama3Scaling struct {
	Factor         float32
	LowFreqFactor  float32
	HighFreqFactor float32
	OrigContextLen int
}

// Layer holds one transformer block's weights.
type Layer struct {
	AttnNorm   []float32
	Wq, Wk, Wv quant.Weight
	Bq, Bk, Bv []float32 // qwen2 only; nil otherwise
	Wo         quant.Weight
	FFNNorm    []float32
	WGate, WUp quant.Weight
	WDown      quant.Weight
	// MoE, when non-nil, replaces the dense FFN (WGate, WUp and WDown are
	// then empty).
	MoE *MoELayer
	// Bo, when non-nil (Dim values), is added to the attention output
	// projection (gpt-oss).
	Bo []float32
	// Sinks, when non-nil (Heads values), are per-head attention sinks
	// (gpt-oss): a logit that joins each softmax without a value.
	Sinks []float32
}

// Model holds a Llama-family model's weights. The byte slices usually point
// into the memory-mapped GGUF file.
type Model struct {
	HP      HParams
	TokEmbd quant.Weight // Rows = VocabSize, Cols = Dim
	Layers  []Layer
	OutNorm []float32
	Output  quant.Weight // equals TokEmbd when the output is tied
	// RopeFreqs, when non-nil (HeadDim/2 values), divides each rotary
	// frequency: the rope_freqs.weight tensor, or factors computed from
	// HP.RopeScaling.
	RopeFreqs []float32
}
