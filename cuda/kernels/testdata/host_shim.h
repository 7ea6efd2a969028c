// host_shim.h stands in for the CUDA builtins dequant.cuh uses, so g++ can
// compile dq_elem on the host for dequant_test.go. Not part of the fatbin.
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>

#define __device__
#define __forceinline__ inline
#define __ushort_as_half(h) (h)

static inline float __half2float(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { // subnormal: normalise
			exp = 127 - 15 + 1;
			while ((man & 0x400) == 0) {
				man <<= 1;
				exp--;
			}
			bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000 | (man << 13);
	} else {
		bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline float __uint_as_float(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline float __int_as_float(int32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
