//go:build cgo

package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

// TestF16TokVec holds the AVX-512 build's F16 products with the tokens
// along the vector (weft_f16_tokvec, forced on for every token count) to
// the float64 reference: row counts that leave tails of the 24- and
// 14-row blocks, one panel of tokens or several (odd panel counts leave one
// alone), and rows of one vector up to the 1B preset's FFN width. Rows that
// are not whole vectors keep the other kernels; one such shape checks that.
func TestF16TokVec(t *testing.T) {
	if bestISA() < isaAVX512 {
		t.Skipf("kernel set %v: no AVX-512 build here", bestISA())
	}
	defer setF16TokVec(-1)
	setF16TokVec(1)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, sh := range [][2]int{{1, 16}, {5, 64}, {29, 768}, {61, 2048}, {100, 8192}, {37, 328}, {13, 20}} {
		rows, cols := sh[0], sh[1]
		w := randomWeight(rng, gguf.TypeF16, rows, cols)
		for _, n := range []int{1, 2, 3, 7, 16, 17, 23, 32, 33, 48, 50, 64} {
			if raceEnabled && rows*cols*n > 2_000_000 {
				continue
			}
			checkAllISAs(t, w, randomVec(rng, n*cols), n)
		}
	}
}
