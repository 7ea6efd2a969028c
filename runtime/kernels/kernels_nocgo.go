//go:build !cgo

package kernels

import "github.com/weft-inference/weft/runtime/quant"

const cgoKernels = false

func x86Kernels() bool { return false }

func matmulRowsC(isa isaKind, w quant.Weight, rb, r0, r1 int, x []float32, prep []byte, n int, y []float32) error {
	matmulRowsGo(w, rb, r0, r1, x, n, y)
	return nil
}

func usesQuantizedActivations(isa isaKind, w quant.Weight, n int) bool { return false }

func dotC(isa isaKind, a, b []float32) float32 { return dotGo(a, b) }

func f16ToF32sFast(dst []float32, src []uint16) bool              { return false }
func f32ToF16sFast(dst []uint16, src []float32) bool              { return false }
func expsFast(dst, src []float32) bool                            { return false }
func siluMulFast(gate, up []float32) bool                         { return false }
func mulVecTFast(y, a, x []float32, rows, cols int) bool          { return false }
func swigluOAIFast(gate, up []float32, alpha, limit float32) bool { return false }
func addFast(dst, x []float32) bool                               { return false }
func roundF16sFast(dst, src []float32) bool                       { return false }

func prepKind(isaKind, quant.Weight, int) (kind, bytes int) { return 0, 0 }

func prepActivations(int, []float32, int, int, []byte) {}

func peakOps(kind int, iters int) float64 { return 0 }

func streamSum(p []float32) float32 {
	var s float32
	for _, v := range p {
		s += v
	}
	return s
}

func activationBlock(isaKind, quant.Weight, int) int { return 32 }

// Scratch reports the C kernels' scratch arena; without cgo there is none.
func Scratch() (bytes int64, sets int) { return 0, 0 }
