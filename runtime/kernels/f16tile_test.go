//go:build cgo

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

// TestF16TileSameBits: the AVX-512 build's F16 products give the same bits
// whether the rows are converted into the float tile once (Intel's rule
// from 3 tokens, weft_f16_tile512) or in registers for every group of
// tokens, for row counts that leave tails and token counts from 3 to the
// GEMM's threshold; rows that are not whole vectors keep the in-register
// read.
func TestF16TileSameBits(t *testing.T) {
	if bestISA() < isaAVX512 {
		t.Skipf("kernel set %v: no AVX-512 build here", bestISA())
	}
	defer setF16Tile512(-1)
	for _, isa := range []isaKind{isaAVX512, bestISA()} {
		for _, sh := range [][2]int{{130, 768}, {67, 2048}, {37, 328}} {
			rows, cols := sh[0], sh[1]
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			w := randomWeight(rng, gguf.TypeF16, rows, cols)
			for _, n := range []int{3, 4, 5, 8, 13, 16, 23} {
				x := randomVec(rng, n*cols)
				name := fmt.Sprintf("%v/%dx%d/n=%d", isa, rows, cols, n)
				setF16Tile512(0)
				want := matMulOn(t, name, isa, w, x, n)
				setF16Tile512(1)
				got := matMulOn(t, name, isa, w, x, n)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: token %d row %d = %v from the float tile, %v converted in registers", name, i/rows, i%rows, got[i], want[i])
					}
				}
			}
		}
	}
}
