//go:build cgo

package kernels

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestKernelFailureIsAnError makes the C matrix kernel fail (as when a
// thread's scratch allocation fails) and checks that MatMul, MatMuls and
// Parallel return the failure as an error, on the caller's goroutine and
// from the pool's workers alike, and that products run normally again once
// the kernel does.
func TestKernelFailureIsAnError(t *testing.T) {
	// The best kernel set the CPU has is a C one whenever cgo is on (the
	// portable C set at least); another test may have left the Go one.
	defer setISA(setISA(bestISA()))
	defer injectKernelFailure(statusOK)
	rng := rand.New(rand.NewPCG(11, 12))
	small := randomWeight(rng, gguf.TypeQ8_0, 64, 256)   // below parallelMin: the caller's goroutine
	large := randomWeight(rng, gguf.TypeQ8_0, 2048, 768) // a pool job
	bx := randomVec(rng, 32*large.Cols)
	before := make([]float32, 32*large.Rows)
	if err := MatMul(before, large, bx, 32); err != nil {
		t.Fatal(err)
	}
	run := map[string]func() error{
		"MatMul/serial": func() error {
			return MatMul(make([]float32, 4*small.Rows), small, randomVec(rng, 4*small.Cols), 4)
		},
		"MatMul/pool": func() error {
			return MatMul(make([]float32, 32*large.Rows), large, randomVec(rng, 32*large.Cols), 32)
		},
		"MatMuls": func() error {
			x := randomVec(rng, 8*768)
			return MatMuls(8, Product{Y: make([]float32, 8*large.Rows), W: large, X: x},
				Product{Y: make([]float32, 8*large.Rows), W: large, X: x})
		},
		"Parallel": func() error {
			return Parallel(6, func(_, i int) error {
				if i%2 == 0 {
					return nil
				}
				return MatMul(make([]float32, 2*small.Rows), small, randomVec(rand.New(rand.NewPCG(uint64(i), 1)), 2*small.Cols), 2)
			})
		},
	}
	for _, tc := range []struct {
		status int
		want   error
	}{
		{statusNoMemory, ErrKernelMemory},
		{statusUnsupported, quant.ErrType},
	} {
		injectKernelFailure(tc.status)
		for name, f := range run {
			err := f()
			if !errors.Is(err, tc.want) {
				t.Errorf("status %d: %s = %v, want an error wrapping %v", tc.status, name, err, tc.want)
			}
		}
	}
	injectKernelFailure(statusOK)
	for name, f := range run {
		if err := f(); err != nil {
			t.Errorf("after the failure: %s = %v", name, err)
		}
	}
	// The results are those of before the failure, not just error-free.
	got := make([]float32, len(before))
	if err := MatMul(got, large, bx, 32); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != before[i] {
			t.Fatalf("y[%d] = %g after the failure, %g before", i, got[i], before[i])
		}
	}
}
