package cpu

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
)

// TestPerTokensCovers checks that perTokens hands out every token exactly
// once, in non-empty ranges, and splits large steps when the pool has
// more than one thread.
func TestPerTokensCovers(t *testing.T) {
	for _, total := range []int{1, 2, 7, 64, 1000} {
		for _, width := range []int{1, 256, 4096, 1 << 20} {
			var mu sync.Mutex
			seen := make([]int, total)
			calls := 0
			perTokens(total, width, func(t0, t1 int) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if t0 >= t1 {
					t.Errorf("total %d width %d: empty range [%d, %d)", total, width, t0, t1)
				}
				for i := t0; i < t1; i++ {
					seen[i]++
				}
			})
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("total %d width %d: token %d handed out %d times", total, width, i, n)
				}
			}
			if big := total >= 2 && total*width >= 2*perTokensMin; big && kernels.Workers() >= 2 && calls < 2 {
				t.Errorf("total %d width %d: %d call(s), want the step split over the pool", total, width, calls)
			}
		}
	}
}

// TestPerTokensSplitMatchesSerial runs a 200-token prompt chunk through
// the synth-256 model with the per-token work split over the pool and
// with it on the caller alone: the logits must be bit for bit the same
// (each token's norms, RoPE, SiLU and adds do not depend on the split).
func TestPerTokensSplitMatchesSerial(t *testing.T) {
	m := loadModel(t, "synth/models/synth-256-F32.gguf")
	const n, bs = 200, 16
	run := func(minFloats int) []float32 {
		old := perTokensMin
		perTokensMin = minFloats
		defer func() { perTokensMin = old }()
		b, err := New(m, Config{BlockSize: bs, NumBlocks: n/bs + 1})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		st := batch.SeqStep{Tokens: make([]int32, n)}
		for i := range st.Tokens {
			st.Tokens[i] = int32(1 + (i*37)%(m.HP.VocabSize-1))
		}
		for i := range n/bs + 1 {
			st.Blocks = append(st.Blocks, int32(i))
		}
		lg := [][]float32{make([]float32, m.HP.VocabSize)}
		if err := b.Forward(context.Background(), []batch.SeqStep{st}, lg); err != nil {
			t.Fatal(err)
		}
		return lg[0]
	}
	serial := run(math.MaxInt / 2)
	split := run(1)
	if !slices.Equal(serial, split) {
		worst := 0.0
		for i := range serial {
			worst = max(worst, math.Abs(float64(serial[i]-split[i])))
		}
		t.Errorf("logits differ between the split and the serial per-token work (max |diff| %g)", worst)
	}
}
