// dequant.cuh: element i of a row stored in ggml type `type`, as float, in
// the same arithmetic order as ggml's reference dequantizers so F16/Q8_0/
// Q4_0/Q4_K/Q6_K rows come out bit-identical to the CPU path.
#pragma once
#include "common.cuh"

// Q4_K packs 8 six-bit scales and 8 six-bit mins into 12 bytes.
__device__ __forceinline__ void q4k_scale_min(int j, const uint8_t *q, int *sc, int *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

__device__ __forceinline__ float dq_elem(const uint8_t *row, int type, int i) {
	switch (type) {
	case WT_F32:
		return ((const float *)row)[i];
	case WT_F16:
		return h2f(((const uint16_t *)row)[i]);
	case WT_BF16:
		return __uint_as_float(((uint32_t)((const uint16_t *)row)[i]) << 16);
	case WT_Q8_0: {
		const uint8_t *b = row + (i >> 5) * 34;
		return (float)(int8_t)b[2 + (i & 31)] * h2f(ld16(b));
	}
	case WT_Q4_0: {
		const uint8_t *b = row + (i >> 5) * 18;
		int j = i & 31;
		int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
		return (float)(q - 8) * h2f(ld16(b));
	}
	case WT_Q4_K: {
		const uint8_t *b = row + (i >> 8) * 144;
		float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
		int j = i & 255, g = j >> 6, w = j & 63, l = w & 31, hi = w >> 5;
		int sc, m;
		q4k_scale_min(2 * g + hi, b + 4, &sc, &m);
		uint8_t q = b[16 + 32 * g + l];
		int nib = hi ? (q >> 4) : (q & 0xF);
		float d1 = d * (float)sc, m1 = dmin * (float)m;
		return d1 * (float)nib - m1;
	}
	case WT_Q6_K: {
		const uint8_t *b = row + (i >> 8) * 210;
		const uint8_t *ql = b, *qh = b + 128;
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = h2f(ld16(b + 208));
		int j = i & 255, n = j >> 7, r = j & 127, quarter = r >> 5, l = r & 31;
		uint8_t lo = ql[64 * n + l + ((quarter & 1) ? 32 : 0)];
		int low = (quarter >= 2) ? (lo >> 4) : (lo & 0xF);
		int high = (qh[32 * n + l] >> (2 * quarter)) & 3;
		int q = (low | (high << 4)) - 32;
		return d * (float)sc[8 * n + (l >> 4) + 2 * quarter] * (float)q;
	}
	}
	return __int_as_float(0x7fc00000); // NaN: unknown type (the host rejects these first)
}

#ifndef WEFT_HOST_TEST
// dequant_f16 expands rows x cols elements of a ggml-typed matrix into F16,
// row-major, at out. rowbytes is the stored size of one row.
WEFT_KERNEL void dequant_f16(__half *out, const uint8_t *data, int type, long long rows, long long cols, long long rowbytes) {
	long long n = rows * cols;
	for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
		long long r = e / cols, c = e - r * cols;
		out[e] = __float2half(dq_elem(data + r * rowbytes, type, (int)c));
	}
}

// embed writes the dequantized embedding row of tokens[t] to out[t*dim:],
// float32, for t in [0, gridDim.x).
WEFT_KERNEL void embed(float *out, const uint8_t *table, int type, long long rowbytes, const int *tokens, int dim) {
	int t = blockIdx.x;
	const uint8_t *row = table + (long long)tokens[t] * rowbytes;
	for (int c = threadIdx.x; c < dim; c += blockDim.x) out[(long long)t * dim + c] = dq_elem(row, type, c);
}
#endif
