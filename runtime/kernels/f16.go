package kernels

import "github.com/weft-inference/weft/runtime/quant"

// F16ToF32s converts len(dst) halves from src; len(src) must be >= len(dst).
func F16ToF32s(dst []float32, src []uint16) {
	src = src[:len(dst)]
	if len(dst) >= bulkMin && f16ToF32sFast(dst, src) {
		return
	}
	for i, h := range src {
		dst[i] = quant.F16ToF32(h)
	}
}

// F32ToF16s converts len(dst) floats from src; len(src) must be >= len(dst).
func F32ToF16s(dst []uint16, src []float32) {
	src = src[:len(dst)]
	if len(dst) >= bulkMin && f32ToF16sFast(dst, src) {
		return
	}
	for i, f := range src {
		dst[i] = quant.F32ToF16(f)
	}
}

// bulkMin is the slice length from which the bulk helpers call the SIMD code.
const bulkMin = 128

// RoundF16s sets dst[i] to src[i] rounded to F16 (nearest even) and back,
// for i < len(dst); dst may alias src. It is what a value goes through when
// ggml stores it as F16 and reads it again.
func RoundF16s(dst, src []float32) {
	src = src[:len(dst)]
	if len(dst) >= roundMin && roundF16sFast(dst, src) {
		return
	}
	for i, f := range src {
		dst[i] = quant.RoundF16(f)
	}
}

// roundMin is the length from which RoundF16s calls the SIMD code.
const roundMin = 16
