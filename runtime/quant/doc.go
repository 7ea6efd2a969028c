// Package quant holds weft's tensor element types at run time: bit-exact
// dequantization of every GGUF type a common download contains, the
// encoders that write the types test models use, the one half-precision
// converter, and the Weight view of a matrix. It is pure Go; the kernels
// that compute with these formats live in runtime/kernels, which imports
// this package (never the reverse).
//
// # Dequantize (dequant.go)
//
// Dequantize decodes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the
// K-quants Q2_K..Q6_K and the 4-bit table types IQ4_NL, IQ4_XS and MXFP4
// (dequant_iq4.go). It is the reference the kernels are held to: each
// formula repeats ggml's scalar arithmetic in the same order, with explicit
// float32 conversions so no compiler fuses a product into an FMA, and is
// checked bit for bit (sha256 of the float32 output) against ggml's own
// dequantization of every tensor of every synth-256 model in ../shared
// (and of every IQ4_NL, IQ4_XS and MXFP4 tensor of synth/arch2). Wrong
// sizes give an error wrapping ErrSize, unknown types one wrapping ErrType.
//
// # Quantize (quantize.go, quantize_iq4.go)
//
// Quantize is the other direction for F32, F16, Q8_0, Q4_0, Q4_K, Q6_K,
// IQ4_NL and MXFP4 (round to nearest, as gen-model needs).
//
// # Half precision (f16.go)
//
// F16ToF32 and F32ToF16 are the one half-precision converter of weft:
// exact one way, round to nearest even the other, NaNs kept NaN (same sign,
// quiet, the top payload bits kept) and overflow to infinity, as the F16C
// instructions and ggml on x86 do. RoundF16 is a value stored as F16 and
// read back. The bulk conversions over slices (F16ToF32s, F32ToF16s,
// RoundF16s) run in SIMD and live in runtime/kernels, whose tests hold
// every kernel set to these scalar functions over all 65,536 halves.
//
// # Weight (weight.go)
//
// A Weight is one GGUF matrix in its stored form: Rows rows of Cols
// elements, row-major, RowBytes per row, usually a view into the
// memory-mapped file. FromTensor builds a validated one from a 2-D (or
// 1-D) tensor; Validate checks one built by hand; Row dequantizes one row
// (the embedding lookup).
//
// Example:
//
//	w, err := quant.FromTensor(ti) // a *gguf.TensorInfo
//	if err != nil { ... }
//	row := make([]float32, w.Cols)
//	w.Row(0, row)
package quant
