package sample

import (
	"math"
	"testing"
)

func TestExpNeg(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := -87.0 * float64(i) / 2_000_000
		got := float64(expNeg(x))
		want := float64(float32(math.Exp(x)))
		if want == 0 {
			continue
		}
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Errorf("expNeg worst relative error %g, want < 3e-7", worst)
	}
	for _, x := range []float64{math.Inf(-1), math.NaN(), -88, -1000} {
		if got := expNeg(x); got != 0 {
			t.Errorf("expNeg(%v) = %v, want 0", x, got)
		}
	}
	if got := expNeg(0); got != 1 {
		t.Errorf("expNeg(0) = %v, want exactly 1", got)
	}
}

var expSink float32

func BenchmarkExp(b *testing.B) {
	xs := make([]float64, 32000)
	for i := range xs {
		xs[i] = -20 * float64(i) / float64(len(xs))
	}
	b.Run("expNeg", func(b *testing.B) {
		for b.Loop() {
			for _, x := range xs {
				expSink += expNeg(x)
			}
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for b.Loop() {
			for _, x := range xs {
				expSink += float32(math.Exp(x))
			}
		}
	})
}
