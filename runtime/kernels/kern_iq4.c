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
//     One or two tokens take 4 or 2 rows at a time, whose sums end in one
//     transposing horizontal sum (iq4_sum4); the kernel (body_iq4vnni.h)
//     is built twice: on CPUs with AVX-512 VBMI a 256-column group comes
//     in as three 64-byte loads and three vpermi2b (iq4_group_vbmi),
//     elsewhere as eight 16-byte lane loads and the scales byte by byte.
#include <string.h>

#include "kernels.h"
#include "body_iq4.h"

// weft_iq4_vbmi: whether weft_iq4_vnni_matmul loads its groups by byte
// permutes (set from Go: the CPU has AVX-512 VBMI; tests switch it to
// compare the two ways bit for bit).
static int weft_iq4_vbmi;

void weft_iq4_set_vbmi(int on) { __atomic_store_n(&weft_iq4_vbmi, on, __ATOMIC_RELAXED); }

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
// table a byte shuffle looks the indices up in. Q4_0 (type 2, on the VNNI
// row kernel only) has the values -8..7.
static inline __attribute__((always_inline)) __m128i iq4_table(const int type, int off) {
	const int8_t *v = type == 39 ? weft_mxfp4_values : weft_iq4_values;
	int8_t t[16];
	for (int i = 0; i < 16; i++) t[i] = (int8_t)((type == 2 ? i - 8 : v[i]) + off);
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
// vscalefps), from the blocks' first bytes, in weft_grp_lane's order (lane
// j: block j/4 + 4 * (j%2)). The bytes come in one by one: a vpgatherdd
// of them made this kernel half as fast on Zen 5.
static inline __attribute__((always_inline)) __m512 iq4_scales8(const int type, const uint8_t *rg) {
	__m256 s8;
	if (type == 39) {
		__m256i e = _mm256_setr_epi32(rg[0], rg[17], rg[34], rg[51], rg[68], rg[85], rg[102], rg[119]);
		s8 = _mm256_scalef_ps(_mm256_set1_ps(1.0f), _mm256_cvtepi32_ps(_mm256_sub_epi32(e, _mm256_set1_epi32(128))));
	} else {
#define IQ4_F16(b) (rg[18 * (b)] | rg[18 * (b) + 1] << 8)
		__m128i h = _mm_setr_epi16(IQ4_F16(0), IQ4_F16(1), IQ4_F16(2), IQ4_F16(3), IQ4_F16(4), IQ4_F16(5), IQ4_F16(6),
					   IQ4_F16(7));
#undef IQ4_F16
		s8 = _mm256_cvtph_ps(h);
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

// iq4_sum4: the sums of a, b, c and d's 16 lanes, in that order, each by
// the same tree of additions whichever position it takes (so an output's
// value does not depend on the rows or tokens summed beside it): the
// unpacks pair lanes i and i+2 of every 128 bits, the shuffles i and i+1,
// then the 128-bit quarters are added 0+2, 1+3 and the two halves.
static inline __attribute__((always_inline)) __m128 iq4_sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
	__m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
	__m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
	__m512 s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xee));
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

#define IQ4V(name) name##_vnni
#define IQ4V_VBMI 0
#include "body_iq4vnni.h"
#undef IQ4V
#undef IQ4V_VBMI

#include "body_lane.h"

// weft_iq4_lane_unpack: for kern_vnni.c's int8 lane GEMM (its Q8_0 mode),
// rows 0..m of w (IQ4_NL, IQ4_XS or MXFP4, nb blocks of 32 columns):
// block b of row i as 32 signed bytes, the table values, at
// q[(i*nb + b)*32 ..], its scale at ds[i*nb + b] and cw[i*nb + b] = 128 *
// scale * (sum of its 32 values), which takes off the 128 the lane GEMM's
// unsigned activations carry. Eight blocks at a time in vectors (two to a
// 64-byte lookup, iq4_pair; their eight sums from four vpsadbw folded in
// registers, lane_sums8), a last few one by one; the same products either
// way.
void weft_iq4_lane_unpack(int type, const uint8_t *w, long rowBytes, int nb, int m, uint8_t *q, float *ds, float *cw) {
	const __m512i tbl4 = _mm512_broadcast_i32x4(iq4_table(type, 0));
	const __m256i tbl = _mm512_castsi512_si256(tbl4);
	const __m256i m4 = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8((char)0x80);
	const __m512i flip4 = _mm512_set1_epi8((char)0x80);
	const __m256 c128 = _mm256_set1_ps(128.0f), off = _mm256_set1_ps(32 * 128);
	for (int i = 0; i < m; i++) {
		const uint8_t *row = w + (long)i * rowBytes;
		int b = 0;
		for (; b + 8 <= nb; b += 8) {
			const long o = (long)i * nb + b;
			const uint8_t *qs[8];
			__m256 d8;
			if (type == 23) { // one super-block
				const uint8_t *blk = row + 136 * (b / 8);
				d8 = iq4xs_scales_vnni(blk);
				for (int j = 0; j < 8; j++) qs[j] = blk + 8 + 16 * j;
			} else {
				float d[8];
				for (int j = 0; j < 8; j++) qs[j] = iq4_block_vnni(type, row, b + j, &d[j]);
				d8 = _mm256_loadu_ps(d);
			}
			// blocks (0, 2), (1, 3), (4, 6), (5, 7), as lane_sums8 takes them
			__m512i v[4];
			for (int k = 0; k < 4; k++) {
				const int j = 4 * (k / 2) + k % 2;
				v[k] = iq4_pair(qs[j], qs[j + 2], tbl4); // the signed table: blocks j and j + 2 as stored
				_mm256_storeu_si256((__m256i *)(q + (o + j) * 32), _mm512_castsi512_si256(v[k]));
				_mm256_storeu_si256((__m256i *)(q + (o + j + 2) * 32), _mm512_extracti64x4_epi64(v[k], 1));
			}
			// sums of the signed bytes: the bytes ^ 0x80 summed unsigned, less 32 * 128
			const __m256 sum = _mm256_sub_ps(lane_sums8(_mm512_xor_si512(v[0], flip4), _mm512_xor_si512(v[1], flip4),
								    _mm512_xor_si512(v[2], flip4), _mm512_xor_si512(v[3], flip4)),
							 off);
			_mm256_storeu_ps(ds + o, d8);
			_mm256_storeu_ps(cw + o, _mm256_mul_ps(_mm256_mul_ps(c128, d8), sum));
		}
		for (; b < nb; b++) { // IQ4_NL and MXFP4 rows of a length not a multiple of 256
			float d;
			const uint8_t *qs = iq4_block_vnni(type, row, b, &d);
			__m128i v = _mm_loadu_si128((const __m128i *)qs);
			__m256i wq = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4));
			_mm256_storeu_si256((__m256i *)(q + ((long)i * nb + b) * 32), wq);
			__m256i sad = _mm256_sad_epu8(_mm256_xor_si256(wq, flip), _mm256_setzero_si256());
			__m128i h = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
			int sum = (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
			ds[i * nb + b] = d;
			cw[i * nb + b] = 128.0f * d * (float)sum;
		}
	}
}

#pragma GCC pop_options

// ---- AVX-512 VNNI with VBMI (byte permutes across the register) ----
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c")

// iq4_group_index: the byte indices iq4_group_vbmi permutes a group by
// (IQ4_NL: 18-byte blocks, MXFP4: 17), into the 128 bytes of two 64-byte
// loads: ix[0] picks blocks 0-3's 16 index bytes from rg[0..127], ix[1]
// blocks 4-7's from rg[64..127] and the last 64 bytes of the group, ix[2]
// the 8 scales' bytes from rg[0..127] in weft_grp_lane's order (MXFP4: 16
// E8M0 bytes; IQ4_NL: 16 f16 words).
static void iq4_group_index(const int type, __m512i *ix) {
	const int bs = type == 39 ? 17 : 18, hb = type == 39 ? 1 : 2, tail = 8 * bs - 64;
	static const int order[16] = {0, 4, 0, 4, 1, 5, 1, 5, 2, 6, 2, 6, 3, 7, 3, 7};
	uint8_t a[64], b[64], e[64];
	memset(e, 0, sizeof e);
	for (int k = 0; k < 4; k++)
		for (int j = 0; j < 16; j++) {
			a[16 * k + j] = (uint8_t)(hb + bs * k + j);
			int p = hb + bs * (4 + k) + j; // byte of the group
			b[16 * k + j] = (uint8_t)(p < 128 ? p - 64 : 64 + p - tail);
		}
	for (int j = 0; j < 16; j++) {
		if (type == 39) {
			e[j] = (uint8_t)(bs * order[j]);
		} else {
			e[2 * j] = (uint8_t)(bs * order[j]);
			e[2 * j + 1] = (uint8_t)(bs * order[j] + 1);
		}
	}
	ix[0] = _mm512_loadu_si512(a);
	ix[1] = _mm512_loadu_si512(b);
	ix[2] = _mm512_loadu_si512(e);
}

// iq4_group_vbmi: what iq4_scales8 and two iq4_quad give for the group at
// rg, from three 64-byte loads inside the group (its first 128 bytes and
// its last 64) and three vpermi2b, instead of eight 16-byte lane loads and
// eight scale bytes one by one.
static inline __attribute__((always_inline)) void iq4_group_vbmi(const int type, const uint8_t *rg, __m512i tbl,
								 const __m512i *ix, __m512 *ws, __m512i *alo, __m512i *ahi,
								 __m512i *blo, __m512i *bhi) {
	const int bs = type == 39 ? 17 : 18;
	const __m512i l0 = _mm512_loadu_si512(rg), l1 = _mm512_loadu_si512(rg + 64), l2 = _mm512_loadu_si512(rg + 8 * bs - 64);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512i qa = _mm512_permutex2var_epi8(l0, ix[0], l1), qb = _mm512_permutex2var_epi8(l1, ix[1], l2);
	*alo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(qa, m4));
	*ahi = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(qa, 4), m4));
	*blo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(qb, m4));
	*bhi = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(qb, 4), m4));
	__m512i sc = _mm512_permutex2var_epi8(l0, ix[2], l1);
	if (type == 39) {
		__m512i e = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(sc)), _mm512_set1_epi32(128));
		*ws = _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(e));
	} else {
		*ws = _mm512_cvtph_ps(_mm512_castsi512_si256(sc));
	}
}

#define IQ4V(name) name##_vbmi
#define IQ4V_VBMI 1
#include "body_iq4vnni.h"
#undef IQ4V
#undef IQ4V_VBMI
#pragma GCC pop_options

// weft_iq4_vnni_matmul: rows [r0, r1) of an IQ4_NL, MXFP4 or Q4_0 product
// for n tokens on weft_vnni_prep's activations (qx, dxl, xs4, grp). IQ4_XS
// takes weft_iq4xs_i8k_matmul below the lane GEMM. Q4_0's blocks are laid
// out as IQ4_NL's (an f16 scale, then 16 bytes of 4-bit indices, the low
// nibbles the first 16 columns); its values are q - 8 (iq4_table).
int weft_iq4_vnni_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dxl,
			 const float *xs4, const float *grp, int n, float *y, long ldy) {
	if (type == 23 || (type == 2 ? K % 64 != 0 : !weft_iq4_ok(type, K, 64))) return WEFT_EUNSUPPORTED;
	if (__atomic_load_n(&weft_iq4_vbmi, __ATOMIC_RELAXED))
		iq4_matmul_vbmi(type, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
	else
		iq4_matmul_vnni(type, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
	return WEFT_OK;
}
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
