package quant

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// MatMul computes y[t*w.Rows + r] = sum_k W[r][k] * x[t*w.Cols + k] for
// every row r < w.Rows and token t < n. It reads the weights once for all n
// tokens and splits rows over the worker pool when the product is large
// enough to pay for it. It panics when w fails Validate or x, y are short.
func MatMul(y []float32, w Weight, x []float32, n int) {
	rb := checkMatMul(y, w, x, n)
	if n == 0 || w.Rows == 0 {
		return
	}
	isa := activeISA
	cost := len(w.Data) + w.Rows*w.Cols*n/2
	parts := min(workers(), w.Rows/16)
	if cost < parallelMin || parts < 2 {
		matmulRows(isa, w, rb, 0, w.Rows, x, n, y)
		return
	}
	// Work is cut into chunks that the caller and the pool claim from a
	// shared counter: a worker that wakes late finds nothing left rather than
	// making the caller wait for it. Each chunk prepares (quantizes or packs)
	// the activations again, so many-token products use one chunk per
	// worker and few-token ones two.
	chunks := parts
	if n < 24 {
		chunks = min(2*parts, w.Rows/16)
	}
	j := &job{isa: isa, w: w, rb: rb, x: x, n: n, y: y, nchunks: chunks}
	j.chunk = ((w.Rows+chunks-1)/chunks + 3) &^ 3
	j.nchunks = (w.Rows + j.chunk - 1) / j.chunk
	j.wg.Add(j.nchunks)
	for range min(parts, j.nchunks) - 1 {
		select {
		case poolCh <- j:
		default: // pool busy: the caller does more itself
		}
	}
	j.run()
	j.wg.Wait()
}

// parallelMin is the work size (weight bytes + multiply-adds / 2) below
// which MatMul stays on the caller's goroutine: a handoff costs a few µs.
const parallelMin = 192 << 10

func checkMatMul(y []float32, w Weight, x []float32, n int) int {
	rb, err := w.validate()
	if err != nil {
		panic(fmt.Sprintf("quant: MatMul: %v", err))
	}
	if n < 0 || len(x) < n*w.Cols || len(y) < n*w.Rows {
		panic(fmt.Sprintf("quant: MatMul: %d tokens need x of %d and y of %d, have %d and %d",
			n, n*w.Cols, n*w.Rows, len(x), len(y)))
	}
	return rb
}

// job is one MatMul call shared by the caller and the pool.
type job struct {
	isa     isaKind
	w       Weight
	rb      int
	x       []float32
	n       int
	y       []float32
	chunk   int          // rows per chunk
	nchunks int          // number of chunks
	next    atomic.Int32 // next unclaimed chunk
	wg      sync.WaitGroup
}

// run claims and computes chunks until none is left.
func (j *job) run() {
	for {
		c := int(j.next.Add(1)) - 1
		if c >= j.nchunks {
			return
		}
		r0 := c * j.chunk
		matmulRows(j.isa, j.w, j.rb, r0, min(r0+j.chunk, j.w.Rows), j.x, j.n, j.y)
		j.wg.Done()
	}
}

var (
	poolOnce sync.Once
	poolCh   chan *job
	poolSize int
)

// workers starts the pool on first use: GOMAXPROCS-1 goroutines that live
// for the rest of the process (the caller is the last worker).
func workers() int {
	poolOnce.Do(func() {
		poolSize = goruntime.GOMAXPROCS(0)
		poolCh = make(chan *job, 4*poolSize)
		for range poolSize - 1 {
			go func() {
				for j := range poolCh {
					j.run()
				}
			}()
		}
	})
	return poolSize
}

// matmulRows computes rows [r0, r1) of y for all n tokens.
func matmulRows(isa isaKind, w Weight, rb, r0, r1 int, x []float32, n int, y []float32) {
	if isa == isaGo || !cgoKernels {
		matmulRowsGo(w, rb, r0, r1, x, n, y)
		return
	}
	matmulRowsC(isa, w, rb, r0, r1, x, n, y)
}

// matmulRowsGo is the portable Go kernel: dequantize a row, dot it with
// every token.
func matmulRowsGo(w Weight, rb, r0, r1 int, x []float32, n int, y []float32) {
	K := w.Cols
	row := make([]float32, K)
	deq := dequantizers[w.Type]
	for r := r0; r < r1; r++ {
		deq(w.Data[r*rb:(r+1)*rb], row)
		for t := range n {
			y[t*w.Rows+r] = dotGo(row, x[t*K:(t+1)*K])
		}
	}
}

// matMulRef is the reference: reference dequantization, float64 sums.
func matMulRef(y []float32, w Weight, x []float32, n int) {
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
