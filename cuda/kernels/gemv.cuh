// gemv.cuh: the matrix products of steps with few tokens (decode batches of
// up to GEMV_MAX_T sequences), where cuBLAS's general kernels leave most of
// the memory bandwidth unused.
#pragma once
#include "common.cuh"

#define GEMV_MAX_T 8
#define GEMV_WARPS 8

// gemv_rows: warp w of the block computes output row o for all T tokens,
// reading W's row once, 8 halves (16 bytes) a lane at a time, and adding
// products in FP32; the warp's lanes are summed by shuffles.
template <int T>
__device__ __forceinline__ void gemv_rows(float *y, const __half *w, const __half *x, int out, int in, int accumulate) {
	int lane = threadIdx.x & 31;
	int o = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
	if (o >= out) return;
	const uint4 *wr = (const uint4 *)(w + (long long)o * in);
	float acc[T];
#pragma unroll
	for (int t = 0; t < T; t++) acc[t] = 0.f;
	int n8 = in / 8;
#pragma unroll 4
	for (int i = lane; i < n8; i += 32) {
		uint4 wu = wr[i];
		const __half2 *wh = (const __half2 *)&wu;
		float2 wf[4];
#pragma unroll
		for (int e = 0; e < 4; e++) wf[e] = __half22float2(wh[e]);
#pragma unroll
		for (int t = 0; t < T; t++) {
			uint4 xu = ((const uint4 *)(x + (long long)t * in))[i];
			const __half2 *xh = (const __half2 *)&xu;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 xf = __half22float2(xh[e]);
				acc[t] += wf[e].x * xf.x + wf[e].y * xf.y;
			}
		}
	}
#pragma unroll
	for (int t = 0; t < T; t++) {
		float v = warp_sum(acc[t]);
		if (lane == 0) {
			float *yp = y + (long long)t * out + o;
			*yp = accumulate ? *yp + v : v;
		}
	}
}

// gemv_f16: Y[T, out] = X[T, in] . W[out, in]^T (+ Y when accumulate),
// row-major, W and X F16, Y F32, for 1 <= T <= GEMV_MAX_T and in a multiple
// of 8 (rows 16-byte aligned). Grid ceil(out / GEMV_WARPS), block
// 32 * GEMV_WARPS.
WEFT_KERNEL void __launch_bounds__(32 * GEMV_WARPS) gemv_f16(float *y, const __half *w, const __half *x, int T, int out, int in, int accumulate) {
	switch (T) {
	case 1: gemv_rows<1>(y, w, x, out, in, accumulate); break;
	case 2: gemv_rows<2>(y, w, x, out, in, accumulate); break;
	case 3: gemv_rows<3>(y, w, x, out, in, accumulate); break;
	case 4: gemv_rows<4>(y, w, x, out, in, accumulate); break;
	case 5: gemv_rows<5>(y, w, x, out, in, accumulate); break;
	case 6: gemv_rows<6>(y, w, x, out, in, accumulate); break;
	case 7: gemv_rows<7>(y, w, x, out, in, accumulate); break;
	case 8: gemv_rows<8>(y, w, x, out, in, accumulate); break;
	}
}
