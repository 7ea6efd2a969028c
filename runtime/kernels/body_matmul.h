// body_matmul.h: a fragment, not a header: the matrix and vector kernels
// of one instruction set. kern_gen.c, kern_avx2.c and kern_avx512.c each
// include it once, after kernels.h, scratch.h, body_f16.h and (x86) <immintrin.h>,
// under their GCC target pragma, with SFX (name suffix), VW (floats per
// vector), NRMAX (tokens per micro-kernel call), GMV and GNT (the packed
// GEMM's tile: GMV vectors of rows x GNT tokens) and, where the target has
// it, HAVE_F16C defined. It defines the weft_*SFX entry points kernels.h
// declares (WEFT_ISA_PROTOS); everything else is static. (Fragments carry
// a .h suffix because go build hashes the package's .h files into its
// build cache key; a change to a file of any other suffix would leave a
// stale object.)
// Plain C with GCC vector extensions: the compiler maps vf to one zmm / ymm /
// xmm (NEON q) register and fuses "acc += w * x" into FMAs where available.

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)
#define API(name) CAT(weft_, FN(name))
#if defined(HAVE_F16C)
#define H2F(h) _cvtsh_ss((uint16_t)(h))
#else
#define H2F(h) weft_f16_to_f32((uint16_t)(h))
#endif

typedef float FN(vf) __attribute__((vector_size(VW * 4)));
typedef float FN(vfu) __attribute__((vector_size(VW * 4), aligned(4), may_alias));

static inline __attribute__((always_inline)) FN(vf) FN(ld)(const float *p) {
	return *(const FN(vfu) *)p;
}

// ldw loads VW weights at element index i: float32, or (WH) float16
// converted in registers (F16C builds only).
static inline __attribute__((always_inline)) FN(vf) FN(ldw)(const void *w, long i, const int WH) {
#if defined(HAVE_F16C) && VW == 16
	if (WH) return (FN(vf))_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)));
#elif defined(HAVE_F16C)
	if (WH) return (FN(vf))_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
#endif
	return FN(ld)((const float *)w + i);
}

static inline __attribute__((always_inline)) float FN(wat)(const void *w, long i, const int WH) {
	return WH ? weft_f16_to_f32(((const uint16_t *)w)[i]) : ((const float *)w)[i];
}

static inline __attribute__((always_inline)) float FN(hsum)(FN(vf) v) {
	float s = 0;
	// pairwise tree; GCC turns this into shuffles + adds
#if VW == 16
	float a[16];
	memcpy(a, &v, sizeof a);
	for (int i = 0; i < 8; i++) a[i] += a[i + 8];
	for (int i = 0; i < 4; i++) a[i] += a[i + 4];
	s = (a[0] + a[2]) + (a[1] + a[3]);
#elif VW == 8
	float a[8];
	memcpy(a, &v, sizeof a);
	for (int i = 0; i < 4; i++) a[i] += a[i + 4];
	s = (a[0] + a[2]) + (a[1] + a[3]);
#else
	float a[VW];
	memcpy(a, &v, sizeof a);
	for (int i = 0; i < VW; i++) s += a[i];
#endif
	return s;
}


#if VW == 16
// reduce returns a vector whose lane i is the sum of a[i]'s lanes, for
// i < cnt (cnt 4 or 16): a shuffle-add tree, 15 steps for 16 vectors
// instead of 16 separate horizontal sums.
typedef int FN(vi) __attribute__((vector_size(64)));
static inline __attribute__((always_inline)) FN(vf) FN(reduce)(FN(vf) *a, const int cnt) {
	FN(vf) v[8], u[4], p[2];
	const FN(vi) l1a = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
		     l1b = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
		     l2a = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27},
		     l2b = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31},
		     l3a = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29},
		     l3b = {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31},
		     l4a = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
		     l4b = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
	const int n1 = cnt / 2, n2 = (cnt + 3) / 4, n3 = (cnt + 7) / 8;
	for (int i = 0; i < n1; i++)
		v[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], l1a) + __builtin_shuffle(a[2 * i], a[2 * i + 1], l1b);
	for (int i = 0; i < n2; i++) {
		FN(vf) b = 2 * i + 1 < n1 ? v[2 * i + 1] : v[2 * i];
		u[i] = __builtin_shuffle(v[2 * i], b, l2a) + __builtin_shuffle(v[2 * i], b, l2b);
	}
	for (int i = 0; i < n3; i++) {
		FN(vf) b = 2 * i + 1 < n2 ? u[2 * i + 1] : u[2 * i];
		p[i] = __builtin_shuffle(u[2 * i], b, l3a) + __builtin_shuffle(u[2 * i], b, l3b);
	}
	FN(vf) b = n3 > 1 ? p[1] : p[0];
	return __builtin_shuffle(p[0], b, l4a) + __builtin_shuffle(p[0], b, l4b);
}
#endif

// micro computes y[j*ldy + i] = sum_k w[i*ldw + k] * x[j*ldx + k] for
// i < MR, j < NR; always inlined with constant MR, NR so the accumulators
// live in registers. pf: the rows after these may be prefetched (4 rows:
// the next 4; 2 rows, the pair read of 2 tokens: rows 4 and 5; one row,
// the one-row read: pf is the distance in bytes, fetched into L2).
static inline __attribute__((always_inline)) void FN(micro)(const void *w, long ldw, const float *x, long ldx, int K,
							     float *y, long ldy, const int MR, const int NR, const int WH, int pf) {
	FN(vf) acc[4][NRMAX];
	for (int i = 0; i < MR; i++)
		for (int j = 0; j < NR; j++) acc[i][j] = (FN(vf)){0};
	int k = 0;
	for (; k + VW <= K; k += VW) {
		FN(vf) xv[NRMAX];
		for (int j = 0; j < NR; j++) xv[j] = FN(ld)(x + j * ldx + k);
		if (MR == 1 && NR <= 2 && pf && ((k * (WH ? 2 : 4)) & 63) == 0) // the one-row read, a line per line
			__builtin_prefetch((const char *)w + k * (WH ? 2 : 4) + pf, 0, 2);
		if (MR == 2 && pf && ((k * (WH ? 2 : 4)) & 63) == 0) // the pair read of 2 tokens: the pair after next, a line per line
			for (int i = 4; i < 6; i++) __builtin_prefetch((const char *)w + (i * ldw + k) * (WH ? 2 : 4), 0, 3);
		for (int i = 0; i < MR; i++) {
			if (MR == 4 && pf) // stream: fetch the same column MR rows ahead (next micro call)
				__builtin_prefetch((const char *)w + ((i + 4) * ldw + k) * (WH ? 2 : 4) + 256, 0, 0);
			FN(vf) wv = FN(ldw)(w, i * ldw + k, WH);
			for (int j = 0; j < NR; j++) acc[i][j] += wv * xv[j];
		}
	}
#if VW == 16
	if (MR == 4 && (NR == 4 || NR == 1)) {
		// reduce all accumulators at once: lanes of the result are
		// (token j, row i) at j*4 + i, ready for 4-float stores.
		FN(vf) a[16];
		for (int j = 0; j < NR; j++)
			for (int i = 0; i < 4; i++) a[j * 4 + i] = acc[i][j];
		FN(vf) r = FN(reduce)(a, NR * 4);
		float out[16];
		memcpy(out, &r, sizeof out);
		for (int j = 0; j < NR; j++)
			for (int i = 0; i < 4; i++) {
				float s = out[j * 4 + i];
				for (int kk = k; kk < K; kk++) s += FN(wat)(w, i * ldw + kk, WH) * x[j * ldx + kk];
				y[j * ldy + i] = s;
			}
		return;
	}
#endif
	for (int i = 0; i < MR; i++)
		for (int j = 0; j < NR; j++) {
			float s = FN(hsum)(acc[i][j]);
			for (int kk = k; kk < K; kk++) s += FN(wat)(w, i * ldw + kk, WH) * x[j * ldx + kk];
			y[j * ldy + i] = s;
		}
}

#define WOFF(i) (WH ? (const void *)((const uint16_t *)w + (i) * ldw) : (const void *)((const float *)w + (i) * ldw))
// block multiplies rows [0, m) of the f32 tile w (row stride ldw) with all n
// tokens of x, writing y (token stride ldy).
// pf: how many rows from w on may be prefetched (0 for a tile); fd: the
// one-row read's fetch distance in bytes (0 for none). When w is
// the weight matrix itself, streamed from memory, the 4-row micro-kernel
// prefetches the next 4 rows, as far as the caller's row range goes: past
// a tile's end the addresses may be unmapped, and such prefetches can cost
// more than the product (BENCHMARKS.md §1).
static inline __attribute__((always_inline)) void FN(blockt)(const void *w, long ldw, int m, const float *x, long ldx, int n, int K, float *y,
							      long ldy, const int WH, int pf, int fd) {
	int j = 0;
	if (pf && n <= 2) {
		// Weights streamed from memory for one or two tokens: two adjacent
		// rows at a time (they lie end to end, so each thread reads one
		// region front to back, which the hardware prefetchers follow
		// best, where four interleaved rows with software prefetch read
		// them slower; from three tokens the 4-row kernel's shared loads
		// of x win). Two rows, not one, because one row is one chain of
		// dependent FMAs, 16 floats per FMA latency a thread, which can
		// bound the read below memory's rate. A row's sums are those of
		// the 4-row micro-kernel: lane by lane, then the same tree (hsum
		// and reduce add the lanes alike). Within the caller's rows (pf)
		// the next pair is prefetched: for one token all of it as the pair
		// starts, for two (twice the work per byte) line by line, four
		// rows ahead, and so for one on Intel's AVX-512 cores
		// (weft_pair_fetch_lines; the figures: BENCHMARKS.md §1, what
		// bounds decode).
		// Zen 4 (weft_one_row_reads) reads them faster a row at a time,
		// with no software prefetch, or, in the caller's chunks of
		// WEFT_FETCH_L2_BYTES or more (fd, weft_fetch_l2), fetching the
		// bytes fd ahead into L2 as it goes, within the caller's rows.
		int i = 0;
		const long rowb = (long)ldw * (WH ? 2 : 4);
		if (VW >= 8 && weft_one_row_reads()) {
			for (; i < m; i++) {
				const int d = fd && (long)(i + 1) * rowb + fd <= (long)pf * rowb ? fd : 0;
				if (n == 1) FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 1, 1, WH, d);
				else FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 1, 2, WH, d);
			}
			return;
		}
		const int lines = n == 1 && VW == 16 && weft_pair_fetch_lines(); // asked once, not per pair
		for (; i + 2 <= m; i += 2) {
			if (lines) {
				FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 2, 1, WH, i + 6 <= pf);
			} else if (n == 1) {
				if (i + 4 <= pf)
					for (long off = 0; off < rowb + K * (WH ? 2 : 4); off += 64)
						__builtin_prefetch((const char *)WOFF(i + 2) + off, 0, 3);
				FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 2, 1, WH, 0);
			} else FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 2, 2, WH, i + 6 <= pf);
		}
		for (; i < m; i++) {
			if (n == 1) FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 1, 1, WH, 0);
			else FN(micro)(WOFF(i), ldw, x, ldx, K, y + i, ldy, 1, 2, WH, 0);
		}
		return;
	}
	for (; j + NRMAX <= n; j += NRMAX) {
		int i = 0;
		for (; i + 4 <= m; i += 4)
			FN(micro)(WOFF(i), ldw, x + j * ldx, ldx, K, y + j * ldy + i, ldy, 4, NRMAX, WH, i + 8 <= pf);
		for (; i < m; i++) FN(micro)(WOFF(i), ldw, x + j * ldx, ldx, K, y + j * ldy + i, ldy, 1, NRMAX, WH, 0);
	}
	int rem = n - j;
	if (rem == 0) return;
	int i = 0;
	for (; i + 4 <= m; i += 4) {
		const void *wi = WH ? (const void *)((const uint16_t *)w + i * ldw) : (const void *)((const float *)w + i * ldw);
		const float *xj = x + j * ldx;
		float *yj = y + j * ldy + i;
		switch (rem) {
		case 1: FN(micro)(wi, ldw, xj, ldx, K, yj, ldy, 4, 1, WH, i + 8 <= pf); break;
#if NRMAX > 2
		case 2: FN(micro)(wi, ldw, xj, ldx, K, yj, ldy, 4, 2, WH, i + 8 <= pf); break;
#endif
#if NRMAX > 3
		case 3: FN(micro)(wi, ldw, xj, ldx, K, yj, ldy, 4, 3, WH, i + 8 <= pf); break;
#endif
#if NRMAX > 4
		case 4: FN(micro)(wi, ldw, xj, ldx, K, yj, ldy, 4, 4, WH, i + 8 <= pf); break;
#endif
#if NRMAX > 5
		case 5: FN(micro)(wi, ldw, xj, ldx, K, yj, ldy, 4, 5, WH, i + 8 <= pf); break;
#endif
		default:
			for (int jj = 0; jj < rem; jj++) FN(micro)(wi, ldw, xj + jj * ldx, ldx, K, yj + jj * ldy, ldy, 4, 1, WH, i + 8 <= pf);
		}
	}
	for (; i < m; i++)
		for (int jj = j; jj < n; jj++) FN(micro)(WOFF(i), ldw, x + jj * ldx, ldx, K, y + jj * ldy + i, ldy, 1, 1, WH, 0);
}

#undef WOFF

static void FN(block)(const float *w, long ldw, int m, const float *x, long ldx, int n, int K, float *y, long ldy, int pf,
		      int fd) {
	FN(blockt)(w, ldw, m, x, ldx, n, K, y, ldy, 0, pf, fd);
}

#if defined(HAVE_F16C)
static void FN(blockh)(const uint16_t *w, long ldw, int m, const float *x, long ldx, int n, int K, float *y, long ldy, int pf,
		       int fd) {
	FN(blockt)(w, ldw, m, x, ldx, n, K, y, ldy, 1, pf, fd);
}
#endif

// ---- row dequantizers (same arithmetic as the Go reference) ----

static void FN(dq_f16)(const uint8_t *restrict src, float *restrict dst, int K) {
	const uint16_t *h = (const uint16_t *)src;
	int k = 0;
#if defined(HAVE_F16C) && VW == 16
	for (; k + 16 <= K; k += 16) _mm512_storeu_ps(dst + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + k))));
#elif defined(HAVE_F16C)
	for (; k + 8 <= K; k += 8) _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + k))));
#endif
	for (; k < K; k++) dst[k] = weft_f16_to_f32(h[k]);
}

static void FN(dq_bf16)(const uint8_t *restrict src, float *restrict dst, int K) {
	const uint16_t *h = (const uint16_t *)src;
	uint32_t *d = (uint32_t *)dst;
	for (int k = 0; k < K; k++) d[k] = (uint32_t)h[k] << 16;
}

static void FN(dq_q8_0)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 34;
		float d = H2F(blk[0] | blk[1] << 8);
		const int8_t *q = (const int8_t *)(blk + 2);
		float *y = dst + b * 32;
		for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d;
	}
}

static void FN(dq_q4_0)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 18;
		float d = H2F(blk[0] | blk[1] << 8);
		const uint8_t *q = blk + 2;
		float *y = dst + b * 32;
		for (int j = 0; j < 16; j++) {
			y[j] = (float)((int)(q[j] & 15) - 8) * d;
			y[j + 16] = (float)((int)(q[j] >> 4) - 8) * d;
		}
	}
}

static void FN(dq_q4_1)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 20;
		float d = H2F(blk[0] | blk[1] << 8);
		float m = H2F(blk[2] | blk[3] << 8);
		const uint8_t *q = blk + 4;
		float *y = dst + b * 32;
		for (int j = 0; j < 16; j++) {
			y[j] = (float)(q[j] & 15) * d + m;
			y[j + 16] = (float)(q[j] >> 4) * d + m;
		}
	}
}

static void FN(dq_q5_0)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 22;
		float d = H2F(blk[0] | blk[1] << 8);
		uint32_t qh;
		memcpy(&qh, blk + 2, 4);
		const uint8_t *q = blk + 6;
		float *y = dst + b * 32;
		for (int j = 0; j < 16; j++) {
			int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
			y[j] = (float)((int)((q[j] & 15) | h0) - 16) * d;
			y[j + 16] = (float)((int)((q[j] >> 4) | h1) - 16) * d;
		}
	}
}

static void FN(dq_q5_1)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 24;
		float d = H2F(blk[0] | blk[1] << 8);
		float m = H2F(blk[2] | blk[3] << 8);
		uint32_t qh;
		memcpy(&qh, blk + 4, 4);
		const uint8_t *q = blk + 8;
		float *y = dst + b * 32;
		for (int j = 0; j < 16; j++) {
			int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
			y[j] = (float)((q[j] & 15) | h0) * d + m;
			y[j + 16] = (float)((q[j] >> 4) | h1) * d + m;
		}
	}
}

static void FN(dq_q2_k)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 256; b++) {
		const uint8_t *blk = src + b * 84, *sc = blk, *q = blk + 16;
		float d = H2F(blk[80] | blk[81] << 8), dmin = H2F(blk[82] | blk[83] << 8);
		float *y = dst + b * 256;
		int is = 0;
		for (int n = 0; n < 2; n++, q += 32)
			for (int shift = 0; shift < 8; shift += 2)
				for (int h = 0; h < 2; h++, is++) {
					float dl = d * (float)(sc[is] & 15), ml = dmin * (float)(sc[is] >> 4);
					for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[h * 16 + l] >> shift) & 3) - ml;
				}
	}
}

static void FN(dq_q3_k)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 256; b++) {
		const uint8_t *blk = src + b * 110, *hm = blk, *q = blk + 32, *s = blk + 96;
		float d = H2F(blk[108] | blk[109] << 8);
		int sc[16];
		for (int j = 0; j < 16; j++)
			sc[j] = (((s[j % 8] >> (4 * (j / 8))) & 15) | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
		float *y = dst + b * 256;
		int is = 0;
		uint8_t m = 1;
		for (int n = 0; n < 2; n++, q += 32)
			for (int shift = 0; shift < 8; shift += 2, m <<= 1)
				for (int h = 0; h < 2; h++, is++) {
					float dl = d * (float)sc[is];
					for (int l = 0; l < 16; l++) {
						int v = (q[h * 16 + l] >> shift) & 3;
						if (!(hm[h * 16 + l] & m)) v -= 4;
						*y++ = dl * (float)v;
					}
				}
	}
}

static inline void FN(k4sm)(int j, const uint8_t *q, int *sc, int *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

static void FN(dq_q4_k)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 256; b++) {
		const uint8_t *blk = src + b * 144, *scales = blk + 4, *q = blk + 16;
		float d = H2F(blk[0] | blk[1] << 8), dmin = H2F(blk[2] | blk[3] << 8);
		float *y = dst + b * 256;
		for (int j = 0; j < 4; j++, q += 32, y += 64) {
			int s1, m1, s2, m2;
			FN(k4sm)(2 * j, scales, &s1, &m1);
			FN(k4sm)(2 * j + 1, scales, &s2, &m2);
			float d1 = d * (float)s1, mm1 = dmin * (float)m1, d2 = d * (float)s2, mm2 = dmin * (float)m2;
			for (int l = 0; l < 32; l++) {
				y[l] = d1 * (float)(q[l] & 15) - mm1;
				y[l + 32] = d2 * (float)(q[l] >> 4) - mm2;
			}
		}
	}
}

static void FN(dq_q5_k)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 256; b++) {
		const uint8_t *blk = src + b * 176, *scales = blk + 4, *qh = blk + 16, *q = blk + 48;
		float d = H2F(blk[0] | blk[1] << 8), dmin = H2F(blk[2] | blk[3] << 8);
		float *y = dst + b * 256;
		for (int j = 0; j < 4; j++, q += 32, y += 64) {
			int s1, m1, s2, m2;
			FN(k4sm)(2 * j, scales, &s1, &m1);
			FN(k4sm)(2 * j + 1, scales, &s2, &m2);
			float d1 = d * (float)s1, mm1 = dmin * (float)m1, d2 = d * (float)s2, mm2 = dmin * (float)m2;
			uint8_t u1 = 1 << (2 * j), u2 = 2 << (2 * j);
			for (int l = 0; l < 32; l++) {
				y[l] = d1 * (float)((q[l] & 15) + ((qh[l] & u1) ? 16 : 0)) - mm1;
				y[l + 32] = d2 * (float)((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - mm2;
			}
		}
	}
}

static void FN(dq_q6_k)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 256; b++) {
		const uint8_t *blk = src + b * 210;
		float d = H2F(blk[208] | blk[209] << 8);
		float *y = dst + b * 256;
		for (int n = 0; n < 2; n++) {
			const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
			const int8_t *sc = (const int8_t *)(blk + 192 + 8 * n);
			float *yy = y + 128 * n;
			float ds[8];
			for (int i = 0; i < 8; i++) ds[i] = d * (float)sc[i];
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				int q1 = (int)((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
				int q2 = (int)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
				int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
				yy[l] = ds[is] * (float)q1;
				yy[l + 32] = ds[is + 2] * (float)q2;
				yy[l + 64] = ds[is + 4] * (float)q3;
				yy[l + 96] = ds[is + 6] * (float)q4;
			}
		}
	}
}

#include "body_iq4.h" // dq_iq4_nl, dq_iq4_xs, dq_mxfp4

typedef void (*FN(dqfn))(const uint8_t *, float *, int);

static FN(dqfn) FN(dq_for)(int type) {
	switch (type) {
	case 1: return FN(dq_f16);
	case 30: return FN(dq_bf16);
	case 8: return FN(dq_q8_0);
	case 2: return FN(dq_q4_0);
	case 3: return FN(dq_q4_1);
	case 6: return FN(dq_q5_0);
	case 7: return FN(dq_q5_1);
	case 10: return FN(dq_q2_k);
	case 11: return FN(dq_q3_k);
	case 12: return FN(dq_q4_k);
	case 13: return FN(dq_q5_k);
	case 14: return FN(dq_q6_k);
	case 20: return FN(dq_iq4_nl);
	case 23: return FN(dq_iq4_xs);
	case 39: return FN(dq_mxfp4);
	}
	return 0;
}


// ---- packed GEMM for many tokens (n >= WEFT_GEMM_BIG_N) ----
// A tile of GMR = GMV*VW rows is dequantized and transposed to wt[k][GMR];
// tokens are packed in panels of GNT as xp[k][GNT]. The micro-kernel keeps
// GMV x GNT vector accumulators (rows along the vector) and, per k, loads
// GMV weight vectors and broadcasts GNT token values: no horizontal sums,
// results stored as contiguous row vectors of y.
#define GMR (GMV * VW)

// gmicro: y[t*ldy + i] (+)= sum_k wt[k*GMR + i] * xp[k*GNT + t] for i < m,
// t < nt; acc: add to y (a later K block) instead of overwriting it.
static inline __attribute__((always_inline)) void FN(gmicro)(const float *restrict wt, const float *restrict xp, int K,
							      float *restrict y, long ldy, int m, int nt, int acc0) {
	FN(vf) acc[GMV][GNT];
	for (int v = 0; v < GMV; v++)
		for (int t = 0; t < GNT; t++) acc[v][t] = (FN(vf)){0};
	for (int k = 0; k < K; k++) {
		FN(vf) wv[GMV];
		for (int v = 0; v < GMV; v++) wv[v] = *(const FN(vf) *)(wt + (long)k * GMR + v * VW);
		for (int t = 0; t < GNT; t++) {
			float b = xp[(long)k * GNT + t];
			for (int v = 0; v < GMV; v++) acc[v][t] += wv[v] * b;
		}
	}
	if (m == GMR) {
		for (int t = 0; t < nt; t++)
			for (int v = 0; v < GMV; v++) {
				FN(vfu) *p = (FN(vfu) *)(y + t * ldy + v * VW);
				FN(vf) a = acc[v][t];
				if (acc0) a += *p;
				*p = a;
			}
	} else {
		for (int t = 0; t < nt; t++) {
			float tmp[GMR];
			for (int v = 0; v < GMV; v++) memcpy(tmp + v * VW, &acc[v][t], VW * 4);
			for (int i = 0; i < m; i++) y[t * ldy + i] = acc0 ? y[t * ldy + i] + tmp[i] : tmp[i];
		}
	}
}

#if VW == 16
// tr16 transposes the 16 x 16 block r in registers: four stages, each
// swapping one bit of the row index with the same bit of the lane index.
#define TR_STAGE(H, LO, HI)                                                                                          \
	for (int i = 0; i < 16; i++)                                                                                 \
		if (!(i & H)) {                                                                                      \
			FN(vf) a = r[i], c = r[i + H];                                                               \
			r[i] = __builtin_shuffle(a, c, LO);                                                          \
			r[i + H] = __builtin_shuffle(a, c, HI);                                                      \
		}
static inline __attribute__((always_inline)) void FN(tr16)(FN(vf) *r) {
	const FN(vi) l0 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
		     h0 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
		     l1 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
		     h1 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
		     l2 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
		     h2 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
		     l3 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
		     h3 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
	TR_STAGE(1, l0, h0)
	TR_STAGE(2, l1, h1)
	TR_STAGE(4, l2, h2)
	TR_STAGE(8, l3, h3)
}
#undef TR_STAGE
#endif

#if VW == 8
// tr8 transposes the 8 x 8 block r in registers: three stages, each
// swapping one bit of the row index with the same bit of the lane index
// (AVX2: move-and-duplicate with blends, in-lane shuffles, lane permutes).
#define TR_STAGE(H, LO, HI)                                                                                          \
	for (int i = 0; i < 8; i++)                                                                                  \
		if (!(i & H)) {                                                                                      \
			FN(vf) a = r[i], c = r[i + H];                                                               \
			r[i] = __builtin_shuffle(a, c, LO);                                                          \
			r[i + H] = __builtin_shuffle(a, c, HI);                                                      \
		}
static inline __attribute__((always_inline)) void FN(tr8)(FN(vf) *r) {
	typedef int FN(vi8) __attribute__((vector_size(32)));
	const FN(vi8) l0 = {0, 8, 2, 10, 4, 12, 6, 14}, h0 = {1, 9, 3, 11, 5, 13, 7, 15},
		      l1 = {0, 1, 8, 9, 4, 5, 12, 13}, h1 = {2, 3, 10, 11, 6, 7, 14, 15},
		      l2 = {0, 1, 2, 3, 8, 9, 10, 11}, h2 = {4, 5, 6, 7, 12, 13, 14, 15};
	TR_STAGE(1, l0, h0)
	TR_STAGE(2, l1, h1)
	TR_STAGE(4, l2, h2)
}
#undef TR_STAGE
#endif

// transpose writes wt[k*GMR + i] = rp[i][k] for i < m, k < K, and zeros for
// m <= i < GMR. Rows are float32, or (WH, F16C builds) float16 converted
// in registers.
static inline __attribute__((always_inline)) void FN(transposet)(const void *const *rp, int m, int K, float *restrict wt,
								  const int WH) {
	int k = 0;
#if VW == 16
	for (; k + 16 <= K; k += 16)
		for (int h = 0; h < GMR; h += 16) {
			FN(vf) r[16];
			for (int i = 0; i < 16; i++) r[i] = h + i < m ? FN(ldw)(rp[h + i], k, WH) : (FN(vf)){0};
			FN(tr16)(r);
			for (int c = 0; c < 16; c++) *(FN(vf) *)(wt + (long)(k + c) * GMR + h) = r[c];
		}
#elif VW == 8
	for (; k + 8 <= K; k += 8)
		for (int h = 0; h < GMR; h += 8) {
			FN(vf) r[8];
			for (int i = 0; i < 8; i++) r[i] = h + i < m ? FN(ldw)(rp[h + i], k, WH) : (FN(vf)){0};
			FN(tr8)(r);
			for (int c = 0; c < 8; c++) *(FN(vf) *)(wt + (long)(k + c) * GMR + h) = r[c];
		}
#endif
	for (int i = 0; i < m; i++)
		for (int kk = k; kk < K; kk++) wt[(long)kk * GMR + i] = FN(wat)(rp[i], kk, WH);
	for (int i = m; i < GMR; i++)
		for (int kk = k; kk < K; kk++) wt[(long)kk * GMR + i] = 0;
}

static void FN(transpose)(const void *const *rp, int m, int K, float *restrict wt) { FN(transposet)(rp, m, K, wt, 0); }
#if defined(HAVE_F16C) // the one user: gemm's F16 tiles
static void FN(transposeh)(const void *const *rp, int m, int K, float *restrict wt) { FN(transposet)(rp, m, K, wt, 1); }
#endif

// gemm_xp_floats: size of gemm_pack's output for n tokens of K values.
static long FN(gemm_xp_floats)(int K, int n) { return (long)((n + GNT - 1) / GNT) * GNT * K; }

// gemm_pack packs n tokens of x into panels of GNT tokens, xp[k][GNT] per
// panel (zeros for padding tokens).
static void FN(gemm_pack)(const float *x, int n, int K, float *xp) {
	int panels = (n + GNT - 1) / GNT;
	for (int p = 0; p < panels; p++) {
		float *dst = xp + (long)p * GNT * K;
		int k0 = 0;
#if VW == 16 && GNT <= 16
		for (; k0 + 16 <= K; k0 += 16) {
			FN(vf) v[16];
			for (int t = 0; t < 16; t++)
				v[t] = t < GNT && p * GNT + t < n ? FN(ld)(x + (long)(p * GNT + t) * K + k0) : (FN(vf)){0};
			FN(tr16)(v);
			for (int c = 0; c < 16; c++) memcpy(dst + (long)(k0 + c) * GNT, &v[c], GNT * 4);
		}
#elif VW == 8 && GNT <= 8
		for (; k0 + 8 <= K; k0 += 8) {
			FN(vf) v[8];
			for (int t = 0; t < 8; t++)
				v[t] = t < GNT && p * GNT + t < n ? FN(ld)(x + (long)(p * GNT + t) * K + k0) : (FN(vf)){0};
			FN(tr8)(v);
			for (int c = 0; c < 8; c++) memcpy(dst + (long)(k0 + c) * GNT, &v[c], GNT * 4);
		}
#endif
		for (int t = 0; t < GNT; t++) {
			int tok = p * GNT + t;
			if (tok < n) {
				const float *src = x + (long)tok * K;
				for (int k = k0; k < K; k++) dst[(long)k * GNT + t] = src[k];
			} else {
				for (int k = k0; k < K; k++) dst[(long)k * GNT + t] = 0;
			}
		}
	}
}

// gemm: rows [r0, r1) for n tokens.
static int FN(gemm)(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, int n, float *y,
		    long ldy) {
	FN(dqfn) dq = type == 0 ? 0 : FN(dq_for)(type);
	if (type != 0 && !dq) return WEFT_EUNSUPPORTED;
	int panels = (n + GNT - 1) / GNT;
	float *xp = weft_scratch(0, FN(gemm_xp_floats)(K, n));
	if (!xp) return WEFT_ENOMEM;
	FN(gemm_pack)(x, n, K, xp);
	float *rows = weft_scratch(1, (long)GMR * K);
	long gmax = (long)(WEFT_GEMM_GROUP / K / GMR * GMR);
	if (gmax < GMR) gmax = GMR;
	float *wt = weft_scratch(2, gmax * K);
	if (!rows || !wt) return WEFT_ENOMEM;
	// Row groups of up to WEFT_GEMM_GROUP floats of transposed weights
	// (several 32-row tiles): per K block, the tokens' block (n x KC)
	// stays in L2 while every tile of the group passes it, and each tile's
	// block (GMR x KC) stays in L1 while every token panel passes it.
	int gr = WEFT_GEMM_GROUP / K / GMR * GMR;
	if (gr < GMR) gr = GMR;
	for (int g = r0; g < r1; g += gr) {
		int ge = r1 - g < gr ? r1 - g : gr;
		for (int r = g; r < g + ge; r += GMR) {
			int m = g + ge - r < GMR ? g + ge - r : GMR;
			const void *rp[GMR];
#if defined(HAVE_F16C)
			if (type == 1) { // F16: converted while transposing
				for (int i = 0; i < m; i++) rp[i] = w + (long)(r + i) * rowBytes;
				FN(transposeh)(rp, m, K, wt + (long)(r - g) * K);
				continue;
			}
#endif
			for (int i = 0; i < m; i++) {
				const uint8_t *src = w + (long)(r + i) * rowBytes;
				if (type == 0) {
					rp[i] = src;
				} else {
					dq(src, rows + (long)i * K, K);
					rp[i] = rows + (long)i * K;
				}
			}
			FN(transpose)(rp, m, K, wt + (long)(r - g) * K);
		}
		for (int k0 = 0; k0 < K; k0 += WEFT_GEMM_KC) {
			int kc = K - k0 < WEFT_GEMM_KC ? K - k0 : WEFT_GEMM_KC;
			for (int r = g; r < g + ge; r += GMR) {
				int m = g + ge - r < GMR ? g + ge - r : GMR;
				const float *wk = wt + (long)(r - g) * K + (long)k0 * GMR;
				for (int p = 0; p < panels; p++) {
					int nt = n - p * GNT < GNT ? n - p * GNT : GNT;
					FN(gmicro)(wk, xp + (long)p * GNT * K + (long)k0 * GNT, kc,
						   y + (long)p * GNT * ldy + r, ldy, m, nt, k0 > 0);
				}
			}
		}
	}
	return 0;
}
#undef GMR

#if defined(HAVE_F16C) && VW == 16
// ---- F16 with the tokens along the vector (weft_f16_tokvec) ----
// The lanes of a vector are 16 tokens (a panel); a block of R rows is
// converted a line (32 columns) at a time into a buffer in L1, and each of
// its floats meets the panel in one FMA that broadcasts it from memory: per
// k, R FMAs per panel, one load of the panel's k-th column, no horizontal
// sums and no transposed copy of the rows. Each (row, token) sum runs over
// k in order in one lane.

// TOKVEC_RMAX: the most rows of a block. tmicro's arrays take this fixed
// size: sized by its R they would be variable-length, on the stack, and
// the accumulators would not stay in registers.
#define TOKVEC_RMAX 24
// tpack writes panels of 16 tokens of x, transposed: xt[(p*K + k)*16 + t]
// = x[(p*16 + t)*K + k], zeros past n. K is a multiple of 16.
static void FN(tpack)(const float *x, int n, int K, float *xt) {
	int panels = (n + 15) / 16;
	for (int p = 0; p < panels; p++)
		for (int k = 0; k < K; k += 16) {
			FN(vf) v[16];
			for (int t = 0; t < 16; t++) v[t] = p * 16 + t < n ? FN(ld)(x + (long)(p * 16 + t) * K + k) : (FN(vf)){0};
			FN(tr16)(v);
			for (int c = 0; c < 16; c++) memcpy(xt + ((long)p * K + k + c) * 16, &v[c], 64);
		}
}

// TCHUNK: the accumulators of tmicro over columns [k, k + CW) (CW 16 or
// 32: a whole line of each row): the rows' CW columns converted into buf,
// then each float broadcast into one FMA per panel.
#define TCHUNK(CW)                                                                                                    \
	do {                                                                                                          \
		_Pragma("GCC unroll 32") for (int i = 0; i < R; i++) for (int h = 0; h < CW; h += 16)                      \
			_mm512_store_ps(buf + i * 32 + h, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i * ldw + k + h)))); \
		if (fetched < nf)                                                                                     \
			for (int l = 0; l < R * CW * 2 && fetched < nf; l += 64, fetched += 64) __builtin_prefetch(next + fetched, 0, 2); \
		for (int c = 0; c < CW; c++) {                                                                        \
			__m512 xv[2];                                                                                 \
			_Pragma("GCC unroll 2") for (int p = 0; p < PP; p++) xv[p] = _mm512_load_ps(xt + ((long)(p0 + p) * K + k + c) * 16); \
			_Pragma("GCC unroll 32") for (int i = 0; i < R; i++) {                                        \
				__m512 b = _mm512_set1_ps(buf[i * 32 + c]);                                           \
				_Pragma("GCC unroll 2") for (int p = 0; p < PP; p++) acc[p][i] = _mm512_fmadd_ps(b, xv[p], acc[p][i]); \
			}                                                                                             \
		}                                                                                                     \
	} while (0)

// tmicro: y[t*ldy + i] = sum_k w[i*ldw + k] * xt[(p*K + k)*16 + t - p*16]
// for i < R and the tokens t < nt of PP panels from p0 (constant R, PP:
// R x PP accumulators). nf: bytes of the rows after these that may be
// fetched (the next block, R lines per 32 columns).
static inline __attribute__((always_inline)) void FN(tmicro)(const uint16_t *w, long ldw, int K, const float *xt, int p0, int nt,
							      float *y, long ldy, const int R, const int PP, long nf) {
	__m512 acc[2][TOKVEC_RMAX];
#pragma GCC unroll 2
	for (int p = 0; p < PP; p++)
#pragma GCC unroll 32
		for (int i = 0; i < R; i++) acc[p][i] = _mm512_setzero_ps();
	float buf[TOKVEC_RMAX * 32] __attribute__((aligned(64)));
	const char *next = (const char *)(w + (long)R * ldw);
	long fetched = 0;
	int k = 0;
	for (; k + 32 <= K; k += 32) TCHUNK(32);
	if (k < K) TCHUNK(16);
#pragma GCC unroll 2
	for (int p = 0; p < PP; p++) {
		float out[TOKVEC_RMAX * 16];
#pragma GCC unroll 32
		for (int i = 0; i < R; i++) _mm512_storeu_ps(out + i * 16, acc[p][i]);
		int te = nt - (p0 + p) * 16 < 16 ? nt - (p0 + p) * 16 : 16;
		for (int t = 0; t < te; t++)
			for (int i = 0; i < R; i++) y[(long)((p0 + p) * 16 + t) * ldy + i] = out[i * 16 + t];
	}
}
#undef TCHUNK

#define TOKVEC_R1 24
#define TOKVEC_R2 14
// tokvec_panels: the 64-byte aligned start of tpack's panels in a buffer of
// weft_tokvec_prep_bytes.
static inline float *FN(tokvec_panels)(void *buf) { return (float *)(((uintptr_t)buf + 63) & ~(uintptr_t)63); }

// tokvec_prep: tpack's panels of n tokens of x into out (weft_tokvec_prep_bytes
// bytes), once per product job for all its row chunks (WEFT_PREP_TOKVEC).
void API(tokvec_prep)(const float *x, int n, int K, void *out) { FN(tpack)(x, n, K, FN(tokvec_panels)(out)); }

// tokvec_matmul: rows [r0, r1) of the F16 matrix w for n tokens, the tokens
// along the vector (tmicro): blocks of TOKVEC_R1 rows for one panel at a
// time, TOKVEC_R2 for two. prep is tokvec_prep's buffer for x, or NULL:
// then the panels are packed here.
int API(tokvec_matmul)(const uint8_t *w8, long rowBytes, int K, int r0, int r1, const float *x, const void *prep, int n,
		       float *y, long ldy) {
	int panels = (n + 15) / 16;
	const float *xt;
	if (prep) {
		xt = FN(tokvec_panels)((void *)prep);
	} else {
		float *buf = weft_scratch(0, (long)panels * K * 16);
		if (!buf) return WEFT_ENOMEM;
		FN(tpack)(x, n, K, buf);
		xt = buf;
	}
	const long ldw = rowBytes / 2;
	const uint16_t *w = (const uint16_t *)w8;
	const int R = panels >= 2 ? TOKVEC_R2 : TOKVEC_R1;
	int r = r0;
	for (; r + R <= r1; r += R) {
		const uint16_t *wr = w + (long)r * ldw;
		long nf = r + 2 * R <= r1 ? (long)R * rowBytes : 0;
		float *yr = y + r;
		if (panels == 1) {
			FN(tmicro)(wr, ldw, K, xt, 0, n, yr, ldy, TOKVEC_R1, 1, nf);
			continue;
		}
		int p = 0;
		for (; p + 2 <= panels; p += 2) FN(tmicro)(wr, ldw, K, xt, p, n, yr, ldy, TOKVEC_R2, 2, p == 0 ? nf : 0);
		if (p < panels) FN(tmicro)(wr, ldw, K, xt, p, n, yr, ldy, TOKVEC_R2, 1, 0);
	}
	for (; r + 4 <= r1; r += 4)
		for (int p = 0; p < panels; p++) FN(tmicro)(w + (long)r * ldw, ldw, K, xt, p, n, y + r, ldy, 4, 1, 0);
	for (; r < r1; r++)
		for (int p = 0; p < panels; p++) FN(tmicro)(w + (long)r * ldw, ldw, K, xt, p, n, y + r, ldy, 1, 1, 0);
	return 0;
}
#endif

// matmul: rows [r0, r1) of y = W x for n tokens. F32 weights are used in
// place; other types are dequantized RB rows at a time into a thread-local
// f32 tile (row stride K), which then meets every token while it sits in
// L1/L2. Returns 0, or -1 for an unknown type / allocation failure.
// uses_gemm: whether matmul takes the packed GEMM.
static int FN(uses_gemm)(int type, int K, int n) {
	return n >= WEFT_GEMM_BIG_N || (VW >= 8 && weft_gemm_short_rows(K, n)) || (VW == 16 && weft_gemm_pays(type, K, n)) ||
	       (VW == 8 && weft_avx2_gemm_pays(n));
}

// nsel is the token count that picks the kernel (weft_nsel): n, or 1 for
// batch-invariant products, which never take the GEMM. The dot-product
// kernel gives each (row, token) the same sums in the same order whatever
// the number of tokens and the tile.
int API(matmul)(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const float *x, int n, int nsel,
		      float *y, long ldy) {
	if (FN(uses_gemm)(type, K, nsel)) return FN(gemm)(type, w, rowBytes, K, r0, r1, x, n, y, ldy);
	// the one-row read's fetch into L2 (blockt), for chunks of 1 MiB or more
	const int fd = (long)(r1 - r0) * rowBytes >= WEFT_FETCH_L2_BYTES && weft_fetch_l2() ? WEFT_ONE_ROW_FETCH : 0;
#if defined(HAVE_F16C)
	// F16: converted in registers, no tile (but for AVX2 from WEFT_F16_TILE_N
	// tokens, except on Zen 3: weft_avx2_f16_tile)
	if (type == 1 && (VW != 8 || !weft_avx2_f16_tile(nsel))) {
		for (int r = r0; r < r1; r += 64) {
			int m = r1 - r < 64 ? r1 - r : 64;
			FN(blockh)((const uint16_t *)(w + (long)r * rowBytes), K, m, x, K, n, K, y + r, ldy, r1 - r, fd);
		}
		return 0;
	}
#endif
	if (type == 0) {
		for (int r = r0; r < r1; r += 64) {
			int m = r1 - r < 64 ? r1 - r : 64;
			FN(block)((const float *)(w + (long)r * rowBytes), K, m, x, K, n, K, y + r, ldy, r1 - r, fd);
		}
		return 0;
	}
	FN(dqfn) dq = FN(dq_for)(type);
	if (!dq) return WEFT_EUNSUPPORTED;
	int rb = weft_tile_rows(K, n);
	float *tile = weft_scratch(0, (long)rb * K);
	if (!tile) return WEFT_ENOMEM;
	for (int r = r0; r < r1; r += rb) {
		int m = r1 - r < rb ? r1 - r : rb;
		for (int i = 0; i < m; i++) dq(w + (long)(r + i) * rowBytes, tile + (long)i * K, K);
		FN(block)(tile, K, m, x, K, n, K, y + r, ldy, 0, 0);
	}
	return 0;
}

// ---- vector kernels ----

float API(dot)(const float *a, const float *b, long n) {
	FN(vf) s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
	long i = 0;
	for (; i + 4 * VW <= n; i += 4 * VW) {
		s0 += FN(ld)(a + i) * FN(ld)(b + i);
		s1 += FN(ld)(a + i + VW) * FN(ld)(b + i + VW);
		s2 += FN(ld)(a + i + 2 * VW) * FN(ld)(b + i + 2 * VW);
		s3 += FN(ld)(a + i + 3 * VW) * FN(ld)(b + i + 3 * VW);
	}
	for (; i + VW <= n; i += VW) s0 += FN(ld)(a + i) * FN(ld)(b + i);
	float s = FN(hsum)((s0 + s1) + (s2 + s3));
	for (; i < n; i++) s += a[i] * b[i];
	return s;
}

// expv: e^x per lane (body_exp.h).
typedef int FN(vint) __attribute__((vector_size(VW * 4)));
// sel: lanes of a where m is all ones, else of b.
static inline __attribute__((always_inline)) FN(vf) FN(sel)(FN(vint) m, FN(vf) a, FN(vf) b) {
	FN(vint) ia, ib;
	memcpy(&ia, &a, sizeof ia);
	memcpy(&ib, &b, sizeof ib);
	ia = (ia & m) | (ib & ~m);
	memcpy(&a, &ia, sizeof a);
	return a;
}
#define EXP_VF FN(vf)
#define EXP_VI FN(vint)
#define EXP_SEL FN(sel)
#define EXP_NAME FN(expv)
#include "body_exp.h"
#undef EXP_VF
#undef EXP_VI
#undef EXP_SEL
#undef EXP_NAME

// exps: dst[i] = e^src[i].
void API(exps)(float *dst, const float *src, long n) {
	long i = 0;
	for (; i + VW <= n; i += VW) {
		FN(vf) v = FN(expv)(FN(ld)(src + i));
		memcpy(dst + i, &v, sizeof v);
	}
	if (i < n) {
		float a[VW] = {0};
		memcpy(a, src + i, (n - i) * 4);
		FN(vf) v = FN(expv)(FN(ld)(a));
		memcpy(dst + i, &v, (n - i) * 4);
	}
}

// silu_mul: gate[i] = gate[i] / (1 + e^-gate[i]) * up[i].
void API(silu_mul)(float *gate, const float *up, long n) {
	long i = 0;
	for (; i + VW <= n; i += VW) {
		FN(vf) g = FN(ld)(gate + i);
		FN(vf) v = g / (1.0f + FN(expv)(-g)) * FN(ld)(up + i);
		memcpy(gate + i, &v, sizeof v);
	}
	if (i < n) {
		float a[VW] = {0}, b[VW] = {0};
		memcpy(a, gate + i, (n - i) * 4);
		memcpy(b, up + i, (n - i) * 4);
		FN(vf) g = FN(ld)(a);
		FN(vf) v = g / (1.0f + FN(expv)(-g)) * FN(ld)(b);
		memcpy(gate + i, &v, (n - i) * 4);
	}
}

// add: dst[i] += x[i].
void API(add)(float *dst, const float *x, long n) {
	long i = 0;
	for (; i + VW <= n; i += VW) {
		FN(vf) v = FN(ld)(dst + i) + FN(ld)(x + i);
		memcpy(dst + i, &v, sizeof v);
	}
	for (; i < n; i++) dst[i] += x[i];
}

// swiglu_oai_v: gpt-oss's clamped SwiGLU of one vector of gate and up
// values (swiglu_oai).
static inline __attribute__((always_inline)) FN(vf) FN(swiglu_oai_v)(FN(vf) g, FN(vf) u, float alpha, float limit) {
	const FN(vf) hi = (FN(vf)){0} + limit, lo = (FN(vf)){0} - limit;
	g = FN(sel)(g > hi, hi, g);
	u = FN(sel)(u > hi, hi, u);
	u = FN(sel)(u < lo, lo, u);
	return g / (1.0f + FN(expv)(g * -alpha)) * (u + 1.0f);
}

// swiglu_oai: gate[i] = g / (1 + e^(-alpha g)) * (u + 1) with g =
// min(gate[i], limit) and u = up[i] clamped to [-limit, limit].
void API(swiglu_oai)(float *gate, const float *up, long n, float alpha, float limit) {
	long i = 0;
	for (; i + VW <= n; i += VW) {
		FN(vf) v = FN(swiglu_oai_v)(FN(ld)(gate + i), FN(ld)(up + i), alpha, limit);
		memcpy(gate + i, &v, sizeof v);
	}
	if (i < n) {
		float a[VW] = {0}, b[VW] = {0};
		memcpy(a, gate + i, (n - i) * 4);
		memcpy(b, up + i, (n - i) * 4);
		FN(vf) v = FN(swiglu_oai_v)(FN(ld)(a), FN(ld)(b), alpha, limit);
		memcpy(gate + i, &v, (n - i) * 4);
	}
}

// mulvect: y[c] = sum_r x[r] * a[r*cols + c] for c < cols (y = Aᵀx, A
// row-major rows x cols): the columns go along the vector lanes.
void API(mulvect)(float *y, const float *a, const float *x, long rows, long cols) {
	long c = 0;
	for (; c + 4 * VW <= cols; c += 4 * VW) {
		FN(vf) s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
		for (long r = 0; r < rows; r++) {
			const float *ar = a + r * cols + c;
			float xv = x[r];
			s0 += FN(ld)(ar) * xv;
			s1 += FN(ld)(ar + VW) * xv;
			s2 += FN(ld)(ar + 2 * VW) * xv;
			s3 += FN(ld)(ar + 3 * VW) * xv;
		}
		memcpy(y + c, &s0, sizeof s0);
		memcpy(y + c + VW, &s1, sizeof s1);
		memcpy(y + c + 2 * VW, &s2, sizeof s2);
		memcpy(y + c + 3 * VW, &s3, sizeof s3);
	}
	for (; c + VW <= cols; c += VW) {
		FN(vf) s0 = {0};
		for (long r = 0; r < rows; r++) s0 += FN(ld)(a + r * cols + c) * x[r];
		memcpy(y + c, &s0, sizeof s0);
	}
	for (; c < cols; c++) {
		float s0 = 0;
		for (long r = 0; r < rows; r++) s0 += a[r * cols + c] * x[r];
		y[c] = s0;
	}
}

// round_f16s: dst[i] = src[i] rounded to F16 (nearest even) and back.
void API(round_f16s)(float *dst, const float *src, long n) {
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

void API(f16_to_f32s)(float *dst, const uint16_t *src, long n) {
	long i = 0;
#if defined(HAVE_F16C) && VW == 16
	for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#elif defined(HAVE_F16C)
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
	for (; i < n; i++) dst[i] = weft_f16_to_f32(src[i]);
}

void API(f32_to_f16s)(uint16_t *dst, const float *src, long n) {
	long i = 0;
#if defined(HAVE_F16C) && VW == 16
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(HAVE_F16C)
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
	for (; i < n; i++) dst[i] = weft_f32_to_f16(src[i]);
}

#undef FN
#undef H2F
#undef CAT
#undef CAT_
#undef API
