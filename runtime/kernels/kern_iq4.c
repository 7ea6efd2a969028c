//go:build cgo

// kern_iq4.c: integer kernels for the 4-bit table types IQ4_NL, IQ4_XS and
// MXFP4 (layouts: runtime/quant's dequant_iq4.go). The activations are
// rounded to int8 as llama.cpp rounds them for each type: per token and 32
// columns (its Q8_0) for IQ4_NL and MXFP4, per 256 (its Q8_K) for IQ4_XS.
// The rounding of the activations decides close logits, so it follows
// llama.cpp's, not whichever is finer (TestSynthArch2Golden's IQ4_XS
// misses tolerance 3 with per-32 activations).
//   - IQ4_NL, MXFP4, few tokens: an AVX2 row kernel (weft_iq4_i8_matmul,
//     beside kern_i8.c's Q8_0 / Q4_0 kernel, on its activations) and an
//     AVX-512 VNNI one (weft_iq4_vnni_matmul, beside kern_vnni.c's row
//     kernels, on theirs).
//   - IQ4_XS, few tokens (AVX2, and VNNI below its lane GEMM): an AVX2 row
//     kernel on kern_i8.c's per-256 K-quant activations
//     (weft_iq4xs_i8k_matmul), which adds a super-block up in integers.
//   - All three, many tokens (VNNI): the unpacking of a row tile for
//     kern_vnni.c's int8 lane GEMM (weft_iq4_lane_unpack); IQ4_XS's
//     activations are packed with one scale per 256 columns there.
//
// Every 32 columns of every type are 16 bytes of 4-bit indices (column j in
// the low nibble of byte j, column j+16 in its high nibble) and one float
// scale: the f16 d of IQ4_NL, d * (6-bit scale - 32) of an IQ4_XS
// sub-block, the E8M0 half scale of MXFP4. The nibbles are spread to one
// byte per column and looked up in the 16-entry value table with one byte
// shuffle (vpshufb), which gives the int8 weights; then the arithmetic is
// that of a Q8_0 block (IQ4_NL, MXFP4):
//   - AVX2: |w| times the activations with w's sign (vpsignb; |w| and |x|
//     are at most 127, so a vpmaddubsw pair sum stays below 32767),
//     vpmaddwd adds the pairs, and one FMA a block adds
//     float(I) * (scale * dx).
//   - VNNI: the table holds the values plus 128 (unsigned, as vpdpbusd
//     wants its weights), and one vpdpbusd multiplies 64 columns by the
//     activations. Per 256 columns, with the activations in the prep's
//     order, four vpdpbusd and one unpack-and-add leave each block's sum
//     S + 128 * (sum of the block's int8 activations) in integers; the
//     prep's block sums take the 128 off, and one conversion and one FMA
//     per token add the 8 blocks:
//         acc += float(S) * (scale * dx)
//     Columns past the last 256 go 64 at a time, per 4-column lane
//         acc += float(S) * (scale * dx) - 128 * scale * xsum4
//     with xsum4 = dx * (sum of the lane's 4 int8 activations), as
//     kern_vnni.c does for Q8_0 stored plus 128.
#include <string.h>

#include "kernels.h"
#include "body_iq4.h"

#if WEFT_X86
#include <immintrin.h>

// IQ4_BLOCK defines, once per target below (F16C there):
//   iq4_block##S: where block b (32 columns) of an IQ4_NL or MXFP4 row
//     keeps its 16 index bytes, and (*scale) its scale;
//   iq4xs_scales##S: the 8 sub-block scales d * (ls - 32) of the IQ4_XS
//     super-block blk (the 4-bit halves of ls in scales_l's nibbles, the
//     2-bit ones in scales_h's bit pairs, spread by variable shifts).
#define IQ4_BLOCK(S)                                                                                                   \
	static inline __attribute__((always_inline)) const uint8_t *iq4_block##S(const int type, const uint8_t *row, int b, \
										 float *scale) {                       \
		if (type == 20) { /* IQ4_NL: f16 d, 16 bytes */                                                         \
			const uint8_t *blk = row + 18 * b;                                                             \
			*scale = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8));                                         \
			return blk + 2;                                                                                \
		}                                                                                                      \
		const uint8_t *blk = row + 17 * b; /* MXFP4: E8M0 e, 16 bytes */                                       \
		*scale = weft_e8m0_half(blk[0]);                                                                       \
		return blk + 1;                                                                                        \
	}                                                                                                              \
	static inline __attribute__((always_inline)) __m256 iq4xs_scales##S(const uint8_t *blk) {                      \
		uint32_t sl;                                                                                           \
		memcpy(&sl, blk + 4, 4);                                                                               \
		const __m256i sh4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);                                   \
		__m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), sh4), _mm256_set1_epi32(15)); \
		__m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(blk[2] | blk[3] << 8), _mm256_srli_epi32(sh4, 1)), \
					      _mm256_set1_epi32(3));                                                 \
		__m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));   \
		return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8))), _mm256_cvtepi32_ps(ls)); \
	}

// ---- AVX2 ----
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "body_kquant.h"

IQ4_BLOCK(_avx2)

// iq4_table: type's 16 values (plus off: 0, or 128 for vpdpbusd), the
// table a byte shuffle looks the indices up in.
static inline __attribute__((always_inline)) __m128i iq4_table(const int type, int off) {
	const int8_t *v = type == 39 ? weft_mxfp4_values : weft_iq4_values;
	int8_t t[16];
	for (int i = 0; i < 16; i++) t[i] = (int8_t)(v[i] + off);
	return _mm_loadu_si128((const __m128i *)t);
}

// iq4_row_avx2: one row times NT (1..4) tokens on weft_i8_prep's layout;
// qx, dx point at the first token (strides K and K/32).
static inline __attribute__((always_inline)) void iq4_row_avx2(const int type, const uint8_t *row, int K, const int8_t *qx,
							       const float *dx, __m256i tbl, float *out, long ldo, const int NT) {
	const int nb = K / 32;
	__m256 acc[4];
	for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
	for (int b = 0; b < nb; b++) {
		float dw;
		const uint8_t *qs = iq4_block_avx2(type, row, b, &dw);
		__m128i q = _mm_loadu_si128((const __m128i *)qs);
		__m256i idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
		__m256i w = _mm256_shuffle_epi8(tbl, idx);
		__m256i aw = _mm256_sign_epi8(w, w);
		for (int t = 0; t < NT; t++) {
			__m256i x = _mm256_loadu_si256((const __m256i *)(qx + (long)t * K + 32 * b));
			__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)), ones);
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[(long)t * nb + b]), acc[t]);
		}
	}
	for (int t = 0; t < NT; t++) out[t * ldo] = kq_hsum(acc[t]);
}

static inline __attribute__((always_inline)) void iq4_rows_avx2(const int type, const uint8_t *w, long rowBytes, int K, int r0,
								int r1, const int8_t *qx, const float *dx, int n, float *y, long ldy) {
	const int nb = K / 32;
	const __m256i tbl = _mm256_broadcastsi128_si256(iq4_table(type, 0));
#define IQ4_ROW(NT) iq4_row_avx2(type, row, K, qx + (long)t * K, dx + (long)t * nb, tbl, y + t * ldy + r, ldy, NT)
	KQ_FOR_ROWS(IQ4_ROW)
#undef IQ4_ROW
}

// weft_iq4_i8_matmul: rows [r0, r1) of an IQ4_NL or MXFP4 product for n
// tokens on weft_i8_prep's activations (qx, dx: their int8 values and
// scales). IQ4_XS takes weft_iq4xs_i8k_matmul.
int weft_iq4_i8_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dx,
		       int n, float *y, long ldy) {
	if (type == 23 || !weft_iq4_ok(type, K, 32)) return WEFT_EUNSUPPORTED;
	if (type == 20)
		iq4_rows_avx2(20, w, rowBytes, K, r0, r1, qx, dx, n, y, ldy);
	else
		iq4_rows_avx2(39, w, rowBytes, K, r0, r1, qx, dx, n, y, ldy);
	return WEFT_OK;
}
// iq4xs_k_row: one IQ4_XS row times NT (1..4) tokens on weft_i8k_prep's
// per-256 activations (qx, dd point at the first token; strides K, K/256).
// Per 32-column sub-block the products |w| * sign(x, w) are pair-summed by
// vpmaddubsw and scaled by the sub-block's integer scale (ls - 32) in
// vpmaddwd, so a super-block adds up in int32 (at most 8 * 32 * 127 * 127 *
// 32 in magnitude) and takes one conversion and one FMA by d * dx.
static inline __attribute__((always_inline)) void iq4xs_k_row(const uint8_t *row, int K, const int8_t *qx, const float *dd,
							      __m256i tbl, float *out, long ldo, const int NT) {
	const int nsb = K / 256;
	__m256 acc[4];
	for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	for (int sb = 0; sb < nsb; sb++) {
		const uint8_t *blk = row + 136 * sb;
		float d = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8));
		__m256i isum[4];
		for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
		for (int ib = 0; ib < 8; ib++) {
			__m128i q = _mm_loadu_si128((const __m128i *)(blk + 8 + 16 * ib));
			__m256i w = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
			__m256i aw = _mm256_sign_epi8(w, w);
			__m256i ls = _mm256_set1_epi16((short)weft_iq4xs_scale(blk, ib));
			for (int t = 0; t < NT; t++) {
				__m256i x = _mm256_loadu_si256((const __m256i *)(qx + (long)t * K + 256 * sb + 32 * ib));
				isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)), ls));
			}
		}
		for (int t = 0; t < NT; t++)
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * dd[(long)t * nsb + sb]), acc[t]);
	}
	for (int t = 0; t < NT; t++) out[t * ldo] = kq_hsum(acc[t]);
}

// weft_iq4xs_i8k_matmul: rows [r0, r1) of an IQ4_XS product for n tokens on
// weft_i8k_prep's activations (qx, dd: their int8 values and per-256
// scales).
int weft_iq4xs_i8k_matmul(const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dd, int n,
			  float *y, long ldy) {
	if (!weft_iq4_ok(23, K, 256)) return WEFT_EUNSUPPORTED;
	const int nsb = K / 256;
	const __m256i tbl = _mm256_broadcastsi128_si256(iq4_table(23, 0));
#define IQ4XS_ROW(NT) iq4xs_k_row(row, K, qx + (long)t * K, dd + (long)t * nsb, tbl, y + t * ldy + r, ldy, NT)
	KQ_FOR_ROWS(IQ4XS_ROW)
#undef IQ4XS_ROW
	return WEFT_OK;
}
#pragma GCC pop_options

// ---- AVX-512 VNNI ----
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

IQ4_BLOCK(_vnni)

// iq4_scales8: the scales of the 8 blocks of 256 columns at rg (IQ4_NL:
// f16 d; MXFP4: 2^(e-128), weft_e8m0_half's value, exact for every e by
// vscalefps), gathered from the blocks' first bytes, in weft_grp_lane's
// order (lane j: block j/4 + 4 * (j%2)).
static inline __attribute__((always_inline)) __m512 iq4_scales8(const int type, const uint8_t *rg) {
	const int bs = type == 39 ? 17 : 18;
	const __m256i at = _mm256_setr_epi32(0, bs, 2 * bs, 3 * bs, 4 * bs, 5 * bs, 6 * bs, 7 * bs);
	__m256i raw = _mm256_i32gather_epi32((const int *)rg, at, 1);
	__m256 s8;
	if (type == 39) {
		__m256i e = _mm256_sub_epi32(_mm256_and_si256(raw, _mm256_set1_epi32(0xff)), _mm256_set1_epi32(128));
		s8 = _mm256_scalef_ps(_mm256_set1_ps(1.0f), _mm256_cvtepi32_ps(e));
	} else {
		s8 = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_and_si256(raw, _mm256_set1_epi32(0xffff))));
	}
	const __m512i order = _mm512_setr_epi32(0, 4, 0, 4, 1, 5, 1, 5, 2, 6, 2, 6, 3, 7, 3, 7);
	return _mm512_permutexvar_ps(order, _mm512_castps256_ps512(s8));
}

// iq4_quad: the index bytes of the 4 blocks at q (stride bs) in the 4
// 128-bit lanes, low nibbles (*lo: columns 0-15 of each block) and high
// (*hi: 16-31) looked up as unsigned table bytes (values plus 128).
static inline __attribute__((always_inline)) void iq4_quad(const uint8_t *q, const int bs, __m512i tbl, __m512i *lo,
							   __m512i *hi) {
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)q));
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + bs)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + 2 * bs)), 2);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + 3 * bs)), 3);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	*lo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
	*hi = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
}

// iq4_pair: the unsigned table bytes (values plus 128) of the two blocks
// whose 16 index bytes are at q0 and q1: 128-bit lanes [q0 low nibbles, q0
// high, q1 low, q1 high], so lanes 0-7 of a vpdpbusd are the first block.
static inline __attribute__((always_inline)) __m512i iq4_pair(const uint8_t *q0, const uint8_t *q1, __m512i tbl) {
	__m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q0));
	q = _mm512_mask_broadcast_i32x4(q, 0xff00, _mm_loadu_si128((const __m128i *)q1));
	__m512i idx = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xff00ff00u, q, 4), _mm512_set1_epi8(0x0f));
	return _mm512_shuffle_epi8(tbl, idx);
}

// iq4_row_vnni: one row times NT (1..4) tokens on weft_vnni_prep's layout;
// qx, dxl, xs4, grp point at the first token (strides K, K/4, K/4,
// WEFT_GRP_FLOATS * (K/256)).
//   - Each 256 columns (8 blocks): per half (4 blocks, one a 128-bit
//     lane) the low and high nibbles' values go through two chained
//     vpdpbusd, against grp's reordered activations, so each lane holds
//     8 products of its lane's block; one unpack-and-add of the two
//     halves leaves every block's sum in two lanes (weft_grp_lane). 128
//     times the block's activation sum (grp) is taken off in integers,
//     which leaves the exact block dot product, and one conversion and
//     one FMA by (ws * dx) per token add all 8 blocks.
//   - The remaining columns, 64 at a time: two blocks, lanes 0-7 the
//     first, 8-15 the second, acc += float(S) * (ws * dx) and the offset
//     -128 * ws * xsum4 in a second chain.
static inline __attribute__((always_inline)) void iq4_row_vnni(const int type, const uint8_t *row, int K, const int8_t *qx,
							       const float *dxl, const float *xs4, const float *grp,
							       __m512i tbl, float *out, long ldo, const int NT) {
	__m512 acc[4], accb[4]; // scaled products, offsets: two FMA chains a token
	for (int t = 0; t < NT; t++) acc[t] = accb[t] = _mm512_setzero_ps();
	const int K4 = K / 4, G = K / 256, KG = WEFT_GRP_FLOATS * G;
	const int bs = type == 39 ? 17 : 18, hb = type == 39 ? 1 : 2;
	for (int g = 0; g < G; g++) {
		const uint8_t *rg = row + 8 * bs * g;
		const __m512 ws = iq4_scales8(type, rg);
		__m512i alo, ahi, blo, bhi;
		iq4_quad(rg + hb, bs, tbl, &alo, &ahi);
		iq4_quad(rg + 4 * bs + hb, bs, tbl, &blo, &bhi);
		for (int t = 0; t < NT; t++) {
			const float *gg = grp + (long)t * KG + WEFT_GRP_FLOATS * g;
			const int8_t *xg = (const int8_t *)gg;
			__m512i sa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), alo, _mm512_loadu_si512(xg));
			__m512i sb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), blo, _mm512_loadu_si512(xg + 128));
			sa = _mm512_dpbusd_epi32(sa, ahi, _mm512_loadu_si512(xg + 64));
			sb = _mm512_dpbusd_epi32(sb, bhi, _mm512_loadu_si512(xg + 192));
			__m512i r = _mm512_add_epi32(_mm512_unpacklo_epi32(sa, sb), _mm512_unpackhi_epi32(sa, sb));
			r = _mm512_sub_epi32(r, _mm512_loadu_si512(gg + 80));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r), _mm512_mul_ps(ws, _mm512_loadu_ps(gg + 64)), acc[t]);
		}
	}
	const __m512 m128 = _mm512_set1_ps(-128.0f);
	const __m512i pick0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
	for (int col = 256 * G; col < K; col += 64) {
		const uint8_t *b0 = row + bs * (col / 32);
		__m512 ws;
		if (type == 39) { // MXFP4: 2^(e-128) by vscalefps
			__m512i e = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(b0[0]), _mm512_set1_epi32(b0[17]));
			ws = _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
		} else { // IQ4_NL: both f16 scales converted by one vcvtph2ps
			uint32_t h = (uint32_t)(b0[0] | b0[1] << 8) | (uint32_t)(b0[18] | b0[19] << 8) << 16;
			__m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
			ws = _mm512_permutexvar_ps(pick0, _mm512_castps128_ps512(d));
		}
		__m512i wq = iq4_pair(b0 + hb, b0 + bs + hb, tbl);
		__m512 woff = _mm512_mul_ps(ws, m128);
		for (int t = 0; t < NT; t++) {
			__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, _mm512_loadu_si512(qx + (long)t * K + col));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, _mm512_loadu_ps(dxl + (long)t * K4 + col / 4)),
						 acc[t]);
			accb[t] = _mm512_fmadd_ps(woff, _mm512_loadu_ps(xs4 + (long)t * K4 + col / 4), accb[t]);
		}
	}
	for (int t = 0; t < NT; t++) out[t * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t], accb[t]));
}

static inline __attribute__((always_inline)) void iq4_rows_vnni(const int type, const uint8_t *w, long rowBytes, int K, int r0,
								int r1, const int8_t *qx, const float *dxl, const float *xs4,
								const float *grp, int n, float *y, long ldy) {
	const int K4 = K / 4, KG = WEFT_GRP_FLOATS * (K / 256);
	const __m512i tbl = _mm512_broadcast_i32x4(iq4_table(type, 128));
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w + (long)r * rowBytes;
		// fetch the row after next while this one is computed (within the
		// caller's rows), for any token count (kern_vnni.c's vnni_rows says why)
		if (r + 2 < r1) kq_prefetch(row + 2 * rowBytes, rowBytes);
#define IQ4_ROW(NT)                                                                                                     \
	iq4_row_vnni(type, row, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, grp + (long)t * KG, tbl, \
		     y + t * ldy + r, ldy, NT)
		int t = 0;
		for (; t + 4 <= n; t += 4) IQ4_ROW(4);
		switch (n - t) {
		case 1: IQ4_ROW(1); break;
		case 2: IQ4_ROW(2); break;
		case 3: IQ4_ROW(3); break;
		}
#undef IQ4_ROW
	}
}

// weft_iq4_lane_unpack: for kern_vnni.c's int8 lane GEMM (its Q8_0 mode),
// rows 0..m of w (IQ4_NL, IQ4_XS or MXFP4, nb blocks of 32 columns):
// block b of row i as 32 signed bytes, the table values, at
// q[(i*nb + b)*32 ..], its scale at ds[i*nb + b] and cw[i*nb + b] = 128 *
// scale * (sum of its 32 values), which takes off the 128 the lane GEMM's
// unsigned activations carry.
void weft_iq4_lane_unpack(int type, const uint8_t *w, long rowBytes, int nb, int m, uint8_t *q, float *ds, float *cw) {
	const __m256i tbl = _mm256_broadcastsi128_si256(iq4_table(type, 0));
	const __m256i m4 = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8((char)0x80);
	for (int i = 0; i < m; i++) {
		const uint8_t *row = w + (long)i * rowBytes;
		float xs[8];
		for (int b = 0; b < nb; b++) {
			float d;
			const uint8_t *qs;
			if (type == 23) {
				const uint8_t *blk = row + 136 * (b / 8);
				if (b % 8 == 0) _mm256_storeu_ps(xs, iq4xs_scales_vnni(blk));
				d = xs[b % 8];
				qs = blk + 8 + 16 * (b % 8);
			} else {
				qs = iq4_block_vnni(type, row, b, &d);
			}
			__m128i v = _mm_loadu_si128((const __m128i *)qs);
			__m256i wq = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4));
			_mm256_storeu_si256((__m256i *)(q + ((long)i * nb + b) * 32), wq);
			// sum of the signed bytes: the bytes ^ 0x80 summed unsigned, less 32 * 128
			__m256i sad = _mm256_sad_epu8(_mm256_xor_si256(wq, flip), _mm256_setzero_si256());
			__m128i h = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
			int sum = (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
			ds[i * nb + b] = d;
			cw[i * nb + b] = 128.0f * d * (float)sum;
		}
	}
}

// weft_iq4_vnni_matmul: rows [r0, r1) of an IQ4_NL or MXFP4 product for n
// tokens on weft_vnni_prep's activations (qx, dxl, xs4, grp). IQ4_XS takes
// weft_iq4xs_i8k_matmul below the lane GEMM.
int weft_iq4_vnni_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dxl,
			 const float *xs4, const float *grp, int n, float *y, long ldy) {
	if (type == 23 || !weft_iq4_ok(type, K, 64)) return WEFT_EUNSUPPORTED;
	if (type == 20)
		iq4_rows_vnni(20, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
	else
		iq4_rows_vnni(39, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
	return WEFT_OK;
}
#pragma GCC pop_options
#endif

// weft_iq4_ok: whether type is one of the three and K fits the kernels
// (a multiple of step columns: 32 for the AVX2 row kernel and the lane
// GEMM, 64 for the VNNI row kernel; IQ4_XS, 256).
int weft_iq4_ok(int type, int K, int step) {
	switch (type) {
	case 20:
	case 39: return K % step == 0;
	case 23: return K % 256 == 0;
	}
	return 0;
}
