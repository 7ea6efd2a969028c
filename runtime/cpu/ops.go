package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

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

// matMulsRagged computes products with their own token counts
// (kernels.MatMulsRagged), each reading its tokens from a slice of x, a
// buffer the caller owns and reads no further: where a product's weight is
// F16, x is rounded to F16 in place first (as matMuls rounds its input),
// after the other products have read it unrounded.
func matMulsRagged(x []float32, ps []kernels.Product) error {
	f16 := 0
	for _, p := range ps {
		if p.W.Type == gguf.TypeF16 {
			f16++
		}
	}
	run := func(ps []kernels.Product) error {
		if matMulHook != nil {
			for _, p := range ps {
				handled, err := matMulHook(p.Y, p.W, p.X, p.N)
				if err == nil && !handled {
					err = kernels.MatMul(p.Y, p.W, p.X, p.N)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
		return kernels.MatMulsRagged(ps...)
	}
	if f16 == 0 {
		return run(ps)
	}
	if f16 < len(ps) {
		// Mixed types: the others first, from x unrounded; then the F16
		// products move to the front.
		others := make([]kernels.Product, 0, len(ps)-f16)
		k := 0
		for _, p := range ps {
			if p.W.Type == gguf.TypeF16 {
				ps[k] = p
				k++
			} else {
				others = append(others, p)
			}
		}
		if err := run(others); err != nil {
			return err
		}
		ps = ps[:k]
	}
	kernels.RoundF16s(x, x)
	return run(ps)
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

// add sets dst[i] += src[i] (len(src) values).
func add(dst, src []float32) { kernels.Add(dst[:len(src)], src) }

// headNorms applies rmsNorm in place to each head (hd values) of x, with
// the same weight w for every head (qwen3's and gemma3's q/k norms).
func headNorms(x []float32, hd int, w []float32, eps float32) {
	for h := 0; h+hd <= len(x); h += hd {
		rmsNorm(x[h:h+hd], x[h:h+hd], w, eps)
	}
}

// mulScalar sets x[i] *= s (float32, as ggml_scale).
func mulScalar(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// softcap sets x[i] = c·tanh(x[i]·(1/c)), as llama.cpp caps gemma logits
// (ggml_scale, ggml_tanh, ggml_scale, each in float32).
func softcap(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

// geluMul sets gate[i] = gelu(gate[i]) * up[i] with GELU's tanh
// approximation as ggml's CPU backend computes it (GGML_GELU_FP16): 0 at
// or below -10, the identity at or above 10, and in between a table of
// gelu at every F16 value, looked up at gate rounded to F16, the table's
// entries themselves F16.
func geluMul(gate, up []float32) {
	tab := geluTable()
	for i, x := range gate {
		switch {
		case x <= -10:
			gate[i] = 0
		case x >= 10:
			gate[i] = x * up[i]
		default:
			gate[i] = quant.F16ToF32(tab[quant.F32ToF16(x)]) * up[i]
		}
	}
}

// geluTable returns the F16 table of geluMul, built on first use.
var geluTable = sync.OnceValue(func() *[1 << 16]uint16 {
	var tab [1 << 16]uint16
	const (
		coefA       = float32(0.044715)
		sqrt2OverPi = float32(0.79788456080286535587989211986876)
	)
	for i := range tab {
		x := quant.F16ToF32(uint16(i))
		// ggml_gelu_f32, operation by operation in float32.
		inner := sqrt2OverPi * x * (1 + coefA*x*x)
		g := 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
		tab[i] = quant.F32ToF16(g)
	}
	return &tab
})
