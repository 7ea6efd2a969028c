// body_f16.h: a fragment: IEEE half <-> float conversions in plain C, exact
// (F16 to F32) and round-to-nearest-even (F32 to F16) like the F16C
// instructions (NaNs come back quiet, their payload kept where it fits).
// The per-ISA translation units include it before body_matmul.h and
// body_attn.h, which use it on their scalar paths; Go's F16ToF32 and
// F32ToF16 (f16.go) follow the same rules.
#ifndef WEFT_KERN_F16_H
#define WEFT_KERN_F16_H
#include <stdint.h>
#include <string.h>

static inline float weft_f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, mant = h & 0x3ff, bits;
	if (exp == 31) {
		bits = sign | 0x7f800000u | mant << 13 | (mant ? 0x400000u : 0);
	} else if (exp) {
		bits = sign | (exp + 112) << 23 | mant << 13;
	} else if (!mant) {
		bits = sign;
	} else {
		uint32_t e = 113;
		while (!(mant & 0x400)) {
			mant <<= 1;
			e--;
		}
		bits = sign | e << 23 | (mant & 0x3ff) << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline uint16_t weft_f32_to_f16(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	uint16_t sign = (b >> 16) & 0x8000;
	int32_t exp = (b >> 23) & 0xff;
	uint32_t mant = b & 0x7fffff;
	if (exp == 0xff) return mant ? (sign | 0x7e00 | (mant >> 13)) : (sign | 0x7c00);
	int32_t e = exp - 127 + 15;
	if (e >= 31) return sign | 0x7c00;
	if (e <= 0) {
		if (e < -10) return sign;
		uint32_t m = mant | 0x800000, shift = 14 - e, half = m >> shift, rem = m & ((1u << shift) - 1),
			 mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1))) half++;
		return sign | half;
	}
	uint32_t half = (uint32_t)e << 10 | mant >> 13, rem = mant & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
	return sign | half;
}

#endif
