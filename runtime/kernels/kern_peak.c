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

// The stream readers keep 8 vector sums apart: with one or two chains the
// adds' latency, not the loads, would limit a read from the cache, and the
// in-cache bandwidth would come out low, a bound that is not one.
#if WEFT_X86
#pragma GCC push_options
#pragma GCC target("avx2")
static float stream_sum256(const float *p, long n) {
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
	long i = 0;
	for (; i + 64 <= n; i += 64) {
		s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
		s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
		s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
		s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
		s4 = _mm256_add_ps(s4, _mm256_loadu_ps(p + i + 32));
		s5 = _mm256_add_ps(s5, _mm256_loadu_ps(p + i + 40));
		s6 = _mm256_add_ps(s6, _mm256_loadu_ps(p + i + 48));
		s7 = _mm256_add_ps(s7, _mm256_loadu_ps(p + i + 56));
	}
	__m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
				 _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7)));
	float f[8];
	_mm256_storeu_ps(f, s);
	float t = ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
	for (; i < n; i++) t += p[i];
	return t;
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f")
static float stream_sum512(const float *p, long n) {
	__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
	long i = 0;
	for (; i + 128 <= n; i += 128) {
		s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p + i));
		s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + i + 16));
		s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + i + 32));
		s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + i + 48));
		s4 = _mm512_add_ps(s4, _mm512_loadu_ps(p + i + 64));
		s5 = _mm512_add_ps(s5, _mm512_loadu_ps(p + i + 80));
		s6 = _mm512_add_ps(s6, _mm512_loadu_ps(p + i + 96));
		s7 = _mm512_add_ps(s7, _mm512_loadu_ps(p + i + 112));
	}
	float t = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
						    _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7))));
	for (; i < n; i++) t += p[i];
	return t;
}
#pragma GCC pop_options
#endif

// weft_stream_sum reads n floats once and returns their sum, for the
// memory and cache bandwidths: 8 vector sums on AVX2 (isa 1) and AVX-512
// (isa >= 2); 32 scalar sums elsewhere, which the compiler vectorizes.
float weft_stream_sum(int isa, const float *p, long n) {
#if WEFT_X86
	if (isa >= 2) return stream_sum512(p, n);
	if (isa == 1) return stream_sum256(p, n);
#endif
	(void)isa;
	float s[32] = {0};
	long i = 0;
	for (; i + 32 <= n; i += 32)
		for (int j = 0; j < 32; j++) s[j] += p[i + j];
	for (; i < n; i++) s[0] += p[i];
	float t = 0;
	for (int j = 0; j < 32; j++) t += s[j];
	return t;
}
