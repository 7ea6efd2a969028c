package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// PagedKV locates the cached K and V rows of one KV head of one sequence in
// a paged cache. Positions live in blocks of BlockSize consecutive rows;
// the rows of one head within a block are contiguous, so position p's row
// (HeadDim elements) starts at element
//
//	int(Blocks[p/BlockSize])*Stride + Off + (p%BlockSize)*HeadDim
//
// of the K array and, at the same offset, of the V array.
type PagedKV struct {
	Blocks    []int32 // the sequence's block table
	BlockSize int     // rows per block
	HeadDim   int     // elements per row
	Stride    int     // elements from block b's rows to block b+1's
	Off       int     // element offset of the head's first row in block 0
	// First is the first position attended to: a query sees positions
	// First..n-1 (a sliding window; 0 for full attention). The rows below
	// it are not read, and their blocks need not be valid.
	First int
}

// AttendScratch is the scratch length AttendF16 and AttendF32 need for nq
// query vectors over n positions of head dimension hd (n - First suffices).
func AttendScratch(nq, n, hd int) int {
	flash := nq*(hd+attnTile) + (attendSegments(0, n)+1)*attendStateLen(nq, hd)
	return max(nq*(n+hd)+hd, flash)
}

// The C kernels run an online softmax over tiles of attnTile positions and
// keep one softmax state per segment of attnSeg positions, the segments
// split at multiples of attnSeg; the states are merged in order at the
// end, so a context's result does not depend on where a caller could
// split it at segment boundaries. kernels.h defines the same numbers
// (WATT_SEG, WATT_TILE; attn_cgo.go checks).
const (
	attnSeg  = 1024
	attnTile = 64
)

// attendSegments is the number of segments of positions first..n-1.
func attendSegments(first, n int) int {
	if n <= first {
		return 0
	}
	return (n-1)/attnSeg - first/attnSeg + 1
}

// attendStateLen is the length of one segment's softmax state for nq query
// vectors of head dimension hd: the nq largest scaled scores, the nq sums
// of exp(score - largest), the nq unnormalised output rows.
func attendStateLen(nq, hd int) int { return nq * (hd + 2) }

// AttendF16 computes single-token attention for the query vectors in q
// (len(q)/HeadDim of them, e.g. the query heads of one GQA group) against
// positions kv.First..n-1 of an F16 cache, as ggml does with an F16 KV
// cache (where the positions a sliding window hides are masked to -inf,
// which gives the same weights):
//
//	s[p] = F16(q) · K[p];  w = softmax(s*scale);  out = sum_p F16(w[p]) V[p]
//
// The softmax runs in ggml's order: scale, max, exp(x-max) (Exps'
// approximation), a float64 sum, multiplication by float32(1/sum). K and V
// are read in place (converted in registers). out receives one HeadDim row
// per query vector; scratch must hold AttendScratch(nq, n, HeadDim) floats.
//
// sinks, when not nil, holds one logit per query vector (attention sinks,
// as gpt-oss has): it joins that query's softmax as ggml's soft_max takes
// its sinks (the max runs over it too, exp(sink - max) is added to the
// sum, it is not scaled) but has no value, so the weights sum to less
// than 1.
func AttendF16(out, q []float32, k, v []uint16, kv PagedKV, n int, scale float32, sinks, scratch []float32) {
	nq := checkAttend(len(out), len(q), len(k), len(v), kv, n, len(scratch), len(sinks))
	if nq == 0 {
		return
	}
	if activeISA != isaGo && attendFast(true, out, q, nq, unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0]), kv, n, scale, sinks, scratch) {
		return
	}
	hd := kv.HeadDim
	attendGo(out, q, nq, kv, n, scale, sinks, scratch, true,
		func(dst []float32, o int) { F16ToF32s(dst, k[o:o+hd]) },
		func(dst []float32, o int) { F16ToF32s(dst, v[o:o+hd]) })
}

// AttendF32 is AttendF16 for an F32 cache: neither the queries nor the
// softmax weights are rounded.
func AttendF32(out, q []float32, k, v []float32, kv PagedKV, n int, scale float32, sinks, scratch []float32) {
	nq := checkAttend(len(out), len(q), len(k), len(v), kv, n, len(scratch), len(sinks))
	if nq == 0 {
		return
	}
	if activeISA != isaGo && attendFast(false, out, q, nq, unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0]), kv, n, scale, sinks, scratch) {
		return
	}
	hd := kv.HeadDim
	attendGo(out, q, nq, kv, n, scale, sinks, scratch, false,
		func(dst []float32, o int) { copy(dst, k[o:o+hd]) },
		func(dst []float32, o int) { copy(dst, v[o:o+hd]) })
}

// AttendQ8 is AttendF32 for a Q8_0 cache: element i of K is
// float32(kq[i]) * kd[i/KVQ8Block] (QuantizeKVQ8 writes them), and V's
// likewise with vq and vd. HeadDim, Stride and Off must be multiples of
// KVQ8Block, so that every row starts a scale's block. Each row reads as
// exactly the floats DequantizeKVQ8 gives, so the result is AttendF32's on
// the dequantized cache, bit for bit (the queries and the softmax weights
// are not rounded), except on the AVX-512 VNNI kernel set at head dims that
// are multiples of 64: there the K scores are int8 dot products against
// the queries quantized per KVQ8Block (as llama.cpp does for a q8_0 cache),
// and the result is AttendF32's for those queries to float rounding.
func AttendQ8(out, q []float32, kq []int8, kd []float32, vq []int8, vd []float32, kv PagedKV, n int, scale float32, sinks, scratch []float32) {
	nq := checkAttend(len(out), len(q), len(kq), len(vq), kv, n, len(scratch), len(sinks))
	if nq == 0 {
		return
	}
	if kv.HeadDim%KVQ8Block != 0 || kv.Stride%KVQ8Block != 0 || kv.Off%KVQ8Block != 0 {
		panic(fmt.Sprintf("kernels: AttendQ8: head dim %d, stride %d, offset %d not multiples of %d", kv.HeadDim, kv.Stride, kv.Off, KVQ8Block))
	}
	if len(kd)*KVQ8Block < len(kq) || len(vd)*KVQ8Block < len(vq) {
		panic("kernels: AttendQ8: fewer scales than blocks of elements")
	}
	if activeISA != isaGo && attendQ8Fast(out, q, nq, kq, kd, vq, vd, kv, n, scale, sinks, scratch) {
		return
	}
	hd := kv.HeadDim
	attendGo(out, q, nq, kv, n, scale, sinks, scratch, false,
		func(dst []float32, o int) { DequantizeKVQ8(dst, kq[o:o+hd], kd[o/KVQ8Block:]) },
		func(dst []float32, o int) { DequantizeKVQ8(dst, vq[o:o+hd], vd[o/KVQ8Block:]) })
}

// checkAttend validates the arguments (every row read must lie inside K and
// V: the C kernel does not check) and returns the number of query vectors.
// nSinks is 0 (no sinks) or at least that number.
func checkAttend(nOut, nQ, nK, nV int, kv PagedKV, n, nScratch, nSinks int) int {
	hd, bs := kv.HeadDim, kv.BlockSize
	if hd <= 0 || bs <= 0 || n <= 0 || nQ%hd != 0 || nOut < nQ || kv.Stride < 0 || kv.Off < 0 || kv.First < 0 || kv.First >= n {
		panic(fmt.Sprintf("kernels: Attend: bad shape (q %d, out %d, head dim %d, block size %d, positions %d..%d)", nQ, nOut, hd, bs, kv.First, n-1))
	}
	nq := nQ / hd
	if nq == 0 {
		return 0
	}
	if nScratch < AttendScratch(nq, n-kv.First, hd) {
		panic("kernels: Attend: short scratch")
	}
	if nSinks != 0 && nSinks < nq {
		panic(fmt.Sprintf("kernels: Attend: %d sinks for %d query vectors", nSinks, nq))
	}
	nb := (n + bs - 1) / bs
	if len(kv.Blocks) < nb {
		panic("kernels: Attend: block table shorter than n positions")
	}
	for i := kv.First / bs; i < nb; i++ {
		b := kv.Blocks[i]
		rows := min(bs, n-i*bs)
		end := int(b)*kv.Stride + kv.Off + rows*hd
		if b < 0 || end > nK || end > nV {
			panic(fmt.Sprintf("kernels: Attend: block %d (id %d) outside the cache", i, b))
		}
	}
	return nq
}

// attendGo is the portable Attend: rows are converted into scratch one at
// a time (loadK and loadV: the K or V row at element offset o).
func attendGo(out, q []float32, nq int, kv PagedKV, n int, scale float32, sinks, scratch []float32,
	round bool, loadK, loadV func(dst []float32, o int)) {
	hd, lo := kv.HeadDim, kv.First
	m := n - lo // positions read
	qs, sc, row := scratch[:nq*hd], scratch[nq*hd:nq*(hd+m)], scratch[nq*(hd+m):nq*(hd+m)+hd]
	if round {
		RoundF16s(qs, q[:nq*hd])
	} else {
		copy(qs, q)
	}
	rowAt := func(p int) int { return int(kv.Blocks[p/kv.BlockSize])*kv.Stride + kv.Off + (p%kv.BlockSize)*hd }
	for p := lo; p < n; p++ {
		loadK(row, rowAt(p))
		for j := range nq {
			sc[j*m+p-lo] = dotGo(qs[j*hd:(j+1)*hd], row)
		}
	}
	for j := range nq {
		softmaxSink(sc[j*m:(j+1)*m], scale, sinks, j, round)
	}
	o := out[:nq*hd]
	clear(o)
	for p := lo; p < n; p++ {
		loadV(row, rowAt(p))
		for j := range nq {
			Axpy(sc[j*m+p-lo], row, o[j*hd:(j+1)*hd])
		}
	}
}

// AttendChunk computes the attention of a prompt chunk's T tokens for the
// nh query heads of one KV head, over m gathered rows of that head's K and
// V (float32; the positions the chunk's first token sees and after): V row
// p at v[p*hd:], K in panels (PanelK's layout). Token j's query heads are
// q[j*ldq+i*hd:][:hd], i < nh, and its outputs go to the same places in
// out. Token j sees rows lo..pos0+j: lo = max(0, pos0+j-window+1) with a
// sliding window (window > 0), else 0. Per head and token it is AttendF16's
// (round) or AttendF32's formula over those rows: scores q·K[p] summed in
// order over the head dimension, the softmax in ggml's order with the
// head's sink (sinks: nil or nh logits), the output sum over the rows in
// order. scratch must hold AttendChunkScratch(nh, m, hd) floats.
//
// The C kernels take the chunk in tiles of a few tokens, whose scores are
// register tiles fed by K panel loads and query broadcasts; each K panel
// and block of V rows is read once per tile for every head of the group
// (body_attn.h).
func AttendChunk(out, q []float32, ldq, T, nh, hd int, kt, v []float32, m, pos0, window int, scale float32, sinks []float32, round bool, scratch []float32) {
	if T <= 0 || nh <= 0 || hd <= 0 || ldq < nh*hd || pos0 < 0 || pos0+T > m || window < 0 ||
		len(kt) < PanelKLen(m, hd) || len(v) < m*hd || len(q) < (T-1)*ldq+nh*hd || len(out) < (T-1)*ldq+nh*hd {
		panic(fmt.Sprintf("kernels: AttendChunk: bad shape (%d tokens from column %d of %d rows, %d heads of %d, stride %d; q %d, out %d, k %d, v %d)",
			T, pos0, m, nh, hd, ldq, len(q), len(out), len(kt), len(v)))
	}
	if len(scratch) < AttendChunkScratch(nh, m, hd) {
		panic("kernels: AttendChunk: short scratch")
	}
	if sinks != nil && len(sinks) < nh {
		panic("kernels: AttendChunk: fewer sinks than heads")
	}
	if activeISA != isaGo && attendChunkFast(out, q, ldq, T, nh, hd, kt, v, m, pos0, window, scale, sinks, round, scratch) {
		return
	}
	qs, kp, sc := scratch[:hd], scratch[hd:2*hd], scratch[2*hd:2*hd+m]
	for i := range nh {
		for j := range T {
			qj := q[j*ldq+i*hd : j*ldq+(i+1)*hd]
			if round {
				RoundF16s(qs, qj)
			} else {
				copy(qs, qj)
			}
			n := pos0 + j + 1
			lo := 0
			if window > 0 {
				lo = max(0, n-window)
			}
			row := sc[lo:n]
			for p := range row {
				base := (lo+p)/kPanel*kPanel*hd + (lo+p)%kPanel
				for d := range kp {
					kp[d] = kt[base+d*kPanel]
				}
				row[p] = dotGo(qs, kp)
			}
			softmaxSink(row, scale, sinks, i, round)
			o := out[j*ldq+i*hd : j*ldq+(i+1)*hd]
			clear(o)
			for p, w := range row {
				Axpy(w, v[(lo+p)*hd:(lo+p+1)*hd], o)
			}
		}
	}
}

// AttendChunkScratch is the scratch length AttendChunk needs for nh heads
// over m rows of head dimension hd: for the C kernels a score row (m
// rounded up to whole panels) per head for each of up to 8 tokens of a
// tile, the tile's queries and outputs and one rounded query row; for the
// Go loop one query, one K row and one score row.
func AttendChunkScratch(nh, m, hd int) int {
	return nh*8*panelCols(m) + 2*nh*8*hd + 2*hd + m
}

// panelCols is m rounded up to whole K panels.
func panelCols(m int) int { return (m + kPanel - 1) / kPanel * kPanel }

// kPanel is the positions of a K panel (kernels.h's WATT_KP; attn_cgo.go
// checks).
const kPanel = 64

// PanelKLen is the length of the K panels of m positions of head dimension
// hd (whole panels: the columns past m are never read).
func PanelKLen(m, hd int) int { return panelCols(m) * hd }

// PanelK writes the n rows of k (hd floats each), positions p0..p0+n-1, into
// the K panels kt that AttendChunk reads: element d of position p at
// kt[(p/64)*64*hd + d*64 + p%64].
func PanelK(kt, k []float32, p0, n, hd int) {
	if n <= 0 {
		return
	}
	if p0 < 0 || hd <= 0 || len(k) < n*hd || len(kt) < PanelKLen(p0+n, hd) {
		panic(fmt.Sprintf("kernels: PanelK: %d rows of %d at %d into %d floats", n, hd, p0, len(kt)))
	}
	if activeISA != isaGo && panelKFast(kt, k, p0, n, hd) {
		return
	}
	for r := range n {
		p := p0 + r
		base := p/kPanel*kPanel*hd + p%kPanel
		for d, x := range k[r*hd : (r+1)*hd] {
			kt[base+d*kPanel] = x
		}
	}
}

// softmaxSink is SoftmaxScaled with sinks[i] as the row's sink when sinks
// is not nil.
func softmaxSink(row []float32, scale float32, sinks []float32, i int, round bool) {
	if sinks == nil {
		SoftmaxScaled(row, scale, round)
		return
	}
	softmax(row, scale, &sinks[i], round)
}

// SoftmaxScaled replaces row by softmax(row·scale) as ggml computes it:
// scale, max, exp(x-max) (Exps), a float64 sum, multiplication by
// float32(1/sum), and the weights rounded to F16 when round is set (an F16
// KV cache).
func SoftmaxScaled(row []float32, scale float32, round bool) { softmax(row, scale, nil, round) }

// softmax is SoftmaxScaled with an optional sink: a logit (not scaled)
// that the max runs over and whose exp(sink - max) joins the sum.
func softmax(row []float32, scale float32, sink *float32, round bool) {
	mx := float32(math.Inf(-1))
	for i, x := range row {
		x *= scale
		row[i] = x
		mx = max(mx, x)
	}
	if sink != nil && !(mx > *sink) {
		mx = *sink
	}
	for i := range row {
		row[i] -= mx
	}
	Exps(row, row)
	var sum float64
	for _, e := range row {
		sum += float64(e)
	}
	if sink != nil {
		var e [1]float32
		Exps(e[:], []float32{*sink - mx})
		sum += float64(e[0])
	}
	inv := float32(1 / sum)
	for i := range row {
		row[i] *= inv
	}
	if round {
		RoundF16s(row, row)
	}
}
