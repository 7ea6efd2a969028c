package kernels

import (
	"sync/atomic"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestParallel checks that every index runs exactly once, on a worker
// index below Workers(), and that no two calls share a worker at once.
func TestParallel(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100} {
		counts := make([]atomic.Int32, n)
		busy := make([]atomic.Int32, Workers())
		var bad atomic.Int32
		err := Parallel(n, func(worker, i int) error {
			if worker < 0 || worker >= len(busy) {
				bad.Add(1)
				return nil
			}
			if busy[worker].Add(1) != 1 {
				bad.Add(1)
			}
			counts[i].Add(1)
			// a nested MatMul must not deadlock on the pool
			w := quant.Weight{Type: gguf.TypeF32, Rows: 256, Cols: 256, Data: make([]byte, 256*256*4)}
			err := MatMul(make([]float32, 256*4), w, make([]float32, 256*4), 4)
			busy[worker].Add(-1)
			return err
		})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if bad.Load() != 0 {
			t.Errorf("n=%d: %d calls on a bad or busy worker index", n, bad.Load())
		}
		for i := range counts {
			if c := counts[i].Load(); c != 1 {
				t.Errorf("n=%d: index %d ran %d times, want 1", n, i, c)
			}
		}
	}
}
