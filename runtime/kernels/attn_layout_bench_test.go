package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/quant"
)

// BenchmarkAttendLayer times one decode query per KV head for every KV head
// of one layer and reports the KV bytes read per second: "layers" and
// "parallel" on every compute thread, in the CPU backend's layout (per layer,
// KV-head-major, then block, then slot: runtime/cpu's kvOff), twelve layers
// (beyond the cache) or one, and "layersq8" the twelve layers as a Q8_0
// cache; "blockmajor" (block, then head, then slot),
// "headmajor" and "onehead" on one thread.
func BenchmarkAttendLayer(b *testing.B) {
	const hd, bs, heads = 64, 16, 12
	for _, nq := range []int{1, 4} {
		for _, n := range []int{512, 2048, 8192} {
			nb := (n + bs - 1) / bs
			size := nb * heads * bs * hd
			rng := rand.New(rand.NewPCG(7, 8))
			k, v := make([]uint16, size), make([]uint16, size)
			for i := range size {
				k[i] = quant.F32ToF16(float32(rng.NormFloat64()))
				v[i] = quant.F32ToF16(float32(rng.NormFloat64()))
			}
			blocks := make([]int32, nb)
			for i := range blocks {
				blocks[i] = int32(i)
			}
			q := make([]float32, nq*hd)
			for i := range q {
				q[i] = float32(rng.NormFloat64())
			}
			out := make([]float32, nq*hd)
			scratch := make([]float32, AttendScratch(nq, n, hd))
			scale := float32(1 / math.Sqrt(hd))
			b.Run(fmt.Sprintf("layers/nq=%d/n=%d", nq, n), func(b *testing.B) {
				// Twelve layers' caches, each read once per step: the cache
				// holds little of them.
				const layers = 12
				ks, vs := make([][]uint16, layers), make([][]uint16, layers)
				for l := range layers {
					ks[l], vs[l] = append([]uint16(nil), k...), append([]uint16(nil), v...)
				}
				scr := [2][]float32{scratch, make([]float32, len(scratch))}
				outs := [2][]float32{out, make([]float32, len(out))}
				for b.Loop() {
					for l := range layers {
						Parallel(heads, func(w, g int) error {
							kv := PagedKV{Blocks: blocks, BlockSize: bs, HeadDim: hd, Stride: bs * hd, Off: g * nb * bs * hd}
							AttendF16(outs[w], q, ks[l], vs[l], kv, n, scale, nil, scr[w])
							return nil
						})
					}
				}
				b.SetBytes(int64(layers * 2 * heads * n * hd * 2))
			})
			b.Run(fmt.Sprintf("layersq8/nq=%d/n=%d", nq, n), func(b *testing.B) {
				// "layers" for a Q8_0 cache of the same rows: the bytes are
				// the int8 elements and a float32 scale per 32 of them.
				const layers = 12
				k32, v32 := make([]float32, size), make([]float32, size)
				F16ToF32s(k32, k)
				F16ToF32s(v32, v)
				kq, vq := make([][]int8, layers), make([][]int8, layers)
				kd, vd := make([][]float32, layers), make([][]float32, layers)
				for l := range layers {
					kq[l], vq[l] = make([]int8, size), make([]int8, size)
					kd[l], vd[l] = make([]float32, size/KVQ8Block), make([]float32, size/KVQ8Block)
					QuantizeKVQ8(kq[l], kd[l], k32)
					QuantizeKVQ8(vq[l], vd[l], v32)
				}
				scr := [2][]float32{scratch, make([]float32, len(scratch))}
				outs := [2][]float32{out, make([]float32, len(out))}
				for b.Loop() {
					for l := range layers {
						Parallel(heads, func(w, g int) error {
							kv := PagedKV{Blocks: blocks, BlockSize: bs, HeadDim: hd, Stride: bs * hd, Off: g * nb * bs * hd}
							AttendQ8(outs[w], q, kq[l], kd[l], vq[l], vd[l], kv, n, scale, nil, scr[w])
							return nil
						})
					}
				}
				b.SetBytes(int64(layers * 2 * heads * n * (hd + hd/KVQ8Block*4)))
			})
			b.Run(fmt.Sprintf("parallel/nq=%d/n=%d", nq, n), func(b *testing.B) {
				scr := [2][]float32{scratch, make([]float32, len(scratch))}
				outs := [2][]float32{out, make([]float32, len(out))}
				for b.Loop() {
					Parallel(heads, func(w, g int) error {
						kv := PagedKV{Blocks: blocks, BlockSize: bs, HeadDim: hd, Stride: bs * hd, Off: g * nb * bs * hd}
						AttendF16(outs[w], q, k, v, kv, n, scale, nil, scr[w])
						return nil
					})
				}
				b.SetBytes(int64(2 * heads * n * hd * 2))
			})
			for _, lay := range []string{"blockmajor", "headmajor", "onehead"} {
				b.Run(fmt.Sprintf("%s/nq=%d/n=%d", lay, nq, n), func(b *testing.B) {
					hs := heads
					if lay == "onehead" {
						hs = 1
					}
					for b.Loop() {
						for g := range hs {
							kv := PagedKV{Blocks: blocks, BlockSize: bs, HeadDim: hd, Stride: heads * bs * hd, Off: g * bs * hd}
							if lay == "headmajor" {
								kv.Stride, kv.Off = bs*hd, g*nb*bs*hd
							}
							AttendF16(out, q, k, v, kv, n, scale, nil, scratch)
						}
					}
					b.SetBytes(int64(2 * hs * n * hd * 2))
				})
			}
		}
	}
}
