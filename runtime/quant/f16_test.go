package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16ToF32Values(t *testing.T) {
	cases := []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0x0400, float32(math.Ldexp(1, -14))},
		{0x0001, float32(math.Ldexp(1, -24))},
		{0x03ff, float32(math.Ldexp(1023, -24))},
		{0x8001, -float32(math.Ldexp(1, -24))},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		if got := F16ToF32(c.h); got != c.want {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", c.h, got, c.want)
		}
	}
	if got := math.Float32bits(F16ToF32(0x8000)); got != 0x80000000 {
		t.Errorf("F16ToF32(-0) bits = %#x", got)
	}
	if got := math.Float32bits(F16ToF32(0x7e01)); got != 0x7fc02000 {
		t.Errorf("F16ToF32(nan 0x7e01) bits = %#x, want 0x7fc02000", got)
	}
}

// TestF16RoundTrip checks every half: half -> float -> half is the
// identity (NaNs come back quiet with their payload).
func TestF16RoundTrip(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		got := F32ToF16(f)
		want := h
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want = h | 0x200
		}
		if got != want {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	cases := []struct {
		f    float64
		want uint16
	}{
		{1 + math.Ldexp(1, -11), 0x3c00},    // tie -> even
		{1 + math.Ldexp(3, -11), 0x3c02},    // tie -> even (up)
		{1 + math.Ldexp(1.01, -11), 0x3c01}, // above the tie
		{65519, 0x7bff},
		{65520, 0x7c00}, // rounds to inf
		{1e10, 0x7c00},
		{-1e10, 0xfc00},
		{math.Ldexp(1, -25), 0x0000},                      // tie with 0 -> even
		{math.Ldexp(1.5, -25), 0x0001},                    // above the tie
		{math.Ldexp(3, -25), 0x0002},                      // 1.5 units: tie -> even
		{math.Ldexp(1, -14) - math.Ldexp(1, -25), 0x0400}, // between max subnormal and min normal
		{math.Ldexp(1, -30), 0x0000},
		{-math.Ldexp(1, -30), 0x8000},
	}
	for _, c := range cases {
		if got := F32ToF16(float32(c.f)); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	// Random floats: the result must be a nearest half.
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		f := float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(40)-26))
		h := F32ToF16(f)
		d := math.Abs(float64(F16ToF32(h)) - float64(f))
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7fff >= 0x7c00 {
				continue
			}
			if dn := math.Abs(float64(F16ToF32(nb)) - float64(f)); dn < d {
				t.Fatalf("F32ToF16(%g) = %#04x is not nearest (%#04x is closer)", f, h, nb)
			}
		}
	}
}

// TestF16NaNInfEdges pins the NaN rule (a NaN stays a NaN, of the same
// sign, and comes back quiet, as from F16C and ggml_fp32_to_fp16), the
// infinities and the subnormal edges, both ways.
func TestF16NaNInfEdges(t *testing.T) {
	toHalf := []struct {
		bits uint32 // float32 bits
		want uint16
	}{
		{0x7f800000, 0x7c00}, // +inf
		{0xff800000, 0xfc00}, // -inf
		{0x7fc00000, 0x7e00}, // quiet NaN
		{0xffc00000, 0xfe00}, // negative quiet NaN keeps its sign
		{0x7f800001, 0x7e00}, // signalling NaN, payload below the half's bits: quiet, still NaN
		{0x7fa00000, 0x7f00}, // signalling NaN: quietened, top payload bits kept
		{0x7f7fffff, 0x7c00}, // max float overflows to inf
		{0x33000000, 0x0000}, // 2^-25, half the smallest subnormal: tie to even (0)
		{0x33000001, 0x0001}, // just above it
		{0x387fc000, 0x03ff}, // largest subnormal half
		{0x38800000, 0x0400}, // smallest normal half
		{0x80000000, 0x8000}, // -0
	}
	for _, c := range toHalf {
		if got := F32ToF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("F32ToF16(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
	toFloat := []struct {
		h    uint16
		want uint32
	}{
		{0x7c01, 0x7fc02000}, // signalling half NaN comes back quiet
		{0xfc01, 0xffc02000},
		{0x7e00, 0x7fc00000},
		{0x7fff, 0x7fffe000},
		{0x03ff, 0x387fc000},
		{0x0001, 0x33800000},
	}
	for _, c := range toFloat {
		if got := math.Float32bits(F16ToF32(c.h)); got != c.want {
			t.Errorf("F16ToF32(%#04x) = %#08x, want %#08x", c.h, got, c.want)
		}
	}
}
