// body_lane.h: what the int8 lane GEMM's unpacking passes share
// (kern_vnni.c's Q4_K and Q6_K, kern_iq4.c's 4-bit table types). Included
// by those two files after <immintrin.h>, under their AVX-512 target
// pragma.

// lane_sums8: the sums of the 32 bytes (unsigned) of each of eight blocks, as eight
// floats in block order, from the four 64-byte vectors a (blocks 0 and 2),
// b (1 and 3), c (4 and 6) and d (5 and 7).
static inline __attribute__((always_inline)) __m256 lane_sums8(__m512i a, __m512i b, __m512i c, __m512i d) {
	const __m512i z = _mm512_setzero_si512();
	// per 64-bit lane, the sum of 8 bytes; then per 128-bit lane L of u:
	// (the two of a's lane L, the two of b's), the 256-bit halves' four
	// lanes added to lanes 0 and 2: (block 0, 1) and (2, 3)
	const __m512i sa = _mm512_sad_epu8(a, z), sb = _mm512_sad_epu8(b, z);
	const __m512i sc = _mm512_sad_epu8(c, z), sd = _mm512_sad_epu8(d, z);
	__m512i u = _mm512_add_epi64(_mm512_unpacklo_epi64(sa, sb), _mm512_unpackhi_epi64(sa, sb));
	__m512i v = _mm512_add_epi64(_mm512_unpacklo_epi64(sc, sd), _mm512_unpackhi_epi64(sc, sd));
	u = _mm512_add_epi64(u, _mm512_shuffle_i64x2(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
	v = _mm512_add_epi64(v, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
	const __m512i idx = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0);
	return _mm256_cvtepi32_ps(_mm512_cvtepi64_epi32(_mm512_permutex2var_epi64(u, idx, v)));
}
