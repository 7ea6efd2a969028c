//go:build cgo

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/quant"
	"github.com/weft-inference/weft/runtime/sample"

	"github.com/weft-inference/weft/cuda/gpumem"
)

// Backend runs a llama.Model on one GPU. Weights live on the device as F16
// matrices (dequantized once at load by the dequant_f16 kernel; q/k/v and
// gate/up fused into one matrix each), the token embedding in its stored
// form (the embed kernel dequantizes the rows it needs), the KV pool as one
// F16 allocation per K and V. Forward must not be called concurrently (the
// scheduler's step loop calls it); every call runs on the Device's thread.
type Backend struct {
	dev  *Device
	hp   llama.HParams
	kv   KVConfig
	info batch.KVInfo
	plan string

	qdim, kvdim, qkvdim int
	thetaScale          float32
	scale               float32

	embd         uint64
	embdType     int
	embdRowBytes int64
	layers       []devLayer
	outNorm      uint64
	output       uint64
	ropeFF       uint64
	kc, vc       uint64
	layerKV      int64 // bytes of one layer's K (or V) pool

	weightBytes int64
	allocs      []uint64 // everything NewBackend allocated, freed by Close

	// workspace, sized for wsT tokens and wsS logit rows
	wsT, wsS int
	ws       struct{ x, xn, qkv, att, gu, hff, part, xo, logits, ids uint64 }
	meta     uint64
	metaCap  int // int32 entries

	hostMeta   []int32
	hostLogits []float32
	hostIDs    []int32

	// CUDA graphs of decode steps, by shape; dropped whenever a buffer
	// their kernels name is reallocated. They are on while gstats.Off is "".
	graphs   map[graphKey]graphExec
	graphAge []graphKey // capture order, for eviction
	gstats   GraphStats

	// prof, while Profile runs, is called after each operation of a step.
	prof func(op string) error

	closed bool
}

// graphKey is what a captured step's launches depend on besides the
// buffers: the tokens, sequences and logit rows (the index layout and the
// grids) and attention's grid depth.
type graphKey struct{ T, S, nout, nsplit int }

// maxGraphs is how many step graphs a backend keeps; the oldest goes first.
const maxGraphs = 128

// Graphs reports how steps have run so far.
func (b *Backend) Graphs() GraphStats {
	var g GraphStats
	b.dev.do(func() error { g = b.gstats; return nil })
	return g
}

type devLayer struct {
	attnNorm, ffnNorm, wqkv, bqkv, wo, wgu, wdown uint64
}

var _ batch.Backend = (*Backend)(nil)

// Compiled reports whether this build has the CUDA backend (the C shim
// needs cgo); the GPU itself is found at run time by Open.
const Compiled = true

// NewBackend uploads m to dev and allocates the KV pool and workspace. With
// kv.NumBlocks 0 the pool takes what gpumem.BlocksForGPU allows (see Plan).
func NewBackend(dev *Device, m *llama.Model, kv KVConfig) (*Backend, error) {
	if err := kv.validate(); err != nil {
		return nil, err
	}
	if err := checkModel(m); err != nil {
		return nil, err
	}
	if m.RopeFreqs != nil && len(m.RopeFreqs) != m.HP.HeadDim/2 {
		return nil, fmt.Errorf("cuda: %d rope frequency factors, want %d", len(m.RopeFreqs), m.HP.HeadDim/2)
	}
	hp := m.HP
	b := &Backend{
		dev: dev, hp: hp, kv: kv,
		qdim: hp.Heads * hp.HeadDim, kvdim: hp.KVHeads * hp.HeadDim,
		thetaScale: ropeThetaScale(hp),
		scale:      float32(1 / math.Sqrt(float64(hp.HeadDim))),
	}
	b.qkvdim = b.qdim + 2*b.kvdim
	b.graphs = map[graphKey]graphExec{}
	switch {
	case dev.cfg.NoGraphs:
		b.gstats.Off = "off by configuration"
	case !dev.graphsOK:
		b.gstats.Off = "the driver lacks the CUDA graph entry points"
	}
	err := dev.do(func() error {
		if ok, why := dev.Healthy(); !ok {
			return fmt.Errorf("%w: %s", ErrUnhealthy, why)
		}
		if err := b.load(m); err != nil {
			b.release()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Backend) alloc(n int64) (uint64, error) {
	p, err := b.dev.alloc(n)
	if err == nil {
		b.allocs = append(b.allocs, p)
	}
	return p, err
}

// uploadF32 copies v to a new device buffer.
func (b *Backend) uploadF32(v []float32) (uint64, error) {
	p, err := b.alloc(int64(4 * len(v)))
	if err != nil {
		return 0, err
	}
	if len(v) > 0 {
		err = b.dev.upload(p, unsafe.Pointer(&v[0]), 4*len(v))
	}
	return p, err
}

// dequantInto uploads w's stored bytes to staging and expands them to F16
// at dst + rowOff rows.
func (b *Backend) dequantInto(dst uint64, rowOff int, w quant.Weight, staging uint64) error {
	rb, err := w.Type.RowBytes(w.Cols)
	if err != nil {
		return err
	}
	if err := b.dev.upload(staging, unsafe.Pointer(&w.Data[0]), len(w.Data)); err != nil {
		return err
	}
	n := int64(w.Rows) * int64(w.Cols)
	blocks := int(min((n+255)/256, 1<<16))
	return b.dev.launch("dequant_f16", dim3{blocks, 1, 1}, dim3{256, 1, 1},
		dst+uint64(rowOff)*uint64(w.Cols)*2, staging, int(w.Type), int64(w.Rows), int64(w.Cols), int64(rb))
}

// f16Matrix allocates one F16 matrix holding ws stacked by rows.
func (b *Backend) f16Matrix(staging uint64, ws ...quant.Weight) (uint64, error) {
	rows := 0
	for _, w := range ws {
		rows += w.Rows
	}
	p, err := b.alloc(int64(rows) * int64(ws[0].Cols) * 2)
	if err != nil {
		return 0, err
	}
	off := 0
	for _, w := range ws {
		if err := b.dequantInto(p, off, w, staging); err != nil {
			return 0, err
		}
		off += w.Rows
	}
	return p, nil
}

func (b *Backend) load(m *llama.Model) error {
	d, hp := b.dev, b.hp
	free0, total, err := d.memInfo()
	if err != nil {
		return err
	}
	usedAtStart := total - free0

	maxRaw := len(m.Output.Data)
	for _, l := range m.Layers {
		for _, w := range []quant.Weight{l.Wq, l.Wk, l.Wv, l.Wo, l.WGate, l.WUp, l.WDown} {
			maxRaw = max(maxRaw, len(w.Data))
		}
	}
	staging, err := d.alloc(int64(maxRaw))
	if err != nil {
		return fmt.Errorf("cuda: staging buffer: %w", err)
	}
	defer func() {
		d.sync()
		d.free(staging)
	}()

	b.layers = make([]devLayer, hp.Layers)
	for i, l := range m.Layers {
		dl := &b.layers[i]
		var err error
		if dl.attnNorm, err = b.uploadF32(l.AttnNorm); err != nil {
			return err
		}
		if dl.ffnNorm, err = b.uploadF32(l.FFNNorm); err != nil {
			return err
		}
		if dl.wqkv, err = b.f16Matrix(staging, l.Wq, l.Wk, l.Wv); err != nil {
			return fmt.Errorf("cuda: blk.%d qkv: %w", i, err)
		}
		if l.Bq != nil {
			bias := append(append(append(make([]float32, 0, b.qkvdim), l.Bq...), l.Bk...), l.Bv...)
			if dl.bqkv, err = b.uploadF32(bias); err != nil {
				return err
			}
		}
		if dl.wo, err = b.f16Matrix(staging, l.Wo); err != nil {
			return fmt.Errorf("cuda: blk.%d attn_output: %w", i, err)
		}
		if dl.wgu, err = b.f16Matrix(staging, l.WGate, l.WUp); err != nil {
			return fmt.Errorf("cuda: blk.%d gate/up: %w", i, err)
		}
		if dl.wdown, err = b.f16Matrix(staging, l.WDown); err != nil {
			return fmt.Errorf("cuda: blk.%d ffn_down: %w", i, err)
		}
	}
	if b.output, err = b.f16Matrix(staging, m.Output); err != nil {
		return fmt.Errorf("cuda: output: %w", err)
	}
	if b.outNorm, err = b.uploadF32(m.OutNorm); err != nil {
		return err
	}
	if m.RopeFreqs != nil {
		if b.ropeFF, err = b.uploadF32(m.RopeFreqs); err != nil {
			return err
		}
	}
	b.embdType = int(m.TokEmbd.Type)
	rb, _ := m.TokEmbd.Type.RowBytes(m.TokEmbd.Cols)
	b.embdRowBytes = int64(rb)
	if b.embd, err = b.alloc(int64(len(m.TokEmbd.Data))); err != nil {
		return err
	}
	if err := d.upload(b.embd, unsafe.Pointer(&m.TokEmbd.Data[0]), len(m.TokEmbd.Data)); err != nil {
		return err
	}
	b.weightBytes = WeightBytes(m)

	if err := b.ensure(b.kv.MaxBatchTokens, b.kv.MaxSeqs, 0); err != nil {
		return err
	}

	perBlock := batch.KVBytesPerBlock(hp.Layers, hp.KVHeads*hp.HeadDim, b.kv.BlockSize, 2) // F16 cache
	nb := b.kv.NumBlocks
	if nb == 0 {
		plan, err := gpumem.BlocksForGPU(gpumem.GPUBudget{
			Total: total, UsedAtStart: usedAtStart,
			WeightsBytes: uint64(b.weightBytes), WorkspaceBytes: uint64(WorkspaceBytes(hp, b.wsT, b.wsS)),
			BytesPerBlock: uint64(perBlock), BlockSize: b.kv.BlockSize, Utilization: b.kv.Utilization,
		})
		if err != nil {
			return err
		}
		nb = plan.NumBlocks
		b.plan = plan.String()
	} else {
		b.plan = fmt.Sprintf("kv pool (gpu): %d blocks x %d bytes per block = %s given, %d tokens of %d per block; weights %s",
			nb, perBlock, gpumem.GiB(uint64(nb)*uint64(perBlock)), nb*b.kv.BlockSize, b.kv.BlockSize, gpumem.GiB(uint64(b.weightBytes)))
	}
	b.layerKV = int64(nb) * int64(b.kv.BlockSize) * int64(b.kvdim) * 2
	if b.kc, err = b.alloc(b.layerKV * int64(hp.Layers)); err != nil {
		return fmt.Errorf("cuda: K pool of %d blocks: %w", nb, err)
	}
	if b.vc, err = b.alloc(b.layerKV * int64(hp.Layers)); err != nil {
		return fmt.Errorf("cuda: V pool of %d blocks: %w", nb, err)
	}
	for _, p := range []uint64{b.kc, b.vc} {
		if err := d.check("cuMemsetD8Async", cMemsetD8(d, p, b.layerKV*int64(hp.Layers))); err != nil {
			return err
		}
	}
	b.info = batch.KVInfo{BlockSize: b.kv.BlockSize, NumBlocks: nb, BytesPerBlock: perBlock, Type: "f16"}
	return d.sync()
}

// ensure grows the workspace to T tokens and S logit rows and the index
// buffer to metaInts entries (device thread).
func (b *Backend) ensure(T, S, metaInts int) error {
	d := b.dev
	if T > b.wsT || S > b.wsS || metaInts > b.metaCap {
		// A step without logits returns with work in flight; let it finish
		// before its buffers are freed.
		if err := d.sync(); err != nil {
			return err
		}
	}
	if T > b.wsT || S > b.wsS || metaInts > b.metaCap {
		b.dropGraphs() // their kernels name the buffers about to go
	}
	if T > b.wsT || S > b.wsS {
		T, S = max(T, b.wsT), max(S, b.wsS)
		for _, p := range []*uint64{&b.ws.x, &b.ws.xn, &b.ws.qkv, &b.ws.att, &b.ws.gu, &b.ws.hff, &b.ws.part, &b.ws.xo, &b.ws.logits, &b.ws.ids} {
			d.free(*p)
			*p = 0
		}
		b.wsT, b.wsS = 0, 0
		w := newWorkspace(b.hp, T, S)
		for _, a := range []struct {
			p *uint64
			n int64
		}{{&b.ws.x, w.x}, {&b.ws.xn, w.xn}, {&b.ws.qkv, w.qkv}, {&b.ws.att, w.att}, {&b.ws.gu, w.gu}, {&b.ws.hff, w.hff},
			{&b.ws.part, w.part}, {&b.ws.xo, w.xo}, {&b.ws.logits, w.logits}, {&b.ws.ids, w.ids}} {
			p, err := d.alloc(a.n)
			if err != nil {
				return fmt.Errorf("cuda: workspace for %d tokens: %w", T, err)
			}
			*a.p = p
		}
		b.wsT, b.wsS = T, S
	}
	if metaInts > b.metaCap {
		n := max(metaInts, 2*b.metaCap, 4096)
		d.free(b.meta)
		b.meta, b.metaCap = 0, 0
		p, err := d.alloc(int64(4 * n))
		if err != nil {
			return err
		}
		b.meta, b.metaCap = p, n
	}
	return nil
}

// stepPlan is a step's host-side index data, packed for one upload:
// tokens | pos | seq | slot | outRows | seqBT | block tables.
type stepPlan struct {
	T, S, nout, maxLen                      int
	offPos, offSeq, offSlot, offOut, offSBT int
	offBT                                   int
	outSeq                                  []int // seq index of each logits row
}

// planStep validates seqs and fills b.hostMeta.
func (b *Backend) planStep(seqs []batch.SeqStep, want func(i int) bool) (stepPlan, error) {
	var p stepPlan
	bs, nb := b.info.BlockSize, b.info.NumBlocks
	nbt := 0
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			if want(i) {
				return p, fmt.Errorf("cuda: sequence %d: logits wanted but no tokens", s.Seq)
			}
			continue
		}
		if s.Draft != 0 {
			return p, fmt.Errorf("cuda: sequence %d: drafted tokens (SeqStep.Draft %d) are not supported: the CUDA backend computes one logits row per sequence (it does not implement batch.DraftLogits)", s.Seq, s.Draft)
		}
		end := s.Pos + len(s.Tokens)
		if s.Pos < 0 || len(s.Blocks)*bs < end {
			return p, fmt.Errorf("cuda: sequence %d: %d blocks of %d do not cover positions [%d, %d)", s.Seq, len(s.Blocks), bs, s.Pos, end)
		}
		if end > b.hp.ContextLen && b.hp.ContextLen > 0 {
			return p, fmt.Errorf("cuda: sequence %d: position %d beyond the context of %d", s.Seq, end-1, b.hp.ContextLen)
		}
		p.T += len(s.Tokens)
		p.maxLen = max(p.maxLen, end)
		nbt += (end + bs - 1) / bs
		if want(i) {
			p.nout++
		}
	}
	p.S = len(seqs)
	p.offPos, p.offSeq, p.offSlot = p.T, 2*p.T, 3*p.T
	p.offOut = 4 * p.T
	p.offSBT = p.offOut + p.nout
	p.offBT = p.offSBT + p.S
	n := p.offBT + nbt
	if cap(b.hostMeta) < n {
		b.hostMeta = make([]int32, n)
	}
	b.hostMeta = b.hostMeta[:n]
	meta := b.hostMeta
	t, bt := 0, 0
	p.outSeq = p.outSeq[:0]
	for i, s := range seqs {
		meta[p.offSBT+i] = int32(bt)
		if len(s.Tokens) == 0 {
			continue
		}
		end := s.Pos + len(s.Tokens)
		for j := 0; j < (end+bs-1)/bs; j++ {
			blk := s.Blocks[j]
			if blk < 0 || int(blk) >= nb {
				return p, fmt.Errorf("cuda: sequence %d: block %d not in the pool of %d", s.Seq, blk, nb)
			}
			meta[p.offBT+bt+j] = blk
		}
		for j, tok := range s.Tokens {
			if tok < 0 || int(tok) >= b.hp.VocabSize {
				return p, fmt.Errorf("cuda: sequence %d: token %d out of the vocabulary of %d", s.Seq, tok, b.hp.VocabSize)
			}
			pos := s.Pos + j
			meta[t] = tok
			meta[p.offPos+t] = int32(pos)
			meta[p.offSeq+t] = int32(i)
			meta[p.offSlot+t] = s.Blocks[pos/bs]*int32(bs) + int32(pos%bs)
			t++
		}
		if want(i) {
			meta[p.offOut+len(p.outSeq)] = int32(t - 1)
			p.outSeq = append(p.outSeq, i)
		}
		bt += (end + bs - 1) / bs
	}
	return p, nil
}

// KV describes the pool.
func (b *Backend) KV() batch.KVInfo { return b.info }

// Name is "cuda (NVIDIA H200, sm_90, cuBLAS 13)".
func (b *Backend) Name() string { return "cuda (" + b.dev.String() + ")" }

// Plan is the KV sizing log line (weights, workspace, blocks x bytes, tokens).
func (b *Backend) Plan() string { return b.plan }

// Healthy reports the device's health (false after a sticky CUDA error).
func (b *Backend) Healthy() (bool, string) { return b.dev.Healthy() }

// Forward runs one step; see batch.Backend. logits[i], when non-nil, gets
// the last token's logits of seqs[i].
func (b *Backend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(logits) != len(seqs) {
		return fmt.Errorf("cuda: %d logits slots for %d sequences", len(logits), len(seqs))
	}
	for i, l := range logits {
		if l != nil && len(l) != b.hp.VocabSize {
			return fmt.Errorf("cuda: logits[%d] has %d entries, want %d", i, len(l), b.hp.VocabSize)
		}
	}
	return b.dev.do(func() error {
		p, err := b.step(seqs, func(i int) bool { return logits[i] != nil })
		if err != nil || p.nout == 0 {
			return err
		}
		V := b.hp.VocabSize
		if cap(b.hostLogits) < p.nout*V {
			b.hostLogits = make([]float32, p.nout*V)
		}
		host := b.hostLogits[:p.nout*V]
		if err := b.dev.download(unsafe.Pointer(&host[0]), b.ws.logits, 4*len(host)); err != nil {
			return err
		}
		if err := b.dev.sync(); err != nil {
			return err
		}
		for r, i := range p.outSeq {
			copy(logits[i], host[r*V:(r+1)*V])
		}
		return nil
	})
}

// ForwardGreedy runs one step and picks greedily on the device: for each
// seqs[i] with Logits, out[i] is the argmax token (lowest id on ties) and
// its log-probability over the full softmax; only ids and logprobs are
// copied back. It is plain argmax, with no penalties or top logprobs, and
// feeds no sampler: it serves device checks (cuda/cmd/gpucheck) and
// benchmarks; serving goes through Forward and runtime.Engine's sampling.
func (b *Backend) ForwardGreedy(ctx context.Context, seqs []batch.SeqStep) ([]sample.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]sample.Result, len(seqs))
	err := b.dev.do(func() error {
		p, err := b.step(seqs, func(i int) bool { return seqs[i].Logits })
		if err != nil || p.nout == 0 {
			return err
		}
		ids := b.ws.ids
		lps := ids + uint64(4*b.wsS)
		if err := b.dev.launch("argmax_logprob", dim3{p.nout, 1, 1}, dim3{1024, 1, 1}, b.ws.logits, b.hp.VocabSize, ids, lps); err != nil {
			return err
		}
		if cap(b.hostIDs) < 2*b.wsS {
			b.hostIDs = make([]int32, 2*b.wsS)
		}
		h := b.hostIDs[:2*b.wsS]
		if err := b.dev.download(unsafe.Pointer(&h[0]), ids, 4*p.nout); err != nil {
			return err
		}
		if err := b.dev.download(unsafe.Pointer(&h[b.wsS]), lps, 4*p.nout); err != nil {
			return err
		}
		if err := b.dev.sync(); err != nil {
			return err
		}
		for r, i := range p.outSeq {
			out[i] = sample.Result{Token: h[r], Logprob: math.Float32frombits(uint32(h[b.wsS+r]))}
		}
		return nil
	})
	return out, err
}

// step uploads the index data and runs every layer, leaving the logits of
// the wanted rows in ws.logits (device thread).
func (b *Backend) step(seqs []batch.SeqStep, want func(int) bool) (stepPlan, error) {
	if b.closed {
		return stepPlan{}, ErrClosed
	}
	if ok, why := b.dev.Healthy(); !ok {
		return stepPlan{}, fmt.Errorf("%w: %s", ErrUnhealthy, why)
	}
	for _, s := range seqs {
		if s.Hidden != nil {
			// It implements no batch.HiddenStates, so the engine and the
			// scheduler never send such a row; say so if one comes.
			return stepPlan{}, fmt.Errorf("cuda: sequence %d asks for hidden states (embeddings), which the CUDA backend does not compute", s.Seq)
		}
	}
	p, err := b.planStep(seqs, want)
	if err != nil || p.T == 0 {
		return p, err
	}
	if err := b.ensure(p.T, p.nout, len(b.hostMeta)); err != nil {
		return p, err
	}
	if err := b.dev.upload(b.meta, unsafe.Pointer(&b.hostMeta[0]), 4*len(b.hostMeta)); err != nil {
		return p, err
	}
	if err := b.profile("upload"); err != nil {
		return p, err
	}
	if err := b.run(p); err != nil {
		return p, err
	}
	return p, nil
}

// run launches the model over the uploaded step (device thread). A decode
// step (one token and one logits row per sequence) is replayed from the
// CUDA graph of its shape, captured the first time that shape comes: one
// launch instead of one per kernel. The graph reads the step's tokens,
// positions and block tables from the index buffer just uploaded, so a
// replay computes exactly what launching its kernels would.
func (b *Backend) run(p stepPlan) error {
	nsplit := attnSplit(p.maxLen)
	if b.prof != nil {
		return b.launchStep(p, nsplit)
	}
	if b.gstats.Off != "" || p.T != p.S || p.nout != p.T {
		b.gstats.Eager++
		return b.launchStep(p, nsplit)
	}
	key := graphKey{T: p.T, S: p.S, nout: p.nout, nsplit: nsplit}
	if g, ok := b.graphs[key]; ok {
		b.gstats.Replays++
		return b.dev.replay(g)
	}
	if len(b.graphs) >= maxGraphs {
		b.dev.dropGraph(b.graphs[b.graphAge[0]])
		delete(b.graphs, b.graphAge[0])
		b.graphAge = b.graphAge[1:]
	}
	g, err := b.dev.capture(func() error { return b.launchStep(p, nsplit) })
	if err != nil {
		if ok, _ := b.dev.Healthy(); !ok {
			return err
		}
		// Capture is not to be had here (an old driver, a cuBLAS that will
		// not be captured): launch eagerly from now on.
		b.gstats.Off = "capture failed: " + err.Error()
		b.dropGraphs()
		b.gstats.Eager++
		return b.launchStep(p, nsplit)
	}
	b.graphs[key] = g
	b.graphAge = append(b.graphAge, key)
	b.gstats.Captures++
	return b.dev.replay(g)
}

// dropGraphs frees every captured graph (device thread).
func (b *Backend) dropGraphs() {
	for _, g := range b.graphs {
		b.dev.dropGraph(g)
	}
	clear(b.graphs)
	b.graphAge = b.graphAge[:0]
}

// launchStep queues the step's kernels and GEMMs on the stream (device
// thread).
func (b *Backend) launchStep(p stepPlan, nsplit int) error {
	d, hp := b.dev, b.hp
	T := p.T
	i32 := func(off int) uint64 { return b.meta + uint64(4*off) }
	tokP, posP, seqP, slotP, outP, sbtP, btP := i32(0), i32(p.offPos), i32(p.offSeq), i32(p.offSlot), i32(p.offOut), i32(p.offSBT), i32(p.offBT)
	eps := hp.NormEps
	neox := 0
	if hp.RopeNeox {
		neox = 1
	}
	row, att := dim3{T, 1, 1}, dim3{256, 1, 1}

	if err := d.launch("embed", row, att, b.ws.x, b.embd, b.embdType, b.embdRowBytes, tokP, hp.Dim); err != nil {
		return err
	}
	if err := b.profile("embed"); err != nil {
		return err
	}
	for li, l := range b.layers {
		kc, vc := b.kc+uint64(int64(li)*b.layerKV), b.vc+uint64(int64(li)*b.layerKV)
		steps := []func() error{
			func() error {
				return d.launch("rmsnorm_f16", row, att, b.ws.xn, b.ws.x, l.attnNorm, uint64(0), hp.Dim, eps)
			},
			func() error { return d.gemm(b.ws.qkv, l.wqkv, b.ws.xn, T, b.qkvdim, hp.Dim, false) },
			func() error {
				if l.bqkv == 0 {
					return nil
				}
				return d.launch("add_bias", row, att, b.ws.qkv, l.bqkv, b.qkvdim, b.qkvdim)
			},
			func() error {
				w := (hp.HeadDim/2 + 31) / 32 * 32 // threads per head: one per pair
				hb := max(1, 256/w)                // heads per block
				return d.launch("rope", dim3{T, (hp.Heads + hp.KVHeads + hb - 1) / hb, 1}, dim3{w, hb, 1}, b.ws.qkv, b.qkvdim, posP, hp.Heads, hp.KVHeads, hp.HeadDim, neox, b.thetaScale, b.ropeFF)
			},
			func() error {
				return d.launch("kv_write", row, att, kc, vc, b.ws.qkv, b.qkvdim, b.qdim, b.qdim+b.kvdim, slotP, b.kvdim)
			},
			func() error {
				return d.launch("attention", dim3{T, hp.Heads, nsplit}, dim3{128, 1, 1}, b.ws.att, b.ws.part, b.ws.qkv, b.qkvdim,
					kc, vc, seqP, posP, sbtP, btP, b.info.BlockSize, hp.Heads, hp.KVHeads, hp.HeadDim, b.scale, nsplit)
			},
			func() error {
				if nsplit == 1 {
					return nil
				}
				return d.launch("attention_reduce", dim3{T, hp.Heads, 1}, dim3{128, 1, 1}, b.ws.att, b.ws.part, posP, hp.Heads, hp.HeadDim, nsplit)
			},
			func() error { return d.gemm(b.ws.x, l.wo, b.ws.att, T, hp.Dim, b.qdim, true) },
			func() error {
				return d.launch("rmsnorm_f16", row, att, b.ws.xn, b.ws.x, l.ffnNorm, uint64(0), hp.Dim, eps)
			},
			func() error { return d.gemm(b.ws.gu, l.wgu, b.ws.xn, T, 2*hp.FFN, hp.Dim, false) },
			func() error {
				return d.launch("swiglu", dim3{(hp.FFN + 255) / 256, T, 1}, att, b.ws.hff, b.ws.gu, hp.FFN)
			},
			func() error { return d.gemm(b.ws.x, l.wdown, b.ws.hff, T, hp.Dim, hp.FFN, true) },
		}
		for i, s := range steps {
			if err := s(); err != nil {
				return fmt.Errorf("cuda: layer %d: %w", li, err)
			}
			if err := b.profile(layerOps[i]); err != nil {
				return err
			}
		}
	}
	if p.nout == 0 {
		return nil
	}
	if err := d.launch("rmsnorm_f16", dim3{p.nout, 1, 1}, att, b.ws.xo, b.ws.x, b.outNorm, outP, hp.Dim, eps); err != nil {
		return err
	}
	if err := b.profile("output norm"); err != nil {
		return err
	}
	if err := d.gemm(b.ws.logits, b.output, b.ws.xo, p.nout, hp.VocabSize, hp.Dim, false); err != nil {
		return err
	}
	return b.profile("gemm output")
}

// layerOps names launchStep's per-layer operations, in order.
var layerOps = []string{"attn norm", "gemm qkv", "add_bias", "rope", "kv_write", "attention", "attention_reduce", "gemm wo", "ffn norm", "gemm gate|up", "swiglu", "gemm down"}

func (b *Backend) profile(op string) error {
	if b.prof == nil {
		return nil
	}
	return b.prof(op)
}

// Profile runs one step operation by operation, waiting for each to finish,
// and returns the wall time of each kind of operation summed over the
// layers, plus "sync" (what one wait on an idle stream costs, which every
// entry includes once per launch) and the step's "total". It is a
// diagnostic for cuda/cmd/gpucheck: the waits make the step slower than
// Forward. seqs[i].Logits says which rows want logits.
func (b *Backend) Profile(ctx context.Context, seqs []batch.SeqStep) (map[string]time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	err := b.dev.do(func() error {
		if err := b.dev.sync(); err != nil {
			return err
		}
		const n = 20
		t := time.Now()
		for range n {
			if err := b.dev.sync(); err != nil {
				return err
			}
		}
		out["sync"] = time.Since(t) / n
		start := time.Now()
		t = start
		b.prof = func(op string) error {
			if err := b.dev.sync(); err != nil {
				return err
			}
			now := time.Now()
			out[op] += now.Sub(t)
			t = now
			return nil
		}
		defer func() { b.prof = nil }()
		if _, err := b.step(seqs, func(i int) bool { return seqs[i].Logits }); err != nil {
			return err
		}
		out["total"] = time.Since(start)
		return nil
	})
	return out, err
}

// release frees every device buffer (device thread).
func (b *Backend) release() {
	b.dev.sync()
	b.dropGraphs()
	for _, p := range b.allocs {
		b.dev.free(p)
	}
	b.allocs = nil
	for _, p := range []*uint64{&b.ws.x, &b.ws.xn, &b.ws.qkv, &b.ws.att, &b.ws.gu, &b.ws.hff, &b.ws.part, &b.ws.xo, &b.ws.logits, &b.ws.ids, &b.meta} {
		b.dev.free(*p)
		*p = 0
	}
	b.wsT, b.wsS, b.metaCap = 0, 0, 0
}

// Close frees the backend's device memory; the Device stays open.
func (b *Backend) Close() error {
	err := b.dev.do(func() error {
		if b.closed {
			return nil
		}
		b.closed = true
		b.release()
		return nil
	})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
