//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/weft-inference/weft/cuda/kernels"
)

// Driver attribute numbers (CUdevice_attribute).
const (
	attrCCMajor = 75
	attrCCMinor = 76
)

// cudaDataType values for cublasGemmEx.
const (
	dtF32  = 0
	dtF16  = 2
	dtBF16 = 14
)

// kernelNames are the fatbin's entry points (cuda/kernels).
var kernelNames = []string{"dequant_f16", "embed", "rmsnorm_f16", "add_bias", "rope", "kv_write", "swiglu", "add", "attention", "attention_reduce", "argmax_logprob", "gemv_f16"}

// Device is one opened GPU: the driver and cuBLAS tables, the primary
// context, one stream, the loaded kernels and a cuBLAS handle. Every CUDA
// call runs on the device's own goroutine, locked to one OS thread on which
// the context is current (see do).
type Device struct {
	cfg Config

	drv  *C.weft_drv
	blas *C.weft_blas

	dev      C.CUdevice
	ctx      C.CUcontext
	stream   C.CUstream
	module   C.CUmodule
	handle   C.cublasHandle_t
	fn       map[string]C.CUfunction
	ctxHeld  bool
	graphsOK bool   // the driver has the CUDA graph entry points
	blasWS   uint64 // cuBLAS's workspace (0: cuBLAS's own)
	name     string
	ccMajor  int
	ccMinor  int
	total    uint64
	driver   int
	cublas   int
	blasPath string

	work      chan func()   // closures to run on the device thread
	quit      chan struct{} // closed by stop: the thread exits
	done      chan struct{} // closed when the thread has exited
	closeOnce sync.Once

	mu        sync.Mutex
	unhealthy string
}

// Open loads the driver, initialises the device cfg.Device, loads cuBLAS and
// the embedded kernels. Errors wrap ErrNoDriver, ErrNoDevice or ErrNoCUBLAS
// when the GPU path is not available here.
func Open(cfg Config) (*Device, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, work: make(chan func()), quit: make(chan struct{}), done: make(chan struct{}), fn: map[string]C.CUfunction{}}
	go d.loop()
	if err := d.do(d.init); err != nil {
		d.do(d.teardown)
		d.stop()
		return nil, err
	}
	return d, nil
}

// loop runs the device's calls on one locked OS thread until stop.
func (d *Device) loop() {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	defer close(d.done)
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.quit:
			return
		}
	}
}

// do runs f on the device thread and waits for it; after stop it returns
// ErrClosed (work has no receiver then, so only done is ready).
func (d *Device) do(f func() error) error {
	errc := make(chan error, 1)
	select {
	case d.work <- func() { errc <- f() }:
	case <-d.done:
		return ErrClosed
	}
	return <-errc
}

func (d *Device) stop() { d.closeOnce.Do(func() { close(d.quit); <-d.done }) }

func libCandidates(cfg Config, names []string) []string {
	var c []string
	if cfg.LibDir != "" {
		for _, n := range names {
			c = append(c, filepath.Join(cfg.LibDir, n))
		}
	}
	if !cfg.NoDefaultSearch {
		c = append(c, names...)
	}
	return c
}

func (d *Device) init() error {
	var errs []string
	var errbuf [512]C.char
	for _, p := range libCandidates(d.cfg, []string{"libcuda.so.1", "libcuda.so"}) {
		cp := C.CString(p)
		d.drv = C.weft_drv_open(cp, &errbuf[0], C.int(len(errbuf)))
		C.free(unsafe.Pointer(cp))
		if d.drv != nil {
			break
		}
		errs = append(errs, C.GoString(&errbuf[0]))
	}
	if d.drv == nil {
		return fmt.Errorf("%w: %s", ErrNoDriver, strings.Join(errs, "; "))
	}
	if err := d.check("cuInit", C.weft_cuInit(d.drv)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	var n C.int
	if err := d.check("cuDeviceGetCount", C.weft_cuDeviceGetCount(d.drv, &n)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	if int(n) <= d.cfg.Device {
		return fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, d.cfg.Device, int(n))
	}
	if err := d.check("cuDeviceGet", C.weft_cuDeviceGet(d.drv, &d.dev, C.int(d.cfg.Device))); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	var name [256]C.char
	if err := d.check("cuDeviceGetName", C.weft_cuDeviceGetName(d.drv, &name[0], C.int(len(name)), d.dev)); err != nil {
		return err
	}
	d.name = C.GoString(&name[0])
	for _, a := range []struct {
		attr int
		dst  *int
	}{{attrCCMajor, &d.ccMajor}, {attrCCMinor, &d.ccMinor}} {
		var v C.int
		if err := d.check("cuDeviceGetAttribute", C.weft_cuDeviceGetAttribute(d.drv, &v, C.int(a.attr), d.dev)); err != nil {
			return err
		}
		*a.dst = int(v)
	}
	if d.ccMajor < 8 {
		return fmt.Errorf("%w: %s is sm_%d%d; weft's kernels need sm_80 or newer", ErrNoDevice, d.name, d.ccMajor, d.ccMinor)
	}
	var total C.size_t
	if err := d.check("cuDeviceTotalMem", C.weft_cuDeviceTotalMem(d.drv, &total, d.dev)); err != nil {
		return err
	}
	d.total = uint64(total)
	var ver C.int
	if err := d.check("cuDriverGetVersion", C.weft_cuDriverGetVersion(d.drv, &ver)); err != nil {
		return err
	}
	d.driver = int(ver)

	errs = errs[:0]
	for _, p := range libCandidates(d.cfg, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}) {
		cp := C.CString(p)
		d.blas = C.weft_blas_open(cp, &errbuf[0], C.int(len(errbuf)))
		C.free(unsafe.Pointer(cp))
		if d.blas != nil {
			d.blasPath = p
			break
		}
		errs = append(errs, C.GoString(&errbuf[0]))
	}
	if d.blas == nil {
		return fmt.Errorf("%w: %s", ErrNoCUBLAS, strings.Join(errs, "; "))
	}

	if err := d.check("cuDevicePrimaryCtxRetain", C.weft_cuDevicePrimaryCtxRetain(d.drv, &d.ctx, d.dev)); err != nil {
		return err
	}
	d.ctxHeld = true
	if err := d.check("cuCtxSetCurrent", C.weft_cuCtxSetCurrent(d.drv, d.ctx)); err != nil {
		return err
	}
	const streamNonBlocking = 1
	if err := d.check("cuStreamCreate", C.weft_cuStreamCreate(d.drv, &d.stream, streamNonBlocking)); err != nil {
		return err
	}
	img := C.CBytes(kernels.Fatbin)
	err := d.check("cuModuleLoadData", C.weft_cuModuleLoadData(d.drv, &d.module, img))
	C.free(img)
	if err != nil {
		return fmt.Errorf("%w (embedded fatbin has sm_80/86/89/90 + compute_90 PTX; the driver must be new enough for CUDA 11.8 code)", err)
	}
	for _, k := range kernelNames {
		ck := C.CString(k)
		var f C.CUfunction
		err := d.check("cuModuleGetFunction("+k+")", C.weft_cuModuleGetFunction(d.drv, &f, d.module, ck))
		C.free(unsafe.Pointer(ck))
		if err != nil {
			return err
		}
		d.fn[k] = f
	}
	if err := d.checkBLAS("cublasCreate", C.weft_cublasCreate(d.blas, &d.handle)); err != nil {
		return err
	}
	if err := d.checkBLAS("cublasSetStream", C.weft_cublasSetStream(d.blas, d.handle, d.stream)); err != nil {
		return err
	}
	// A workspace of our own (after SetStream, which resets it), so that
	// capturing a step into a CUDA graph never makes cuBLAS allocate one;
	// without cublasSetWorkspace cuBLAS keeps its default.
	d.graphsOK = C.weft_graphs_ok(d.drv) != 0
	if ws, err := d.alloc(blasWorkspace); err == nil {
		if C.weft_cublasSetWorkspace(d.blas, d.handle, C.CUdeviceptr(ws), blasWorkspace) == 0 {
			d.blasWS = ws
		} else {
			d.free(ws)
		}
	}
	var bv C.int
	if err := d.checkBLAS("cublasGetVersion", C.weft_cublasGetVersion(d.blas, d.handle, &bv)); err != nil {
		return err
	}
	d.cublas = int(bv)
	return nil
}

// teardown releases what init acquired, in reverse; it runs on the device
// thread and keeps going past failures.
func (d *Device) teardown() error {
	if d.drv == nil {
		return nil
	}
	if d.ctxHeld {
		C.weft_cuCtxSetCurrent(d.drv, d.ctx)
	}
	if d.handle != nil {
		C.weft_cublasDestroy(d.blas, d.handle)
		d.handle = nil
	}
	d.free(d.blasWS)
	d.blasWS = 0
	if d.module != nil {
		C.weft_cuModuleUnload(d.drv, d.module)
		d.module = nil
	}
	if d.stream != nil {
		C.weft_cuStreamDestroy(d.drv, d.stream)
		d.stream = nil
	}
	if d.ctxHeld {
		C.weft_cuDevicePrimaryCtxRelease(d.drv, d.dev)
		d.ctxHeld = false
	}
	if d.blas != nil {
		C.weft_blas_free(d.blas)
		d.blas = nil
	}
	C.weft_drv_free(d.drv)
	d.drv = nil
	return nil
}

// Close releases the device. Backends on it must be closed first.
func (d *Device) Close() error {
	err := d.do(d.teardown)
	d.stop()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// check turns a CUresult into an error, marking the device unhealthy when
// the error is sticky.
func (d *Device) check(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Op: op, Code: int(r)}
	if p := C.weft_error_name(d.drv, r); p != nil {
		e.Name = C.GoString(p)
	}
	if e.Sticky() {
		d.markUnhealthy(e.Error())
	}
	return e
}

func (d *Device) checkBLAS(op string, s C.cublasStatus_t) error {
	if s == 0 {
		return nil
	}
	e := &BLASError{Op: op, Status: int(s)}
	if e.Sticky() {
		d.markUnhealthy(e.Error())
	}
	return e
}

func (d *Device) markUnhealthy(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unhealthy == "" {
		d.unhealthy = reason
	}
}

// Healthy reports false, with the first sticky error, once the CUDA context
// is poisoned; the server then reports NOT_SERVING.
func (d *Device) Healthy() (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unhealthy == "", d.unhealthy
}

// Name is "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// ComputeCapability is (9, 0) for sm_90.
func (d *Device) ComputeCapability() (major, minor int) { return d.ccMajor, d.ccMinor }

// TotalMemory is the device memory in bytes.
func (d *Device) TotalMemory() uint64 { return d.total }

// CUBLASVersion is cuBLAS's version number (major*10000 + minor*100 + patch
// for cuBLAS 11 and later).
func (d *Device) CUBLASVersion() int { return d.cublas }

// DriverVersion is the CUDA version the driver supports (13000 = 13.0).
func (d *Device) DriverVersion() int { return d.driver }

// String is "NVIDIA H200, sm_90, cuBLAS 13".
func (d *Device) String() string {
	return fmt.Sprintf("%s, sm_%d%d, cuBLAS %d", d.name, d.ccMajor, d.ccMinor, d.cublas/10000)
}

// memInfo returns free and total device memory (device thread only).
func (d *Device) memInfo() (free, total uint64, err error) {
	var f, t C.size_t
	if err := d.check("cuMemGetInfo", C.weft_cuMemGetInfo(d.drv, &f, &t)); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

// alloc returns n bytes of device memory (device thread only).
func (d *Device) alloc(n int64) (uint64, error) {
	if n <= 0 {
		n = 256
	}
	var p C.CUdeviceptr
	if err := d.check("cuMemAlloc", C.weft_cuMemAlloc(d.drv, &p, C.size_t(n))); err != nil {
		return 0, fmt.Errorf("allocating %d bytes: %w", n, err)
	}
	return uint64(p), nil
}

func (d *Device) free(p uint64) {
	if p != 0 {
		C.weft_cuMemFree(d.drv, C.CUdeviceptr(p))
	}
}

// upload copies host bytes to dst on the stream. src may be Go memory without
// pointers or memory-mapped file data; for pageable memory the driver has
// staged the bytes when the call returns, so src may be reused.
func (d *Device) upload(dst uint64, src unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	return d.check("cuMemcpyHtoDAsync", C.weft_cuMemcpyHtoDAsync(d.drv, C.CUdeviceptr(dst), src, C.size_t(n), d.stream))
}

func (d *Device) download(dst unsafe.Pointer, src uint64, n int) error {
	if n == 0 {
		return nil
	}
	return d.check("cuMemcpyDtoHAsync", C.weft_cuMemcpyDtoHAsync(d.drv, dst, C.CUdeviceptr(src), C.size_t(n), d.stream))
}

func (d *Device) sync() error {
	return d.check("cuStreamSynchronize", C.weft_cuStreamSynchronize(d.drv, d.stream))
}

// gemvMaxT and gemvWarps are gemv.cuh's GEMV_MAX_T and GEMV_WARPS.
const (
	gemvMaxT  = 8
	gemvWarps = 8
)

// blasWorkspace is the size of cuBLAS's workspace (NVIDIA's recommendation
// for Hopper; enough for every GPU before it).
const blasWorkspace = 32 << 20

// captureRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: cuBLAS may query the
// device while a step is captured.
const captureRelaxed = 2

// graphExec is an instantiated CUDA graph.
type graphExec = C.CUgraphExec

// capture records what f queues on the stream into a CUDA graph and
// instantiates it; nothing runs. On failure the stream is out of capture
// mode again and the error says which call failed (device thread).
func (d *Device) capture(f func() error) (graphExec, error) {
	if err := d.check("cuStreamBeginCapture", C.weft_cuStreamBeginCapture(d.drv, d.stream, captureRelaxed)); err != nil {
		return nil, err
	}
	ferr := f()
	var g C.CUgraph
	eerr := d.check("cuStreamEndCapture", C.weft_cuStreamEndCapture(d.drv, d.stream, &g))
	if ferr != nil || eerr != nil {
		if g != nil {
			C.weft_cuGraphDestroy(d.drv, g)
		}
		return nil, errors.Join(ferr, eerr)
	}
	var e C.CUgraphExec
	err := d.check("cuGraphInstantiate", C.weft_cuGraphInstantiate(d.drv, &e, g))
	C.weft_cuGraphDestroy(d.drv, g)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// replay queues an instantiated graph on the stream (device thread).
func (d *Device) replay(e graphExec) error {
	return d.check("cuGraphLaunch", C.weft_cuGraphLaunch(d.drv, e, d.stream))
}

// dropGraph frees an instantiated graph; one still running is freed when
// it completes (device thread).
func (d *Device) dropGraph(e graphExec) { C.weft_cuGraphExecDestroy(d.drv, e) }

// dim3 is a launch grid or block shape.
type dim3 struct{ x, y, z int }

// launch runs kernel name with args, each a uint64 (device pointer), int
// (passed as int32), int64, or float32.
func (d *Device) launch(name string, grid, block dim3, args ...any) error {
	var slots [32]C.uint64_t
	if len(args) > len(slots) {
		return fmt.Errorf("cuda: launch %s: %d arguments", name, len(args))
	}
	for i, a := range args {
		switch v := a.(type) {
		case uint64:
			slots[i] = C.uint64_t(v)
		case int:
			slots[i] = C.uint64_t(uint32(int32(v)))
		case int64:
			slots[i] = C.uint64_t(uint64(v))
		case float32:
			slots[i] = C.uint64_t(uint64(*(*uint32)(unsafe.Pointer(&v))))
		default:
			panic(fmt.Sprintf("cuda: launch %s: argument %d has type %T", name, i, a)) // programming error
		}
	}
	f, ok := d.fn[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %q", name)
	}
	z := func(v int) C.uint {
		if v == 0 {
			return 1
		}
		return C.uint(v)
	}
	r := C.weft_launch(d.drv, f, z(grid.x), z(grid.y), z(grid.z), z(block.x), z(block.y), z(block.z), 0, d.stream, &slots[0], C.int(len(args)))
	return d.check("cuLaunchKernel("+name+")", r)
}

// gemm computes Y[T, out] = X[T, in] · W[out, in]^T (+ Y when accumulate),
// row-major, W and X F16, Y F32, in FP32 on tensor cores. In cuBLAS's
// column-major terms: Y^T = W^T(op T, lda in) · X^T(op N, ldb in).
//
// Up to gemvMaxT tokens it is weft's gemv_f16 kernel, which streams W once
// near the memory bandwidth where cuBLAS's kernels, made for larger
// products, use a fraction of it; the sums are in FP32 either way, in a
// different order.
func (d *Device) gemm(y, w, x uint64, T, out, in int, accumulate bool) error {
	const opN, opT = 0, 1
	acc := 0
	if accumulate {
		acc = 1
	}
	if T >= 1 && T <= gemvMaxT && in%8 == 0 {
		return d.launch("gemv_f16", dim3{(out + gemvWarps - 1) / gemvWarps, 1, 1}, dim3{32 * gemvWarps, 1, 1}, y, w, x, T, out, in, acc)
	}
	s := C.weft_gemm(d.blas, d.handle, opT, opN, C.int(out), C.int(T), C.int(in), 1,
		C.CUdeviceptr(w), dtF16, C.int(in), C.CUdeviceptr(x), dtF16, C.int(in), C.float(acc), C.CUdeviceptr(y), dtF32, C.int(out))
	return d.checkBLAS("cublasGemmEx", s)
}

// driverSymbols and blasSymbols list what the shim resolves (for tests that
// build fake libraries).
func driverSymbols() []string { return append(symbols(0), symbols(2)...) }
func blasSymbols() []string   { return append(symbols(1), symbols(3)...) }

func symbols(lib int) []string {
	var out []string
	for i := 0; ; i++ {
		p := C.weft_symbol(C.int(lib), C.int(i))
		if p == nil {
			return out
		}
		out = append(out, C.GoString(p))
	}
}

func cMemsetD8(d *Device, p uint64, n int64) C.CUresult {
	return C.weft_cuMemsetD8Async(d.drv, C.CUdeviceptr(p), 0, C.size_t(n), d.stream)
}
