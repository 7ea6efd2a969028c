package quant

import (
	"encoding/binary"
	"math"
)

// quantMXFP4 encodes 32 values as MXFP4, the OCP microscaling way: the
// shared scale is 2^(floor(log2 amax) - 2), the largest power of two that
// puts amax at or above the E2M1 range's 4 (so values up to 1.5x that power
// are kept and larger ones clip to +-6 times the scale, as ggml's reference
// encoder does), and each value takes the nearest E2M1 value (round to
// nearest, the first of the table on a tie).
func quantMXFP4(dst []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	e := 0
	if amax > 0 {
		_, exp := math.Frexp(float64(amax)) // amax = f * 2^exp, f in [0.5, 1)
		e = min(255, max(0, exp-1-2+127))
	}
	dst[0] = byte(e)
	d := e8m0Half(byte(e))
	idx := func(v float32) byte {
		best, bestErr := 0, float32(math.Inf(1))
		for i, q := range mxfp4Values {
			if err := float32(math.Abs(float64(float32(q)*d - v))); err < bestErr {
				best, bestErr = i, err
			}
		}
		return byte(best)
	}
	for j := range 16 {
		dst[1+j] = idx(x[j]) | idx(x[j+16])<<4
	}
}

// quantIQ4_NL encodes 32 values as IQ4_NL by rounding to nearest: the
// scale d (rounded to f16) maps the value of largest magnitude to the
// table's -127 end, and each value takes the table entry nearest to x/d.
// ggml's encoder then refits d by weighted least squares and searches
// nearby scales; this one does not (enough for generated test models).
func quantIQ4_NL(dst []byte, x []float32) {
	var amax, mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, mx = a, v
		}
	}
	d := RoundF16(mx / float32(iq4Values[0]))
	binary.LittleEndian.PutUint16(dst, F32ToF16(d))
	var id float32
	if d != 0 {
		id = 1 / d
	}
	idx := func(v float32) byte {
		t := v * id
		best, bestErr := 0, float32(math.Inf(1))
		for i, q := range iq4Values {
			if err := float32(math.Abs(float64(float32(q) - t))); err < bestErr {
				best, bestErr = i, err
			}
		}
		return byte(best)
	}
	for j := range 16 {
		dst[2+j] = idx(x[j]) | idx(x[j+16])<<4
	}
}
