// sample.cuh: greedy sampling on the device. One block per logits row:
// ids[r] = argmax (lowest id on ties, as runtime/sample does) and lp[r] its
// log-probability over the full softmax. Only ids and logprobs cross back
// to the host.
#pragma once
#include "common.cuh"

WEFT_KERNEL void argmax_logprob(const float *logits, int vocab, int *ids, float *lp) {
	__shared__ float red[32];
	__shared__ float bv[32];
	__shared__ int bi[32];
	const float *x = logits + (long long)blockIdx.x * vocab;
	float best = -INFINITY;
	int besti = 0x7fffffff;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
		if (x[i] > best) { best = x[i]; besti = i; }
	}
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, best, o);
		int oi = __shfl_xor_sync(0xffffffffu, besti, o);
		if (ov > best || (ov == best && oi < besti)) { best = ov; besti = oi; }
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	if (lane == 0) { bv[w] = best; bi[w] = besti; }
	__syncthreads();
	if (w == 0) {
		best = lane < nw ? bv[lane] : -INFINITY;
		besti = lane < nw ? bi[lane] : 0x7fffffff;
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(0xffffffffu, best, o);
			int oi = __shfl_xor_sync(0xffffffffu, besti, o);
			if (ov > best || (ov == best && oi < besti)) { best = ov; besti = oi; }
		}
		if (lane == 0) { bv[0] = best; bi[0] = besti; }
	}
	__syncthreads();
	float mx = bv[0];
	float s = 0.f;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) s += expf(x[i] - mx);
	s = block_sum(s, red);
	if (threadIdx.x == 0) {
		ids[blockIdx.x] = bi[0];
		lp[blockIdx.x] = -logf(s);
	}
}
