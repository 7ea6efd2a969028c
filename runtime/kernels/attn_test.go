package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/quant"
)

// attnCase is a paged cache holding one sequence's rows of KV head 1 of 2,
// its blocks scattered over the pool in random order.
type attnCase struct {
	kv       PagedKV
	k32, v32 []float32
	k16, v16 []uint16
	q        []float32
}

func newAttnCase(rng *rand.Rand, hd, nq, n, bs int, qScale float64) attnCase {
	const kvHeads, g = 2, 1
	nb := (n + bs - 1) / bs
	pool := nb + 3
	perm := rng.Perm(pool)
	c := attnCase{kv: PagedKV{BlockSize: bs, HeadDim: hd, Stride: kvHeads * bs * hd, Off: g * bs * hd}}
	for _, b := range perm[:nb] {
		c.kv.Blocks = append(c.kv.Blocks, int32(b))
	}
	size := pool * kvHeads * bs * hd
	c.k16, c.v16 = make([]uint16, size), make([]uint16, size)
	c.k32, c.v32 = make([]float32, size), make([]float32, size)
	for i := range size {
		c.k16[i] = quant.F32ToF16(float32(rng.NormFloat64()))
		c.v16[i] = quant.F32ToF16(float32(rng.NormFloat64()))
		c.k32[i] = float32(rng.NormFloat64())
		c.v32[i] = float32(rng.NormFloat64())
	}
	for range nq * hd {
		c.q = append(c.q, float32(rng.NormFloat64()*qScale))
	}
	return c
}

// attendRef computes the attention outputs (positions c.kv.First..n-1) in
// float64 and, per output
// element, the error the float32 kernels may make: 1e-5 of sum |w·v|, plus,
// when the weights are rounded to F16 (roundW: the Go kernel's ggml order
// with an F16 cache), the full step of any weight within 1e-5 (relative) of
// an F16 rounding boundary (float32 arithmetic may round it either way).
// The C kernels' online softmax (beyond attnSeg positions) never holds a
// final weight, so it does not round one. sinks (nil or one per query vector) join each softmax without
// a value.
func attendRef(c attnCase, f16, roundW bool, n int, scale float64, sinks []float32) (want, tol []float64) {
	hd, bs := c.kv.HeadDim, c.kv.BlockSize
	nq := len(c.q) / hd
	row := func(x []float32, h []uint16, p int) []float64 {
		off := int(c.kv.Blocks[p/bs])*c.kv.Stride + c.kv.Off + (p%bs)*hd
		r := make([]float64, hd)
		for i := range r {
			if f16 {
				r[i] = float64(quant.F16ToF32(h[off+i]))
			} else {
				r[i] = float64(x[off+i])
			}
		}
		return r
	}
	round := func(x float64) float64 { return float64(quant.F16ToF32(quant.F32ToF16(float32(x)))) }
	want, tol = make([]float64, nq*hd), make([]float64, nq*hd)
	for j := range nq {
		q := make([]float64, hd)
		for i := range q {
			q[i] = float64(c.q[j*hd+i])
			if f16 {
				q[i] = round(q[i])
			}
		}
		s := make([]float64, n)
		mx := math.Inf(-1)
		for p := c.kv.First; p < n; p++ {
			for i, kv := range row(c.k32, c.k16, p) {
				s[p] += q[i] * kv
			}
			s[p] *= scale
			mx = max(mx, s[p])
		}
		if sinks != nil {
			mx = max(mx, float64(sinks[j]))
		}
		var sum float64
		for p := c.kv.First; p < n; p++ {
			s[p] = math.Exp(s[p] - mx)
			sum += s[p]
		}
		if sinks != nil {
			sum += math.Exp(float64(sinks[j]) - mx)
		}
		for p := c.kv.First; p < n; p++ {
			w, slack := s[p]/sum, 0.0
			if roundW {
				lo, hi := round(w*(1-1e-5)), round(w*(1+1e-5))
				w, slack = round(w), hi-lo
			}
			for i, vv := range row(c.v32, c.v16, p) {
				want[j*hd+i] += w * vv
				tol[j*hd+i] += (1e-5*w + slack) * math.Abs(vv)
			}
		}
	}
	for i := range tol {
		tol[i] += 1e-7
	}
	return want, tol
}

// TestAttend compares the kernels with attendRef on every kernel set, with
// full attention and with sliding windows (kv.First > 0; the blocks wholly
// below First are then made invalid, as the kernels must not read them),
// with and without attention sinks.
func TestAttend(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	lengths := []int{1, 5, 16, 17, 100, 257}
	if raceEnabled {
		lengths = []int{1, 17, 100}
	}
	for _, hd := range []int{64, 48, 8} {
		for _, nq := range []int{1, 2, 3, 4, 7} {
			for _, n := range lengths {
				for _, cs := range []struct {
					bs int
					qs float64
				}{{16, 1}, {16, 6}, {5, 1}, {5, 6}} {
					bs, qs := cs.bs, cs.qs
					c0 := newAttnCase(rng, hd, nq, n, bs, qs)
					scale := 1 / math.Sqrt(float64(hd))
					// Sinks from well below to well above the scores
					// (whose scale qs sets), or none.
					var sinks []float32
					if rng.IntN(2) == 0 {
						for range nq {
							sinks = append(sinks, float32(rng.NormFloat64()*3*qs))
						}
					}
					for _, window := range []int{0, 7, 16} {
						if window > 0 && window >= n {
							continue
						}
						c := c0
						if window > 0 {
							c.kv.First = n - window
							c.kv.Blocks = append([]int32(nil), c0.kv.Blocks...)
							for i := range c.kv.First / bs {
								c.kv.Blocks[i] = 1 << 30
							}
						}
						testAttendCase(t, c, hd, nq, n, bs, qs, scale, sinks)
					}
				}
			}
		}
	}
}

// TestAttendLong covers contexts of several segments (attnSeg), whose
// softmax states the C kernels merge, with GQA groups, windows that start
// inside a segment, sinks and block sizes that do not divide a tile.
func TestAttendLong(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	lengths := []int{30, attnSeg + 70, 2*attnSeg + 517}
	if raceEnabled {
		lengths = lengths[:1]
	}
	for _, n := range lengths {
		for _, cs := range []struct{ hd, nq, bs int }{{64, 1, 16}, {64, 4, 16}, {48, 3, 5}, {128, 2, 32}, {256, 4, 16}} {
			c0 := newAttnCase(rng, cs.hd, cs.nq, n, cs.bs, 4)
			scale := 1 / math.Sqrt(float64(cs.hd))
			for _, withSinks := range []bool{false, true} {
				var sinks []float32
				if withSinks {
					for range cs.nq {
						sinks = append(sinks, float32(rng.NormFloat64()*8))
					}
				}
				for _, window := range []int{0, 40, attnSeg + 3} {
					if window >= n {
						continue
					}
					c := c0
					if window > 0 {
						c.kv.First = n - window
					}
					testAttendCase(t, c, cs.hd, cs.nq, n, cs.bs, 4, scale, sinks)
				}
			}
		}
	}
}

func testAttendCase(t *testing.T, c attnCase, hd, nq, n, bs int, qs, scale float64, sinks []float32) {
	scratch := make([]float32, AttendScratch(nq, n-c.kv.First, hd))
	for _, f16 := range []bool{true, false} {
		for _, isa := range availableISAs() {
			want, tol := attendRef(c, f16, f16 && (isa == isaGo || n-c.kv.First <= attnSeg), n, scale, sinks)
			name := fmt.Sprintf("%v/f16=%v/hd=%d/nq=%d/n=%d/first=%d/bs=%d/qs=%g/sinks=%v", isa, f16, hd, nq, n, c.kv.First, bs, qs, sinks != nil)
			old := setISA(isa)
			got := make([]float32, nq*hd+3) // the extra elements must stay untouched
			got[nq*hd] = 42
			for i := range scratch {
				scratch[i] = float32(math.NaN()) // the kernel must not read stale scratch
			}
			if f16 {
				AttendF16(got[:nq*hd], c.q, c.k16, c.v16, c.kv, n, float32(scale), sinks, scratch)
			} else {
				AttendF32(got[:nq*hd], c.q, c.k32, c.v32, c.kv, n, float32(scale), sinks, scratch)
			}
			setISA(old)
			if got[nq*hd] != 42 {
				t.Errorf("%s: wrote past out", name)
			}
			bad := 0
			for i, w := range want {
				if d := math.Abs(float64(got[i]) - w); !(d <= tol[i]) {
					if bad++; bad <= 3 {
						t.Errorf("%s: out[%d] = %g, want %g (±%.3g)", name, i, got[i], w, tol[i])
					}
				}
			}
		}
	}
}

func TestAttendChecks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newAttnCase(rng, 8, 1, 20, 16, 1)
	out := make([]float32, 8)
	scratch := make([]float32, AttendScratch(1, 20, 8))
	tests := []struct {
		name string
		f    func()
	}{
		{"block table short", func() { AttendF16(out, c.q, c.k16, c.v16, c.kv, 33, 1, nil, make([]float32, 1000)) }},
		{"block outside", func() {
			kv := c.kv
			kv.Blocks = []int32{c.kv.Blocks[0], 1000}
			AttendF16(out, c.q, c.k16, c.v16, kv, 20, 1, nil, scratch)
		}},
		{"short scratch", func() { AttendF32(out, c.q, c.k32, c.v32, c.kv, 20, 1, nil, scratch[:10]) }},
		{"short sinks", func() {
			AttendF32(make([]float32, 16), append(c.q, c.q...), c.k32, c.v32, c.kv, 20, 1, []float32{1}, make([]float32, 1000))
		}},
		{"short out", func() { AttendF32(out[:4], c.q, c.k32, c.v32, c.kv, 20, 1, nil, scratch) }},
		{"q not whole rows", func() { AttendF32(out, c.q[:5], c.k32, c.v32, c.kv, 20, 1, nil, scratch) }},
		{"window past n", func() {
			kv := c.kv
			kv.First = 20
			AttendF32(out, c.q, c.k32, c.v32, kv, 20, 1, nil, scratch)
		}},
		{"negative first", func() {
			kv := c.kv
			kv.First = -1
			AttendF32(out, c.q, c.k32, c.v32, kv, 20, 1, nil, scratch)
		}},
		{"block outside the window", func() {
			kv := c.kv
			kv.First = 17
			kv.Blocks = []int32{c.kv.Blocks[0], 1000}
			AttendF16(out, c.q, c.k16, c.v16, kv, 20, 1, nil, scratch)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tc.f()
		})
	}
}

// TestAttendGroupSameBits: a GQA group's queries attended together (the
// kernels score a group of rows for up to four queries at once, converting
// each row once) give each query the bits it gets attended alone, on every
// kernel set, F16, F32 and Q8_0 (head dims of whole scale blocks), in one
// segment and in several, with a window.
func TestAttendGroupSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	lengths := []int{33, 300, 2*attnSeg + 77}
	if raceEnabled {
		lengths = lengths[:2]
	}
	for _, hd := range []int{64, 128, 48} {
		for _, nq := range []int{2, 4, 7, 8} {
			for _, n := range lengths {
				c := newAttnCase(rng, hd, nq, n, 16, 4)
				if n > 100 {
					c.kv.First = 19
				}
				scale := float32(1 / math.Sqrt(float64(hd)))
				scratch := make([]float32, AttendScratch(nq, n-c.kv.First, hd))
				var kq, vq []int8
				var kd, vd []float32
				if hd%KVQ8Block == 0 {
					kq, vq = make([]int8, len(c.k32)), make([]int8, len(c.v32))
					kd, vd = make([]float32, len(c.k32)/KVQ8Block), make([]float32, len(c.v32)/KVQ8Block)
					QuantizeKVQ8(kq, kd, c.k32)
					QuantizeKVQ8(vq, vd, c.v32)
				}
				for _, cache := range []string{"f16", "f32", "q8_0"} {
					if cache == "q8_0" && kq == nil {
						continue
					}
					for _, isa := range availableISAs() {
						old := setISA(isa)
						run := func(out, q []float32) {
							switch cache {
							case "f16":
								AttendF16(out, q, c.k16, c.v16, c.kv, n, scale, nil, scratch)
							case "f32":
								AttendF32(out, q, c.k32, c.v32, c.kv, n, scale, nil, scratch)
							default:
								AttendQ8(out, q, kq, kd, vq, vd, c.kv, n, scale, nil, scratch)
							}
						}
						group := make([]float32, nq*hd)
						run(group, c.q)
						for j := range nq {
							alone := make([]float32, hd)
							run(alone, c.q[j*hd:(j+1)*hd])
							for i := range alone {
								if math.Float32bits(alone[i]) != math.Float32bits(group[j*hd+i]) {
									t.Fatalf("%v/%s/hd=%d/nq=%d/n=%d: query %d out[%d] = %g in the group, %g alone",
										isa, cache, hd, nq, n, j, i, group[j*hd+i], alone[i])
								}
							}
						}
						setISA(old)
					}
				}
			}
		}
	}
}

// TestAttendChunk compares AttendChunk with a float64 reference (attendRef's
// tolerances) on every kernel set: head dims that fill the vectors and
// ones that leave tails (8, 40), one head or a group of them, chunks shorter
// and longer than a tile, from the first position or deep in the context,
// with and without a sliding window, sinks, and F16 rounding. The query
// rows sit in a wider matrix (other KV heads' columns), which must be left
// as they were.
func TestAttendChunk(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	round16 := func(x float64) float64 { return float64(quant.F16ToF32(quant.F32ToF16(float32(x)))) }
	for _, cs := range []struct {
		hd, nh, T, pos0, window int
		sinks                   bool
	}{
		{64, 4, 16, 0, 0, false}, {64, 4, 37, 90, 0, false}, {128, 2, 13, 200, 0, true}, {8, 8, 20, 5, 0, false},
		{40, 3, 9, 33, 0, false}, {64, 1, 70, 0, 0, false}, {256, 2, 7, 64, 0, false},
		{64, 4, 40, 30, 8, false}, {128, 2, 25, 100, 37, true}, {8, 4, 30, 0, 5, false}, {64, 5, 6, 129, 64, false},
	} {
		hd, nh, T := cs.hd, cs.nh, cs.T
		m := cs.pos0 + T
		ldq := (nh + 2) * hd // two other heads' columns after the group's
		for _, round := range []bool{false, true} {
			gen := func(n int, s float64) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * s)
					if round {
						x[i] = float32(round16(float64(x[i])))
					}
				}
				return x
			}
			k, v, q := gen(m*hd, 1), gen(m*hd, 1), gen(T*ldq, 0.3)
			var sinks []float32
			if cs.sinks {
				sinks = gen(nh, 1)
			}
			const scale = 0.125
			want, tol := make([]float64, T*ldq), make([]float64, T*ldq)
			for i := range nh {
				for j := range T {
					n := cs.pos0 + j + 1
					lo := 0
					if cs.window > 0 {
						lo = max(0, n-cs.window)
					}
					s := make([]float64, n)
					mx := math.Inf(-1)
					if sinks != nil {
						mx = float64(sinks[i])
					}
					for p := lo; p < n; p++ {
						for d := range hd {
							x := float64(q[j*ldq+i*hd+d])
							if round {
								x = round16(x)
							}
							s[p] += x * float64(k[p*hd+d])
						}
						s[p] *= scale
						mx = max(mx, s[p])
					}
					var sum float64
					for p := lo; p < n; p++ {
						s[p] = math.Exp(s[p] - mx)
						sum += s[p]
					}
					if sinks != nil {
						sum += math.Exp(float64(sinks[i]) - mx)
					}
					o := j*ldq + i*hd
					for p := lo; p < n; p++ {
						w, slack := s[p]/sum, 0.0
						if round {
							a, b := round16(w*(1-1e-5)), round16(w*(1+1e-5))
							w, slack = round16(w), b-a
						}
						for d := range hd {
							want[o+d] += w * float64(v[p*hd+d])
							tol[o+d] += (1e-5*w + slack) * math.Abs(float64(v[p*hd+d]))
						}
					}
				}
			}
			for _, isa := range availableISAs() {
				name := fmt.Sprintf("%v/hd=%d/nh=%d/T=%d/pos0=%d/window=%d/sinks=%v/round=%v", isa, hd, nh, T, cs.pos0, cs.window, cs.sinks, round)
				out := make([]float32, T*ldq)
				for i := range out {
					out[i] = 42
				}
				scratch := make([]float32, AttendChunkScratch(nh, m, hd))
				old := setISA(isa)
				kt := make([]float32, PanelKLen(m, hd))
				for p0 := 0; p0 < m; p0 += 16 { // as a cache's blocks of 16 come
					PanelK(kt, k[p0*hd:], p0, min(16, m-p0), hd)
				}
				AttendChunk(out, q, ldq, T, nh, hd, kt, v, m, cs.pos0, cs.window, scale, sinks, round, scratch)
				setISA(old)
				for j := range T {
					for c := range ldq {
						g := out[j*ldq+c]
						if c >= nh*hd {
							if g != 42 {
								t.Fatalf("%s: token %d column %d (another head's) = %g, was 42", name, j, c, g)
							}
							continue
						}
						if d := math.Abs(float64(g) - want[j*ldq+c]); !(d <= tol[j*ldq+c]+1e-6) {
							t.Fatalf("%s: token %d head %d out[%d] = %g, want %g (±%.2g)", name, j, c/hd, c%hd, g, want[j*ldq+c], tol[j*ldq+c])
						}
					}
				}
			}
		}
	}
}
