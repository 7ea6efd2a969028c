// body_kquant.h: the pieces the integer row kernels of kern_i8.c (AVX2)
// and kern_vnni.c (AVX-512: weft_k512_matmul, and the one-token prefetch
// of vnni_rows) share, so that the two,
// which must give the same bits, read the blocks and walk the rows the same
// way; kern_iq4.c's AVX2 kernel walks its rows with KQ_FOR_ROWS too.
// Included by those three files and kern_attq8.c, after <immintrin.h> and
// under their own target pragma.

#ifdef __AVX512F__
// kq_q8_32 quantizes the 32 floats x to int8 at q as the activations of
// the VNNI kernels and the queries of kern_attq8.c are (llama.cpp's q8_0:
// d = amax/127, x/d rounded to nearest even) and returns d.
static inline __attribute__((always_inline)) float kq_q8_32(const float *x, int8_t *q) {
	const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
	const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
	const __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
	_mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id))));
	_mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id))));
	return amax / 127.0f;
}
#endif

// kq_q4k_scales: a Q4_K super-block's 12 scale bytes as 16 bytes, the eight
// 6-bit sub-block scales s0..s7 then the eight mins m0..m7.
static inline __attribute__((always_inline)) __m128i kq_q4k_scales(const uint8_t *sc) {
	uint32_t a0, a1, a2;
	memcpy(&a0, sc, 4);
	memcpy(&a1, sc + 4, 4);
	memcpy(&a2, sc + 8, 4);
	uint32_t s03 = a0 & 0x3f3f3f3f, m03 = a1 & 0x3f3f3f3f;
	uint32_t s47 = (a2 & 0x0f0f0f0f) | (((a0 >> 6) & 0x03030303) << 4);
	uint32_t m47 = ((a2 >> 4) & 0x0f0f0f0f) | (((a1 >> 6) & 0x03030303) << 4);
	return _mm_set_epi32((int)m47, (int)m03, (int)s47, (int)s03);
}

// kq_hsum: the sum of 8 floats, in the order both kernels' final sums use.
static inline __attribute__((always_inline)) float kq_hsum(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// kq_prefetch asks for the bytes bytes at p (a weight row) into L1.
static inline __attribute__((always_inline)) void kq_prefetch(const uint8_t *p, long bytes) {
	for (long off = 0; off < bytes; off += 64) _mm_prefetch((const char *)(p + off), _MM_HINT_T0);
}

// KQ_FOR_ROWS runs ROW(NT) for rows [r0, r1) of w and tokens t..t+NT-1, four
// tokens at a time (row, r and t in scope). It fetches the row after next
// while this one is computed (within the caller's rows only), for any token
// count: weights beyond the cache stream from memory whatever the tokens
// (kern_vnni.c's vnni_rows gives the figures).
#define KQ_FOR_ROWS(ROW)                                                                                                 \
	for (int r = r0; r < r1; r++) {                                                                                  \
		const uint8_t *row = w + (long)r * rowBytes;                                                             \
		if (r + 2 < r1) kq_prefetch(row + 2 * rowBytes, rowBytes);                                               \
		KQ_FOR_TOKENS(ROW)                                                                                       \
	}

// KQ_FOR_TOKENS runs F(NT) for tokens t..t+NT-1 of n, four at a time, then
// the one to three left (t in scope for F).
#define KQ_FOR_TOKENS(F)                                                                                                 \
	{                                                                                                                \
		int t = 0;                                                                                               \
		for (; t + 4 <= n; t += 4) F(4);                                                                         \
		switch (n - t) {                                                                                         \
		case 1: F(1); break;                                                                                     \
		case 2: F(2); break;                                                                                     \
		case 3: F(3); break;                                                                                     \
		}                                                                                                        \
	}
