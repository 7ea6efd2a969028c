// kernels.h: C kernels for package quant, compiled into the cgo object of
// kernels_cgo.go. The body (kern_body.h) is included once per instruction
// set under a GCC target pragma; Go picks the variant at run time.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static inline float weft_f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, mant = h & 0x3ff, bits;
	if (exp == 31) {
		bits = sign | 0x7f800000u | mant << 13;
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

static __thread float *weft_tls_buf;
static __thread long weft_tls_cap;

// weft_scratch returns this thread's tile buffer of at least n floats.
static float *weft_scratch(long n) {
	if (n > weft_tls_cap) {
		free(weft_tls_buf);
		long bytes = (n * 4 + 63) & ~63L;
		weft_tls_buf = aligned_alloc(64, bytes);
		weft_tls_cap = weft_tls_buf ? n : 0;
	}
	return weft_tls_buf;
}

// weft_tile_rows: rows dequantized per tile. Few tokens: 4 rows (the tile
// stays in L1 for the one pass). Many tokens: ~96 KiB of f32 so the tile
// sits in L2 while every token streams past it.
static int weft_tile_rows(int K, int n) {
	if (n <= 4) return 4;
	int rb = 24576 / (K > 0 ? K : 1);
	if (rb < 4) rb = 4;
	if (rb > 64) rb = 64;
	return rb & ~3;
}

// ---- portable (any CPU; the compiler vectorizes for its baseline) ----
#define SFX _gen
#define VW 4
#define NRMAX 2
#include "kern_body.h"
#undef SFX
#undef VW
#undef NRMAX

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define HAVE_F16C 1
#define SFX _avx2
#define VW 8
#define NRMAX 3
#include "kern_body.h"
#undef SFX
#undef VW
#undef NRMAX
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#define SFX _avx512
#define VW 16
#define NRMAX 4
#include "kern_body.h"
#undef SFX
#undef VW
#undef NRMAX
#undef HAVE_F16C
#pragma GCC pop_options
#endif

// ISA selectors passed from Go.
enum { WEFT_GEN = 0, WEFT_AVX2 = 1, WEFT_AVX512 = 2 };

static int weft_matmul(int isa, int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, int n,
		       float *y, long ldy) {
#if defined(__x86_64__)
	if (isa == WEFT_AVX512) return matmul_avx512(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
	if (isa == WEFT_AVX2) return matmul_avx2(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
#endif
	return matmul_gen(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
}

static float weft_dot(int isa, const float *a, const float *b, long n) {
#if defined(__x86_64__)
	if (isa == WEFT_AVX512) return dot_avx512(a, b, n);
	if (isa == WEFT_AVX2) return dot_avx2(a, b, n);
#endif
	return dot_gen(a, b, n);
}

static void weft_f16_to_f32s(int isa, float *dst, const uint16_t *src, long n) {
#if defined(__x86_64__)
	if (isa == WEFT_AVX512) return f16_to_f32s_avx512(dst, src, n);
	if (isa == WEFT_AVX2) return f16_to_f32s_avx2(dst, src, n);
#endif
	f16_to_f32s_gen(dst, src, n);
}

static void weft_f32_to_f16s(int isa, uint16_t *dst, const float *src, long n) {
#if defined(__x86_64__)
	if (isa == WEFT_AVX512) return f32_to_f16s_avx512(dst, src, n);
	if (isa == WEFT_AVX2) return f32_to_f16s_avx2(dst, src, n);
#endif
	f32_to_f16s_gen(dst, src, n);
}
