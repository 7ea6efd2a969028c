package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

// BenchmarkMatMul reports weight bytes streamed per second (GB/s) and
// arithmetic rate (GFLOP/s) for the shapes of a 110M llama: ffn_up
// (2048 rows x 768) and the output matrix (32000 x 768).
//
//	go test -run '^$' -bench 'MatMul/' -benchtime=20x ./runtime/quant/
func BenchmarkMatMul(b *testing.B) {
	types := []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K}
	shapes := []struct{ rows, cols int }{{2048, 768}, {32000, 768}}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range types {
		for _, sh := range shapes {
			w := randomWeight(rng, typ, sh.rows, sh.cols)
			for _, n := range []int{1, 16, 64, 512} {
				if sh.rows > 4096 && n > 64 {
					continue
				}
				x := randomVec(rng, n*sh.cols)
				y := make([]float32, n*sh.rows)
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					for b.Loop() {
						MatMul(y, w, x, n)
					}
					s := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(len(w.Data))/s/1e9, "GB/s")
					b.ReportMetric(2*float64(sh.rows*sh.cols*n)/s/1e9, "GFLOP/s")
				})
			}
		}
	}
}
