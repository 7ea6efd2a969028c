// attention.cuh: causal paged attention over a ragged batch.
//
// Every token t of the batch (a prompt chunk's tokens or a decode token)
// attends to positions [0, pos[t]] of its own sequence, whose K/V live in
// the paged pool: position p of sequence s is in slot
// table_s[p / block_size] * block_size + p % block_size. Query head h reads
// KV head h / (H / KVH) (GQA).
//
// Grid (tokens, H, nsplit): the L = pos[t] + 1 keys of token t are cut into
// att_pieces(L) pieces (flash-decoding: long decodes use many blocks); each
// block walks its piece in tiles of ATT_TILE keys held in shared memory with
// an online softmax: each thread scores one key of a tile, then the threads
// share out the tile's keys and the head's dimensions (two each) to sum
// p.V. A token with one piece writes its F16 output row
// directly; otherwise each piece writes (acc[hd], max, sum) partials that
// attention_reduce merges in piece order. The pieces depend on L alone, never
// on the other tokens of the batch or on nsplit (the grid's depth, at least
// the most pieces any token has; blocks past a token's pieces return), so a
// sequence's attention is bitwise the same whatever shares its step.
#pragma once
#include "common.cuh"

#define ATT_THREADS 128
#define ATT_TILE 128
#define ATT_MAX_HD 256
// A token's keys are cut into pieces of at least ATT_PIECE_KEYS keys, at
// most ATT_MAX_PIECES of them (cuda/sizes.go: splitKeys, maxSplit).
#define ATT_PIECE_KEYS 128
#define ATT_MAX_PIECES 16

__device__ __forceinline__ int att_pieces(int L) { return min(ATT_MAX_PIECES, (L + ATT_PIECE_KEYS - 1) / ATT_PIECE_KEYS); }

WEFT_KERNEL void __launch_bounds__(ATT_THREADS) attention(
	__half *out, float *part, const float *qkv, int ld,
	const __half *kc, const __half *vc,
	const int *tok_seq, const int *tok_pos, const int *seq_bt, const int *bt,
	int block_size, int H, int KVH, int hd, float scale, int nsplit) {
	__shared__ float q_s[ATT_MAX_HD];
	__shared__ float p_s[ATT_TILE];
	__shared__ long long slot_s[ATT_TILE];
	__shared__ float red[32];
	__shared__ float2 acc_s[ATT_THREADS];

	int t = blockIdx.x, h = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x;
	int L = tok_pos[t] + 1;
	int np = att_pieces(L);
	if (sp >= np) return;
	int chunk = (L + np - 1) / np;
	int k0 = sp * chunk, k1 = min(L, k0 + chunk);
	int kvh = h / (H / KVH), kvdim = KVH * hd;
	const int *table = bt + seq_bt[tok_seq[t]];

	// q is rounded to F16 like the K it meets (as the CPU backend and ggml do).
	for (int d = tid; d < hd; d += ATT_THREADS) q_s[d] = __half2float(__float2half(qkv[(long long)t * ld + h * hd + d]));
	__syncthreads();

	// P.V: thread (g, j) owns dimensions 2j and 2j+1 and every G-th key of
	// a tile; the G groups' sums are added in group order at the end.
	int hd2 = hd / 2, G = ATT_THREADS / hd2, g = tid / hd2, j = tid % hd2;
	bool pv = g < G;
	float m = -INFINITY, l = 0.f;
	float2 acc = make_float2(0.f, 0.f);
	for (int kt = k0; kt < k1; kt += ATT_TILE) {
		int n = min(ATT_TILE, k1 - kt);
		float s = -INFINITY;
		if (tid < n) {
			int key = kt + tid;
			long long slot = (long long)table[key / block_size] * block_size + key % block_size;
			slot_s[tid] = slot;
			const __half *kp = kc + slot * kvdim + kvh * hd;
			float dot = 0.f;
			if ((hd & 7) == 0) { // rows are 16-byte aligned: 8 halves a load
				const uint4 *k8 = (const uint4 *)kp;
				for (int d8 = 0; d8 < hd / 8; d8++) {
					uint4 u = k8[d8];
					const __half2 *kh = (const __half2 *)&u;
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float2 kf = __half22float2(kh[e]);
						int d = 8 * d8 + 2 * e;
						dot += q_s[d] * kf.x + q_s[d + 1] * kf.y;
					}
				}
			} else {
				const __half2 *kh = (const __half2 *)kp;
				for (int d = 0; d < hd2; d++) {
					float2 kf = __half22float2(kh[d]);
					dot += q_s[2 * d] * kf.x + q_s[2 * d + 1] * kf.y;
				}
			}
			s = dot * scale;
		}
		float mt = block_max(s, red);
		float mnew = fmaxf(m, mt);
		float p = tid < n ? expf(s - mnew) : 0.f;
		p_s[tid] = p;
		float ps = block_sum(p, red); // also publishes p_s and slot_s (it synchronises)
		float corr = expf(m - mnew);  // 0 on the first tile (m = -inf)
		l = l * corr + ps;
		m = mnew;
		if (pv) {
			float2 a = make_float2(0.f, 0.f);
			const __half2 *vh = (const __half2 *)(vc + kvh * hd) + j;
#pragma unroll 4
			for (int k = g; k < n; k += G) {
				float2 vf = __half22float2(vh[slot_s[k] * (kvdim / 2)]);
				a.x += p_s[k] * vf.x;
				a.y += p_s[k] * vf.y;
			}
			acc.x = acc.x * corr + a.x;
			acc.y = acc.y * corr + a.y;
		}
		__syncthreads();
	}
	if (pv) acc_s[tid] = acc;
	__syncthreads();
	if (g != 0) return;
	float2 tot = acc_s[j];
	for (int gg = 1; gg < G; gg++) {
		tot.x += acc_s[gg * hd2 + j].x;
		tot.y += acc_s[gg * hd2 + j].y;
	}
	if (np == 1) {
		__half *o = out + (long long)t * H * hd + h * hd + 2 * j;
		o[0] = __float2half(tot.x / l);
		o[1] = __float2half(tot.y / l);
		return;
	}
	float *pp = part + (((long long)t * H + h) * nsplit + sp) * (hd + 2);
	pp[2 * j] = tot.x;
	pp[2 * j + 1] = tot.y;
	if (tid == 0) {
		pp[hd] = m;
		pp[hd + 1] = l;
	}
}

// attention_reduce merges the partials of each (token, head) that attention
// cut into more than one piece: grid (tokens, H); nsplit is attention's.
WEFT_KERNEL void attention_reduce(__half *out, const float *part, const int *tok_pos, int H, int hd, int nsplit) {
	int t = blockIdx.x, h = blockIdx.y;
	int np = att_pieces(tok_pos[t] + 1);
	if (np == 1) return; // attention wrote the row
	const float *base = part + ((long long)t * H + h) * nsplit * (hd + 2);
	float M = -INFINITY;
	for (int sp = 0; sp < np; sp++) M = fmaxf(M, base[sp * (hd + 2) + hd]);
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float num = 0.f, den = 0.f;
		for (int sp = 0; sp < np; sp++) {
			const float *pp = base + sp * (hd + 2);
			if (pp[hd + 1] == 0.f) continue; // empty piece
			float w = expf(pp[hd] - M);
			num += w * pp[d];
			den += w * pp[hd + 1];
		}
		out[(long long)t * H * hd + h * hd + d] = __float2half(num / den);
	}
}
