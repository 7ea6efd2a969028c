// body_attn.h: a fragment, not a header: single-query attention over a
// paged KV cache for one instruction set. kern_gen.c, kern_avx2.c and
// kern_avx512.c each include it once, like body_matmul.h, with SFX and VW
// defined (and HAVE_F16C where the target has F16C); it defines the
// watt_*SFX entry points kernels.h declares, everything else static.
//
// One call serves the nq query vectors of one KV head (a GQA group) at one
// position, over the cached positions lo..n-1 (lo > 0: a sliding window;
// rows below lo are never read): the scores q·K[p] read K in place (F16 converted in registers),
// the softmax repeats ggml's order (scale, max, exp(x-max), float64 sum,
// multiply by float32(1/sum), F16 rounding for an F16 cache), and the
// output sum_p w[p]*V[p] reads V in place. Position p's row starts at
// element blocks[p/bs]*stride + off + (p%bs)*hd of K and of V.
//
// WH names the cache's element type: 0 float32, 1 float16, 2 Q8_0. For
// Q8_0 the K and V arguments point at a watt_q8 (kernels.h): int8 elements
// at the same element offsets, and one float32 scale per 32 elements
// (element i's is d[i/32]; rows start at multiples of 32, hd % 32 == 0),
// multiplied in as each vector is converted, so a row reads as exactly the
// floats it dequantizes to. Neither the queries nor the softmax weights are
// rounded for it (as for float32), except where kern_attq8.c includes this
// file with WATT_VNNI: there the K scores are int8 dot products against
// the queries quantized per 32 (aq8prep).

#define WCAT_(a, b) a##b
#define WCAT(a, b) WCAT_(a, b)
#define AF(name) WCAT(name, SFX)
#define AI inline __attribute__((always_inline))
#define WAPI(name) WCAT(watt_, AF(name))

typedef float AF(avf) __attribute__((vector_size(VW * 4)));
typedef float AF(avfu) __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int AF(avi) __attribute__((vector_size(VW * 4)));

static AI AF(avf) AF(ald)(const float *p) {
	return *(const AF(avfu) *)p;
}

static AI void AF(ast)(float *p, AF(avf) x) {
	memcpy(p, &x, sizeof x);
}

typedef int8_t AF(avb) __attribute__((vector_size(VW)));

// AES is the bytes of one element of the cache type WH.
#define AES(WH) ((WH) == 1 ? 2 : (WH) == 2 ? 1 : 4)

// adata is the element array of a K or V argument: the int8 elements of a
// Q8_0 cache, else the argument itself.
static AI const char *AF(adata)(const void *base, const int WH) {
	return WH == 2 ? (const char *)((const watt_q8 *)base)->q : (const char *)base;
}

// akv loads VW elements of a K/V row at element i: float32, float16
// converted in registers (WH 1), or int8 converted and scaled (WH 2).
static AI AF(avf) AF(akv)(const void *base, long i, const int WH) {
	if (WH == 2) {
		const watt_q8 *c = (const watt_q8 *)base;
#if defined(HAVE_F16C) && VW == 16
		const AF(avf) x = (AF(avf))_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(c->q + i))));
#elif defined(HAVE_F16C)
		const AF(avf) x = (AF(avf))_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(c->q + i))));
#else
		AF(avb) b; // (GCC converts int8 vectors to float lane by lane anyway)
		memcpy(&b, c->q + i, sizeof b);
		const AF(avf) x = __builtin_convertvector(__builtin_convertvector(b, AF(avi)), AF(avf));
#endif
		return x * c->d[i >> 5];
	}
	if (WH) {
#if defined(HAVE_F16C) && VW == 16
		return (AF(avf))_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
#elif defined(HAVE_F16C)
		return (AF(avf))_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
#else
		float a[VW];
		for (int j = 0; j < VW; j++) a[j] = weft_f16_to_f32(((const uint16_t *)base)[i + j]);
		return AF(ald)(a);
#endif
	}
	return AF(ald)((const float *)base + i);
}

static AI float AF(aat)(const void *base, long i, const int WH) {
	if (WH == 2) return ((const watt_q8 *)base)->q[i] * ((const watt_q8 *)base)->d[i >> 5];
	return WH ? weft_f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

static AI float AF(ahsum)(AF(avf) v) {
	float a[VW];
	memcpy(a, &v, sizeof a);
#if VW >= 8
#if VW == 16
	for (int i = 0; i < 8; i++) a[i] += a[i + 8];
#endif
	for (int i = 0; i < 4; i++) a[i] += a[i + 4];
#endif
	return (a[0] + a[2]) + (a[1] + a[3]);
}

// asel: lanes of a where m is all ones, else of b.
static AI AF(avf) AF(asel)(AF(avi) m, AF(avf) a, AF(avf) b) {
	AF(avi) ia, ib;
	memcpy(&ia, &a, sizeof ia);
	memcpy(&ib, &b, sizeof ib);
	ia = (ia & m) | (ib & ~m);
	memcpy(&a, &ia, sizeof a);
	return a;
}

// ahmax: the largest lane of v, or NaN when a lane is NaN: what a scan of
// the lanes keeping the larger (or the NaN) gives, in a butterfly of
// shuffles rather than a branch per lane (data-dependent branches there
// mispredicted once per tile and emptied the pipeline of its loads).
// Between a +0 and a -0 it may keep either: the callers only subtract it
// and exponentiate, where the two are the same.
static AI AF(avf) AF(amaxv)(AF(avf) a, AF(avf) b) {
	return AF(asel)((a > b) | (a != a), a, b);
}
static AI float AF(ahmax)(AF(avf) v) {
#if VW == 16
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}));
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11}));
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13}));
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}));
#elif VW == 8
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){4, 5, 6, 7, 0, 1, 2, 3}));
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){2, 3, 0, 1, 6, 7, 4, 5}));
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){1, 0, 3, 2, 5, 4, 7, 6}));
#else
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){2, 3, 0, 1}));
	v = AF(amaxv)(v, __builtin_shuffle(v, (AF(avi)){1, 0, 3, 2}));
#endif
	return v[0];
}

// aexp: e^x per lane, the same approximation as Exps' C kernels (vec.go)
// (body_exp.h).
#define EXP_VF AF(avf)
#define EXP_VI AF(avi)
#define EXP_SEL AF(asel)
#define EXP_NAME AF(aexp)
#if defined(HAVE_F16C) && VW == 16
#define EXP_CLAMP(x, lo, hi) ((AF(avf))_mm512_min_ps((__m512)(hi), _mm512_max_ps((__m512)(lo), (__m512)(x))))
#elif defined(HAVE_F16C)
#define EXP_CLAMP(x, lo, hi) ((AF(avf))_mm256_min_ps((__m256)(hi), _mm256_max_ps((__m256)(lo), (__m256)(x))))
#endif
#include "body_exp.h"
#undef EXP_CLAMP
#undef EXP_VF
#undef EXP_VI
#undef EXP_SEL
#undef EXP_NAME

// around: x rounded to F16 (nearest even) and back, n floats.
static AI void AF(around)(float *dst, const float *src, long n) {
	long i = 0;
#if defined(HAVE_F16C) && VW == 16
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
#elif defined(HAVE_F16C)
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
#endif
	for (; i < n; i++) dst[i] = weft_f16_to_f32(weft_f32_to_f16(src[i]));
}

// ared: lane r of the result is the sum of the lanes of a[r], r < VW (a
// butterfly of shuffles: each step halves the vectors and the lanes per row;
// a is overwritten).
#if VW == 16
#define WATT_M8 {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}
#define WATT_M4 {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27}
#define WATT_M2 {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29}
#define WATT_M1 {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
#elif VW == 8
#define WATT_M4 {0, 1, 2, 3, 8, 9, 10, 11}
#define WATT_M2 {0, 1, 4, 5, 8, 9, 12, 13}
#define WATT_M1 {0, 2, 4, 6, 8, 10, 12, 14}
#else
#define WATT_M2 {0, 1, 4, 5}
#define WATT_M1 {0, 2, 4, 6}
#endif
#define WATT_STEP(M, H, CNT)                                                                               \
	do {                                                                                                \
		const AF(avi) lo = M, hi = lo + (H);                                                        \
		for (int i = 0; i < (CNT); i++)                                                             \
			a[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], lo) +                              \
			       __builtin_shuffle(a[2 * i], a[2 * i + 1], hi);                               \
	} while (0)
static AI AF(avf) AF(ared)(AF(avf) *a) {
#if VW == 16
	WATT_STEP(WATT_M8, 8, 8);
	WATT_STEP(WATT_M4, 4, 4);
#elif VW == 8
	WATT_STEP(WATT_M4, 4, 4);
#endif
	WATT_STEP(WATT_M2, 2, 2);
	WATT_STEP(WATT_M1, 1, 1);
	return a[0];
}
#undef WATT_STEP
#undef WATT_M8
#undef WATT_M4
#undef WATT_M2
#undef WATT_M1

// Prefetching: the blocks are scattered through the pool, where the
// hardware prefetcher cannot follow, so the kernels fetch the rows of the
// block WATT_PFB blocks ahead (at least one) while they compute a block,
// spread through the loops that read it (one line per few vector loads: a
// burst of prefetches for a whole block fills the core's miss queue and
// stalls the loads behind it). apfb is the start of block b's rows of this
// group (and how many bytes of them lie below position n), or NULL when
// the block starts at or past n.
#define WATT_PFB(bs) ((bs) >= 32 ? 1 : 32 / (bs))
// WATT_PFBW: a Q8_0 row has half an F16 row's bytes, so its rows are
// fetched twice as many blocks ahead (the same bytes in flight; one block
// ahead read 23-24 GB/s where two read 29 in two rounds of
// AttendLayer/layersq8/nq=1; four and eight were within this host's noise).
#define WATT_PFBW(bs, WH) ((WH) == 2 ? 2 * WATT_PFB(bs) : WATT_PFB(bs))
static AI const char *AF(apfb)(const void *kv, const int32_t *blocks, long b, long bs, long stride, long off, int hd,
			       int n, long *bytes, const int WH) {
	const long left = n - b * bs, es = AES(WH);
	if (left <= 0) return 0;
	*bytes = (left < bs ? left : bs) * hd * es;
	const long e0 = (long)blocks[b] * stride + off;
	if (WH == 2) { // the block's scales (a line or two), at once
		const char *d = (const char *)(((const watt_q8 *)kv)->d + (e0 >> 5));
		for (long o = 0; o < *bytes / 8; o += 64) __builtin_prefetch(d + o);
	}
	return AF(adata)(kv, WH) + e0 * es;
}

// apfr prefetches bytes [o0, o1) of a block's rows (p: apfb's start; none
// when p is NULL), clipped to its len bytes.
static AI void AF(apfr)(const char *p, long o0, long o1, long len) {
	if (!p) return;
	if (o1 > len) o1 = len;
	for (long o = o0; o < o1; o += 64) __builtin_prefetch(p + o);
}

// agrp: s[j*m + r] = q_j · K[row r] for the NQ queries q + j*hd (NQ = 1,
// 2 or 4) and the VW rows at element ro of k, one after another (hd % VW ==
// 0). Each row's elements are converted once for all the queries: the rows
// go in NQ sets of R = VW/NQ, whose R x NQ accumulators (query j, row r in
// accumulator j*R + r) ared reduces together, so that query j's R scores
// are R lanes in a row. Every score is summed in the same order whatever
// NQ is (ared's tree is the same for every accumulator). While it reads the
// rows it prefetches the bytes of the same rows pb (apfb: NULL for none,
// len bytes of it) holds.
static AI void AF(agrp)(float *s, long m, const float *q, const void *k, long ro, int hd, const char *pb, long pbo,
			long len, const int NQ, const int WH) {
	const int R = VW / NQ;
	const long es = AES(WH), step = (long)R * VW * es, rb = (long)R * hd * es;
	for (int r0 = 0; r0 < VW; r0 += R) {
		AF(avf) a[VW];
#pragma GCC unroll 16
		for (int i = 0; i < VW; i++) a[i] = (AF(avf)){0};
		const long rr = ro + (long)r0 * hd, po = pbo + (long)(r0 / R) * rb;
		for (int c = 0; c < hd; c += VW) {
			const long o = po + (long)c * R * es;
			AF(apfr)(pb, o, o + step, len);
			AF(avf) qc[4];
#pragma GCC unroll 4
			for (int j = 0; j < NQ; j++) qc[j] = AF(ald)(q + (long)j * hd + c);
#pragma GCC unroll 16
			for (int r = 0; r < R; r++) {
				const AF(avf) kr = AF(akv)(k, rr + (long)r * hd + c, WH);
#pragma GCC unroll 4
				for (int j = 0; j < NQ; j++) a[j * R + r] += kr * qc[j];
			}
		}
		float t[VW];
		AF(ast)(t, AF(ared)(a));
#pragma GCC unroll 4
		for (int j = 0; j < NQ; j++) memcpy(s + j * m + r0, t + j * R, (size_t)R * 4);
	}
}

// agrpd: agrp with the common head dims as constants for a group of
// queries, so that the rows' offsets are displacements of one address
// rather than pointers the compiler keeps in registers and on the stack.
// One query keeps hd a variable: unrolled whole, its 16 rows ran slower
// (AttendLayer/layers, nq=1).
static AI void AF(agrpd)(float *s, long m, const float *q, const void *k, long ro, int hd, const char *pb, long pbo,
			 long len, const int NQ, const int WH) {
	if (NQ == 1) {
		AF(agrp)(s, m, q, k, ro, hd, pb, pbo, len, NQ, WH);
		return;
	}
	switch (hd) {
	case 64: AF(agrp)(s, m, q, k, ro, 64, pb, pbo, len, NQ, WH); break;
	case 128: AF(agrp)(s, m, q, k, ro, 128, pb, pbo, len, NQ, WH); break;
	case 256: AF(agrp)(s, m, q, k, ro, 256, pb, pbo, len, NQ, WH); break;
	default: AF(agrp)(s, m, q, k, ro, hd, pb, pbo, len, NQ, WH);
	}
}

// ascoresv: s[j*m + p-lo] = q_j · K[p] for the NQ queries q + j*hd (NQ = 1,
// 2 or 4) and lo <= p < n, VW rows at a time (agrp where the rows are one
// run of one block; else one accumulator per row and query, reduced
// together by ared). Needs hv >= VW. It prefetches the K rows WATT_PFB
// blocks ahead, up to position pn (0 for none: the queries after the first
// group that share the rows).
static AI void AF(ascoresv)(float *s, long m, const float *q, const void *k, const int32_t *blocks, long bs,
			    long stride, long off, int hd, int hv, int lo, int n, int pn, const int NQ, const int WH) {
	const long pfb = WATT_PFBW(bs, WH), es = AES(WH);
	const char *pb = 0;
	long len = 0, pbk = -1;
	for (int p0 = lo; p0 < n; p0 += VW) {
		const int cnt = n - p0 < VW ? n - p0 : VW;
		long blk = p0 / bs, slot = p0 % bs;
		if (blk != pbk) {
			pbk = blk;
			pb = AF(apfb)(k, blocks, blk + pfb, bs, stride, off, hd, pn, &len, WH);
		}
		if (cnt == VW && hv == hd && slot + VW <= bs) { // the group's rows are one run of one block
			AF(agrpd)(s + p0 - lo, m, q, k, (long)blocks[blk] * stride + off + slot * hd, hd, pb, slot * hd * es,
				  len, NQ, WH);
			continue;
		}
		AF(apfr)(pb, slot * hd * es, (slot + cnt) * hd * es, len);
		long ro[VW];
		for (int r = 0; r < VW; r++) { // rows past n repeat the last one
			ro[r] = (long)blocks[blk] * stride + off + slot * hd;
			if (r + 1 < cnt && ++slot == bs) {
				slot = 0;
				blk++;
			}
		}
		for (int j = 0; j < NQ; j++) {
			const float *qj = q + (long)j * hd;
			AF(avf) a[VW];
#pragma GCC unroll 16
			for (int r = 0; r < VW; r++) a[r] = (AF(avf)){0};
			for (int c = 0; c < hv; c += VW) {
				const AF(avf) qc = AF(ald)(qj + c);
#pragma GCC unroll 16
				for (int r = 0; r < VW; r++) a[r] += AF(akv)(k, ro[r] + c, WH) * qc;
			}
			float sv[VW];
			AF(ast)(sv, AF(ared)(a));
			for (int r = 0; r < cnt; r++) {
				float x = sv[r];
				for (int c = hv; c < hd; c++) x += AF(aat)(k, ro[r] + c, WH) * qj[c];
				s[j * m + p0 - lo + r] = x;
			}
		}
	}
}

// ascoresg: ascoresv for nq queries, in groups of 4, then 2, then 1; only
// the first group prefetches.
static AI void AF(ascoresg)(float *s, long m, const float *q, int nq, const void *k, const int32_t *blocks, long bs,
			    long stride, long off, int hd, int hv, int lo, int n, int pn, const int WH) {
	int j = 0;
	for (; j + 4 <= nq; j += 4)
		AF(ascoresv)(s + j * m, m, q + (long)j * hd, k, blocks, bs, stride, off, hd, hv, lo, n, j == 0 ? pn : 0, 4, WH);
	for (; j + 2 <= nq; j += 2)
		AF(ascoresv)(s + j * m, m, q + (long)j * hd, k, blocks, bs, stride, off, hd, hv, lo, n, j == 0 ? pn : 0, 2, WH);
	for (; j < nq; j++)
		AF(ascoresv)(s + j * m, m, q + (long)j * hd, k, blocks, bs, stride, off, hd, hv, lo, n, j == 0 ? pn : 0, 1, WH);
}

// ascores: s[j*m + p-lo] = q_j · K[p] (m = n-lo, lo <= p < n) for the NQ
// queries q + j*hd (the K row is loaded once for all of them). hv = hd
// rounded down to VW.
static AI void AF(ascores)(float *s, const float *q, const void *k, const int32_t *blocks, long bs, long stride,
			   long off, int hd, int hv, int lo, int n, const int NQ, const int WH) {
	const long m = n - lo;
	long blk = lo / bs, slot = lo % bs; // one division; then whole blocks
	for (int p0 = lo, cnt; p0 < n; p0 += cnt, blk++, slot = 0) {
		const long base = (long)blocks[blk] * stride + off + slot * hd;
		cnt = n - p0 < bs - slot ? n - p0 : (int)(bs - slot);
		long len = 0;
		const char *pb = AF(apfb)(k, blocks, blk + 1, bs, stride, off, hd, n, &len, WH);
		AF(apfr)(pb, 0, len, len);
		for (int r = 0; r < cnt; r++) {
			const long ro = base + (long)r * hd;
			AF(avf) a[4] = {{0}, {0}, {0}, {0}};
			for (int c = 0; c < hv; c += VW) {
				AF(avf) kv = AF(akv)(k, ro + c, WH);
#pragma GCC unroll 4
				for (int j = 0; j < NQ; j++) a[j] += kv * AF(ald)(q + j * hd + c);
			}
#pragma GCC unroll 4
			for (int j = 0; j < NQ; j++) {
				float x = AF(ahsum)(a[j]);
				for (int c = hv; c < hd; c++) x += AF(aat)(k, ro + c, WH) * q[j * hd + c];
				s[(long)j * m + p0 - lo + r] = x;
			}
		}
	}
}

#ifdef WATT_VNNI
// The Q8_0 cache's K scores as int8 dot products (kern_attq8.c, AVX-512
// VNNI, hd % 64 == 0). Each query is quantized per 32 elements as ggml
// quantizes the activations it multiplies a q8_0 cache by (dq = amax/127,
// x/dq rounded to nearest even, kq_q8_32; dq kept as a float), and a score is
//     q·K[p] = sum over 32-blocks b of dk_b * dq_b * sum_{i in b} qi_i * k_i,
// the integer sums exact. One vpdpbusd multiplies a row's 64 bytes by the
// query's: the row's bytes go in as unsigned k + 128, and each int32 lane
// (4 products) starts at -128 * (sum of the query's 4 int8 values), so it
// ends at exactly sum qi * k. The lanes are converted to float, multiplied
// by their block's dk * dq and summed (ared's tree, as agrp's).

// aq8prep writes the nq queries' int8 form at dst, 3*hd bytes a query:
// qi (hd int8), then per 64 elements the lanes' start values (16 int32),
// then per 64 elements the lanes' dq (16 floats, 8 per block).
static void AF(aq8prep)(char *dst, const float *q, int nq, int hd) {
	for (int j = 0; j < nq; j++) {
		int8_t *qi = (int8_t *)(dst + (long)j * 3 * hd);
		char *z = (char *)qi + hd, *dq = z + hd;
		for (int c = 0; c < hd; c += 64) {
			float d[2];
			for (int b = 0; b < 2; b++) d[b] = kq_q8_32(q + (long)j * hd + c + 32 * b, qi + c + 32 * b);
			int32_t zl[16];
			float dl[16];
			for (int l = 0; l < 16; l++) {
				const int8_t *g = qi + c + 4 * l;
				zl[l] = -128 * ((g[0] + g[1]) + (g[2] + g[3]));
				dl[l] = d[l / 8];
			}
			memcpy(z + c, zl, 64);
			memcpy(dq + c, dl, 64);
		}
	}
}

// aq8v: s[j*m + p-lo] = q_j · K[p] for the NQ (1, 2 or 4) prepared queries
// qp (aq8prep's layout, 3*hd bytes each) and lo <= p < n, 16 rows at a
// time, in NQ sets of R = 16/NQ rows (as agrp: query j, row r in
// accumulator j*R + r, so each score is summed in the same order whatever
// NQ is). It prefetches the K rows WATT_PFBW blocks ahead, up to position
// pn (0 for none).
static AI void AF(aq8v)(float *s, long m, const char *qp, const watt_q8 *k, const int32_t *blocks, long bs,
			long stride, long off, int hd, int lo, int n, int pn, const int NQ) {
	const int R = 16 / NQ;
	const long pfb = WATT_PFBW(bs, 2), qs = 3L * hd;
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
	const char *pb = 0;
	long len = 0, pbk = -1;
	for (int p0 = lo; p0 < n; p0 += 16) {
		const int cnt = n - p0 < 16 ? n - p0 : 16;
		long blk = p0 / bs, slot = p0 % bs;
		if (blk != pbk) {
			pbk = blk;
			pb = AF(apfb)(k, blocks, blk + pfb, bs, stride, off, hd, pn, &len, 2);
		}
		const long s0 = slot;
		long ro[16];
		for (int r = 0; r < 16; r++) { // rows past n repeat the last one
			ro[r] = (long)blocks[blk] * stride + off + slot * hd;
			if (r + 1 < cnt && ++slot == bs) {
				slot = 0;
				blk++;
			}
		}
		for (int r0 = 0; r0 < 16; r0 += R) {
			AF(apfr)(pb, (s0 + r0) * hd, (s0 + r0 + R) * hd, len);
			AF(avf) a[16];
#pragma GCC unroll 16
			for (int i = 0; i < 16; i++) a[i] = (AF(avf)){0};
			for (int c = 0; c < hd; c += 64) {
				__m512i qv[4], zv[4];
				__m512 dv[4];
#pragma GCC unroll 4
				for (int j = 0; j < NQ; j++) {
					const char *qj = qp + j * qs;
					qv[j] = _mm512_loadu_si512(qj + c);
					zv[j] = _mm512_loadu_si512(qj + hd + c);
					dv[j] = _mm512_loadu_ps(qj + 2 * hd + c);
				}
#pragma GCC unroll 16
				for (int r = 0; r < R; r++) {
					const long e = ro[r0 + r] + c;
					const __m512i kx = _mm512_xor_si512(_mm512_loadu_si512(k->q + e), flip);
					const __m512 dk = _mm512_permutexvar_ps(
						half, _mm512_castpd_ps(_mm512_castpd128_pd512(_mm_load_sd((const double *)(k->d + (e >> 5))))));
#pragma GCC unroll 4
					for (int j = 0; j < NQ; j++) {
						const __m512 x = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zv[j], kx, qv[j]));
						a[j * R + r] = (AF(avf))_mm512_fmadd_ps(x, _mm512_mul_ps(dk, dv[j]), (__m512)a[j * R + r]);
					}
				}
			}
			float t[16];
			AF(ast)(t, AF(ared)(a));
#pragma GCC unroll 4
			for (int j = 0; j < NQ; j++)
				for (int r = 0; r < R && r0 + r < cnt; r++) s[j * m + p0 - lo + r0 + r] = t[j * R + r];
		}
	}
}

// aq8sc: aq8v for nq prepared queries, in groups of 4, then 2, then 1; only
// the first group prefetches.
static AI void AF(aq8sc)(float *s, long m, const char *qp, int nq, const watt_q8 *k, const int32_t *blocks, long bs,
			 long stride, long off, int hd, int lo, int n, int pn) {
	const long qs = 3L * hd;
	int j = 0;
	for (; j + 4 <= nq; j += 4) AF(aq8v)(s + j * m, m, qp + j * qs, k, blocks, bs, stride, off, hd, lo, n, j == 0 ? pn : 0, 4);
	for (; j + 2 <= nq; j += 2) AF(aq8v)(s + j * m, m, qp + j * qs, k, blocks, bs, stride, off, hd, lo, n, j == 0 ? pn : 0, 2);
	for (; j < nq; j++) AF(aq8v)(s + j * m, m, qp + j * qs, k, blocks, bs, stride, off, hd, lo, n, j == 0 ? pn : 0, 1);
}
#endif

// aout: out[j*hd + c .. + NC*VW) += sum_p w[j*m + p-lo] * V[p][c ..] (m =
// n-lo, lo <= p < n) for the NQ queries, NC vectors of columns from c.
// Small tiles take rows in pairs into two sets of accumulators (more
// independent FMA chains). The call for the first columns (c == 0)
// prefetches the V rows WATT_PFB blocks ahead, up to position pn (0 for
// none).
static AI void AF(aout)(float *out, const float *w, const void *v, const int32_t *blocks, long bs, long stride,
			long off, int hd, int c, int lo, int n, int pn, const int NQ, const int NC, const int WH) {
	const long m = n - lo;
	AF(avf) a[4][4], b[4][4];
#pragma GCC unroll 4
	for (int j = 0; j < NQ; j++)
#pragma GCC unroll 4
		for (int i = 0; i < NC; i++) a[j][i] = b[j][i] = (AF(avf)){0};
	long blk = lo / bs, slot = lo % bs; // one division; then whole blocks
	for (int p0 = lo, cnt; p0 < n; p0 += cnt, blk++, slot = 0) {
		const long base = (long)blocks[blk] * stride + off + slot * hd + c;
		cnt = n - p0 < bs - slot ? n - p0 : (int)(bs - slot);
		const float *wp = w + (p0 - lo);
		long len = 0;
		const char *pb = c == 0 ? AF(apfb)(v, blocks, blk + WATT_PFBW(bs, WH), bs, stride, off, hd, pn, &len, WH) : 0;
		const long rb = (long)hd * AES(WH), pbo = slot * rb;
		int r = 0;
		if (NQ * NC <= 8) {
			for (; r + 2 <= cnt; r += 2) {
				const long ro = base + (long)r * hd;
				AF(apfr)(pb, pbo + r * rb, pbo + (r + 2) * rb, len);
				AF(avf) v0[4], v1[4];
#pragma GCC unroll 4
				for (int i = 0; i < NC; i++) {
					v0[i] = AF(akv)(v, ro + i * VW, WH);
					v1[i] = AF(akv)(v, ro + hd + i * VW, WH);
				}
#pragma GCC unroll 4
				for (int j = 0; j < NQ; j++) {
					const float x0 = wp[(long)j * m + r], x1 = wp[(long)j * m + r + 1];
#pragma GCC unroll 4
					for (int i = 0; i < NC; i++) {
						a[j][i] += v0[i] * x0;
						b[j][i] += v1[i] * x1;
					}
				}
			}
		}
		for (; r < cnt; r++) {
			const long ro = base + (long)r * hd;
			AF(apfr)(pb, pbo + r * rb, pbo + (r + 1) * rb, len);
			AF(avf) vv[4];
#pragma GCC unroll 4
			for (int i = 0; i < NC; i++) vv[i] = AF(akv)(v, ro + i * VW, WH);
#pragma GCC unroll 4
			for (int j = 0; j < NQ; j++) {
				const float x = wp[(long)j * m + r];
#pragma GCC unroll 4
				for (int i = 0; i < NC; i++) a[j][i] += vv[i] * x;
			}
		}
	}
#pragma GCC unroll 4
	for (int j = 0; j < NQ; j++)
#pragma GCC unroll 4
		for (int i = 0; i < NC; i++)
			AF(ast)(out + j * hd + c + i * VW, AF(ald)(out + j * hd + c + i * VW) + (a[j][i] + b[j][i]));
}

// asoftmax: row = softmax(row*scale) in ggml's order (see the file comment),
// rounded to F16 when WH. A sink (non-NULL: gpt-oss's per-head learned
// logit, not scaled) joins the softmax as ggml's soft_max does with one:
// the max is taken over it too and exp(sink - max) is added to the sum,
// but it has no weight of its own. The float64 sum runs in VW lanes (its rounding
// is far below float32's).
// (Two half-width sums: one vector of VW doubles is wider than a register
// and made GCC keep it on the stack, a store-to-load chain per iteration.)
typedef float AF(avfh) __attribute__((vector_size(VW * 2)));
typedef double AF(avdh) __attribute__((vector_size(VW * 4)));
static AI void AF(asoftmax)(float *row, int n, float scale, const float *sink, const int WH) {
	// Four running maxima: one is a chain of amaxv's latency per vector.
	AF(avf) mv[4];
	for (int i = 0; i < 4; i++) mv[i] = (AF(avf)){0} - __builtin_inff();
	int p = 0;
	for (; p + 4 * VW <= n; p += 4 * VW)
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			const AF(avf) x = AF(ald)(row + p + i * VW) * scale;
			AF(ast)(row + p + i * VW, x);
			mv[i] = AF(amaxv)(x, mv[i]);
		}
	for (; p + VW <= n; p += VW) {
		const AF(avf) x = AF(ald)(row + p) * scale;
		AF(ast)(row + p, x);
		mv[0] = AF(amaxv)(x, mv[0]);
	}
	float mx = AF(ahmax)(AF(amaxv)(AF(amaxv)(mv[0], mv[1]), AF(amaxv)(mv[2], mv[3])));
	for (; p < n; p++) {
		const float x = row[p] * scale;
		row[p] = x;
		if (x > mx || x != x) mx = x;
	}
	if (sink && !(mx > *sink)) mx = *sink;
	AF(avdh) s0 = {0}, s1 = {0};
	for (p = 0; p + VW <= n; p += VW) {
		const AF(avf) e = AF(aexp)(AF(ald)(row + p) - mx);
		AF(ast)(row + p, e);
#if defined(HAVE_F16C) && VW == 16 // the halves straight from the register
		s0 += (AF(avdh))_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)e));
		s1 += (AF(avdh))_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd((__m512)e), 1)));
#elif defined(HAVE_F16C)
		s0 += (AF(avdh))_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)e));
		s1 += (AF(avdh))_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)e, 1));
#else
		AF(avfh) lo, hi;
		memcpy(&lo, &e, sizeof lo);
		memcpy(&hi, (const char *)&e + sizeof lo, sizeof hi);
		s0 += __builtin_convertvector(lo, AF(avdh));
		s1 += __builtin_convertvector(hi, AF(avdh));
#endif
	}
	double sum = 0, dl[VW];
	memcpy(dl, &s0, sizeof s0);
	memcpy(dl + VW / 2, &s1, sizeof s1);
	for (int i = 0; i < VW; i++) sum += dl[i];
	if (p < n) {
		float a[VW] = {0};
		memcpy(a, row + p, (n - p) * 4);
		const AF(avf) e = AF(aexp)(AF(ald)(a) - mx);
		memcpy(row + p, &e, (n - p) * 4);
		for (; p < n; p++) sum += row[p];
	}
	if (sink) {
		float e[VW];
		AF(ast)(e, AF(aexp)((AF(avf)){0} + (*sink - mx)));
		sum += e[0];
	}
	const float inv = (float)(1 / sum);
	p = 0;
#if defined(HAVE_F16C) && VW == 16
	if (WH == 1) // normalised and rounded in one pass (around's rounding)
		for (; p + VW <= n; p += VW)
			_mm512_storeu_ps(row + p, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(row + p) * inv, _MM_FROUND_TO_NEAREST_INT)));
#elif defined(HAVE_F16C)
	if (WH == 1)
		for (; p + VW <= n; p += VW)
			_mm256_storeu_ps(row + p, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(row + p) * inv, _MM_FROUND_TO_NEAREST_INT)));
#endif
	const int p1 = p;
	for (; p + VW <= n; p += VW) AF(ast)(row + p, AF(ald)(row + p) * inv);
	for (; p < n; p++) row[p] *= inv;
	if (WH == 1) AF(around)(row + p1, row + p1, n - p1);
}

// aouts: out[j*hd ..] += sum_p w[j*m + p-lo] * V[p] (m = n-lo) for the nq
// queries, in output tiles of 4 queries x 2 column vectors, or fewer
// queries x 4. Only the first tile of queries prefetches (aout).
static AI void AF(aouts)(float *out, const float *w, const void *v, const int32_t *blocks, long bs, long stride,
			 long off, int hd, int nq, int lo, int n, int pn, const int WH) {
	const long np = n - lo;
	const int hv = hd - hd % VW;
	for (int j = 0; j < nq;) {
		const int m = nq - j >= 4 ? 4 : nq - j >= 2 ? 2 : 1;
		float *o = out + (long)j * hd;
		const float *wj = w + j * np;
		int c = 0;
		if (m == 4) {
			for (; c + 2 * VW <= hv; c += 2 * VW) AF(aout)(o, wj, v, blocks, bs, stride, off, hd, c, lo, n, j == 0 ? pn : 0, 4, 2, WH);
			for (; c < hv; c += VW) AF(aout)(o, wj, v, blocks, bs, stride, off, hd, c, lo, n, j == 0 ? pn : 0, 4, 1, WH);
		} else if (m == 2) {
			for (; c + 4 * VW <= hv; c += 4 * VW) AF(aout)(o, wj, v, blocks, bs, stride, off, hd, c, lo, n, j == 0 ? pn : 0, 2, 4, WH);
			for (; c < hv; c += VW) AF(aout)(o, wj, v, blocks, bs, stride, off, hd, c, lo, n, j == 0 ? pn : 0, 2, 1, WH);
		} else {
			for (; c + 4 * VW <= hv; c += 4 * VW) AF(aout)(o, wj, v, blocks, bs, stride, off, hd, c, lo, n, j == 0 ? pn : 0, 1, 4, WH);
			for (; c < hv; c += VW) AF(aout)(o, wj, v, blocks, bs, stride, off, hd, c, lo, n, j == 0 ? pn : 0, 1, 1, WH);
		}
		// Columns past the last full vector, one at a time.
		for (; c < hd; c++) {
			for (int i = 0; i < m; i++) {
				float x = 0;
				long blk = lo / bs, slot = lo % bs;
				for (int p0 = lo, cnt; p0 < n; p0 += cnt, blk++, slot = 0) {
					const long base = (long)blocks[blk] * stride + off + slot * hd + c;
					cnt = n - p0 < bs - slot ? n - p0 : (int)(bs - slot);
					for (int r = 0; r < cnt; r++)
						x += wj[i * np + p0 - lo + r] * AF(aat)(v, base + (long)r * hd, WH);
				}
				o[i * hd + c] += x;
			}
		}
		j += m;
	}
}

// aexp1: e^x for one float (aexp's approximation).
static AI float AF(aexp1)(float x) {
	float e[VW];
	AF(ast)(e, AF(aexp)((AF(avf)){0} + x));
	return e[0];
}

// atile: one tile's share of the online softmax of query j: row holds its
// m scores, replaced by exp(score*scale - mx'), where mx' is the larger of
// *mx and the tile's largest scaled score; *mx becomes mx' and *l becomes
// *l * exp(*mx - mx') + the sum of the row. It returns exp(*mx - mx') (0
// while *mx is -inf), the factor the query's output sum must take.
static AI float AF(atile)(float *row, int m, float scale, float *mx, float *l) {
	AF(avf) mv = (AF(avf)){0} - __builtin_inff();
	int p = 0;
	for (; p + VW <= m; p += VW) {
		const AF(avf) x = AF(ald)(row + p) * scale;
		AF(ast)(row + p, x);
		mv = AF(amaxv)(x, mv);
	}
	float tm = AF(ahmax)(mv);
	for (; p < m; p++) {
		const float x = row[p] * scale;
		row[p] = x;
		if (x > tm || x != x) tm = x;
	}
	const float old = *mx, nm = tm > old || tm != tm ? tm : old;
	const float alpha = old == -__builtin_inff() ? 0 : AF(aexp1)(old - nm);
	AF(avf) sv = {0};
	for (p = 0; p + VW <= m; p += VW) {
		const AF(avf) e = AF(aexp)(AF(ald)(row + p) - nm);
		AF(ast)(row + p, e);
		sv += e;
	}
	float sum = AF(ahsum)(sv);
	if (p < m) {
		float a[VW] = {0};
		memcpy(a, row + p, (m - p) * 4);
		const AF(avf) e = AF(aexp)(AF(ald)(a) - nm);
		memcpy(row + p, &e, (m - p) * 4);
		for (; p < m; p++) sum += row[p];
	}
	*mx = nm;
	*l = *l * alpha + sum;
	return alpha;
}

// aseg: the softmax state of the nq queries q (rows of hd, already rounded
// for an F16 cache) over positions lo..n-1: st[j] = m_j, the largest scaled
// score, st[nq+j] = l_j = sum_p exp(s_p - m_j), and st[2*nq + j*hd ..] =
// o_j = sum_p exp(s_p - m_j) V[p] (s_p = scale * q_j·K[p]). Positions go
// in tiles of WATT_TILE (at multiples of it): a tile's K rows are scored
// for every query, folded into the running state, and its V rows
// accumulated while they are in cache; ascoresv and aout prefetch the rows
// WATT_PFB blocks ahead as they go, up to position pn (the end of the
// whole range, past this segment). sc holds nq*WATT_TILE floats.
static AI void AF(aseg)(float *st, const float *q, int nq, const void *k, const void *v, const int32_t *blocks,
			long bs, long stride, long off, int hd, int lo, int n, int pn, float scale, float *sc, const int WH) {
	float *mx = st, *ls = st + nq, *o = st + 2 * nq;
	for (int j = 0; j < nq; j++) {
		mx[j] = -__builtin_inff();
		ls[j] = 0;
	}
	memset(o, 0, (size_t)nq * hd * 4);
	const int hv = hd - hd % VW;
	for (int t0 = lo; t0 < n;) {
		int t1 = (t0 / WATT_TILE + 1) * WATT_TILE;
		if (t1 > n) t1 = n;
		const int m = t1 - t0;
		int j = 0;
#ifdef WATT_VNNI
		if (WH == 2) {
			AF(aq8sc)(sc, m, (const char *)q, nq, (const watt_q8 *)k, blocks, bs, stride, off, hd, t0, t1, pn);
			j = nq;
		}
#endif
		if (hv > 0 && j == 0) {
			AF(ascoresg)(sc, m, q, nq, k, blocks, bs, stride, off, hd, hv, t0, t1, pn, WH);
			j = nq;
		}
		for (; j + 4 <= nq; j += 4) AF(ascores)(sc + j * m, q + j * hd, k, blocks, bs, stride, off, hd, hv, t0, t1, 4, WH);
		for (; j + 2 <= nq; j += 2) AF(ascores)(sc + j * m, q + j * hd, k, blocks, bs, stride, off, hd, hv, t0, t1, 2, WH);
		for (; j < nq; j++) AF(ascores)(sc + j * m, q + j * hd, k, blocks, bs, stride, off, hd, hv, t0, t1, 1, WH);
		for (j = 0; j < nq; j++) {
			// Scaled always, also by 1 (the same bits): a branch on
			// alpha mispredicts whenever the largest score moves.
			const float alpha = AF(atile)(sc + j * m, m, scale, mx + j, ls + j);
			float *oj = o + (long)j * hd;
			int c = 0;
			for (; c + VW <= hd; c += VW) AF(ast)(oj + c, AF(ald)(oj + c) * alpha);
			for (; c < hd; c++) oj[c] *= alpha;
		}
		AF(aouts)(o, sc, v, blocks, bs, stride, off, hd, nq, t0, t1, pn, WH);
		t0 = t1;
	}
}

// attend_part: the states (aseg) of the segments of positions lo..n-1,
// split at multiples of WATT_SEG, one after another in st (nq*(hd+2)
// floats each). q is rounded to F16 first for an F16 cache; scratch holds
// nq*(hd+WATT_TILE) floats.
static AI void AF(attend_part)(float *st, const float *q, int nq, const void *k, const void *v, const int32_t *blocks,
			       long bs, long stride, long off, int hd, int lo, int n, float scale, float *scratch,
			       const int WH) {
	float *qs = scratch, *sc = scratch + (long)nq * hd;
	if (WH == 1) {
		AF(around)(qs, q, (long)nq * hd);
		q = qs;
	}
#ifdef WATT_VNNI
	if (WH == 2) { // q is aq8prep's bytes from here on (aseg)
		AF(aq8prep)((char *)qs, q, nq, hd);
		q = qs;
	}
#endif
	const long sw = (long)nq * (hd + 2);
	for (int s0 = lo; s0 < n; st += sw) {
		int s1 = (s0 / WATT_SEG + 1) * WATT_SEG;
		if (s1 > n) s1 = n;
		AF(aseg)(st, q, nq, k, v, blocks, bs, stride, off, hd, s0, s1, n, scale, sc, WH);
		s0 = s1;
	}
}

// attend_merge: out (nq rows of hd) from nseg segment states (attend_part's
// layout): with M the largest m_i (and sink), out = sum_i o_i e^(m_i-M) /
// (sum_i l_i e^(m_i-M) + e^(sink-M)), the segments taken in order.
static void AF(attend_merge)(float *out, const float *st, int nseg, int nq, int hd, const float *sinks) {
	const long sw = (long)nq * (hd + 2);
	for (int j = 0; j < nq; j++) {
		float M = sinks ? sinks[j] : -__builtin_inff();
		for (int i = 0; i < nseg; i++) {
			const float m = st[i * sw + j];
			if (m > M || m != m) M = m;
		}
		float *oj = out + (long)j * hd;
		float L = sinks ? AF(aexp1)(sinks[j] - M) : 0;
		memset(oj, 0, (size_t)hd * 4);
		for (int i = 0; i < nseg; i++) {
			const float *si = st + i * sw;
			if (si[j] == -__builtin_inff()) continue;
			const float f = AF(aexp1)(si[j] - M);
			L += si[nq + j] * f;
			const float *o = si + 2 * nq + (long)j * hd;
			int c = 0;
			for (; c + VW <= hd; c += VW) AF(ast)(oj + c, AF(ald)(oj + c) + AF(ald)(o + c) * f);
			for (; c < hd; c++) oj[c] += o[c] * f;
		}
		const float inv = 1 / L;
		int c = 0;
		for (; c + VW <= hd; c += VW) AF(ast)(oj + c, AF(ald)(oj + c) * inv);
		for (; c < hd; c++) oj[c] *= inv;
	}
}

// attend_2p: attention over at most one segment's positions in two passes,
// the scores of every position, then their softmax in ggml's order
// (asoftmax: the weights normalised, then rounded to F16 for an F16 cache),
// then the output sum. scratch holds nq*(hd+n-lo) floats.
static AI void AF(attend_2p)(float *out, const float *q, int nq, const void *k, const void *v, const int32_t *blocks,
			     long bs, long stride, long off, int hd, int lo, int n, float scale, const float *sinks,
			     float *scratch, const int WH) {
	float *qs = scratch, *sc = scratch + (long)nq * hd;
	const long np = n - lo;
	if (WH == 1) {
		AF(around)(qs, q, (long)nq * hd);
		q = qs;
	}
	const int hv = hd - hd % VW;
	int j = 0;
#ifdef WATT_VNNI
	if (WH == 2) {
		AF(aq8prep)((char *)qs, q, nq, hd);
		AF(aq8sc)(sc, np, (const char *)qs, nq, (const watt_q8 *)k, blocks, bs, stride, off, hd, lo, n, n);
		j = nq;
	}
#endif
	if (hv > 0 && j == 0) {
		AF(ascoresg)(sc, np, q, nq, k, blocks, bs, stride, off, hd, hv, lo, n, n, WH);
		j = nq;
	}
	for (; j + 4 <= nq; j += 4) AF(ascores)(sc + j * np, q + j * hd, k, blocks, bs, stride, off, hd, hv, lo, n, 4, WH);
	for (; j + 2 <= nq; j += 2) AF(ascores)(sc + j * np, q + j * hd, k, blocks, bs, stride, off, hd, hv, lo, n, 2, WH);
	for (; j < nq; j++) AF(ascores)(sc + j * np, q + j * hd, k, blocks, bs, stride, off, hd, hv, lo, n, 1, WH);
	for (j = 0; j < nq; j++) AF(asoftmax)(sc + j * np, (int)np, scale, sinks ? sinks + j : 0, WH);
	memset(out, 0, (size_t)nq * hd * 4);
	AF(aouts)(out, sc, v, blocks, bs, stride, off, hd, nq, lo, n, n, WH);
}

// attend_t: up to WATT_SEG positions in two passes (attend_2p, the order
// the golden logits of ggml's attention were made in); longer contexts as
// segments of online softmax (attend_part), merged.
static AI void AF(attend_t)(float *out, const float *q, int nq, const void *k, const void *v, const int32_t *blocks,
			    long bs, long stride, long off, int hd, int lo, int n, float scale, const float *sinks,
			    float *scratch, const int WH) {
	if (n - lo <= WATT_SEG) {
		AF(attend_2p)(out, q, nq, k, v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch, WH);
		return;
	}
	float *st = scratch + (long)nq * (hd + WATT_TILE);
	AF(attend_part)(st, q, nq, k, v, blocks, bs, stride, off, hd, lo, n, scale, scratch, WH);
	const int nseg = (n - 1) / WATT_SEG - lo / WATT_SEG + 1;
	AF(attend_merge)(out, st, nseg, nq, hd, sinks);
}

#ifndef WATT_VNNI
void WAPI(attend_h)(float *out, const float *q, int nq, const void *k, const void *v, const int32_t *blocks,
			 long bs, long stride, long off, int hd, int lo, int n, float scale, const float *sinks,
			 float *scratch) {
	AF(attend_t)(out, q, nq, k, v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch, 1);
}

void WAPI(attend_f)(float *out, const float *q, int nq, const void *k, const void *v, const int32_t *blocks,
			 long bs, long stride, long off, int hd, int lo, int n, float scale, const float *sinks,
			 float *scratch) {
	AF(attend_t)(out, q, nq, k, v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch, 0);
}

#endif

void WAPI(attend_q)(float *out, const float *q, int nq, const watt_q8 *k, const watt_q8 *v, const int32_t *blocks,
			 long bs, long stride, long off, int hd, int lo, int n, float scale, const float *sinks,
			 float *scratch) {
	const watt_q8 kc = *k, vc = *v; // locals: their fields stay in registers
	AF(attend_t)(out, q, nq, &kc, &vc, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch, 2);
}

#ifndef WATT_VNNI
// Prompt chunks (attend_chunk): the query rows of a chunk's tokens meet the
// gathered K and V rows in register tiles of WATT_PR tokens. K comes
// transposed in panels of WATT_KP positions (watt_panel_k), so a score tile
// is WATT_PR x WATT_PC vector accumulators fed by one load per vector of
// ACW = WATT_PC*VW positions and one broadcast per row: no horizontal
// sums. Each tile of tokens takes every head of the group: a K panel (and
// a block of ACB V rows) is read once from cache for all of them and
// reused from L1.
#ifndef WATT_PR
#define WATT_PR 4
#endif
#ifndef WATT_PC
#define WATT_PC 2
#endif
#ifndef WATT_NV
#define WATT_NV 2
#endif
#define ACW (WATT_PC * VW)
#define ACB 128
_Static_assert(WATT_KP % ACW == 0 && WATT_PR <= 8, "attend_chunk takes panels in whole tiles and at most 8 tokens a tile (AttendChunkScratch)");

// acqk: s[r*ls + c] = q_r · K[p0 + c] for the WATT_PR query rows of qt
// (transposed: element d of row r at qt[d*WATT_PR + r]) and the ACW
// positions from p0 (kt: their column of a panel, element d at
// kt[d*WATT_KP]), each a sum over d in order.
static AI void AF(acqk)(float *s, long ls, const float *qt, const float *kt, int hd) {
	AF(avf) a[WATT_PR][WATT_PC];
#pragma GCC unroll 8
	for (int r = 0; r < WATT_PR; r++)
#pragma GCC unroll 4
		for (int i = 0; i < WATT_PC; i++) a[r][i] = (AF(avf)){0};
	for (int d = 0; d < hd; d++) {
		AF(avf) kv[WATT_PC];
#pragma GCC unroll 4
		for (int i = 0; i < WATT_PC; i++) kv[i] = AF(ald)(kt + (long)d * WATT_KP + i * VW);
#pragma GCC unroll 8
		for (int r = 0; r < WATT_PR; r++) {
			const float x = qt[(long)d * WATT_PR + r];
#pragma GCC unroll 4
			for (int i = 0; i < WATT_PC; i++) a[r][i] += kv[i] * x;
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < WATT_PR; r++)
#pragma GCC unroll 4
		for (int i = 0; i < WATT_PC; i++) AF(ast)(s + r * ls + i * VW, a[r][i]);
}

// acpv: o[r*hd + d0 + i*VW ..] += p[r*ls + c] * V[c][d0 + i*VW ..] for c =
// c0..c1-1 in order, for the WATT_PR rows of weights p and NV vectors of
// columns from d0 (v: rows of hd): the sums go on from o's values, so a
// row's output is one running sum over all its positions.
static AI void AF(acpv)(float *o, const float *p, long ls, const float *v, int hd, int d0, int c0, int c1, const int NV) {
	AF(avf) a[WATT_PR][4];
#pragma GCC unroll 8
	for (int r = 0; r < WATT_PR; r++)
#pragma GCC unroll 4
		for (int i = 0; i < NV; i++) a[r][i] = AF(ald)(o + (long)r * hd + d0 + i * VW);
	const float *vr = v + (long)c0 * hd + d0;
	for (int c = c0; c < c1; c++, vr += hd) {
		AF(avf) vv[4];
#pragma GCC unroll 4
		for (int i = 0; i < NV; i++) vv[i] = AF(ald)(vr + i * VW);
#pragma GCC unroll 8
		for (int r = 0; r < WATT_PR; r++) {
			const float x = p[r * ls + c];
#pragma GCC unroll 4
			for (int i = 0; i < NV; i++) a[r][i] += vv[i] * x;
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < WATT_PR; r++)
#pragma GCC unroll 4
		for (int i = 0; i < NV; i++) AF(ast)(o + (long)r * hd + d0 + i * VW, a[r][i]);
}

// acpvs: acpv for every column of the rows: NV = WATT_NV vectors at a time,
// then the vectors left, then the columns past the last vector one by one.
static AI void AF(acpvs)(float *o, const float *p, long ls, const float *v, int hd, int c0, int c1) {
	const int hv = hd - hd % VW;
	int d0 = 0;
	for (; d0 + WATT_NV * VW <= hv; d0 += WATT_NV * VW) AF(acpv)(o, p, ls, v, hd, d0, c0, c1, WATT_NV);
	switch ((hv - d0) / VW) {
	case 3: AF(acpv)(o, p, ls, v, hd, d0, c0, c1, 3); break;
	case 2: AF(acpv)(o, p, ls, v, hd, d0, c0, c1, 2); break;
	case 1: AF(acpv)(o, p, ls, v, hd, d0, c0, c1, 1); break;
	}
	for (int d = hv; d < hd; d++)
		for (int r = 0; r < WATT_PR; r++) {
			float x = o[(long)r * hd + d];
			for (int c = c0; c < c1; c++) x += p[r * ls + c] * v[(long)c * hd + d];
			o[(long)r * hd + d] = x;
		}
}

// attend_chunk: see watt_attend_chunk (kernels.h).
void WAPI(attend_chunk)(float *out, const float *q, long ldq, int T, int nh, int hd, const float *kt, const float *v,
			int m, int pos0, int window, float scale, const float *sinks, int wh, float *scratch) {
	const long mp = (m + WATT_KP - 1) / WATT_KP * WATT_KP;
	float *s = scratch, *qt = s + (long)nh * WATT_PR * mp, *o = qt + (long)nh * WATT_PR * hd,
	      *row = o + (long)nh * WATT_PR * hd;
	for (int j0 = 0; j0 < T; j0 += WATT_PR) {
		const int nr = T - j0 < WATT_PR ? T - j0 : WATT_PR;
		const int chi = pos0 + j0 + nr; // the tile sees columns clo..chi-1
		const int clo = window > 0 && chi - nr + 1 > window ? chi - nr + 1 - window : 0;
		for (int i = 0; i < nh; i++) // the tile's queries, transposed, zero past T
			for (int r = 0; r < WATT_PR; r++) {
				float *qi = qt + (long)i * WATT_PR * hd;
				if (r < nr) {
					const float *src = q + (long)(j0 + r) * ldq + (long)i * hd;
					if (wh) {
						AF(around)(row, src, hd);
						src = row;
					}
					for (int d = 0; d < hd; d++) qi[(long)d * WATT_PR + r] = src[d];
				} else
					for (int d = 0; d < hd; d++) qi[(long)d * WATT_PR + r] = 0;
			}
		for (long p0 = clo / ACW * ACW; p0 < chi; p0 += ACW)
			for (int i = 0; i < nh; i++)
				AF(acqk)(s + (long)i * WATT_PR * mp + p0, mp, qt + (long)i * WATT_PR * hd,
					 kt + p0 / WATT_KP * WATT_KP * hd + p0 % WATT_KP, hd);
		for (int i = 0; i < nh; i++)
			for (int r = 0; r < WATT_PR; r++) {
				float *sr = s + ((long)i * WATT_PR + r) * mp;
				if (r >= nr) { // no token: zero weights
					memset(sr + clo, 0, (size_t)(chi - clo) * 4);
					continue;
				}
				const int len = chi - nr + r + 1, lo = window > 0 && len > window ? len - window : 0;
				const float *sink = sinks ? sinks + i : 0;
				memset(sr + clo, 0, (size_t)(lo - clo) * 4);
				if (wh)
					AF(asoftmax)(sr + lo, len - lo, scale, sink, 1);
				else
					AF(asoftmax)(sr + lo, len - lo, scale, sink, 0);
				memset(sr + len, 0, (size_t)(chi - len) * 4);
			}
		memset(o, 0, (size_t)nh * WATT_PR * hd * 4);
		for (int c0 = clo; c0 < chi; c0 += ACB) {
			const int c1 = chi - c0 < ACB ? chi : c0 + ACB;
			for (int i = 0; i < nh; i++)
				AF(acpvs)(o + (long)i * WATT_PR * hd, s + (long)i * WATT_PR * mp, mp, v, hd, c0, c1);
		}
		for (int i = 0; i < nh; i++)
			for (int r = 0; r < nr; r++)
				memcpy(out + (long)(j0 + r) * ldq + (long)i * hd, o + ((long)i * WATT_PR + r) * hd, (size_t)hd * 4);
	}
}
#undef ACW
#undef ACB
#endif

#undef AES
#undef WCAT_
#undef WCAT
#undef AF
#undef AI
#undef WAPI
