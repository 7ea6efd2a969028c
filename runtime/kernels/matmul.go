package kernels

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// MatMul computes y[t*w.Rows + r] = sum_k W[r][k] * x[t*w.Cols + k] for
// every row r < w.Rows and token t < n. It reads the weights once for all n
// tokens and splits rows over the worker pool when the product is large
// enough to pay for it. It panics when w fails Validate or x, y are short
// (a caller's bug); a failure of the kernel itself (ErrKernelMemory, or
// quant.ErrType for a shape the C kernel has no code for) is returned, and y is
// then undefined.
func MatMul(y []float32, w quant.Weight, x []float32, n int) error {
	rb := checkMatMul(y, w, x, n)
	if n == 0 || w.Rows == 0 {
		return nil
	}
	if matmulCost(w, n) < parallelMin || min(workers(), w.Rows/16) < 2 {
		return matmulRows(activeISA, w, rb, 0, w.Rows, x, nil, n, y)
	}
	return runJob(n, nil, []Product{{Y: y, W: w, X: x}}, []int{rb})
}

// ErrKernel is wrapped by the errors of a C kernel that failed; ErrKernelMemory,
// which wraps it, reports that a kernel could not allocate its thread's
// scratch buffer.
var (
	ErrKernel       = errors.New("kernels: kernel failed")
	ErrKernelMemory = fmt.Errorf("%w: out of memory", ErrKernel)
)

// Product is one y = W·x of a MatMuls or MatMulsRagged call (see MatMul
// for the layout).
type Product struct {
	Y []float32
	W quant.Weight
	X []float32
	// N is the product's own token count in MatMulsRagged; MatMuls gives
	// every product its n and ignores N.
	N int
}

// MatMuls computes several independent products over the same n tokens
// (such as the query, key and value projections of one input) as ONE
// parallel job: the pool is handed work once instead of once per product,
// and the row chunks of all products are shared out together, so no worker
// idles at the end of a small product. It panics and fails like MatMul,
// returning the first failure (every Y is then undefined).
func MatMuls(n int, ps ...Product) error {
	var rbs [8]int
	rb := rbs[:0]
	cost := 0
	for _, p := range ps {
		rb = append(rb, checkMatMul(p.Y, p.W, p.X, n))
		cost += matmulCost(p.W, n)
	}
	if n == 0 {
		return nil
	}
	if cost < parallelMin || workers() < 2 {
		for i, p := range ps {
			if p.W.Rows == 0 {
				continue
			}
			if err := matmulRows(activeISA, p.W, rb[i], 0, p.W.Rows, p.X, nil, n, p.Y); err != nil {
				return err
			}
		}
		return nil
	}
	return runJob(n, nil, ps, rb)
}

// MatMulsRagged computes independent products that each have their own
// token count (Product.N), such as the experts of a mixture-of-experts
// step, each over the rows routed to it, as ONE parallel job: the pool is
// handed work once for all of them, and when the products outnumber the
// workers each product is one piece of work, so a step of many small
// products pays no handoff per product. Each Y is bit for bit what
// MatMul(p.Y, p.W, p.X, p.N) writes (the same kernel for the same rows and
// tokens). It panics and fails like MatMul, returning the first failure.
func MatMulsRagged(ps ...Product) error {
	rb := make([]int, len(ps))
	ns := make([]int, len(ps))
	cost := 0
	for i, p := range ps {
		rb[i] = checkMatMul(p.Y, p.W, p.X, p.N)
		ns[i] = p.N
		cost += matmulCost(p.W, p.N)
	}
	if cost < parallelMin || workers() < 2 {
		for i, p := range ps {
			if p.W.Rows == 0 || p.N == 0 {
				continue
			}
			if err := matmulRows(activeISA, p.W, rb[i], 0, p.W.Rows, p.X, nil, p.N, p.Y); err != nil {
				return err
			}
		}
		return nil
	}
	return runJob(0, ns, ps, rb)
}

func matmulCost(w quant.Weight, n int) int { return len(w.Data) + w.Rows*w.Cols*n/2 }

// runJob splits the products into row chunks that the caller and the pool
// claim from a shared counter: a worker that wakes late (busy machine)
// finds nothing left rather than making the caller wait for it. Kernels
// that quantize or pack the activations get them prepared here once, shared
// by all chunks and by the products that read the same x. A chunk that
// fails does not stop the others (they finish, so no worker is left
// behind); the first failure is returned. ns, when not nil, holds each
// product's token count (MatMulsRagged); otherwise every product has n.
func runJob(n int, ns []int, ps []Product, rb []int) error {
	maybeYield()
	parts := workers()
	j := &job{isa: activeISA, n: n, ns: ns}
	bufs := prepPool.Get().(*prepBufs)
	defer prepPool.Put(bufs)
	j.prep = bufs.prepare(j.isa, j, ps)
	for i, p := range ps {
		// Few tokens: two chunks per worker, or, in a ragged job of more
		// products than that, the whole product. Many: up to four, in
		// multiples of the GEMM's 32-row tile and of at least 192 rows
		// (the float GEMM packs all tokens again per chunk, a cost that
		// smaller chunks pay too often), so the caller can take over a
		// late worker's share.
		pn := j.tokens(i)
		if pn == 0 || p.W.Rows == 0 {
			continue
		}
		np, align := min(2*parts, p.W.Rows/16), 4
		if pn >= 24 {
			np, align = min(4*parts, p.W.Rows/192), 32
		} else if ns != nil && len(ps) >= 2*parts {
			np = 1
		}
		np = max(np, 1)
		size := ((p.W.Rows+np-1)/np + align - 1) &^ (align - 1)
		for r0 := 0; r0 < p.W.Rows; r0 += size {
			j.chunks = append(j.chunks, chunk{p: int32(i), r0: int32(r0), r1: int32(min(r0+size, p.W.Rows))})
		}
	}
	j.ps, j.rb = ps, rb
	if len(j.chunks) == 0 {
		return nil
	}
	j.pend.add(len(j.chunks))
	post(j, min(parts, len(j.chunks))-1)
	j.run(0)
	j.pend.wait()
	if err := j.err.Load(); err != nil {
		return *err
	}
	return nil
}

// prepBufs holds a job's prepared activations; reused through prepPool.
type prepBufs struct {
	bufs  [][]byte
	out   [][]byte
	kinds []int
}

var prepPool = sync.Pool{New: func() any { return new(prepBufs) }}

// prepare returns each product's prepared activations (nil where its kernel
// takes x as is), preparing each distinct (x, kind, tokens) once: a product
// reading the same x as an earlier one of the same kind, width and token
// count shares its buffer.
func (b *prepBufs) prepare(isa isaKind, jb *job, ps []Product) [][]byte {
	b.out, b.kinds = b.out[:0], b.kinds[:0]
	used := 0
	for i, p := range ps {
		n := jb.tokens(i)
		var kind, size int
		if n > 0 {
			kind, size = prepKind(isa, p.W, n)
		}
		var buf []byte
		if kind != 0 && size != 0 {
			for j := range i {
				if b.kinds[j] == kind && jb.tokens(j) == n && &ps[j].X[0] == &p.X[0] && ps[j].W.Cols == p.W.Cols {
					buf = b.out[j]
				}
			}
			if buf == nil {
				if used == len(b.bufs) {
					b.bufs = append(b.bufs, nil)
				}
				if cap(b.bufs[used]) < size {
					b.bufs[used] = make([]byte, size)
				}
				buf = b.bufs[used][:size]
				used++
				prepActivations(kind, p.X, n, p.W.Cols, buf)
			}
		}
		b.out, b.kinds = append(b.out, buf), append(b.kinds, kind)
	}
	return b.out
}

// parallelMin is the work size (weight bytes + multiply-adds / 2) below
// which MatMul stays on the caller's goroutine: a handoff costs a few µs.
const parallelMin = 192 << 10

func checkMatMul(y []float32, w quant.Weight, x []float32, n int) int {
	if err := w.Validate(); err != nil {
		panic(fmt.Sprintf("kernels: MatMul: %v", err))
	}
	rb := w.RowBytes()
	if n < 0 || len(x) < n*w.Cols || len(y) < n*w.Rows {
		panic(fmt.Sprintf("kernels: MatMul: %d tokens need x of %d and y of %d, have %d and %d",
			n, n*w.Cols, n*w.Rows, len(x), len(y)))
	}
	return rb
}

// job is one MatMul or MatMuls call shared by the caller and the pool.
type job struct {
	isa    isaKind
	n      int   // every product's token count, unless ns is set
	ns     []int // each product's token count (MatMulsRagged), or nil
	ps     []Product
	rb     []int    // row bytes of each product's weight
	prep   [][]byte // each product's prepared activations, or nil
	chunks []chunk
	next   atomic.Int32 // next unclaimed chunk
	pend   pending
	err    atomic.Pointer[error] // the first chunk's failure
}

// tokens is product p's token count.
func (j *job) tokens(p int) int {
	if j.ns != nil {
		return j.ns[p]
	}
	return j.n
}

// chunk is rows [r0, r1) of product p.
type chunk struct{ p, r0, r1 int32 }

// run claims and computes chunks until none is left.
func (j *job) run(int) {
	for {
		c := int(j.next.Add(1)) - 1
		if c >= len(j.chunks) {
			return
		}
		ch := j.chunks[c]
		p := &j.ps[ch.p]
		if err := matmulRows(j.isa, p.W, j.rb[ch.p], int(ch.r0), int(ch.r1), p.X, j.prep[ch.p], j.tokens(int(ch.p)), p.Y); err != nil {
			j.err.CompareAndSwap(nil, &err)
		}
		j.pend.done()
	}
}

// matmulRows computes rows [r0, r1) of y for all n tokens.
// prep is x prepared for this product's kernel (see prepKind) or nil.
func matmulRows(isa isaKind, w quant.Weight, rb, r0, r1 int, x []float32, prep []byte, n int, y []float32) error {
	if isa == isaGo || !cgoKernels {
		matmulRowsGo(w, rb, r0, r1, x, n, y)
		return nil
	}
	return matmulRowsC(isa, w, rb, r0, r1, x, prep, n, y)
}

// rowPool holds matmulRowsGo's row buffers (no allocation per call).
var rowPool = sync.Pool{New: func() any { return new([]float32) }}

// matmulRowsGo is the portable Go kernel: dequantize a row, dot it with
// every token.
func matmulRowsGo(w quant.Weight, rb, r0, r1 int, x []float32, n int, y []float32) {
	K := w.Cols
	bp := rowPool.Get().(*[]float32)
	defer rowPool.Put(bp)
	if cap(*bp) < K {
		*bp = make([]float32, K)
	}
	row := (*bp)[:K]
	for r := r0; r < r1; r++ {
		if err := quant.Dequantize(w.Type, w.Data[r*rb:(r+1)*rb], row); err != nil {
			panic(fmt.Sprintf("kernels: MatMul: %v", err)) // w passed Validate
		}
		for t := range n {
			y[t*w.Rows+r] = dotGo(row, x[t*K:(t+1)*K])
		}
	}
}

// matMulRef is the reference: reference dequantization, float64 sums.
func matMulRef(y []float32, w quant.Weight, x []float32, n int) {
	checkMatMul(y, w, x, n)
	row := make([]float32, w.Cols)
	for r := range w.Rows {
		w.Row(r, row)
		for t := range n {
			var s float64
			for k, v := range row {
				s += float64(v) * float64(x[t*w.Cols+k])
			}
			y[t*w.Rows+r] = float32(s)
		}
	}
}

// Int8Products reports whether MatMul runs products of this weight type and
// row length as int8 dot products at every token count on this CPU (their
// arithmetic peak is then the integer one, not the float one).
func Int8Products(t gguf.Type, cols int) bool {
	w := quant.Weight{Type: t, Cols: cols}
	return usesQuantizedActivations(activeISA, w, 1) && usesQuantizedActivations(activeISA, w, 1024)
}
