package batch

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPool(t *testing.T) {
	// Three tokens of width 2.
	rows := []float32{3, 0, 1, 2, 0, 4}
	for _, tc := range []struct {
		how  Pooling
		want []float32
	}{
		// mean (4/3, 2): norm sqrt(16/9+4) = sqrt(52)/3.
		{PoolMean, []float32{float32(4 / math.Sqrt(52)), float32(6 / math.Sqrt(52))}},
		{PoolLast, []float32{0, 1}},
		{PoolCLS, []float32{1, 0}},
	} {
		whole := NewPool(tc.how, 2)
		whole.Add(rows)
		if got := whole.Vector(); !cmp.Equal(got, tc.want, cmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 })) {
			t.Errorf("%v: Vector = %v, want %v", tc.how, got, tc.want)
		}
		// Fed in two steps: the same bits.
		split := NewPool(tc.how, 2)
		split.Add(rows[:2])
		split.Add(rows[2:])
		if diff := cmp.Diff(whole.Vector(), split.Vector()); diff != "" {
			t.Errorf("%v: split into steps (-whole +split):\n%s", tc.how, diff)
		}
		if split.Tokens() != 3 {
			t.Errorf("%v: Tokens = %d, want 3", tc.how, split.Tokens())
		}
		split.Reset()
		if split.Vector() != nil || split.Tokens() != 0 {
			t.Errorf("%v: after Reset: Vector %v, Tokens %d", tc.how, split.Vector(), split.Tokens())
		}
		split.Add(rows)
		if diff := cmp.Diff(whole.Vector(), split.Vector()); diff != "" {
			t.Errorf("%v: fed again after Reset (-whole +again):\n%s", tc.how, diff)
		}
	}
	zero := NewPool(PoolMean, 3)
	zero.Add(make([]float32, 3))
	if diff := cmp.Diff([]float32{0, 0, 0}, zero.Vector()); diff != "" {
		t.Errorf("zero vector (-want +got):\n%s", diff)
	}
}

func TestPoolingNames(t *testing.T) {
	for _, p := range []Pooling{PoolMean, PoolLast, PoolCLS} {
		got, err := ParsePooling(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePooling(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	if _, err := ParsePooling("max"); err == nil {
		t.Error("ParsePooling(max) succeeded")
	}
	for v, want := range map[int64]Pooling{1: PoolMean, 2: PoolCLS, 3: PoolLast} {
		if got, ok := PoolingOfType(v); !ok || got != want {
			t.Errorf("PoolingOfType(%d) = %v, %v; want %v", v, got, ok, want)
		}
	}
	for _, v := range []int64{0, 4, -1, 99} {
		if _, ok := PoolingOfType(v); ok {
			t.Errorf("PoolingOfType(%d) ok", v)
		}
	}
}
