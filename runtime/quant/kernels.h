// kernels.h: C kernels for package quant, compiled into the cgo object of
// kernels_cgo.go. The body (kern_body.h) is included once per instruction
// set under a GCC target pragma; Go picks the variant at run time.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// WEFT_X86: build the x86 SIMD variants (-DWEFT_PORTABLE_ONLY checks the
// portable code alone on an x86 host).
#if defined(__x86_64__) && !defined(WEFT_PORTABLE_ONLY)
#define WEFT_X86 1
#else
#define WEFT_X86 0
#endif
#if WEFT_X86
#include <immintrin.h>
#endif

#include "kern_f16.h"

static __thread float *weft_tls_buf[3];
static __thread long weft_tls_cap[3];

// weft_scratch returns this thread's buffer number slot (0..2) of at least n
// floats (64-byte aligned). Buffers live as long as the thread.
static float *weft_scratch(int slot, long n) {
	if (n > weft_tls_cap[slot]) {
		free(weft_tls_buf[slot]);
		long bytes = (n * 4 + 63) & ~63L;
		weft_tls_buf[slot] = aligned_alloc(64, bytes);
		weft_tls_cap[slot] = weft_tls_buf[slot] ? n : 0;
	}
	return weft_tls_buf[slot];
}

// Token counts (AVX-512 VNNI): from LANE_MIN_N, Q8_0, Q4_K and Q6_K take the
// int8 lane GEMM (kern_vnni.h); below WEFT_VNNI_MAX_N the integer row
// kernels take the types they know. Otherwise: below WEFT_GEMM_BIG_N the
// dot-product kernel runs; from it the packed GEMM (weights transposed per
// tile, tokens broadcast), whose per-tile transposition pays off only over
// many tokens. The AVX-512 build takes the GEMM earlier (weft_gemm_pays), and
// both x86 builds take it from a few tokens for short rows
// (weft_gemm_short_rows).
// (A float lane GEMM, tokens along the vector lanes, measured ~40% slower
// than the dot-product kernel at 64 and 128 tokens and was removed; the
// int8 one wins because a 4-byte weight broadcast feeds 64 products.)
#define WEFT_VNNI_MAX_N 24
// WEFT_I8_MAX_N (Q8_0, Q4_0) and WEFT_I8_MAX_N_K (Q4_K, Q6_K): below them,
// AVX2 CPUs take the integer row kernels (kern_i8.h). Measured on Zen 1
// (two threads, BenchmarkMatMul, 768x2048 and 2048x768): 2-10x the float
// kernels' speed for one token, 1.4-3.7x for four, about even at sixteen,
// and 0.5-0.9x from 64, where the float kernels share each dequantized row
// among more tokens. In weft bench --engine at 16 sequences, Q4_K_M gave
// 145-150 tokens/s with the integer kernels against 127-132 without, Q8_0
// 163-165 against 171-173; at 32, Q4_K_M 125-147 against 160-167. With
// per-256 activations (kern_i8.h) the K-quant kernels run to 48 tokens:
// Q4_K_M at 32 sequences 180-188 tokens/s against 162-173, at 64 177-181
// against 185-201 for the float kernels.
#ifndef WEFT_I8_MAX_N
#define WEFT_I8_MAX_N 16
#endif
#ifndef WEFT_I8_MAX_N_K
#define WEFT_I8_MAX_N_K 48
#endif
#ifndef WEFT_GEMM_BIG_N
#define WEFT_GEMM_BIG_N 160
#endif
// WEFT_GEMM_KC: K block of the packed GEMM (the weight tile's block,
// GMR x KC floats, stays in L1 while the token panels pass it).
// WEFT_GEMM_GROUP: floats of transposed weights (a group of 32-row tiles)
// the packed GEMM prepares before its K-block loop, 1 MiB.
#ifndef WEFT_GEMM_GROUP
#define WEFT_GEMM_GROUP (256 << 10)
#endif
#ifndef WEFT_GEMM_KC
#define WEFT_GEMM_KC 128
#endif

// weft_gemm_pays: whether the AVX-512 build (whose packing transposes in
// registers, so costs little) takes the packed GEMM below WEFT_GEMM_BIG_N.
// Measured on one core (Zen 5): the dot-product kernel slows down for long
// rows (K = 2048: ~130 GFLOP/s F16, ~110 Q8_0) where the GEMM holds ~135 at
// 24 tokens and ~170 from 96; for K = 768 the dot kernel keeps up until ~96
// tokens for F16/F32 (no dequantization) and ~48 for the quantized types.
static int weft_gemm_pays(int type, int K, int n) {
	if (n < WEFT_VNNI_MAX_N) return 0;
	if (K >= 1536) return 1;
	return n >= ((type == 0 || type == 1) ? 96 : 48);
}

// weft_gemm_short_rows: short rows take the packed GEMM from a few tokens
// on (AVX2 and AVX-512 builds; the portable one is unmeasured): the dot-product kernel ends each output
// with a horizontal sum, which for a row of 64 costs about as much as its
// multiply-adds, and for the head dims of tiny models (8-32, attention's
// Q·Kᵀ) several times more. Zen 1, one core, GFLOP/s dot kernel -> GEMM:
// K = 8 at 16 tokens 3.0 -> 13.8; K = 64 at 8 13.3 -> 13.7, at 64
// 16.3 -> 28.3 (F32), 15.4 -> 27.7 (F16); K = 172 at 32 21.9 -> 24.7, at
// 128 22.3 -> 28.4; K = 256 about even; K = 512 at 32 0.7-0.8x.
static int weft_gemm_short_rows(int K, int n) {
	return (K <= 32 && n >= 4) || (K <= 64 && n >= 8) || (K <= 192 && n >= 24);
}

// WEFT_F16_TILE_N: from this many tokens, the AVX2 build converts F16 rows
// into the float tile once, as it dequantizes the other types, instead of
// converting every weight vector in registers once per token group
// (vcvtph2ps costs as much as the FMAs it feeds there). Zen 1, one core,
// 768x2048 in cache: 31 against 22 GFLOP/s at 16 tokens, 37 against 23 at
// 128, about even at 2-4. With the weights coming from memory (weft bench
// --engine, synth-110m F16) the in-register path, which prefetches the
// rows it streams, stays ahead below 8 tokens: decode 4 113 against 97-100
// tokens/s with the tile from 2 tokens on; decode 16 159-162 -> 177.
#ifndef WEFT_F16_TILE_N
#define WEFT_F16_TILE_N 8
#endif

// WEFT_TILE_FLOATS: size of the dequantized weight tile of the dot-product
// kernel for more than 4 tokens, 32 KiB, so that it stays in L1 while the
// tokens stream past it (8 rows of 768 measured ~20% faster than 32 rows
// for Q8_0/Q4_K at 64-128 tokens).
#ifndef WEFT_TILE_FLOATS
#define WEFT_TILE_FLOATS 8192
#endif

// weft_tile_rows: rows dequantized per tile. Few tokens: 4 rows (the tile
// stays in L1 for the one pass). More: WEFT_TILE_FLOATS of f32.
static int weft_tile_rows(int K, int n) {
	if (n <= 4) return 4;
	int rb = WEFT_TILE_FLOATS / (K > 0 ? K : 1);
	if (rb < 4) rb = 4;
	if (rb > 64) rb = 64;
	return rb & ~3;
}

// ---- portable (any CPU; the compiler vectorizes for its baseline) ----
#define SFX _gen
#define VW 4
#define NRMAX 2
#define GMV 2
#define GNT 4
#include "kern_body.h"
#undef SFX
#undef VW
#undef NRMAX
#undef GMV
#undef GNT

#if WEFT_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define HAVE_F16C 1
#define SFX _avx2
#define VW 8
#define NRMAX 3
#define GMV 2
#define GNT 6
#include "kern_body.h"
#undef SFX
#undef VW
#undef NRMAX
#undef GMV
#undef GNT
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#define SFX _avx512
#define VW 16
#define NRMAX 4
#define GMV 2
#define GNT 12
#include "kern_body.h"
#undef SFX
#undef VW
#undef NRMAX
#undef GMV
#undef GNT
#undef HAVE_F16C
#pragma GCC pop_options
#endif

#include "kern_vnni.h"
#include "kern_i8.h"
#include "kern_peak.h"

// ISA selectors passed from Go.
enum { WEFT_GEN = 0, WEFT_AVX2 = 1, WEFT_AVX512 = 2, WEFT_VNNI = 3 };

// weft_uses_vnni reports whether weft_matmul takes the integer path (it
// quantizes activations to 8 bits, which the tests must allow for).
static int weft_uses_lane(int isa, int type, int K, int n) {
#if WEFT_X86
	return isa == WEFT_VNNI && n >= LANE_MIN_N && lane_ok(type, K);
#else
	return 0;
#endif
}

// weft_uses_i8: whether an AVX2 (or AVX-512 without VNNI) CPU takes the
// integer row kernels of kern_i8.h.
static int weft_uses_i8(int isa, int type, int K, int n) {
#if WEFT_X86
	int maxn = i8_kquant(type) ? WEFT_I8_MAX_N_K : WEFT_I8_MAX_N;
	return (isa == WEFT_AVX2 || isa == WEFT_AVX512) && n < maxn && i8_ok(type, K);
#else
	return 0;
#endif
}

// weft_act_block: the columns that share one activation scale where
// weft_uses_vnni says the activations are quantized: 256 for the AVX2
// K-quant kernels (i8k_prep), 32 elsewhere.
static int weft_act_block(int isa, int type, int K, int n) {
#if WEFT_X86
	if (weft_uses_i8(isa, type, K, n) && i8_kquant(type)) return 256;
#endif
	(void)isa, (void)type, (void)K, (void)n;
	return 32;
}

static int weft_uses_vnni(int isa, int type, int K, int n) {
#if WEFT_X86
	if (weft_uses_lane(isa, type, K, n) || weft_uses_i8(isa, type, K, n)) return 1;
	return isa == WEFT_VNNI && n < WEFT_VNNI_MAX_N && vnni_ok(type, K);
#else
	return 0;
#endif
}

// Activations prepared once per product job and shared by its row chunks
// (weft_prep_kind; 0: the kernel uses x as it is): quantized and packed in
// lanes, or quantized per row. (The float GEMM packs its panels per chunk,
// on each worker: packing them once on the caller before the job measured
// 3-5% slower for 128-token prompts, the workers waiting for it.)
enum { WEFT_PREP_NONE = 0, WEFT_PREP_LANE = 1, WEFT_PREP_VNNI = 2, WEFT_PREP_I8 = 3, WEFT_PREP_I8K = 4 };

// weft_prep_kind: the kind of preparation the kernel for this product
// wants, and (*bytes) the buffer weft_prep fills for it.
static int weft_prep_kind(int isa, int type, int K, int n, long *bytes) {
	*bytes = 0;
#if WEFT_X86
	if (weft_uses_lane(isa, type, K, n)) {
		*bytes = lane_prep_bytes(K, n);
		return WEFT_PREP_LANE;
	}
	if (weft_uses_i8(isa, type, K, n)) {
		if (i8_kquant(type)) {
			*bytes = i8k_prep_bytes(K, n);
			return WEFT_PREP_I8K;
		}
		*bytes = i8_prep_bytes(K, n);
		return WEFT_PREP_I8;
	}
	if (weft_uses_vnni(isa, type, K, n)) {
		*bytes = vnni_prep_floats(K, n) * 4;
		return WEFT_PREP_VNNI;
	}
#endif
	return WEFT_PREP_NONE;
}

static void weft_prep(int kind, const float *x, int n, int K, void *out) {
#if WEFT_X86
	if (kind == WEFT_PREP_LANE) lane_prep(x, n, K, (uint8_t *)out);
	if (kind == WEFT_PREP_VNNI) vnni_prep_all(x, n, K, (float *)out);
	if (kind == WEFT_PREP_I8) i8_prep(x, n, K, (uint8_t *)out);
	if (kind == WEFT_PREP_I8K) i8k_prep(x, n, K, (uint8_t *)out);
#endif
}

// weft_matmul: rows [r0, r1) of y = W x for n tokens. prep is weft_prep's
// output for x (of kind weft_prep_kind(isa, type, K, n)) or NULL.
static int weft_matmul(int isa, int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		       const void *prep, int n, float *y, long ldy) {
#if WEFT_X86
	if (weft_uses_lane(isa, type, K, n)) return matmul_lane(type, w, rowBytes, K, r0, r1, x, (const uint8_t *)prep, n, y, ldy);
	if (weft_uses_i8(isa, type, K, n)) return matmul_i8(type, w, rowBytes, K, r0, r1, x, (const uint8_t *)prep, n, y, ldy);
	if (weft_uses_vnni(isa, type, K, n)) return matmul_vnni(type, w, rowBytes, K, r0, r1, x, (const float *)prep, n, y, ldy);
	if (isa >= WEFT_AVX512) return matmul_avx512(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
	if (isa == WEFT_AVX2) return matmul_avx2(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
#endif
	return matmul_gen(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
}

static float weft_dot(int isa, const float *a, const float *b, long n) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return dot_avx512(a, b, n);
	if (isa == WEFT_AVX2) return dot_avx2(a, b, n);
#endif
	return dot_gen(a, b, n);
}

static void weft_f16_to_f32s(int isa, float *dst, const uint16_t *src, long n) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return f16_to_f32s_avx512(dst, src, n);
	if (isa == WEFT_AVX2) return f16_to_f32s_avx2(dst, src, n);
#endif
	f16_to_f32s_gen(dst, src, n);
}

static void weft_f32_to_f16s(int isa, uint16_t *dst, const float *src, long n) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return f32_to_f16s_avx512(dst, src, n);
	if (isa == WEFT_AVX2) return f32_to_f16s_avx2(dst, src, n);
#endif
	f32_to_f16s_gen(dst, src, n);
}

static void weft_exps(int isa, float *dst, const float *src, long n) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return exps_avx512(dst, src, n);
	if (isa == WEFT_AVX2) return exps_avx2(dst, src, n);
#endif
	exps_gen(dst, src, n);
}

static void weft_silu_mul(int isa, float *gate, const float *up, long n) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return silu_mul_avx512(gate, up, n);
	if (isa == WEFT_AVX2) return silu_mul_avx2(gate, up, n);
#endif
	silu_mul_gen(gate, up, n);
}

static void weft_mulvect(int isa, float *y, const float *a, const float *x, long rows, long cols) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return mulvect_avx512(y, a, x, rows, cols);
	if (isa == WEFT_AVX2) return mulvect_avx2(y, a, x, rows, cols);
#endif
	mulvect_gen(y, a, x, rows, cols);
}

static void weft_round_f16s(int isa, float *dst, const float *src, long n) {
#if WEFT_X86
	if (isa >= WEFT_AVX512) return round_f16s_avx512(dst, src, n);
	if (isa == WEFT_AVX2) return round_f16s_avx2(dst, src, n);
#endif
	round_f16s_gen(dst, src, n);
}
