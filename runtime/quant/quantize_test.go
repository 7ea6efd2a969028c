package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 8, 512
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	src[5] = 0 // some exact zeros and a constant block
	for i := 64; i < 96; i++ {
		src[i] = 0.25
	}
	tests := []struct {
		typ gguf.Type
		tol float64 // max abs error relative to the data's max magnitude
	}{
		{gguf.TypeF32, 0},
		{gguf.TypeF16, 1e-3},
		{gguf.TypeQ8_0, 0.01},
		{gguf.TypeQ4_0, 0.1},
		{gguf.TypeQ4_K, 0.1},
		{gguf.TypeQ6_K, 0.03},
	}
	var amax float64
	for _, v := range src {
		amax = max(amax, math.Abs(float64(v)))
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			data, err := Quantize(tc.typ, src, cols)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(src))
			if err := Dequantize(tc.typ, data, got); err != nil {
				t.Fatal(err)
			}
			var worst, sq float64
			for i := range src {
				d := math.Abs(float64(got[i] - src[i]))
				worst = max(worst, d)
				sq += d * d
			}
			if worst > tc.tol*amax {
				t.Errorf("max abs error %.3g > %.3g", worst, tc.tol*amax)
			}
			t.Logf("max abs error %.3g, rms %.3g", worst, math.Sqrt(sq/float64(len(src))))
		})
	}
}
