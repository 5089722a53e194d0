/*
 * abicheck.c: compile-time check of ../cushim.h against NVIDIA's headers.
 * It is not part of the build (testdata is ignored by go build). TestABI
 * compiles it wherever CUDA's headers are found ($STARPU_CUDA_INCLUDE or
 * /usr/local/cuda/include); by hand:
 *
 *	cc -std=c11 -fsyntax-only -Werror -Wall -I/usr/local/cuda/include -I.. abicheck.c
 *
 * Every entry point of the package's tables is assigned to a pointer of
 * the package's own type (so a parameter or return type that differs from
 * the header's prototype is an incompatible-pointer error), and every
 * constant the package hard-codes is compared with the header's.
 */
#include <cuda.h>
#include <cublas_v2.h>
#include <cusolverDn.h>
#include <nvrtc.h>

/* Make the package's enum stand-ins the real enum types. */
typedef CUresult sc_result;
typedef CUdevice_attribute sc_devattr;
typedef CUfunction_attribute sc_funcattr;
typedef CUjit_option sc_jitopt;
typedef cublasStatus_t sc_blas_status;
typedef cublasOperation_t sc_blas_op;
typedef cublasFillMode_t sc_blas_fill;
typedef cublasSideMode_t sc_blas_side;
typedef cublasDiagType_t sc_blas_diag;
typedef cublasPointerMode_t sc_blas_ptrmode;
typedef cusolverStatus_t sc_solver_status;
typedef nvrtcResult sc_nvrtc_result;
typedef libraryPropertyType sc_libprop;
#define SC_VERIFY 1
#include "cushim.h"

#define CHECK(ret, name, params) { ret(*p) params = name; (void)p; }
/* Entry points with two names: headers from 12.8 on declare the first. */
#if CUDA_VERSION >= 12080
#define CHECK_ALT(ret, name, first, params) CHECK(ret, first, params)
#else
#define CHECK_ALT(ret, name, first, params) CHECK(ret, name, params)
#endif

void check_prototypes(void) {
	SC_DRIVER_FUNCS(CHECK)
	SC_DRIVER_ALTS(CHECK_ALT)
	SC_BLAS_FUNCS(CHECK)
	SC_BLAS_OPTIONAL(CHECK)
	SC_SOLVER_FUNCS(CHECK)
	SC_SOLVER_OPTIONAL(CHECK)
	SC_NVRTC_FUNCS(CHECK)
	SC_NVRTC_OPTIONAL(CHECK)
}

/* Handle and pointer types. */
_Static_assert(sizeof(CUdeviceptr) == sizeof(sc_dptr), "CUdeviceptr");
_Static_assert(sizeof(CUdevice) == sizeof(sc_device), "CUdevice");
_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult is int-sized");
_Static_assert(sizeof(cublasStatus_t) == sizeof(int), "cublasStatus_t is int-sized");
_Static_assert(sizeof(cusolverStatus_t) == sizeof(int), "cusolverStatus_t is int-sized");
_Static_assert(sizeof(nvrtcResult) == sizeof(int), "nvrtcResult is int-sized");
void check_handles(void) {
	CUcontext c = (sc_context)0; (void)c;
	CUstream s = (sc_stream)0; (void)s;
	cudaStream_t cs = (sc_stream)0; (void)cs;
	CUevent e = (sc_event)0; (void)e;
	CUmodule m = (sc_module)0; (void)m;
	CUfunction f = (sc_function)0; (void)f;
	cublasHandle_t b = (sc_blas_handle)0; (void)b;
	cusolverDnHandle_t so = (sc_solver_handle)0; (void)so;
	nvrtcProgram p = (sc_nvrtc_program)0; (void)p;
}

/* Constants in cushim.h. */
_Static_assert(SC_CUDA_SUCCESS == CUDA_SUCCESS, "");
_Static_assert(SC_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "");
_Static_assert(SC_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "");
_Static_assert(SC_JIT_INFO_LOG_BUFFER == CU_JIT_INFO_LOG_BUFFER, "");
_Static_assert(SC_JIT_INFO_LOG_BUFFER_SIZE_BYTES == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
_Static_assert(SC_JIT_ERROR_LOG_BUFFER == CU_JIT_ERROR_LOG_BUFFER, "");
_Static_assert(SC_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "");
_Static_assert(SC_BLAS_POINTER_MODE_HOST == CUBLAS_POINTER_MODE_HOST, "");
_Static_assert(SC_BLAS_POINTER_MODE_DEVICE == CUBLAS_POINTER_MODE_DEVICE, "");
_Static_assert(SC_MAJOR_VERSION == MAJOR_VERSION, "");
_Static_assert(SC_MINOR_VERSION == MINOR_VERSION, "");
_Static_assert(SC_PATCH_LEVEL == PATCH_LEVEL, "");

/*
 * The constants of the Go API (cu.AttrComputeCapabilityMajor,
 * cu.StreamNonBlocking, the status name tables...) are checked by a header
 * of static assertions that TestABI writes from the package's own values
 * and includes here through SC_GO_CONSTS.
 */
#ifdef SC_GO_CONSTS
#include SC_GO_CONSTS
#endif
