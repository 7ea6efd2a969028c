package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 7, 64, 255, 256, 257, 1000, 4099} {
		a, b := randomVec(rng, n), randomVec(rng, n)
		var want, bound float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
			bound += math.Abs(float64(a[i]) * float64(b[i]))
		}
		for _, isa := range availableISAs() {
			old := setISA(isa)
			got := Dot(a, b)
			setISA(old)
			if d := math.Abs(float64(got) - want); d > 1e-6*bound+1e-7 {
				t.Errorf("%v n=%d: Dot = %g, want %g", isa, n, got, want)
			}
		}
	}
}

func TestVectorOps(t *testing.T) {
	approx := cmpopts.EquateApprox(1e-6, 1e-6)
	y := []float32{1, 2, 3, 4, 5}
	Axpy(2, []float32{1, 1, 1, 1, 1, 99}, y)
	if d := cmp.Diff([]float32{3, 4, 5, 6, 7}, y); d != "" {
		t.Errorf("Axpy (-want +got):\n%s", d)
	}
	Add(y, []float32{1, 2, 3, 4, 5})
	if d := cmp.Diff([]float32{4, 6, 8, 10, 12}, y); d != "" {
		t.Errorf("Add (-want +got):\n%s", d)
	}
	Scale(0.5, y)
	if d := cmp.Diff([]float32{2, 3, 4, 5, 6}, y); d != "" {
		t.Errorf("Scale (-want +got):\n%s", d)
	}

	x := []float32{1, -2, 3, -4}
	dst := make([]float32, 4)
	RMSNorm(dst, x, []float32{1, 2, 1, 0.5}, 1e-5)
	r := float32(1 / math.Sqrt((1+4+9+16)/4.0+1e-5))
	if d := cmp.Diff([]float32{r, -4 * r, 3 * r, -2 * r}, dst, approx); d != "" {
		t.Errorf("RMSNorm (-want +got):\n%s", d)
	}
	RMSNorm(x, x, []float32{1, 1, 1, 1}, 1e-5) // in place
	if d := cmp.Diff([]float32{r, -2 * r, 3 * r, -4 * r}, x, approx); d != "" {
		t.Errorf("RMSNorm in place (-want +got):\n%s", d)
	}

	g := []float32{0, 1, -1, 20}
	SiLUMul(g, []float32{5, 2, 2, 0.5})
	silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	want := []float32{0, float32(2 * silu(1)), float32(2 * silu(-1)), float32(0.5 * silu(20))}
	if d := cmp.Diff(want, g, approx); d != "" {
		t.Errorf("SiLUMul (-want +got):\n%s", d)
	}

	s := []float32{1, 2, 3, 1000}
	Softmax(s)
	if d := cmp.Diff([]float32{0, 0, 0, 1}, s, approx); d != "" {
		t.Errorf("Softmax (-want +got):\n%s", d)
	}
	s = []float32{0, float32(math.Log(3))}
	Softmax(s)
	if d := cmp.Diff([]float32{0.25, 0.75}, s, approx); d != "" {
		t.Errorf("Softmax (-want +got):\n%s", d)
	}
}

func TestRowMatchesDequantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, typ := range allTypes {
		cols := max(typ.BlockLen(), 64)
		w := randomWeight(rng, typ, 5, cols)
		all := make([]float32, 5*cols)
		if err := Dequantize(typ, w.Data, all); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, cols)
		w.Row(3, row)
		if d := cmp.Diff(all[3*cols:4*cols], row); d != "" {
			t.Errorf("%v Row(3) (-want +got):\n%s", typ, d)
		}
	}
}
