package cuda

import (
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/quant"
)

// This file holds the pure arithmetic of the backend (no cgo): memory sizes
// for the KV sizing of cmd/weft, shape checks, and the RoPE frequencies.

// supported lists the weight types the device dequantizer handles.
var supported = map[gguf.Type]bool{
	gguf.TypeF32: true, gguf.TypeF16: true, gguf.TypeBF16: true,
	gguf.TypeQ8_0: true, gguf.TypeQ4_0: true, gguf.TypeQ4_K: true, gguf.TypeQ6_K: true,
}

// attnMaxHeadDim is the largest head dimension the attention kernel takes
// (ATT_MAX_HD in kernels/attention.cuh).
const attnMaxHeadDim = 256

// maxSplit is the most pieces attention cuts a token's keys into, and
// splitKeys the fewest keys of a piece (attention.cuh: ATT_MAX_PIECES,
// ATT_PIECE_KEYS).
const (
	maxSplit  = 16
	splitKeys = 128
)

// WeightBytes is the device memory NewBackend takes for m's weights: every
// matrix as F16, the token embedding in its stored form, norms and biases
// as F32.
func WeightBytes(m *llama.Model) int64 {
	f16 := func(w quant.Weight) int64 { return int64(w.Rows) * int64(w.Cols) * 2 }
	n := int64(len(m.TokEmbd.Data)) + f16(m.Output) + 4*int64(len(m.OutNorm))
	for _, l := range m.Layers {
		n += f16(l.Wq) + f16(l.Wk) + f16(l.Wv) + f16(l.Wo) + f16(l.WGate) + f16(l.WUp) + f16(l.WDown)
		n += 4 * int64(len(l.AttnNorm)+len(l.FFNNorm)+len(l.Bq)+len(l.Bk)+len(l.Bv))
	}
	return n
}

// workspace is the activation buffer layout for tokens T and logit rows S.
type workspace struct {
	x, xn, qkv, att, gu, hff, part int64 // bytes
	xo, logits, ids                int64
}

func newWorkspace(hp llama.HParams, T, S int) workspace {
	t, s := int64(T), int64(S)
	qdim, kvdim := int64(hp.Heads*hp.HeadDim), int64(hp.KVHeads*hp.HeadDim)
	return workspace{
		x:      4 * t * int64(hp.Dim),
		xn:     2 * t * int64(hp.Dim),
		qkv:    4 * t * (qdim + 2*kvdim),
		att:    2 * t * qdim,
		gu:     4 * t * 2 * int64(hp.FFN),
		hff:    2 * t * int64(hp.FFN),
		part:   4 * t * int64(hp.Heads) * maxSplit * int64(hp.HeadDim+2),
		xo:     2 * s * int64(hp.Dim),
		logits: 4 * s * int64(hp.VocabSize),
		ids:    8 * s,
	}
}

func (w workspace) total() int64 {
	return w.x + w.xn + w.qkv + w.att + w.gu + w.hff + w.part + w.xo + w.logits + w.ids
}

// WorkspaceBytes is the activation workspace for steps of up to
// maxBatchTokens tokens and maxSeqs sequences (without the small per-step
// index buffer).
func WorkspaceBytes(hp llama.HParams, maxBatchTokens, maxSeqs int) int64 {
	return newWorkspace(hp, maxBatchTokens, maxSeqs).total()
}

// checkModel rejects models the kernels cannot run, before any upload.
func checkModel(m *llama.Model) error {
	hp := m.HP
	switch {
	case hp.Dim <= 0 || hp.Layers <= 0 || hp.Heads <= 0 || hp.KVHeads <= 0 || hp.HeadDim <= 0 || hp.FFN <= 0 || hp.VocabSize <= 0:
		return fmt.Errorf("cuda: bad hyper-parameters %+v", hp)
	case hp.Heads%hp.KVHeads != 0:
		return fmt.Errorf("cuda: %d heads not a multiple of %d kv heads", hp.Heads, hp.KVHeads)
	case hp.HeadDim%2 != 0 || hp.HeadDim > attnMaxHeadDim:
		return fmt.Errorf("cuda: head dim %d unsupported (even, at most %d)", hp.HeadDim, attnMaxHeadDim)
	case len(m.Layers) != hp.Layers:
		return fmt.Errorf("cuda: %d layers, hyper-parameters say %d", len(m.Layers), hp.Layers)
	case len(m.OutNorm) != hp.Dim:
		return fmt.Errorf("cuda: output norm has %d values, want %d", len(m.OutNorm), hp.Dim)
	}
	if what := missingFeature(m); what != "" {
		return fmt.Errorf("cuda: %w: %s (architecture %s) is not implemented on the GPU; run it on the CPU backend", llama.ErrUnsupported, what, hp.Arch)
	}
	qdim, kvdim := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	check := func(what string, w quant.Weight, rows, cols int) error {
		if !supported[w.Type] {
			return fmt.Errorf("cuda: %s: tensor type %v not supported on the GPU (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K are)", what, w.Type)
		}
		if w.Rows != rows || w.Cols != cols {
			return fmt.Errorf("cuda: %s is %dx%d, want %dx%d", what, w.Rows, w.Cols, rows, cols)
		}
		rb, err := w.Type.RowBytes(w.Cols)
		if err != nil {
			return fmt.Errorf("cuda: %s: %w", what, err)
		}
		if len(w.Data) != rb*w.Rows {
			return fmt.Errorf("cuda: %s holds %d bytes, want %d", what, len(w.Data), rb*w.Rows)
		}
		return nil
	}
	if err := check("token_embd", m.TokEmbd, hp.VocabSize, hp.Dim); err != nil {
		return err
	}
	if err := check("output", m.Output, hp.VocabSize, hp.Dim); err != nil {
		return err
	}
	for i, l := range m.Layers {
		for _, c := range []struct {
			n          string
			w          quant.Weight
			rows, cols int
		}{
			{"attn_q", l.Wq, qdim, hp.Dim}, {"attn_k", l.Wk, kvdim, hp.Dim}, {"attn_v", l.Wv, kvdim, hp.Dim},
			{"attn_output", l.Wo, hp.Dim, qdim}, {"ffn_gate", l.WGate, hp.FFN, hp.Dim},
			{"ffn_up", l.WUp, hp.FFN, hp.Dim}, {"ffn_down", l.WDown, hp.Dim, hp.FFN},
		} {
			if err := check(fmt.Sprintf("blk.%d.%s", i, c.n), c.w, c.rows, c.cols); err != nil {
				return err
			}
		}
		if len(l.AttnNorm) != hp.Dim || len(l.FFNNorm) != hp.Dim {
			return fmt.Errorf("cuda: blk.%d norms have %d/%d values, want %d", i, len(l.AttnNorm), len(l.FFNNorm), hp.Dim)
		}
		hasB := l.Bq != nil || l.Bk != nil || l.Bv != nil
		if hasB && (len(l.Bq) != qdim || len(l.Bk) != kvdim || len(l.Bv) != kvdim) {
			return fmt.Errorf("cuda: blk.%d q/k/v biases have %d/%d/%d values, want %d/%d/%d", i, len(l.Bq), len(l.Bk), len(l.Bv), qdim, kvdim, kvdim)
		}
	}
	return nil
}

// missingFeature names the first property of m that the GPU kernels do not
// implement (they run the llama block: no per-head or post norms, one rope
// base, full attention, SiLU, unscaled embeddings and logits), or "".
func missingFeature(m *llama.Model) string {
	hp := m.HP
	switch {
	case hp.EmbedScale != 0:
		return "input embedding scaling"
	case hp.QScale != 0 || hp.AttnScale != 0 && math.Abs(float64(hp.AttnScale)*math.Sqrt(float64(hp.HeadDim))-1) > 1e-6:
		return "an attention scale other than 1/sqrt(head_dim)"
	case hp.Act != llama.ActSiLU:
		return "the " + hp.Act.String() + " activation"
	case hp.FinalSoftcap != 0:
		return "final logit softcapping"
	case hp.MoE.Experts > 0:
		return "the mixture-of-experts FFN"
	case hp.Yarn != nil:
		return "YaRN rotary scaling"
	}
	for _, l := range m.Layers {
		switch {
		case l.QNorm != nil || l.KNorm != nil:
			return "per-head q/k RMS norms"
		case l.PostAttnNorm != nil || l.PostFFNNorm != nil:
			return "post-attention and post-FFN norms"
		case l.Window != 0:
			return "sliding-window attention"
		case l.RopeBase != 0 && l.RopeBase != hp.RopeBase:
			return "per-layer rope bases"
		case l.MoE != nil:
			return "the mixture-of-experts FFN"
		case l.Sinks != nil:
			return "attention sinks"
		case l.Bo != nil:
			return "the attention output bias"
		}
	}
	return ""
}

// ropeThetaScale is base^(-2/HeadDim), the factor between successive
// rotary frequencies (the CPU backend uses the same float32 value).
func ropeThetaScale(hp llama.HParams) float32 {
	return float32(math.Pow(float64(hp.RopeBase), -2.0/float64(hp.HeadDim)))
}

// attnSplit is the attention grid's depth for a step whose longest
// sequence ends at maxLen: the most pieces any token's keys are cut into
// (attention.cuh's att_pieces: pieces of at least splitKeys keys, at most
// maxSplit), rounded up to a power of two so that a growing decode batch
// meets few distinct grids (each is a CUDA graph of its own). Blocks past a
// token's own pieces return at once; the pieces depend on the token's own
// length only, so attention is batch-invariant.
func attnSplit(maxLen int) int {
	n := min(maxSplit, (maxLen+splitKeys-1)/splitKeys)
	p := 1
	for p < n {
		p *= 2
	}
	return p
}
