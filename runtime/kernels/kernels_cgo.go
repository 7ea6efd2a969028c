//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3 -std=gnu11
#include "kernels.h"
#include "scratch.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/weft-inference/weft/runtime/quant"
)

const cgoKernels = true

// x86Kernels reports whether the C code was built with its x86 SIMD
// kernels: on amd64 unless -DWEFT_PORTABLE_ONLY (a test setting) left
// only the portable C ones.
func x86Kernels() bool { return C.weft_x86_kernels() != 0 }

func init() { setIQ4VBMI(cpu.X86.HasAVX512VBMI) }

// setIQ4VBMI says whether the IQ4_NL / MXFP4 VNNI row kernel loads its
// weights by AVX-512 VBMI byte permutes (on only where the CPU has them;
// tests turn it off to compare the two loads bit for bit). It returns the
// previous setting.
func setIQ4VBMI(on bool) bool {
	old := iq4VBMI
	iq4VBMI = on && cpu.X86.HasAVX512VBMI
	v := 0
	if iq4VBMI {
		v = 1
	}
	C.weft_iq4_set_vbmi(C.int(v))
	return old
}

var iq4VBMI bool

// setF16TokVec has the AVX-512 build take F16 products with the tokens
// along the vector for every token count on rows of whole vectors (1),
// never (0), or follow the CPU's rule (-1): weft_f16_tokvec. For tests.
func setF16TokVec(mode int) { C.weft_set_f16_tokvec(C.int(mode)) }

// matmulRowsC runs the C kernel; prep is x prepared by prepActivations
// for this product's prepKind, or nil. A C status other than WEFT_OK comes
// back as an error (kernelError).
func matmulRowsC(isa isaKind, w quant.Weight, rb, r0, r1 int, x []float32, prep []byte, n int, y []float32) error {
	var pp unsafe.Pointer
	if len(prep) > 0 {
		pp = unsafe.Pointer(&prep[0])
	}
	rc := C.weft_matmul(cISA(isa), C.int(w.Type), (*C.uint8_t)(unsafe.Pointer(&w.Data[0])), C.long(rb),
		C.int(w.Cols), C.int(r0), C.int(r1), (*C.float)(&x[0]), pp, C.int(n), (*C.float)(&y[0]), C.long(w.Rows))
	if rc != C.WEFT_OK {
		return kernelError(int(rc), isa, w, n)
	}
	return nil
}

// cISA is the selector the C products take for isa: WEFT_INVARIANT is
// added while SetBatchInvariant holds.
func cISA(isa isaKind) C.int {
	v := C.int(isa - isaC)
	if batchInvariant.Load() {
		v |= C.WEFT_INVARIANT
	}
	return v
}

// kernelError turns a weft_matmul status into the error MatMul returns.
func kernelError(rc int, isa isaKind, w quant.Weight, n int) error {
	what := fmt.Sprintf("%v kernel for %v, %d x %d, %d tokens", isa, w.Type, w.Rows, w.Cols, n)
	switch rc {
	case C.WEFT_ENOMEM:
		return fmt.Errorf("%w: %s", ErrKernelMemory, what)
	case C.WEFT_EUNSUPPORTED:
		return fmt.Errorf("%w: no %s", quant.ErrType, what)
	}
	return fmt.Errorf("%w: %s: status %d", ErrKernel, what, rc)
}

// Kernel failures injectKernelFailure can ask for.
const (
	statusOK          = int(C.WEFT_OK)
	statusNoMemory    = int(C.WEFT_ENOMEM)
	statusUnsupported = int(C.WEFT_EUNSUPPORTED)
)

// injectKernelFailure makes every C matrix product return status from now
// on (statusOK ends it), so that tests reach the error paths of MatMul and
// its callers.
func injectKernelFailure(status int) {
	C.weft_inject_failure(C.int(status))
}

// prepKind says how the kernel for this product prepares its activations
// (0: it uses x as is), so that a parallel job prepares them once for all
// its row chunks; prepBytes is the buffer that needs.
func prepKind(isa isaKind, w quant.Weight, n int) (kind, bytes int) {
	if isa < isaC {
		return 0, 0
	}
	var b C.long
	k := C.weft_prep_kind(cISA(isa), C.int(w.Type), C.int(w.Cols), C.int(n), &b)
	return int(k), int(b)
}

// prepActivations writes kind's preparation of n tokens of x (cols each)
// into out (prepKind's bytes).
func prepActivations(kind int, x []float32, n, cols int, out []byte) {
	C.weft_prep(C.int(kind), (*C.float)(&x[0]), C.int(n), C.int(cols), unsafe.Pointer(&out[0]))
}

// usesQuantizedActivations reports whether MatMul rounds x to 8 bits for
// this product (the integer kernels).
func usesQuantizedActivations(isa isaKind, w quant.Weight, n int) bool {
	return isa >= isaC && C.weft_uses_vnni(cISA(isa), C.int(w.Type), C.int(w.Cols), C.int(n)) != 0
}

// activationBlock is the number of columns that share one 8-bit
// activation scale where usesQuantizedActivations holds.
func activationBlock(isa isaKind, w quant.Weight, n int) int {
	if isa < isaC {
		return 32
	}
	return int(C.weft_act_block(cISA(isa), C.int(w.Type), C.int(w.Cols), C.int(n)))
}

func dotC(isa isaKind, a, b []float32) float32 {
	return float32(C.weft_dot(C.int(isa-isaC), (*C.float)(&a[0]), (*C.float)(&b[0]), C.long(len(a))))
}

func f16ToF32sFast(dst []float32, src []uint16) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_f16_to_f32s(C.int(activeISA-isaC), (*C.float)(&dst[0]), (*C.uint16_t)(&src[0]), C.long(len(dst)))
	return true
}

func f32ToF16sFast(dst []uint16, src []float32) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_f32_to_f16s(C.int(activeISA-isaC), (*C.uint16_t)(&dst[0]), (*C.float)(&src[0]), C.long(len(dst)))
	return true
}

func expsFast(dst, src []float32) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_exps(C.int(activeISA-isaC), (*C.float)(&dst[0]), (*C.float)(&src[0]), C.long(len(src)))
	return true
}

func siluMulFast(gate, up []float32) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_silu_mul(C.int(activeISA-isaC), (*C.float)(&gate[0]), (*C.float)(&up[0]), C.long(len(gate)))
	return true
}

func addFast(dst, x []float32) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_add(C.int(activeISA-isaC), (*C.float)(&dst[0]), (*C.float)(&x[0]), C.long(len(dst)))
	return true
}

func swigluOAIFast(gate, up []float32, alpha, limit float32) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_swiglu_oai(C.int(activeISA-isaC), (*C.float)(&gate[0]), (*C.float)(&up[0]), C.long(len(gate)), C.float(alpha), C.float(limit))
	return true
}

func mulVecTFast(y, a, x []float32, rows, cols int) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_mulvect(C.int(activeISA-isaC), (*C.float)(&y[0]), (*C.float)(&a[0]), (*C.float)(&x[0]), C.long(rows), C.long(cols))
	return true
}

func roundF16sFast(dst, src []float32) bool {
	if activeISA == isaGo {
		return false
	}
	C.weft_round_f16s(C.int(activeISA-isaC), (*C.float)(&dst[0]), (*C.float)(&src[0]), C.long(len(dst)))
	return true
}

// peakOps runs the peak loop of kind (0 float FMA, 1 VNNI int8) on this
// thread and returns the operations it did (0: no such instructions).
func peakOps(kind int, iters int) float64 {
	if activeISA < isaC {
		return 0
	}
	var sink C.double
	return float64(C.weft_peak(C.int(activeISA-isaC), C.int(kind), C.long(iters), &sink))
}

// streamSum returns the sum of p (in any order), reading it once at the
// widest loads this CPU has.
func streamSum(p []float32) float32 {
	return float32(C.weft_stream_sum(C.int(max(activeISA-isaC, 0)), (*C.float)(&p[0]), C.long(len(p))))
}

// Scratch reports the C kernels' scratch arena: the bytes it holds, and in
// how many buffer sets (one per product running at once, at most the most
// that ever ran together; each set is sized by the largest products it
// served).
func Scratch() (bytes int64, sets int) {
	return int64(C.weft_scratch_bytes()), int(C.weft_scratch_sets())
}

// scratchHold takes a scratch set for the calling OS thread as a product
// does, with a buffer of 1,024 floats in slot 0, and returns the set's pool
// index (-1: a set of its own, the pool being all taken); scratchRelease
// returns it. The caller must stay on its thread between the two
// (runtime.LockOSThread). They let the arena's tests take sets on chosen
// threads in a chosen order.
func scratchHold() int {
	C.weft_scratch_begin()
	C.weft_scratch(0, 1024)
	return int(C.weft_scratch_index())
}

func scratchRelease() { C.weft_scratch_end() }
