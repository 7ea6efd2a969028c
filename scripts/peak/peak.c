// peak.c: one core's arithmetic peak for the two instruction forms weft's
// CPU kernels are built from (AVX-512): vfmadd231ps (the float GEMMs) and
// vpdpbusd (the Q8_0 int8 kernels), each as 12 independent register chains.
// These are the compute bounds BENCHMARKS.md quotes.
//
//	gcc -O2 -mavx512f -mavx512vnni -o /tmp/peak scripts/peak/peak.c && /tmp/peak
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CHAINS(OP)                                                                                       \
	a0 = OP(a0);                                                                                     \
	a1 = OP(a1);                                                                                     \
	a2 = OP(a2);                                                                                     \
	a3 = OP(a3);                                                                                     \
	a4 = OP(a4);                                                                                     \
	a5 = OP(a5);                                                                                     \
	a6 = OP(a6);                                                                                     \
	a7 = OP(a7);                                                                                     \
	a8 = OP(a8);                                                                                     \
	a9 = OP(a9);                                                                                     \
	a10 = OP(a10);                                                                                   \
	a11 = OP(a11);

int main(void) {
	const long n = 100000000;
	{
		// distinct starting values: equal chains stay equal, and GCC merged
		// a6..a11 into one (7 instructions a round, counted as 12)
		__m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2),
			a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5),
			a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8),
			a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
		__m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(5);
#define DP(a) _mm512_dpbusd_epi32(a, x, w)
		double t0 = now();
		for (long i = 0; i < n; i++) {
			CHAINS(DP)
			__asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
		}
		double t = now() - t0;
		__m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
					     _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
		s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
		printf("vpdpbusd: %.0f GOPS per core (int8 multiply-adds x 2) [%d]\n", n * 12.0 * 64 * 2 / t / 1e9,
		       _mm512_reduce_add_epi32(s) & 1);
	}
	{
		__m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3),
		       a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7),
		       a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
		__m512 x = _mm512_set1_ps(0.5f), w = _mm512_set1_ps(0.25f);
#define FM(a) _mm512_fmadd_ps(a, x, w)
		double t0 = now();
		for (long i = 0; i < n; i++) {
			CHAINS(FM)
			__asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
		}
		double t = now() - t0;
		__m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
					 _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
		s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
		printf("vfmadd231ps: %.0f GFLOP/s per core [%.1f]\n", n * 12.0 * 16 * 2 / t / 1e9, _mm512_reduce_add_ps(s));
	}
	return 0;
}
