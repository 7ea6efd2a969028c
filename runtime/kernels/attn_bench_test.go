package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// BenchmarkAttend times one decode query (head dim 64, blocks of 16, F16
// cache) against n cached positions: "paged" is AttendF16 reading the cache
// in place; "gather" is the path it replaced (convert the head's K and V
// rows to F32, then MatMul, softmax, MulVecT), for comparison; "window" is
// AttendF16 with a sliding window of 64 (PagedKV.First = n-64: its cost
// should follow the window, not n).
func BenchmarkAttend(b *testing.B) {
	for _, nq := range []int{1, 4} {
		for _, n := range []int{64, 512} {
			const hd, bs = 64, 16
			c := newAttnCase(rand.New(rand.NewPCG(5, 6)), hd, nq, n, bs, 1)
			scale := float32(1 / math.Sqrt(hd))
			out := make([]float32, nq*hd)
			b.Run(fmt.Sprintf("paged/nq=%d/n=%d", nq, n), func(b *testing.B) {
				scratch := make([]float32, AttendScratch(nq, n, hd))
				for b.Loop() {
					AttendF16(out, c.q, c.k16, c.v16, c.kv, n, scale, nil, scratch)
				}
			})
			b.Run(fmt.Sprintf("window64/nq=%d/n=%d", nq, n), func(b *testing.B) {
				kv := c.kv
				kv.First = n - 64
				scratch := make([]float32, AttendScratch(nq, 64, hd))
				for b.Loop() {
					AttendF16(out, c.q, c.k16, c.v16, kv, n, scale, nil, scratch)
				}
			})
			b.Run(fmt.Sprintf("gather/nq=%d/n=%d", nq, n), func(b *testing.B) {
				kk, vv := make([]float32, n*hd), make([]float32, n*hd)
				q16, sc := make([]float32, hd), make([]float32, n)
				for b.Loop() {
					for p0 := 0; p0 < n; p0 += bs {
						cnt := min(bs, n-p0) * hd
						off := int(c.kv.Blocks[p0/bs])*c.kv.Stride + c.kv.Off
						F16ToF32s(kk[p0*hd:p0*hd+cnt], c.k16[off:off+cnt])
						F16ToF32s(vv[p0*hd:p0*hd+cnt], c.v16[off:off+cnt])
					}
					for j := range nq {
						RoundF16s(q16, c.q[j*hd:(j+1)*hd])
						w := quant.Weight{Type: gguf.TypeF32, Rows: n, Cols: hd,
							Data: unsafe.Slice((*byte)(unsafe.Pointer(&kk[0])), 4*len(kk))}
						MatMul(sc, w, q16, 1)
						SoftmaxScaled(sc, scale, true)
						MulVecT(out[j*hd:(j+1)*hd], vv, sc, n, hd)
					}
				}
			})
		}
	}
}

// BenchmarkAttendChunk times AttendChunk for one KV head of the 1B preset
// (4 query heads of 64, F16 rounding) and a 512-token prompt chunk at the
// end of m gathered positions, on one thread; GFLOP/s counts the two
// products' multiply-adds over the visible (causal) positions.
func BenchmarkAttendChunk(b *testing.B) {
	const nh, hd, T = 4, 64, 512
	for _, m := range []int{512, 4096} {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(7, 8))
			gen := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				return x
			}
			k, v, q := gen(m*hd), gen(m*hd), gen(T*nh*hd)
			out := make([]float32, T*nh*hd)
			scratch := make([]float32, AttendChunkScratch(nh, m, hd))
			kt := make([]float32, PanelKLen(m, hd))
			PanelK(kt, k, 0, m, hd)
			for b.Loop() {
				AttendChunk(out, q, nh*hd, T, nh, hd, kt, v, m, m-T, 0, 0.125, nil, true, scratch)
			}
			flops := 0.0
			for j := range T {
				flops += 4 * float64(nh*hd*(m-T+j+1))
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
