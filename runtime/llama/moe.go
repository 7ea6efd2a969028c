package llama

import (
	"fmt"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// Gating is how a mixture-of-experts layer turns its router's logits into
// the weights of the experts it runs.
type Gating int

const (
	// GatingSoftmax: a softmax over every expert's logit, the Used largest
	// probabilities, renormalised to sum 1 when MoEParams.Norm is set
	// (qwen3moe; llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX).
	GatingSoftmax Gating = iota
	// GatingTopKSoftmax: the Used largest logits, then a softmax over those
	// alone (gpt-oss; llama.cpp's SOFTMAX_WEIGHT).
	GatingTopKSoftmax
)

func (g Gating) String() string {
	switch g {
	case GatingSoftmax:
		return "softmax"
	case GatingTopKSoftmax:
		return "top-k softmax"
	}
	return "unknown"
}

// MoEParams are the hyper-parameters of a mixture-of-experts FFN. Experts
// is 0 for a dense model.
type MoEParams struct {
	Experts int // expert_count
	Used    int // expert_used_count: experts run per token
	FFN     int // expert_feed_forward_length: each expert's hidden size
	Gating  Gating
	// Norm renormalises the selected weights of GatingSoftmax to sum 1
	// (their sum clamped below at 2^-14, as llama.cpp does).
	Norm bool
	// SwiGLULimit, when not 0, makes the experts' activation gpt-oss's
	// clamped SwiGLU: g' = min(g, limit), u' = clamp(u, -limit, limit),
	// out = g'·sigmoid(SwiGLUAlpha·g')·(u'+1). Otherwise it is silu(g)·u.
	// An infinite limit keeps the form without the clamps.
	SwiGLUAlpha, SwiGLULimit float32
}

// MoELayer holds one layer's router and experts. The experts' matrices are
// views into the stacked 3-D GGUF tensors (ffn_{gate,up,down}_exps):
// expert e's matrix is the e-th slice along the slowest dimension.
type MoELayer struct {
	Router     quant.Weight // ffn_gate_inp: Experts rows of Dim (F32 in llama-quantize's files)
	RouterBias []float32    // ffn_gate_inp.bias (gpt-oss); nil otherwise
	// Gate and Up are FFN x Dim, Down is Dim x FFN; one per expert.
	Gate, Up, Down []quant.Weight
	// GateBias, UpBias (FFN values) and DownBias (Dim values), one per
	// expert, are gpt-oss's expert biases; nil otherwise.
	GateBias, UpBias, DownBias [][]float32
}

// readMoEParams reads the expert counts of arch's MoE keys into hp.MoE.
func readMoEParams(f *gguf.File, hp *HParams) error {
	arch := hp.Arch
	get := func(key string) (int, error) {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			return 0, fmt.Errorf("llama: missing or invalid GGUF key %s.%s", arch, key)
		}
		if v == 0 || v > 1<<20 {
			return 0, fmt.Errorf("llama: GGUF key %s.%s = %d out of range", arch, key, v)
		}
		return int(v), nil
	}
	var err error
	mp := &hp.MoE
	if mp.Experts, err = get("expert_count"); err != nil {
		return err
	}
	if mp.Used, err = get("expert_used_count"); err != nil {
		return err
	}
	if mp.Used > mp.Experts {
		return fmt.Errorf("llama: %s uses %d of %d experts", arch, mp.Used, mp.Experts)
	}
	if mp.FFN, err = get("expert_feed_forward_length"); err != nil {
		return err
	}
	if w, ok := f.Float(arch + ".expert_weights_scale"); ok && w != 0 && w != 1 {
		return fmt.Errorf("%w: expert_weights_scale %g", ErrUnsupported, w)
	}
	if v, ok := f.Uint(arch + ".expert_shared_count"); ok && v != 0 {
		return fmt.Errorf("%w: %d shared experts", ErrUnsupported, v)
	}
	return nil
}

// expertWeights splits the 3-D tensor name (GGUF ne [cols, rows, n]) into
// n per-expert weights of rows x cols.
func expertWeights(f *gguf.File, name string, cols, rows, n int, used map[string]bool) ([]quant.Weight, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("llama: tensor %s is missing", name)
	}
	used[name] = true
	if len(t.Dims) != 3 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) || t.Dims[2] != uint64(n) {
		return nil, fmt.Errorf("llama: tensor %s has shape %v, want [%d %d %d]", name, t.Dims, cols, rows, n)
	}
	if !supportedTypes[t.Type] || !quant.Supported(t.Type) {
		return nil, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, name, t.Type)
	}
	rb, err := t.Type.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("llama: tensor %s: %w", name, err)
	}
	sz := rb * rows
	if len(t.Data) != sz*n {
		return nil, fmt.Errorf("llama: tensor %s has %d bytes, want %d", name, len(t.Data), sz*n)
	}
	out := make([]quant.Weight, n)
	for e := range out {
		out[e] = quant.Weight{Type: t.Type, Rows: rows, Cols: cols, Data: t.Data[e*sz : (e+1)*sz : (e+1)*sz]}
	}
	return out, nil
}

// expertBiases splits the 2-D F32/F16 tensor name (GGUF ne [cols, n]) into
// n bias vectors.
func expertBiases(f *gguf.File, name string, cols, n int, used map[string]bool) ([][]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("llama: tensor %s is missing", name)
	}
	used[name] = true
	if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(n) {
		return nil, fmt.Errorf("llama: tensor %s has shape %v, want [%d %d]", name, t.Dims, cols, n)
	}
	all, err := floatVector(name, t.Type, t.Data, cols*n)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, n)
	for e := range out {
		out[e] = all[e*cols : (e+1)*cols : (e+1)*cols]
	}
	return out, nil
}

// loadMoELayer reads layer i's router and experts (prefix p = "blk.i.").
// biases selects gpt-oss's router and expert biases. weight and vector
// are FromGGUF's checked readers.
func loadMoELayer(f *gguf.File, hp HParams, p string, biases bool, used map[string]bool,
	weight func(name string, cols, rows int) (quant.Weight, error),
	vector func(name string, n int, optional bool) ([]float32, error)) (*MoELayer, error) {
	mp := hp.MoE
	ml := &MoELayer{}
	var err error
	if ml.Router, err = weight(p+"ffn_gate_inp.weight", hp.Dim, mp.Experts); err != nil {
		return nil, err
	}
	exps := []struct {
		dst        *[]quant.Weight
		name       string
		cols, rows int
	}{
		{&ml.Gate, "ffn_gate_exps.weight", hp.Dim, mp.FFN},
		{&ml.Up, "ffn_up_exps.weight", hp.Dim, mp.FFN},
		{&ml.Down, "ffn_down_exps.weight", mp.FFN, hp.Dim},
	}
	for _, x := range exps {
		if *x.dst, err = expertWeights(f, p+x.name, x.cols, x.rows, mp.Experts, used); err != nil {
			return nil, err
		}
	}
	if !biases {
		return ml, nil
	}
	if ml.RouterBias, err = vector(p+"ffn_gate_inp.bias", mp.Experts, false); err != nil {
		return nil, err
	}
	bs := []struct {
		dst  *[][]float32
		name string
		n    int
	}{
		{&ml.GateBias, "ffn_gate_exps.bias", mp.FFN},
		{&ml.UpBias, "ffn_up_exps.bias", mp.FFN},
		{&ml.DownBias, "ffn_down_exps.bias", hp.Dim},
	}
	for _, x := range bs {
		if *x.dst, err = expertBiases(f, p+x.name, x.n, mp.Experts, used); err != nil {
			return nil, err
		}
	}
	return ml, nil
}

// swigluOAI holds gpt-oss's hard-coded activation constants (llama.cpp
// has no GGUF key for them).
const (
	swigluOAIAlpha = 1.702
	swigluOAILimit = 7
)
