//go:build cgo

// kernels.c: the run-time dispatch of package kernels' C kernels (the entry
// points kernels.h declares for Go) and the rules that pick a kernel by
// token count. Go passes the ISA it found at start-up (cpu.go); the per-ISA
// kernels live in kern_gen.c, kern_avx2.c, kern_avx512.c, kern_vnni.c and
// kern_i8.c, the per-thread scratch they share in scratch.c. Its
// globals are its own (static): the injected test failure, set only
// through weft_inject_failure, and what the CPU rules cached (the CPU's
// AMD family, the F16 GEMM thresholds).
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels.h"
#include "scratch.h"

// weft_fault: the status weft_inject_failure asked every weft_matmul to
// return (WEFT_OK: none). The tests use it to reach every caller's error
// path; a relaxed atomic load costs nothing beside a kernel call.
static int weft_fault;

void weft_inject_failure(int status) { __atomic_store_n(&weft_fault, status, __ATOMIC_RELAXED); }

int weft_x86_kernels(void) { return WEFT_X86; }

// Choosing a kernel by token count (AVX-512 VNNI): from WEFT_LANE_MIN_N
// (Q4_K and Q6_K: WEFT_LANE_MIN_N_KQUANT, on Zen 4 WEFT_LANE_MIN_N_KQUANT_ZEN4;
// MXFP4: WEFT_LANE_MIN_N_MXFP4; Q4_0 and IQ4_NL: WEFT_LANE_MIN_N_Q4_0_IQ4_NL;
// Q5_K: WEFT_LANE_MIN_N_Q5_K),
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and the 4-bit table types take
// the int8 lane GEMM (kern_vnni.c), whose 4-byte
// weight broadcast feeds 64 products; below WEFT_VNNI_MAX_N the integer row
// kernels take the types they know. Otherwise: below WEFT_GEMM_BIG_N the
// dot-product kernel runs; from it the packed GEMM (weights transposed per
// tile, tokens broadcast), whose per-tile transposition pays off only over
// many tokens. The AVX-512 build takes the GEMM earlier (weft_gemm_pays),
// and both x86 builds take it from a few tokens for short rows
// (weft_gemm_short_rows). Tokens along the vector lanes pay only in int8: a
// float lane GEMM is slower than the dot-product kernel at 64-128 tokens.
//
// AVX2 CPUs without VNNI take the integer row kernels (kern_i8.c) below
// WEFT_I8_MAX_N tokens for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 and below
// WEFT_I8_MAX_N_K for Q4_K, Q5_K, Q6_K and IQ4_XS: they beat the float kernels
// several times over for one token and lose from 64, where the float
// kernels share each dequantized row among more tokens; the K-quants and
// IQ4_XS, with per-256 activations, hold out longer (on Zen 3 up to
// WEFT_GEMM_BIG_N, where the other types take the GEMM from
// WEFT_AVX2_GEMM_N: weft_avx2_zen3). AVX-512 VNNI CPUs
// take them too below the lane GEMM (IQ4_XS below WEFT_LANE_MIN_N, Q4_K
// and Q6_K below WEFT_LANE_MIN_N_KQUANT): one FMA
// per super-block, where the VNNI row kernel scales every 64 columns in
// float; there the same kernel runs 512 bits wide (weft_k512_matmul in
// kern_vnni.c), with the same results (IQ4_XS: kern_iq4.c's AVX2 kernel
// itself). IQ4_XS takes per-256 activations on every int8 path, as
// llama.cpp's Q8_K, so that they round as llama.cpp rounds them. The
// figures behind each threshold are in BENCHMARKS.md §1.

// weft_amd_fam: the CPU's family + 1 when it is AMD's, 1 otherwise (0 until
// weft_amd_family has read it).
static unsigned weft_amd_fam;

// weft_amd_family: the CPU's family (0x19 Zen 3 and 4, 0x1a Zen 5) when
// it is AMD's, else 0.
static unsigned weft_amd_family(void) {
	unsigned v = __atomic_load_n(&weft_amd_fam, __ATOMIC_RELAXED);
	if (v) return v - 1;
	unsigned fam = 0;
#if WEFT_X86
	unsigned a, b, c, d;
	if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541 /* "Auth"enticAMD */ && __get_cpuid(1, &a, &b, &c, &d)) {
		fam = (a >> 8) & 0xf;
		if (fam == 0xf) fam += (a >> 20) & 0xff;
	}
#endif
	__atomic_store_n(&weft_amd_fam, fam + 1, __ATOMIC_RELAXED);
	return fam;
}

// weft_f16_gemm_n, weft_f16_gemm_long_n: the token counts from which F16
// takes the packed GEMM in the AVX-512 build, for rows of K < WEFT_LONG_ROW_K and of
// K >= WEFT_LONG_ROW_K (0 until weft_f16_gemm_from has looked at the CPU).
static int weft_f16_gemm_n, weft_f16_gemm_long_n;

// weft_f16_gemm_from: F16's dot-product kernel converts the rows in
// registers for every group of 4 tokens, the GEMM once per 32-row tile for
// all tokens, with 2 x 12 accumulators fed by one FMA each per k. The rule:
// Intel's AVX-512 cores take the GEMM from one full 12-token panel
// (WEFT_F16_GEMM_N), for rows that are not whole vectors: rows of whole
// vectors put the tokens along the vector from 3 tokens up to
// WEFT_GEMM_BIG_N instead (weft_f16_tokvec, asked first, as it is on Zen 5
// for every row of whole vectors from 16 or 32 tokens); AMD from family 25 on (Zen 4, which runs each 512-bit
// FMA as two halves, and Zen 5, which converts and multiplies in registers
// fast enough) keeps the dot kernel below WEFT_GEMM_BIG_N tokens, but Zen 5
// (family 26 on) takes it for long rows (K >= WEFT_LONG_ROW_K) from
// WEFT_F16_GEMM_LONG_N tokens: there the dot kernel's four rows and four
// tokens (48 KiB at K = 2048) fill its whole L1 (on Zen 4 the GEMM lost at
// K = 2048 too). The figures behind it, per machine and shape, are in
// BENCHMARKS.md §1 (what bounds the CPU runtime: kernel choice by batch
// size). Each CPU always gets the same answer, so a product's kernel never
// changes from one run to the next.
static int weft_f16_gemm_from(int K) {
	int v = __atomic_load_n(&weft_f16_gemm_n, __ATOMIC_ACQUIRE);
	if (v) return K >= WEFT_LONG_ROW_K ? __atomic_load_n(&weft_f16_gemm_long_n, __ATOMIC_RELAXED) : v;
	v = WEFT_F16_GEMM_N < WEFT_GEMM_BIG_N ? WEFT_F16_GEMM_N : WEFT_GEMM_BIG_N;
	int vl = v;
	unsigned fam = weft_amd_family();
	if (fam >= 0x19) v = vl = WEFT_GEMM_BIG_N;
	if (fam >= 0x1a) vl = WEFT_F16_GEMM_LONG_N < WEFT_GEMM_BIG_N ? WEFT_F16_GEMM_LONG_N : WEFT_GEMM_BIG_N;
	__atomic_store_n(&weft_f16_gemm_long_n, vl, __ATOMIC_RELAXED);
	__atomic_store_n(&weft_f16_gemm_n, v, __ATOMIC_RELEASE); // after the long rows' count
	return K >= WEFT_LONG_ROW_K ? vl : v;
}

// weft_one_row_reads: whether the AVX2 and AVX-512 builds read weights used
// in place (F16, F32) for one or two tokens a row at a time, with no
// software prefetch (but weft_fetch_l2's in large chunks), rather than two
// adjacent rows at a time with the next ones prefetched. AMD family 25
// does: on Zen 4 its hardware prefetchers follow one row's stream best,
// and the pair read with its prefetch decoded F16 slower in both builds
// (Zen 3, the same family, was not measured). Zen 5 and Intel keep the pair read, which on Zen 5 was the
// faster one. The sums are the same bits either way. The figures:
// BENCHMARKS.md §1 (what bounds the CPU runtime).
int weft_one_row_reads(void) { return weft_amd_family() == 0x19; }

// weft_pair_fetch_lines: Intel's cores (not AMD's) fetch the pair read's
// rows four ahead line by line for one token too, as for two: on machine C
// (Intel Xeon, family 6 model 167) the 1B preset in F16 decoded one
// sequence in 81-84 ms a step against 103-105 with the whole next pair
// fetched as a pair starts, which on Zen 5 (machine A) was the faster one
// beyond the cache. The sums are the same bits either way.
int weft_pair_fetch_lines(void) { return weft_amd_family() == 0; }

// weft_fetch_l2: whether the Q8_0 row kernel (kern_vnni.c's vnni_row)
// fetches the row four ahead into L2 (prefetcht1) rather than L1, Q4_1,
// Q5_0, Q5_1 and Q5_K there fetch it the same way rather than the row after next
// in a burst into L1, and the one-row read of F16 and F32 weights
// (body_matmul.h's blockt, weft_one_row_reads) fetches WEFT_ONE_ROW_FETCH
// bytes ahead into L2 where it fetched nothing, for a chunk of rows of at
// least WEFT_FETCH_L2_BYTES; and whether the IQ4_NL / MXFP4 / Q4_0 row
// kernel (body_iq4vnni.h's iq4_rows) fetches the tile after next into L2,
// a group's share at a time, for one or two tokens, whatever the chunk.
// AMD family 25 (Zen 4) does, as its K-quant pair kernel does
// (weft_kq_spread_fetch): into L1 every line in flight holds one of the
// L1's few miss buffers. Machine D, two threads, the 1B preset's matrices:
// Q8_0 read about 25 % faster for one token and 10 % for two into L2, F16
// 10-15 % faster with the fetch, and the decode of one sequence ran 4-46 %
// (Q8_0), about 14 % (F16, on average) and 19-22 % (Q5_K_M) faster. synth-110m's smaller
// chunks (0.15-0.8 MB) read level in a kernel benchmark, but its Q8_0
// decode ran 5-20 % slower into L2 and its F16 decode lower with the fetch
// (cause not found), hence the floor; so did synth-110m in Q4_0 on
// vnni_row. The table kernel has none: gptoss-1.5b's MXFP4 experts (0.56
// MB each, one chunk) decoded about 10 % faster into L2, and synth-110m in
// IQ4_NL and Q4_0 level or faster. Zen 5 and Intel keep their fetches,
// which were not measured against these there. The figures: BENCHMARKS.md
// §1 (what bounds the CPU runtime).
int weft_fetch_l2(void) { return weft_amd_family() == 0x19; }

// weft_kq_spread_fetch: whether the 512-bit Q4_K / Q6_K pair kernel
// (weft_k512_matmul) fetches the pair four rows ahead a super-block's share
// at a time, into L2 (KQ_FOR_PAIRS in kern_vnni.c), rather than all of the
// next pair as a pair starts. AMD from family 25 on (Zen 4: the AVX-512
// build runs on no Zen 3; Zen 5) does: on Zen 4, with the burst, the 1B
// preset's Q4_K_M decoded one to four sequences 1.2-1.7x slower; on Zen 5
// (machine A, family 26 model 2) one sequence decoded at 46.6-57.3 tokens/s
// against 44.5-52.8 (ahead in 6 of 7 alternating rounds), four at
// 124.5-134.4 against 93.6-122.4, and synth-110m's Q4_K_M level. Intel
// keeps the burst, which was not measured against the spread there. The
// figures: BENCHMARKS.md §1 (what bounds the CPU runtime).
int weft_kq_spread_fetch(void) { return weft_amd_family() >= 0x19; }

// weft_gemm_pays: the AVX-512 build packs by transposing in registers, so
// its GEMM pays from WEFT_VNNI_MAX_N tokens for long rows (K >= WEFT_LONG_ROW_K, where
// the dot-product kernel slows down), and from 96 (F32: no dequantization
// to share) or 48 (quantized types) for shorter ones. F16 follows
// weft_f16_gemm_from.
int weft_gemm_pays(int type, int K, int n) {
	if (type == 1) return n >= weft_f16_gemm_from(K);
	if (n < WEFT_VNNI_MAX_N) return 0;
	if (K >= WEFT_LONG_ROW_K) return 1;
	return n >= (type == 0 ? 96 : 48);
}

// weft_avx2_zen3: whether the AVX2 build's Zen 3 rules apply: AMD family 25,
// whose CPUs run that build natively on Zen 3 (Zen 4 when forced to it).
// There the packed GEMM takes products from WEFT_AVX2_GEMM_N tokens
// (weft_avx2_gemm_pays) and the per-256 integer row kernels keep the
// K-quants and IQ4_XS up to WEFT_GEMM_BIG_N (weft_uses_i8). On machine F
// (AMD EPYC Zen 3, family 25 model 1), one thread, 512 x 768 and 256 x 2048,
// best of 40-200 calls alternating: the GEMM ran F16 and Q8_0 at 128 tokens
// at 80-85 GFLOP/s against the float tile's 66-76, and level with it from
// 24 to 40; the integer kernels ran Q4_K at 128 tokens at 89-97 against the
// GEMM's 79-82, Q6_K at 91-92 against 62-64, Q5_K and IQ4_XS level or
// ahead to 159, and the GEMM led from 256. Other AVX2 CPUs keep the
// thresholds measured on Zen 1 (not measured against these). The figures:
// BENCHMARKS.md §1 (what bounds the CPU runtime).
static int weft_avx2_zen3(void) { return weft_amd_family() == 0x19; }

int weft_avx2_gemm_pays(int n) { return n >= WEFT_AVX2_GEMM_N && weft_avx2_zen3(); }

// weft_avx2_f16_tile: whether the AVX2 build converts F16 rows into the
// float tile for n tokens (from WEFT_F16_TILE_N) rather than in registers
// for every group of 3 tokens. Zen 3 does not: there the float tile of 4
// rows at K = 2048 and more (32 KiB) and the tokens beside it outgrow the
// 32 KiB L1. Machine F, one thread, best of 30 calls alternating, GFLOP/s
// in registers against the tile: 512 x 2048 at 8 tokens 65 against 57, 16
// 69 against 67, 32 72 against 69; 256 x 8192 65 / 55, 68 / 62, 71 / 64;
// and the GEMM, from WEFT_AVX2_GEMM_N, overtakes both between 40 and 48.
int weft_avx2_f16_tile(int n) { return n >= WEFT_F16_TILE_N && !weft_avx2_zen3(); }

// weft_f16_tokvec_mode: -1 the CPU's rule, 0 or 1 forced (tests).
static int weft_f16_tokvec_mode = -1;

void weft_set_f16_tokvec(int mode) { __atomic_store_n(&weft_f16_tokvec_mode, mode, __ATOMIC_RELAXED); }

// weft_f16_tokvec: on Intel's AVX-512 cores, F16 products of
// WEFT_F16_TOKVEC_N tokens up to WEFT_GEMM_BIG_N put the tokens along the
// vector (body_matmul.h's tokvec: a panel of 16 tokens per register, each
// weight broadcast into one FMA per panel, no horizontal sums and no
// transposed copy of the rows), where the dot kernel converted the rows
// into a float tile of 4 rows and read all tokens past it from L2 for
// every 4 rows, and from 24 tokens the GEMM transposed them. On machine C
// (Intel Xeon, family 6 model 167) the 1B preset decoded 16 sequences in
// 148-160 ms a step against 255-256, 32 in 240-256 against 440-477, 64 in
// 529-553 against 728-760 and 3 or 4 in 143-151 against 153-158.
// Zen 5 (AMD family 26 on) takes it at every token count from
// WEFT_F16_TOKVEC_ZEN5_N (16) for long rows (K >= WEFT_LONG_ROW_K) and from
// WEFT_F16_TOKVEC_ZEN5_SHORT_N (32) for shorter ones, in place of the dot
// kernel and of the packed GEMM, the panels prepared once per product job
// (WEFT_PREP_TOKVEC). On machine A (AMD EPYC Zen 5, family 26 model 2),
// one core, the 1B preset's long rows in the engine's row chunks, it ran
// 143-208 GFLOP/s where the dot kernel ran 110-160 at 16-32 tokens and the
// GEMM 76-189 at 64-512; at K = 768 it was level with the dot kernel from
// 32 tokens (behind below) and ahead of the GEMM from 160. Zen 4 (family
// 25), which runs each 512-bit FMA as two halves, keeps its rules (not
// measured with it). The figures: BENCHMARKS.md §1 (what bounds the CPU
// runtime). Rows of whole vectors (K a multiple of 16) only. Each (row,
// token) sum runs over k in order, so its bits differ from the dot
// kernel's (and batch-invariant products, which pick by one token, never
// take it).
int weft_f16_tokvec(int K, int n) {
	if (K % 16) return 0;
	int mode = __atomic_load_n(&weft_f16_tokvec_mode, __ATOMIC_RELAXED);
	if (mode >= 0) return mode;
	unsigned fam = weft_amd_family();
	if (fam == 0) return n >= WEFT_F16_TOKVEC_N && n < WEFT_GEMM_BIG_N;
	return fam >= 0x1a && n >= (K >= WEFT_LONG_ROW_K ? WEFT_F16_TOKVEC_ZEN5_N : WEFT_F16_TOKVEC_ZEN5_SHORT_N);
}

// weft_gemm_short_rows: short rows take the packed GEMM from a few tokens
// on (AVX2 and AVX-512 builds): the dot-product kernel ends each output
// with a horizontal sum, which for a row of 64 costs about as much as its
// multiply-adds, and for the head dims of tiny models (8-32, attention's
// Q·Kᵀ) several times more. From K = 256 the two are about even.
int weft_gemm_short_rows(int K, int n) {
	return (K <= 32 && n >= 4) || (K <= 64 && n >= 8) || (K <= 192 && n >= 24);
}

// weft_tile_rows: rows dequantized per tile. Few tokens: 4 rows (the tile
// stays in L1 for the one pass). More: WEFT_TILE_FLOATS of f32, a tile of
// few long rows rather than many, so that it stays in L1 while every token
// passes it.
int weft_tile_rows(int K, int n) {
	if (n <= 4) return 4;
	int rb = WEFT_TILE_FLOATS / (K > 0 ? K : 1);
	if (rb < 4) rb = 4;
	if (rb > 64) rb = 64;
	return rb & ~3;
}

int weft_nsel(int *isa, int n) {
	int inv = *isa & WEFT_INVARIANT;
	*isa &= WEFT_ISA_MASK;
	return inv ? 1 : n;
}

// weft_lane_min_n: the token count from which type takes the int8 lane
// GEMM (AVX-512 VNNI).
#if WEFT_X86
static int weft_lane_min_n(int type) {
	if (type == 39) return WEFT_LANE_MIN_N_MXFP4;
	if (type == 2 || type == 20) return WEFT_LANE_MIN_N_Q4_0_IQ4_NL;
	if (type == 12 || type == 14) return weft_amd_family() == 0x19 ? WEFT_LANE_MIN_N_KQUANT_ZEN4 : WEFT_LANE_MIN_N_KQUANT;
	if (type == 13) return WEFT_LANE_MIN_N_Q5_K;
	return WEFT_LANE_MIN_N;
}
#endif

// weft_uses_lane: whether weft_matmul takes the int8 lane GEMM.
static int weft_uses_lane(int isa, int type, int K, int n) {
#if WEFT_X86
	return isa == WEFT_VNNI && n >= weft_lane_min_n(type) && weft_lane_ok(type, K);
#else
	(void)isa, (void)type, (void)K, (void)n;
	return 0;
#endif
}

// weft_uses_i8: whether an AVX2 (or AVX-512 without VNNI) CPU takes the
// integer row kernels of kern_i8.c.
static int weft_uses_i8(int isa, int type, int K, int n) {
#if WEFT_X86
	int maxn = !weft_i8_kquant(type) ? WEFT_I8_MAX_N : isa == WEFT_AVX2 && weft_avx2_zen3() ? WEFT_GEMM_BIG_N : WEFT_I8_MAX_N_K;
	if (isa == WEFT_VNNI) // K-quants below the lane GEMM: per-256 activations, one FMA per super-block (Q5_K: vnni_row's)
		return weft_i8_kquant(type) && type != 13 && n < weft_lane_min_n(type) && weft_i8_ok(type, K);
	return (isa == WEFT_AVX2 || isa == WEFT_AVX512) && n < maxn && weft_i8_ok(type, K);
#else
	(void)isa, (void)type, (void)K, (void)n;
	return 0;
#endif
}

// weft_act_block: 256 for the K-quant and IQ4_XS row kernels
// (weft_i8k_prep) and IQ4_XS's lane GEMM, 32 elsewhere.
int weft_act_block(int isa, int type, int K, int n) {
	n = weft_nsel(&isa, n);
#if WEFT_X86
	if (weft_uses_lane(isa, type, K, n)) return weft_lane_act_block(type);
	if (weft_uses_i8(isa, type, K, n) && weft_i8_kquant(type)) return 256;
#endif
	(void)isa, (void)type, (void)K, (void)n;
	return 32;
}

// weft_uses_vnni_rows: whether weft_matmul takes the VNNI row kernels
// (kern_vnni.c) when neither the lane GEMM nor kern_i8.c takes the product.
#if WEFT_X86
static int weft_uses_vnni_rows(int isa, int type, int K, int n) {
	return isa == WEFT_VNNI && n < WEFT_VNNI_MAX_N && weft_vnni_ok(type, K);
}

// weft_uses_tokvec: whether weft_matmul takes F16 with the tokens along the
// vector (the AVX-512 build's tokvec, weft_f16_tokvec), on panels that a
// product job prepares once (WEFT_PREP_TOKVEC).
static int weft_uses_tokvec(int isa, int type, int K, int n) {
	return isa >= WEFT_AVX512 && type == 1 && weft_f16_tokvec(K, n);
}
#endif

int weft_uses_vnni(int isa, int type, int K, int n) {
	n = weft_nsel(&isa, n);
#if WEFT_X86
	return weft_uses_lane(isa, type, K, n) || weft_uses_i8(isa, type, K, n) || weft_uses_vnni_rows(isa, type, K, n);
#else
	(void)isa, (void)type, (void)K, (void)n;
	return 0;
#endif
}

#if WEFT_X86
// weft_tokvec_prep_bytes: the panels of 16 tokens (zeros past n) of K
// floats each, and 64 bytes to align their start.
long weft_tokvec_prep_bytes(int K, int n) { return (long)(n + 15) / 16 * K * 16 * 4 + 64; }
#endif

int weft_prep_kind(int isa, int type, int K, int n, long *bytes) {
	*bytes = 0;
	int nsel = weft_nsel(&isa, n);
#if WEFT_X86
	if (weft_uses_lane(isa, type, K, nsel)) {
		*bytes = weft_lane_prep_bytes(K, n);
		return weft_lane_act_block(type) == 256 ? WEFT_PREP_LANE256 : WEFT_PREP_LANE;
	}
	if (weft_uses_i8(isa, type, K, nsel)) {
		if (weft_i8_kquant(type)) {
			*bytes = weft_i8k_prep_bytes(K, n);
			return WEFT_PREP_I8K;
		}
		*bytes = weft_i8_prep_bytes(K, n);
		return WEFT_PREP_I8;
	}
	if (weft_uses_vnni_rows(isa, type, K, nsel)) {
		*bytes = weft_vnni_prep_floats(K, n) * 4;
		return WEFT_PREP_VNNI;
	}
	if (weft_uses_tokvec(isa, type, K, nsel)) {
		*bytes = weft_tokvec_prep_bytes(K, n);
		return WEFT_PREP_TOKVEC;
	}
#else
	(void)isa, (void)type, (void)K, (void)n, (void)nsel;
#endif
	return WEFT_PREP_NONE;
}

void weft_prep(int kind, const float *x, int n, int K, void *out) {
#if WEFT_X86
	if (kind == WEFT_PREP_LANE) weft_lane_prep(x, n, K, 32, (uint8_t *)out);
	if (kind == WEFT_PREP_LANE256) weft_lane_prep(x, n, K, 256, (uint8_t *)out);
	if (kind == WEFT_PREP_VNNI) weft_vnni_prep(x, n, K, (float *)out);
	if (kind == WEFT_PREP_I8) weft_i8_prep(x, n, K, (uint8_t *)out);
	if (kind == WEFT_PREP_I8K) weft_i8k_prep(x, n, K, (uint8_t *)out);
	if (kind == WEFT_PREP_TOKVEC) weft_tokvec_prep_avx512(x, n, K, out);
#else
	(void)kind, (void)x, (void)n, (void)K, (void)out;
#endif
}

static int weft_matmul_in(int isa, int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		const void *prep, int n, float *y, long ldy);

int weft_matmul(int isa, int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		const void *prep, int n, float *y, long ldy) {
	int fault = __atomic_load_n(&weft_fault, __ATOMIC_RELAXED);
	if (fault != WEFT_OK) return fault;
	weft_scratch_begin();
	int rc = weft_matmul_in(isa, type, w, rowBytes, K, r0, r1, x, prep, n, y, ldy);
	weft_scratch_end();
	return rc;
}

// weft_matmul_in is weft_matmul's product, with a scratch set held.
static int weft_matmul_in(int isa, int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		const void *prep, int n, float *y, long ldy) {
	int nsel = weft_nsel(&isa, n);
#if WEFT_X86
	if (weft_uses_lane(isa, type, K, nsel))
		return weft_lane_matmul(type, w, rowBytes, K, r0, r1, x, (const uint8_t *)prep, n, y, ldy);
	if (weft_uses_i8(isa, type, K, nsel)) {
		if (isa == WEFT_VNNI) // Q4_K, Q6_K: the same kernel 512 bits wide, the same bits; IQ4_XS: the AVX2 one
			return weft_k512_matmul(type, w, rowBytes, K, r0, r1, x, (const uint8_t *)prep, n, y, ldy);
		return weft_i8_matmul(type, w, rowBytes, K, r0, r1, x, (const uint8_t *)prep, n, y, ldy);
	}
	if (weft_uses_vnni_rows(isa, type, K, nsel))
		return weft_vnni_matmul(type, w, rowBytes, K, r0, r1, x, (const float *)prep, n, y, ldy);
	if (weft_uses_tokvec(isa, type, K, nsel))
		return weft_tokvec_matmul_avx512(w, rowBytes, K, r0, r1, x, prep, n, y, ldy);
	if (isa >= WEFT_AVX512) return weft_matmul_avx512(type, w, rowBytes, K, r0, r1, x, n, nsel, y, ldy);
	if (isa == WEFT_AVX2) return weft_matmul_avx2(type, w, rowBytes, K, r0, r1, x, n, nsel, y, ldy);
#else
	(void)isa, (void)prep;
#endif
	return weft_matmul_gen(type, w, rowBytes, K, r0, r1, x, n, nsel, y, ldy);
}

// The vector kernels: the best of the three float builds the ISA allows
// (the VNNI selector runs the AVX-512 ones).
#if WEFT_X86
#define WEFT_PICK(isa, name, ...)                                                                                  \
	do {                                                                                                       \
		if ((isa) >= WEFT_AVX512) return name##_avx512(__VA_ARGS__);                                       \
		if ((isa) == WEFT_AVX2) return name##_avx2(__VA_ARGS__);                                           \
		return name##_gen(__VA_ARGS__);                                                                    \
	} while (0)
#else
#define WEFT_PICK(isa, name, ...)                                                                                  \
	do {                                                                                                       \
		(void)(isa);                                                                                       \
		return name##_gen(__VA_ARGS__);                                                                    \
	} while (0)
#endif

float weft_dot(int isa, const float *a, const float *b, long n) { WEFT_PICK(isa, weft_dot, a, b, n); }

void weft_f16_to_f32s(int isa, float *dst, const uint16_t *src, long n) {
	WEFT_PICK(isa, weft_f16_to_f32s, dst, src, n);
}

void weft_f32_to_f16s(int isa, uint16_t *dst, const float *src, long n) {
	WEFT_PICK(isa, weft_f32_to_f16s, dst, src, n);
}

void weft_exps(int isa, float *dst, const float *src, long n) { WEFT_PICK(isa, weft_exps, dst, src, n); }

void weft_silu_mul(int isa, float *gate, const float *up, long n) { WEFT_PICK(isa, weft_silu_mul, gate, up, n); }
void weft_add(int isa, float *dst, const float *x, long n) { WEFT_PICK(isa, weft_add, dst, x, n); }
void weft_swiglu_oai(int isa, float *gate, const float *up, long n, float alpha, float limit) {
	WEFT_PICK(isa, weft_swiglu_oai, gate, up, n, alpha, limit);
}

void weft_mulvect(int isa, float *y, const float *a, const float *x, long rows, long cols) {
	WEFT_PICK(isa, weft_mulvect, y, a, x, rows, cols);
}

void weft_round_f16s(int isa, float *dst, const float *src, long n) { WEFT_PICK(isa, weft_round_f16s, dst, src, n); }

// attnISA is the kernel set attention takes for head dimension hd: heads
// narrower than 16 (stories260K's 8) or not a multiple of it run faster in
// the 8-wide build than in the 16-wide one's tails.
static int attnISA(int isa, int hd) { return isa >= WEFT_AVX512 && hd % 16 != 0 && hd % 8 == 0 ? WEFT_AVX2 : isa; }

void watt_attend(int isa, int wh, float *out, const float *q, int nq, const void *k, const void *v,
		 const int32_t *blocks, long bs, long stride, long off, int hd, int lo, int n, float scale,
		 const float *sinks, float *scratch) {
	isa = attnISA(isa, hd);
	if (wh) WEFT_PICK(isa, watt_attend_h, out, q, nq, k, v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch);
	WEFT_PICK(isa, watt_attend_f, out, q, nq, k, v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch);
}

void watt_attend_q8(int isa, float *out, const float *q, int nq, const int8_t *kq, const float *kd, const int8_t *vq,
		    const float *vd, const int32_t *blocks, long bs, long stride, long off, int hd, int lo, int n,
		    float scale, const float *sinks, float *scratch) {
	const watt_q8 k = {kq, kd}, v = {vq, vd};
#if WEFT_X86
	if (isa == WEFT_VNNI && hd % 64 == 0) {
		watt_attend_q_vnni(out, q, nq, &k, &v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch);
		return;
	}
#endif
	WEFT_PICK(isa, watt_attend_q, out, q, nq, &k, &v, blocks, bs, stride, off, hd, lo, n, scale, sinks, scratch);
}

void watt_attend_chunk(int isa, float *out, const float *q, long ldq, int T, int nh, int hd, const float *kt,
		       const float *v, int m, int pos0, int window, float scale, const float *sinks, int wh,
		       float *scratch) {
	isa = attnISA(isa, hd);
	WEFT_PICK(isa, watt_attend_chunk, out, q, ldq, T, nh, hd, kt, v, m, pos0, window, scale, sinks, wh, scratch);
}

// watt_panel_k: row by row, each element to its line of the panel (a
// panel of 64 rows of 64 to 256 floats fills its lines in L1).
void watt_panel_k(float *kt, const float *k, int p0, int n, int hd) {
	for (int r = 0; r < n; r++) {
		const int p = p0 + r;
		float *dst = kt + (long)(p / WATT_KP) * WATT_KP * hd + p % WATT_KP;
		const float *src = k + (long)r * hd;
		for (int d = 0; d < hd; d++) dst[(long)d * WATT_KP] = src[d];
	}
}
