//go:build cgo

// kern_i8.c: integer row kernels for AVX2 CPUs without VNNI (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K). Weights stay in their blocks; activations
// are quantized per token to int8. One vpmaddubsw multiplies 32 unsigned
// weight bytes with 32 signed activations into 16 pair sums and one
// vpmaddwd adds the pairs (or, for the K-quants, scales them by the
// sub-block's integer scale).
//   - Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (i8_row): one activation scale per 32
//     columns (dx = amax/127), as the VNNI kernels and llama.cpp do, and
//     one FMA a block: acc += float(I) * (dw * dx). Q4_0's -8 comes off
//     with the block's activation sum xs = dx * sum(q), and so do Q5_0's
//     -16 and the mins of Q4_1 and Q5_1 (acc += m * xs); Q5_0 and Q5_1 set
//     each column's fifth bit from the block's 32-bit qh (bit j: column j)
//     with a byte shuffle and compare. Q8_0 weights are signed: the sign
//     of w moves onto the activations (|w| * sign(x, w)), so no pair sum
//     saturates.
//   - Q4_K, Q5_K, Q6_K (i8k_row): one activation scale per 256-column super-block
//     (llama.cpp's Q8_K), so a super-block adds up in integers and takes
//     one conversion and FMA, not one every 32 columns. Q4_K's and Q5_K's mins and
//     Q6_K's -32 come off through the sums of q over each 16 columns.
//     Per-256 activations are both faster than per-32 ones (fewer
//     conversions) and closer to llama.cpp, which quantizes K-quant
//     activations the same way: TestSynthGolden holds the AVX2 build to
//     llama.cpp's Q4_K logits. IQ4_XS takes these activations too
//     (kern_iq4.c's weft_iq4xs_i8k_matmul), as llama.cpp does.
//
// Why integers on AVX2: dequantizing to floats costs more instructions per
// weight than the product itself, and an int8 block is 4x fewer bytes in
// the registers than its floats (BENCHMARKS.md §1b has machine B's AVX2
// figures).
#include <string.h>

#include "kernels.h"
#include "scratch.h"

#if WEFT_X86
#include <immintrin.h>

#pragma GCC target("avx2,fma,f16c")

#include "body_kquant.h"

// weft_i8_prep layout for n tokens of K values: qx[n][K] int8, then dx[n][K/32]
// and xs[n][K/32] floats.
long weft_i8_prep_bytes(int K, int n) { return (long)n * K + 2L * n * (K / 32) * 4; }

static inline __attribute__((always_inline)) float i8_hmax(__m256 v) {
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

static inline __attribute__((always_inline)) int i8_hsum_i32(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

// i8_amax: the largest |x| of n floats (n a multiple of 8).
static inline __attribute__((always_inline)) float i8_amax(const float *p, int n) {
	const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256 a = _mm256_setzero_ps();
	for (int i = 0; i < n; i += 8) a = _mm256_max_ps(a, _mm256_and_ps(_mm256_loadu_ps(p + i), absm));
	return i8_hmax(a);
}

// i8_quant32: q[0..32) = round(p * id) as int8; sums[0], sums[1] get the
// sums of q over columns 0-15 and 16-31.
static inline __attribute__((always_inline)) void i8_quant32(const float *p, float id, int8_t *q, int sums[2]) {
	// packs interleaves 128-bit lanes; this puts the 8 dwords back in order
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	const __m256 s = _mm256_set1_ps(id);
	__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p), s)),
		i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p + 8), s)),
		i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p + 16), s)),
		i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p + 24), s));
	sums[0] = i8_hsum_i32(_mm256_add_epi32(i0, i1));
	sums[1] = i8_hsum_i32(_mm256_add_epi32(i2, i3));
	__m256i v = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
	_mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(v, order));
}

void weft_i8_prep(const float *x, int n, int K, uint8_t *out) {
	const int nb = K / 32;
	int8_t *qx = (int8_t *)out;
	float *dx = (float *)(out + (long)n * K), *xs = dx + (long)n * nb;
	for (int t = 0; t < n; t++)
		for (int b = 0; b < nb; b++) {
			const float *p = x + (long)t * K + 32 * b;
			float amax = i8_amax(p, 32);
			float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
			int sums[2];
			i8_quant32(p, id, qx + (long)t * K + 32 * b, sums);
			dx[(long)t * nb + b] = d;
			xs[(long)t * nb + b] = d * (float)(sums[0] + sums[1]);
		}
}

// weft_i8k_prep: the activations of Q4_K, Q6_K and IQ4_XS, quantized per
// token and 256-column super-block, as llama.cpp's Q8_K (its
// quantize_row_q8_K: the same q, rounded to nearest even, and the scale up
// to the last bit): one scale a super-block lets
// the kernel add a whole super-block in integers (the sub-block scales
// applied by vpmaddwd) before one conversion and FMA, where per-32 scales
// cost a conversion, a scale and an FMA every 32 columns. Layout for n
// tokens of K values: qx[n][K] int8, then d[n][K/256] floats, then
// bs[n][K/16] int16 (the sums of q over each 16 columns: Q4_K's mins and
// Q6_K's -32 offset come off through them).
long weft_i8k_prep_bytes(int K, int n) { return (long)n * K + (long)n * (K / 256) * 4 + (long)n * (K / 16) * 2; }

void weft_i8k_prep(const float *x, int n, int K, uint8_t *out) {
	const int nsb = K / 256;
	int8_t *qx = (int8_t *)out;
	float *dd = (float *)(out + (long)n * K);
	int16_t *bs = (int16_t *)(dd + (long)n * nsb);
	for (int t = 0; t < n; t++)
		for (int sb = 0; sb < nsb; sb++) {
			const float *p = x + (long)t * K + 256 * sb;
			float amax = i8_amax(p, 256);
			float id = amax > 0 ? 127.0f / amax : 0.0f;
			dd[(long)t * nsb + sb] = amax / 127.0f;
			for (int b = 0; b < 8; b++) {
				int sums[2];
				i8_quant32(p + 32 * b, id, qx + (long)t * K + 256 * sb + 32 * b, sums);
				int16_t *bo = bs + (long)t * (K / 16) + 16 * sb + 2 * b;
				bo[0] = (int16_t)sums[0];
				bo[1] = (int16_t)sums[1];
			}
		}
}

// i8k_row: one Q4_K, Q5_K or Q6_K row times NT (1..4) tokens on
// weft_i8k_prep's layout; qx, dd, bs point at the first token (strides K,
// K/256, K/16). Q5_K is Q4_K with qh[32] before the nibbles: bit k of
// qh[l] is the fifth bit of column l of sub-block k (values up to 31, so
// a pair sum stays under 2 * 31 * 128).
static inline __attribute__((always_inline)) void i8k_row(const int type, const uint8_t *row, int K, const int8_t *qx,
							   const float *dd, const int16_t *bs, float *out, long ldo, const int NT) {
	const int nsb = K / 256;
	__m256 acc[4];
	for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0x0f);
#define I8X(t, col) _mm256_loadu_si256((const __m256i *)(qx + (long)(t) * K + (col)))
#define I8BS(t, sb) _mm256_loadu_si256((const __m256i *)(bs + (long)(t) * (K / 16) + 16 * (sb)))
	if (type == 12 || type == 13) { // Q4_K: 144-byte super-blocks of 256; Q5_K: 176
		const int bsz = type == 12 ? 144 : 176, qoff = type == 12 ? 16 : 48;
		const __m256i one = _mm256_set1_epi8(1);
		for (int sb = 0; sb < nsb; sb++) {
			const uint8_t *blk = row + bsz * sb, *sc = blk + 4, *qs = blk + qoff;
			const __m256i H = type == 13 ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
			float d = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8)), dmin = _cvtsh_ss((uint16_t)(blk[2] | blk[3] << 8));
			__m128i sm = kq_q4k_scales(sc); // bytes s0..s7, m0..m7
			__m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
			// each min twice, for the two 16-column sums of its sub-block
			__m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
			__m256i isum[4];
			for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
			for (int j = 0; j < 4; j++) {
				__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
				__m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
				if (type == 13) { // bits 2j and 2j+1 of qh to bit 4
					lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2 * j), one), 4));
					hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2 * j + 1), one), 4));
				}
				__m256i s0 = _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * j)))),
					s1 = _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * j + 1))));
				int col = 256 * sb + 64 * j;
				for (int t = 0; t < NT; t++) {
					__m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, I8X(t, col)), s0);
					__m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, I8X(t, col + 32)), s1);
					isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p0, p1));
				}
			}
			for (int t = 0; t < NT; t++) {
				float dx = dd[(long)t * nsb + sb];
				__m256i mn = _mm256_madd_epi16(I8BS(t, sb), m16);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * dx), acc[t]);
				acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mn), _mm256_set1_ps(dmin * dx), acc[t]);
			}
		}
	} else { // Q6_K: 210-byte super-blocks: ql[128], qh[64], 16 int8 scales, f16 d
		const __m256i m2 = _mm256_set1_epi8(0x03);
		for (int sb = 0; sb < nsb; sb++) {
			const uint8_t *blk = row + 210 * sb;
			float d = _cvtsh_ss((uint16_t)(blk[208] | blk[209] << 8));
			// the -32 offset: 32 * sum_j scale_j * (sum of q over the 16 columns j)
			__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
			__m256i isum[4];
			for (int t = 0; t < NT; t++)
				isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(I8BS(t, sb), sc16), 5));
			for (int h = 0; h < 2; h++) {
				const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
				__m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(blk + 192 + 8 * h))));
				__m256i L0 = _mm256_loadu_si256((const __m256i *)ql), L1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
				__m256i H = _mm256_loadu_si256((const __m256i *)qh);
				for (int g = 0; g < 4; g++) {
					__m256i lo = g == 0 ? _mm256_and_si256(L0, m4)
						     : g == 1 ? _mm256_and_si256(L1, m4)
						     : g == 2 ? _mm256_and_si256(_mm256_srli_epi16(L0, 4), m4)
							      : _mm256_and_si256(_mm256_srli_epi16(L1, 4), m4);
					__m256i hb = _mm256_and_si256(g == 0 ? H : _mm256_srli_epi16(H, 2 * g), m2);
					__m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
					__m256i scl = _mm256_shuffle_epi8(
						s16, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * g + 1))),
								      _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * g)))));
					int col = 256 * sb + 128 * h + 32 * g;
					for (int t = 0; t < NT; t++)
						isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, I8X(t, col)), scl));
				}
			}
			for (int t = 0; t < NT; t++)
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * dd[(long)t * nsb + sb]), acc[t]);
		}
	}
#undef I8X
#undef I8BS
	for (int t = 0; t < NT; t++) out[t * ldo] = kq_hsum(acc[t]);
}

// weft_i8_ok: whether the AVX2 integer kernels handle this product.
int weft_i8_ok(int type, int K) {
	switch (type) {
	case 8:
	case 2:
	case 3:
	case 6:
	case 7: return K % 32 == 0;
	case 12:
	case 13:
	case 14: return K % 256 == 0;
	}
	return weft_iq4_ok(type, K, 32);
}

// i8_row: one row of weights times NT (1..4) tokens; qx, dx, xs point at
// the first token (strides K and K/32).
static inline __attribute__((always_inline)) void i8_row(const int type, const uint8_t *row, int K, const int8_t *qx,
							  const float *dx, const float *xs, float *out, long ldo, const int NT) {
	const int nb = K / 32;
	__m256 acc[4], cor[4];
	for (int t = 0; t < NT; t++) acc[t] = cor[t] = _mm256_setzero_ps();
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
#define I8X(t, col) _mm256_loadu_si256((const __m256i *)(qx + (long)(t) * K + (col)))
#define I8DX(t, b) dx[(long)(t) * nb + (b)]
	if (type == 8) { // Q8_0: 34-byte blocks, f16 scale and 32 int8
		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = row + 34 * b;
			__m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
			__m256i aw = _mm256_sign_epi8(w, w);
			float dw = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8));
			for (int t = 0; t < NT; t++) {
				__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(I8X(t, 32 * b), w)), ones);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * I8DX(t, b)), acc[t]);
			}
		}
	} else if (type == 2) { // Q4_0: 18-byte blocks, low nibbles columns 0-15, high 16-31
		float c[4] = {0, 0, 0, 0};
		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = row + 18 * b;
			__m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
			__m256i w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
			float dw = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8));
			for (int t = 0; t < NT; t++) {
				__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, I8X(t, 32 * b)), ones);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * I8DX(t, b)), acc[t]);
				c[t] -= 8 * dw * xs[(long)t * nb + b];
			}
		}
		for (int t = 0; t < NT; t++) cor[t] = _mm256_setr_ps(c[t], 0, 0, 0, 0, 0, 0, 0);
	} else { // Q4_1 (20-byte blocks), Q5_0 (22), Q5_1 (24): unsigned quants, an offset or a min per block
		const int bsz = type == 3 ? 20 : type == 6 ? 22 : 24, qoff = type == 3 ? 4 : type == 6 ? 6 : 8;
		// byte j of the fifth-bit vector tests bit j of qh: qh's byte j/8
		// spread over 8 bytes, each masked with its own bit
		const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
		const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull), b4 = _mm256_set1_epi8(0x10);
		float c[4] = {0, 0, 0, 0};
		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = row + bsz * b;
			__m128i q = _mm_loadu_si128((const __m128i *)(blk + qoff));
			__m256i w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
			if (type != 3) {
				uint32_t qh;
				memcpy(&qh, blk + (type == 6 ? 2 : 4), 4);
				__m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread), bit);
				w = _mm256_or_si256(w, _mm256_and_si256(_mm256_cmpeq_epi8(hb, bit), b4));
			}
			float dw = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8));
			// Q5_0: -16 * dw; Q4_1, Q5_1: the block's min
			float off = type == 6 ? -16.0f * dw : _cvtsh_ss((uint16_t)(blk[2] | blk[3] << 8));
			for (int t = 0; t < NT; t++) {
				__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, I8X(t, 32 * b)), ones);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * I8DX(t, b)), acc[t]);
				c[t] += off * xs[(long)t * nb + b];
			}
		}
		for (int t = 0; t < NT; t++) cor[t] = _mm256_setr_ps(c[t], 0, 0, 0, 0, 0, 0, 0);
	}
#undef I8X
#undef I8DX
	for (int t = 0; t < NT; t++) out[t * ldo] = kq_hsum(_mm256_add_ps(acc[t], cor[t]));
}

static inline __attribute__((always_inline)) void i8_rows(const int type, const uint8_t *w, long rowBytes, int K, int r0,
							   int r1, const int8_t *qx, const float *dx, const float *xs, int n,
							   float *y, long ldy) {
	const int nb = K / 32;
#define I8_ROW(NT) i8_row(type, row, K, qx + (long)t * K, dx + (long)t * nb, xs + (long)t * nb, y + t * ldy + r, ldy, NT)
	KQ_FOR_ROWS(I8_ROW)
#undef I8_ROW
}

static inline __attribute__((always_inline)) void i8k_rows_blk(const int type, const uint8_t *w, long rowBytes, int K, int r0,
								int r1, const int8_t *qx, const float *dd, const int16_t *bs, int n,
								float *y, long ldy) {
	const int nsb = K / 256, nbs = K / 16;
#define I8K_ROW(NT) i8k_row(type, row, K, qx + (long)t * K, dd + (long)t * nsb, bs + (long)t * nbs, y + t * ldy + r, ldy, NT)
	KQ_FOR_ROWS(I8K_ROW)
#undef I8K_ROW
}

// i8k_rows takes the tokens in blocks of WEFT_I8_ACT_BYTES of activations
// (K bytes a token, at least 4 tokens), every row passing one block while
// it sits in L2. A pass of each row over all the tokens read them from L3
// once they outgrew L2 (128 tokens at K = 8192: 1 MiB). Machine F (AMD EPYC
// Zen 3), one thread, 128 tokens, best of 30 calls alternating, GFLOP/s:
// Q4_K 256 x 8192 97-98 against 82-84, 512 x 2048 98-99 against 86-91;
// Q6_K 256 x 8192 94 against 72. The same sums, in the same order.
static inline __attribute__((always_inline)) void i8k_rows(const int type, const uint8_t *w, long rowBytes, int K, int r0,
							    int r1, const int8_t *qx, const float *dd, const int16_t *bs, int n,
							    float *y, long ldy) {
	const int nsb = K / 256, nbs = K / 16;
	int tb = WEFT_I8_ACT_BYTES / K & ~3;
	if (tb < 4) tb = 4;
	for (int t0 = 0; t0 < n; t0 += tb)
		i8k_rows_blk(type, w, rowBytes, K, r0, r1, qx + (long)t0 * K, dd + (long)t0 * nsb, bs + (long)t0 * nbs,
			     n - t0 < tb ? n - t0 : tb, y + (long)t0 * ldy, ldy);
}

// weft_i8_kquant: whether the type takes weft_i8k_prep's per-256 activations
// (Q4_K, Q5_K, Q6_K, and IQ4_XS, whose kernel is kern_iq4.c's).
int weft_i8_kquant(int type) { return type == 12 || type == 13 || type == 14 || type == 23; }

// weft_i8_matmul: rows [r0, r1) for n tokens; prep is weft_i8_prep's output for x
// (weft_i8k_prep's for the K-quants), or NULL to quantize here.
int weft_i8_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, const uint8_t *prep,
		     int n, float *y, long ldy) {
	const int kq = weft_i8_kquant(type);
	if (!prep) {
		uint8_t *scr = (uint8_t *)weft_scratch(0, ((kq ? weft_i8k_prep_bytes(K, n) : weft_i8_prep_bytes(K, n)) + 3) / 4);
		if (!scr) return WEFT_ENOMEM;
		if (kq)
			weft_i8k_prep(x, n, K, scr);
		else
			weft_i8_prep(x, n, K, scr);
		prep = scr;
	}
	const int8_t *qx = (const int8_t *)prep;
	if (kq) {
		const float *dd = (const float *)(prep + (long)n * K);
		const int16_t *bs = (const int16_t *)(dd + (long)n * (K / 256));
		if (type == 12)
			i8k_rows(12, w, rowBytes, K, r0, r1, qx, dd, bs, n, y, ldy);
		else if (type == 13)
			i8k_rows(13, w, rowBytes, K, r0, r1, qx, dd, bs, n, y, ldy);
		else if (type == 14)
			i8k_rows(14, w, rowBytes, K, r0, r1, qx, dd, bs, n, y, ldy);
		else
			return weft_iq4xs_i8k_matmul(w, rowBytes, K, r0, r1, qx, dd, n, y, ldy); // kern_iq4.c
		return 0;
	}
	const float *dx = (const float *)(prep + (long)n * K), *xs = dx + (long)n * (K / 32);
	switch (type) { // specialize i8_rows per type
	case 8: i8_rows(8, w, rowBytes, K, r0, r1, qx, dx, xs, n, y, ldy); break;
	case 2: i8_rows(2, w, rowBytes, K, r0, r1, qx, dx, xs, n, y, ldy); break;
	case 3: i8_rows(3, w, rowBytes, K, r0, r1, qx, dx, xs, n, y, ldy); break;
	case 6: i8_rows(6, w, rowBytes, K, r0, r1, qx, dx, xs, n, y, ldy); break;
	case 7: i8_rows(7, w, rowBytes, K, r0, r1, qx, dx, xs, n, y, ldy); break;
	default: return weft_iq4_i8_matmul(type, w, rowBytes, K, r0, r1, qx, dx, n, y, ldy); // kern_iq4.c
	}
	return 0;
}

#endif
