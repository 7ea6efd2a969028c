//go:build cgo

// kern_peak.c: the arithmetic peaks weft bench states its compute bounds
// at: 12 independent register chains of the instruction the kernels are
// built from (vfmadd231ps, or vpdpbusd for the VNNI int8 kernels), so
// nothing but the execution ports limits them.
#include "kernels.h"

#if WEFT_X86
#include <immintrin.h>

#define PEAK_CHAINS(OP) OP(a0) OP(a1) OP(a2) OP(a3) OP(a4) OP(a5) OP(a6) OP(a7) OP(a8) OP(a9) OP(a10) OP(a11)
// The chains start from different values: chains started equal stay
// equal, and the compiler may then keep one and run it alone, a
// latency-bound loop that would claim 12 times the work it did.
#define PEAK_INIT(T, SET) \
	T a0 = SET(0), a1 = SET(1), a2 = SET(2), a3 = SET(3), a4 = SET(4), a5 = SET(5), a6 = SET(6), a7 = SET(7), a8 = SET(8), \
	  a9 = SET(9), a10 = SET(10), a11 = SET(11);
#define PEAK_SUM(ADD) ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(ADD(a4, a5), ADD(a6, a7)), ADD(ADD(a8, a9), ADD(a10, a11))))
// PEAK_RUN: iters rounds of OP on the 12 chains; the empty asm (constraint
// C) makes x and w opaque so the compiler cannot fold the rounds.
#define PEAK_RUN(OP, C)                                        \
	for (long i = 0; i < iters; i++) {                    \
		PEAK_CHAINS(OP)                                \
		__asm__ volatile("" : C(x), C(w));             \
	}

#pragma GCC push_options
#pragma GCC target("avx2,fma")
static double peak_fma256(long iters) {
	PEAK_INIT(__m256, _mm256_set1_ps)
	__m256 x = _mm256_set1_ps(0.5f), w = _mm256_set1_ps(0.25f);
#define PEAK_F(a) a = _mm256_fmadd_ps(w, x, a);
	PEAK_RUN(PEAK_F, "+x")
#undef PEAK_F
	float f[8];
	_mm256_storeu_ps(f, PEAK_SUM(_mm256_add_ps));
	return f[0];
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vnni")
static double peak_fma512(long iters) {
	PEAK_INIT(__m512, _mm512_set1_ps)
	__m512 x = _mm512_set1_ps(0.5f), w = _mm512_set1_ps(0.25f);
#define PEAK_F(a) a = _mm512_fmadd_ps(w, x, a);
	PEAK_RUN(PEAK_F, "+v")
#undef PEAK_F
	return _mm512_reduce_add_ps(PEAK_SUM(_mm512_add_ps));
}

static double peak_dpbusd(long iters) {
	PEAK_INIT(__m512i, _mm512_set1_epi32)
	__m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(5);
#define PEAK_D(a) a = _mm512_dpbusd_epi32(a, x, w);
	PEAK_RUN(PEAK_D, "+v")
#undef PEAK_D
	return (double)_mm512_reduce_add_epi32(PEAK_SUM(_mm512_add_epi32));
}
#pragma GCC pop_options
#undef PEAK_CHAINS
#undef PEAK_INIT
#undef PEAK_SUM
#undef PEAK_RUN
#endif

// weft_peak runs iters rounds of 12 instructions on this thread and returns
// the operations done (multiply and add counted apart): float FMAs (kind
// 0) or VNNI int8 dot products (kind 1, 0 where the CPU has none). sink
// keeps the result alive.
double weft_peak(int isa, int kind, long iters, double *sink) {
#if WEFT_X86
	if (kind == 0 && isa >= 2) {
		*sink = peak_fma512(iters);
		return (double)iters * 12 * 32;
	}
	if (kind == 0 && isa == 1) {
		*sink = peak_fma256(iters);
		return (double)iters * 12 * 16;
	}
	if (kind == 1 && isa == 3) {
		*sink = peak_dpbusd(iters);
		return (double)iters * 12 * 128;
	}
#endif
	(void)isa, (void)kind, (void)iters, (void)sink;
	return 0;
}

// weft_stream_sum reads n floats once (8 independent sums, which the
// compiler vectorizes), for the memory bandwidth.
float weft_stream_sum(const float *p, long n) {
	float s[8] = {0};
	long i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++) s[j] += p[i + j];
	for (; i < n; i++) s[0] += p[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
