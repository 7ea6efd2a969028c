package kernels

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// cpuTime is the CPU time this process has used (all threads): on a busy
// shared machine it is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMatMul reports weight bytes streamed per second (GB/s) and
// arithmetic rate (GFLOP/s) by wall time, and the same per CPU-second
// (cpuGB/s, cpuGFLOP/s: per-core efficiency, less hurt by a loaded machine),
// for the shapes of a 110M llama: ffn_up (2048 rows x 768) and the output
// matrix (32000 x 768).
//
//	go test -run '^$' -bench 'MatMul/' -benchtime=20x ./runtime/kernels/
func BenchmarkMatMul(b *testing.B) {
	types := []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1,
		gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}
	shapes := []struct{ rows, cols int }{{2048, 768}, {768, 2048}, {32000, 768}}
	for _, typ := range types {
		for _, sh := range shapes {
			var w quant.Weight
			for _, n := range []int{1, 4, 16, 64, 128, 512} {
				if sh.rows > 4096 && n > 64 {
					continue
				}
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(5, 6))
					if w.Data == nil {
						w = randomWeight(rng, typ, sh.rows, sh.cols)
					}
					x := randomVec(rng, n*sh.cols)
					y := make([]float32, n*sh.rows)
					MatMul(y, w, x, n)
					c0 := cpuTime()
					b.ResetTimer()
					for b.Loop() {
						MatMul(y, w, x, n)
					}
					s := b.Elapsed().Seconds() / float64(b.N)
					cs := (cpuTime() - c0).Seconds() / float64(b.N)
					bytes, flops := float64(len(w.Data)), 2*float64(sh.rows*sh.cols*n)
					b.ReportMetric(bytes/s/1e9, "GB/s")
					b.ReportMetric(flops/s/1e9, "GFLOP/s")
					b.ReportMetric(bytes/cs/1e9, "cpuGB/s")
					b.ReportMetric(flops/cs/1e9, "cpuGFLOP/s")
				})
			}
		}
	}
}

// BenchmarkMatMulTiny covers stories260K shapes (dim 64), where call
// overhead, not arithmetic, decides.
func BenchmarkMatMulTiny(b *testing.B) {
	shapes := []struct {
		typ        gguf.Type
		rows, cols int
	}{
		{gguf.TypeF32, 64, 64}, {gguf.TypeF32, 172, 64}, {gguf.TypeF16, 64, 172}, {gguf.TypeF32, 512, 64},
		{gguf.TypeQ8_0, 64, 64}, {gguf.TypeQ4_0, 172, 64},
	}
	for _, sh := range shapes {
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("%v/%dx%d/n=%d", sh.typ, sh.rows, sh.cols, n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(5, 6))
				w := randomWeight(rng, sh.typ, sh.rows, sh.cols)
				x := randomVec(rng, n*sh.cols)
				y := make([]float32, n*sh.rows)
				for b.Loop() {
					MatMul(y, w, x, n)
				}
			})
		}
	}
}

// BenchmarkMatMulExpert covers one expert of the gptoss-1.5b preset
// (1024 x 1024) at the few tokens a mixture-of-experts step routes to each
// expert, on either side of the lane GEMM's threshold.
//
//	go test -run '^$' -bench 'MatMulExpert' ./runtime/kernels/
func BenchmarkMatMulExpert(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.TypeMXFP4, gguf.TypeQ8_0} {
		rng := rand.New(rand.NewPCG(5, 6))
		w := randomWeight(rng, typ, 1024, 1024)
		for _, n := range []int{1, 2, 4, 7, 8, 12, 16} {
			b.Run(fmt.Sprintf("%v/n=%d", typ, n), func(b *testing.B) {
				x := randomVec(rng, n*1024)
				y := make([]float32, n*1024)
				for b.Loop() {
					MatMul(y, w, x, n)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/token")
			})
		}
	}
}

func BenchmarkDot(b *testing.B) {
	for _, n := range []int{64, 768} {
		rng := rand.New(rand.NewPCG(5, 6))
		x, y := randomVec(rng, n), randomVec(rng, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += Dot(x, y)
			}
			_ = s
		})
	}
}
