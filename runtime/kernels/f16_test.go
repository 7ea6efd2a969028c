package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/quant"
)

// TestF16BulkMatchesScalar compares the SIMD bulk conversions of every
// kernel set with the scalar functions, special values included.
func TestF16BulkMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	n := 1000
	halves := make([]uint16, n)
	floats := make([]float32, n)
	for i := range halves {
		halves[i] = uint16(rng.Uint32())
		switch i % 5 {
		case 0:
			floats[i] = math.Float32frombits(rng.Uint32())
		case 1:
			floats[i] = float32(math.Ldexp(rng.Float64(), rng.IntN(40)-30))
		default:
			floats[i] = float32(rng.NormFloat64())
		}
	}
	floats[3], floats[8] = float32(math.Inf(1)), float32(math.NaN())
	for _, isa := range availableISAs() {
		old := setISA(isa)
		gotF := make([]float32, n)
		F16ToF32s(gotF, halves)
		gotH := make([]uint16, n)
		F32ToF16s(gotH, floats)
		gotR := make([]float32, n)
		RoundF16s(gotR, floats)
		setISA(old)
		for i := range n {
			if want := quant.F16ToF32(quant.F32ToF16(floats[i])); math.Float32bits(gotR[i]) != math.Float32bits(want) {
				t.Errorf("%v: RoundF16s[%d](%g) = %#x, want %#x", isa, i, floats[i], math.Float32bits(gotR[i]), math.Float32bits(want))
				break
			}
		}
		for i := range n {
			if want := quant.F16ToF32(halves[i]); math.Float32bits(gotF[i]) != math.Float32bits(want) {
				t.Errorf("%v: F16ToF32s[%d](%#04x) = %#x, want %#x", isa, i, halves[i], math.Float32bits(gotF[i]), math.Float32bits(want))
				break
			}
		}
		for i := range n {
			if want := quant.F32ToF16(floats[i]); gotH[i] != want {
				t.Errorf("%v: F32ToF16s[%d](%g / %#x) = %#04x, want %#04x", isa, i, floats[i], math.Float32bits(floats[i]), gotH[i], want)
				break
			}
		}
	}
}

// TestF16BulkNaNInfEdges holds the bulk conversions of every kernel set to
// the scalar ones over all 65,536 halves: every half that is a NaN stays
// one, both ways.
func TestF16BulkNaNInfEdges(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	for _, isa := range availableISAs() {
		old := setISA(isa)
		f := make([]float32, len(all))
		F16ToF32s(f, all)
		back := make([]uint16, len(all))
		F32ToF16s(back, f)
		setISA(old)
		for i, h := range all {
			if got, want := math.Float32bits(f[i]), math.Float32bits(quant.F16ToF32(h)); got != want {
				t.Fatalf("%v: F16ToF32s(%#04x) = %#08x, scalar %#08x", isa, h, got, want)
			}
			isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
			if isNaN != math.IsNaN(float64(f[i])) {
				t.Fatalf("%v: half %#04x NaN=%v, float %g", isa, h, isNaN, f[i])
			}
			want := h
			if isNaN {
				want |= 0x200 // quiet bit
			}
			if back[i] != want {
				t.Fatalf("%v: F32ToF16s(F16ToF32s(%#04x)) = %#04x, want %#04x", isa, h, back[i], want)
			}
		}
	}
}
