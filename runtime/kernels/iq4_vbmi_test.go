//go:build cgo

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestIQ4RowKernelSameBits: the IQ4_NL / MXFP4 / Q4_0 VNNI row kernel
// gives the same bits (a) whether a row is summed in a tile of 4 or 2
// rows beside others or alone, and (b) whether its groups are loaded by
// AVX-512 VBMI byte permutes or by lane loads, for row counts that leave
// tails, widths with and without columns past the last 256, and the token
// counts of the row kernel.
func TestIQ4RowKernelSameBits(t *testing.T) {
	if bestISA() < isaVNNI {
		t.Skipf("kernel set %v: no AVX-512 VNNI row kernel here", bestISA())
	}
	old := setISA(isaVNNI)
	defer setISA(old)
	defer setIQ4VBMI(iq4VBMI)
	ways := []bool{false}
	if cpu.X86.HasAVX512VBMI {
		ways = append(ways, true)
	} else {
		t.Logf("this CPU has no AVX-512 VBMI: only the lane loads are compared (tiles against single rows)")
	}
	for _, typ := range []gguf.Type{gguf.TypeIQ4_NL, gguf.TypeMXFP4, gguf.TypeQ4_0} {
		for _, sh := range [][2]int{{1, 256}, {6, 320}, {37, 1024}, {130, 768}, {9, 2880}} {
			rows, cols := sh[0], sh[1]
			rng := rand.New(rand.NewPCG(uint64(typ), uint64(rows*cols)))
			w := randomWeight(rng, typ, rows, cols)
			if typ == gguf.TypeMXFP4 { // scales from the subnormals up
				for b := 0; b < len(w.Data); b += 17 {
					w.Data[b] = []byte{0, 1, 2, 3, 60, 100, 127, 140}[rng.IntN(8)]
				}
			}
			rb := w.RowBytes()
			for _, n := range []int{1, 2, 3, 4, 5, 7} { // below the lane GEMM (8 tokens; MXFP4 16)
				x := randomVec(rng, n*cols)
				var first []float32
				for _, vbmi := range ways {
					setIQ4VBMI(vbmi)
					name := fmt.Sprintf("%v/%dx%d/n=%d/vbmi=%v", typ, rows, cols, n, vbmi)
					got := matMulOn(t, name, isaVNNI, w, x, n)
					for r := range rows { // each row alone: a tile of one
						one := quant.Weight{Type: typ, Rows: 1, Cols: cols, Data: w.Data[r*rb : (r+1)*rb]}
						alone := matMulOn(t, name, isaVNNI, one, x, n)
						for tok := range n {
							if a, b := math.Float32bits(alone[tok]), math.Float32bits(got[tok*rows+r]); a != b {
								t.Fatalf("%s: row %d token %d = %v alone, %v in the product", name, r, tok, alone[tok], got[tok*rows+r])
							}
						}
					}
					if first == nil {
						first = got
						continue
					}
					for i := range got[:n*rows] {
						if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
							t.Fatalf("%s: y[%d] = %v, %v with lane loads", name, i, got[i], first[i])
						}
					}
				}
			}
		}
	}
}
