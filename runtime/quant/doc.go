// Package quant holds weft's tensor element types at run time: bit-exact
// dequantization of every GGUF type a common download contains, the matrix
// kernels the CPU forward pass spends its time in, and small vector helpers.
//
// # Dequantization
//
// Dequantize decodes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the
// K-quants Q2_K..Q6_K. It is the pure-Go reference: each formula repeats
// ggml's scalar arithmetic in the same order, with explicit float32
// conversions so no compiler fuses a product into an FMA, and is checked
// bit for bit (sha256 of the float32 output) against ggml's own
// dequantization of every tensor of every synth-256 model in ../shared.
// F16ToF32 is exact for every half (NaNs come back quiet, as from F16C);
// F32ToF16 rounds to nearest even like the F16C instruction.
//
// # MatMul
//
//	y[t*Rows + r] = sum_k W[r][k] * x[t*Cols + k]   for r < Rows, t < n
//
// MatMul reads the weights once per call for all n tokens. Rows are split
// over a persistent pool of goroutines plus the caller (started on first
// use, living as long as the process); products smaller than parallelMin
// run on the caller's goroutine, so stories260K-sized matrices pay no
// handoff. Each worker makes one cgo call per row chunk. The pool has
// SetWorkers' count of runners, or GOMAXPROCS at the first MatMul (at most
// one per CPU), and keeps it. cmd/weft fixes it at GOMAXPROCS and then
// raises GOMAXPROCS by one: with every P inside a long cgo call, Go's
// sysmon retakes the Ps and starts spinning threads (see BENCHMARKS.md).
// For the same reason the goroutine that hands out jobs passes through the
// scheduler every 4 ms (maybeYield): one that never does is taken off its
// P after 10 ms, and sysmon then polls every 20 µs, preempting the compute
// threads. MatMuls
// runs several products of the same tokens (Q, K and V; gate and up) as one
// job: one handoff instead of several, their chunks shared out together,
// and the activations prepared (quantized or packed) once for all chunks
// and all products that read the same x.
//
// Idle workers poll for the next job for 300 µs before they park, and the
// caller polls for the last chunks of its job before it blocks: a forward
// pass hands out a job every few tens of microseconds, and parking and
// waking threads through futexes cost a single-sequence decode step a
// quarter of its time. Polling has a price on an oversubscribed machine:
// with a CPU hog on one of two cores, single-sequence decode ran ~20%
// slower than with parking (batched decode and prompts were still faster,
// thanks to the kernels below). Yielding the core (sched_yield) while
// polling fixed that but cost 20-30% on an idle machine under KVM, so it
// is not done. (The first pool spun without ever yielding its P and made
// decoding 1.5-4x slower on a shared machine; this one yields the P every
// 64 polls, so goroutines made ready on it still run.)
// Five kernels sit behind it, chosen per call:
//
//   - Q8_0, Q4_K and Q6_K from 16 tokens, AVX-512 VNNI: an int8 GEMM with the
//     tokens along the vector lanes (kern_vnni.h, lane_tile). Tokens are
//     quantized like llama.cpp's Q8_0 activations (per 32 values, scale
//     amax/127), plus 128 so they are unsigned, and packed 16 to a panel
//     as [block][4-column group][token][4 bytes]; one vpdpbusd then
//     multiplies 4 columns of one weight row, broadcast from its quants,
//     with the same 4 columns of 16 tokens. There is no transposition or
//     horizontal sum; per block and token vector the fix-up is
//     y += dx * (dw * I - 128 * dw * sum(q)) (Q4_K also takes off its
//     sub-block min times the token's block sum; Q6_K, whose scales cover
//     16 columns, keeps two integer sums per block), 3-5 operations per 8
//     vpdpbusd. Q8_0 quants are read in place; Q4_K and Q6_K rows are
//     unpacked to bytes once per 4-row tile, for all tokens. A 4-row x 32-token tile
//     keeps 8 integer and 8 float accumulators. Two threads, synth-110m
//     shapes: Q8_0 270-320 GFLOP/s at 16 tokens and 380-635 from 64 with
//     cold weights (BenchmarkMatMulCold), Q4_K 190-290 at 16 and 270-670
//     from 64, Q6_K 200-390 at 16 and 230-720 from 64 (BenchmarkMatMul),
//     against 60-300 for the float paths.
//   - Few tokens (n < 24; Q8_0, Q4_K, Q6_K below 16), Q8_0/Q4_0/Q4_K/Q5_K/Q6_K, AVX-512
//     VNNI: integer dot products, as llama.cpp does. Each token is
//     quantized per 32 values to int8 (scale amax/127) once per job;
//     weights are unpacked from their blocks to unsigned bytes in registers
//     and vpdpbusd multiplies 64 pairs at a time. Block scales, and the
//     weight offsets (the -8 of Q4_0, Q4_K mins) are applied per 4-column
//     lane in float, the offsets against the exact float sums of the
//     activations. Activation rounding makes these results (and the lane
//     GEMM's) differ from the float reference by at most
//     sum |w| * amax/254 per output (the tests check that bound). A row
//     is unpacked once per 4 tokens (8 for the K-quants, whose unpacking
//     costs more).
//   - Few tokens (n < 16; K-quants n < 48), Q8_0/Q4_0/Q4_K/Q6_K, AVX2 without VNNI
//     (kern_i8.h): int8 activations, per 32 columns for Q8_0/Q4_0 and per
//     256 for the K-quants (llama.cpp's Q8_K; a super-block then adds up
//     in integers); vpmaddubsw multiplies 32 weight bytes with 32
//     activations into pair sums, vpmaddwd adds the pairs (scaling them by
//     a K-quant's sub-block scale), one FMA per block (super-block) adds
//     d*dx times the sum. Q8_0's signs move onto the activations
//     (|w| * sign(x, w)) so no pair sum saturates; Q4_K's mins and Q6_K's
//     -32 come off through 16-column activation sums. On Zen 1 (two
//     threads): 2-10x the float
//     kernels for one token, 1.4-3.7x for four; from 64 tokens the float
//     kernels, which share each dequantized row among more tokens, win.
//   - Otherwise, below the packed GEMM's threshold: a dot-product kernel.
//     Four rows at a time are dequantized into a thread-local float32 tile
//     that stays in L1 (F32 weights are used in place, F16 ones converted
//     in registers by F16C) and a register-blocked micro-kernel (4 rows x up
//     to 4 tokens of vector accumulators) runs over it. The 16 (or 4)
//     accumulators are reduced together by a shuffle-add tree (AVX-512),
//     which matters for small K such as stories260K's 64. From 5 tokens
//     the tile is 8 KFloats (8 rows of 768), so it stays in L1 while the
//     tokens stream past it.
//   - Many tokens: a packed GEMM. x is packed in panels of 12 tokens as
//     [k][token] (by each chunk); each 32-row weight tile is dequantized
//     and transposed to [k][row] (F16 converted while transposing); the micro-kernel keeps 2 x 12 zmm accumulators (32 rows x 12
//     tokens), loading 2 weight vectors and broadcasting 12 activations per
//     k, over K blocks of 128 (16 KiB of the tile, which stays in L1 while
//     every panel passes it), and adds into contiguous rows of y. In the
//     AVX-512 build both packings transpose 16 x 16 blocks in registers,
//     so the GEMM pays from 24 tokens for long rows (K >= 1536, where the
//     dot kernel slows down), from 48 for quantized K = 768 rows and from
//     96 for F16/F32; the other builds, which transpose element by element,
//     take it from 160 tokens. (One core of a Zen 5: ~170-185 GFLOP/s from
//     96 tokens, against 110-130 for the dot kernel at K = 2048.) Short
//     rows take it much earlier in the AVX2 and AVX-512 builds: from 4
//     tokens for K <= 32, 8 for K <= 64 and 24 for K <= 192 (attention's
//     Q·Kᵀ over small head dims, tiny models' weights), where the dot
//     kernel's closing horizontal sums cost as much as its multiply-adds
//     (Zen 1: 2-7x at K = 8-32, 1.2-1.9x at K = 64-172; see
//     weft_gemm_short_rows).
//
// Work is cut into row chunks (two per worker below 24 tokens, four from
// it) claimed from an atomic counter by the caller and the pool alike, so a
// worker that wakes late (busy machine) never makes the caller wait: it
// finds nothing left. The thread-local tiles live as long as their OS
// thread (a few hundred KiB); a job's prepared activations come from a
// sync.Pool.
//
// # Attention
//
// AttendF16 and AttendF32 compute one token's attention for the query
// heads of one KV group straight from a paged KV cache (PagedKV: the block
// table and strides), converting F16 rows in registers: scores, ggml's
// softmax (max, exp, float64 sum, F16 rounding of the weights for an F16
// cache) and the weighted sum of V. The CPU backend uses them for decode
// and short chunks.
//
// # Dispatch
//
// The kernels are plain C (kern_body.h) with GCC vector extensions,
// compiled into the cgo object three times under target pragmas: portable
// (the compiler's baseline: SSE2 on amd64, NEON on arm64), AVX2+FMA+F16C
// and AVX-512 (F/BW/VL/DQ); kern_vnni.h adds the AVX-512 VNNI integer
// kernels and kern_i8.h the AVX2 ones. At start-up golang.org/x/sys/cpu picks the best set (ISA reports
// it). Without cgo the package builds with pure-Go kernels (dequantize a
// row, dot it with each token). Every fast path has a reference: Dequantize
// and a float64 matMulRef, and the tests run every kernel set the machine
// has against them for every type, several shapes and n = 1, 3, 17, 64, 200.
//
// # Vector helpers
//
// Dot (SIMD from 256 elements), Axpy, Scale, Add, RMSNorm, SiLUMul, Softmax,
// Exps, MulVecT (y = Aᵀx, attention's weights times V), the bulk F16
// conversions F16ToF32s / F32ToF16s and RoundF16s (F16C) serve the rest of
// the forward pass and an F16 KV cache. SiLUMul and Exps use a vector
// exponential (range reduction and a degree-7 polynomial, within 2e-7
// relative of math.Exp on [-87, 88], inputs clamped to that range) in the
// C builds; the tests hold every kernel set to the Go reference.
//
// Example:
//
//	w, err := quant.FromTensor(ti) // a *gguf.TensorInfo
//	if err != nil { ... }
//	quant.MatMul(y, w, x, nTokens) // y: nTokens*w.Rows, x: nTokens*w.Cols
package quant
