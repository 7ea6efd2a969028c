package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weft-inference/weft/runtime/quant"
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
		if err := quant.Dequantize(typ, w.Data, all); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, cols)
		w.Row(3, row)
		if d := cmp.Diff(all[3*cols:4*cols], row); d != "" {
			t.Errorf("%v Row(3) (-want +got):\n%s", typ, d)
		}
	}
}

// TestExpsAndSiLUMulMatchReference runs the vector exponential, SiLU and
// gpt-oss's clamped SwiGLU of every kernel set against the float64-based
// Go reference.
func TestExpsAndSiLUMulMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var x []float32
	for v := float32(-90); v <= 90; v += 0.37 {
		x = append(x, v)
	}
	for range 1000 {
		x = append(x, float32(rng.NormFloat64()*8))
	}
	x = append(x, 0, -0.0, 1e-30, -1e-30, 87, -87, 88)
	for _, isa := range availableISAs() {
		t.Run(isa.String(), func(t *testing.T) {
			defer setISA(setISA(isa))
			for _, n := range []int{1, 5, 16, 33, len(x)} {
				got, want := make([]float32, n), make([]float32, n)
				Exps(got, x[:n])
				expsGo(want, x[:n])
				for i, w := range want {
					v := x[i]
					switch {
					case v < -87: // clamped: a tiny positive number
						if got[i] < 0 || got[i] > 2e-38 {
							t.Errorf("exp(%g) = %g, want ~0", v, got[i])
						}
					case v > 88:
						if got[i] < 1.6e38 {
							t.Errorf("exp(%g) = %g, want >= 1.6e38", v, got[i])
						}
					case math.Abs(float64(got[i]-w)) > 4e-7*float64(w):
						t.Errorf("exp(%g) = %g, want %g", v, got[i], w)
					}
				}
				g, up := append([]float32(nil), x[:n]...), randomVec(rng, n)
				gw := append([]float32(nil), g...)
				SiLUMul(g, up)
				siluMulGo(gw, up)
				for i := range g {
					if d := math.Abs(float64(g[i] - gw[i])); d > 1e-6*math.Abs(float64(gw[i]))+1e-30 {
						t.Errorf("silu(%g)*%g = %g, want %g", x[i], up[i], g[i], gw[i])
					}
				}
				// gpt-oss's clamped SwiGLU (alpha 1.702, limit 7): the clamps
				// on both sides and the exponential far into both tails
				for _, scale := range []float32{1, 0.05} {
					g, u := make([]float32, n), make([]float32, n)
					for i := range g {
						g[i], u[i] = x[i]*scale, x[(i+7)%n]*scale
					}
					gw := append([]float32(nil), g...)
					SwiGLUOAI(g, u, 1.702, 7)
					swigluOAIGo(gw, u, 1.702, 7)
					for i := range g {
						if d := math.Abs(float64(g[i] - gw[i])); !(d <= 1e-6*math.Abs(float64(gw[i]))+1e-30) {
							t.Errorf("swiglu_oai(%g, %g) = %g, want %g", x[i]*scale, u[i], g[i], gw[i])
						}
					}
				}
			}
			nan := []float32{float32(math.NaN())}
			Exps(nan, nan)
			if !math.IsNaN(float64(nan[0])) {
				t.Errorf("exp(NaN) = %g", nan[0])
			}
		})
	}
}

func TestMulVecTMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, isa := range availableISAs() {
		t.Run(isa.String(), func(t *testing.T) {
			defer setISA(setISA(isa))
			for _, sh := range [][2]int{{1, 1}, {3, 7}, {17, 64}, {130, 64}, {5, 100}, {0, 3}} {
				rows, cols := sh[0], sh[1]
				a, x := randomVec(rng, rows*cols), randomVec(rng, rows)
				got, want := randomVec(rng, cols), make([]float32, cols)
				MulVecT(got, a, x, rows, cols)
				for c := range want {
					var s, bound float64
					for r := range rows {
						s += float64(x[r]) * float64(a[r*cols+c])
						bound += math.Abs(float64(x[r]) * float64(a[r*cols+c]))
					}
					if d := math.Abs(float64(got[c]) - s); d > 1e-6*bound+1e-7 {
						t.Errorf("%dx%d: y[%d] = %g, want %g", rows, cols, c, got[c], s)
					}
				}
			}
		})
	}
}

func TestUseISA(t *testing.T) {
	avail := AvailableISAs()
	if len(avail) == 0 || avail[0] != "go" || avail[len(avail)-1] != ISA() {
		t.Fatalf("AvailableISAs() = %v with %q in use", avail, ISA())
	}
	prev, err := UseISA("go")
	if err != nil || ISA() != "go" {
		t.Fatalf("UseISA(go) = %q, %v; in use %q", prev, err, ISA())
	}
	if _, err := UseISA("sse9"); err == nil || ISA() != "go" {
		t.Fatalf("UseISA(sse9) = %v, in use %q", err, ISA())
	}
	if back, err := UseISA(prev); err != nil || back != "go" || ISA() != prev {
		t.Fatalf("UseISA(%q) = %q, %v", prev, back, err)
	}
}

// TestAddMatchesLoop: Add gives every kernel set the bits of the plain
// loop, below and above the length from which the C kernels take it, with
// and without a tail past the last vector.
func TestAddMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, isa := range availableISAs() {
		defer setISA(setISA(isa))
		for _, n := range []int{1, addMinC - 1, addMinC, addMinC + 3, 1000, 4099} {
			dst, x := randomVec(rng, n), randomVec(rng, n)
			want := append([]float32(nil), dst...)
			for i := range want {
				want[i] += x[i]
			}
			Add(dst, x)
			if i := firstBitDiff(dst, want); i >= 0 {
				t.Fatalf("%v, %d values: dst[%d] = %v, want %v", isa, n, i, dst[i], want[i])
			}
		}
	}
}
