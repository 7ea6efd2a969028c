// kernels.h: the prototypes of package kernels' C kernels, the header the
// cgo preambles (kernels_cgo.go, attn_cgo.go) and the C translation units
// include. It declares, and defines nothing but constants.
//
// Translation units (cgo compiles every .c file of the package; each is
// built only with cgo, see its go:build line; no .c file includes another):
//   kernels.c      run-time dispatch (the weft_* and watt_* entry points Go
//                  calls), the token-count thresholds
//   scratch.c      the scratch arena (scratch.h), its only owner
//   kern_gen.c     portable kernels (the compiler's baseline vectors)
//   kern_avx2.c    AVX2 + FMA + F16C kernels            (amd64 only)
//   kern_avx512.c  AVX-512 F/BW/VL/DQ kernels           (amd64 only)
//   kern_vnni.c    AVX-512 VNNI int8 kernels            (amd64 only)
//   kern_i8.c      AVX2 int8 kernels for CPUs without VNNI (amd64 only)
//   kern_iq4.c     AVX2 and AVX-512 VNNI int8 kernels of IQ4_NL, IQ4_XS
//                  and MXFP4                            (amd64 only)
//   kern_peak.c    the arithmetic peaks and the memory stream of weft bench
// kern_gen.c, kern_avx2.c and kern_avx512.c instantiate the same fragments
// (body_matmul.h, body_attn.h, with body_exp.h and body_f16.h inside them)
// once each, under their own GCC target pragma and name suffix;
// body_kquant.h holds what kern_i8.c and kern_vnni.c's K-quant kernels
// share (the Q4_K scales, the closing sum, the walk over rows);
// body_iq4.h the IQ4_NL / IQ4_XS / MXFP4 tables and row dequantizers
// (body_matmul.h includes it); body_iq4vnni.h the VNNI row kernel of
// IQ4_NL and MXFP4, which kern_iq4.c instantiates twice (its weights
// loaded with and without AVX-512 VBMI byte permutes). Fragments
// are included only by those .c files, never by this header or by each
// other in a cycle. The units share no mutable data but the scratch arena,
// reached only through weft_scratch.
#ifndef WEFT_KERNELS_H
#define WEFT_KERNELS_H

#include <stdint.h>

// WEFT_X86: build the x86 SIMD kernels (-DWEFT_PORTABLE_ONLY checks the
// portable code alone on an x86 host).
#if defined(__x86_64__) && !defined(WEFT_PORTABLE_ONLY)
#define WEFT_X86 1
#else
#define WEFT_X86 0
#endif

// ISA selectors passed from Go (activeISA - isaC), with WEFT_INVARIANT
// or-ed in for batch-invariant products: the kernel is then chosen as for
// one token whatever n is, so that a token's result never depends on the
// other tokens of the call (weft_nsel; see SetBatchInvariant in Go).
enum { WEFT_GEN = 0, WEFT_AVX2 = 1, WEFT_AVX512 = 2, WEFT_VNNI = 3, WEFT_ISA_MASK = 0xff, WEFT_INVARIANT = 0x100 };

// Status codes of the kernels that can fail (weft_matmul); Go turns each
// into an error (kernelError).
enum {
	WEFT_OK = 0,
	WEFT_EUNSUPPORTED = -1, // the kernel has no code for this weight type or row length
	WEFT_ENOMEM = -2,       // a thread's scratch buffer could not be allocated
};

// Activations prepared once per product job and shared by its row chunks
// (weft_prep_kind; WEFT_PREP_NONE: the kernel uses x as it is): quantized
// and packed in lanes, or quantized per row. The float GEMM packs its
// panels per chunk, on each worker, so that no worker waits for the caller
// to pack them.
// WEFT_PREP_LANE256 is the lane packing with one scale per 256 columns
// (IQ4_XS). WEFT_PREP_TOKVEC is F16's panels of 16 tokens transposed for
// the tokens-along-the-vector kernel (weft_f16_tokvec).
enum {
	WEFT_PREP_NONE = 0,
	WEFT_PREP_LANE = 1,
	WEFT_PREP_VNNI = 2,
	WEFT_PREP_I8 = 3,
	WEFT_PREP_I8K = 4,
	WEFT_PREP_LANE256 = 5,
	WEFT_PREP_TOKVEC = 6,
};

// ---- token-count thresholds (kernels.c states the measurements' rules) ----

// Below WEFT_VNNI_MAX_N tokens, AVX-512 VNNI CPUs take the integer row
// kernels for the types they know; from WEFT_LANE_MIN_N, Q8_0,
// Q4_1, Q5_0, Q5_1 and IQ4_XS take the int8 lane GEMM: its 16-token panels, half empty at 8
// tokens, already match the row kernels there, which read each row once
// per 4 (8) tokens, and beat them above (figures: BENCHMARKS.md §1).
#define WEFT_VNNI_MAX_N 24
#define WEFT_LANE_MIN_N 8
// MXFP4 takes the lane GEMM later: its row kernel adds 256 columns in
// integers (kern_iq4.c), and the lane GEMM unpacks every expert's rows for
// the few tokens routed to it.
#define WEFT_LANE_MIN_N_MXFP4 16
// Q4_0 (on that row kernel too, as IQ4_NL with the values -8..7) and
// IQ4_NL take it from 11 tokens: on machine D the row kernel led at 8 to
// 10 tokens (the 1B preset in Q4_0, decode steps of 8 sequences 105-113
// tokens/s against the lane GEMM's 70-73, of 10 116-119 against 103-108;
// in IQ4_NL 110-112 against 88-96 at 8, level at 10) and the lane GEMM
// from 11 (Q4_0 105-118 against 102-107, IQ4_NL 122-130 against 116-118;
// BENCHMARKS.md §1, what bounds).
#define WEFT_LANE_MIN_N_Q4_0_IQ4_NL 11
// Q4_K and Q6_K take it later still: their 512-bit row kernel walks rows
// in pairs (weft_k512_matmul), and with weights beyond the cache it runs
// 8-20 tokens faster than the lane GEMM, whose step costs about the same
// from 16 tokens to 32 (it unpacks every 16 rows once for all tokens):
// they break even at 24 (figures: BENCHMARKS.md §1b). On Zen 4 (AMD family
// 25: weft_lane_min_n) they take it from WEFT_LANE_MIN_N_KQUANT_ZEN4
// tokens, in a panel not yet full: there the pair kernel's step grows by
// the token (decode of the 1B preset in Q4_K_M: 60-63 ms at 8 tokens, 78-80
// at 10, 108-111 at 14) while the lane GEMM's, whose unpacking runs a
// super-block at a time in vectors, stays at 78-85 ms from 10 tokens to 14;
// they are level at 10 and the lane GEMM leads from 11 (BENCHMARKS.md §1b,
// batched decode on machine D).
#define WEFT_LANE_MIN_N_KQUANT 24
#define WEFT_LANE_MIN_N_KQUANT_ZEN4 11
// Q5_K (Q5_K_M's type) takes it from 5 tokens. Below, the VNNI row kernel
// (vnni_row), which reads a row once per 4 tokens, decodes at about the
// same rate from 2 tokens to 7; the lane GEMM overtakes it at 5 (the 1B
// preset in Q5_K_M on machine D, decode steps of 4 sequences 47-53
// tokens/s on the lane GEMM against 49-58, of 5 64-66 against 50-51, of 7
// 81-86 against 48-55; BENCHMARKS.md §1b).
#ifndef WEFT_LANE_MIN_N_Q5_K
#define WEFT_LANE_MIN_N_Q5_K 5
#endif
// Below WEFT_I8_MAX_N (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) and WEFT_I8_MAX_N_K
// (Q4_K, Q5_K, Q6_K, IQ4_XS) tokens, AVX2 CPUs take the integer row kernels (kern_i8.c).
#ifndef WEFT_I8_MAX_N
#define WEFT_I8_MAX_N 16
#endif
#ifndef WEFT_I8_MAX_N_K
#define WEFT_I8_MAX_N_K 48
#endif
// WEFT_I8_ACT_BYTES: the AVX2 K-quant row kernels' block of tokens, in
// bytes of int8 activations (kern_i8.c's i8k_rows): a quarter of an L2 of
// 512 KiB.
#ifndef WEFT_I8_ACT_BYTES
#define WEFT_I8_ACT_BYTES (128 << 10)
#endif
// On Zen 3 (weft_avx2_gemm_pays) the AVX2 build takes the packed GEMM from
// WEFT_AVX2_GEMM_N tokens, and keeps those K-quants on the integer row
// kernels up to WEFT_GEMM_BIG_N.
#ifndef WEFT_AVX2_GEMM_N
#define WEFT_AVX2_GEMM_N 48
#endif
// From WEFT_GEMM_BIG_N tokens every build takes the packed GEMM (but
// for F16 on Zen 5: weft_f16_tokvec).
#ifndef WEFT_GEMM_BIG_N
#define WEFT_GEMM_BIG_N 160
#endif
// WEFT_LONG_ROW_K: rows of at least this many columns are long rows, for
// which the dot-product kernel's four rows and four tokens outgrow the L1
// (weft_gemm_pays, weft_f16_gemm_from).
#define WEFT_LONG_ROW_K 1536
// From WEFT_F16_GEMM_N tokens F16 takes the packed GEMM in the AVX-512
// build on Intel for rows that are not whole vectors (others: weft_f16_tokvec); AMD from Zen 4 on keeps the dot kernel up to
// WEFT_GEMM_BIG_N (weft_f16_gemm_from), but for Zen 5's long rows (WEFT_LONG_ROW_K),
// which take the GEMM from WEFT_F16_GEMM_LONG_N tokens.
#ifndef WEFT_F16_GEMM_N
#define WEFT_F16_GEMM_N 12
#endif
#ifndef WEFT_F16_GEMM_LONG_N
#define WEFT_F16_GEMM_LONG_N 64
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
// WEFT_F16_TILE_N: from this many tokens the AVX2 build (not on Zen 3:
// weft_avx2_f16_tile) converts F16 rows
// into the float tile once instead of in registers per token group;
// WEFT_F16_TOKVEC_N: from this many tokens (below WEFT_GEMM_BIG_N) the
// AVX-512 build on Intel's CPUs puts the tokens along the vector
// (weft_f16_tokvec; Zen 5: the two below).
#ifndef WEFT_F16_TILE_N
#define WEFT_F16_TILE_N 8
#endif
#ifndef WEFT_F16_TOKVEC_N
#define WEFT_F16_TOKVEC_N 3
#endif
// WEFT_F16_TOKVEC_ZEN5_N, WEFT_F16_TOKVEC_ZEN5_SHORT_N: the same on Zen 5,
// with no upper bound, from this many tokens for rows of K >=
// WEFT_LONG_ROW_K and for shorter ones (weft_f16_tokvec).
#ifndef WEFT_F16_TOKVEC_ZEN5_N
#define WEFT_F16_TOKVEC_ZEN5_N 16
#endif
#ifndef WEFT_F16_TOKVEC_ZEN5_SHORT_N
#define WEFT_F16_TOKVEC_ZEN5_SHORT_N 32
#endif
// WEFT_TILE_FLOATS: the dot-product kernel's dequantized weight tile for
// more than 4 tokens, 32 KiB, so it stays in L1 while the tokens pass it.
#ifndef WEFT_TILE_FLOATS
#define WEFT_TILE_FLOATS 8192
#endif

// ---- entry points called from Go (kernels.c, kern_peak.c) ----

// weft_matmul: rows [r0, r1) of y = W x for n tokens (y[t*ldy + r]). prep
// is weft_prep's output for x (of kind weft_prep_kind(isa, type, K, n)) or
// NULL. Returns WEFT_OK or a WEFT_E* status.
int weft_matmul(int isa, int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		const void *prep, int n, float *y, long ldy);
// weft_prep_kind: the WEFT_PREP_* kind of preparation the kernel for this
// product wants, and (*bytes) the buffer weft_prep fills for it.
int weft_prep_kind(int isa, int type, int K, int n, long *bytes);
void weft_prep(int kind, const float *x, int n, int K, void *out);
// weft_uses_vnni: whether weft_matmul quantizes the activations to 8 bits.
int weft_uses_vnni(int isa, int type, int K, int n);
// weft_act_block: the columns that share one activation scale where
// weft_uses_vnni holds.
int weft_act_block(int isa, int type, int K, int n);
// weft_inject_failure makes every later weft_matmul return status (tests;
// WEFT_OK restores normal operation).
void weft_inject_failure(int status);

float weft_dot(int isa, const float *a, const float *b, long n);
void weft_f16_to_f32s(int isa, float *dst, const uint16_t *src, long n);
void weft_f32_to_f16s(int isa, uint16_t *dst, const float *src, long n);
void weft_exps(int isa, float *dst, const float *src, long n);
void weft_silu_mul(int isa, float *gate, const float *up, long n);
void weft_swiglu_oai(int isa, float *gate, const float *up, long n, float alpha, float limit);
void weft_add(int isa, float *dst, const float *x, long n);
void weft_mulvect(int isa, float *y, const float *a, const float *x, long rows, long cols);
void weft_round_f16s(int isa, float *dst, const float *src, long n);

// watt_attend: one token's attention for nq query heads of one KV group
// over positions lo..n-1 of a paged cache; wh selects the F16 cache (k, v
// are uint16_t) or the F32 one. q and out hold nq rows of hd floats;
// scratch holds nq*(hd+n-lo) floats up to WATT_SEG positions, else
// nq*(hd+WATT_TILE) + nseg*nq*(hd+2), nseg the
// segments of WATT_SEG of lo..n-1. sinks is NULL or holds one logit per
// query head that joins its softmax without a value (attention sinks). Isa
// is at most WEFT_AVX512.
void watt_attend(int isa, int wh, float *out, const float *q, int nq, const void *k, const void *v,
		 const int32_t *blocks, long bs, long stride, long off, int hd, int lo, int n, float scale,
		 const float *sinks, float *scratch);
// watt_q8 is one array of a Q8_0 cache: element i is q[i] * d[i/32].
typedef struct {
	const int8_t *q;
	const float *d;
} watt_q8;
// watt_attend_q8: watt_attend for a Q8_0 cache (K elements kq, scales kd;
// V likewise); hd must be a multiple of 32. The result is that of the F32
// cache holding the dequantized rows (kq[i] * kd[i/32]), bit for bit,
// except under WEFT_VNNI with hd % 64 == 0, where the K scores are int8
// dot products against the queries quantized per 32 (kern_attq8.c).
void watt_attend_q8(int isa, float *out, const float *q, int nq, const int8_t *kq, const float *kd, const int8_t *vq,
		    const float *vd, const int32_t *blocks, long bs, long stride, long off, int hd, int lo, int n,
		    float scale, const float *sinks, float *scratch);
// The attention kernels run an online softmax over tiles of WATT_TILE
// positions and keep one state per segment of WATT_SEG positions (split at
// multiples of WATT_SEG), merged in order at the end; attn.go holds the
// same numbers.
#define WATT_SEG 1024
#define WATT_TILE 64

// watt_attend_chunk: attention of a prompt chunk's T tokens for one KV
// head, over m gathered float32 K and V rows (the positions a chunk's first
// token sees and after): V row p at v + p*hd, K in watt_panel_k's layout.
// Token j's nh query heads of the group are rows q + j*ldq + i*hd (i < nh),
// its outputs the same rows of out; it sees rows lo..pos0+j, lo =
// pos0+j-window+1 (at least 0) with a sliding window (window > 0), else 0.
// The softmax is asoftmax's (ggml's order; sinks: NULL or one per head; wh:
// queries and weights rounded to F16), the products sums in order over
// the head dimension and the positions. scratch: AttendChunkScratch floats
// (attn.go).
void watt_attend_chunk(int isa, float *out, const float *q, long ldq, int T, int nh, int hd, const float *kt,
		       const float *v, int m, int pos0, int window, float scale, const float *sinks, int wh,
		       float *scratch);
// WATT_KP: the positions of a K panel. watt_panel_k writes the n rows k
// (hd floats each) of positions p0.. into the panels kt: element d of
// position p at kt[(p/WATT_KP)*WATT_KP*hd + d*WATT_KP + p%WATT_KP].
#define WATT_KP 64
void watt_panel_k(float *kt, const float *k, int p0, int n, int hd);

// weft_peak runs iters rounds of 12 independent instructions on this
// thread and returns the operations done: float FMAs (kind 0) or VNNI int8
// dot products (kind 1; 0 where the CPU has none). sink keeps the result.
double weft_peak(int isa, int kind, long iters, double *sink);
// weft_stream_sum reads n floats once and returns their sum (in any order),
// for the memory and cache bandwidths.
float weft_stream_sum(int isa, const float *p, long n);

// ---- shared by the translation units ----

// The thresholds' rules (kernels.c): whether the AVX-512 build (and, on
// Zen 3, the AVX2 build) takes the packed GEMM below WEFT_GEMM_BIG_N; whether short rows take it from a few
// tokens; how many rows the dot-product kernel dequantizes per tile.
int weft_gemm_pays(int type, int K, int n);
int weft_avx2_gemm_pays(int n);
int weft_avx2_f16_tile(int n);
// weft_f16_tokvec: whether the AVX-512 build takes an F16 product of n
// tokens of rows of K with the tokens along the vector (body_matmul.h's
// tokvec); weft_set_f16_tokvec forces it on (1, any n) or off (0) on any
// CPU, or back to the CPU's rule (-1), for tests.
int weft_f16_tokvec(int K, int n);
void weft_set_f16_tokvec(int mode);
int weft_gemm_short_rows(int K, int n);
int weft_tile_rows(int K, int n);
// weft_one_row_reads: whether the AVX2 and AVX-512 builds read weights used
// in place a row at a time, without software prefetch but weft_fetch_l2's,
// for one or two tokens.
int weft_one_row_reads(void);
// weft_pair_fetch_lines: whether the AVX-512 build's pair read of weights
// used in place fetches the rows ahead line by line for one token, as for
// two, rather than the whole next pair as a pair starts (kernels.c).
int weft_pair_fetch_lines(void);
// weft_fetch_l2: whether the Q8_0, Q4_1, Q5_0, Q5_1 and Q5_K row kernel
// (kern_vnni.c's vnni_row) fetches the row ahead into L2 rather than L1,
// and the one-row read (body_matmul.h's blockt) fetches
// WEFT_ONE_ROW_FETCH bytes ahead into L2, when the caller's rows hold at
// least WEFT_FETCH_L2_BYTES; and whether the IQ4_NL / MXFP4 / Q4_0 row
// kernel fetches into L2 for one or two tokens, whatever the rows.
int weft_fetch_l2(void);
#define WEFT_FETCH_L2_BYTES (1L << 20)
#define WEFT_ONE_ROW_FETCH 8192
// weft_kq_spread_fetch: whether the 512-bit Q4_K / Q6_K pair kernel spreads
// its fetch of the rows ahead over a pair's super-blocks.
int weft_kq_spread_fetch(void);
// weft_nsel: the token count that picks the kernel for n tokens (1 under
// WEFT_INVARIANT); it clears the flag from *isa.
int weft_nsel(int *isa, int n);

// The per-ISA kernel sets (body_matmul.h and body_attn.h instantiated by
// kern_gen.c, kern_avx2.c and kern_avx512.c). matmul returns a WEFT_*
// status like weft_matmul.
#define WEFT_ISA_PROTOS(S)                                                                                         \
	int weft_matmul##S(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, int n,    \
			   int nsel, float *y, long ldy);                                                          \
	float weft_dot##S(const float *a, const float *b, long n);                                                   \
	void weft_exps##S(float *dst, const float *src, long n);                                                     \
	void weft_silu_mul##S(float *gate, const float *up, long n);                                                 \
	void weft_swiglu_oai##S(float *gate, const float *up, long n, float alpha, float limit);                     \
	void weft_add##S(float *dst, const float *x, long n);                                                        \
	void weft_mulvect##S(float *y, const float *a, const float *x, long rows, long cols);                        \
	void weft_round_f16s##S(float *dst, const float *src, long n);                                               \
	void weft_f16_to_f32s##S(float *dst, const uint16_t *src, long n);                                           \
	void weft_f32_to_f16s##S(uint16_t *dst, const float *src, long n);                                           \
	void watt_attend_h##S(float *out, const float *q, int nq, const void *k, const void *v, const int32_t *blocks, \
			      long bs, long stride, long off, int hd, int lo, int n, float scale,                   \
			      const float *sinks, float *scratch);                                                  \
	void watt_attend_f##S(float *out, const float *q, int nq, const void *k, const void *v, const int32_t *blocks, \
			      long bs, long stride, long off, int hd, int lo, int n, float scale,                   \
			      const float *sinks, float *scratch);                                                  \
	void watt_attend_q##S(float *out, const float *q, int nq, const watt_q8 *k, const watt_q8 *v,                \
			      const int32_t *blocks, long bs, long stride, long off, int hd, int lo, int n, float scale, \
			      const float *sinks, float *scratch);                                                  \
	void watt_attend_chunk##S(float *out, const float *q, long ldq, int T, int nh, int hd, const float *kt,       \
				  const float *v, int m, int pos0, int window, float scale, const float *sinks,   \
				  int wh, float *scratch);
WEFT_ISA_PROTOS(_gen)
// weft_x86_kernels: WEFT_X86, for Go (which kernel sets this build has).
int weft_x86_kernels(void);
// weft_iq4_set_vbmi: whether weft_iq4_vnni_matmul may use AVX-512 VBMI
// (byte permutes) to load its weights; same bits either way.
// Declared on every build: Go sets it whatever kernels were compiled in.
void weft_iq4_set_vbmi(int on);
#if WEFT_X86
WEFT_ISA_PROTOS(_avx2)
WEFT_ISA_PROTOS(_avx512)
// body_matmul.h's F16 kernel with the tokens along the vector (weft_f16_tokvec),
// AVX-512 build: weft_tokvec_prep_avx512 writes x's panels of 16 tokens into
// a buffer of weft_tokvec_prep_bytes, once per product job (WEFT_PREP_TOKVEC);
// weft_tokvec_matmul_avx512 takes them, or packs its own where prep is NULL.
long weft_tokvec_prep_bytes(int K, int n);
void weft_tokvec_prep_avx512(const float *x, int n, int K, void *out);
int weft_tokvec_matmul_avx512(const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, const void *prep,
			      int n, float *y, long ldy);

// kern_attq8.c: watt_attend_q with int8 K scores (AVX-512 VNNI, hd % 64 ==
// 0): the queries are quantized per 32 elements, so the result is close to,
// not the same bits as, the F32 cache's.
void watt_attend_q_vnni(float *out, const float *q, int nq, const watt_q8 *k, const watt_q8 *v, const int32_t *blocks,
			long bs, long stride, long off, int hd, int lo, int n, float scale, const float *sinks,
			float *scratch);

// kern_vnni.c: integer row kernels for few tokens and the int8 lane GEMM.
int weft_vnni_ok(int type, int K);
long weft_vnni_prep_floats(int K, int n);
void weft_vnni_prep(const float *x, int n, int K, float *out);
int weft_vnni_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		     const float *prep, int n, float *y, long ldy);
int weft_lane_ok(int type, int K);
long weft_lane_prep_bytes(int K, int n);
void weft_lane_prep(const float *x, int n, int K, int ab, uint8_t *out);
int weft_lane_act_block(int type);
int weft_lane_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		     const uint8_t *xp, int n, float *y, long ldy);
// weft_k512_matmul: kern_i8.c's Q4_K / Q6_K kernel with 512-bit integer
// vectors, the same results bit for bit (prep: weft_i8k_prep's layout).
int weft_k512_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		     const uint8_t *prep, int n, float *y, long ldy);

// kern_iq4.c: integer row kernels of IQ4_NL (20), IQ4_XS (23) and MXFP4
// (39), AVX2 on weft_i8_prep's activations and AVX-512 VNNI on
// weft_vnni_prep's.
int weft_iq4_i8_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dx,
		       int n, float *y, long ldy);
int weft_iq4_vnni_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dxl,
			 const float *xs4, const float *grp, int n, float *y, long ldy);
// weft_grp_lane: kern_iq4.c's 256-column kernel sums block bi (0..7) of
// each 256 columns in lanes j and j + 2 of its folded vector, j =
// weft_grp_lane(bi). weft_vnni_prep writes, per token and 256 columns,
// WEFT_GRP_FLOATS floats: the 256 int8 values in the kernel's order (per
// half of 4 blocks, first the blocks' columns 0-15, then 16-31, block by
// block), then 16 floats dx and 16 int32 128 * (sum of the block's int8
// values, in lane j; 0 in lane j + 2) in that lane order.
#define WEFT_GRP_FLOATS 96
static inline int weft_grp_lane(int bi) { return 4 * (bi % 4) + bi / 4; }
// weft_iq4_lane_unpack: rows 0..m of an IQ4_NL, IQ4_XS or MXFP4 weight as
// the lane GEMM's signed bytes q, block scales ds and offsets cw.
void weft_iq4_lane_unpack(int type, const uint8_t *w, long rowBytes, int nb, int m, uint8_t *q, float *ds, float *cw);
// weft_iq4xs_i8k_matmul: the AVX2 IQ4_XS kernel on weft_i8k_prep's per-256
// activations (qx, dd), as llama.cpp's Q8_K; the AVX2 and VNNI builds both
// take it below their IQ4_XS lane GEMM or float threshold.
int weft_iq4xs_i8k_matmul(const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx, const float *dd, int n,
			  float *y, long ldy);

// kern_i8.c: AVX2 integer row kernels.
int weft_i8_ok(int type, int K);
int weft_i8_kquant(int type);
long weft_i8_prep_bytes(int K, int n);
void weft_i8_prep(const float *x, int n, int K, uint8_t *out);
long weft_i8k_prep_bytes(int K, int n);
void weft_i8k_prep(const float *x, int n, int K, uint8_t *out);
int weft_i8_matmul(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x,
		   const uint8_t *prep, int n, float *y, long ldy);
#endif
// weft_iq4_ok (kern_iq4.c): whether type is IQ4_NL, IQ4_XS or MXFP4 and its
// integer kernels take rows of K (a multiple of step: 32 for the AVX2 row
// kernel and the lane GEMM, 64 for the VNNI row kernel; 256 for IQ4_XS).
int weft_iq4_ok(int type, int K, int step);

#endif
