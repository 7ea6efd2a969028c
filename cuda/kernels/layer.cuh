// layer.cuh: the element-wise and per-row kernels of a transformer layer.
#pragma once
#include "common.cuh"

// rmsnorm_f16: out[r] = x[rows[r]] / sqrt(mean(x^2) + eps) * w, as F16 (the
// input of the next GEMM). rows may be NULL (row r reads x[r]). One block per
// output row.
WEFT_KERNEL void rmsnorm_f16(__half *out, const float *x, const float *w, const int *rows, int dim, float eps) {
	__shared__ float red[32];
	int r = blockIdx.x;
	const float *xr = x + (long long)(rows ? rows[r] : r) * dim;
	float ss = 0.f;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
	ss = block_sum(ss, red);
	float scale = 1.0f / sqrtf(ss / (float)dim + eps);
	for (int i = threadIdx.x; i < dim; i += blockDim.x) out[(long long)r * dim + i] = __float2half(xr[i] * scale * w[i]);
}

// add_bias: x[t*ld + j] += b[j] for j < n, t < gridDim.x (the qwen2 q/k/v biases).
WEFT_KERNEL void add_bias(float *x, const float *b, int ld, int n) {
	float *xr = x + (long long)blockIdx.x * ld;
	for (int j = threadIdx.x; j < n; j += blockDim.x) xr[j] += b[j];
}

// rope rotates the q heads (columns [0, H*hd)) and k heads (the KVH heads
// after them) of each token's qkv row, as the CPU backend does (ggml's
// formulas): theta_i = pos * theta_scale^i by repeated float32
// multiplication, divided by freq_factors[i] when given (llama3 scaling or
// rope_freqs.weight), cos/sin in double. neox pairs (i, i+hd/2); otherwise
// adjacent pairs (2i, 2i+1). Grid (tokens, ceil((H + KVH) / blockDim.y)):
// thread (i, y) turns pair i (blockDim.x >= hd/2) of head blockIdx.y *
// blockDim.y + y.
WEFT_KERNEL void rope(float *qkv, int ld, const int *pos, int H, int KVH, int hd, int neox, float theta_scale,
                      const float *freq_factors) {
	int t = blockIdx.x, head = blockIdx.y * blockDim.y + threadIdx.y, i = threadIdx.x, half_hd = hd / 2;
	if (i >= half_hd || head >= H + KVH) return;
	float *base = qkv + (long long)t * ld + head * hd;
	float theta = (float)pos[t];
	for (int j = 0; j < i; j++) theta *= theta_scale;
	if (freq_factors) theta /= freq_factors[i];
	float c = (float)cos((double)theta), s = (float)sin((double)theta);
	int a = neox ? i : 2 * i, b = neox ? i + half_hd : 2 * i + 1;
	float x0 = base[a], x1 = base[b];
	base[a] = x0 * c - x1 * s;
	base[b] = x0 * s + x1 * c;
}

// kv_write stores token t's K (qkv columns [koff, koff+kvdim)) and V
// (columns [voff, voff+kvdim)) as F16 in cache slot slot[t] (= block *
// block_size + position in block) of this layer's K and V pools.
WEFT_KERNEL void kv_write(__half *kc, __half *vc, const float *qkv, int ld, int koff, int voff, const int *slot, int kvdim) {
	int t = blockIdx.x;
	const float *row = qkv + (long long)t * ld;
	long long s = (long long)slot[t] * kvdim;
	for (int j = threadIdx.x; j < kvdim; j += blockDim.x) {
		kc[s + j] = __float2half(row[koff + j]);
		vc[s + j] = __float2half(row[voff + j]);
	}
}

// swiglu: out[t*F + j] = silu(gate) * up, with gate = gu[t*2F + j] and
// up = gu[t*2F + F + j] (gate and up come from one fused GEMM). F16 out.
// Grid (ceil(F / blockDim.x), tokens).
WEFT_KERNEL void swiglu(__half *out, const float *gu, int F) {
	int t = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= F) return;
	const float *g = gu + (long long)t * 2 * F, *u = g + F;
	float x = g[j];
	out[(long long)t * F + j] = __float2half(x / (1.0f + expf(-x)) * u[j]);
}

// add: x[i] += y[i] for i < n (residual add, for paths the GEMM's beta=1
// accumulate does not cover).
WEFT_KERNEL void add(float *x, const float *y, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) x[i] += y[i];
}
