package llama

import "github.com/weft-inference/weft/runtime/quant"

// HParams are a model's hyper-parameters, read from GGUF metadata. What
// differs between the architectures is spelled out here and in Layer (norms
// present or not, window, rope base, scales, activation), set by the
// loader, so that a backend reads the model and never tests Arch.
type HParams struct {
	Arch       string // "llama", "qwen2", "qwen3" or "gemma3"
	VocabSize  int
	Dim        int // n_embd
	Layers     int
	Heads      int
	KVHeads    int
	HeadDim    int // attention.key_length, else Dim/Heads; may differ from Dim/Heads
	FFN        int // n_ff
	ContextLen int
	// RopeBase is the rotary base of the layers without one of their own
	// (see Layer.RopeBase, which the loader always sets).
	RopeBase float32
	// RopeNeox selects the NEOX rotation (pairs i and i+HeadDim/2, as qwen2,
	// qwen3 and gemma3 use); false rotates adjacent pairs (2i, 2i+1) as
	// llama does.
	RopeNeox bool
	// RopeScaling is non-nil for llama3-style frequency scaling.
	RopeScaling *Llama3Scaling
	// Yarn is non-nil for YaRN rotary scaling (gpt-oss).
	Yarn    *YaRN
	NormEps float32
	// EmbedScale, when not 0, multiplies every input embedding row (in
	// float32, after dequantization): gemma3's sqrt(n_embd).
	EmbedScale float32
	// QScale, when not 0, multiplies every query (in float32) before its
	// products with the keys (gemma3 scales q, not the scores).
	QScale float32
	// AttnScale multiplies the scores q·k before the softmax: 1/sqrt(HeadDim),
	// or 1 where QScale carries the scale.
	AttnScale float32
	// Act is the FFN's gate activation.
	Act Activation
	// FinalSoftcap, when not 0, caps the logits: cap·tanh(logit/cap)
	// (gemma3's final_logit_softcapping key; absent in Gemma 3 GGUFs).
	FinalSoftcap float32
	// MoE describes the mixture-of-experts FFN (qwen3moe, gpt-oss); its
	// Experts is 0 for a dense FFN.
	MoE MoEParams
}

// Activation is the gate activation of the FFN: out = act(gate)·up.
type Activation int

const (
	// ActSiLU is x·sigmoid(x) (llama, qwen2, qwen3).
	ActSiLU Activation = iota
	// ActGELUTanh is the tanh approximation of GELU, as ggml's CPU backend
	// computes it: through an F16 lookup table (gemma3).
	ActGELUTanh
)

func (a Activation) String() string {
	switch a {
	case ActSiLU:
		return "silu"
	case ActGELUTanh:
		return "gelu-tanh"
	}
	return "unknown"
}

// Llama3Scaling is the "llama3" rope frequency scaling.
type Llama3Scaling struct {
	Factor         float32
	LowFreqFactor  float32
	HighFreqFactor float32
	OrigContextLen int
}

// Layer holds one transformer block's weights and per-layer properties.
type Layer struct {
	AttnNorm   []float32
	Wq, Wk, Wv quant.Weight
	Bq, Bk, Bv []float32 // qwen2 only; nil otherwise
	// QNorm and KNorm, when non-nil (HeadDim values), are RMS norms applied
	// to each head of q and k before RoPE (qwen3, gemma3).
	QNorm, KNorm []float32
	Wo           quant.Weight
	// PostAttnNorm, when non-nil, is an RMS norm of the attention output
	// before it joins the residual stream (gemma3).
	PostAttnNorm []float32
	FFNNorm      []float32
	WGate, WUp   quant.Weight
	WDown        quant.Weight
	// PostFFNNorm, when non-nil, is an RMS norm of the FFN output before it
	// joins the residual stream (gemma3).
	PostFFNNorm []float32
	// Window, when not 0, makes the layer's attention sliding: a query at
	// position p sees the keys at positions p-Window+1 .. p.
	Window int
	// RopeBase is the layer's rotary base (gemma3's sliding layers have
	// their own).
	RopeBase float32
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
