package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// ggmlQ8MatMul is a slow scalar reference of how llama.cpp multiplies Q8_0
// and Q4_0 weights: the activations are quantized per 32 values to Q8_0
// (d = amax/127 stored as F16, q = round(x/d)), each block's integer dot
// product is scaled by d_w·d_x in float32, and the blocks are summed in
// float32.
func ggmlQ8MatMul(y []float32, w quant.Weight, x []float32, n int) {
	rb, _ := w.Type.RowBytes(w.Cols)
	bs := w.Type.BlockSize()
	nb := w.Cols / 32
	qx := make([]int8, w.Cols)
	dx := make([]float32, nb)
	var wq [32]int32
	for t := range n {
		xt := x[t*w.Cols : (t+1)*w.Cols]
		for b := range nb {
			var amax float32
			for _, v := range xt[32*b : 32*b+32] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			var id float32
			if d != 0 {
				id = 1 / d
			}
			dx[b] = quant.RoundF16(d)
			for i, v := range xt[32*b : 32*b+32] {
				qx[32*b+i] = int8(math.Round(float64(v * id)))
			}
		}
		for r := range w.Rows {
			row := w.Data[r*rb : (r+1)*rb]
			var sum float32
			for b := range nb {
				blk := row[bs*b : bs*(b+1)]
				dw := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
				if w.Type == gguf.TypeQ8_0 {
					for i := range 32 {
						wq[i] = int32(int8(blk[2+i]))
					}
				} else { // Q4_0
					for i := range 16 {
						wq[i] = int32(blk[2+i]&0xf) - 8
						wq[i+16] = int32(blk[2+i]>>4) - 8
					}
				}
				var s int32
				for i := range 32 {
					s += wq[i] * int32(qx[32*b+i])
				}
				sum += float32(s) * (dw * dx[b])
			}
			y[t*w.Rows+r] = sum
		}
	}
}

// TestStories260KQuantExactActivations replaces the Q8_0/Q4_0 matmuls by
// the scalar reference of llama.cpp's scheme (ggmlQ8MatMul): everything
// else in the forward pass is then llama.cpp-exact, so the quantized models
// must give llama.cpp's greedy tokens for all 64 steps and first-step
// logits within 1e-4 relative L2. (It also shows what kernels.MatMul would
// have to do to match llama.cpp exactly.)
func TestStories260KQuantExactActivations(t *testing.T) {
	matMulHook = func(y []float32, w quant.Weight, x []float32, n int) (bool, error) {
		if w.Type != gguf.TypeQ8_0 && w.Type != gguf.TypeQ4_0 {
			return false, nil
		}
		ggmlQ8MatMul(y, w, x, n)
		return true, nil
	}
	defer func() { matMulHook = nil }()
	cases := []struct{ model, golden, kv string }{
		{"models/stories260K-Q8_0.gguf", "golden/stories260K-Q8_0.greedy64.kvf32.json", "f32"},
		{"models/stories260K-Q8_0.gguf", "golden/stories260K-Q8_0.greedy64.kvf16.json", "f16"},
		{"models/stories260K-Q4_0.gguf", "golden/stories260K-Q4_0.greedy64.kvf16.json", "f16"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/kv%s", c.model, c.kv), func(t *testing.T) {
			checkGoldenExact(t, c.model, c.golden, c.kv, 1e-4)
		})
	}
}
