package llama

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// matMul computes y[t*w.Rows+r] = Σ_k W[r][k]·x[t*w.Cols+k] for t < n,
// reading the weights once for all n tokens (quant.MatMul). For F16 weights
// the activations are first rounded to F16, as ggml does (its F16 dot
// product takes both operands in F16); xr is scratch of at least n*w.Cols.
func matMul(y []float32, w quant.Weight, x []float32, n int, xr []float32) {
	if w.Type == gguf.TypeF16 {
		xr = xr[:n*w.Cols]
		for i, v := range x[:n*w.Cols] {
			xr[i] = roundF16(v)
		}
		x = xr
	}
	if matMulHook != nil && matMulHook(y, w, x, n) {
		return
	}
	quant.MatMul(y, w, x, n)
}

// matMulHook, when set (tests), may take over a product.
var matMulHook func(y []float32, w quant.Weight, x []float32, n int) bool

// dequantRow writes row r of w as float32 into dst.
func dequantRow(w quant.Weight, r int, dst []float32) {
	switch w.Type {
	case gguf.TypeF32:
		b := w.Data[r*w.Cols*4:]
		for i := range dst[:w.Cols] {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case gguf.TypeF16:
		b := w.Data[r*w.Cols*2:]
		for i := range dst[:w.Cols] {
			dst[i] = f16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	default:
		rb, err := w.Type.RowBytes(w.Cols)
		if err == nil {
			err = quant.Dequantize(w.Type, w.Data[r*rb:(r+1)*rb], dst[:w.Cols])
		}
		if err != nil {
			panic(fmt.Sprintf("llama: dequantRow: %v", err)) // load validated the type and size
		}
	}
}

// rmsNorm writes x/rms(x)*w into dst, as ggml does: the mean of squares in
// float64, the scale rounded to float32, then multiplied by the weight.
func rmsNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		dst[i] = (v * scale) * w[i]
	}
}

// siluMul sets gate[i] = silu(gate[i]) * up[i].
func siluMul(gate, up []float32) {
	for i, g := range gate {
		gate[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// add sets dst[i] += src[i].
func add(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
