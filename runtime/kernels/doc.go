// Package kernels holds the CPU kernels weft's forward pass spends its time
// in: the matrix products (MatMul, MatMuls) over weights in their stored
// GGUF types, one token's attention over a paged KV cache, the worker pool
// they share, the run-time choice of instruction set, the arithmetic and
// memory peaks weft bench reports, and small vector helpers. The formats
// themselves (Weight, Dequantize, the scalar F16 converter) are package
// runtime/quant's; this package imports it and is held to it: every fast
// path is checked against quant.Dequantize.
//
// The bulk F16 conversions (F16ToF32s, F32ToF16s, RoundF16s, f16.go) live
// here because they run in the C kernels (F16C); the C builds' scalar paths
// (body_f16.h) and their F16C paths give quant.F16ToF32's and
// quant.F32ToF16's bits, which the tests check over all 65,536 halves.
//
// # MatMul and the pool (matmul.go, pool.go)
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
// sysmon retakes the Ps and starts spinning threads. For the same reason
// the goroutine that hands out jobs passes through the scheduler every 4 ms
// (maybeYield): one that never does is taken off its P after 10 ms, and
// sysmon then polls every 20 µs, preempting the compute threads. MatMuls
// runs several products of the same tokens (Q, K and V; gate and up) as
// one job: one handoff instead of several, their chunks shared out
// together, and the activations prepared (quantized or packed) once for
// all chunks and all products that read the same x.
//
// Idle workers poll for the next job for 300 µs before they park, and the
// caller polls for the last chunks of its job before it blocks: a forward
// pass hands out a job every few tens of microseconds, and parking and
// waking threads through futexes would cost a single-sequence decode step
// a large share of its time. Pollers yield their P every 64 polls, so
// goroutines made ready on it still run, but never the core
// (sched_yield): that costs more on an idle machine under KVM than it
// saves on an oversubscribed one (BENCHMARKS.md §1).
//
// Work is cut into row chunks (two per worker below 24 tokens, four from
// it) claimed from an atomic counter by the caller and the pool alike, so a
// worker that wakes late (busy machine) never makes the caller wait: it
// finds nothing left. The thread-local tiles live as long as their OS
// thread (a few hundred KiB); a job's prepared activations come from a
// sync.Pool.
//
// # Failures
//
// A C kernel that fails (its product's scratch cannot be allocated, or it
// has no code for a shape) returns a status; MatMul and MatMuls return it
// as an error wrapping ErrKernel (ErrKernelMemory) or quant.ErrType, from the
// caller's goroutine and from the pool's workers alike, after every chunk
// of the job has finished. Parallel returns its calls' first failure. The
// CPU backend turns it into a failed step, never a crash. Wrong lengths
// and invalid weights are the caller's bug and panic.
//
// Five kernels sit behind MatMul, chosen per call by token count, type
// and ISA (kernels.c states the thresholds; BENCHMARKS.md §1 has the
// figures behind them):
//
//   - Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4
//     from 8 tokens (MXFP4 from 16, Q4_0 and IQ4_NL from 11, Q4_K and Q6_K from 24, from 11 on Zen 4, Q5_K from 5), AVX-512 VNNI: an int8 GEMM with the tokens along the vector lanes
//     (kern_vnni.c, lane_tile). Tokens are
//     quantized like llama.cpp's Q8_0 activations (per 32 values, scale
//     amax/127; IQ4_XS per 256, as llama.cpp's Q8_K), plus 128 so they are unsigned, and packed 16 to a panel
//     as [block][4-column group][token][4 bytes]; one vpdpbusd then
//     multiplies 4 columns of one weight row, broadcast from its quants,
//     with the same 4 columns of 16 tokens. There is no transposition or
//     horizontal sum; per block and token vector the fix-up is
//     y += dx * (dw * I - 128 * dw * sum(q)) (Q4_K and Q5_K also take off their
//     sub-block min times the token's block sum, and Q4_1 and Q5_1 their
//     block min the same way; Q6_K, whose scales cover
//     16 columns, keeps two integer sums per block), 3-5 operations per 8
//     vpdpbusd. Q8_0 quants are read in place; Q4_K, Q5_K and Q6_K rows are
//     unpacked to bytes once per 16 rows, for all tokens (a super-block
//     at a time in vectors, scales and block sums included, Q5_K's fifth
//     bits shifted in from qh), and so are
//     Q4_0/Q4_1/Q5_0/Q5_1's (nibbles spread to column order, Q5's fifth
//     bits from qh as a 32-bit byte mask, the -8/-16 offsets taken off) and the
//     4-bit table types' (kern_iq4.c: each nibble looked up in the type's
//     16 int8 values by one vpshufb), which then take Q8_0's fix-up. A
//     4-row x 32-token tile keeps 8 integer and 8 float accumulators.
//   - Few tokens (n < 24; below 8 for the types of the lane GEMM, MXFP4 below 16, Q4_0 and IQ4_NL below 11, Q5_K below 5),
//     Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q5_K/IQ4_NL/MXFP4 (and Q4_K/Q6_K where the next
//     kernel cannot take them), AVX-512 VNNI: integer dot products, as
//     llama.cpp does. Each token is quantized per 32 values to int8 (scale
//     amax/127) once per job; weights are unpacked from their blocks to
//     unsigned bytes in registers (IQ4_NL, MXFP4 and Q4_0: looked up by
//     vpshufb in their value table plus 128, kern_iq4.c, Q4_0's values
//     q - 8; Q5_0, Q5_1:
//     two blocks' qh words are one 64-bit byte mask that adds the fifth
//     bits) and vpdpbusd multiplies 64 pairs at a time. Block scales, and
//     the weight offsets (the -16 of Q5_0, the mins of
//     Q4_1, Q5_1 and Q4_K) are applied per 4-column lane in float, the
//     offsets against the exact float sums of the activations. Activation rounding makes these results (and the lane
//     GEMM's) differ from the float reference by at most
//     sum |w| * amax/254 per output (the tests check that bound). A row
//     is unpacked once per 4 tokens (8 for the K-quants, whose unpacking
//     costs more). For one token the row after next is prefetched; for
//     Q8_0 the row four ahead, a chunk at a time through the first pass
//     over the current row (on Zen 4 into L2 when the caller's rows hold
//     1 MiB or more: weft_fetch_l2, which moves Q4_1, Q5_0 and Q5_1 to
//     the same fetch).
//     IQ4_NL, MXFP4 and Q4_0 (kern_iq4.c) add 256 columns in integers, take 4
//     rows at a time for one token (2 for two) and end the tile's sums in
//     one transposing horizontal sum; on CPUs with AVX-512 VBMI each
//     256-column group is loaded by three 64-byte loads and vpermi2b. The
//     tile after next is prefetched (on Zen 4 into L2, a group's share at
//     a time: weft_fetch_l2).
//   - Few tokens (n < 16; K-quants and IQ4_XS n < 48), Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K
//     and the 4-bit table types (kern_iq4.c), AVX2 without VNNI, and
//     Q4_K/Q6_K/IQ4_XS below the lane GEMM (24 tokens, 11 on Zen 4; IQ4_XS 8) on AVX-512 VNNI too
//     (kern_i8.c; one FMA per super-block beats the VNNI row kernel's
//     per-64-column float work there): int8 activations, per 32 columns
//     for Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/MXFP4 and per 256 for the K-quants and IQ4_XS
//     (llama.cpp's Q8_K; a super-block then adds up in integers, IQ4_XS's
//     sub-block scales applied by vpmaddwd as a K-quant's); vpmaddubsw multiplies 32 weight bytes with 32
//     activations into pair sums, vpmaddwd adds the pairs (scaling them by
//     a K-quant's sub-block scale), one FMA per block (super-block) adds
//     d*dx times the sum. Q8_0's signs, and those of the table types'
//     values (looked up by vpshufb), move onto the activations
//     (|w| * sign(x, w)) so no pair sum saturates; Q5_K's fifth bits come
//     from qh by a shift and a mask per 32 columns; Q4_K's and Q5_K's mins and Q6_K's
//     -32 come off through 16-column activation sums. From 64 tokens the
//     float kernels, which share each dequantized row among more tokens,
//     win. On AVX-512 VNNI CPUs the K-quant kernel runs 512 bits wide
//     (kern_vnni.c, weft_k512_matmul: a Q4_K group unpacked by a broadcast
//     and a masked shift, two rows at a time with their float lanes in the
//     two halves of one 512-bit vector, up to 8 tokens per unpacking; in
//     the row pairs one vpdpbusd per 64 columns gives each lane's sum of 4
//     products, two steps' lanes are paired as words and one vpdpwssd
//     scales and adds both, the integers of vpmaddubsw + vpdpwssd with
//     three multiplies where those take four); its upper int32 lanes are
//     added onto the lower ones before any float work, so it gives the
//     AVX2 kernel's bits (TestKQuantWideKernelSameBits).
//   - Otherwise, below the packed GEMM's threshold: a dot-product kernel.
//     Four rows at a time are dequantized into a thread-local float32 tile
//     that stays in L1 (F32 weights are used in place, F16 ones converted
//     in registers by F16C) and a register-blocked micro-kernel (4 rows x up
//     to 4 tokens of vector accumulators) runs over it. Weights used in
//     place for one or two tokens go two adjacent rows at a time instead,
//     so each thread reads one region front to back (faster than four
//     interleaved rows) with two independent FMA chains (one chain can
//     bound the read below memory's rate), with the same sums, and the
//     next pair is prefetched while one is computed; on AMD family 25
//     (Zen 4) a row at a time, which its hardware prefetchers stream
//     faster (weft_one_row_reads), with no software prefetch but, in
//     chunks of 1 MiB or more, a fetch 8 KiB ahead into L2
//     (weft_fetch_l2). The 16 (or 4) accumulators are reduced together
//     by a shuffle-add tree (AVX-512),
//     which matters for small K such as stories260K's 64. From 5 tokens
//     the tile is 8 KFloats (8 rows of 768), so it stays in L1 while the
//     tokens stream past it.
//   - F16 on Intel's AVX-512 cores, 3 to 159 tokens, and on Zen 5 from
//     16 tokens (32 for rows under 1,536), rows of whole vectors
//     (weft_f16_tokvec): the tokens along the vector. x is transposed
//     into panels of 16 tokens ([k][token], one register per k), once
//     per product job (WEFT_PREP_TOKVEC); a block of 24 rows (14 when
//     two panels go together) is converted a line (32 columns) at a
//     time into a buffer in L1, and each of its
//     floats is broadcast from memory into one FMA per panel, so the 24
//     or 28 accumulators hold a row's tokens: no horizontal sums, no
//     transposed copy of the rows, and the tokens are read once per row
//     block instead of from L2 for every 4 rows. The next block is
//     fetched as the block runs.
//   - Many tokens: a packed GEMM. x is packed in panels of 12 tokens as
//     [k][token] (by each chunk); each 32-row weight tile is dequantized
//     and transposed to [k][row] (F16 converted while transposing); the
//     micro-kernel keeps 2 x 12 zmm accumulators (32 rows x 12 tokens),
//     loading 2 weight vectors and broadcasting 12 activations per k,
//     over K blocks of 128 (16 KiB of the tile, which stays in L1 while
//     every panel passes it), and adds into contiguous rows of y. In the
//     AVX-512 build both packings transpose 16 x 16 blocks in registers,
//     so the GEMM pays from 24 tokens for long rows (K >= 1536, where the
//     dot kernel slows down), from 48 for quantized K = 768 rows and from
//     96 for F32. F16 takes it from 12 tokens (one full panel) on Intel
//     for rows that are not whole vectors (others: the tokens along the
//     vector, below), and from
//     WEFT_GEMM_BIG_N (160) on AMD from family 25 (Zen 4) on, where
//     the dot kernel, converting rows in registers, keeps it below that
//     (Zen 4 splits each 512-bit FMA in two; Zen 5 converts and multiplies
//     fast enough); weft_f16_gemm_from reads the CPU's vendor and family
//     once. Long F16 rows (K >= 1536) that are not whole vectors take it
//     from 64 tokens on Zen 5 (whole vectors: the tokens along the
//     vector): there the dot kernel's four rows and four tokens (48 KiB
//     at K = 2048) fill its whole L1 (on Zen 4 the GEMM lost there too).
//     The other builds, which transpose element by element, take it from
//     160 tokens. Short rows take it much earlier in the AVX2
//     and AVX-512 builds: from 4 tokens for K <= 32, 8 for K <= 64 and 24 for K <= 192 (attention's
//     Q·Kᵀ over small head dims, tiny models' weights), where the dot
//     kernel's closing horizontal sums cost as much as its multiply-adds
//     (weft_gemm_short_rows).
//
// # C translation units (kernels.h, kernels.c, scratch.c, kern_*.c, body_*.h)
//
// kernels.h declares the C entry points Go calls and those the
// translation units share, and the token-count thresholds. kernels.c holds
// the run-time dispatch (Go passes the ISA it picked at start-up from
// golang.org/x/sys/cpu; ISA reports it) and the threshold rules. scratch.c
// owns the scratch arena, a pool of buffer sets each product holds for its
// length (scratch.h: weft_scratch), the only mutable state the units share;
// no .c file includes another. kern_gen.c (portable: the compiler's
// baseline, SSE2 on amd64, NEON on arm64), kern_avx2.c (AVX2+FMA+F16C) and
// kern_avx512.c (AVX-512 F/BW/VL/DQ) each compile the same plain-C
// fragments, body_matmul.h and body_attn.h (with body_exp.h and
// body_f16.h), under their own GCC target pragma and name suffix;
// kern_vnni.c holds the AVX-512 VNNI integer kernels, kern_i8.c the AVX2
// ones, kern_iq4.c both sets' row kernels (and the lane GEMM's unpacking)
// of IQ4_NL, IQ4_XS and MXFP4, with body_iq4.h, their tables and the
// float kernels' row dequantizers, and kern_peak.c the peaks MeasurePeaks
// reports. The x86 units
// compile to nothing elsewhere (or with -DWEFT_PORTABLE_ONLY); every .c
// builds only with cgo. Without cgo the package uses pure-Go kernels
// (dequantize a row, dot it with each token). Every fast path has a
// reference: quant.Dequantize and a float64 matMulRef, and the tests run every
// kernel set the machine has against them for every type, several shapes
// and n = 1, 2, 3, 9, 17, 64, 200 (the table types for n = 1..64, against
// activations rounded as the integer kernels round them).
//
// # Attention (attn.go)
//
// AttendF16 and AttendF32 compute one token's attention for the query
// heads of one KV group straight from a paged KV cache (PagedKV: the block
// table and strides), converting F16 rows in registers: scores, ggml's
// softmax (max, exp, float64 sum, F16 rounding of the weights for an F16
// cache) and the weighted sum of V, over positions PagedKV.First..n-1 (a
// sliding window skips the keys it hides). The block tables scatter a
// sequence's rows through the pool, where the hardware prefetcher cannot
// follow, so the kernels prefetch the rows two blocks ahead a few lines at
// a time inside the loops that read the current block (a burst of a whole
// block's prefetches stalls the loads behind it). A group's query heads are
// scored four (or two) at a time, each K row converted once for all of
// them, in the order one query alone would sum (the same bits). The CPU
// backend uses them for decode and short chunks. Attention sinks (gpt-oss: one
// learned logit per query head) join the softmax as ggml's soft_max takes
// them: the max runs over the sink too and exp(sink - max) is added to the
// sum, but the sink has no value.
//
// AttendChunk serves long prompt chunks: the CPU backend gathers one KV
// head's rows as float32, V row by row and K transposed into panels of 64
// positions (PanelK), and the kernel takes the chunk's tokens a few at a
// time (6 on AVX-512, 4 elsewhere) for all the head's query heads. A
// tile's scores are a register tile of tokens x 64 positions (AVX-512: 6
// x 4 vectors, each K panel vector loaded once and each query element
// broadcast once per step over the head dimension), softmaxed row by row
// in ggml's order over the positions each token sees (causal, its sliding
// window, its head's sink), then multiplied by V in register tiles of 6
// tokens x 64 columns as one running sum over the positions. Each K panel
// and block of 128 V rows is read once per tile for all the group's query
// heads, from L1. On one Zen 4 core, at the 1B preset's shape (4 query
// heads of 64, a 512-token chunk over 4,096 positions), BenchmarkAttendChunk
// runs at about 89 GFLOP/s, three quarters of the core's FMA peak; with the
// softmax skipped (a throwaway build) it ran at 108, so the products run
// near the peak and the softmax's exponentials take most of the rest.
//
// AttendQ8 reads a Q8_0 cache (kvq8.go: int8 elements at the F16 cache's
// offsets, one float32 scale per KVQ8Block = 32 elements in an array
// beside them, QuantizeKVQ8 writing ggml's q8_0 values): the same kernel
// with each vector converted from int8 and multiplied by its scale as it
// is loaded, so a row reads as exactly its dequantized floats and the
// result is AttendF32's on the dequantized cache, bit for bit (the tests
// hold every kernel set to that). It reads 1.125 bytes an element where
// F16 reads 2; the conversion costs more instructions than F16's, so the
// kernel is faster by less than the bytes it saves. On AVX-512 VNNI CPUs,
// at head dims that are multiples of 64 (kern_attq8.c), the K scores are
// int8 dot products instead: the queries are quantized per 32 elements (as
// llama.cpp's flash attention quantizes Q for a q8_0 K cache), one
// vpdpbusd multiplies a row's 64 bytes by a query's, and the integer sums
// are scaled per block; the result is AttendF32's for the quantized
// queries to float rounding (TestAttendQ8), and a query still gets the
// same bits alone and in its group.
//
// # Vector helpers (vec.go)
//
// Dot (SIMD from 256 elements), Axpy, Scale, Add, RMSNorm, SiLUMul,
// SwiGLUOAI (gpt-oss's clamped SwiGLU), Softmax, Exps, MulVecT (y = Aᵀx,
// attention's weights times V), the bulk F16 conversions F16ToF32s /
// F32ToF16s and RoundF16s (F16C) serve the rest of the forward pass and an
// F16 KV cache; Add takes a C loop of whole vectors from 64 values (the
// same bits). SiLUMul, SwiGLUOAI and Exps use a vector exponential (range
// reduction and a degree-7 polynomial, within 2e-7 relative of math.Exp on
// [-87, 88], inputs clamped to that range) in the C builds; the tests hold
// every kernel set to the Go reference.
//
// Example:
//
//	w, err := quant.FromTensor(ti) // a *gguf.TensorInfo
//	if err != nil { ... }
//	if err := kernels.MatMul(y, w, x, nTokens); err != nil { ... } // y: nTokens*w.Rows, x: nTokens*w.Cols
package kernels
