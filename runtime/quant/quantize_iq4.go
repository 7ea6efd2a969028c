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

// quantIQ4_XS encodes 256 values as IQ4_XS by rounding to nearest: each
// sub-block of 32 wants the scale that maps its value of largest magnitude
// to the table's -127 end (as quantIQ4_NL); the super-block scale d (f16)
// is the largest of those in magnitude over 31, each sub-block's 6-bit
// scale is its wanted scale over d rounded to [-32, 31], and each value
// takes the table entry nearest to x/(d·ls). ggml's encoder also refits
// and searches scales; this one does not (enough for generated models).
func quantIQ4_XS(dst []byte, x []float32) {
	var want [8]float32
	var dmax float32
	for ib := range 8 {
		var amax, mx float32
		for _, v := range x[32*ib : 32*ib+32] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		want[ib] = mx / float32(iq4Values[0])
		dmax = max(dmax, float32(math.Abs(float64(want[ib]))))
	}
	d := RoundF16(dmax / 31)
	binary.LittleEndian.PutUint16(dst, F32ToF16(d))
	var sh uint16
	sl, qs := dst[4:8], dst[8:136]
	clear(sl)
	for ib := range 8 {
		ls := int32(32) // a zero scale
		if d != 0 {
			ls = min(63, max(0, int32(math.Round(float64(want[ib]/d)))+32))
		}
		sl[ib/2] |= byte(ls&0xf) << (4 * uint(ib%2))
		sh |= uint16(ls>>4) << (2 * uint(ib))
		dl := d * float32(ls-32)
		var id float32
		if dl != 0 {
			id = 1 / dl
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
		xs, q := x[32*ib:32*ib+32], qs[16*ib:16*ib+16]
		for j := range 16 {
			q[j] = idx(xs[j]) | idx(xs[j+16])<<4
		}
	}
	binary.LittleEndian.PutUint16(dst[2:], sh)
}
