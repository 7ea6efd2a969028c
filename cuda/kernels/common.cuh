// common.cuh: helpers shared by weft's kernels. Every kernel is extern "C"
// so the Go side finds it by its plain name with cuModuleGetFunction.
#pragma once
#include <stdint.h>

#ifdef WEFT_HOST_TEST
// Host build of the element-wise helpers, for the equivalence test of the
// dequantizers (dequant_test.go); see testdata/host_shim.h.
#include "testdata/host_shim.h"
#else
#include <cuda_fp16.h>
#define WEFT_KERNEL extern "C" __global__
#endif

// Element types, the on-disk ggml numbers (runtime/gguf.Type).
enum {
	WT_F32 = 0,
	WT_F16 = 1,
	WT_Q4_0 = 2,
	WT_Q8_0 = 8,
	WT_Q4_K = 12,
	WT_Q6_K = 14,
	WT_BF16 = 30,
};

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// ld16 reads a little-endian u16 at any alignment (quant blocks are 18, 34,
// 144 or 210 bytes long, so their fields are not always 2-aligned).
__device__ __forceinline__ uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

#ifndef WEFT_HOST_TEST
__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// block_sum returns the sum of v over the block to every thread. red must
// hold 32 floats; the function synchronises the block twice.
__device__ __forceinline__ float block_sum(float v, float *red) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) red[w] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : 0.f;
	return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *red) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) red[w] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : -INFINITY;
	return warp_max(v);
}
#endif
