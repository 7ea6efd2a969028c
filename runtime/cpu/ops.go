package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/quant"
)

// matMul computes y[t*w.Rows+r] = Σ_k W[r][k]·x[t*w.Cols+k] for t < n,
// reading the weights once for all n tokens (kernels.MatMul). For F16 weights
// the activations are first rounded to F16, as ggml does (its F16 dot
// product takes both operands in F16); sc provides the scratch. It returns
// the kernel's failure.
func matMul(y []float32, w quant.Weight, x []float32, n int, sc *scratch) error {
	return matMuls(n, x, sc, kernels.Product{Y: y, W: w})
}

// matMuls computes several products of the same input x (their X is set
// here) as one parallel job (kernels.MatMuls). When any weight is F16, x is
// rounded to F16 once, into sc.xr, and that copy feeds the F16 products.
func matMuls(n int, x []float32, sc *scratch, ps ...kernels.Product) error {
	x = x[:n*ps[0].W.Cols]
	var xr []float32
	for i := range ps {
		ps[i].X = x
		if ps[i].W.Type == gguf.TypeF16 {
			if xr == nil {
				xr = sc.xr[:len(x)]
				kernels.RoundF16s(xr, x)
			}
			ps[i].X = xr
		}
	}
	if matMulHook != nil {
		for _, p := range ps {
			handled, err := matMulHook(p.Y, p.W, p.X, n)
			if err == nil && !handled {
				err = kernels.MatMul(p.Y, p.W, p.X, n)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return kernels.MatMuls(n, ps...)
}

// matMulHook, when set (tests), may take over a product (handled) or fail
// it as a kernel would.
var matMulHook func(y []float32, w quant.Weight, x []float32, n int) (handled bool, err error)

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
			dst[i] = quant.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	default:
		rb, err := w.Type.RowBytes(w.Cols)
		if err == nil {
			err = quant.Dequantize(w.Type, w.Data[r*rb:(r+1)*rb], dst[:w.Cols])
		}
		if err != nil {
			panic(fmt.Sprintf("cpu: dequantRow: %v", err)) // load validated the type and size
		}
	}
}

// rmsNorm writes x/rms(x)*w into dst, as ggml does: the mean of squares in
// float64, the scale rounded to float32, then multiplied by the weight.
func rmsNorm(dst, x, w []float32, eps float32) {
	// Four float64 sums break the add's latency chain; the order differs
	// from ggml's single sum by float64 roundings only.
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0] * v[0])
		s1 += float64(v[1] * v[1])
		s2 += float64(v[2] * v[2])
		s3 += float64(v[3] * v[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i] * x[i])
	}
	sum := (s0 + s1) + (s2 + s3)
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		dst[i] = (v * scale) * w[i]
	}
}

// siluMul sets gate[i] = silu(gate[i]) * up[i] (kernels.SiLUMul: a vector
// exponential within a few ulps, as ggml's own is).
func siluMul(gate, up []float32) { kernels.SiLUMul(gate, up) }

// add sets dst[i] += src[i].
func add(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
