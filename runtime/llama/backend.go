package llama

import (
	"context"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/weft-inference/weft/runtime/batch"
)

// CPUConfig configures the CPU backend.
type CPUConfig struct {
	// BlockSize is the number of token positions per KV block (default 16).
	BlockSize int
	// NumBlocks is the number of blocks in the KV pool (default: enough for
	// four sequences of the model's full context, capped at 64 MiB... see
	// validate).
	NumBlocks int
	// KVType is the cache element type: "f16" (default, like llama.cpp) or "f32".
	KVType string
	// Threads is the number of goroutines attention uses (default GOMAXPROCS).
	Threads int
}

func (c *CPUConfig) validate(hp HParams) error {
	if c.BlockSize == 0 {
		c.BlockSize = 16
	}
	if c.BlockSize < 1 || c.BlockSize > 4096 {
		return fmt.Errorf("llama: BlockSize %d out of range [1, 4096]", c.BlockSize)
	}
	switch c.KVType {
	case "":
		c.KVType = "f16"
	case "f16", "f32":
	default:
		return fmt.Errorf("llama: KVType %q (want f16 or f32)", c.KVType)
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = (4*hp.ContextLen + c.BlockSize - 1) / c.BlockSize
	}
	if c.NumBlocks < 1 || c.NumBlocks > 1<<24 {
		return fmt.Errorf("llama: NumBlocks %d out of range", c.NumBlocks)
	}
	if c.Threads == 0 {
		c.Threads = goruntime.GOMAXPROCS(0)
	}
	if c.Threads < 1 {
		return fmt.Errorf("llama: Threads %d < 1", c.Threads)
	}
	return nil
}

// CPUBackend runs a Model on the CPU with a paged KV cache. Forward must not
// be called concurrently (the scheduler's single step loop calls it).
type CPUBackend struct {
	m     *Model
	cfg   CPUConfig
	kvDim int
	qDim  int
	f16   bool
	// KV pool per layer: NumBlocks*BlockSize*kvDim elements, one of the two
	// pairs is used depending on the KV type.
	k16, v16 [][]uint16
	k32, v32 [][]float32

	// rotary tables: invFreq[i] = base^(-2i/headDim) / freqFactor, computed
	// once with ggml's iterated float32 formula (see rope).
	thetaScale float32

	s     scratch
	attnW []attnWorker
}

// scratch is per-step memory, grown to the largest batch seen and reused.
type scratch struct {
	cap               int
	x, xn, q, k, v    []float32
	att, gate, up, tm []float32
	pos               []int32
	xr                []float32 // F16-rounded matmul input
	lastX, lastOut    []float32
}

type attnWorker struct {
	scores []float32
	q16    []float32
	out    []float32
}

var _ batch.Backend = (*CPUBackend)(nil)

// NewCPUBackend allocates the KV pool for m.
func NewCPUBackend(m *Model, cfg CPUConfig) (*CPUBackend, error) {
	if err := cfg.validate(m.HP); err != nil {
		return nil, err
	}
	hp := m.HP
	b := &CPUBackend{m: m, cfg: cfg, kvDim: hp.KVHeads * hp.HeadDim, qDim: hp.Heads * hp.HeadDim, f16: cfg.KVType == "f16"}
	n := cfg.NumBlocks * cfg.BlockSize * b.kvDim
	for range hp.Layers {
		if b.f16 {
			b.k16 = append(b.k16, make([]uint16, n))
			b.v16 = append(b.v16, make([]uint16, n))
		} else {
			b.k32 = append(b.k32, make([]float32, n))
			b.v32 = append(b.v32, make([]float32, n))
		}
	}
	b.thetaScale = float32(math.Pow(float64(hp.RopeBase), -2.0/float64(hp.HeadDim)))
	b.attnW = make([]attnWorker, cfg.Threads)
	for i := range b.attnW {
		b.attnW[i].q16 = make([]float32, hp.HeadDim)
		b.attnW[i].out = make([]float32, hp.HeadDim)
	}
	return b, nil
}

// KV describes the pool.
func (b *CPUBackend) KV() batch.KVInfo {
	el := int64(4)
	if b.f16 {
		el = 2
	}
	return batch.KVInfo{
		BlockSize:     b.cfg.BlockSize,
		NumBlocks:     b.cfg.NumBlocks,
		BytesPerBlock: 2 * el * int64(b.cfg.BlockSize) * int64(b.kvDim) * int64(b.m.HP.Layers),
		Type:          b.cfg.KVType,
	}
}

// Name is "cpu" with the KV type and thread count.
func (b *CPUBackend) Name() string {
	return fmt.Sprintf("cpu (kv %s, %d threads)", b.cfg.KVType, b.cfg.Threads)
}

// Close drops the KV pool.
func (b *CPUBackend) Close() error {
	b.k16, b.v16, b.k32, b.v32 = nil, nil, nil, nil
	return nil
}

// ErrBadStep is wrapped by Forward's errors for malformed SeqSteps.
var ErrBadStep = errors.New("llama: invalid step")

func (b *CPUBackend) checkStep(seqs []batch.SeqStep, logits [][]float32) (int, error) {
	if len(logits) != len(seqs) {
		return 0, fmt.Errorf("%w: %d logits slots for %d sequences", ErrBadStep, len(logits), len(seqs))
	}
	if b.k16 == nil && b.k32 == nil {
		return 0, errors.New("llama: backend is closed")
	}
	total := 0
	bs := b.cfg.BlockSize
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return 0, fmt.Errorf("%w: sequence %d has no tokens", ErrBadStep, s.Seq)
		}
		if s.Pos < 0 {
			return 0, fmt.Errorf("%w: sequence %d has position %d", ErrBadStep, s.Seq, s.Pos)
		}
		end := s.Pos + len(s.Tokens)
		if len(s.Blocks)*bs < end {
			return 0, fmt.Errorf("%w: sequence %d: %d blocks cover %d positions, need %d", ErrBadStep, s.Seq, len(s.Blocks), len(s.Blocks)*bs, end)
		}
		for _, blk := range s.Blocks[:(end+bs-1)/bs] {
			if blk < 0 || int(blk) >= b.cfg.NumBlocks {
				return 0, fmt.Errorf("%w: sequence %d: block %d out of range [0, %d)", ErrBadStep, s.Seq, blk, b.cfg.NumBlocks)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= b.m.HP.VocabSize {
				return 0, fmt.Errorf("%w: sequence %d: token %d out of range [0, %d)", ErrBadStep, s.Seq, t, b.m.HP.VocabSize)
			}
		}
		if logits[i] != nil && len(logits[i]) != b.m.HP.VocabSize {
			return 0, fmt.Errorf("%w: sequence %d: logits slot has %d entries, want %d", ErrBadStep, s.Seq, len(logits[i]), b.m.HP.VocabSize)
		}
		total += len(s.Tokens)
	}
	return total, nil
}

func (b *CPUBackend) grow(total, nLogits, maxPos int) {
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
		s.pos = make([]int32, c)
		s.xr = make([]float32, c*max(hp.Dim, hp.FFN, b.qDim))
	}
	if nLogits*hp.Dim > len(s.lastX) {
		s.lastX = make([]float32, nLogits*hp.Dim)
		s.lastOut = make([]float32, nLogits*hp.VocabSize)
	}
	for i := range b.attnW {
		if len(b.attnW[i].scores) < maxPos {
			b.attnW[i].scores = make([]float32, max(maxPos, 2*len(b.attnW[i].scores)))
		}
	}
}

// Forward runs one step for a ragged batch: see batch.Backend.
func (b *CPUBackend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	total, err := b.checkStep(seqs, logits)
	if err != nil || total == 0 {
		return err
	}
	hp := b.m.HP
	nLogits, maxPos := 0, 0
	for i, s := range seqs {
		if logits[i] != nil {
			nLogits++
		}
		maxPos = max(maxPos, s.Pos+len(s.Tokens))
	}
	b.grow(total, nLogits, maxPos)
	s := &b.s
	D := hp.Dim
	// Embeddings and positions.
	t := 0
	for _, sq := range seqs {
		for j, tok := range sq.Tokens {
			dequantRow(b.m.TokEmbd, int(tok), s.x[t*D:(t+1)*D])
			s.pos[t] = int32(sq.Pos + j)
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
		for t := range total {
			rmsNorm(xn[t*D:(t+1)*D], x[t*D:(t+1)*D], l.AttnNorm, hp.NormEps)
		}
		matMul(q, l.Wq, xn, total, s.xr)
		matMul(k, l.Wk, xn, total, s.xr)
		matMul(v, l.Wv, xn, total, s.xr)
		if l.Bq != nil {
			for t := range total {
				add(q[t*b.qDim:(t+1)*b.qDim], l.Bq)
				add(k[t*b.kvDim:(t+1)*b.kvDim], l.Bk)
				add(v[t*b.kvDim:(t+1)*b.kvDim], l.Bv)
			}
		}
		for t := range total {
			b.rope(q[t*b.qDim:(t+1)*b.qDim], hp.Heads, s.pos[t])
			b.rope(k[t*b.kvDim:(t+1)*b.kvDim], hp.KVHeads, s.pos[t])
		}
		b.storeKV(li, seqs, k, v)
		b.attention(li, seqs, q, att)
		matMul(s.tm[:total*D], l.Wo, att, total, s.xr)
		add(x, s.tm[:total*D])
		for t := range total {
			rmsNorm(xn[t*D:(t+1)*D], x[t*D:(t+1)*D], l.FFNNorm, hp.NormEps)
		}
		gate, up := s.gate[:total*hp.FFN], s.up[:total*hp.FFN]
		matMul(gate, l.WGate, xn, total, s.xr)
		matMul(up, l.WUp, xn, total, s.xr)
		siluMul(gate, up)
		matMul(s.tm[:total*D], l.WDown, gate, total, s.xr)
		add(x, s.tm[:total*D])
	}
	if nLogits == 0 {
		return nil
	}
	// Output norm and projection for the last token of each sequence that
	// wants logits.
	t, r := 0, 0
	for i, sq := range seqs {
		t += len(sq.Tokens)
		if logits[i] != nil {
			rmsNorm(s.lastX[r*D:(r+1)*D], x[(t-1)*D:t*D], b.m.OutNorm, hp.NormEps)
			r++
		}
	}
	V := hp.VocabSize
	matMul(s.lastOut[:nLogits*V], b.m.Output, s.lastX[:nLogits*D], nLogits, s.xr)
	r = 0
	for i := range seqs {
		if logits[i] != nil {
			copy(logits[i], s.lastOut[r*V:(r+1)*V])
			r++
		}
	}
	return nil
}

// rope rotates the heads of one token's q or k in place, with ggml's
// formulas: theta_i = pos * base^(-2i/d) computed by repeated float32
// multiplication, divided by the frequency factor when there is one.
func (b *CPUBackend) rope(x []float32, heads int, pos int32) {
	hd := b.m.HP.HeadDim
	half := hd / 2
	// cos/sin for each pair, shared by all heads.
	var cs [2 * 256]float32
	var cbuf []float32
	if hd <= 256 {
		cbuf = cs[:hd]
	} else {
		cbuf = make([]float32, hd)
	}
	theta := float32(pos)
	for i := 0; i < half; i++ {
		th := theta
		if b.m.RopeFreqs != nil {
			th = theta / b.m.RopeFreqs[i]
		}
		cbuf[2*i] = float32(math.Cos(float64(th)))
		cbuf[2*i+1] = float32(math.Sin(float64(th)))
		theta *= b.thetaScale
	}
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < half; i++ {
			c, sn := cbuf[2*i], cbuf[2*i+1]
			var i0, i1 int
			if b.m.HP.RopeNeox {
				i0, i1 = i, i+half
			} else {
				i0, i1 = 2*i, 2*i+1
			}
			x0, x1 := v[i0], v[i1]
			v[i0] = x0*c - x1*sn
			v[i1] = x0*sn + x1*c
		}
	}
}

// storeKV writes each token's K and V into its sequence's blocks.
func (b *CPUBackend) storeKV(layer int, seqs []batch.SeqStep, k, v []float32) {
	bs, kd := b.cfg.BlockSize, b.kvDim
	t := 0
	for _, sq := range seqs {
		for j := range sq.Tokens {
			p := sq.Pos + j
			off := (int(sq.Blocks[p/bs])*bs + p%bs) * kd
			ks, vs := k[t*kd:(t+1)*kd], v[t*kd:(t+1)*kd]
			if b.f16 {
				kc, vc := b.k16[layer][off:off+kd], b.v16[layer][off:off+kd]
				for i := range ks {
					kc[i] = f32ToF16(ks[i])
					vc[i] = f32ToF16(vs[i])
				}
			} else {
				copy(b.k32[layer][off:off+kd], ks)
				copy(b.v32[layer][off:off+kd], vs)
			}
			t++
		}
	}
}

// attention computes softmax(q·K/sqrt(d))·V for every token and head,
// reading each sequence's K/V through its block table; work items
// (sequence, head) are spread over the worker goroutines.
func (b *CPUBackend) attention(layer int, seqs []batch.SeqStep, q, out []float32) {
	hp := b.m.HP
	nItems := len(seqs) * hp.Heads
	starts := make([]int, len(seqs)) // small: one int per sequence
	t := 0
	for i, sq := range seqs {
		starts[i] = t
		t += len(sq.Tokens)
	}
	var next atomic.Int64
	run := func(w *attnWorker) {
		for {
			it := int(next.Add(1) - 1)
			if it >= nItems {
				return
			}
			si, h := it/hp.Heads, it%hp.Heads
			b.attendHead(w, layer, &seqs[si], starts[si], h, q, out)
		}
	}
	nw := min(len(b.attnW), nItems)
	if nw <= 1 {
		run(&b.attnW[0])
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < nw; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(&b.attnW[i])
		}()
	}
	run(&b.attnW[0])
	wg.Wait()
}

func (b *CPUBackend) attendHead(w *attnWorker, layer int, sq *batch.SeqStep, tok0, h int, q, out []float32) {
	hp := b.m.HP
	hd, kd, bs := hp.HeadDim, b.kvDim, b.cfg.BlockSize
	g := h / (hp.Heads / hp.KVHeads)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for j := range sq.Tokens {
		p := sq.Pos + j
		t := tok0 + j
		qv := q[t*b.qDim+h*hd : t*b.qDim+(h+1)*hd]
		scores := w.scores[:p+1]
		if b.f16 {
			qr := w.q16
			for i, x := range qv {
				qr[i] = roundF16(x)
			}
			kc := b.k16[layer]
			for pp := 0; pp <= p; pp++ {
				off := (int(sq.Blocks[pp/bs])*bs+pp%bs)*kd + g*hd
				kr := kc[off : off+hd]
				var s float32
				for i, x := range qr {
					s += x * f16ToF32(kr[i])
				}
				scores[pp] = s * scale
			}
		} else {
			kc := b.k32[layer]
			for pp := 0; pp <= p; pp++ {
				off := (int(sq.Blocks[pp/bs])*bs+pp%bs)*kd + g*hd
				kr := kc[off : off+hd]
				var s float32
				for i, x := range qv {
					s += x * kr[i]
				}
				scores[pp] = s * scale
			}
		}
		// softmax as ggml: max, exp(x-max) summed in float64, scale by 1/sum.
		mx := float32(math.Inf(-1))
		for _, s := range scores {
			mx = max(mx, s)
		}
		var sum float64
		for i, s := range scores {
			e := float32(math.Exp(float64(s - mx)))
			scores[i] = e
			sum += float64(e)
		}
		inv := float32(1 / sum)
		o := w.out
		clear(o)
		if b.f16 {
			vc := b.v16[layer]
			for pp := 0; pp <= p; pp++ {
				pr := roundF16(scores[pp] * inv)
				off := (int(sq.Blocks[pp/bs])*bs+pp%bs)*kd + g*hd
				vr := vc[off : off+hd]
				for i := range o {
					o[i] += pr * f16ToF32(vr[i])
				}
			}
		} else {
			vc := b.v32[layer]
			for pp := 0; pp <= p; pp++ {
				pr := scores[pp] * inv
				off := (int(sq.Blocks[pp/bs])*bs+pp%bs)*kd + g*hd
				vr := vc[off : off+hd]
				for i := range o {
					o[i] += pr * vr[i]
				}
			}
		}
		copy(out[t*b.qDim+h*hd:t*b.qDim+(h+1)*hd], o)
	}
}
