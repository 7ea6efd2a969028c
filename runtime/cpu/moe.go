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
	ps     []kernels.Product
}

// moeGroupRows is the number of gathered rows (token, expert) the expert
// buffers hold beyond one step's tokens: the experts of a decode step of
// up to moeGroupRows/Used sequences run as one group.
const moeGroupRows = 512

// moeRows is the row capacity of the gathered expert buffers for a step of
// total tokens with used experts each: every row of the step up to
// moeGroupRows, and at least total (the most one expert can be routed).
func moeRows(total, used int) int { return max(total, min(total*used, moeGroupRows)) }

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
	// The experts run in groups of consecutive experts whose rows fit
	// the gathered buffers (moeGroupRows, or one expert's rows): each
	// group's gate and up products are one parallel job, and its down
	// products another, so a step of many experts with a few rows each
	// hands the worker pool two jobs per group, not three per expert.
	rowsCap := len(ms.xg) / D
	ps := ms.ps[:0]
	for e0 := 0; e0 < E; {
		e1, r := e0, 0
		for e1 < E && (r == 0 || r+ms.count[e1] <= rowsCap) {
			r += ms.count[e1]
			e1++
		}
		base := ms.start[e0]
		rows := ms.order[base : base+r]
		e0g := e0
		e0 = e1
		if r == 0 {
			continue
		}
		xg, gate, up, yg := ms.xg[:r*D], ms.gate[:r*F], ms.up[:r*F], ms.yg[:r*D]
		for i, ent := range rows {
			t := int(ent) / K
			copy(xg[i*D:(i+1)*D], xn[t*D:(t+1)*D])
		}
		ps = ps[:0]
		for e := e0g; e < e1; e++ {
			if c := ms.count[e]; c > 0 {
				i0 := ms.start[e] - base
				ps = append(ps,
					kernels.Product{Y: gate[i0*F : (i0+c)*F], W: ml.Gate[e], X: xg[i0*D : (i0+c)*D], N: c},
					kernels.Product{Y: up[i0*F : (i0+c)*F], W: ml.Up[e], X: xg[i0*D : (i0+c)*D], N: c})
			}
		}
		if err := matMulsRagged(xg, ps); err != nil {
			return layerError(li, "MoE expert gate and up", err)
		}
		if ml.UpBias != nil {
			for e := e0g; e < e1; e++ {
				for i := ms.start[e] - base; i < ms.start[e]-base+ms.count[e]; i++ {
					add(up[i*F:(i+1)*F], ml.UpBias[e])
					add(gate[i*F:(i+1)*F], ml.GateBias[e])
				}
			}
		}
		if mp.SwiGLULimit != 0 {
			swigluOAI(gate, up, mp.SwiGLUAlpha, mp.SwiGLULimit)
		} else {
			siluMul(gate, up)
		}
		ps = ps[:0]
		for e := e0g; e < e1; e++ {
			if c := ms.count[e]; c > 0 {
				i0 := ms.start[e] - base
				ps = append(ps, kernels.Product{Y: yg[i0*D : (i0+c)*D], W: ml.Down[e], X: gate[i0*F : (i0+c)*F], N: c})
			}
		}
		if err := matMulsRagged(gate, ps); err != nil {
			return layerError(li, "MoE expert down", err)
		}
		for e := e0g; e < e1; e++ {
			for i := ms.start[e] - base; i < ms.start[e]-base+ms.count[e]; i++ {
				ent := rows[i]
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
	}
	ms.ps = ps[:0]
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
	r := moeRows(c, K)
	ms.xg = make([]float32, r*D)
	ms.yg = make([]float32, r*D)
	ms.gate = make([]float32, r*F)
	ms.up = make([]float32, r*F)
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
// g / (1 + expf(alpha·(-g))) · (u + 1) (kernels.SwiGLUOAI: vectorised).
func swigluOAI(gate, up []float32, alpha, limit float32) { kernels.SwiGLUOAI(gate, up, alpha, limit) }
