package cuda

import (
	"errors"
	"fmt"
)

// Errors Open returns (wrapped, with the detail) when the GPU path is not
// available; cmd/weft falls back to the CPU backend on any of them.
var (
	// ErrNoDriver: libcuda.so.1 could not be loaded (no NVIDIA driver, or a
	// binary built without cgo).
	ErrNoDriver = errors.New("cuda: NVIDIA driver library libcuda.so.1 not found")
	// ErrNoDevice: the driver loaded but cuInit failed or reported no device.
	ErrNoDevice = errors.New("cuda: no usable CUDA device")
	// ErrNoCUBLAS: no libcublas.so.13/.12/.11 could be loaded.
	ErrNoCUBLAS = errors.New("cuda: cuBLAS library (libcublas.so.13, .12 or .11) not found")
	// ErrClosed: the device or backend was closed.
	ErrClosed = errors.New("cuda: closed")
	// ErrUnhealthy: an earlier sticky CUDA error poisoned the context; the
	// process must restart to use the GPU again.
	ErrUnhealthy = errors.New("cuda: device unhealthy after a sticky error")
)

// Error is a failed CUDA driver call.
type Error struct {
	Op   string // the driver function, "cuMemAlloc"
	Code int    // CUresult
	Name string // "CUDA_ERROR_OUT_OF_MEMORY", when the driver names it
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUDA error"
	}
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Op, name, e.Code)
}

// Sticky reports whether the error leaves the context unusable: after one of
// these every later call fails too, so the backend marks itself unhealthy.
func (e *Error) Sticky() bool { return stickyCode(e.Code) }

func stickyCode(code int) bool {
	switch code {
	case 3, // CUDA_ERROR_NOT_INITIALIZED
		4,   // CUDA_ERROR_DEINITIALIZED
		700, // CUDA_ERROR_ILLEGAL_ADDRESS
		702, // CUDA_ERROR_LAUNCH_TIMEOUT
		709, // CUDA_ERROR_CONTEXT_IS_DESTROYED
		710, // CUDA_ERROR_ASSERT
		714, // CUDA_ERROR_HARDWARE_STACK_ERROR
		715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
		716, // CUDA_ERROR_MISALIGNED_ADDRESS
		717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
		718, // CUDA_ERROR_INVALID_PC
		719, // CUDA_ERROR_LAUNCH_FAILED
		999: // CUDA_ERROR_UNKNOWN
		return true
	}
	return false
}

// BLASError is a failed cuBLAS call.
type BLASError struct {
	Op     string
	Status int
}

var blasNames = map[int]string{
	1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
	8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func (e *BLASError) Error() string {
	name, ok := blasNames[e.Status]
	if !ok {
		name = "cuBLAS error"
	}
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Op, name, e.Status)
}

// Sticky reports whether the cuBLAS failure means the GPU is in trouble
// (a kernel failed to run) rather than a bad argument.
func (e *BLASError) Sticky() bool { return e.Status == 13 || e.Status == 14 }
