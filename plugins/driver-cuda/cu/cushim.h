/*
 * cushim.h: the CUDA entry points package cu calls, declared here without
 * any CUDA header, and the small shims Go calls them through.
 *
 * Each library is a table of function pointers filled by dlsym (cushim.c).
 * The tables are written once as X-macros, X(return type, symbol, parameter
 * list), and expand into the table's fields and the names dlsym looks for,
 * so a field and its symbol cannot drift apart. The prototypes follow
 * cuda.h, cublas_api.h, cusolverDn.h and nvrtc.h of CUDA 12.6/13.0:
 * handles are pointers to the same incomplete struct tags the headers use,
 * CUdeviceptr is unsigned long long, enums are int.
 *
 * testdata/abicheck.c includes this file next to NVIDIA's headers (with
 * SC_VERIFY defined, so the enum typedefs are the real enum types) and fails
 * to compile if any prototype or constant here differs from them.
 */
#ifndef STARPU_CUSHIM_H
#define STARPU_CUSHIM_H

#include <stddef.h>
#include <stdint.h>

#ifndef SC_VERIFY
typedef int sc_result;        /* CUresult */
typedef int sc_devattr;       /* CUdevice_attribute */
typedef int sc_funcattr;      /* CUfunction_attribute */
typedef int sc_jitopt;        /* CUjit_option */
typedef int sc_blas_status;   /* cublasStatus_t */
typedef int sc_blas_op;       /* cublasOperation_t */
typedef int sc_blas_fill;     /* cublasFillMode_t */
typedef int sc_blas_side;     /* cublasSideMode_t */
typedef int sc_blas_diag;     /* cublasDiagType_t */
typedef int sc_blas_ptrmode;  /* cublasPointerMode_t */
typedef int sc_solver_status; /* cusolverStatus_t */
typedef int sc_nvrtc_result;  /* nvrtcResult */
typedef int sc_libprop;       /* libraryPropertyType */
#endif

typedef int sc_device;            /* CUdevice */
typedef unsigned long long sc_dptr; /* CUdeviceptr (64-bit) */
typedef struct CUctx_st *sc_context;
typedef struct CUstream_st *sc_stream; /* CUstream == cudaStream_t */
typedef struct CUevent_st *sc_event;
typedef struct CUmod_st *sc_module;
typedef struct CUfunc_st *sc_function;
typedef struct cublasContext *sc_blas_handle;
typedef struct cusolverDnContext *sc_solver_handle;
typedef struct _nvrtcProgram *sc_nvrtc_program;

/* Constants (checked against NVIDIA's headers by testdata/abicheck.c). */
#define SC_CUDA_SUCCESS 0
#define SC_CUDA_ERROR_NOT_READY 600
#define SC_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704
#define SC_JIT_INFO_LOG_BUFFER 3
#define SC_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define SC_JIT_ERROR_LOG_BUFFER 5
#define SC_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define SC_BLAS_POINTER_MODE_HOST 0
#define SC_BLAS_POINTER_MODE_DEVICE 1
#define SC_MAJOR_VERSION 0
#define SC_MINOR_VERSION 1
#define SC_PATCH_LEVEL 2

/*
 * Driver API (libcuda.so.1). Symbols are the versioned ones cuda.h maps the
 * plain names to (cuMemAlloc -> cuMemAlloc_v2 and so on); the rest have no
 * suffix in CUDA 12 and 13.
 */
#define SC_DRIVER_FUNCS(X) \
	X(sc_result, cuGetErrorName, (sc_result error, const char **str)) \
	X(sc_result, cuGetErrorString, (sc_result error, const char **str)) \
	X(sc_result, cuDriverGetVersion, (int *version)) \
	X(sc_result, cuInit, (unsigned int flags)) \
	X(sc_result, cuDeviceGetCount, (int *count)) \
	X(sc_result, cuDeviceGet, (sc_device *dev, int ordinal)) \
	X(sc_result, cuDeviceGetName, (char *name, int len, sc_device dev)) \
	X(sc_result, cuDeviceTotalMem_v2, (size_t *bytes, sc_device dev)) \
	X(sc_result, cuDeviceGetAttribute, (int *value, sc_devattr attrib, sc_device dev)) \
	X(sc_result, cuDeviceGetPCIBusId, (char *busId, int len, sc_device dev)) \
	X(sc_result, cuDeviceCanAccessPeer, (int *canAccess, sc_device dev, sc_device peer)) \
	X(sc_result, cuDevicePrimaryCtxRetain, (sc_context *ctx, sc_device dev)) \
	X(sc_result, cuDevicePrimaryCtxRelease_v2, (sc_device dev)) \
	X(sc_result, cuDevicePrimaryCtxSetFlags_v2, (sc_device dev, unsigned int flags)) \
	X(sc_result, cuCtxSetCurrent, (sc_context ctx)) \
	X(sc_result, cuCtxGetCurrent, (sc_context *ctx)) \
	X(sc_result, cuCtxPushCurrent_v2, (sc_context ctx)) \
	X(sc_result, cuCtxPopCurrent_v2, (sc_context *ctx)) \
	X(sc_result, cuCtxSynchronize, (void)) \
	X(sc_result, cuCtxEnablePeerAccess, (sc_context peer, unsigned int flags)) \
	X(sc_result, cuMemAlloc_v2, (sc_dptr *dptr, size_t bytes)) \
	X(sc_result, cuMemFree_v2, (sc_dptr dptr)) \
	X(sc_result, cuMemGetInfo_v2, (size_t *free, size_t *total)) \
	X(sc_result, cuMemHostRegister_v2, (void *p, size_t bytes, unsigned int flags)) \
	X(sc_result, cuMemHostUnregister, (void *p)) \
	X(sc_result, cuMemcpyHtoDAsync_v2, (sc_dptr dst, const void *src, size_t bytes, sc_stream s)) \
	X(sc_result, cuMemcpyDtoHAsync_v2, (void *dst, sc_dptr src, size_t bytes, sc_stream s)) \
	X(sc_result, cuMemcpyDtoDAsync_v2, (sc_dptr dst, sc_dptr src, size_t bytes, sc_stream s)) \
	X(sc_result, cuMemcpyPeerAsync, (sc_dptr dst, sc_context dstCtx, sc_dptr src, sc_context srcCtx, size_t bytes, sc_stream s)) \
	X(sc_result, cuMemsetD8Async, (sc_dptr dst, unsigned char value, size_t n, sc_stream s)) \
	X(sc_result, cuStreamCreate, (sc_stream *s, unsigned int flags)) \
	X(sc_result, cuStreamDestroy_v2, (sc_stream s)) \
	X(sc_result, cuStreamSynchronize, (sc_stream s)) \
	X(sc_result, cuStreamQuery, (sc_stream s)) \
	X(sc_result, cuStreamWaitEvent, (sc_stream s, sc_event e, unsigned int flags)) \
	X(sc_result, cuEventCreate, (sc_event *e, unsigned int flags)) \
	X(sc_result, cuEventDestroy_v2, (sc_event e)) \
	X(sc_result, cuEventRecord, (sc_event e, sc_stream s)) \
	X(sc_result, cuEventQuery, (sc_event e)) \
	X(sc_result, cuEventSynchronize, (sc_event e)) \
	X(sc_result, cuModuleLoadDataEx, (sc_module *m, const void *image, unsigned int numOptions, sc_jitopt *options, void **optionValues)) \
	X(sc_result, cuModuleUnload, (sc_module m)) \
	X(sc_result, cuModuleGetFunction, (sc_function *f, sc_module m, const char *name)) \
	X(sc_result, cuFuncGetAttribute, (int *value, sc_funcattr attrib, sc_function f)) \
	X(sc_result, cuLaunchKernel, (sc_function f, unsigned int gridX, unsigned int gridY, unsigned int gridZ, unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedMemBytes, sc_stream s, void **kernelParams, void **extra))

/*
 * Entry points found under one of two names, with the same prototype: CUDA
 * 13's cuda.h calls cuEventElapsedTime_v2 (added in 12.8); older drivers
 * have only the plain name. A(return, field, symbol tried first,
 * parameters); the field's own name is tried second.
 */
#define SC_DRIVER_ALTS(A) \
	A(sc_result, cuEventElapsedTime, cuEventElapsedTime_v2, (float *ms, sc_event start, sc_event end))

/* cuBLAS (libcublas), the v2 API's exported names. */
#define SC_BLAS_FUNCS(X) \
	X(sc_blas_status, cublasCreate_v2, (sc_blas_handle *h)) \
	X(sc_blas_status, cublasDestroy_v2, (sc_blas_handle h)) \
	X(sc_blas_status, cublasGetVersion_v2, (sc_blas_handle h, int *version)) \
	X(sc_blas_status, cublasSetStream_v2, (sc_blas_handle h, sc_stream s)) \
	X(sc_blas_status, cublasSetPointerMode_v2, (sc_blas_handle h, sc_blas_ptrmode mode)) \
	X(sc_blas_status, cublasSscal_v2, (sc_blas_handle h, int n, const float *alpha, float *x, int incx)) \
	X(sc_blas_status, cublasDscal_v2, (sc_blas_handle h, int n, const double *alpha, double *x, int incx)) \
	X(sc_blas_status, cublasSaxpy_v2, (sc_blas_handle h, int n, const float *alpha, const float *x, int incx, float *y, int incy)) \
	X(sc_blas_status, cublasDaxpy_v2, (sc_blas_handle h, int n, const double *alpha, const double *x, int incx, double *y, int incy)) \
	X(sc_blas_status, cublasSdot_v2, (sc_blas_handle h, int n, const float *x, int incx, const float *y, int incy, float *result)) \
	X(sc_blas_status, cublasDdot_v2, (sc_blas_handle h, int n, const double *x, int incx, const double *y, int incy, double *result)) \
	X(sc_blas_status, cublasSgemm_v2, (sc_blas_handle h, sc_blas_op transa, sc_blas_op transb, int m, int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc)) \
	X(sc_blas_status, cublasDgemm_v2, (sc_blas_handle h, sc_blas_op transa, sc_blas_op transb, int m, int n, int k, const double *alpha, const double *A, int lda, const double *B, int ldb, const double *beta, double *C, int ldc)) \
	X(sc_blas_status, cublasSsyrk_v2, (sc_blas_handle h, sc_blas_fill uplo, sc_blas_op trans, int n, int k, const float *alpha, const float *A, int lda, const float *beta, float *C, int ldc)) \
	X(sc_blas_status, cublasDsyrk_v2, (sc_blas_handle h, sc_blas_fill uplo, sc_blas_op trans, int n, int k, const double *alpha, const double *A, int lda, const double *beta, double *C, int ldc)) \
	X(sc_blas_status, cublasStrsm_v2, (sc_blas_handle h, sc_blas_side side, sc_blas_fill uplo, sc_blas_op trans, sc_blas_diag diag, int m, int n, const float *alpha, const float *A, int lda, float *B, int ldb)) \
	X(sc_blas_status, cublasDtrsm_v2, (sc_blas_handle h, sc_blas_side side, sc_blas_fill uplo, sc_blas_op trans, sc_blas_diag diag, int m, int n, const double *alpha, const double *A, int lda, double *B, int ldb))

/* cuBLAS entry points that may be absent (NULL then). */
#define SC_BLAS_OPTIONAL(X) \
	X(sc_blas_status, cublasGetProperty, (sc_libprop type, int *value))

/* cuSOLVER dense (libcusolver). */
#define SC_SOLVER_FUNCS(X) \
	X(sc_solver_status, cusolverDnCreate, (sc_solver_handle *h)) \
	X(sc_solver_status, cusolverDnDestroy, (sc_solver_handle h)) \
	X(sc_solver_status, cusolverDnSetStream, (sc_solver_handle h, sc_stream s)) \
	X(sc_solver_status, cusolverDnSpotrf_bufferSize, (sc_solver_handle h, sc_blas_fill uplo, int n, float *A, int lda, int *lwork)) \
	X(sc_solver_status, cusolverDnDpotrf_bufferSize, (sc_solver_handle h, sc_blas_fill uplo, int n, double *A, int lda, int *lwork)) \
	X(sc_solver_status, cusolverDnSpotrf, (sc_solver_handle h, sc_blas_fill uplo, int n, float *A, int lda, float *work, int lwork, int *devInfo)) \
	X(sc_solver_status, cusolverDnDpotrf, (sc_solver_handle h, sc_blas_fill uplo, int n, double *A, int lda, double *work, int lwork, int *devInfo))

#define SC_SOLVER_OPTIONAL(X) \
	X(sc_solver_status, cusolverGetProperty, (sc_libprop type, int *value))

/* NVRTC (libnvrtc). */
#define SC_NVRTC_FUNCS(X) \
	X(const char *, nvrtcGetErrorString, (sc_nvrtc_result result)) \
	X(sc_nvrtc_result, nvrtcVersion, (int *major, int *minor)) \
	X(sc_nvrtc_result, nvrtcCreateProgram, (sc_nvrtc_program *prog, const char *src, const char *name, int numHeaders, const char *const *headers, const char *const *includeNames)) \
	X(sc_nvrtc_result, nvrtcDestroyProgram, (sc_nvrtc_program *prog)) \
	X(sc_nvrtc_result, nvrtcCompileProgram, (sc_nvrtc_program prog, int numOptions, const char *const *options)) \
	X(sc_nvrtc_result, nvrtcGetPTXSize, (sc_nvrtc_program prog, size_t *size)) \
	X(sc_nvrtc_result, nvrtcGetPTX, (sc_nvrtc_program prog, char *ptx)) \
	X(sc_nvrtc_result, nvrtcGetProgramLogSize, (sc_nvrtc_program prog, size_t *size)) \
	X(sc_nvrtc_result, nvrtcGetProgramLog, (sc_nvrtc_program prog, char *log))

#define SC_NVRTC_OPTIONAL(X) \
	X(sc_nvrtc_result, nvrtcGetCUBINSize, (sc_nvrtc_program prog, size_t *size)) \
	X(sc_nvrtc_result, nvrtcGetCUBIN, (sc_nvrtc_program prog, char *cubin))

#define SC_FIELD(ret, name, params) ret(*name) params;
#define SC_ALT_FIELD(ret, name, first, params) ret(*name) params;

typedef struct {
	SC_DRIVER_FUNCS(SC_FIELD)
	SC_DRIVER_ALTS(SC_ALT_FIELD)
} sc_driver;

typedef struct {
	SC_BLAS_FUNCS(SC_FIELD)
	SC_BLAS_OPTIONAL(SC_FIELD)
} sc_blas;

typedef struct {
	SC_SOLVER_FUNCS(SC_FIELD)
	SC_SOLVER_OPTIONAL(SC_FIELD)
} sc_solver;

typedef struct {
	SC_NVRTC_FUNCS(SC_FIELD)
	SC_NVRTC_OPTIONAL(SC_FIELD)
} sc_nvrtc;

/* Library kinds for sc_load. */
enum { SC_LIB_DRIVER = 0, SC_LIB_BLAS = 1, SC_LIB_SOLVER = 2, SC_LIB_NVRTC = 3 };

/*
 * sc_open opens a library (RTLD_NOW|RTLD_LOCAL); on failure it returns NULL
 * and copies dlerror's text into err.
 */
void *sc_open(const char *name, char *err, size_t errlen);
void sc_close(void *handle);

/*
 * sc_load fills a freshly allocated table of the given kind from handle.
 * It returns the table, or NULL when a required symbol is missing; missing
 * receives the names of the missing symbols separated by spaces, err the
 * dlerror text of the first. A table is freed with free().
 */
void *sc_load(int kind, void *handle, char *missing, size_t missinglen, char *err, size_t errlen);

/* sc_nsyms and sc_symname list a kind's symbols (the first name tried). */
int sc_nsyms(int kind);
const char *sc_symname(int kind, int i, int *optional);

/* sc_path copies the file name the dynamic linker opened for handle. */
int sc_path(void *handle, char *path, size_t len);

/*
 * sc_driver_version calls cuDriverGetVersion of handle, if it has one (-1
 * if not); it lets a driver that lacks newer entry points be reported as
 * too old rather than as not a CUDA library.
 */
int sc_driver_version(void *handle, int *version);

/* ---- shims: one per call Go makes, checked by the compiler ---- */

/* Driver API. */
static inline sc_result sc_cuGetErrorName(const sc_driver *t, sc_result r, const char **s) { return t->cuGetErrorName(r, s); }
static inline sc_result sc_cuGetErrorString(const sc_driver *t, sc_result r, const char **s) { return t->cuGetErrorString(r, s); }
static inline sc_result sc_cuDriverGetVersion(const sc_driver *t, int *v) { return t->cuDriverGetVersion(v); }
static inline sc_result sc_cuInit(const sc_driver *t, unsigned int flags) { return t->cuInit(flags); }
static inline sc_result sc_cuDeviceGetCount(const sc_driver *t, int *n) { return t->cuDeviceGetCount(n); }
static inline sc_result sc_cuDeviceGet(const sc_driver *t, sc_device *d, int ordinal) { return t->cuDeviceGet(d, ordinal); }
static inline sc_result sc_cuDeviceGetName(const sc_driver *t, char *name, int len, sc_device d) { return t->cuDeviceGetName(name, len, d); }
static inline sc_result sc_cuDeviceTotalMem(const sc_driver *t, size_t *bytes, sc_device d) { return t->cuDeviceTotalMem_v2(bytes, d); }
static inline sc_result sc_cuDeviceGetAttribute(const sc_driver *t, int *v, int attr, sc_device d) { return t->cuDeviceGetAttribute(v, (sc_devattr)attr, d); }
static inline sc_result sc_cuDeviceGetPCIBusId(const sc_driver *t, char *id, int len, sc_device d) { return t->cuDeviceGetPCIBusId(id, len, d); }
static inline sc_result sc_cuDeviceCanAccessPeer(const sc_driver *t, int *can, sc_device d, sc_device peer) { return t->cuDeviceCanAccessPeer(can, d, peer); }
static inline sc_result sc_cuDevicePrimaryCtxRetain(const sc_driver *t, sc_context *c, sc_device d) { return t->cuDevicePrimaryCtxRetain(c, d); }
static inline sc_result sc_cuDevicePrimaryCtxRelease(const sc_driver *t, sc_device d) { return t->cuDevicePrimaryCtxRelease_v2(d); }
static inline sc_result sc_cuDevicePrimaryCtxSetFlags(const sc_driver *t, sc_device d, unsigned int flags) { return t->cuDevicePrimaryCtxSetFlags_v2(d, flags); }
static inline sc_result sc_cuCtxSetCurrent(const sc_driver *t, sc_context c) { return t->cuCtxSetCurrent(c); }
static inline sc_result sc_cuCtxGetCurrent(const sc_driver *t, sc_context *c) { return t->cuCtxGetCurrent(c); }
static inline sc_result sc_cuCtxPushCurrent(const sc_driver *t, sc_context c) { return t->cuCtxPushCurrent_v2(c); }
static inline sc_result sc_cuCtxPopCurrent(const sc_driver *t, sc_context *c) { return t->cuCtxPopCurrent_v2(c); }
static inline sc_result sc_cuCtxSynchronize(const sc_driver *t) { return t->cuCtxSynchronize(); }
static inline sc_result sc_cuCtxEnablePeerAccess(const sc_driver *t, sc_context peer) { return t->cuCtxEnablePeerAccess(peer, 0); }
static inline sc_result sc_cuMemAlloc(const sc_driver *t, sc_dptr *p, size_t n) { return t->cuMemAlloc_v2(p, n); }
static inline sc_result sc_cuMemFree(const sc_driver *t, sc_dptr p) { return t->cuMemFree_v2(p); }
static inline sc_result sc_cuMemGetInfo(const sc_driver *t, size_t *free, size_t *total) { return t->cuMemGetInfo_v2(free, total); }
static inline sc_result sc_cuMemHostRegister(const sc_driver *t, void *p, size_t n, unsigned int flags) { return t->cuMemHostRegister_v2(p, n, flags); }
static inline sc_result sc_cuMemHostUnregister(const sc_driver *t, void *p) { return t->cuMemHostUnregister(p); }
static inline sc_result sc_cuMemcpyHtoDAsync(const sc_driver *t, sc_dptr dst, const void *src, size_t n, sc_stream s) { return t->cuMemcpyHtoDAsync_v2(dst, src, n, s); }
static inline sc_result sc_cuMemcpyDtoHAsync(const sc_driver *t, void *dst, sc_dptr src, size_t n, sc_stream s) { return t->cuMemcpyDtoHAsync_v2(dst, src, n, s); }
static inline sc_result sc_cuMemcpyDtoDAsync(const sc_driver *t, sc_dptr dst, sc_dptr src, size_t n, sc_stream s) { return t->cuMemcpyDtoDAsync_v2(dst, src, n, s); }
static inline sc_result sc_cuMemcpyPeerAsync(const sc_driver *t, sc_dptr dst, sc_context dctx, sc_dptr src, sc_context sctx, size_t n, sc_stream s) { return t->cuMemcpyPeerAsync(dst, dctx, src, sctx, n, s); }
static inline sc_result sc_cuMemsetD8Async(const sc_driver *t, sc_dptr dst, unsigned char v, size_t n, sc_stream s) { return t->cuMemsetD8Async(dst, v, n, s); }
static inline sc_result sc_cuStreamCreate(const sc_driver *t, sc_stream *s, unsigned int flags) { return t->cuStreamCreate(s, flags); }
static inline sc_result sc_cuStreamDestroy(const sc_driver *t, sc_stream s) { return t->cuStreamDestroy_v2(s); }
static inline sc_result sc_cuStreamSynchronize(const sc_driver *t, sc_stream s) { return t->cuStreamSynchronize(s); }
static inline sc_result sc_cuStreamQuery(const sc_driver *t, sc_stream s) { return t->cuStreamQuery(s); }
static inline sc_result sc_cuStreamWaitEvent(const sc_driver *t, sc_stream s, sc_event e) { return t->cuStreamWaitEvent(s, e, 0); }
static inline sc_result sc_cuEventCreate(const sc_driver *t, sc_event *e, unsigned int flags) { return t->cuEventCreate(e, flags); }
static inline sc_result sc_cuEventDestroy(const sc_driver *t, sc_event e) { return t->cuEventDestroy_v2(e); }
static inline sc_result sc_cuEventRecord(const sc_driver *t, sc_event e, sc_stream s) { return t->cuEventRecord(e, s); }
static inline sc_result sc_cuEventQuery(const sc_driver *t, sc_event e) { return t->cuEventQuery(e); }
static inline sc_result sc_cuEventSynchronize(const sc_driver *t, sc_event e) { return t->cuEventSynchronize(e); }
static inline sc_result sc_cuEventElapsedTime(const sc_driver *t, float *ms, sc_event a, sc_event b) { return t->cuEventElapsedTime(ms, a, b); }
static inline sc_result sc_cuModuleUnload(const sc_driver *t, sc_module m) { return t->cuModuleUnload(m); }
static inline sc_result sc_cuModuleGetFunction(const sc_driver *t, sc_function *f, sc_module m, const char *name) { return t->cuModuleGetFunction(f, m, name); }
static inline sc_result sc_cuFuncGetAttribute(const sc_driver *t, int *v, int attr, sc_function f) { return t->cuFuncGetAttribute(v, (sc_funcattr)attr, f); }

/*
 * sc_cuModuleLoad loads a module from image (PTX text NUL-terminated, or a
 * cubin), asking the JIT for its error log in log (logsize bytes).
 */
static inline sc_result sc_cuModuleLoad(const sc_driver *t, sc_module *m, const void *image, char *log, unsigned int logsize) {
	sc_jitopt opts[2] = {SC_JIT_ERROR_LOG_BUFFER, SC_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)logsize};
	return t->cuModuleLoadDataEx(m, image, 2, opts, vals);
}

/* sc_cuLaunchKernel launches f; params is the kernel's void** (n entries). */
static inline sc_result sc_cuLaunchKernel(const sc_driver *t, sc_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem, sc_stream s, void **params) {
	return t->cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

/* cuBLAS. Scalars passed by value are read by cuBLAS before it returns
 * (host pointer mode), so they may live on the shim's stack. */
static inline sc_blas_status sc_cublasCreate(const sc_blas *t, sc_blas_handle *h) { return t->cublasCreate_v2(h); }
static inline sc_blas_status sc_cublasDestroy(const sc_blas *t, sc_blas_handle h) { return t->cublasDestroy_v2(h); }
static inline sc_blas_status sc_cublasGetVersion(const sc_blas *t, sc_blas_handle h, int *v) { return t->cublasGetVersion_v2(h, v); }
static inline sc_blas_status sc_cublasGetProperty(const sc_blas *t, int type, int *v) { return t->cublasGetProperty((sc_libprop)type, v); }
static inline sc_blas_status sc_cublasSetStream(const sc_blas *t, sc_blas_handle h, sc_stream s) { return t->cublasSetStream_v2(h, s); }
static inline sc_blas_status sc_cublasSetPointerMode(const sc_blas *t, sc_blas_handle h, int mode) { return t->cublasSetPointerMode_v2(h, (sc_blas_ptrmode)mode); }
static inline sc_blas_status sc_cublasSscal(const sc_blas *t, sc_blas_handle h, int n, float alpha, sc_dptr x, int incx) { return t->cublasSscal_v2(h, n, &alpha, (float *)x, incx); }
static inline sc_blas_status sc_cublasDscal(const sc_blas *t, sc_blas_handle h, int n, double alpha, sc_dptr x, int incx) { return t->cublasDscal_v2(h, n, &alpha, (double *)x, incx); }
static inline sc_blas_status sc_cublasSaxpy(const sc_blas *t, sc_blas_handle h, int n, float alpha, sc_dptr x, int incx, sc_dptr y, int incy) { return t->cublasSaxpy_v2(h, n, &alpha, (const float *)x, incx, (float *)y, incy); }
static inline sc_blas_status sc_cublasDaxpy(const sc_blas *t, sc_blas_handle h, int n, double alpha, sc_dptr x, int incx, sc_dptr y, int incy) { return t->cublasDaxpy_v2(h, n, &alpha, (const double *)x, incx, (double *)y, incy); }
static inline sc_blas_status sc_cublasSdot(const sc_blas *t, sc_blas_handle h, int n, sc_dptr x, int incx, sc_dptr y, int incy, sc_dptr result) { return t->cublasSdot_v2(h, n, (const float *)x, incx, (const float *)y, incy, (float *)result); }
static inline sc_blas_status sc_cublasDdot(const sc_blas *t, sc_blas_handle h, int n, sc_dptr x, int incx, sc_dptr y, int incy, sc_dptr result) { return t->cublasDdot_v2(h, n, (const double *)x, incx, (const double *)y, incy, (double *)result); }
static inline sc_blas_status sc_cublasSgemm(const sc_blas *t, sc_blas_handle h, int ta, int tb, int m, int n, int k, float alpha, sc_dptr A, int lda, sc_dptr B, int ldb, float beta, sc_dptr C, int ldc) {
	return t->cublasSgemm_v2(h, (sc_blas_op)ta, (sc_blas_op)tb, m, n, k, &alpha, (const float *)A, lda, (const float *)B, ldb, &beta, (float *)C, ldc);
}
static inline sc_blas_status sc_cublasDgemm(const sc_blas *t, sc_blas_handle h, int ta, int tb, int m, int n, int k, double alpha, sc_dptr A, int lda, sc_dptr B, int ldb, double beta, sc_dptr C, int ldc) {
	return t->cublasDgemm_v2(h, (sc_blas_op)ta, (sc_blas_op)tb, m, n, k, &alpha, (const double *)A, lda, (const double *)B, ldb, &beta, (double *)C, ldc);
}
static inline sc_blas_status sc_cublasSsyrk(const sc_blas *t, sc_blas_handle h, int uplo, int trans, int n, int k, float alpha, sc_dptr A, int lda, float beta, sc_dptr C, int ldc) {
	return t->cublasSsyrk_v2(h, (sc_blas_fill)uplo, (sc_blas_op)trans, n, k, &alpha, (const float *)A, lda, &beta, (float *)C, ldc);
}
static inline sc_blas_status sc_cublasDsyrk(const sc_blas *t, sc_blas_handle h, int uplo, int trans, int n, int k, double alpha, sc_dptr A, int lda, double beta, sc_dptr C, int ldc) {
	return t->cublasDsyrk_v2(h, (sc_blas_fill)uplo, (sc_blas_op)trans, n, k, &alpha, (const double *)A, lda, &beta, (double *)C, ldc);
}
static inline sc_blas_status sc_cublasStrsm(const sc_blas *t, sc_blas_handle h, int side, int uplo, int trans, int diag, int m, int n, float alpha, sc_dptr A, int lda, sc_dptr B, int ldb) {
	return t->cublasStrsm_v2(h, (sc_blas_side)side, (sc_blas_fill)uplo, (sc_blas_op)trans, (sc_blas_diag)diag, m, n, &alpha, (const float *)A, lda, (float *)B, ldb);
}
static inline sc_blas_status sc_cublasDtrsm(const sc_blas *t, sc_blas_handle h, int side, int uplo, int trans, int diag, int m, int n, double alpha, sc_dptr A, int lda, sc_dptr B, int ldb) {
	return t->cublasDtrsm_v2(h, (sc_blas_side)side, (sc_blas_fill)uplo, (sc_blas_op)trans, (sc_blas_diag)diag, m, n, &alpha, (const double *)A, lda, (double *)B, ldb);
}

/* cuSOLVER. */
static inline sc_solver_status sc_cusolverDnCreate(const sc_solver *t, sc_solver_handle *h) { return t->cusolverDnCreate(h); }
static inline sc_solver_status sc_cusolverDnDestroy(const sc_solver *t, sc_solver_handle h) { return t->cusolverDnDestroy(h); }
static inline sc_solver_status sc_cusolverGetProperty(const sc_solver *t, int type, int *v) { return t->cusolverGetProperty((sc_libprop)type, v); }
static inline sc_solver_status sc_cusolverDnSetStream(const sc_solver *t, sc_solver_handle h, sc_stream s) { return t->cusolverDnSetStream(h, s); }
static inline sc_solver_status sc_cusolverDnSpotrfBufferSize(const sc_solver *t, sc_solver_handle h, int uplo, int n, sc_dptr A, int lda, int *lwork) { return t->cusolverDnSpotrf_bufferSize(h, (sc_blas_fill)uplo, n, (float *)A, lda, lwork); }
static inline sc_solver_status sc_cusolverDnDpotrfBufferSize(const sc_solver *t, sc_solver_handle h, int uplo, int n, sc_dptr A, int lda, int *lwork) { return t->cusolverDnDpotrf_bufferSize(h, (sc_blas_fill)uplo, n, (double *)A, lda, lwork); }
static inline sc_solver_status sc_cusolverDnSpotrf(const sc_solver *t, sc_solver_handle h, int uplo, int n, sc_dptr A, int lda, sc_dptr work, int lwork, sc_dptr info) { return t->cusolverDnSpotrf(h, (sc_blas_fill)uplo, n, (float *)A, lda, (float *)work, lwork, (int *)info); }
static inline sc_solver_status sc_cusolverDnDpotrf(const sc_solver *t, sc_solver_handle h, int uplo, int n, sc_dptr A, int lda, sc_dptr work, int lwork, sc_dptr info) { return t->cusolverDnDpotrf(h, (sc_blas_fill)uplo, n, (double *)A, lda, (double *)work, lwork, (int *)info); }

/* NVRTC. */
static inline const char *sc_nvrtcGetErrorString(const sc_nvrtc *t, int r) { return t->nvrtcGetErrorString((sc_nvrtc_result)r); }
static inline sc_nvrtc_result sc_nvrtcVersion(const sc_nvrtc *t, int *major, int *minor) { return t->nvrtcVersion(major, minor); }
static inline sc_nvrtc_result sc_nvrtcCreateProgram(const sc_nvrtc *t, sc_nvrtc_program *p, const char *src, const char *name) { return t->nvrtcCreateProgram(p, src, name, 0, NULL, NULL); }
static inline sc_nvrtc_result sc_nvrtcDestroyProgram(const sc_nvrtc *t, sc_nvrtc_program *p) { return t->nvrtcDestroyProgram(p); }
static inline sc_nvrtc_result sc_nvrtcCompileProgram(const sc_nvrtc *t, sc_nvrtc_program p, int n, char **opts) { return t->nvrtcCompileProgram(p, n, (const char *const *)opts); }
static inline sc_nvrtc_result sc_nvrtcGetPTXSize(const sc_nvrtc *t, sc_nvrtc_program p, size_t *n) { return t->nvrtcGetPTXSize(p, n); }
static inline sc_nvrtc_result sc_nvrtcGetPTX(const sc_nvrtc *t, sc_nvrtc_program p, char *out) { return t->nvrtcGetPTX(p, out); }
static inline sc_nvrtc_result sc_nvrtcGetCUBINSize(const sc_nvrtc *t, sc_nvrtc_program p, size_t *n) { return t->nvrtcGetCUBINSize(p, n); }
static inline sc_nvrtc_result sc_nvrtcGetCUBIN(const sc_nvrtc *t, sc_nvrtc_program p, char *out) { return t->nvrtcGetCUBIN(p, out); }
static inline sc_nvrtc_result sc_nvrtcGetProgramLogSize(const sc_nvrtc *t, sc_nvrtc_program p, size_t *n) { return t->nvrtcGetProgramLogSize(p, n); }
static inline sc_nvrtc_result sc_nvrtcGetProgramLog(const sc_nvrtc *t, sc_nvrtc_program p, char *out) { return t->nvrtcGetProgramLog(p, out); }

#endif
