//go:build cgo

// shim.c: see shim.h. Every function returns the library's status code
// unchanged; the Go side turns each into an error.
#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEFT_SYM_NAME(name, sym, args) sym,
static const char *const drv_symbols[] = {WEFT_DRIVER_FUNCS(WEFT_SYM_NAME) NULL};
static const char *const blas_symbols[] = {WEFT_BLAS_FUNCS(WEFT_SYM_NAME) NULL};
static const char *const drv_opt_symbols[] = {WEFT_DRIVER_OPT_FUNCS(WEFT_SYM_NAME) NULL};
static const char *const blas_opt_symbols[] = {WEFT_BLAS_OPT_FUNCS(WEFT_SYM_NAME) NULL};

const char *weft_symbol(int lib, int i) {
	const char *const *tables[] = {drv_symbols, blas_symbols, drv_opt_symbols, blas_opt_symbols};
	if (lib < 0 || lib > 3) return NULL;
	const char *const *t = tables[lib];
	for (int j = 0; j < i; j++)
		if (t[j] == NULL) return NULL;
	return t[i];
}

#define WEFT_RESOLVE(name, sym, args)                                                   \
	*(void **)(&x->name) = dlsym(lib, sym);                                              \
	if (x->name == NULL) {                                                               \
		snprintf(err, errlen, "%s: missing symbol %s", path, sym);                     \
		dlclose(lib);                                                                    \
		free(x);                                                                         \
		return NULL;                                                                     \
	}

// WEFT_RESOLVE_OPT leaves a missing optional symbol NULL.
#define WEFT_RESOLVE_OPT(name, sym, args) *(void **)(&x->name) = dlsym(lib, sym);

weft_drv *weft_drv_open(const char *path, char *err, int errlen) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : path);
		return NULL;
	}
	weft_drv *x = calloc(1, sizeof *x);
	x->lib = lib;
	WEFT_DRIVER_FUNCS(WEFT_RESOLVE)
	WEFT_DRIVER_OPT_FUNCS(WEFT_RESOLVE_OPT)
	return x;
}

weft_blas *weft_blas_open(const char *path, char *err, int errlen) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : path);
		return NULL;
	}
	weft_blas *x = calloc(1, sizeof *x);
	x->lib = lib;
	WEFT_BLAS_FUNCS(WEFT_RESOLVE)
	WEFT_BLAS_OPT_FUNCS(WEFT_RESOLVE_OPT)
	return x;
}

// The libraries stay loaded (unloading libcuda while its threads run is not
// safe); only the tables are freed.
void weft_drv_free(weft_drv *d) { free(d); }
void weft_blas_free(weft_blas *b) { free(b); }

CUresult weft_cuInit(weft_drv *d) { return d->Init(0); }
CUresult weft_cuDriverGetVersion(weft_drv *d, int *v) { return d->DriverGetVersion(v); }
CUresult weft_cuDeviceGetCount(weft_drv *d, int *n) { return d->DeviceGetCount(n); }
CUresult weft_cuDeviceGet(weft_drv *d, CUdevice *dev, int ordinal) { return d->DeviceGet(dev, ordinal); }
CUresult weft_cuDeviceGetName(weft_drv *d, char *name, int len, CUdevice dev) { return d->DeviceGetName(name, len, dev); }
CUresult weft_cuDeviceGetAttribute(weft_drv *d, int *v, int attr, CUdevice dev) { return d->DeviceGetAttribute(v, attr, dev); }
CUresult weft_cuDeviceTotalMem(weft_drv *d, size_t *bytes, CUdevice dev) { return d->DeviceTotalMem(bytes, dev); }
CUresult weft_cuDevicePrimaryCtxRetain(weft_drv *d, CUcontext *c, CUdevice dev) { return d->DevicePrimaryCtxRetain(c, dev); }
CUresult weft_cuDevicePrimaryCtxRelease(weft_drv *d, CUdevice dev) { return d->DevicePrimaryCtxRelease(dev); }
CUresult weft_cuCtxSetCurrent(weft_drv *d, CUcontext c) { return d->CtxSetCurrent(c); }
CUresult weft_cuModuleLoadData(weft_drv *d, CUmodule *m, const void *image) { return d->ModuleLoadData(m, image); }
CUresult weft_cuModuleUnload(weft_drv *d, CUmodule m) { return d->ModuleUnload(m); }
CUresult weft_cuModuleGetFunction(weft_drv *d, CUfunction *f, CUmodule m, const char *name) { return d->ModuleGetFunction(f, m, name); }
CUresult weft_cuStreamCreate(weft_drv *d, CUstream *s, unsigned int flags) { return d->StreamCreate(s, flags); }
CUresult weft_cuStreamDestroy(weft_drv *d, CUstream s) { return d->StreamDestroy(s); }
CUresult weft_cuStreamSynchronize(weft_drv *d, CUstream s) { return d->StreamSynchronize(s); }
CUresult weft_cuMemAlloc(weft_drv *d, CUdeviceptr *p, size_t bytes) { return d->MemAlloc(p, bytes); }
CUresult weft_cuMemFree(weft_drv *d, CUdeviceptr p) { return d->MemFree(p); }
CUresult weft_cuMemGetInfo(weft_drv *d, size_t *free_bytes, size_t *total) { return d->MemGetInfo(free_bytes, total); }
CUresult weft_cuMemcpyHtoDAsync(weft_drv *d, CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	return d->MemcpyHtoDAsync(dst, src, n, s);
}
CUresult weft_cuMemcpyDtoHAsync(weft_drv *d, void *dst, CUdeviceptr src, size_t n, CUstream s) {
	return d->MemcpyDtoHAsync(dst, src, n, s);
}
CUresult weft_cuMemsetD8Async(weft_drv *d, CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
	return d->MemsetD8Async(dst, v, n, s);
}

CUresult weft_launch(weft_drv *d, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shmem, CUstream s, uint64_t *args, int nargs) {
	void *params[32];
	if (nargs > 32) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	return d->LaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

int weft_graphs_ok(weft_drv *d) {
	return d->StreamBeginCapture != NULL && d->StreamEndCapture != NULL && d->GraphInstantiate != NULL &&
	       d->GraphLaunch != NULL && d->GraphExecDestroy != NULL && d->GraphDestroy != NULL;
}

#define CUDA_ERROR_NOT_SUPPORTED 801
CUresult weft_cuStreamBeginCapture(weft_drv *d, CUstream s, int mode) {
	return d->StreamBeginCapture ? d->StreamBeginCapture(s, mode) : CUDA_ERROR_NOT_SUPPORTED;
}
CUresult weft_cuStreamEndCapture(weft_drv *d, CUstream s, CUgraph *g) {
	return d->StreamEndCapture ? d->StreamEndCapture(s, g) : CUDA_ERROR_NOT_SUPPORTED;
}
CUresult weft_cuGraphInstantiate(weft_drv *d, CUgraphExec *e, CUgraph g) {
	return d->GraphInstantiate ? d->GraphInstantiate(e, g, 0) : CUDA_ERROR_NOT_SUPPORTED;
}
CUresult weft_cuGraphLaunch(weft_drv *d, CUgraphExec e, CUstream s) {
	return d->GraphLaunch ? d->GraphLaunch(e, s) : CUDA_ERROR_NOT_SUPPORTED;
}
CUresult weft_cuGraphExecDestroy(weft_drv *d, CUgraphExec e) {
	return d->GraphExecDestroy ? d->GraphExecDestroy(e) : CUDA_ERROR_NOT_SUPPORTED;
}
CUresult weft_cuGraphDestroy(weft_drv *d, CUgraph g) { return d->GraphDestroy ? d->GraphDestroy(g) : CUDA_ERROR_NOT_SUPPORTED; }

const char *weft_error_name(weft_drv *d, CUresult r) {
	const char *name = NULL;
	if (d == NULL || d->GetErrorName(r, &name) != 0) return NULL;
	return name;
}

cublasStatus_t weft_cublasCreate(weft_blas *b, cublasHandle_t *h) { return b->Create(h); }
cublasStatus_t weft_cublasDestroy(weft_blas *b, cublasHandle_t h) { return b->Destroy(h); }
cublasStatus_t weft_cublasSetStream(weft_blas *b, cublasHandle_t h, CUstream s) { return b->SetStream(h, s); }
cublasStatus_t weft_cublasGetVersion(weft_blas *b, cublasHandle_t h, int *v) { return b->GetVersion(h, v); }
cublasStatus_t weft_cublasSetWorkspace(weft_blas *b, cublasHandle_t h, CUdeviceptr ws, size_t bytes) {
	return b->SetWorkspace ? b->SetWorkspace(h, (void *)ws, bytes) : 15; // CUBLAS_STATUS_NOT_SUPPORTED
}

#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_GEMM_DEFAULT (-1)

cublasStatus_t weft_gemm(weft_blas *b, cublasHandle_t h, int transa, int transb, int m, int n, int k, float alpha,
                         CUdeviceptr A, int Atype, int lda, CUdeviceptr B, int Btype, int ldb, float beta, CUdeviceptr C,
                         int Ctype, int ldc) {
	return b->GemmEx(h, transa, transb, m, n, k, &alpha, (const void *)A, Atype, lda, (const void *)B, Btype, ldb, &beta,
	                 (void *)C, Ctype, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
