package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestQuantizeKVQ8 checks that a Q8_0 cache holds what ggml's q8_0 holds
// (the weights' Q8_0 encoder, dequantized, gives the same floats) and that
// each value is within half a step of the input, plus what rounding the
// step to F16 after quantizing moves the largest code (127 times the
// rounding).
func TestQuantizeKVQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 32 * 40
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(i/32%7-3)))
	}
	clear(x[64:96]) // an all-zero block
	q, d := make([]int8, n), make([]float32, n/KVQ8Block)
	QuantizeKVQ8(q, d, x)
	got := make([]float32, n)
	DequantizeKVQ8(got, q, d)
	enc, err := quant.Quantize(gguf.TypeQ8_0, x, n)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, n)
	if err := quant.Dequantize(gguf.TypeQ8_0, enc, want); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d: %g, ggml's q8_0 holds %g (input %g)", i, got[i], want[i], x[i])
		}
		var amax float64
		for _, v := range x[i/KVQ8Block*KVQ8Block:][:KVQ8Block] {
			amax = max(amax, math.Abs(float64(v)))
		}
		step := amax / 127
		if e := math.Abs(float64(got[i] - x[i])); e > (0.5*step+127*math.Abs(step-float64(d[i/KVQ8Block])))*1.001 {
			t.Fatalf("element %d: %g for %g, off by more than half the step and its rounding, %g", i, got[i], x[i], d[i/KVQ8Block])
		}
	}
}

// TestAttendQ8 checks that attention over a Q8_0 cache gives, bit for bit,
// what attention over an F32 cache holding the dequantized rows gives, on
// every kernel set (but the AVX-512 VNNI one at head dims that are
// multiples of 64, whose int8 K scores read the queries quantized per 32:
// there it is the F32 cache's result for those queries, to float rounding): within a segment, across segments (online softmax),
// with a sliding window's first position, with sinks, for 1 to 8 queries
// per KV head, head dims 32 to 256 and blocks of 16 and 5 rows.
func TestAttendQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	lengths := []int{1, 33, 300, 2*attnSeg + 77}
	if raceEnabled {
		lengths = lengths[:3]
	}
	for _, hd := range []int{64, 32, 128, 256} {
		for _, nq := range []int{1, 2, 3, 4, 8} {
			for _, n := range lengths {
				for _, bs := range []int{16, 5} {
					if (hd == 256 || bs == 5) && n > attnSeg && nq != 4 {
						continue // the long cases once per head dim and block size
					}
					c := newAttnCase(rng, hd, nq, n, bs, 4)
					if n > 100 {
						c.kv.First = 19
					}
					kq, vq := make([]int8, len(c.k32)), make([]int8, len(c.v32))
					kd, vd := make([]float32, len(c.k32)/KVQ8Block), make([]float32, len(c.v32)/KVQ8Block)
					QuantizeKVQ8(kq, kd, c.k32)
					QuantizeKVQ8(vq, vd, c.v32)
					k32, v32 := make([]float32, len(kq)), make([]float32, len(vq))
					DequantizeKVQ8(k32, kq, kd)
					DequantizeKVQ8(v32, vq, vd)
					var sinks []float32
					if nq == 3 {
						for range nq {
							sinks = append(sinks, float32(rng.NormFloat64()))
						}
					}
					scale := float32(1 / math.Sqrt(float64(hd)))
					scratch := make([]float32, AttendScratch(nq, n-c.kv.First, hd))
					for _, isa := range availableISAs() {
						old := setISA(isa)
						got, want := make([]float32, nq*hd), make([]float32, nq*hd)
						AttendQ8(got, c.q, kq, kd, vq, vd, c.kv, n, scale, sinks, scratch)
						int8K := isa == isaVNNI && hd%64 == 0
						if int8K {
							// int8 K scores: the queries read as their
							// per-32 quantization (checked to a float
							// tolerance: the sums run in another order).
							AttendF32(want, quantizedQueries(c.q), k32, v32, c.kv, n, scale, sinks, scratch)
						} else {
							AttendF32(want, c.q, k32, v32, c.kv, n, scale, sinks, scratch)
						}
						setISA(old)
						if int8K {
							checkClose(t, fmt.Sprintf("%v/hd=%d/nq=%d/n=%d/bs=%d", isa, hd, nq, n, bs), got, want, 2e-5)
							continue
						}
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v/hd=%d/nq=%d/n=%d/bs=%d: out[%d] = %g, the dequantized F32 cache gives %g",
									isa, hd, nq, n, bs, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestAttendQ8Checks: a head dim, stride or offset that is not a multiple
// of the scales' block, or too few scales, panics before any read.
func TestAttendQ8Checks(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	c := newAttnCase(rng, 48, 1, 40, 16, 1)
	q8 := make([]int8, len(c.k32))
	d := make([]float32, len(c.k32)/KVQ8Block+1)
	scratch := make([]float32, AttendScratch(1, 40, 48))
	out := make([]float32, 48)
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("head dim 48", func() { AttendQ8(out, c.q, q8, d, q8, d, c.kv, 40, 1, nil, scratch) })
	c64 := newAttnCase(rng, 64, 1, 40, 16, 1)
	q64 := make([]int8, len(c64.k32))
	short := make([]float32, len(c64.k32)/KVQ8Block-1)
	out64 := make([]float32, 64)
	s64 := make([]float32, AttendScratch(1, 40, 64))
	mustPanic("short scales", func() { AttendQ8(out64, c64.q, q64, short, q64, short, c64.kv, 40, 1, nil, s64) })
	kv := c64.kv
	kv.Off += 16
	full := make([]float32, len(c64.k32)/KVQ8Block)
	mustPanic("offset 16", func() { AttendQ8(out64, c64.q, q64, full, q64, full, kv, 40, 1, nil, s64) })
}

// quantizedQueries is q (query vectors of a multiple of 32 floats) as the
// VNNI Q8_0 attention kernel reads it: per 32 elements, dq = amax/127 and
// each element round-to-even(x * (127/amax)) * dq.
func quantizedQueries(q []float32) []float32 {
	out := make([]float32, len(q))
	for b := 0; b < len(q); b += KVQ8Block {
		var amax float32
		for _, x := range q[b : b+KVQ8Block] {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		if amax == 0 {
			continue
		}
		id, d := 127/amax, amax/127
		for i, x := range q[b : b+KVQ8Block] {
			out[b+i] = float32(math.RoundToEven(float64(x*id))) * d
		}
	}
	return out
}

// checkClose fails unless every got[i] is within tol * max|want| of want[i].
func checkClose(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	var scale float64
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= tol*scale) {
			t.Fatalf("%s: out[%d] = %g, want %g (tolerance %g)", name, i, got[i], want[i], tol*scale)
		}
	}
}
