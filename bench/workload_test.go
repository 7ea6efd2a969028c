package bench

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testWorkload(seed uint64, out LengthDist) *Workload {
	return &Workload{
		Seed:      seed,
		PromptLen: Uniform{Lo: 4, Hi: 40},
		OutputLen: out,
		Vocab:     []int32{300, 301, 302, 303, 304, 305, 306, 307},
		BOS:       1,
	}
}

func TestWorkloadDeterministic(t *testing.T) {
	w1 := testWorkload(42, LogNormal{Median: 20, Sigma: 1, Lo: 1, Hi: 200})
	w2 := testWorkload(42, LogNormal{Median: 20, Sigma: 1, Lo: 1, Hi: 200})
	if err := w1.validate(); err != nil {
		t.Fatal(err)
	}
	// Same seed: same requests, whatever order they are asked for in.
	var fwd, rev []Spec
	for i := range 50 {
		fwd = append(fwd, w1.Request(i))
	}
	for i := 49; i >= 0; i-- {
		rev = append(rev, w2.Request(i))
	}
	slices.Reverse(rev)
	if diff := cmp.Diff(fwd, rev); diff != "" {
		t.Errorf("same seed, different requests (-fwd +rev):\n%s", diff)
	}
	// Another seed: different requests.
	w3 := testWorkload(43, LogNormal{Median: 20, Sigma: 1, Lo: 1, Hi: 200})
	same := 0
	for i := range 50 {
		if cmp.Equal(fwd[i], w3.Request(i)) {
			same++
		}
	}
	if same > 5 {
		t.Errorf("seeds 42 and 43 gave %d of 50 identical requests", same)
	}
	for _, s := range fwd {
		if s.Prompt[0] != 1 {
			t.Errorf("request %d: prompt starts %d, want BOS 1", s.Index, s.Prompt[0])
		}
		if len(s.Prompt) < 4 || len(s.Prompt) > 40 {
			t.Errorf("request %d: prompt length %d outside [4, 40]", s.Index, len(s.Prompt))
		}
		for _, id := range s.Prompt[1:] {
			if id < 300 || id > 307 {
				t.Errorf("request %d: token %d not from the vocabulary", s.Index, id)
			}
		}
		if s.OutputLen < 1 || s.OutputLen > 200 {
			t.Errorf("request %d: output length %d outside [1, 200]", s.Index, s.OutputLen)
		}
	}
}

func TestWorkloadOutputLensCycle(t *testing.T) {
	c, err := ParseCycle("6,50,300")
	if err != nil {
		t.Fatal(err)
	}
	w := testWorkload(1, c)
	var got []int
	for i := range 7 {
		got = append(got, w.Request(i).OutputLen)
	}
	if diff := cmp.Diff([]int{6, 50, 300, 6, 50, 300, 6}, got); diff != "" {
		t.Errorf("output lengths (-want +got):\n%s", diff)
	}
	if w.Request(-1).OutputLen != 300 || w.Request(-3).OutputLen != 6 {
		t.Errorf("warm-up indexes do not cycle: %d %d", w.Request(-1).OutputLen, w.Request(-3).OutputLen)
	}
}

func TestWorkloadFitsContext(t *testing.T) {
	w := testWorkload(7, Fixed{N: 30})
	w.PromptLen = Fixed{N: 100}
	w.MaxTotal = 64
	if err := w.validate(); err != nil {
		t.Fatal(err)
	}
	if s := w.Request(0); len(s.Prompt)+s.OutputLen > 64 || len(s.Prompt) != 34 {
		t.Errorf("prompt %d + output %d, want 34 + 30", len(s.Prompt), s.OutputLen)
	}
	w.OutputLen = Fixed{N: 64}
	if err := w.validate(); err == nil {
		t.Error("validate accepted an output length that fills the whole context")
	}
}

func TestParseLengthDist(t *testing.T) {
	tests := []struct {
		in   string
		want LengthDist
	}{
		{"128", Fixed{N: 128}},
		{"32-256", Uniform{Lo: 32, Hi: 256}},
		{"lognormal:48,0.8", LogNormal{Median: 48, Sigma: 0.8, Lo: 1, Hi: 384}},
		{"lognormal:48,0.8,4,256", LogNormal{Median: 48, Sigma: 0.8, Lo: 4, Hi: 256}},
		{"cycle:6,50,300", Cycle{Lens: []int{6, 50, 300}}},
	}
	for _, tt := range tests {
		got, err := ParseLengthDist(tt.in)
		if err != nil {
			t.Errorf("ParseLengthDist(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseLengthDist(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []string{"", "0", "-3", "10-5", "x", "lognormal:1", "lognormal:0,1", "lognormal:10,1,5,2", "cycle:6,,3", "cycle:0"} {
		if _, err := ParseLengthDist(bad); err == nil {
			t.Errorf("ParseLengthDist(%q) accepted", bad)
		}
	}
}

func TestLengthDistRanges(t *testing.T) {
	w := testWorkload(3, Uniform{Lo: 5, Hi: 9})
	seen := map[int]bool{}
	for i := range 500 {
		n := w.Request(i).OutputLen
		if n < 5 || n > 9 {
			t.Fatalf("uniform 5-9 drew %d", n)
		}
		seen[n] = true
	}
	if len(seen) != 5 {
		t.Errorf("uniform 5-9 drew only %v in 500 requests", seen)
	}
	// Lognormal: the median of the draws sits near the median asked for.
	w.OutputLen = LogNormal{Median: 50, Sigma: 0.9, Lo: 1, Hi: 10000}
	var xs []float64
	for i := range 4000 {
		xs = append(xs, float64(w.Request(i).OutputLen))
	}
	if med := Percentile(xs, 50); med < 45 || med > 55 {
		t.Errorf("lognormal median 50 drew median %v", med)
	}
}

func TestArrivals(t *testing.T) {
	for _, tt := range []struct {
		burstiness float64
		wantCV     float64 // coefficient of variation of a gamma gap: 1/sqrt(shape)
	}{{1, 1}, {0.25, 2}, {4, 0.5}} {
		a, err := NewArrivals(10, tt.burstiness, 99)
		if err != nil {
			t.Fatal(err)
		}
		const n = 20000
		var sum, sq float64
		for range n {
			g := a.Next().Seconds()
			if g < 0 {
				t.Fatalf("negative gap %v", g)
			}
			sum += g
			sq += g * g
		}
		mean := sum / n
		cv := math.Sqrt(sq/n-mean*mean) / mean
		if math.Abs(mean-0.1) > 0.005 {
			t.Errorf("burstiness %v: mean gap %.4fs, want 0.1s", tt.burstiness, mean)
		}
		if math.Abs(cv-tt.wantCV) > 0.08*tt.wantCV {
			t.Errorf("burstiness %v: gap CV %.3f, want %.3f", tt.burstiness, cv, tt.wantCV)
		}
	}
	a1, _ := NewArrivals(5, 1, 7)
	a2, _ := NewArrivals(5, 1, 7)
	for range 100 {
		if a1.Next() != a2.Next() {
			t.Fatal("same seed gave different arrivals")
		}
	}
	for _, bad := range [][2]float64{{0, 1}, {-1, 1}, {1, 0}, {math.Inf(1), 1}, {math.NaN(), 1}} {
		if _, err := NewArrivals(bad[0], bad[1], 1); err == nil {
			t.Errorf("NewArrivals(%v, %v) accepted", bad[0], bad[1])
		}
	}
}
