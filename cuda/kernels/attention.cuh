// attention.cuh: causal paged attention over a ragged batch.
//
// Every token t of the batch (a prompt chunk's tokens or a decode token)
// attends to positions [0, pos[t]] of its own sequence, whose K/V live in
// the paged pool: position p of sequence s is in slot
// table_s[p / block_size] * block_size + p % block_size. Query head h reads
// KV head h / (H / KVH) (GQA).
//
// Grid (tokens, H, nsplit): the KV range of each (token, head) is cut into
// nsplit pieces (flash-decoding: long decodes use many blocks); each block
// walks its piece in tiles of ATT_TILE keys held in shared memory with an
// online softmax. With nsplit == 1 the block writes the F16 output row
// directly; otherwise it writes (acc[hd], max, sum) partials that
// attention_reduce merges.
#pragma once
#include "common.cuh"

#define ATT_THREADS 128
#define ATT_TILE 128
#define ATT_MAX_HD 256

WEFT_KERNEL void __launch_bounds__(ATT_THREADS) attention(
	__half *out, float *part, const float *qkv, int ld,
	const __half *kc, const __half *vc,
	const int *tok_seq, const int *tok_pos, const int *seq_bt, const int *bt,
	int block_size, int H, int KVH, int hd, float scale, int nsplit) {
	__shared__ float q_s[ATT_MAX_HD];
	__shared__ float p_s[ATT_TILE];
	__shared__ long long slot_s[ATT_TILE];
	__shared__ float red[32];

	int t = blockIdx.x, h = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x;
	int L = tok_pos[t] + 1;
	int chunk = (L + nsplit - 1) / nsplit;
	int k0 = sp * chunk, k1 = min(L, k0 + chunk);
	int kvh = h / (H / KVH), kvdim = KVH * hd;
	const int *table = bt + seq_bt[tok_seq[t]];

	// q is rounded to F16 like the K it meets (as the CPU backend and ggml do).
	for (int d = tid; d < hd; d += ATT_THREADS) q_s[d] = __half2float(__float2half(qkv[(long long)t * ld + h * hd + d]));
	__syncthreads();

	float m = -INFINITY, l = 0.f;
	float acc[ATT_MAX_HD / ATT_THREADS] = {0.f, 0.f};
	for (int kt = k0; kt < k1; kt += ATT_TILE) {
		int n = min(ATT_TILE, k1 - kt);
		float s = -INFINITY;
		if (tid < n) {
			int key = kt + tid;
			long long slot = (long long)table[key / block_size] * block_size + key % block_size;
			slot_s[tid] = slot;
			const __half2 *kp = (const __half2 *)(kc + slot * kvdim + kvh * hd);
			float dot = 0.f;
			for (int d = 0; d < hd / 2; d++) {
				float2 kf = __half22float2(kp[d]);
				dot += q_s[2 * d] * kf.x + q_s[2 * d + 1] * kf.y;
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
		for (int j = 0; j < ATT_MAX_HD / ATT_THREADS; j++) {
			int d = tid + j * ATT_THREADS;
			if (d >= hd) break;
			float a = 0.f;
			for (int k = 0; k < n; k++) a += p_s[k] * __half2float(vc[slot_s[k] * kvdim + kvh * hd + d]);
			acc[j] = acc[j] * corr + a;
		}
		__syncthreads();
	}
	if (nsplit == 1) {
		for (int j = 0; j < ATT_MAX_HD / ATT_THREADS; j++) {
			int d = tid + j * ATT_THREADS;
			if (d < hd) out[(long long)t * H * hd + h * hd + d] = __float2half(acc[j] / l);
		}
		return;
	}
	float *pp = part + (((long long)t * H + h) * nsplit + sp) * (hd + 2);
	for (int j = 0; j < ATT_MAX_HD / ATT_THREADS; j++) {
		int d = tid + j * ATT_THREADS;
		if (d < hd) pp[d] = acc[j];
	}
	if (tid == 0) {
		pp[hd] = m;
		pp[hd + 1] = l;
	}
}

// attention_reduce merges the nsplit partials of each (token, head): grid
// (tokens, H).
WEFT_KERNEL void attention_reduce(__half *out, const float *part, int H, int hd, int nsplit) {
	int t = blockIdx.x, h = blockIdx.y;
	const float *base = part + ((long long)t * H + h) * nsplit * (hd + 2);
	float M = -INFINITY;
	for (int sp = 0; sp < nsplit; sp++) M = fmaxf(M, base[sp * (hd + 2) + hd]);
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float num = 0.f, den = 0.f;
		for (int sp = 0; sp < nsplit; sp++) {
			const float *pp = base + sp * (hd + 2);
			if (pp[hd + 1] == 0.f) continue; // empty piece
			float w = expf(pp[hd] - M);
			num += w * pp[d];
			den += w * pp[hd + 1];
		}
		out[(long long)t * H * hd + h * hd + d] = __float2half(num / den);
	}
}
