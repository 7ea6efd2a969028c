// shim.h: weft's C shim over the CUDA driver API and cuBLAS, both opened at
// run time with dlopen. No CUDA header is included: the few types and
// constants needed are declared here, so `go build` needs no toolkit.
#ifndef WEFT_SHIM_H
#define WEFT_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef int cublasStatus_t;
typedef void *cublasHandle_t;

// X-list of the driver entry points weft uses: (name, symbol, return, args).
#define WEFT_DRIVER_FUNCS(X) \
	X(Init, "cuInit", (unsigned int flags)) \
	X(DriverGetVersion, "cuDriverGetVersion", (int *v)) \
	X(DeviceGetCount, "cuDeviceGetCount", (int *n)) \
	X(DeviceGet, "cuDeviceGet", (CUdevice *d, int ordinal)) \
	X(DeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice d)) \
	X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *v, int attr, CUdevice d)) \
	X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *bytes, CUdevice d)) \
	X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *c, CUdevice d)) \
	X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice d)) \
	X(CtxSetCurrent, "cuCtxSetCurrent", (CUcontext c)) \
	X(ModuleLoadData, "cuModuleLoadData", (CUmodule *m, const void *image)) \
	X(ModuleUnload, "cuModuleUnload", (CUmodule m)) \
	X(ModuleGetFunction, "cuModuleGetFunction", (CUfunction *f, CUmodule m, const char *name)) \
	X(StreamCreate, "cuStreamCreate", (CUstream *s, unsigned int flags)) \
	X(StreamDestroy, "cuStreamDestroy_v2", (CUstream s)) \
	X(StreamSynchronize, "cuStreamSynchronize", (CUstream s)) \
	X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr *p, size_t bytes)) \
	X(MemFree, "cuMemFree_v2", (CUdeviceptr p)) \
	X(MemGetInfo, "cuMemGetInfo_v2", (size_t *free, size_t *total)) \
	X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr dst, const void *src, size_t n, CUstream s)) \
	X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *dst, CUdeviceptr src, size_t n, CUstream s)) \
	X(MemsetD8Async, "cuMemsetD8Async", (CUdeviceptr dst, unsigned char v, size_t n, CUstream s)) \
	X(LaunchKernel, "cuLaunchKernel", (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params, void **extra)) \
	X(GetErrorName, "cuGetErrorName", (CUresult r, const char **name))

// Optional driver entry points: CUDA graphs (stream capture and replay of a
// decode step). Open succeeds without them; graphs are then off.
#define WEFT_DRIVER_OPT_FUNCS(X) \
	X(StreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream s, int mode)) \
	X(StreamEndCapture, "cuStreamEndCapture", (CUstream s, CUgraph *g)) \
	X(GraphInstantiate, "cuGraphInstantiateWithFlags", (CUgraphExec *e, CUgraph g, unsigned long long flags)) \
	X(GraphLaunch, "cuGraphLaunch", (CUgraphExec e, CUstream s)) \
	X(GraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec e)) \
	X(GraphDestroy, "cuGraphDestroy", (CUgraph g))

#define WEFT_BLAS_FUNCS(X) \
	X(Create, "cublasCreate_v2", (cublasHandle_t * h)) \
	X(Destroy, "cublasDestroy_v2", (cublasHandle_t h)) \
	X(SetStream, "cublasSetStream_v2", (cublasHandle_t h, CUstream s)) \
	X(GetVersion, "cublasGetVersion_v2", (cublasHandle_t h, int *v)) \
	X(GemmEx, "cublasGemmEx", (cublasHandle_t h, int transa, int transb, int m, int n, int k, const void *alpha, const void *A, int Atype, int lda, const void *B, int Btype, int ldb, const void *beta, void *C, int Ctype, int ldc, int computeType, int algo))

// Optional cuBLAS entry points: a workspace of weft's own, so that graph
// captures never make cuBLAS allocate one.
#define WEFT_BLAS_OPT_FUNCS(X) X(SetWorkspace, "cublasSetWorkspace_v2", (cublasHandle_t h, void *ws, size_t bytes))

#define WEFT_DECL_FIELD(name, sym, args) int(*name) args;

typedef struct weft_drv {
	void *lib;
	WEFT_DRIVER_FUNCS(WEFT_DECL_FIELD)
	WEFT_DRIVER_OPT_FUNCS(WEFT_DECL_FIELD)
} weft_drv;

typedef struct weft_blas {
	void *lib;
	WEFT_BLAS_FUNCS(WEFT_DECL_FIELD)
	WEFT_BLAS_OPT_FUNCS(WEFT_DECL_FIELD)
} weft_blas;

// Open/close. On failure they return NULL and write the reason to err.
weft_drv *weft_drv_open(const char *path, char *err, int errlen);
weft_blas *weft_blas_open(const char *path, char *err, int errlen);
void weft_drv_free(weft_drv *d);
void weft_blas_free(weft_blas *b);

// The symbol names each library must export (NULL-terminated), for tests.
// weft_symbol(lib, i): the i-th symbol of the driver (lib 0) or cuBLAS (lib
// 1) table, or of their optional tables (lib 2, lib 3), NULL past the end.
const char *weft_symbol(int lib, int i);

// Thin wrappers (cgo cannot call C function pointers directly).
CUresult weft_cuInit(weft_drv *d);
CUresult weft_cuDriverGetVersion(weft_drv *d, int *v);
CUresult weft_cuDeviceGetCount(weft_drv *d, int *n);
CUresult weft_cuDeviceGet(weft_drv *d, CUdevice *dev, int ordinal);
CUresult weft_cuDeviceGetName(weft_drv *d, char *name, int len, CUdevice dev);
CUresult weft_cuDeviceGetAttribute(weft_drv *d, int *v, int attr, CUdevice dev);
CUresult weft_cuDeviceTotalMem(weft_drv *d, size_t *bytes, CUdevice dev);
CUresult weft_cuDevicePrimaryCtxRetain(weft_drv *d, CUcontext *c, CUdevice dev);
CUresult weft_cuDevicePrimaryCtxRelease(weft_drv *d, CUdevice dev);
CUresult weft_cuCtxSetCurrent(weft_drv *d, CUcontext c);
CUresult weft_cuModuleLoadData(weft_drv *d, CUmodule *m, const void *image);
CUresult weft_cuModuleUnload(weft_drv *d, CUmodule m);
CUresult weft_cuModuleGetFunction(weft_drv *d, CUfunction *f, CUmodule m, const char *name);
CUresult weft_cuStreamCreate(weft_drv *d, CUstream *s, unsigned int flags);
CUresult weft_cuStreamDestroy(weft_drv *d, CUstream s);
CUresult weft_cuStreamSynchronize(weft_drv *d, CUstream s);
CUresult weft_cuMemAlloc(weft_drv *d, CUdeviceptr *p, size_t bytes);
CUresult weft_cuMemFree(weft_drv *d, CUdeviceptr p);
CUresult weft_cuMemGetInfo(weft_drv *d, size_t *free_bytes, size_t *total);
CUresult weft_cuMemcpyHtoDAsync(weft_drv *d, CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult weft_cuMemcpyDtoHAsync(weft_drv *d, void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult weft_cuMemsetD8Async(weft_drv *d, CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
// weft_launch launches f with nargs arguments, each held in the low bytes
// of one 8-byte slot of args (pointers and 64-bit values fill the slot;
// int32 and float32 use its first 4 bytes).
CUresult weft_launch(weft_drv *d, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shmem, CUstream s, uint64_t *args, int nargs);
// CUDA graphs; weft_graphs_ok is 1 when the driver has every graph entry
// point. The others return CUDA_ERROR_NOT_SUPPORTED (801) when it has not.
int weft_graphs_ok(weft_drv *d);
CUresult weft_cuStreamBeginCapture(weft_drv *d, CUstream s, int mode);
CUresult weft_cuStreamEndCapture(weft_drv *d, CUstream s, CUgraph *g);
CUresult weft_cuGraphInstantiate(weft_drv *d, CUgraphExec *e, CUgraph g);
CUresult weft_cuGraphLaunch(weft_drv *d, CUgraphExec e, CUstream s);
CUresult weft_cuGraphExecDestroy(weft_drv *d, CUgraphExec e);
CUresult weft_cuGraphDestroy(weft_drv *d, CUgraph g);
// weft_error_name returns the driver's name for r, or NULL.
const char *weft_error_name(weft_drv *d, CUresult r);

cublasStatus_t weft_cublasCreate(weft_blas *b, cublasHandle_t *h);
cublasStatus_t weft_cublasDestroy(weft_blas *b, cublasHandle_t h);
cublasStatus_t weft_cublasSetStream(weft_blas *b, cublasHandle_t h, CUstream s);
cublasStatus_t weft_cublasGetVersion(weft_blas *b, cublasHandle_t h, int *v);
// weft_cublasSetWorkspace returns CUBLAS_STATUS_NOT_SUPPORTED (15) when the
// library lacks cublasSetWorkspace_v2.
cublasStatus_t weft_cublasSetWorkspace(weft_blas *b, cublasHandle_t h, CUdeviceptr ws, size_t bytes);
// weft_gemm: C = alpha * op(A) * op(B) + beta * C, column-major, computed
// in FP32 (CUBLAS_COMPUTE_32F) with tensor cores for 16-bit inputs.
cublasStatus_t weft_gemm(weft_blas *b, cublasHandle_t h, int transa, int transb, int m, int n, int k, float alpha,
                         CUdeviceptr A, int Atype, int lda, CUdeviceptr B, int Btype, int ldb, float beta, CUdeviceptr C,
                         int Ctype, int ldc);

#endif
