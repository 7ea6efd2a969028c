// body_iq4.h: a fragment: the 4-bit table types IQ4_NL, IQ4_XS and MXFP4
// (their layouts: dequant_iq4.go). The first part, the value tables and
// the E8M0 scale, is included once per translation unit (kern_iq4.c and,
// through body_matmul.h, every kernel set); the second, the row
// dequantizers of the float kernels, only where body_matmul.h defines FN
// (same arithmetic as the Go reference: one float product per value).
#ifndef WEFT_KERN_IQ4_H
#define WEFT_KERN_IQ4_H
#include <stdint.h>
#include <string.h>

// weft_iq4_values: the IQ4_NL / IQ4_XS values; weft_mxfp4_values: the
// E2M1 values doubled (0, 0.5, ..., 6 and negatives, times 2).
static const int8_t weft_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t weft_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// weft_e8m0_half: 2^(e-128), half the E8M0 scale (the doubled values undo
// the halving); e < 2 gives the subnormals 2^-128, 2^-127.
static inline float weft_e8m0_half(uint8_t e) {
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

// weft_iq4xs_scale: the 6-bit scale of sub-block ib (0..7) of an IQ4_XS
// super-block blk, less 32 (-32..31).
static inline int weft_iq4xs_scale(const uint8_t *blk, int ib) {
	int sh = blk[2] | blk[3] << 8;
	return (((blk[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
}
#endif

#ifdef FN
static void FN(dq_iq4_nl)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 18, *q = blk + 2;
		float d = H2F(blk[0] | blk[1] << 8);
		float *y = dst + b * 32;
		for (int j = 0; j < 16; j++) {
			y[j] = d * (float)weft_iq4_values[q[j] & 15];
			y[j + 16] = d * (float)weft_iq4_values[q[j] >> 4];
		}
	}
}

static void FN(dq_iq4_xs)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 256; b++) {
		const uint8_t *blk = src + b * 136, *q = blk + 8;
		float d = H2F(blk[0] | blk[1] << 8);
		float *y = dst + b * 256;
		for (int ib = 0; ib < 8; ib++, q += 16, y += 32) {
			float dl = d * (float)weft_iq4xs_scale(blk, ib);
			for (int j = 0; j < 16; j++) {
				y[j] = dl * (float)weft_iq4_values[q[j] & 15];
				y[j + 16] = dl * (float)weft_iq4_values[q[j] >> 4];
			}
		}
	}
}

static void FN(dq_mxfp4)(const uint8_t *restrict src, float *restrict dst, int K) {
	for (int b = 0; b < K / 32; b++) {
		const uint8_t *blk = src + b * 17, *q = blk + 1;
		float d = weft_e8m0_half(blk[0]);
		float *y = dst + b * 32;
		for (int j = 0; j < 16; j++) {
			y[j] = (float)weft_mxfp4_values[q[j] & 15] * d;
			y[j + 16] = (float)weft_mxfp4_values[q[j] >> 4] * d;
		}
	}
}
#endif
