package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

// quantizeActivations rounds x (tokens of cols values) as the integer
// kernels do: per token and blk columns, dx = amax/127, q = x * (127/amax)
// rounded to nearest even (0 for an all-zero block), and returns dx * q.
func quantizeActivations(x []float32, cols, blk int) []float32 {
	out := make([]float32, len(x))
	for b := 0; b < len(x); b += blk {
		if b%cols+blk > cols {
			panic("blocks must not straddle tokens")
		}
		var amax float32
		for _, v := range x[b : b+blk] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if amax > 0 {
			id = 127 / amax
		}
		for i, v := range x[b : b+blk] {
			q := math.RoundToEven(float64(v * id))
			out[b+i] = d * float32(q)
		}
	}
	return out
}

// TestIQ4MatMulMatchesReference holds IQ4_NL, IQ4_XS and MXFP4 products on
// every kernel set this CPU has, for n = 1..64 tokens and several shapes,
// to the reference: Go's Dequantize, then a float64 dot with the
// activations, rounded to 8 bits exactly as the kernel rounds them where it
// does (usesQuantizedActivations): per 32 columns for IQ4_NL and MXFP4, per
// 256 for IQ4_XS, as llama.cpp's Q8_0 and Q8_K (the test fails if a kernel
// set rounds otherwise). What remains is float rounding of the sums
// (kernels scale and add per block or super-block in float32), so the
// tolerance is 1e-5 of sum |w||x| and no 8-bit rounding bound.
func TestIQ4MatMulMatchesReference(t *testing.T) {
	type shape struct{ rows, cols int }
	cases := []struct {
		typ    gguf.Type
		shapes []shape
		wideE  bool // MXFP4: scales from the subnormal 2^-128 up to 2^12
	}{
		{gguf.TypeIQ4_NL, []shape{{1, 32}, {5, 64}, {37, 96}, {67, 256}, {11, 320}, {130, 768}}, false},
		{gguf.TypeMXFP4, []shape{{1, 32}, {5, 64}, {37, 96}, {67, 256}, {11, 320}, {130, 768}}, false},
		{gguf.TypeMXFP4, []shape{{9, 128}, {40, 512}, {6, 448}}, true},
		{gguf.TypeIQ4_XS, []shape{{1, 256}, {7, 256}, {33, 512}, {130, 768}}, false},
	}
	ns := make([]int, 0, 70)
	for n := 1; n <= 64; n++ {
		ns = append(ns, n)
	}
	ns = append(ns, 100, 200)
	for _, c := range cases {
		for _, sh := range c.shapes {
			rng := rand.New(rand.NewPCG(uint64(c.typ), uint64(sh.rows*sh.cols)))
			w := randomWeight(rng, c.typ, sh.rows, sh.cols)
			if c.wideE {
				for b := 0; b < len(w.Data); b += 17 {
					w.Data[b] = []byte{0, 1, 2, 3, 60, 100, 127, 140}[rng.IntN(8)]
				}
			}
			wf := make([]float32, sh.rows*sh.cols)
			for r := range sh.rows {
				w.Row(r, wf[r*sh.cols:(r+1)*sh.cols])
			}
			for _, n := range ns {
				if raceEnabled && n > 4 && n%16 != 0 {
					continue
				}
				x := randomVec(rng, n*sh.cols)
				qblk := 32 // llama.cpp's activation block for the type
				if c.typ == gguf.TypeIQ4_XS {
					qblk = 256
				}
				xq := quantizeActivations(x, sh.cols, qblk)
				ref := func(xs []float32) (y, bound []float64) {
					y, bound = make([]float64, n*sh.rows), make([]float64, n*sh.rows)
					for tok := range n {
						xt := xs[tok*sh.cols : (tok+1)*sh.cols]
						for r := range sh.rows {
							var s, b float64
							for k, v := range wf[r*sh.cols : (r+1)*sh.cols] {
								p := float64(v) * float64(xt[k])
								s += p
								b += math.Abs(p)
							}
							y[tok*sh.rows+r], bound[tok*sh.rows+r] = s, b
						}
					}
					return y, bound
				}
				wantF, boundF := ref(x)
				wantQ, boundQ := ref(xq)
				for _, isa := range availableISAs() {
					name := fmt.Sprintf("%v/%dx%d/n=%d/%v", c.typ, sh.rows, sh.cols, n, isa)
					quantized := usesQuantizedActivations(isa, w, n)
					blk := activationBlock(isa, w, n)
					got := matMulOn(t, name, isa, w, x, n)
					if quantized && blk != qblk {
						t.Fatalf("%s: activations quantized per %d columns, llama.cpp (and the reference) per %d", name, blk, qblk)
					}
					want, bound := wantF, boundF
					if quantized {
						want, bound = wantQ, boundQ
					}
					bad := 0
					for i := range want {
						tol := 1e-5*bound[i] + 1e-6
						if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) {
							if bad < 3 {
								t.Errorf("%s: y[%d] = %g, want %g (tol %g, quantized %v)", name, i, got[i], want[i], tol, quantized)
							}
							bad++
						}
					}
				}
			}
		}
	}
}
