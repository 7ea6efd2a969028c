package quant

import "math"

// F16ToF32 converts an IEEE 754 binary16 value to float32 exactly
// (subnormals and infinities included). NaNs keep sign and payload and come
// back quiet, as from the x86 F16C instruction ggml uses.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f && mant == 0:
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0x1f: // nan: payload in the top mantissa bits, quiet
		return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: normalise
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// F32ToF16 converts float32 to binary16 with round-to-nearest-even, the
// rounding of the x86 F16C instruction ggml uses (overflow gives ±inf,
// NaN stays NaN, quietened, with the top payload bits kept).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// subnormal half (or zero): value = mant24 * 2^(exp-150); half unit 2^-24
		if e < -10 {
			return sign // below half of the smallest subnormal (ties included)
		}
		m := mant | 0x800000
		shift := uint32(14 - e) // 24-bit mantissa -> subnormal half mantissa
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to inf: correct
	}
	return sign | uint16(half)
}

// RoundF16 is f rounded to F16 (nearest even) and back.
func RoundF16(f float32) float32 { return F16ToF32(F32ToF16(f)) }
