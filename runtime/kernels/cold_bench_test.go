package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// BenchmarkMatMulCold is BenchmarkMatMul as a forward pass sees it: the
// weights come from memory, not cache (24 matrices taken in turn, 14-38 MB
// for F16), for the layer shapes of synth-110m and the token counts of
// decoding (1, 16, 64 sequences) and of a 128-token prompt chunk.
//
//	go test -run '^$' -bench 'MatMulCold' -benchtime=100x ./runtime/kernels/
func BenchmarkMatMulCold(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K} {
		for _, sh := range []struct{ rows, cols int }{{768, 768}, {2048, 768}, {768, 2048}} {
			rng := rand.New(rand.NewPCG(5, 6))
			ws := make([]quant.Weight, 24)
			for i := range ws {
				ws[i] = randomWeight(rng, typ, sh.rows, sh.cols)
			}
			for _, n := range []int{1, 2, 4, 8, 12, 16, 24, 64, 128} {
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					x := randomVec(rng, n*sh.cols)
					y := make([]float32, n*sh.rows)
					i := 0
					for b.Loop() {
						MatMul(y, ws[i%len(ws)], x, n)
						i++
					}
					s := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(2*float64(sh.rows*sh.cols*n)/s/1e9, "GFLOP/s")
					b.ReportMetric(float64(len(ws[0].Data))/s/1e9, "GB/s")
				})
			}
		}
	}
}
