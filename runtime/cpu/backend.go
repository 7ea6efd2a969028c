package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
)

// Backend runs a llama.Model on the CPU with a paged KV cache. Forward must not
// be called concurrently (the scheduler's single step loop calls it).
type Backend struct {
	m     *llama.Model
	cfg   Config
	kvDim int
	qDim  int
	f16   bool
	q8    bool
	// KV pool per slot of a layer group (layout.Size slots; layer li is in
	// slot layout.Slot[li]): NumBlocks*BlockSize*kvDim elements, one of the
	// three sets is used depending on the KV type. With one group a slot is
	// a layer. A Q8_0 cache keeps the int8 elements (k8, v8) at the
	// elements' offsets and one scale per kernels.KVQ8Block elements (kd,
	// vd; element i's is at i/KVQ8Block).
	k16, v16 [][]uint16
	k32, v32 [][]float32
	k8, v8   [][]int8
	kd, vd   [][]float32
	kvMem    *kvMem // the memory of all of them
	layout   batch.KVLayout

	// thetaScales holds base^(-2/headDim) for each distinct rotary base of
	// the layers (rope multiplies the angle by it once per dimension pair,
	// as ggml does); layerRope[li] indexes layer li's. yarns[i], when the
	// model has YaRN scaling, holds its rotation parameters for base i.
	thetaScales []float32
	yarns       []*yarnRope
	layerRope   []int
	// attnScale multiplies the scores q·k before the softmax.
	attnScale float32

	s     scratch
	moe   moeScratch
	attnW []attnWorker
}

// scratch is per-step memory, grown to the largest batch seen and reused.
type scratch struct {
	cap               int
	x, xn, q, k, v    []float32
	att, gate, up, tm []float32
	rope              []float32 // per token: cos, sin of each rotary pair
	xr                []float32 // F16-rounded matmul input
	h16               []uint16  // F16 conversion scratch (matmul input, K and V)
	lastX, lastOut    []float32
	starts            []int // first token of each sequence
}

type attnWorker struct {
	attn []float32 // kernels.AttendF16/AttendF32 scratch
	// attendChunk's: one KV head's K rows of the current sequence in
	// panels, its V rows, one block's K rows, kernels.AttendChunk scratch.
	kt, v, row, sc []float32
}

var _ batch.Backend = (*Backend)(nil)

// New allocates the KV pool for m.
func New(m *llama.Model, cfg Config) (*Backend, error) {
	if err := cfg.validate(m.HP); err != nil {
		return nil, err
	}
	hp := m.HP
	b := &Backend{m: m, cfg: cfg, kvDim: hp.KVHeads * hp.HeadDim, qDim: hp.Heads * hp.HeadDim, f16: cfg.KVType == "f16", q8: cfg.KVType == "q8_0"}
	windows := make([]int, len(m.Layers))
	for li, l := range m.Layers {
		windows[li] = l.Window
	}
	b.layout = batch.NewKVLayout(windows, cfg.SlidingKV)
	n := cfg.NumBlocks * cfg.BlockSize * b.kvDim
	b.kvMem = &kvMem{}
	attachKVMem(b, b.kvMem)
	for range b.layout.Size {
		switch {
		case b.q8:
			b.k8 = append(b.k8, kvAlloc[int8](b.kvMem, n))
			b.v8 = append(b.v8, kvAlloc[int8](b.kvMem, n))
			b.kd = append(b.kd, kvAlloc[float32](b.kvMem, n/kernels.KVQ8Block))
			b.vd = append(b.vd, kvAlloc[float32](b.kvMem, n/kernels.KVQ8Block))
		case b.f16:
			b.k16 = append(b.k16, kvAlloc[uint16](b.kvMem, n))
			b.v16 = append(b.v16, kvAlloc[uint16](b.kvMem, n))
		default:
			b.k32 = append(b.k32, kvAlloc[float32](b.kvMem, n))
			b.v32 = append(b.v32, kvAlloc[float32](b.kvMem, n))
		}
	}
	var bases []float32
	for _, l := range m.Layers {
		base := l.RopeBase
		if base == 0 {
			base = hp.RopeBase
		}
		i := slices.Index(bases, base)
		if i < 0 {
			i = len(bases)
			bases = append(bases, base)
			b.thetaScales = append(b.thetaScales, float32(math.Pow(float64(base), -2.0/float64(hp.HeadDim))))
			var y *yarnRope
			if hp.Yarn != nil {
				y = newYarnRope(*hp.Yarn, hp.HeadDim, base)
			}
			b.yarns = append(b.yarns, y)
		}
		b.layerRope = append(b.layerRope, i)
	}
	b.attnScale = hp.AttnScale
	if b.attnScale == 0 {
		b.attnScale = float32(1 / math.Sqrt(float64(hp.HeadDim)))
	}
	b.attnW = make([]attnWorker, max(cfg.Threads, kernels.Workers()))
	return b, nil
}

// KV describes the pool.
func (b *Backend) KV() batch.KVInfo {
	return batch.KVInfo{
		BlockSize:     b.cfg.BlockSize,
		NumBlocks:     b.cfg.NumBlocks,
		BytesPerBlock: kvBlockBytes(b.layout.Size, b.kvDim, b.cfg.BlockSize, b.cfg.KVType),
		Windows:       b.layout.Windows,
		Type:          b.cfg.KVType,
	}
}

// KVResident is how many bytes of the KV pool are in memory: on Linux the
// pool is mapped outside the Go heap and populated when allocated, so this
// is the whole pool (KV's NumBlocks x BytesPerBlock, to the page) until
// Close gives it back. ok is false where the pool is Go memory.
func (b *Backend) KVResident() (bytes int64, ok bool) {
	if b.kvMem == nil {
		return 0, false
	}
	return b.kvMem.resident()
}

// Name is "cpu" with the KV type and thread count.
func (b *Backend) Name() string {
	return fmt.Sprintf("cpu (kv %s, %d threads)", b.cfg.KVType, b.cfg.Threads)
}

// DraftLogits reports that Forward honours SeqStep.Draft.
func (b *Backend) DraftLogits() bool { return true }

// HiddenSize is the model's width: Forward honours SeqStep.Hidden.
func (b *Backend) HiddenSize() int { return b.m.HP.Dim }

var _ batch.HiddenStates = (*Backend)(nil)

var _ batch.DraftLogits = (*Backend)(nil)

// Close drops the KV pool and gives its memory back (kvMem.drop).
func (b *Backend) Close() error {
	b.k16, b.v16, b.k32, b.v32, b.k8, b.v8, b.kd, b.vd = nil, nil, nil, nil, nil, nil, nil, nil
	if b.kvMem != nil {
		b.kvMem.drop()
	}
	return nil
}

// ErrBadStep is wrapped by Forward's errors for malformed SeqSteps.
var ErrBadStep = errors.New("cpu: invalid step")

func (b *Backend) checkStep(seqs []batch.SeqStep, logits [][]float32) (int, error) {
	if len(logits) != len(seqs) {
		return 0, fmt.Errorf("%w: %d logits slots for %d sequences", ErrBadStep, len(logits), len(seqs))
	}
	if b.k16 == nil && b.k32 == nil && b.k8 == nil {
		return 0, errors.New("cpu: backend is closed")
	}
	total := 0
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return 0, fmt.Errorf("%w: sequence %d has no tokens", ErrBadStep, s.Seq)
		}
		if s.Pos < 0 {
			return 0, fmt.Errorf("%w: sequence %d has position %d", ErrBadStep, s.Seq, s.Pos)
		}
		if err := b.checkTables(s); err != nil {
			return 0, err
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= b.m.HP.VocabSize {
				return 0, fmt.Errorf("%w: sequence %d: token %d out of range [0, %d)", ErrBadStep, s.Seq, t, b.m.HP.VocabSize)
			}
		}
		if s.Draft < 0 || s.Draft >= len(s.Tokens) || (s.Draft > 0 && !s.Logits) {
			return 0, fmt.Errorf("%w: sequence %d: %d drafts among %d tokens (Logits %v)", ErrBadStep, s.Seq, s.Draft, len(s.Tokens), s.Logits)
		}
		if s.Hidden != nil && len(s.Hidden) != len(s.Tokens)*b.m.HP.Dim {
			return 0, fmt.Errorf("%w: sequence %d: hidden slot has %d entries, want %d", ErrBadStep, s.Seq, len(s.Hidden), len(s.Tokens)*b.m.HP.Dim)
		}
		if logits[i] != nil && len(logits[i]) != (s.Draft+1)*b.m.HP.VocabSize {
			return 0, fmt.Errorf("%w: sequence %d: logits slot has %d entries, want %d", ErrBadStep, s.Seq, len(logits[i]), (s.Draft+1)*b.m.HP.VocabSize)
		}
		total += len(s.Tokens)
	}
	return total, nil
}

// checkTables checks that s's block tables cover its positions with
// blocks of the pool, in every row a layer of the table's group reads or
// writes this step.
func (b *Backend) checkTables(s batch.SeqStep) error {
	end := s.Pos + len(s.Tokens)
	if b.layout.Windows == nil {
		return b.checkTable(s.Seq, "", s.Blocks, 0, end)
	}
	if len(s.Tables) != len(b.layout.Windows) {
		return fmt.Errorf("%w: sequence %d: %d block tables for %d layer groups", ErrBadStep, s.Seq, len(s.Tables), len(b.layout.Windows))
	}
	for g, w := range b.layout.Windows {
		if err := b.checkTable(s.Seq, fmt.Sprintf("group %d ", g), s.Tables[g], batch.FirstRow(w, b.cfg.BlockSize, s.Pos), end); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) checkTable(seq uint64, what string, table []int32, first, end int) error {
	bs := b.cfg.BlockSize
	if len(table)*bs < end {
		return fmt.Errorf("%w: sequence %d: %d blocks cover %d positions, need %d", ErrBadStep, seq, len(table), len(table)*bs, end)
	}
	for _, blk := range table[first : (end+bs-1)/bs] {
		if blk < 0 || int(blk) >= b.cfg.NumBlocks {
			return fmt.Errorf("%w: sequence %d: %sblock %d out of range [0, %d)", ErrBadStep, seq, what, blk, b.cfg.NumBlocks)
		}
	}
	return nil
}

// table is the block table layer li reads and writes for s.
func (b *Backend) table(s *batch.SeqStep, li int) []int32 {
	if b.layout.Windows == nil {
		return s.Blocks
	}
	return s.Tables[b.layout.Group[li]]
}

func (b *Backend) grow(total, nLogits int) {
	hp := b.m.HP
	s := &b.s
	if total > s.cap {
		c := max(total, 2*s.cap)
		s.cap = c
		s.x = make([]float32, c*hp.Dim)
		s.xn = make([]float32, c*hp.Dim)
		s.tm = make([]float32, c*hp.Dim)
		s.q = make([]float32, c*b.qDim)
		s.att = make([]float32, c*b.qDim)
		s.k = make([]float32, c*b.kvDim)
		s.v = make([]float32, c*b.kvDim)
		s.gate = make([]float32, c*hp.FFN)
		s.up = make([]float32, c*hp.FFN)
		s.rope = make([]float32, c*hp.HeadDim*len(b.thetaScales))
		s.xr = make([]float32, c*max(hp.Dim, hp.FFN, hp.MoE.FFN, b.qDim))
		s.h16 = make([]uint16, c*max(hp.Dim, hp.FFN, hp.MoE.FFN, b.qDim, 2*b.kvDim))
	}
	if nLogits*hp.Dim > len(s.lastX) {
		s.lastX = make([]float32, nLogits*hp.Dim)
		s.lastOut = make([]float32, nLogits*hp.VocabSize)
	}
}

// Forward runs one step for a ragged batch: see batch.Backend.
func (b *Backend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	total, err := b.checkStep(seqs, logits)
	if err != nil || total == 0 {
		return err
	}
	hp := &b.m.HP // a pointer: closures capture it without moving the (large) struct to the heap
	nLogits := 0  // output rows: Draft+1 per sequence with a logits slot
	for i, sq := range seqs {
		if logits[i] != nil {
			nLogits += sq.Draft + 1
		}
	}
	b.grow(total, nLogits)
	s := &b.s
	D := hp.Dim
	// Embeddings and positions: one table of rotary angles per token and
	// rotary base, table (t, i) at (t*len(thetaScales)+i)*HeadDim.
	t := 0
	nr := len(b.thetaScales)
	for _, sq := range seqs {
		for j, tok := range sq.Tokens {
			xt := s.x[t*D : (t+1)*D]
			dequantRow(b.m.TokEmbd, int(tok), xt)
			if hp.EmbedScale != 0 {
				mulScalar(xt, hp.EmbedScale)
			}
			for i, ts := range b.thetaScales {
				o := (t*nr + i) * hp.HeadDim
				b.ropeTable(s.rope[o:o+hp.HeadDim], int32(sq.Pos+j), ts, b.yarns[i])
			}
			t++
		}
	}
	x, xn := s.x[:total*D], s.xn[:total*D]
	q, k, v := s.q[:total*b.qDim], s.k[:total*b.kvDim], s.v[:total*b.kvDim]
	att := s.att[:total*b.qDim]
	for li := range b.m.Layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := &b.m.Layers[li]
		perTokens(total, D, func(t0, t1 int) {
			for t := t0; t < t1; t++ {
				rmsNorm(xn[t*D:(t+1)*D], x[t*D:(t+1)*D], l.AttnNorm, hp.NormEps)
			}
		})
		if err := matMuls(total, xn, s, kernels.Product{Y: q, W: l.Wq}, kernels.Product{Y: k, W: l.Wk}, kernels.Product{Y: v, W: l.Wv}); err != nil {
			return layerError(li, "QKV", err)
		}
		perTokens(total, b.qDim+b.kvDim, func(t0, t1 int) {
			for t := t0; t < t1; t++ {
				if l.Bq != nil {
					add(q[t*b.qDim:(t+1)*b.qDim], l.Bq)
					add(k[t*b.kvDim:(t+1)*b.kvDim], l.Bk)
					add(v[t*b.kvDim:(t+1)*b.kvDim], l.Bv)
				}
				qt, kt := q[t*b.qDim:(t+1)*b.qDim], k[t*b.kvDim:(t+1)*b.kvDim]
				if l.QNorm != nil {
					headNorms(qt, hp.HeadDim, l.QNorm, hp.NormEps)
				}
				if l.KNorm != nil {
					headNorms(kt, hp.HeadDim, l.KNorm, hp.NormEps)
				}
				o := (t*nr + b.layerRope[li]) * hp.HeadDim
				cs := s.rope[o : o+hp.HeadDim]
				b.rope(qt, hp.Heads, cs)
				b.rope(kt, hp.KVHeads, cs)
				if hp.QScale != 0 {
					mulScalar(qt, hp.QScale)
				}
			}
		})
		b.storeKV(li, seqs, k, v)
		b.attention(li, l.Window, seqs, q, att)
		if err := matMul(s.tm[:total*D], l.Wo, att, total, s); err != nil {
			return layerError(li, "output projection", err)
		}
		perTokens(total, D, func(t0, t1 int) {
			if l.Bo != nil {
				for t := t0; t < t1; t++ {
					add(s.tm[t*D:(t+1)*D], l.Bo)
				}
			}
			if l.PostAttnNorm != nil {
				for t := t0; t < t1; t++ {
					rmsNorm(s.tm[t*D:(t+1)*D], s.tm[t*D:(t+1)*D], l.PostAttnNorm, hp.NormEps)
				}
			}
			add(x[t0*D:t1*D], s.tm[t0*D:t1*D])
			for t := t0; t < t1; t++ {
				rmsNorm(xn[t*D:(t+1)*D], x[t*D:(t+1)*D], l.FFNNorm, hp.NormEps)
			}
		})
		if l.MoE != nil {
			if err := b.moeFFN(li, l, total, xn, s.tm[:total*D]); err != nil {
				return err
			}
			perTokens(total, D, func(t0, t1 int) {
				add(x[t0*D:t1*D], s.tm[t0*D:t1*D])
			})
			continue
		}
		gate, up := s.gate[:total*hp.FFN], s.up[:total*hp.FFN]
		if err := matMuls(total, xn, s, kernels.Product{Y: gate, W: l.WGate}, kernels.Product{Y: up, W: l.WUp}); err != nil {
			return layerError(li, "FFN gate and up", err)
		}
		perTokens(total, hp.FFN, func(t0, t1 int) {
			g, u := gate[t0*hp.FFN:t1*hp.FFN], up[t0*hp.FFN:t1*hp.FFN]
			if hp.Act == llama.ActGELUTanh {
				geluMul(g, u)
			} else {
				siluMul(g, u)
			}
		})
		if err := matMul(s.tm[:total*D], l.WDown, gate, total, s); err != nil {
			return layerError(li, "FFN down", err)
		}
		perTokens(total, D, func(t0, t1 int) {
			if l.PostFFNNorm != nil {
				for t := t0; t < t1; t++ {
					rmsNorm(s.tm[t*D:(t+1)*D], s.tm[t*D:(t+1)*D], l.PostFFNNorm, hp.NormEps)
				}
			}
			add(x[t0*D:t1*D], s.tm[t0*D:t1*D])
		})
	}
	// Hidden states: the output norm of every token of the sequences that
	// ask for them (embeddings); the LM head is not run for them.
	t = 0
	for _, sq := range seqs {
		if sq.Hidden != nil {
			for j := range sq.Tokens {
				rmsNorm(sq.Hidden[j*D:(j+1)*D], x[(t+j)*D:(t+j+1)*D], b.m.OutNorm, hp.NormEps)
			}
		}
		t += len(sq.Tokens)
	}
	if nLogits == 0 {
		return nil
	}
	// Output norm and projection, one product over every wanted row: the
	// last Draft+1 tokens of each sequence that wants logits.
	t, r := 0, 0
	for i, sq := range seqs {
		t += len(sq.Tokens)
		if logits[i] != nil {
			for j := t - 1 - sq.Draft; j < t; j++ {
				rmsNorm(s.lastX[r*D:(r+1)*D], x[j*D:(j+1)*D], b.m.OutNorm, hp.NormEps)
				r++
			}
		}
	}
	V := hp.VocabSize
	if err := matMul(s.lastOut[:nLogits*V], b.m.Output, s.lastX[:nLogits*D], nLogits, s); err != nil {
		return fmt.Errorf("cpu: output matrix: %w", err)
	}
	if hp.FinalSoftcap != 0 {
		softcap(s.lastOut[:nLogits*V], hp.FinalSoftcap)
	}
	r = 0
	for i, sq := range seqs {
		if logits[i] != nil {
			n := (sq.Draft + 1) * V
			copy(logits[i], s.lastOut[r*V:r*V+n])
			r += sq.Draft + 1
		}
	}
	return nil
}

// perTokens calls fn on ranges [t0, t1) covering the step's total tokens:
// on the caller alone for a few tokens, else split over the kernels' worker
// pool, so that the per-token work between matrix products (norms, RoPE,
// SiLU, residual adds) does not leave all but one thread idle. width is
// the floats each token touches, to size the split.
func perTokens(total, width int, fn func(t0, t1 int)) {
	parts := min(2*kernels.Workers(), total*width/perTokensMin)
	if parts < 2 {
		fn(0, total)
		return
	}
	parts = min(parts, total)
	_ = kernels.Parallel(parts, func(_, i int) error { // fn cannot fail
		fn(i*total/parts, (i+1)*total/parts)
		return nil
	})
}

// layerError wraps a failed kernel of layer li (what names the product).
// Every product of a step covers all its sequences, so the step fails as a
// whole: Forward returns the error and the scheduler fails the step's
// sequences, keeping the process and the backend serving.
func layerError(li int, what string, err error) error {
	return fmt.Errorf("cpu: layer %d %s: %w", li, what, err)
}

// perTokensMin is the floats of per-token work from which perTokens
// hands a part to another thread (a handoff costs a few µs). A variable
// for the test that compares the split with the serial path.
var perTokensMin = 16 << 10

// ropeTable writes cos/sin of every rotary angle of position pos into cs
// (HeadDim values: cos, sin per pair), with ggml's formulas: theta_i =
// pos·base^(-2i/d) computed by repeated float32 multiplication by
// thetaScale = base^(-2/d), divided by the frequency factor when there is
// one, then YaRN's mix and magnitude (yarnRope.angle) when y is not nil.
func (b *Backend) ropeTable(cs []float32, pos int32, thetaScale float32, y *yarnRope) {
	theta := float32(pos)
	for i := 0; i < b.m.HP.HeadDim/2; i++ {
		th := theta
		if b.m.RopeFreqs != nil {
			th = theta / b.m.RopeFreqs[i]
		}
		mscale := float32(1)
		if y != nil {
			th, mscale = y.angle(th, i)
		}
		cs[2*i] = float32(math.Cos(float64(th))) * mscale
		cs[2*i+1] = float32(math.Sin(float64(th))) * mscale
		theta *= thetaScale
	}
}

// rope rotates the heads of one token's q or k in place by the angles in
// cs (see ropeTable): adjacent pairs (2i, 2i+1), or (i, i+d/2) for NEOX.
func (b *Backend) rope(x []float32, heads int, cs []float32) {
	hd := b.m.HP.HeadDim
	half := hd / 2
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < half; i++ {
			c, sn := cs[2*i], cs[2*i+1]
			i0, i1 := 2*i, 2*i+1
			if b.m.HP.RopeNeox {
				i0, i1 = i, i+half
			}
			x0, x1 := v[i0], v[i1]
			v[i0] = x0*c - x1*sn
			v[i1] = x0*sn + x1*c
		}
	}
}

// Cache layout: per layer, KV-head-major, then block, then slot: element
// (block, g, slot, i) is at ((g*NumBlocks+block)*BlockSize+slot)*HeadDim+i,
// so one KV head's rows of a block are contiguous, and so are those of
// consecutive blocks: a sequence whose blocks were handed out in order is
// one stream per head, which the hardware prefetcher follows across
// pages, where a block-major layout breaks each head's rows into pieces
// of BlockSize rows.
func (b *Backend) kvOff(block int32, g, slot int) int {
	return ((g*b.cfg.NumBlocks+int(block))*b.cfg.BlockSize + slot) * b.m.HP.HeadDim
}

// storeKV writes each token's K and V into its sequence's blocks (rounded
// to F16 for an F16 cache, quantized per row for a Q8_0 one: a row is
// whole blocks of kernels.KVQ8Block, Config.validate checks).
func (b *Backend) storeKV(layer int, seqs []batch.SeqStep, k, v []float32) {
	bs, kd, hd := b.cfg.BlockSize, b.kvDim, b.m.HP.HeadDim
	var k16, v16 []uint16
	if b.f16 { // convert all rows at once (F16C), then scatter
		k16, v16 = b.s.h16[:len(k)], b.s.h16[len(k):2*len(k)]
		kernels.F32ToF16s(k16, k)
		kernels.F32ToF16s(v16, v)
	}
	slot := b.layout.Slot[layer]
	t := 0
	for i := range seqs {
		sq := &seqs[i]
		table := b.table(sq, layer)
		for j := range sq.Tokens {
			p := sq.Pos + j
			for g := range b.m.HP.KVHeads {
				off := b.kvOff(table[p/bs], g, p%bs)
				ks, vs := k[t*kd+g*hd:t*kd+(g+1)*hd], v[t*kd+g*hd:t*kd+(g+1)*hd]
				switch {
				case b.q8:
					kernels.QuantizeKVQ8(b.k8[slot][off:off+hd], b.kd[slot][off/kernels.KVQ8Block:], ks)
					kernels.QuantizeKVQ8(b.v8[slot][off:off+hd], b.vd[slot][off/kernels.KVQ8Block:], vs)
				case b.f16:
					copy(b.k16[slot][off:off+hd], k16[t*kd+g*hd:t*kd+(g+1)*hd])
					copy(b.v16[slot][off:off+hd], v16[t*kd+g*hd:t*kd+(g+1)*hd])
				default:
					copy(b.k32[slot][off:off+hd], ks)
					copy(b.v32[slot][off:off+hd], vs)
				}
			}
			t++
		}
	}
}

// attention computes softmax(q·K·attnScale)·V for every token and head,
// reading each sequence's K/V through its block table; with window > 0 a
// token at position p sees only positions p-window+1..p (the others are
// not read). Work items are
// (sequence, KV head): an item serves every query head of its group and
// every token of the chunk (see attendGroup).
// Items are spread over the kernels' worker pool.
func (b *Backend) attention(layer, window int, seqs []batch.SeqStep, q, out []float32) {
	hp := &b.m.HP
	nItems := len(seqs) * hp.KVHeads
	starts := b.s.starts[:0]
	t := 0
	for _, sq := range seqs {
		starts = append(starts, t)
		t += len(sq.Tokens)
	}
	b.s.starts = starts
	// work estimates the multiply-adds; below attnParallelMin a goroutine
	// handoff costs more than it saves.
	work := 0
	for _, sq := range seqs {
		n := sq.Pos + len(sq.Tokens)
		if window > 0 {
			n = min(n, window)
		}
		work += len(sq.Tokens) * n
	}
	work *= hp.Heads * hp.HeadDim * 2
	if work < attnParallelMin || nItems == 1 {
		for it := range nItems {
			b.attendGroup(&b.attnW[0], layer, window, &seqs[it/hp.KVHeads], starts[it/hp.KVHeads], it%hp.KVHeads, q, out)
		}
		return
	}
	_ = kernels.Parallel(nItems, func(worker, it int) error { // the items do not fail
		si, g := it/hp.KVHeads, it%hp.KVHeads
		b.attendGroup(&b.attnW[worker], layer, window, &seqs[si], starts[si], g, q, out)
		return nil
	})
}

// attnParallelMin is the attention work (multiply-adds) from which it is
// spread over goroutines.
const attnParallelMin = 64 << 10

// attendGroup computes attention for KV head g of one sequence: the query
// heads g*r .. g*r+r-1 (r = Heads/KVHeads) of every token of the chunk.
// Like ggml with an F16 cache, the query and the softmax weights are
// rounded to F16 before their products with K and V. Short chunks read the
// cache in place (kernels.AttendF16/AttendF32, one call per token for the
// whole group); long ones take attendChunk, unless the products are
// batch-invariant (kernels.BatchInvariant): then every token reads the cache
// in place, so its result does not depend on how its prompt was chunked.
func (b *Backend) attendGroup(w *attnWorker, layer, window int, sq *batch.SeqStep, tok0, g int, q, out []float32) {
	hp := b.m.HP
	hd := hp.HeadDim
	n := sq.Pos + len(sq.Tokens)
	group := hp.Heads / hp.KVHeads
	if len(sq.Tokens)*group >= attnChunkMin && !kernels.BatchInvariant() {
		b.attendChunk(w, layer, window, sq, tok0, g, q, out)
		return
	}
	sinks := b.groupSinks(layer, g)
	slot := b.layout.Slot[layer]
	off := b.kvOff(0, g, 0)
	kv := kernels.PagedKV{Blocks: b.table(sq, layer), BlockSize: b.cfg.BlockSize, HeadDim: hd,
		Stride: b.kvOff(1, g, 0) - off, Off: off}
	w.attn = grow(w.attn, kernels.AttendScratch(group, n-firstVisible(sq.Pos, window), hd))
	for j := range sq.Tokens {
		t := tok0 + j
		kv.First = firstVisible(sq.Pos+j, window)
		lo, hi := t*b.qDim+g*group*hd, t*b.qDim+(g+1)*group*hd
		switch {
		case b.q8:
			kernels.AttendQ8(out[lo:hi], q[lo:hi], b.k8[slot], b.kd[slot], b.v8[slot], b.vd[slot], kv, sq.Pos+j+1, b.attnScale, sinks, w.attn)
		case b.f16:
			kernels.AttendF16(out[lo:hi], q[lo:hi], b.k16[slot], b.v16[slot], kv, sq.Pos+j+1, b.attnScale, sinks, w.attn)
		default:
			kernels.AttendF32(out[lo:hi], q[lo:hi], b.k32[slot], b.v32[slot], kv, sq.Pos+j+1, b.attnScale, sinks, w.attn)
		}
	}
}

// firstVisible is the first position a query at position p sees: p-window+1
// (at least 0) with a sliding window, else 0.
func firstVisible(p, window int) int {
	if window > 0 {
		return max(0, p-window+1)
	}
	return 0
}

// groupSinks is the attention sinks of KV head g's query heads in layer
// layer, or nil.
func (b *Backend) groupSinks(layer, g int) []float32 {
	sk := b.m.Layers[layer].Sinks
	if sk == nil {
		return nil
	}
	group := b.m.HP.Heads / b.m.HP.KVHeads
	return sk[g*group : (g+1)*group]
}

// attnChunkMin is the number of query rows (chunk tokens × heads per KV
// head) from which a chunk's attention gathers the head's K and V rows and
// runs kernels.AttendChunk (below it, every token reads the cache in
// place).
const attnChunkMin = 16

// attendChunk is attendGroup for long chunks: the head's K and V rows of
// the positions the chunk's first token sees and after, k0..n-1, are
// gathered as float32 (K in kernels.PanelK's panels, V row by row, block
// by block: a block's rows of one head are contiguous), and
// kernels.AttendChunk reads the queries and writes the outputs in place.
func (b *Backend) attendChunk(w *attnWorker, layer, window int, sq *batch.SeqStep, tok0, g int, q, out []float32) {
	hp := b.m.HP
	hd, bs, group := hp.HeadDim, b.cfg.BlockSize, hp.Heads/hp.KVHeads
	n := sq.Pos + len(sq.Tokens)
	k0 := firstVisible(sq.Pos, window)
	m := n - k0
	w.kt = grow(w.kt, kernels.PanelKLen(m, hd))
	w.v = grow(w.v, m*hd)
	w.row = grow(w.row, bs*hd)
	w.sc = grow(w.sc, kernels.AttendChunkScratch(group, m, hd))
	table, ls := b.table(sq, layer), b.layout.Slot[layer]
	for p0 := k0; p0 < n; {
		slot := p0 % bs
		cnt := min(bs-slot, n-p0) * hd
		off := b.kvOff(table[p0/bs], g, slot)
		d := (p0 - k0) * hd
		kr, vv := w.row[:cnt], w.v[d:d+cnt]
		switch {
		case b.q8:
			kernels.DequantizeKVQ8(kr, b.k8[ls][off:off+cnt], b.kd[ls][off/kernels.KVQ8Block:])
			kernels.DequantizeKVQ8(vv, b.v8[ls][off:off+cnt], b.vd[ls][off/kernels.KVQ8Block:])
		case b.f16:
			kernels.F16ToF32s(kr, b.k16[ls][off:off+cnt])
			kernels.F16ToF32s(vv, b.v16[ls][off:off+cnt])
		default:
			kr = b.k32[ls][off : off+cnt]
			copy(vv, b.v32[ls][off:off+cnt])
		}
		kernels.PanelK(w.kt, kr, p0-k0, cnt/hd, hd)
		p0 += cnt / hd
	}
	lo := tok0*b.qDim + g*group*hd
	kernels.AttendChunk(out[lo:], q[lo:], b.qDim, len(sq.Tokens), group, hd, w.kt, w.v, m, sq.Pos-k0, window,
		b.attnScale, b.groupSinks(layer, g), b.f16, w.sc)
}

// grow returns s if it holds n elements, else a larger slice.
func grow(s []float32, n int) []float32 {
	if len(s) >= n {
		return s
	}
	return make([]float32, max(n, 2*len(s)))
}
