package cpu

import (
	"math"

	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
)

// moeScratch is the mixture-of-experts FFN's per-step memory, grown to the
// largest step seen and reused.
type moeScratch struct {
	logits []float32 // router logits, tokens x Experts
	sel    []int32   // chosen experts, tokens x Used, best first
	wts    []float32 // their weights
	count  []int     // rows routed to each expert
	start  []int     // first entry of each expert in order
	order  []int32   // (token, slot) entries t*Used+j grouped by expert, tokens ascending
	xg     []float32 // an expert's gathered input rows
	gate   []float32 // its gate (then activation) rows
	up     []float32 // its up rows
	yg     []float32 // its down rows
	ys     []float32 // every (token, slot)'s weighted expert output
	probs  []float32 // one token's routing probabilities
}

// moeFFN computes the mixture-of-experts FFN of layer l for the step's
// total tokens, whose normalised inputs are xn, into out (total x Dim):
//
//	out[t] = sum_j w[t][j] · expert_{e[t][j]}(xn[t])   for the Used slots j, best first
//
// Routing (route) runs per token. The experts then run grouped: every row
// routed to expert e in the step, whatever its sequence and whether it is
// a prompt chunk or a decode token, is gathered, and e's gate/up/down
// products run once over those rows (kernels.MatMul picks the kernel by
// their count), and each result is scattered back to its (token, slot),
// weighted. The slots of a token are summed in slot order, as llama.cpp
// adds its expert views. A token's result does not depend on the others
// beyond what the products' kernel choice does: with
// kernels.BatchInvariant every product treats its rows independently, so
// the result is the same bits however the tokens are grouped.
func (b *Backend) moeFFN(li int, l *llama.Layer, total int, xn, out []float32) error {
	mp := b.m.HP.MoE
	ml := l.MoE
	D, E, K, F := b.m.HP.Dim, mp.Experts, mp.Used, mp.FFN
	ms := &b.moe
	s := &b.s
	ms.grow(total, D, E, K, F)
	logits := ms.logits[:total*E]
	if err := matMul(logits, ml.Router, xn, total, s); err != nil {
		return layerError(li, "MoE router", err)
	}
	sel, wts := ms.sel[:total*K], ms.wts[:total*K]
	for t := range total {
		lg := logits[t*E : (t+1)*E]
		if ml.RouterBias != nil {
			add(lg, ml.RouterBias)
		}
		route(mp, lg, sel[t*K:(t+1)*K], wts[t*K:(t+1)*K], ms.probs)
	}
	// Group the (token, slot) entries by expert, tokens in order.
	clear(ms.count)
	for _, e := range sel {
		ms.count[e]++
	}
	n := 0
	for e := range E {
		ms.start[e] = n
		n += ms.count[e]
	}
	next := ms.start[E : 2*E]
	copy(next, ms.start[:E])
	for i, e := range sel {
		ms.order[next[e]] = int32(i)
		next[e]++
	}
	ys := ms.ys[:total*K*D]
	for e := range E {
		rows := ms.order[ms.start[e] : ms.start[e]+ms.count[e]]
		if len(rows) == 0 {
			continue
		}
		r := len(rows)
		xg, gate, up, yg := ms.xg[:r*D], ms.gate[:r*F], ms.up[:r*F], ms.yg[:r*D]
		for i, ent := range rows {
			t := int(ent) / K
			copy(xg[i*D:(i+1)*D], xn[t*D:(t+1)*D])
		}
		if err := matMuls(r, xg, s, kernels.Product{Y: gate, W: ml.Gate[e]}, kernels.Product{Y: up, W: ml.Up[e]}); err != nil {
			return layerError(li, "MoE expert gate and up", err)
		}
		if ml.UpBias != nil {
			for i := range r {
				add(up[i*F:(i+1)*F], ml.UpBias[e])
				add(gate[i*F:(i+1)*F], ml.GateBias[e])
			}
		}
		if mp.SwiGLULimit != 0 {
			swigluOAI(gate, up, mp.SwiGLUAlpha, mp.SwiGLULimit)
		} else {
			siluMul(gate, up)
		}
		if err := matMul(yg, ml.Down[e], gate, r, s); err != nil {
			return layerError(li, "MoE expert down", err)
		}
		for i, ent := range rows {
			y := yg[i*D : (i+1)*D]
			if ml.DownBias != nil {
				add(y, ml.DownBias[e])
			}
			w := wts[ent]
			dst := ys[int(ent)*D : (int(ent)+1)*D]
			for c, v := range y {
				dst[c] = v * w
			}
		}
	}
	perTokens(total, K*D, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			o := out[t*D : (t+1)*D]
			copy(o, ys[t*K*D:(t*K+1)*D])
			for j := 1; j < K; j++ {
				add(o, ys[(t*K+j)*D:(t*K+j+1)*D])
			}
		}
	})
	return nil
}

func (ms *moeScratch) grow(total, D, E, K, F int) {
	if len(ms.count) != E {
		ms.count = make([]int, E)
		ms.start = make([]int, 2*E)
		ms.probs = make([]float32, E)
	}
	if len(ms.sel) >= total*K {
		return
	}
	c := max(total, 2*len(ms.sel)/K)
	ms.logits = make([]float32, c*E)
	ms.sel = make([]int32, c*K)
	ms.wts = make([]float32, c*K)
	ms.order = make([]int32, c*K)
	// An expert sees each token at most once.
	ms.xg = make([]float32, c*D)
	ms.yg = make([]float32, c*D)
	ms.gate = make([]float32, c*F)
	ms.up = make([]float32, c*F)
	ms.ys = make([]float32, c*K*D)
}

// route picks one token's experts from its router logits lg (with any
// router bias added) into sel (best first) and their weights into w,
// following llama.cpp's order of operations (build_moe_ffn) so that F32
// weights come out as ggml's:
//
//   - GatingSoftmax: p = softmax(lg) (max, exp(x-max), a float64 sum,
//     multiplication by float32(1/sum)); the len(sel) largest p; with
//     Norm, each divided by their float32 sum (a float64 sum rounded once,
//     as ggml_sum_rows), clamped below at 2^-14.
//   - GatingTopKSoftmax: the len(sel) largest logits, then the same
//     softmax over those logits in that order.
//
// Ties go to the lower expert index. probs is scratch of len(lg).
func route(mp llama.MoEParams, lg []float32, sel []int32, w []float32, probs []float32) {
	score := lg
	if mp.Gating == llama.GatingSoftmax {
		score = probs[:len(lg)]
		copy(score, lg)
		softmaxExact(score)
	}
	topK(score, sel)
	for j, e := range sel {
		w[j] = score[e]
	}
	switch mp.Gating {
	case llama.GatingTopKSoftmax:
		softmaxExact(w)
	case llama.GatingSoftmax:
		if mp.Norm {
			var sum float64
			for _, v := range w {
				sum += float64(v)
			}
			s := max(float32(sum), 6.103515625e-5)
			for j := range w {
				w[j] /= s
			}
		}
	}
}

// topK writes the indices of the len(sel) largest values of x into sel,
// largest first, ties to the lower index (a NaN counts as smallest).
func topK(x []float32, sel []int32) {
	for j := range sel {
		best := -1
		for i, v := range x {
			if taken(sel[:j], i) {
				continue
			}
			if best < 0 || v > x[best] || (x[best] != x[best] && v == v) {
				best = i
			}
		}
		sel[j] = int32(best)
	}
}

func taken(sel []int32, i int) bool {
	for _, e := range sel {
		if int(e) == i {
			return true
		}
	}
	return false
}

// softmaxExact replaces x by softmax(x) in ggml's scalar order: max,
// expf(x-max) (math.Exp rounded to float32), a float64 sum, each value
// multiplied by float32(1/sum). ggml takes this scalar path for rows of
// fewer than 16 values (the routers' 8 or 2); longer rows differ from its
// vector exponential by an ulp or so.
func softmaxExact(x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// swigluOAI sets gate[i] to gpt-oss's clamped SwiGLU of gate[i] and up[i]
// as ggml computes it: g = min(gate, limit), u = clamp(up, -limit, limit),
// g / (1 + expf(alpha·(-g))) · (u + 1).
func swigluOAI(gate, up []float32, alpha, limit float32) {
	for i, g := range gate {
		g = min(g, limit)
		u := min(max(up[i], -limit), limit)
		e := float32(math.Exp(float64(float32(alpha * -g))))
		glu := g / float32(1+e)
		gate[i] = glu * float32(u+1)
	}
}
