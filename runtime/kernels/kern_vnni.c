//go:build cgo

// kern_vnni.c: integer dot-product kernels for few tokens (AVX-512 VNNI).
// Activations are quantized per 32 values to int8 (scale dx = amax/127),
// as llama.cpp does; weights stay in their blocks and are unpacked to
// unsigned bytes, so one vpdpbusd multiplies 64 weight-activation pairs into
// 16 int32 lanes of 4 products each. Per lane (4 consecutive columns) the
// float result is
//     acc += float(S) * (ws * dx) + woff * xsum4
// where ws is the weight scale of the lane's group, woff the weight offset
// (-16d for Q5_0, the block's min m for Q4_1 and Q5_1, -128d for Q8_0
// stored +128, -32d*sc for Q6_K, -dmin*m for Q4_K and Q5_K) and xsum4 =
// dx * (sum of the 4 quantized activations), so both terms see the same
// rounded activations, as llama.cpp's block sums do. Q4_0 takes
// kern_iq4.c's row kernel instead, as IQ4_NL with the values -8..7: it
// sums 8 blocks in integers before one conversion and FMA per token.

#include <string.h>

#include "kernels.h"
#include "scratch.h"

#if WEFT_X86
#include <immintrin.h>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#include "body_kquant.h"
#include "body_lane.h"

// qx_prep quantizes n tokens of x (K values each, K % 64 == 0) into the
// scratch layout: per token qx[K] int8, dxl[K/4] float, xs4[K/4] float,
// and grp[WEFT_GRP_FLOATS * (K/256)] for kern_iq4.c's 256-column row
// kernel (weft_grp_lane: the same int8 values in that kernel's order, dx
// and 128 * (sum of a block's int8 values) in its lanes).
static void vnni_prep(const float *x, int n, int K, int8_t *qx, float *dxl, float *xs4, float *grp) {
	const int G = K / 256;
	for (int t = 0; t < n; t++) {
		const float *xt = x + (long)t * K;
		int8_t *q = qx + (long)t * K;
		float *dl = dxl + (long)t * (K / 4), *s4 = xs4 + (long)t * (K / 4);
		float *gp = grp + (long)t * WEFT_GRP_FLOATS * G;
		for (int b = 0; b < K / 32; b++) {
			const float d = kq_q8_32(xt + 32 * b, q + 32 * b);
			_mm256_storeu_ps(dl + 8 * b, _mm256_set1_ps(d));
			// The offset term must use the same rounded activations as the
			// integer term (d * sum of the int8 values), else the weight
			// offset multiplies the activations' rounding error.
			int bsum = 0;
			for (int g = 0; g < 8; g++) {
				const int8_t *p = q + 32 * b + 4 * g;
				int s = (p[0] + p[1]) + (p[2] + p[3]);
				s4[8 * b + g] = d * (float)s;
				bsum += s;
			}
			if (b / 8 < G) {
				float *gg = gp + WEFT_GRP_FLOATS * (b / 8);
				int bi = b % 8, j = weft_grp_lane(bi);
				int8_t *gq = (int8_t *)gg + 128 * (bi / 4) + 16 * (bi % 4);
				memcpy(gq, q + 32 * b, 16);
				memcpy(gq + 64, q + 32 * b + 16, 16);
				int32_t c = 128 * bsum, z = 0;
				gg[64 + j] = gg[64 + j + 2] = d;
				memcpy(gg + 80 + j, &c, 4);
				memcpy(gg + 80 + j + 2, &z, 4);
			}
		}
	}
}

static inline __attribute__((always_inline)) __m512i vnni_u4pair(__m256i q) {
	// 32 packed bytes -> 64 bytes: low nibbles then high nibbles
	__m256i m = _mm256_set1_epi8(0x0f);
	__m256i lo = _mm256_and_si256(q, m), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}


// two_scales: lanes 0-7 = f16 at p0, lanes 8-15 = f16 at p1 (one permute).
static inline __attribute__((always_inline)) __m512 vnni_two_scales(const uint8_t *p0, const uint8_t *p1) {
	uint32_t h = (uint32_t)(p0[0] | p0[1] << 8) | (uint32_t)(p1[0] | p1[1] << 8) << 16;
	__m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
	const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
	return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(d));
}

// One 64-column chunk for NT tokens: wq unsigned bytes, ws / woff lanes.
#define VNNI_ACC(NT)                                                                                         \
	for (int t = 0; t < NT; t++) {                                                                       \
		__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq,                                  \
						_mm512_loadu_si512(qx + (long)t * K + col));                 \
		__m512 f = _mm512_cvtepi32_ps(s);                                                            \
		acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(ws, _mm512_loadu_ps(dxl + (long)t * K4 + col / 4)), \
					 acc[t]);                                                            \
		accb[t] = _mm512_fmadd_ps(woff, _mm512_loadu_ps(xs4 + (long)t * K4 + col / 4), accb[t]);    \
	}

static inline __attribute__((always_inline)) void vnni_row(const int type, const uint8_t *row, int K, const int8_t *qx,
							    const float *dxl, const float *xs4, float *out, long ldo,
							    const uint8_t *pf, const int l2, const int NT) {
	// two accumulators per token (scaled products, offsets) halve the
	// loop-carried FMA chain
	__m512 acc[8], accb[8];
	for (int t = 0; t < NT; t++) acc[t] = accb[t] = _mm512_setzero_ps();
	const int K4 = K / 4;
	const __mmask16 hi8 = 0xff00;
	if (type == 8) { // Q8_0: two blocks per chunk
		const __m512i flip = _mm512_set1_epi8((char)0x80);
		for (int col = 0; col < K; col += 64) {
			const uint8_t *b0 = row + (col / 32) * 34, *b1 = b0 + 34;
			if (pf && l2) { // a row ahead, a chunk's bytes at a time (vnni_rows)
				_mm_prefetch((const char *)pf + (col / 32) * 34, _MM_HINT_T1);
				_mm_prefetch((const char *)pf + (col / 32) * 34 + 64, _MM_HINT_T1);
			} else if (pf) {
				_mm_prefetch((const char *)pf + (col / 32) * 34, _MM_HINT_T0);
				_mm_prefetch((const char *)pf + (col / 32) * 34 + 64, _MM_HINT_T0);
			}
			__m256i q0 = _mm256_loadu_si256((const __m256i *)(b0 + 2)),
				q1 = _mm256_loadu_si256((const __m256i *)(b1 + 2));
			__m512i wq = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), flip);
			float d0 = _cvtsh_ss(b0[0] | b0[1] << 8), d1 = _cvtsh_ss(b1[0] | b1[1] << 8);
			__m512 ws = _mm512_mask_blend_ps(hi8, _mm512_set1_ps(d0), _mm512_set1_ps(d1));
			__m512 woff = _mm512_mul_ps(ws, _mm512_set1_ps(-128.0f));
			VNNI_ACC(NT)
		}
	} else if (type == 3 || type == 6 || type == 7) { // Q4_1, Q5_0, Q5_1: unsigned quants, 4 or 5 bits
		const int bsz = type == 3 ? 20 : type == 6 ? 22 : 24, qoff = type == 3 ? 4 : type == 6 ? 6 : 8;
		for (int col = 0; col < K; col += 64) {
			const uint8_t *b0 = row + (col / 32) * bsz, *b1 = b0 + bsz;
			if (pf) // the row four ahead into L2 (vnni_rows: only under l2); 2 * bsz < 64 bytes a step
				_mm_prefetch((const char *)pf + (col / 32) * bsz, _MM_HINT_T1);
			__m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(b0 + qoff)));
			q = _mm512_mask_broadcast_i32x4(q, 0xff00, _mm_loadu_si128((const __m128i *)(b1 + qoff)));
			__m512i wq = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xff00ff00u, q, 4), _mm512_set1_epi8(0x0f));
			if (type != 3) { // bit j of a block's qh is column j's fifth: the two qh make a 64-bit byte mask
				uint32_t h0, h1;
				memcpy(&h0, b0 + qoff - 4, 4);
				memcpy(&h1, b1 + qoff - 4, 4);
				wq = _mm512_mask_add_epi8(wq, (__mmask64)h0 | (__mmask64)h1 << 32, wq, _mm512_set1_epi8(0x10));
			}
			__m512 ws = vnni_two_scales(b0, b1);
			// Q5_0: the -16 offset; Q4_1, Q5_1: the blocks' mins
			__m512 woff = type == 6 ? _mm512_mul_ps(ws, _mm512_set1_ps(-16.0f)) : vnni_two_scales(b0 + 2, b1 + 2);
			VNNI_ACC(NT)
		}
	} else if (type == 12 || type == 13) { // Q4_K, Q5_K (same scales; Q5_K adds a fifth bit)
		const int bsz = type == 12 ? 144 : 176, qoff = type == 12 ? 16 : 48;
		const __m512i one512 = _mm512_set1_epi8(1);
		const __m512i hshift = _mm512_mask_blend_epi16(0xffff0000u, _mm512_setzero_si512(), _mm512_set1_epi16(1));
		const __m512i m4k = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi32(8);
		const __m512i pick0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
		for (int sb = 0; sb < K / 256; sb++) {
			const uint8_t *blk = row + sb * bsz, *sc = blk + 4, *qs = blk + qoff;
			__m512i qhh = type == 13 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)))
						 : _mm512_setzero_si512();
			float d = _cvtsh_ss(blk[0] | blk[1] << 8), dmin = _cvtsh_ss(blk[2] | blk[3] << 8);
			// 8 six-bit scales and 8 mins -> one vector [d*sc0..7, -dmin*m0..7]
			uint32_t a[3] = {(uint32_t)sc[0] | (uint32_t)sc[1] << 8 | (uint32_t)sc[2] << 16 | (uint32_t)sc[3] << 24,
					 (uint32_t)sc[4] | (uint32_t)sc[5] << 8 | (uint32_t)sc[6] << 16 | (uint32_t)sc[7] << 24,
					 (uint32_t)sc[8] | (uint32_t)sc[9] << 8 | (uint32_t)sc[10] << 16 | (uint32_t)sc[11] << 24};
			uint32_t s03 = a[0] & 0x3f3f3f3f, m03 = a[1] & 0x3f3f3f3f;
			uint32_t s47 = (a[2] & 0x0f0f0f0f) | (((a[0] >> 6) & 0x03030303) << 4);
			uint32_t m47 = ((a[2] >> 4) & 0x0f0f0f0f) | (((a[1] >> 6) & 0x03030303) << 4);
			__m512 sm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi32((int)m47, (int)m03, (int)s47, (int)s03)));
			sm = _mm512_mul_ps(sm, _mm512_mask_blend_ps(hi8, _mm512_set1_ps(d), _mm512_set1_ps(-dmin)));
			for (int j = 0; j < 4; j++) {
				int col = sb * 256 + 64 * j;
				if (pf) // the row four ahead into L2 (vnni_rows: Q5_K under l2); bsz / 4 < 64 bytes a step
					_mm_prefetch((const char *)pf + (col / 64) * (bsz / 4), _MM_HINT_T1);
				// [q, q] then shift the upper half's 16-bit words by 4: low
				// nibbles below, high nibbles above, without a lane insert
				__m512i qq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * j)));
				__m512i wq = _mm512_and_si512(_mm512_mask_srli_epi16(qq, 0xffff0000u, qq, 4), m4k);
				if (type == 13) { // bit 2j (low half) / 2j+1 (high half) of qh, to bit 4
					__m512i sh = _mm512_add_epi16(hshift, _mm512_set1_epi16((short)(2 * j)));
					__m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qhh, sh), one512);
					wq = _mm512_or_si512(wq, _mm512_slli_epi16(hb, 4));
				}
				__m512i pick = _mm512_add_epi32(pick0, _mm512_set1_epi32(2 * j));
				__m512 ws = _mm512_permutexvar_ps(pick, sm);
				__m512 woff = _mm512_permutexvar_ps(_mm512_add_epi32(pick, eight), sm);
				VNNI_ACC(NT)
			}
		}
	} else { // Q6_K
		const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
		for (int sb = 0; sb < K / 256; sb++) {
			const uint8_t *blk = row + sb * 210;
			float d = _cvtsh_ss(blk[208] | blk[209] << 8);
			__m512 s16 = _mm512_mul_ps(_mm512_set1_ps(d),
						   _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192)))));
			for (int h = 0; h < 2; h++) {
				__m512i L = _mm512_loadu_si512(blk + 64 * h);
				__m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
				__m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
				for (int part = 0; part < 2; part++) {
					int c = 2 * h + part;
					int col = sb * 256 + 64 * c;
					__m512i lo = part == 0 ? _mm512_and_si512(L, m4) : _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
					__m512i hb = part == 0 ? _mm512_and_si512(H, m2) : _mm512_and_si512(_mm512_srli_epi16(H, 4), m2);
					__m512i wq = _mm512_or_si512(lo, _mm512_slli_epi16(hb, 4));
					__m512i idx = _mm512_add_epi32(_mm512_set1_epi32(4 * c),
								       _mm512_srli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 2));
					__m512 ws = _mm512_permutexvar_ps(idx, s16);
					__m512 woff = _mm512_mul_ps(ws, _mm512_set1_ps(-32.0f));
					VNNI_ACC(NT)
				}
			}
		}
	}
	for (int t = 0; t < NT; t++) out[t * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t], accb[t]));
}

// weft_vnni_ok: whether the integer path handles this product.
int weft_vnni_ok(int type, int K) {
	switch (type) {
	case 8:
	case 2:
	case 3:
	case 6:
	case 7: return K % 64 == 0;
	case 12:
	case 13:
	case 14: return K % 256 == 0;
	}
	return weft_iq4_ok(type, K, 64);
}

static inline __attribute__((always_inline)) void vnni_rows(const int type, const uint8_t *w, long rowBytes, int K, int r0,
							     int r1, const int8_t *qx, const float *dxl, const float *xs4,
							     int n, float *y, long ldy) {
	const int K4 = K / 4, l2 = (type < 12 || type == 13) && weft_fetch_l2() && (long)(r1 - r0) * rowBytes >= WEFT_FETCH_L2_BYTES;
	const int spread = type == 8 || l2; // Q8_0, and Q4_1/Q5_0/Q5_1/Q5_K under l2
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w + (long)r * rowBytes;
		// Fetch the row after next while this one is computed (within the
		// caller's rows only), as kern_i8.c does with one token (BENCHMARKS.md
		// §1, what bounds decode). With more tokens too: a row's passes of
		// 4 tokens take long enough that, without it, weights beyond the
		// cache arrive late (the 1B preset's 6-token step: 86-91 ms with it,
		// 126-128 without, machine A; no change in cache).
		// Q8_0 fetches the row four ahead instead, a chunk's bytes at a
		// time through its first pass over this row (vnni_row's pf): a
		// burst of a whole row's prefetches fills the core's miss queue
		// and stalls the loads behind it, and two rows (4 KiB on the 1B
		// preset) are too close for memory's latency (1B preset Q8_0,
		// decode of one sequence, machine A, three alternating rounds:
		// 27.6-31.7 tokens/s with the burst, 35.8-36.9 spread 4 rows ahead,
		// 26.9-31.2 at 7 rows). On Zen 4 (weft_fetch_l2), in chunks of
		// WEFT_FETCH_L2_BYTES or more, into L2, and so do Q4_1, Q5_0 and
		// Q5_1 there (the 1B preset in Q4_0, when it took this loop, decode
		// of one sequence on machine D: 35.8-38.2 tokens/s with the burst,
		// 44.5-46.4 spread into L2), and Q5_K (the 1B preset in Q5_K_M,
		// four alternating rounds: 26.7-29.8 with the burst, 32.6-35.8
		// spread); elsewhere they keep the burst.
		const uint8_t *pf = spread && r + 4 < r1 ? row + 4 * rowBytes : 0;
		if (!spread && r + 2 < r1) kq_prefetch(row + 2 * rowBytes, rowBytes);
		int t = 0;
		// K-quants: 8 tokens per pass over the row (16 accumulators), so
		// their costlier unpacking is shared by more tokens (Q8_0, cheap to
		// unpack, runs faster with 4)
		for (; type >= 12 && t + 8 <= n; t += 8)
			vnni_row(type, row, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, y + t * ldy + r, ldy, t ? 0 : pf, l2, 8);
		for (; t + 4 <= n; t += 4)
			vnni_row(type, row, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, y + t * ldy + r, ldy, t ? 0 : pf, l2, 4);
		switch (n - t) {
		case 1: vnni_row(type, row, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, y + t * ldy + r, ldy, t ? 0 : pf, l2, 1); break;
		case 2: vnni_row(type, row, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, y + t * ldy + r, ldy, t ? 0 : pf, l2, 2); break;
		case 3: vnni_row(type, row, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, y + t * ldy + r, ldy, t ? 0 : pf, l2, 3); break;
		}
	}
}

// weft_vnni_prep_floats: size of vnni_prep's output for n tokens, in floats.
long weft_vnni_prep_floats(int K, int n) { return (long)n * (K / 4 + 2 * (K / 4) + WEFT_GRP_FLOATS * (K / 256)); }

// weft_vnni_prep: vnni_prep into one buffer of weft_vnni_prep_floats(K, n).
void weft_vnni_prep(const float *x, int n, int K, float *scr) {
	vnni_prep(x, n, K, (int8_t *)scr, scr + (long)n * K / 4, scr + (long)n * K / 4 + (long)n * (K / 4),
		  scr + (long)n * K / 4 + 2 * (long)n * (K / 4));
}

// weft_vnni_matmul: rows [r0, r1) for n tokens; prep is weft_vnni_prep's output
// for x, or NULL to quantize here.
int weft_vnni_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, const float *prep,
		       int n, float *y, long ldy) {
	int K4 = K / 4;
	float *scr = (float *)prep;
	if (!scr) {
		scr = weft_scratch(0, weft_vnni_prep_floats(K, n));
		if (!scr) return WEFT_ENOMEM;
		weft_vnni_prep(x, n, K, scr);
	}
	int8_t *qx = (int8_t *)scr;
	float *dxl = scr + (long)n * K / 4, *xs4 = dxl + (long)n * K4;
	switch (type) { // specialize vnni_rows per type
	case 8: vnni_rows(8, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	case 3: vnni_rows(3, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	case 6: vnni_rows(6, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	case 7: vnni_rows(7, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	case 12: vnni_rows(12, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	case 13: vnni_rows(13, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	case 14: vnni_rows(14, w, rowBytes, K, r0, r1, qx, dxl, xs4, n, y, ldy); break;
	default: // kern_iq4.c: IQ4_NL, MXFP4, and Q4_0 as IQ4_NL with the values -8..7
		return weft_iq4_vnni_matmul(type, w, rowBytes, K, r0, r1, qx, dxl, xs4, xs4 + (long)n * K4, n, y, ldy);
	}
	return 0;
}

// ---- int8 lane GEMM, many tokens (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; the 4-bit table types through kern_iq4.c) ----
// Tokens go along the vector lanes, 16 per panel, so one vpdpbusd
// multiplies 4 columns of one weight row (a 32-bit broadcast of its int8
// quants) with the same 4 columns of 16 tokens: no horizontal sums, and a
// block's float fix-up (3-4 operations) is paid once per 8 vpdpbusd. The
// activations are quantized like the row kernel's (per token and
// 32-column block, dx = amax/127) and stored plus 128, unsigned, as
// vpdpbusd wants its first operand; the excess 128 * sum(q) of each row
// block is taken off in float. With I the block's integer dot product and
// S the token's sum of quantized activations over the block:
//     Q8_0: y[t] += dx[t] * (dw * I - 128 * dw * sum(q))
//     Q4_K, Q5_K: y[t] += dx[t] * (ds * I - 128 * ds * sum(q) - dm * S[t])
//     (Q4_1 and Q5_1 alike, with ds = d and dm = -m)
// (ds = d * scale, dm = dmin * min of the 32-column sub-block). Q8_0
// quants are read in place from their blocks; Q4_K, Q5_K and Q6_K rows are
// unpacked to bytes (and their scales decoded) once per LANE_ROWS rows, for
// all tokens.
// Packed panel layout, per 32-column block: 8 groups x 16 tokens x 4
// bytes, then 16 floats dx and 16 floats S (0 for padding tokens, whose
// bytes are 128, so they add nothing).
#define LANE_BLK 640
// LANE_ROWS: the weight rows unpacked together, whose tiles of 4 take each
// pair of token panels in turn (lane_panels).
#define LANE_ROWS 16

long weft_lane_prep_bytes(int K, int n) { return (long)((n + 15) / 16) * (K / 32) * LANE_BLK; }

// ab is the number of columns that share one activation scale: 32, or 256
// for IQ4_XS (llama.cpp's Q8_K; K a multiple of it), whose blocks then
// each carry their super-block's scale.
void weft_lane_prep(const float *x, int n, int K, int ab, uint8_t *out) {
	int nb = K / 32, panels = (n + 15) / 16;
	float dt[16], idt[16]; // each token's scale and its inverse for the current ab columns
	for (int p = 0; p < panels; p++)
		for (int b = 0; b < nb; b++) {
			uint8_t *dst = out + ((long)p * nb + b) * LANE_BLK;
			float *dx = (float *)(dst + 512), *sx = dx + 16;
			for (int t = 0; t < 16; t++) {
				int tok = p * 16 + t;
				if (tok >= n) {
					for (int g = 0; g < 8; g++) memset(dst + g * 64 + t * 4, 128, 4);
					dx[t] = sx[t] = 0;
					continue;
				}
				const float *xt = x + (long)tok * K + 32 * b;
				if ((32 * b) % ab == 0) {
					__m512 a = _mm512_setzero_ps();
					for (int k = 0; k < ab; k += 16) a = _mm512_max_ps(a, _mm512_abs_ps(_mm512_loadu_ps(xt + k)));
					float amax = _mm512_reduce_max_ps(a);
					dt[t] = amax / 127.0f;
					idt[t] = amax > 0 ? 127.0f / amax : 0.0f;
				}
				float d = dt[t], id = idt[t];
				__m512 v0 = _mm512_loadu_ps(xt), v1 = _mm512_loadu_ps(xt + 16);
				__m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
				__m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
				__m128i q0 = _mm512_cvtsepi32_epi8(i0), q1 = _mm512_cvtsepi32_epi8(i1);
				// the sum of the int8 values as stored (saturation included)
				int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_cvtepi8_epi32(q0), _mm512_cvtepi8_epi32(q1)));
				uint8_t q[32];
				_mm_storeu_si128((__m128i *)q, _mm_xor_si128(q0, _mm_set1_epi8((char)0x80)));
				_mm_storeu_si128((__m128i *)(q + 16), _mm_xor_si128(q1, _mm_set1_epi8((char)0x80)));
				for (int g = 0; g < 8; g++) memcpy(dst + g * 64 + t * 4, q + 4 * g, 4);
				dx[t] = d;
				sx[t] = (float)sum;
			}
		}
}

// lane_sum32 is the sum of 32 bytes taken as unsigned.
static inline __attribute__((always_inline)) int lane_sum32(__m256i v) {
	__m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
	__m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
}

// lane_scales_q8 writes, for rows 0..m of w and every block, dw (the
// block's scale) and cw = 128 * dw * sum of its 32 quants. Four blocks at a
// time: with few tokens this pass is a good part of the lane GEMM's work.
static void lane_scales_q8(const uint8_t *w, long rowBytes, int nb, int m, float *dw, float *cw) {
	const __m256i flip = _mm256_set1_epi8((char)0x80);
	const __m512i flip512 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
	// qwords 0, 4, 1 and 5 of the folded sums hold blocks 0, 1, 2 and 3
	const __m512i order = _mm512_set_epi64(0, 0, 0, 0, 5, 1, 4, 0);
	const __m128 c128 = _mm_set1_ps(128.0f);
	for (int i = 0; i < m; i++) {
		const uint8_t *row = w + (long)i * rowBytes;
		float *dwi = dw + (long)i * nb, *cwi = cw + (long)i * nb;
		int b = 0;
		for (; b + 4 <= nb; b += 4) {
			const uint8_t *blk = row + (long)b * 34;
			__m512i q01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2))),
							 _mm256_loadu_si256((const __m256i *)(blk + 36)), 1);
			__m512i q23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 70))),
							 _mm256_loadu_si256((const __m256i *)(blk + 104)), 1);
			// per 64-bit lane, the sum of 8 bytes ^ 0x80 (unsigned)
			__m512i s01 = _mm512_sad_epu8(_mm512_xor_si512(q01, flip512), zero);
			__m512i s23 = _mm512_sad_epu8(_mm512_xor_si512(q23, flip512), zero);
			// 128-bit lane L: (s01[2L] + s01[2L+1], s23[2L] + s23[2L+1]); then
			// lanes 0 + 1 (blocks 0 and 2) and 2 + 3 (blocks 1 and 3)
			__m512i t = _mm512_add_epi64(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
			t = _mm512_add_epi64(t, _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
			__m128i sum = _mm256_cvtepi64_epi32(_mm512_castsi512_si256(_mm512_permutexvar_epi64(order, t)));
			// sum of signed bytes = sum of (byte ^ 0x80) as unsigned - 32*128
			sum = _mm_sub_epi32(sum, _mm_set1_epi32(32 * 128));
			uint16_t h[4];
			for (int j = 0; j < 4; j++) memcpy(&h[j], blk + 34 * j, 2);
			__m128 d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)h));
			_mm_storeu_ps(dwi + b, d);
			_mm_storeu_ps(cwi + b, _mm_mul_ps(_mm_mul_ps(c128, d), _mm_cvtepi32_ps(sum)));
		}
		for (; b < nb; b++) {
			const uint8_t *blk = row + (long)b * 34;
			int sum = lane_sum32(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), flip)) - 32 * 128;
			float d = _cvtsh_ss(blk[0] | blk[1] << 8);
			dwi[b] = d;
			cwi[b] = 128.0f * d * (float)sum;
		}
	}
}

// k512_q4k_scales64: kq_q4k_scales as two 64-bit words, the eight
// sub-block scales (s) and the eight mins (m), byte i for sub-block i.
static inline __attribute__((always_inline)) void k512_q4k_scales64(const uint8_t *sc, uint64_t *s, uint64_t *m) {
	uint32_t a0, a1, a2;
	memcpy(&a0, sc, 4);
	memcpy(&a1, sc + 4, 4);
	memcpy(&a2, sc + 8, 4);
	uint32_t s47 = (a2 & 0x0f0f0f0f) | (((a0 >> 6) & 0x03030303) << 4);
	uint32_t m47 = ((a2 >> 4) & 0x0f0f0f0f) | (((a1 >> 6) & 0x03030303) << 4);
	*s = (uint64_t)s47 << 32 | (a0 & 0x3f3f3f3f);
	*m = (uint64_t)m47 << 32 | (a1 & 0x3f3f3f3f);
}

// lane_unpack_q4k unpacks rows 0..m of Q4_K weights (Q5 = 0) or Q5_K
// weights (Q5 = 1): the quants of row i, block b (32 columns) to q[(i*nb +
// b)*32 ..], and ds, cw = 128 * ds * sum(q), dm per row and block. A
// super-block at a time in vectors: its 128 quant bytes as two 64-byte
// loads (low nibbles: blocks 0 and 2, 4 and 6; high: 1 and 3, 5 and 7),
// Q5_K's fifth bits (bit k of qh[l] for block k, column l) shifted into
// place per 256-bit half, its eight scales and mins together (the same
// products as one at a time: ds = d * scale, cw = (128 * ds) * sum, dm =
// dmin * min). Q5_K's super-block is Q4_K's with qh[32] before the nibbles.
static inline __attribute__((always_inline)) void lane_unpack_q4k(const uint8_t *w, long rowBytes, int nb, int m, uint8_t *q,
								  float *ds, float *cw, float *dm, const int Q5) {
	const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
	// the fifth bits' shifts for blocks 0 (low half) and 2 (high half)
	const __m512i s02 = _mm512_mask_blend_epi16(0xffff0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
	const __m256 c128 = _mm256_set1_ps(128.0f);
	const long sbb = Q5 ? 176 : 144;
	for (int i = 0; i < m; i++)
		for (int sb = 0; sb < nb / 8; sb++) {
			const uint8_t *blk = w + (long)i * rowBytes + (long)sb * sbb, *qs = blk + (Q5 ? 48 : 16);
			const long b0 = (long)i * nb + sb * 8;
			uint8_t *qb = q + b0 * 32;
			const __m512i l0 = _mm512_loadu_si512((const void *)qs), l1 = _mm512_loadu_si512((const void *)(qs + 64));
			__m512i a = _mm512_and_si512(l0, m4), b = _mm512_and_si512(_mm512_srli_epi16(l0, 4), m4);
			__m512i c = _mm512_and_si512(l1, m4), d = _mm512_and_si512(_mm512_srli_epi16(l1, 4), m4);
			if (Q5) { // bit k of each qh byte to bit 4 of block k's byte
				const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
#define Q5HB(k) _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(H, _mm512_add_epi16(s02, _mm512_set1_epi16(k))), 4), m10)
				a = _mm512_or_si512(a, Q5HB(0));
				b = _mm512_or_si512(b, Q5HB(1));
				c = _mm512_or_si512(c, Q5HB(4));
				d = _mm512_or_si512(d, Q5HB(5));
#undef Q5HB
			}
			_mm256_storeu_si256((__m256i *)qb, _mm512_castsi512_si256(a));
			_mm256_storeu_si256((__m256i *)(qb + 32), _mm512_castsi512_si256(b));
			_mm256_storeu_si256((__m256i *)(qb + 64), _mm512_extracti64x4_epi64(a, 1));
			_mm256_storeu_si256((__m256i *)(qb + 96), _mm512_extracti64x4_epi64(b, 1));
			_mm256_storeu_si256((__m256i *)(qb + 128), _mm512_castsi512_si256(c));
			_mm256_storeu_si256((__m256i *)(qb + 160), _mm512_castsi512_si256(d));
			_mm256_storeu_si256((__m256i *)(qb + 192), _mm512_extracti64x4_epi64(c, 1));
			_mm256_storeu_si256((__m256i *)(qb + 224), _mm512_extracti64x4_epi64(d, 1));
			uint64_t s6, m6;
			k512_q4k_scales64(blk + 4, &s6, &m6);
			const __m256 dv = _mm256_set1_ps(_cvtsh_ss(blk[0] | blk[1] << 8));
			const __m256 mv = _mm256_set1_ps(_cvtsh_ss(blk[2] | blk[3] << 8));
			const __m256 dsc = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)s6))));
			_mm256_storeu_ps(ds + b0, dsc);
			_mm256_storeu_ps(cw + b0, _mm256_mul_ps(_mm256_mul_ps(c128, dsc), lane_sums8(a, b, c, d)));
			_mm256_storeu_ps(dm + b0, _mm256_mul_ps(mv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m6)))));
		}
}

// lane_tile: rows [0, RM) of the tile times TV panels starting at xp (panel
// stride ps bytes); writes row i's 16 tokens of panel v to out[i*32 + 16*v]
// (padding tokens included: they are 0). Row i's
// block b quants are at wq + i*wrs + b*wbs; ds/cw/dm are per row and block
// (row stride nb). MODE 0 (Q8_0): one scale per block. MODE 1 (Q4_K, Q5_K): dm
// is the sub-block's min, taken off with the tokens' block sums. MODE 2
// (Q6_K): 16-column sub-blocks, ds scales columns 0-15 and dm 16-31, so
// the two halves keep separate integer sums. Unless pf is NULL, block b
// also prefetches bytes [b*pfb, (b+1)*pfb) of pf.
static inline __attribute__((always_inline)) void lane_tile(const uint8_t *wq, long wrs, long wbs, int nb, const float *ds,
							     const float *cw, const float *dm, const uint8_t *xp, long ps,
							     const char *pf, long pfb, float *out, const int RM, const int TV,
							     const int MODE) {
	__m512 acc[4][2];
	for (int i = 0; i < RM; i++)
		for (int v = 0; v < TV; v++) acc[i][v] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m512i I[4][2], J[4][2];
		for (int i = 0; i < RM; i++)
			for (int v = 0; v < TV; v++) I[i][v] = J[i][v] = _mm512_setzero_si512();
		const uint8_t *xb = xp + (long)b * LANE_BLK;
		if (pf)
			for (long o = ((long)b * pfb) & ~63L; o < (long)(b + 1) * pfb; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
		for (int g = 0; g < 8; g++) {
			__m512i xv[2];
			for (int v = 0; v < TV; v++) xv[v] = _mm512_loadu_si512(xb + v * ps + g * 64);
			for (int i = 0; i < RM; i++) {
				int32_t w4;
				memcpy(&w4, wq + (long)i * wrs + (long)b * wbs + 4 * g, 4);
				__m512i wb = _mm512_set1_epi32(w4);
				for (int v = 0; v < TV; v++) {
					if (MODE == 2 && g >= 4)
						J[i][v] = _mm512_dpbusd_epi32(J[i][v], xv[v], wb);
					else
						I[i][v] = _mm512_dpbusd_epi32(I[i][v], xv[v], wb);
				}
			}
		}
		for (int v = 0; v < TV; v++) {
			__m512 dx = _mm512_loadu_ps((const float *)(xb + v * ps + 512));
			__m512 sx = MODE == 1 ? _mm512_loadu_ps((const float *)(xb + v * ps + 576)) : _mm512_setzero_ps();
			for (int i = 0; i < RM; i++) {
				__m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(I[i][v]), _mm512_set1_ps(ds[i * nb + b]),
							   _mm512_set1_ps(cw[i * nb + b]));
				if (MODE == 1) t = _mm512_fnmadd_ps(_mm512_set1_ps(dm[i * nb + b]), sx, t);
				if (MODE == 2) t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(J[i][v]), _mm512_set1_ps(dm[i * nb + b]), t);
				acc[i][v] = _mm512_fmadd_ps(t, dx, acc[i][v]);
			}
		}
	}
	for (int i = 0; i < RM; i++)
		for (int v = 0; v < TV; v++) _mm512_store_ps(out + i * 32 + 16 * v, acc[i][v]);
}

// lane_store: the 16 x 16 block r[row] (16 tokens of each of 16 rows)
// transposed, so that token t's first m rows go to y + t*ldy in one masked
// store, for the first nt tokens. One token's rows are adjacent in y, and
// the y of a token is a row of ldy floats: with ldy a power of two, stores
// of a column strip 4 rows wide to a few hundred tokens all fell in the
// same cache sets and were evicted before their lines were complete.
static inline __attribute__((always_inline)) void lane_store(const float *blk, int m, float *y, long ldy, int nt) {
	__m512 r[16], t[16];
	for (int i = 0; i < 16; i++) r[i] = _mm512_load_ps(blk + i * 32);
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	// r[4i + j], 128-bit lane L: rows 4i..4i+3 of token 4L + j
	for (int i = 0; i < 4; i++) {
		r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
		r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
		r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
		r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
	}
	__m512 c[16];
	for (int j = 0; j < 4; j++) {
		__m512 a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), b = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
		__m512 e = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88), f = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
		c[j] = _mm512_shuffle_f32x4(a, e, 0x88);
		c[8 + j] = _mm512_shuffle_f32x4(a, e, 0xdd);
		c[4 + j] = _mm512_shuffle_f32x4(b, f, 0x88);
		c[12 + j] = _mm512_shuffle_f32x4(b, f, 0xdd);
	}
	const __mmask16 k = (__mmask16)((1u << m) - 1);
	for (int tok = 0; tok < nt && tok < 16; tok++) _mm512_mask_storeu_ps(y + (long)tok * ldy, k, c[tok]);
}

// lane_panels: rows [0, m) (m <= 16, in tiles of 4) times all tokens, a
// pair of panels at a time: the tiles share the pair's activations while
// they are in the near caches, and the pair's 16 rows x 32 tokens are
// stored token by token (lane_store).
static inline __attribute__((always_inline)) void lane_panels(const uint8_t *wq, long wrs, long wbs, int nb, int m,
							       const float *ds, const float *cw, const float *dm,
							       const uint8_t *xp, long ps, int n, float *y, long ldy,
							       const uint8_t *next, long nextBytes, const int MODE) {
	float out[16 * 32] __attribute__((aligned(64)));
	memset(out, 0, sizeof out);
	int panels = (n + 15) / 16;
	// The first pair of panels fetches the next rows' weights (next, nextBytes
	// contiguous bytes; none when NULL), spread evenly over its tiles' blocks.
	int tiles = (m + 3) / 4;
	long pfb = next ? (nextBytes + (long)tiles * nb - 1) / ((long)tiles * nb) : 0;
	for (int p = 0; p < panels; p += 2) {
		int tv = panels - p >= 2 ? 2 : 1;
		const uint8_t *xpp = xp + (long)p * ps;
		for (int i0 = 0; i0 < m; i0 += 4) {
			int mt = m - i0 < 4 ? m - i0 : 4;
			const uint8_t *wt = wq + (long)i0 * wrs;
			const float *dst = ds + (long)i0 * nb, *cwt = cw + (long)i0 * nb, *dmt = dm + (long)i0 * nb;
			float *o = out + i0 * 32;
			const char *pf = p == 0 && next ? (const char *)next + (long)(i0 / 4) * nb * pfb : 0;
#define LT(RM, TV) lane_tile(wt, wrs, wbs, nb, dst, cwt, dmt, xpp, ps, pf, pfb, o, RM, TV, MODE)
			if (tv == 2) {
				switch (mt) {
				case 4: LT(4, 2); break;
				case 3: LT(3, 2); break;
				case 2: LT(2, 2); break;
				default: LT(1, 2);
				}
			} else {
				switch (mt) {
				case 4: LT(4, 1); break;
				case 3: LT(3, 1); break;
				case 2: LT(2, 1); break;
				default: LT(1, 1);
				}
			}
#undef LT
		}
		for (int v = 0; v < tv; v++)
			lane_store(out + 16 * v, m, y + (long)(p + v) * 16 * ldy, ldy, n - 16 * (p + v));
	}
}

// lane_unpack_q6k unpacks rows 0..m of Q6_K weights: the quants of row i,
// block b (32 columns) to q[(i*nb + b)*32 ..] as signed bytes q - 32, with
// ds (scale of columns 0-15), dm (scale of columns 16-31) and cw = 128 *
// (ds * sum of the first 16 quants + dm * sum of the last 16). A
// super-block at a time in vectors: per 128-column half, the 64 low-bit
// bytes and the 32 high-bit bytes (twice: as they are, and shifted right
// by 2) make blocks 0 and 1 of the half, then 2 and 3; its 16 scales
// together.
static void lane_unpack_q6k(const uint8_t *w, long rowBytes, int nb, int m, uint8_t *q, float *ds, float *cw, float *dm) {
	const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), off = _mm512_set1_epi8(32);
	const __m512i z = _mm512_setzero_si512();
	// the scales of the blocks' first column halves, then of their second
	const __m512i evens = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
	// the same order for the sums as hs holds them
	const __m512i sorder = _mm512_set_epi32(15, 11, 14, 10, 7, 3, 6, 2, 13, 9, 12, 8, 5, 1, 4, 0);
	const __m256 c128 = _mm256_set1_ps(128.0f);
	for (int i = 0; i < m; i++)
		for (int sb = 0; sb < nb / 8; sb++) {
			const uint8_t *blk = w + (long)i * rowBytes + (long)sb * 210;
			const long b0 = (long)i * nb + sb * 8;
			uint8_t *qb = q + b0 * 32;
			__m256i hs[2]; // per half, the column halves' sums of q (0..63)
			for (int h = 0; h < 2; h++) { // 128-column halves
				const __m512i L = _mm512_loadu_si512((const void *)(blk + 64 * h));
				const __m512i hh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
				const __m512i H = _mm512_mask_srli_epi16(hh, 0xffff0000u, hh, 2);
				// blocks 0 and 1 of the half: low nibbles | high bits 0-1 (2-3) at bit 4
				const __m512i v01 = _mm512_ternarylogic_epi32(_mm512_and_si512(L, m4), _mm512_slli_epi16(H, 4), m30, 0xf8);
				// blocks 2 and 3: high nibbles | high bits 4-5 (6-7) at bit 4
				const __m512i v23 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), H, m30, 0xf8);
				uint8_t *qh = qb + 128 * h;
				const __m512i s01 = _mm512_sub_epi8(v01, off), s23 = _mm512_sub_epi8(v23, off);
				_mm256_storeu_si256((__m256i *)qh, _mm512_castsi512_si256(s01));
				_mm256_storeu_si256((__m256i *)(qh + 32), _mm512_extracti64x4_epi64(s01, 1));
				_mm256_storeu_si256((__m256i *)(qh + 64), _mm512_castsi512_si256(s23));
				_mm256_storeu_si256((__m256i *)(qh + 96), _mm512_extracti64x4_epi64(s23, 1));
				// per 64-bit lane the sum of 8 quants; adjacent lanes make a
				// 16-column half: dword 2L of hs[h] is block L / 2 of the half,
				// column half L % 2, and 2L + 1 block 2 + L / 2
				const __m512i p = _mm512_sad_epu8(v01, z), r = _mm512_sad_epu8(v23, z);
				hs[h] = _mm512_cvtepi64_epi32(_mm512_add_epi64(_mm512_unpacklo_epi64(p, r), _mm512_unpackhi_epi64(p, r)));
			}
			const __m512 d = _mm512_set1_ps(_cvtsh_ss(blk[208] | blk[209] << 8));
			// f[2j + k] = d * scale of block j, column half k
			const __m512 f = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192)))));
			// the sums less 16 * 32, first half of blocks 0..7, then second half
			const __m512i hv = _mm512_inserti64x4(_mm512_castsi256_si512(hs[0]), hs[1], 1);
			const __m512 se = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_permutexvar_epi32(sorder, hv), _mm512_set1_epi32(16 * 32)));
			const __m512 fe = _mm512_permutexvar_ps(evens, f);
			const __m256 f0 = _mm512_castps512_ps256(fe), f1 = _mm512_extractf32x8_ps(fe, 1);
			_mm256_storeu_ps(ds + b0, f0);
			_mm256_storeu_ps(dm + b0, f1);
			const __m256 s0 = _mm512_castps512_ps256(se), s1 = _mm512_extractf32x8_ps(se, 1);
			// 128 * (ds * s0 + dm * s1), the first product fused (the bits the
			// one-block-at-a-time code had, as GCC contracted it)
			_mm256_storeu_ps(cw + b0, _mm256_mul_ps(c128, _mm256_fmadd_ps(f0, s0, _mm256_mul_ps(f1, s1))));
		}
}

// lane_unpack_legacy unpacks rows 0..m of the 32-column block types Q4_0
// (2), Q4_1 (3), Q5_0 (6) and Q5_1 (7): block b of row i to q[(i*nb + b)*32
// ..] as column-ordered bytes (the low nibbles are columns 0-15, the high
// ones 16-31; Q5's fifth bit of column c is bit c of qh), ds = d and cw =
// 128 * d * sum(q). Q4_0 and Q5_0 store q - 8 and q - 16 (MODE 0); Q4_1
// and Q5_1 store q as it is with dm = -m, so that MODE 1's - dm * S adds
// the block min times the token's block sum.
static void lane_unpack_legacy(int type, const uint8_t *w, long rowBytes, int nb, int m, uint8_t *q, float *ds, float *cw,
			       float *dm) {
	const int bs = type == 2 ? 18 : type == 3 ? 20 : type == 6 ? 22 : 24;
	const int hasMin = type == 3 || type == 7, five = type == 6 || type == 7;
	const int qoff = 2 + 2 * hasMin + 4 * five;
	const __m256i m4 = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8((char)0x80), b4 = _mm256_set1_epi8(0x10);
	const __m256i off = _mm256_set1_epi8((char)(hasMin ? 0 : five ? 16 : 8));
	for (int i = 0; i < m; i++)
		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = w + (long)i * rowBytes + (long)b * bs;
			__m128i v = _mm_loadu_si128((const __m128i *)(blk + qoff));
			__m256i qq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4);
			if (five) {
				uint32_t qh;
				memcpy(&qh, blk + 2 + 2 * hasMin, 4);
				qq = _mm256_or_si256(qq, _mm256_maskz_mov_epi8((__mmask32)qh, b4));
			}
			qq = _mm256_sub_epi8(qq, off);
			_mm256_storeu_si256((__m256i *)(q + ((long)i * nb + b) * 32), qq);
			// sum of the signed bytes: the bytes ^ 0x80 summed unsigned, less 32 * 128
			int sum = lane_sum32(_mm256_xor_si256(qq, flip)) - 32 * 128;
			float d = _cvtsh_ss(blk[0] | blk[1] << 8);
			ds[i * nb + b] = d;
			cw[i * nb + b] = 128.0f * d * (float)sum;
			dm[i * nb + b] = hasMin ? -_cvtsh_ss(blk[2] | blk[3] << 8) : 0.0f;
		}
}

// weft_lane_act_block: the columns per activation scale of type's lane
// GEMM: 256 for IQ4_XS, whose llama.cpp kernel takes Q8_K activations,
// 32 for the others (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, IQ4_NL, MXFP4).
int weft_lane_act_block(int type) { return type == 23 ? 256 : 32; }

// weft_lane_legacy: Q4_0, Q4_1, Q5_0 and Q5_1 (lane_unpack_legacy).
static inline int weft_lane_legacy(int type) { return type == 2 || type == 3 || type == 6 || type == 7; }

// weft_lane_ok: whether the lane GEMM handles this weight type and row length.
int weft_lane_ok(int type, int K) {
	return ((type == 8 || weft_lane_legacy(type)) && K % 32 == 0) || ((type == 12 || type == 13 || type == 14) && K % 256 == 0) ||
	       weft_iq4_ok(type, K, 32);
}

// weft_lane_matmul: rows [r0, r1) of y = W x for n tokens (Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, and
// IQ4_NL, IQ4_XS, MXFP4 unpacked by kern_iq4.c); xp
// is weft_lane_prep's packing of x, or NULL to pack here.
int weft_lane_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		       const uint8_t *xp, int n, float *y, long ldy) {
	int nb = K / 32;
	long ps = (long)nb * LANE_BLK;
	if (!xp) {
		uint8_t *buf = (uint8_t *)weft_scratch(0, (weft_lane_prep_bytes(K, n) + 3) / 4);
		if (!buf) return WEFT_ENOMEM;
		weft_lane_prep(x, n, K, weft_lane_act_block(type), buf);
		xp = buf;
	}
	// per LANE_ROWS rows: ds, cw, dm (LANE_ROWS x nb floats each), then
	// the unpacked quants (LANE_ROWS x K bytes) of all types but Q8_0
	float *sc = weft_scratch(1, 3L * LANE_ROWS * nb + (type != 8 ? LANE_ROWS / 4 * (long)K : 0));
	if (!sc) return WEFT_ENOMEM;
	float *ds = sc, *cw = sc + (long)LANE_ROWS * nb, *dm = sc + 2L * LANE_ROWS * nb;
	uint8_t *q = (uint8_t *)(sc + 3L * LANE_ROWS * nb);
	for (int r = r0; r < r1; r += LANE_ROWS) {
		int m = r1 - r < LANE_ROWS ? r1 - r : LANE_ROWS;
		const uint8_t *wr = w + (long)r * rowBytes;
		// The rows after these (within r1) are fetched while these are
		// computed, the prefetches spread over the tiles (lane_panels): with
		// few tokens a tile takes too little time for the hardware
		// prefetcher alone to bring weights from memory (decode of 16
		// sequences of synth-110m in Q8_0, machine A: 665-706 tokens/s
		// without, 827-860 with; BENCHMARKS.md §1b).
		int mn = r1 - (r + m) < LANE_ROWS ? r1 - (r + m) : LANE_ROWS;
		const uint8_t *nx = mn > 0 ? wr + (long)m * rowBytes : 0;
		long nxb = (long)mn * rowBytes;
		if (type == 8) {
			lane_scales_q8(wr, rowBytes, nb, m, ds, cw);
			lane_panels(wr + 2, rowBytes, 34, nb, m, ds, cw, dm, xp, ps, n, y + r, ldy, nx, nxb, 0);
		} else if (type == 12 || type == 13) {
			if (type == 12)
				lane_unpack_q4k(wr, rowBytes, nb, m, q, ds, cw, dm, 0);
			else
				lane_unpack_q4k(wr, rowBytes, nb, m, q, ds, cw, dm, 1);
			lane_panels(q, (long)nb * 32, 32, nb, m, ds, cw, dm, xp, ps, n, y + r, ldy, nx, nxb, 1);
		} else if (weft_lane_legacy(type)) {
			lane_unpack_legacy(type, wr, rowBytes, nb, m, q, ds, cw, dm);
			if (type == 3 || type == 7) // a block min: MODE 1
				lane_panels(q, (long)nb * 32, 32, nb, m, ds, cw, dm, xp, ps, n, y + r, ldy, nx, nxb, 1);
			else
				lane_panels(q, (long)nb * 32, 32, nb, m, ds, cw, dm, xp, ps, n, y + r, ldy, nx, nxb, 0);
		} else if (weft_iq4_ok(type, K, 32)) { // IQ4_NL, IQ4_XS, MXFP4 (kern_iq4.c): unpacked to Q8_0's mode
			weft_iq4_lane_unpack(type, wr, rowBytes, nb, m, q, ds, cw);
			lane_panels(q, (long)nb * 32, 32, nb, m, ds, cw, dm, xp, ps, n, y + r, ldy, nx, nxb, 0);
		} else {
			lane_unpack_q6k(wr, rowBytes, nb, m, q, ds, cw, dm);
			lane_panels(q, (long)nb * 32, 32, nb, m, ds, cw, dm, xp, ps, n, y + r, ldy, nx, nxb, 2);
		}
	}
	return 0;
}

// ---- Q4_K and Q6_K below the lane GEMM: kern_i8.c's kernel, 64 bytes wide ----
// The same arithmetic as i8k_row in kern_i8.c (per-256 activations of
// weft_i8k_prep, vpmaddubsw pair sums scaled with the sub-block's integer
// scale, here by vpdpwssd, one conversion and FMA per super-block), with
// 512-bit integer vectors: one vpmaddubsw covers 64 columns where the AVX2
// kernel needs two. Each 64-column group of Q4_K is one sub-block's low
// nibbles then the next one's high nibbles, read with one 32-byte broadcast
// and a masked shift (as vnni_row does), against 64 contiguous activations.
// Before the float work the upper 8 int32 lanes are added onto the lower 8,
// which gives lane for lane the integers of the AVX2 kernel (lane i holds
// columns 4i..4i+3 of each 32-column half in both), so the float sums, and
// the results, are the same bits on either kernel set.
static inline __attribute__((always_inline)) __m256i k512_fold(__m512i v) {
	return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

static inline __attribute__((always_inline)) void k512_row(const int type, const uint8_t *row, int K, const int8_t *qx,
							    const float *dd, const int16_t *bs, float *out, long ldo, const int NT) {
	const int nsb = K / 256;
	__m256 acc[4];
	for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	// word index 0 in the low 16 words, 1 in the high 16 (vpermw picks a
	// sub-block's scale for each 32-column half)
	const __m512i half = _mm512_mask_blend_epi16(0xffff0000u, _mm512_setzero_si512(), _mm512_set1_epi16(1));
#define K5X(t, col) _mm512_loadu_si512((const void *)(qx + (long)(t) * K + (col)))
#define K5BS(t, sb) _mm256_loadu_si256((const __m256i *)(bs + (long)(t) * (K / 16) + 16 * (sb)))
	if (type == 12) { // Q4_K: 144-byte super-blocks of 256
		for (int sb = 0; sb < nsb; sb++) {
			const uint8_t *blk = row + 144 * sb, *sc = blk + 4, *qs = blk + 16;
			float d = _cvtsh_ss((uint16_t)(blk[0] | blk[1] << 8)), dmin = _cvtsh_ss((uint16_t)(blk[2] | blk[3] << 8));
			__m128i sm = kq_q4k_scales(sc); // bytes s0..s7, m0..m7
			__m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm)); // words s0..s7
			__m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)); // each min twice
			__m512i isum[4];
			for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
			for (int j = 0; j < 4; j++) {
				__m512i qq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * j)));
				__m512i wq = _mm512_and_si512(_mm512_mask_srli_epi16(qq, 0xffff0000u, qq, 4), m4);
				__m512i scl = _mm512_permutexvar_epi16(_mm512_add_epi16(half, _mm512_set1_epi16((short)(2 * j))), s16);
				int col = 256 * sb + 64 * j;
				for (int t = 0; t < NT; t++)
					isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(wq, K5X(t, col)), scl);
			}
			for (int t = 0; t < NT; t++) {
				float dx = dd[(long)t * nsb + sb];
				__m256i mn = _mm256_madd_epi16(K5BS(t, sb), m16);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k512_fold(isum[t])), _mm256_set1_ps(d * dx), acc[t]);
				acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mn), _mm256_set1_ps(dmin * dx), acc[t]);
			}
		}
	} else { // Q6_K: 210-byte super-blocks: ql[128], qh[64], 16 int8 scales, f16 d
		const __m512i m2 = _mm512_set1_epi8(0x03);
		for (int sb = 0; sb < nsb; sb++) {
			const uint8_t *blk = row + 210 * sb;
			float d = _cvtsh_ss((uint16_t)(blk[208] | blk[209] << 8));
			__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
			__m512i sc512 = _mm512_castsi256_si512(sc16);
			__m512i isum[4];
			__m256i off[4];
			// the -32 offset: 32 * sum_j scale_j * (sum of q over the 16 columns j)
			for (int t = 0; t < NT; t++) {
				isum[t] = _mm512_setzero_si512();
				off[t] = _mm256_slli_epi32(_mm256_madd_epi16(K5BS(t, sb), sc16), 5);
			}
			for (int h = 0; h < 2; h++) {
				const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
				__m512i L = _mm512_loadu_si512((const void *)ql);
				__m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
				for (int g2 = 0; g2 < 2; g2++) {
					// columns 32g..32g+31 (low half) and 32(g+1).. (high half), g = 2*g2:
					// low nibbles of ql[0..32) / ql[32..64) for g = 0, high nibbles for g = 2,
					// with qh's bits 2g, 2g+1 (low half) and 2g+2, 2g+3 (high half)
					__m512i lo = g2 == 0 ? _mm512_and_si512(L, m4) : _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
					__m512i hg = _mm512_srli_epi16(H, 4 * g2);
					__m512i hsh = _mm512_mask_srli_epi16(hg, 0xffff0000u, hg, 2);
					__m512i q = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(hsh, m2), 4));
					// sub-blocks of 16: columns 32g..+15, +16..+31 in the low half (scales
					// 8h+2g, 8h+2g+1), the same for g+1 in the high half
					__m512i idx = _mm512_add_epi16(
						_mm512_set1_epi16((short)(8 * h + 4 * g2)),
						_mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
								 0, 0, 0, 0, 0, 0));
					__m512i scl = _mm512_permutexvar_epi16(idx, sc512);
					int col = 256 * sb + 128 * h + 64 * g2;
					for (int t = 0; t < NT; t++)
						isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(q, K5X(t, col)), scl);
				}
			}
			for (int t = 0; t < NT; t++)
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(k512_fold(isum[t]), off[t])),
							 _mm256_set1_ps(d * dd[(long)t * nsb + sb]), acc[t]);
		}
	}
#undef K5X
#undef K5BS
	for (int t = 0; t < NT; t++) out[t * ldo] = kq_hsum(acc[t]);
}

// The pair kernels: k512_row for two rows (row and row + rowBytes) and NT
// (1..8) tokens, with 512-bit float work: row 0's eight float lanes in
// the low half of each vector and row 1's in the high half, so that every
// lane sees the operations of k512_row's 256-bit lane, in the same order
// (the same bits), at half the instructions per row. A super-block's
// quants are unpacked once for all NT tokens. The integer sums differ from
// k512_row's in their path only: one vpdpbusd per 64-column step gives
// each lane's sum of 4 products (at most 4 * 63 * 128 in magnitude, so 16
// bits hold it), the lanes of two steps are paired as words, and one
// vpdpwssd scales both with their sub-block scales and adds them; the
// lane's integer is k512_row's (vpmaddubsw then vpdpwssd per step). On
// Zen 4 every 512-bit multiply (vpmaddubsw, vpdpwssd, vpdpbusd, FMA) takes
// the one multiply slot a cycle, so this spends 3 of them per two steps
// and row where k512_row's order spends 4. The sub-block scales reach the
// pairs through an in-lane shuffle of a table built once per super-block.
// Decode of 8 sequences of the 1B preset in Q4_K_M on machine D: 121-134
// tokens/s against 104-109 with k512_row's order, four tokens a pass
// (BENCHMARKS.md §1b).

// k512_pair_fold: k512_fold of each row of a pair, row 0's integer sums
// in i0 and row 1's in i1: row 0's eight folded lanes in the low half,
// row 1's in the high half.
static inline __attribute__((always_inline)) __m512i k512_pair_fold(__m512i i0, __m512i i1) {
	return _mm512_add_epi32(_mm512_shuffle_i64x2(i0, i1, 0x44), _mm512_shuffle_i64x2(i0, i1, 0xee));
}

// k512_pair_store: each token's two results, row 0's lanes summed as
// k512_row sums its eight, then row 1's.
static inline __attribute__((always_inline)) void k512_pair_store(const __m512 *acc, float *out, long ldo, const int NT) {
	for (int t = 0; t < NT; t++) {
		out[t * ldo] = kq_hsum(_mm512_castps512_ps256(acc[t]));
		out[t * ldo + 1] = kq_hsum(_mm512_extractf32x8_ps(acc[t], 1));
	}
}

#define K5P_X(t, col) _mm512_loadu_si512((const void *)(qx + (long)(t) * K + (col)))
#define K5P_BS(t, sb) _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(bs + (long)(t) * (K / 16) + 16 * (sb))))

// k512_q4k_pair: Q4_K. The mins' term, m_i times the sum of sub-block i's
// 32 quantized activations, is one vpmaddwd of the token's 16-column sums
// against both rows' mins, each twice (k512_row's, 512 bits wide).
static inline __attribute__((always_inline)) void k512_q4k_pair(const uint8_t *row, long rowBytes, int K, const int8_t *qx,
								 const float *dd, const int16_t *bs, float *out, long ldo,
								 const uint8_t *pf, const int NT) {
	const int nsb = K / 256;
	const long pb = 2 * rowBytes / nsb; // bytes of pf per super-block
	__m512 acc[8];
	for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
	const __m512i m4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
	const __m512i dsel = _mm512_mask_blend_epi32(0xff00, _mm512_setzero_si512(), _mm512_set1_epi32(2));
	const __m512i msel = _mm512_add_epi32(dsel, _mm512_set1_epi32(1));
	// byte indices of scale words (s0, s2) in the low half and (s1, s3) in
	// the high half of each 32-bit lane, and of (s4, s6), (s5, s7)
	const __m512i ix01 = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(0x05040100), _mm512_set1_epi32(0x07060302));
	const __m512i ix23 = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(0x0d0c0908), _mm512_set1_epi32(0x0f0e0b0a));
	const uint8_t *row1 = row + rowBytes;
	for (int sb = 0; sb < nsb; sb++) {
		if (pf) // the pair four rows ahead, spread over this pair's super-blocks, into L2 (KQ_FOR_PAIRS)
			for (long o = ((long)sb * pb) & ~63L; o < (long)(sb + 1) * pb; o += 64) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
		const uint8_t *b0 = row + 144 * sb, *b1 = row1 + 144 * sb;
		uint32_t h0, h1;
		memcpy(&h0, b0, 4);
		memcpy(&h1, b1, 4);
		// d0, dmin0, d1, dmin1
		const __m128 dm = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)h1 << 32 | h0)));
		uint64_t s0, m0, s1, m1;
		k512_q4k_scales64(b0 + 4, &s0, &m0);
		k512_q4k_scales64(b1 + 4, &s1, &m1);
		// each row's scale words s0..s7 in every 128-bit lane
		const __m512i swz = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_set_epi64x((long long)s1, (long long)s0)));
		const __m512i t0 = _mm512_shuffle_i32x4(swz, swz, 0x00), t1 = _mm512_shuffle_i32x4(swz, swz, 0x55);
		const __m512i c0a = _mm512_shuffle_epi8(t0, ix01), c0b = _mm512_shuffle_epi8(t0, ix23);
		const __m512i c1a = _mm512_shuffle_epi8(t1, ix01), c1b = _mm512_shuffle_epi8(t1, ix23);
		// each min twice as words, row 0's in the low half, row 1's in the high
		const __m128i m0b = _mm_cvtsi64_si128((long long)m0), m1b = _mm_cvtsi64_si128((long long)m1);
		const __m512i mins = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpacklo_epi8(m1b, m1b), _mm_unpacklo_epi8(m0b, m0b)));
		// step j (columns 64j..64j+63): sub-block 2j's low nibbles in the low half, 2j+1's high nibbles in the high
		__m512i q0[4], q1[4];
		for (int j = 0; j < 4; j++) {
			q0[j] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b0 + 16 + 32 * j)));
			q1[j] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b1 + 16 + 32 * j)));
			q0[j] = _mm512_and_si512(_mm512_mask_srli_epi16(q0[j], 0xffff0000u, q0[j], 4), m4);
			q1[j] = _mm512_and_si512(_mm512_mask_srli_epi16(q1[j], 0xffff0000u, q1[j], 4), m4);
		}
		for (int t = 0; t < NT; t++) {
			const int8_t *xt = qx + (long)t * K + 256 * sb;
			__m512i i0 = zero, i1 = zero;
			for (int jp = 0; jp < 2; jp++) {
				// steps 2jp and 2jp+1: each lane's 4-column sums (at most 4 * 15 * 128 in magnitude: 16 bits),
				// paired as words and scaled and added by one vpdpwssd per row
				const __m512i xa = _mm512_loadu_si512((const void *)(xt + 128 * jp));
				const __m512i xb = _mm512_loadu_si512((const void *)(xt + 128 * jp + 64));
				const __m512i a0 = _mm512_dpbusd_epi32(zero, q0[2 * jp], xa), e0 = _mm512_dpbusd_epi32(zero, q0[2 * jp + 1], xb);
				const __m512i a1 = _mm512_dpbusd_epi32(zero, q1[2 * jp], xa), e1 = _mm512_dpbusd_epi32(zero, q1[2 * jp + 1], xb);
				const __m512i w0 = _mm512_mask_blend_epi16(0xaaaaaaaau, a0, _mm512_slli_epi32(e0, 16));
				const __m512i w1 = _mm512_mask_blend_epi16(0xaaaaaaaau, a1, _mm512_slli_epi32(e1, 16));
				i0 = _mm512_dpwssd_epi32(i0, w0, jp ? c0b : c0a);
				i1 = _mm512_dpwssd_epi32(i1, w1, jp ? c1b : c1a);
			}
			// d * dx and dmin * dx, each spread over its row's lanes
			const __m512 dmz = _mm512_castps128_ps512(_mm_mul_ps(dm, _mm_set1_ps(dd[(long)t * nsb + sb])));
			const __m512i mn = _mm512_madd_epi16(K5P_BS(t, sb), mins);
			const __m512i f = k512_pair_fold(i0, i1);
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(f), _mm512_permutexvar_ps(dsel, dmz), acc[t]);
			acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mn), _mm512_permutexvar_ps(msel, dmz), acc[t]);
		}
	}
	k512_pair_store(acc, out, ldo, NT);
}

// k512_q6k_pair: Q6_K. One vpermw per super-block gathers both rows' 16
// scales so that 128-bit lane k holds those of the 16-column groups k,
// k+4, k+8, k+12 (row 0 in words 0-3, row 1 in words 4-7), which is what
// lane k of each 64-column step needs; dword h of it pairs the scales of
// steps (h, 0) and (h, 1). The 6-bit quants are put together with one
// shift of the high bits (variable per half) and one three-way logic
// operation.
static inline __attribute__((always_inline)) void k512_q6k_pair(const uint8_t *row, long rowBytes, int K, const int8_t *qx,
								 const float *dd, const int16_t *bs, float *out, long ldo,
								 const uint8_t *pf, const int NT) {
	const int nsb = K / 256;
	const long pb = 2 * rowBytes / nsb; // bytes of pf per super-block
	__m512 acc[8];
	for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
	const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), zero = _mm512_setzero_si512();
	// the high bits' shifts for the first 64-column step of each half: left 4 in columns 0-31, left 2 in 32-63
	const __m512i sh0 = _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
	const __m512i gidx = _mm512_set_epi16(31, 27, 23, 19, 15, 11, 7, 3, 30, 26, 22, 18, 14, 10, 6, 2, 29, 25, 21, 17, 13, 9,
					      5, 1, 28, 24, 20, 16, 12, 8, 4, 0);
	const __m512i dsel = _mm512_mask_blend_epi32(0xff00, _mm512_setzero_si512(), _mm512_set1_epi32(1));
	const uint8_t *row1 = row + rowBytes;
	for (int sb = 0; sb < nsb; sb++) {
		if (pf) // the pair four rows ahead, spread over this pair's super-blocks, into L2 (KQ_FOR_PAIRS)
			for (long o = ((long)sb * pb) & ~63L; o < (long)(sb + 1) * pb; o += 64) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
		const uint8_t *b0 = row + 210 * sb, *b1 = row1 + 210 * sb;
		// row 0's 16 scales as words 0-15, row 1's as 16-31
		const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu2_m128i((const __m128i *)(b1 + 192), (const __m128i *)(b0 + 192)));
		const __m512i tab = _mm512_permutexvar_epi16(gidx, sc);
		uint16_t h0, h1;
		memcpy(&h0, b0 + 208, 2);
		memcpy(&h1, b1 + 208, 2);
		const __m128 d2 = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h1 << 16 | h0))); // d0, d1
		// the scale words of steps (h, 0) and (h, 1) as one 32-bit lane: dword h (row 0) and 2 + h (row 1)
		// of each 128-bit lane of the table
		const __m512i c0[2] = {_mm512_shuffle_epi32(tab, 0x00), _mm512_shuffle_epi32(tab, 0x55)};
		const __m512i c1[2] = {_mm512_shuffle_epi32(tab, 0xaa), _mm512_shuffle_epi32(tab, 0xff)};
		__m512i q0[2][2], q1[2][2];
		for (int h = 0; h < 2; h++) {
			const __m512i L0 = _mm512_loadu_si512((const void *)(b0 + 64 * h)), L1 = _mm512_loadu_si512((const void *)(b1 + 64 * h));
			const __m512i H0 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b0 + 128 + 32 * h)));
			const __m512i H1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b1 + 128 + 32 * h)));
			for (int g2 = 0; g2 < 2; g2++) {
				// columns 128h + 64g2 .. +63, as k512_row takes them
				__m512i lo0 = g2 == 0 ? _mm512_and_si512(L0, m4) : _mm512_and_si512(_mm512_srli_epi16(L0, 4), m4);
				__m512i lo1 = g2 == 0 ? _mm512_and_si512(L1, m4) : _mm512_and_si512(_mm512_srli_epi16(L1, 4), m4);
				// each column's two qh bits moved to bits 4-5
				__m512i s0 = g2 == 0 ? _mm512_sllv_epi16(H0, sh0) : _mm512_mask_srli_epi16(H0, 0xffff0000u, H0, 2);
				__m512i s1 = g2 == 0 ? _mm512_sllv_epi16(H1, sh0) : _mm512_mask_srli_epi16(H1, 0xffff0000u, H1, 2);
				q0[h][g2] = _mm512_ternarylogic_epi32(lo0, s0, m30, 0xf8); // lo | (s & 0x30)
				q1[h][g2] = _mm512_ternarylogic_epi32(lo1, s1, m30, 0xf8);
			}
		}
		for (int t = 0; t < NT; t++) {
			const int8_t *xt = qx + (long)t * K + 256 * sb;
			__m512i i0 = zero, i1 = zero;
			for (int h = 0; h < 2; h++) {
				// each lane's 4-column sums (at most 4 * 63 * 128 in magnitude: 16 bits), paired as words
				const __m512i xa = _mm512_loadu_si512((const void *)(xt + 128 * h));
				const __m512i xb = _mm512_loadu_si512((const void *)(xt + 128 * h + 64));
				const __m512i a0 = _mm512_dpbusd_epi32(zero, q0[h][0], xa), e0 = _mm512_dpbusd_epi32(zero, q0[h][1], xb);
				const __m512i a1 = _mm512_dpbusd_epi32(zero, q1[h][0], xa), e1 = _mm512_dpbusd_epi32(zero, q1[h][1], xb);
				i0 = _mm512_dpwssd_epi32(i0, _mm512_mask_blend_epi16(0xaaaaaaaau, a0, _mm512_slli_epi32(e0, 16)), c0[h]);
				i1 = _mm512_dpwssd_epi32(i1, _mm512_mask_blend_epi16(0xaaaaaaaau, a1, _mm512_slli_epi32(e1, 16)), c1[h]);
			}
			// the -32 offset: 32 * sum_j scale_j * (sum of q over the 16 columns j), row 0 then row 1
			const __m512i off = _mm512_slli_epi32(_mm512_madd_epi16(K5P_BS(t, sb), sc), 5);
			const __m512i f = k512_pair_fold(i0, i1);
			const __m128 dx2 = _mm_mul_ps(d2, _mm_set1_ps(dd[(long)t * nsb + sb])); // d0 * dx, d1 * dx
			const __m512 dv = _mm512_permutexvar_ps(dsel, _mm512_castps128_ps512(dx2));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(f, off)), dv, acc[t]);
		}
	}
	k512_pair_store(acc, out, ldo, NT);
}
#undef K5P_X
#undef K5P_BS

// K5_FOR_TOKENS runs F(NT) for tokens t..t+NT-1 of n, eight at a time,
// then the rest at once: KQ_FOR_TOKENS for the pair kernels, which keep
// eight tokens' float sums beside a super-block's unpacked quants.
#define K5_FOR_TOKENS(F)                                                                                                 \
	{                                                                                                                \
		int t = 0;                                                                                               \
		for (; t + 8 <= n; t += 8) F(8);                                                                         \
		switch (n - t) {                                                                                         \
		case 1: F(1); break;                                                                                     \
		case 2: F(2); break;                                                                                     \
		case 3: F(3); break;                                                                                     \
		case 4: F(4); break;                                                                                     \
		case 5: F(5); break;                                                                                     \
		case 6: F(6); break;                                                                                     \
		case 7: F(7); break;                                                                                     \
		}                                                                                                        \
	}

// KQ_FOR_PAIRS runs PAIR(NT) for the row pairs of [r0, r1) and ROW(NT) for
// a last odd row, for tokens t..t+NT-1, eight (ROW: four) tokens at a time, fetching
// the next pair while this one is computed, as KQ_FOR_ROWS does: all of it
// as the pair starts, or on Zen 4 and 5 (weft_kq_spread_fetch) the pair four rows
// ahead, spread over the first token group's pass (pf), into L2
// (prefetcht1): with prefetcht0 the L1's few outstanding misses held one
// token's Q6_K rows from memory to about 20 GB/s on two threads, with
// prefetcht1 27-28 (machine D, matrices of the 1B preset's shapes, 24 of
// them in turn; Q4_K, bound by its arithmetic there, was level; BENCHMARKS.md
// §1, what bounds the CPU runtime).
#define KQ_FOR_PAIRS(PAIR, ROW)                                                                                          \
	do {                                                                                                             \
		const int spread = weft_kq_spread_fetch();                                                               \
		int r = r0;                                                                                              \
		for (; r + 2 <= r1; r += 2) {                                                                            \
			const uint8_t *row = w + (long)r * rowBytes;                                                     \
			const uint8_t *pf = spread && r + 6 <= r1 ? row + 4 * rowBytes : 0;                              \
			if (!spread && r + 2 < r1) kq_prefetch(row + 2 * rowBytes, (r + 4 <= r1 ? 2 : 1) * rowBytes);   \
			K5_FOR_TOKENS(PAIR)                                                                              \
		}                                                                                                        \
		if (r < r1) {                                                                                            \
			const uint8_t *row = w + (long)r * rowBytes;                                                     \
			KQ_FOR_TOKENS(ROW)                                                                               \
		}                                                                                                        \
	} while (0)

// weft_k512_matmul: rows [r0, r1) of a Q4_K or Q6_K product for n tokens
// (fewer than WEFT_LANE_MIN_N_KQUANT) on weft_i8k_prep's activations (prep), or
// NULL to quantize here; rows walked as kern_i8.c walks them (KQ_FOR_ROWS).
int weft_k512_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		     const uint8_t *prep, int n, float *y, long ldy) {
	if ((type != 12 && type != 14 && type != 23) || K % 256 != 0) return WEFT_EUNSUPPORTED;
	if (!prep) {
		uint8_t *scr = (uint8_t *)weft_scratch(0, (weft_i8k_prep_bytes(K, n) + 3) / 4);
		if (!scr) return WEFT_ENOMEM;
		weft_i8k_prep(x, n, K, scr);
		prep = scr;
	}
	const int nsb = K / 256, nbs = K / 16;
	const int8_t *qx = (const int8_t *)prep;
	const float *dd = (const float *)(prep + (long)n * K);
	if (type == 23) return weft_iq4xs_i8k_matmul(w, rowBytes, K, r0, r1, qx, dd, n, y, ldy); // kern_iq4.c, AVX2
	const int16_t *bs = (const int16_t *)(dd + (long)n * nsb);
#define K5_ROW12(NT) k512_row(12, row, K, qx + (long)t * K, dd + (long)t * nsb, bs + (long)t * nbs, y + t * ldy + r, ldy, NT)
#define K5_ROW14(NT) k512_row(14, row, K, qx + (long)t * K, dd + (long)t * nsb, bs + (long)t * nbs, y + t * ldy + r, ldy, NT)
#define K5_PAIR12(NT) k512_q4k_pair(row, rowBytes, K, qx + (long)t * K, dd + (long)t * nsb, bs + (long)t * nbs, y + t * ldy + r, ldy, t ? 0 : pf, NT)
#define K5_PAIR14(NT) k512_q6k_pair(row, rowBytes, K, qx + (long)t * K, dd + (long)t * nsb, bs + (long)t * nbs, y + t * ldy + r, ldy, t ? 0 : pf, NT)
	if (type == 12)
		KQ_FOR_PAIRS(K5_PAIR12, K5_ROW12);
	else
		KQ_FOR_PAIRS(K5_PAIR14, K5_ROW14);
#undef K5_PAIR12
#undef K5_PAIR14
#undef K5_ROW12
#undef K5_ROW14
	return 0;
}
#endif
