package quant

import (
	"fmt"
	goruntime "runtime"
	"sync"
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
	var wg sync.WaitGroup
	chunk := (w.Rows + parts - 1) / parts
	chunk = (chunk + 3) &^ 3
	wg.Add(parts - 1)
	r0 := chunk
	for range parts - 1 {
		r1 := min(r0+chunk, w.Rows)
		poolCh <- task{isa: isa, w: w, rb: rb, r0: r0, r1: r1, x: x, n: n, y: y, wg: &wg}
		r0 = r1
	}
	matmulRows(isa, w, rb, 0, min(chunk, w.Rows), x, n, y)
	wg.Wait()
}

// parallelMin is the work size (weight bytes + multiply-adds / 2) below
// which MatMul stays on the caller's goroutine: a handoff costs a few µs.
const parallelMin = 192 << 10

func checkMatMul(y []float32, w Weight, x []float32, n int) int {
	if err := w.Validate(); err != nil {
		panic(fmt.Sprintf("quant: MatMul: %v", err))
	}
	if n < 0 || len(x) < n*w.Cols || len(y) < n*w.Rows {
		panic(fmt.Sprintf("quant: MatMul: %d tokens need x of %d and y of %d, have %d and %d",
			n, n*w.Cols, n*w.Rows, len(x), len(y)))
	}
	return w.RowBytes()
}

type task struct {
	isa    isaKind
	w      Weight
	rb     int
	r0, r1 int
	x      []float32
	n      int
	y      []float32
	wg     *sync.WaitGroup
}

var (
	poolOnce sync.Once
	poolCh   chan task
	poolSize int
)

// workers starts the pool on first use: GOMAXPROCS-1 goroutines that live
// for the rest of the process (the caller is the last worker).
func workers() int {
	poolOnce.Do(func() {
		poolSize = goruntime.GOMAXPROCS(0)
		poolCh = make(chan task, 4*poolSize)
		for range poolSize - 1 {
			go func() {
				for t := range poolCh {
					matmulRows(t.isa, t.w, t.rb, t.r0, t.r1, t.x, t.n, t.y)
					t.wg.Done()
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
