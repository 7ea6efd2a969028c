package batch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gemmaWindows is Gemma 3's pattern: every sixth layer global, the others
// sliding.
func gemmaWindows(layers, window int) []int {
	w := make([]int, layers)
	for i := range w {
		if i%6 != 5 {
			w[i] = window
		}
	}
	return w
}

func TestNewKVLayout(t *testing.T) {
	alternate := make([]int, 6) // gpt-oss: even layers slide
	for i := range alternate {
		if i%2 == 0 {
			alternate[i] = 128
		}
	}
	for _, tc := range []struct {
		name    string
		windows []int
		sliding bool
		want    KVLayout
	}{
		{"no windows", []int{0, 0, 0}, true, KVLayout{Group: []int{0, 0, 0}, Slot: []int{0, 1, 2}, Size: 3}},
		{"sliding off", []int{8, 8, 0}, false, KVLayout{Group: []int{0, 0, 0}, Slot: []int{0, 1, 2}, Size: 3}},
		// 5 sliding, 1 global: groups of one layer.
		{"gemma3 6 layers", gemmaWindows(6, 8), true, KVLayout{Windows: []int{8, 8, 8, 8, 8, 0},
			Group: []int{0, 1, 2, 3, 4, 5}, Slot: []int{0, 0, 0, 0, 0, 0}, Size: 1}},
		{"alternating", alternate, true, KVLayout{Windows: []int{128, 0},
			Group: []int{0, 1, 0, 1, 0, 1}, Slot: []int{0, 0, 1, 1, 2, 2}, Size: 3}},
		{"two windows", []int{4, 4, 8, 8, 0, 0}, true, KVLayout{Windows: []int{4, 8, 0},
			Group: []int{0, 0, 1, 1, 2, 2}, Slot: []int{0, 1, 0, 1, 0, 1}, Size: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NewKVLayout(tc.windows, tc.sliding)); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
		})
	}
	// Gemma-3-1B: 22 sliding and 4 global layers, groups of 2.
	l := NewKVLayout(gemmaWindows(26, 512), true)
	global := 0
	for _, w := range l.Windows {
		if w == 0 {
			global++
		}
	}
	if l.Size != 2 || len(l.Windows) != 13 || global != 2 {
		t.Errorf("gemma3-1b: %s", l)
	}
	// Every (group, slot) holds exactly one layer, of the group's window.
	seen := map[[2]int]bool{}
	for li, g := range l.Group {
		k := [2]int{g, l.Slot[li]}
		if seen[k] || l.Slot[li] >= l.Size || l.Windows[g] != gemmaWindows(26, 512)[li] {
			t.Errorf("layer %d in group %d slot %d", li, g, l.Slot[li])
		}
		seen[k] = true
	}
}

func TestWindowArithmetic(t *testing.T) {
	for _, tc := range []struct{ window, bs, next, first int }{
		{0, 16, 1000, 0},
		{512, 16, 511, 0},
		{512, 16, 512, 0}, // a query at 512 sees 1..512
		{512, 16, 527, 1}, // sees 16..527
		{8, 4, 9, 0},      // sees 2..9
		{8, 4, 11, 1},     // sees 4..11
		{8, 4, 100, 23},   // sees 93..100
	} {
		if got := FirstRow(tc.window, tc.bs, tc.next); got != tc.first {
			t.Errorf("FirstRow(%d, %d, %d) = %d, want %d", tc.window, tc.bs, tc.next, got, tc.first)
		}
	}
	// WindowRows is the most rows [FirstRow(next), next/bs] spans.
	for _, w := range []int{1, 4, 5, 8, 9, 512} {
		for _, bs := range []int{1, 4, 16} {
			most := 0
			for next := range 4 * (w + bs) {
				most = max(most, next/bs-FirstRow(w, bs, next)+1)
			}
			if got := WindowRows(w, bs); got != most {
				t.Errorf("WindowRows(%d, %d) = %d, spanned at most %d", w, bs, got, most)
			}
		}
	}
	for _, tc := range []struct {
		windows []int
		bs, n   int
		want    int
	}{
		{nil, 16, 8192, 512},
		{[]int{512, 0}, 16, 8192, 33 + 512},
		{[]int{512, 0}, 16, 100, 7 + 7},
		{[]int{8, 8, 0}, 4, 40, 3 + 3 + 10},
	} {
		if got := SeqBlocks(tc.windows, tc.bs, tc.n); got != tc.want {
			t.Errorf("SeqBlocks(%v, %d, %d) = %d, want %d", tc.windows, tc.bs, tc.n, got, tc.want)
		}
	}
}
