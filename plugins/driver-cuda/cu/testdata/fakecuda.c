/*
 * fakecuda.c: a stand-in for libcuda, cuBLAS, cuSOLVER and NVRTC, for
 * testing the package on machines without a GPU. "Device memory" is host
 * memory (a CUdeviceptr is a malloc'd address) and every asynchronous call
 * completes before it returns, so the package's GPU tests can run against
 * it and check that each Go call reaches the right C entry point with its
 * arguments in the right places. Like the real libraries it validates
 * arguments (leading dimensions, pointer modes, a current context).
 *
 * The test compiles it into one shared library, with weak stubs returning
 * an error for the entry points not defined here (and, with
 * -DFAKE_OLD_DRIVER, without two entry points an old driver lacks). Environment variables,
 * read at each call: CUDA_FAKE_VERSION (default 13000), CUDA_FAKE_INIT
 * (cuInit's result, default 0), CUDA_FAKE_DEVICES (default 1),
 * CUDA_FAKE_PEER (0: no device can access another's memory; default 1:
 * every pair can) and CUDA_FAKE_LOG (a file to which the calls that hold
 * or move device memory append a line each: "alloc DEV BYTES PTR",
 * "free PTR", "htod DEV BYTES", "dtoh DEV BYTES", "dtod DEV BYTES",
 * "peer SRCDEV DSTDEV BYTES", "enablepeer DEV PEERDEV", so that tests
 * count what a driver asked of the GPU, from any process). Their CUDA_
 * prefix is one the runtime passes on to plugin processes.
 *
 * Each allocation remembers its device: a device-to-device copy must
 * stay on the current context's device (or one it enabled peer access
 * to), and a peer copy must name the contexts its pointers belong to.
 */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cushim.h"

static int env(const char *name, int def) {
	const char *v = getenv(name);
	return v != NULL && *v != 0 ? atoi(v) : def;
}

/* note appends a line to $CUDA_FAKE_LOG; one write(2) with O_APPEND, so
 * lines from several threads or processes do not mix. */
static void note(const char *fmt, ...) {
	const char *path = getenv("CUDA_FAKE_LOG");
	if (path == NULL || *path == 0) {
		return;
	}
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof line - 1) {
		return;
	}
	line[n++] = '\n';
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd < 0) {
		return;
	}
	ssize_t w = write(fd, line, (size_t)n);
	(void)w;
	close(fd);
}

/* The live allocations and their devices. */
static pthread_mutex_t allocmu = PTHREAD_MUTEX_INITIALIZER;
static struct allocation {
	uintptr_t p;
	size_t n;
	int dev;
} *allocs;
static size_t nallocs, capallocs;

static void remember(uintptr_t p, size_t n, int dev) {
	pthread_mutex_lock(&allocmu);
	if (nallocs == capallocs) {
		capallocs = capallocs ? 2 * capallocs : 64;
		allocs = realloc(allocs, capallocs * sizeof *allocs);
	}
	allocs[nallocs++] = (struct allocation){p, n, dev};
	pthread_mutex_unlock(&allocmu);
}

static void forget(uintptr_t p) {
	pthread_mutex_lock(&allocmu);
	for (size_t i = 0; i < nallocs; i++) {
		if (allocs[i].p == p) {
			allocs[i] = allocs[--nallocs];
			break;
		}
	}
	pthread_mutex_unlock(&allocmu);
}

/* devof is the device of the allocation holding [p, p+n), -1 if none. */
static int devof(sc_dptr p, size_t n) {
	int dev = -1;
	pthread_mutex_lock(&allocmu);
	for (size_t i = 0; i < nallocs; i++) {
		if (p >= allocs[i].p && n <= allocs[i].n && p - allocs[i].p <= allocs[i].n - n) {
			dev = allocs[i].dev;
			break;
		}
	}
	pthread_mutex_unlock(&allocmu);
	return dev;
}

/* ---- driver API ---- */

static const struct {
	int code;
	const char *name, *text;
} names[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	{712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	{713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	{801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int lookup(sc_result r) {
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (names[i].code == r) {
			return (int)i;
		}
	}
	return -1;
}

sc_result cuGetErrorName(sc_result r, const char **s) {
	int i = lookup(r);
	if (i < 0) {
		*s = NULL;
		return 1;
	}
	*s = names[i].name;
	return 0;
}

sc_result cuGetErrorString(sc_result r, const char **s) {
	int i = lookup(r);
	if (i < 0) {
		*s = NULL;
		return 1;
	}
	*s = names[i].text;
	return 0;
}

sc_result cuDriverGetVersion(int *v) {
	*v = env("CUDA_FAKE_VERSION", 13000);
	return 0;
}

static int initialized;

sc_result cuInit(unsigned int flags) {
	if (flags != 0) {
		return 1;
	}
	int r = env("CUDA_FAKE_INIT", 0);
	initialized = r == 0;
	return r;
}

static int ndevices(void) { return env("CUDA_FAKE_DEVICES", 1); }

sc_result cuDeviceGetCount(int *n) {
	if (!initialized) {
		return 3;
	}
	*n = ndevices();
	return 0;
}

static int baddev(sc_device d) { return !initialized || d < 0 || d >= ndevices(); }

sc_result cuDeviceGet(sc_device *d, int ordinal) {
	if (baddev(ordinal)) {
		return initialized ? 101 : 3;
	}
	*d = ordinal;
	return 0;
}

sc_result cuDeviceGetName(char *name, int len, sc_device d) {
	if (baddev(d)) {
		return 101;
	}
	snprintf(name, (size_t)len, "Fake GPU %d", d);
	return 0;
}

sc_result cuDeviceTotalMem_v2(size_t *bytes, sc_device d) {
	if (baddev(d)) {
		return 101;
	}
	*bytes = ((size_t)80 << 30) + (size_t)d;
	return 0;
}

sc_result cuDeviceGetAttribute(int *v, sc_devattr attr, sc_device d) {
	if (baddev(d)) {
		return 101;
	}
	switch (attr) {
	case 1: /* max threads per block */
		*v = 1024;
		break;
	case 10: /* warp size */
		*v = 32;
		break;
	case 16: /* multiprocessors */
		*v = 132;
		break;
	case 75: /* compute capability */
		*v = 9;
		break;
	case 76:
		*v = 0;
		break;
	default:
		*v = 1;
	}
	return 0;
}

sc_result cuDeviceGetPCIBusId(char *id, int len, sc_device d) {
	if (baddev(d)) {
		return 101;
	}
	snprintf(id, (size_t)len, "0000:%02x:00.0", 0x65 + d);
	return 0;
}

sc_result cuDeviceCanAccessPeer(int *can, sc_device d, sc_device peer) {
	if (baddev(d) || baddev(peer)) {
		return 101;
	}
	*can = d != peer && env("CUDA_FAKE_PEER", 1) != 0;
	return 0;
}

struct CUctx_st {
	int dev, retained, peer[8];
};
static struct CUctx_st contexts[8];
static __thread struct CUctx_st *ctxstack[8];
static __thread int ctxdepth; /* ctxstack[ctxdepth-1] is current */

static struct CUctx_st *cur(void) { return ctxdepth > 0 ? ctxstack[ctxdepth - 1] : NULL; }

sc_result cuDevicePrimaryCtxRetain(sc_context *c, sc_device d) {
	if (baddev(d) || d >= 8) {
		return 101;
	}
	contexts[d].dev = d;
	contexts[d].retained++;
	*c = &contexts[d];
	return 0;
}

/* FAKE_OLD_DRIVER leaves out two entry points added in CUDA 11. */
#ifndef FAKE_OLD_DRIVER
sc_result cuDevicePrimaryCtxRelease_v2(sc_device d) {
	if (baddev(d) || contexts[d].retained == 0) {
		return 101;
	}
	contexts[d].retained--;
	return 0;
}
#endif

sc_result cuDevicePrimaryCtxSetFlags_v2(sc_device d, unsigned int flags) {
	return baddev(d) || flags > 7 ? 1 : 0;
}

sc_result cuCtxSetCurrent(sc_context c) {
	if (c == NULL) {
		if (ctxdepth > 0) {
			ctxdepth--;
		}
		return 0;
	}
	if (ctxdepth == 0) {
		ctxdepth = 1;
	}
	ctxstack[ctxdepth - 1] = c;
	return 0;
}

sc_result cuCtxGetCurrent(sc_context *c) {
	*c = cur();
	return 0;
}

sc_result cuCtxPushCurrent_v2(sc_context c) {
	if (c == NULL || ctxdepth == 8) {
		return 1;
	}
	ctxstack[ctxdepth++] = c;
	return 0;
}

sc_result cuCtxPopCurrent_v2(sc_context *c) {
	if (ctxdepth == 0) {
		return 201;
	}
	*c = ctxstack[--ctxdepth];
	return 0;
}

sc_result cuCtxSynchronize(void) { return cur() ? 0 : 201; }

sc_result cuCtxEnablePeerAccess(sc_context peer, unsigned int flags) {
	struct CUctx_st *c = cur();
	if (c == NULL) {
		return 201;
	}
	if (peer == NULL || flags != 0 || peer == c) {
		return 1;
	}
	if (c->peer[peer->dev]) {
		return 704;
	}
	c->peer[peer->dev] = 1;
	note("enablepeer %d %d", c->dev, peer->dev);
	return 0;
}

sc_result cuMemAlloc_v2(sc_dptr *p, size_t n) {
	if (cur() == NULL) {
		return 201;
	}
	if (n == 0) {
		return 1;
	}
	void *m = malloc(n);
	if (m == NULL) {
		return 2;
	}
	*p = (sc_dptr)(uintptr_t)m;
	remember((uintptr_t)m, n, cur()->dev);
	note("alloc %d %zu %#llx", cur()->dev, n, *p);
	return 0;
}

sc_result cuMemFree_v2(sc_dptr p) {
	if (p != 0) {
		forget((uintptr_t)p);
		note("free %#llx", p);
	}
	free((void *)(uintptr_t)p);
	return 0;
}

sc_result cuMemGetInfo_v2(size_t *free, size_t *total) {
	if (cur() == NULL) {
		return 201;
	}
	*total = (size_t)80 << 30;
	*free = (size_t)79 << 30;
	return 0;
}

static struct {
	void *p;
	size_t n;
} registered[64];

#ifndef FAKE_OLD_DRIVER
sc_result cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
	if (p == NULL || n == 0 || flags > 15) {
		return 1;
	}
	for (int i = 0; i < 64; i++) {
		if (registered[i].p != NULL && (char *)p < (char *)registered[i].p + registered[i].n &&
		    (char *)registered[i].p < (char *)p + n) {
			return 712;
		}
	}
	for (int i = 0; i < 64; i++) {
		if (registered[i].p == NULL) {
			registered[i].p = p;
			registered[i].n = n;
			return 0;
		}
	}
	return 2;
}
#endif

sc_result cuMemHostUnregister(void *p) {
	for (int i = 0; i < 64; i++) {
		if (registered[i].p == p) {
			registered[i].p = NULL;
			return 0;
		}
	}
	return 713;
}

struct CUstream_st {
	unsigned int flags;
};

sc_result cuMemcpyHtoDAsync_v2(sc_dptr dst, const void *src, size_t n, sc_stream s) {
	(void)s;
	memcpy((void *)(uintptr_t)dst, src, n);
	note("htod %d %zu", devof(dst, n), n);
	return 0;
}

sc_result cuMemcpyDtoHAsync_v2(void *dst, sc_dptr src, size_t n, sc_stream s) {
	(void)s;
	memcpy(dst, (void *)(uintptr_t)src, n);
	note("dtoh %d %zu", devof(src, n), n);
	return 0;
}

/* reachable: the current context may address memory of device dev. */
static int reachable(int dev) {
	struct CUctx_st *c = cur();
	return c != NULL && dev >= 0 && (dev == c->dev || (dev < 8 && c->peer[dev]));
}

sc_result cuMemcpyDtoDAsync_v2(sc_dptr dst, sc_dptr src, size_t n, sc_stream s) {
	(void)s;
	if (n > 0 && (!reachable(devof(dst, n)) || !reachable(devof(src, n)))) {
		return 1;
	}
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	note("dtod %d %zu", devof(dst, n), n);
	return 0;
}

sc_result cuMemcpyPeerAsync(sc_dptr dst, sc_context dctx, sc_dptr src, sc_context sctx, size_t n, sc_stream s) {
	(void)s;
	if (dctx == NULL || sctx == NULL || cur() == NULL) {
		return 201;
	}
	if (n > 0 && (devof(dst, n) != dctx->dev || devof(src, n) != sctx->dev)) {
		return 1;
	}
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	note("peer %d %d %zu", sctx->dev, dctx->dev, n);
	return 0;
}

sc_result cuMemsetD8Async(sc_dptr dst, unsigned char v, size_t n, sc_stream s) {
	(void)s;
	memset((void *)(uintptr_t)dst, v, n);
	return 0;
}

sc_result cuStreamCreate(sc_stream *s, unsigned int flags) {
	if (cur() == NULL) {
		return 201;
	}
	if (flags > 1) {
		return 1;
	}
	*s = calloc(1, sizeof **s);
	(*s)->flags = flags;
	return 0;
}

sc_result cuStreamDestroy_v2(sc_stream s) {
	if (s == NULL) {
		return 400;
	}
	free(s);
	return 0;
}

sc_result cuStreamSynchronize(sc_stream s) {
	(void)s;
	return 0;
}

sc_result cuStreamQuery(sc_stream s) {
	(void)s;
	return 0;
}

struct CUevent_st {
	unsigned int flags;
	int recorded;
	double ms;
};

sc_result cuStreamWaitEvent(sc_stream s, sc_event e, unsigned int flags) {
	(void)s;
	return e == NULL || flags != 0 ? 400 : 0;
}

sc_result cuEventCreate(sc_event *e, unsigned int flags) {
	if (cur() == NULL) {
		return 201;
	}
	if (flags > 7) {
		return 1;
	}
	*e = calloc(1, sizeof **e);
	(*e)->flags = flags;
	return 0;
}

sc_result cuEventDestroy_v2(sc_event e) {
	if (e == NULL) {
		return 400;
	}
	free(e);
	return 0;
}

sc_result cuEventRecord(sc_event e, sc_stream s) {
	(void)s;
	if (e == NULL) {
		return 400;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	e->recorded = 1;
	e->ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
	return 0;
}

sc_result cuEventQuery(sc_event e) { return e == NULL ? 400 : 0; }
sc_result cuEventSynchronize(sc_event e) { return e == NULL ? 400 : 0; }

sc_result cuEventElapsedTime_v2(float *ms, sc_event a, sc_event b) {
	if (a == NULL || b == NULL || (a->flags & 2) || (b->flags & 2)) {
		return 400;
	}
	if (!a->recorded || !b->recorded) {
		return 400;
	}
	*ms = (float)(b->ms - a->ms);
	return 0;
}

/* Modules know two kernels: addone(float *x, unsigned n) and
 * scal(float *x, int n, float a). */
struct CUmod_st {
	int addone, scal;
};
struct CUfunc_st {
	int kind;
};
static struct CUfunc_st kaddone = {1}, kscal = {2};

sc_result cuModuleLoadDataEx(sc_module *m, const void *image, unsigned int n, sc_jitopt *opts, void **vals) {
	if (cur() == NULL) {
		return 201;
	}
	char *log = NULL;
	unsigned int logsize = 0;
	int sizeidx = -1;
	for (unsigned int i = 0; i < n; i++) {
		if (opts[i] == SC_JIT_ERROR_LOG_BUFFER) {
			log = vals[i];
		} else if (opts[i] == SC_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
			logsize = (unsigned int)(uintptr_t)vals[i];
			sizeidx = (int)i;
		}
	}
	const char *text = image;
	int addone = strstr(text, ".entry addone(") != NULL;
	int scal = strstr(text, ".entry scal(") != NULL || strncmp(text, "FAKECUBIN scal", 14) == 0;
	if (strstr(text, "bogus") != NULL || (!addone && !scal)) {
		if (log != NULL && logsize > 0) {
			int k = snprintf(log, logsize, "ptxas application ptx input, line 4; error   : fake JIT rejects this PTX");
			if (sizeidx >= 0) {
				vals[sizeidx] = (void *)(uintptr_t)(k + 1);
			}
		}
		return 218;
	}
	*m = calloc(1, sizeof **m);
	(*m)->addone = addone;
	(*m)->scal = scal;
	return 0;
}

sc_result cuModuleUnload(sc_module m) {
	if (m == NULL) {
		return 400;
	}
	free(m);
	return 0;
}

sc_result cuModuleGetFunction(sc_function *f, sc_module m, const char *name) {
	if (m == NULL) {
		return 400;
	}
	if (m->addone && strcmp(name, "addone") == 0) {
		*f = &kaddone;
		return 0;
	}
	if (m->scal && strcmp(name, "scal") == 0) {
		*f = &kscal;
		return 0;
	}
	return 500;
}

sc_result cuFuncGetAttribute(int *v, sc_funcattr a, sc_function f) {
	if (f == NULL) {
		return 400;
	}
	*v = a == 0 ? 1024 : 0;
	return 0;
}

sc_result cuLaunchKernel(sc_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                         unsigned int by, unsigned int bz, unsigned int shmem, sc_stream s, void **params, void **extra) {
	(void)s;
	if (f == NULL || params == NULL || extra != NULL || shmem > 48 * 1024 || bx * by * bz > 1024 ||
	    gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) {
		return 1;
	}
	size_t threads = (size_t)gx * gy * gz * bx * by * bz;
	float *x = (float *)(uintptr_t) * (sc_dptr *)params[0];
	if (f->kind == 1) {
		unsigned int n = *(unsigned int *)params[1];
		for (size_t i = 0; i < threads && i < n; i++) {
			x[i] += 1;
		}
	} else {
		int n = *(int *)params[1];
		float a = *(float *)params[2];
		for (size_t i = 0; i < threads && i < (size_t)n; i++) {
			x[i] *= a;
		}
	}
	return 0;
}

/* ---- cuBLAS ---- */

struct cublasContext {
	sc_stream stream;
	int mode;
};

#define BLAS_INVALID 7

sc_blas_status cublasCreate_v2(sc_blas_handle *h) {
	if (cur() == NULL) {
		return 1;
	}
	*h = calloc(1, sizeof **h);
	return 0;
}

sc_blas_status cublasDestroy_v2(sc_blas_handle h) {
	if (h == NULL) {
		return 1;
	}
	free(h);
	return 0;
}

sc_blas_status cublasGetVersion_v2(sc_blas_handle h, int *v) {
	(void)h;
	*v = 130000;
	return 0;
}

sc_blas_status cublasGetProperty(sc_libprop t, int *v) {
	*v = t == 0 ? 13 : 0;
	return 0;
}

sc_blas_status cublasSetStream_v2(sc_blas_handle h, sc_stream s) {
	if (h == NULL) {
		return 1;
	}
	h->stream = s;
	return 0;
}

sc_blas_status cublasSetPointerMode_v2(sc_blas_handle h, sc_blas_ptrmode m) {
	if (h == NULL) {
		return 1;
	}
	if (m != 0 && m != 1) {
		return BLAS_INVALID;
	}
	h->mode = m;
	return 0;
}

static double ld(const void *p, long i, int f32) { return f32 ? ((const float *)p)[i] : ((const double *)p)[i]; }
static void st(void *p, long i, double v, int f32) {
	if (f32) {
		((float *)p)[i] = (float)v;
	} else {
		((double *)p)[i] = v;
	}
}
static int imax(int a, int b) { return a > b ? a : b; }

/* Routines taking scalars by value through host pointers need host mode
 * (device mode would make the real cuBLAS read a host address on the GPU). */
static sc_blas_status host(sc_blas_handle h) { return h == NULL ? 1 : h->mode == 0 ? 0 : BLAS_INVALID; }

static sc_blas_status scal(sc_blas_handle h, int n, double a, void *x, int incx, int f32) {
	sc_blas_status r = host(h);
	if (r != 0 || n < 0 || incx <= 0) {
		return r ? r : BLAS_INVALID;
	}
	for (long i = 0; i < n; i++) {
		st(x, i * incx, a * ld(x, i * incx, f32), f32);
	}
	return 0;
}
sc_blas_status cublasSscal_v2(sc_blas_handle h, int n, const float *a, float *x, int incx) { return scal(h, n, *a, x, incx, 1); }
sc_blas_status cublasDscal_v2(sc_blas_handle h, int n, const double *a, double *x, int incx) { return scal(h, n, *a, x, incx, 0); }

static sc_blas_status axpy(sc_blas_handle h, int n, double a, const void *x, int incx, void *y, int incy, int f32) {
	sc_blas_status r = host(h);
	if (r != 0 || n < 0 || incx <= 0 || incy <= 0) {
		return r ? r : BLAS_INVALID;
	}
	for (long i = 0; i < n; i++) {
		st(y, i * incy, a * ld(x, i * incx, f32) + ld(y, i * incy, f32), f32);
	}
	return 0;
}
sc_blas_status cublasSaxpy_v2(sc_blas_handle h, int n, const float *a, const float *x, int incx, float *y, int incy) {
	return axpy(h, n, *a, x, incx, y, incy, 1);
}
sc_blas_status cublasDaxpy_v2(sc_blas_handle h, int n, const double *a, const double *x, int incx, double *y, int incy) {
	return axpy(h, n, *a, x, incx, y, incy, 0);
}

/* dot must be called in device mode so that it does not wait. */
static sc_blas_status dot(sc_blas_handle h, int n, const void *x, int incx, const void *y, int incy, void *res, int f32) {
	if (h == NULL) {
		return 1;
	}
	if (h->mode != 1 || n < 0) {
		return BLAS_INVALID;
	}
	double s = 0;
	for (long i = 0; i < n; i++) {
		s += ld(x, i * incx, f32) * ld(y, i * incy, f32);
	}
	st(res, 0, s, f32);
	return 0;
}
sc_blas_status cublasSdot_v2(sc_blas_handle h, int n, const float *x, int incx, const float *y, int incy, float *r) {
	return dot(h, n, x, incx, y, incy, r, 1);
}
sc_blas_status cublasDdot_v2(sc_blas_handle h, int n, const double *x, int incx, const double *y, int incy, double *r) {
	return dot(h, n, x, incx, y, incy, r, 0);
}

/* op(A)[i,j] of a column-major A. */
static double opat(const void *a, int lda, int trans, int i, int j, int f32) {
	return trans ? ld(a, (long)j + (long)i * lda, f32) : ld(a, (long)i + (long)j * lda, f32);
}

static sc_blas_status gemm(sc_blas_handle h, int ta, int tb, int m, int n, int k, double alpha, const void *a, int lda,
                           const void *b, int ldb, double beta, void *c, int ldc, int f32) {
	sc_blas_status r = host(h);
	if (r != 0) {
		return r;
	}
	if (ta < 0 || ta > 2 || tb < 0 || tb > 2 || m < 0 || n < 0 || k < 0 || lda < imax(1, ta ? k : m) ||
	    ldb < imax(1, tb ? n : k) || ldc < imax(1, m)) {
		return BLAS_INVALID;
	}
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < m; i++) {
			double s = 0;
			for (int l = 0; l < k; l++) {
				s += opat(a, lda, ta, i, l, f32) * opat(b, ldb, tb, l, j, f32);
			}
			long ci = (long)i + (long)j * ldc;
			st(c, ci, alpha * s + (beta == 0 ? 0 : beta * ld(c, ci, f32)), f32);
		}
	}
	return 0;
}
sc_blas_status cublasSgemm_v2(sc_blas_handle h, sc_blas_op ta, sc_blas_op tb, int m, int n, int k, const float *alpha,
                              const float *a, int lda, const float *b, int ldb, const float *beta, float *c, int ldc) {
	return gemm(h, ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc, 1);
}
sc_blas_status cublasDgemm_v2(sc_blas_handle h, sc_blas_op ta, sc_blas_op tb, int m, int n, int k, const double *alpha,
                              const double *a, int lda, const double *b, int ldb, const double *beta, double *c, int ldc) {
	return gemm(h, ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc, 0);
}

static sc_blas_status syrk(sc_blas_handle h, int uplo, int trans, int n, int k, double alpha, const void *a, int lda,
                           double beta, void *c, int ldc, int f32) {
	sc_blas_status r = host(h);
	if (r != 0) {
		return r;
	}
	if ((uplo != 0 && uplo != 1) || trans < 0 || trans > 2 || n < 0 || k < 0 || lda < imax(1, trans ? k : n) ||
	    ldc < imax(1, n)) {
		return BLAS_INVALID;
	}
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < n; i++) {
			if (uplo == 0 ? i < j : i > j) {
				continue;
			}
			double s = 0;
			for (int l = 0; l < k; l++) {
				s += opat(a, lda, trans, i, l, f32) * opat(a, lda, trans, j, l, f32);
			}
			long ci = (long)i + (long)j * ldc;
			st(c, ci, alpha * s + (beta == 0 ? 0 : beta * ld(c, ci, f32)), f32);
		}
	}
	return 0;
}
sc_blas_status cublasSsyrk_v2(sc_blas_handle h, sc_blas_fill uplo, sc_blas_op trans, int n, int k, const float *alpha,
                              const float *a, int lda, const float *beta, float *c, int ldc) {
	return syrk(h, uplo, trans, n, k, *alpha, a, lda, *beta, c, ldc, 1);
}
sc_blas_status cublasDsyrk_v2(sc_blas_handle h, sc_blas_fill uplo, sc_blas_op trans, int n, int k, const double *alpha,
                              const double *a, int lda, const double *beta, double *c, int ldc) {
	return syrk(h, uplo, trans, n, k, *alpha, a, lda, *beta, c, ldc, 0);
}

/* trsm: op(A) X = alpha B (left) or X op(A) = alpha B (right), B m×n. */
static sc_blas_status trsm(sc_blas_handle h, int side, int uplo, int trans, int diag, int m, int n, double alpha,
                           const void *a, int lda, void *b, int ldb, int f32) {
	sc_blas_status r = host(h);
	if (r != 0) {
		return r;
	}
	int na = side == 0 ? m : n;
	if ((side != 0 && side != 1) || (uplo != 0 && uplo != 1) || trans < 0 || trans > 2 || (diag != 0 && diag != 1) ||
	    m < 0 || n < 0 || lda < imax(1, na) || ldb < imax(1, m)) {
		return BLAS_INVALID;
	}
	/* T is the triangular matrix to solve with: op(A) on the left,
	 * op(A)^T on the right (X op(A) = B  <=>  op(A)^T X^T = B^T). */
	int tt = side == 0 ? trans != 0 : trans == 0;
	int lower = (uplo == 0) != (tt != 0);
	int nrhs = side == 0 ? n : m;
	double *x = malloc(sizeof(double) * (size_t)na);
	for (int c = 0; c < nrhs; c++) {
		for (int i = 0; i < na; i++) {
			long bi = side == 0 ? (long)i + (long)c * ldb : (long)c + (long)i * ldb;
			x[i] = alpha * ld(b, bi, f32);
		}
		for (int step = 0; step < na; step++) {
			int i = lower ? step : na - 1 - step;
			double s = x[i];
			for (int q = 0; q < na; q++) {
				if (q != i && (lower ? q < i : q > i)) {
					s -= opat(a, lda, tt, i, q, f32) * x[q];
				}
			}
			x[i] = diag == 1 ? s : s / opat(a, lda, tt, i, i, f32);
		}
		for (int i = 0; i < na; i++) {
			long bi = side == 0 ? (long)i + (long)c * ldb : (long)c + (long)i * ldb;
			st(b, bi, x[i], f32);
		}
	}
	free(x);
	return 0;
}
sc_blas_status cublasStrsm_v2(sc_blas_handle h, sc_blas_side side, sc_blas_fill uplo, sc_blas_op trans, sc_blas_diag diag,
                              int m, int n, const float *alpha, const float *a, int lda, float *b, int ldb) {
	return trsm(h, side, uplo, trans, diag, m, n, *alpha, a, lda, b, ldb, 1);
}
sc_blas_status cublasDtrsm_v2(sc_blas_handle h, sc_blas_side side, sc_blas_fill uplo, sc_blas_op trans, sc_blas_diag diag,
                              int m, int n, const double *alpha, const double *a, int lda, double *b, int ldb) {
	return trsm(h, side, uplo, trans, diag, m, n, *alpha, a, lda, b, ldb, 0);
}

/* ---- cuSOLVER ---- */

struct cusolverDnContext {
	sc_stream stream;
};

sc_solver_status cusolverDnCreate(sc_solver_handle *h) {
	if (cur() == NULL) {
		return 1;
	}
	*h = calloc(1, sizeof **h);
	return 0;
}

sc_solver_status cusolverDnDestroy(sc_solver_handle h) {
	if (h == NULL) {
		return 1;
	}
	free(h);
	return 0;
}

sc_solver_status cusolverDnSetStream(sc_solver_handle h, sc_stream s) {
	if (h == NULL) {
		return 1;
	}
	h->stream = s;
	return 0;
}

sc_solver_status cusolverGetProperty(sc_libprop t, int *v) {
	*v = t == 0 ? 12 : 0;
	return 0;
}

static sc_solver_status potrf_size(sc_solver_handle h, int uplo, int n, int lda, int *lwork) {
	if (h == NULL) {
		return 1;
	}
	if ((uplo != 0 && uplo != 1) || n < 0 || lda < imax(1, n)) {
		return 3;
	}
	*lwork = n + 7;
	return 0;
}
sc_solver_status cusolverDnSpotrf_bufferSize(sc_solver_handle h, sc_blas_fill uplo, int n, float *a, int lda, int *lwork) {
	(void)a;
	return potrf_size(h, uplo, n, lda, lwork);
}
sc_solver_status cusolverDnDpotrf_bufferSize(sc_solver_handle h, sc_blas_fill uplo, int n, double *a, int lda, int *lwork) {
	(void)a;
	return potrf_size(h, uplo, n, lda, lwork);
}

static sc_solver_status potrf(sc_solver_handle h, int uplo, int n, void *a, int lda, void *work, int lwork, int *info, int f32) {
	int need;
	sc_solver_status r = potrf_size(h, uplo, n, lda, &need);
	if (r != 0) {
		return r;
	}
	if (work == NULL || lwork < need || info == NULL) {
		return 3;
	}
	/* Lower: A = L L^T in the lower triangle; Upper: A = U^T U, U[i][j] =
	 * L[j][i], read and written through the transposed index. */
#define IDX(i, j) (uplo == 0 ? (long)(i) + (long)(j) * lda : (long)(j) + (long)(i) * lda)
	*info = 0;
	for (int j = 0; j < n; j++) {
		double d = ld(a, IDX(j, j), f32);
		for (int q = 0; q < j; q++) {
			double l = ld(a, IDX(j, q), f32);
			d -= l * l;
		}
		if (!(d > 0)) {
			*info = j + 1;
			return 0;
		}
		d = sqrt(d);
		st(a, IDX(j, j), d, f32);
		for (int i = j + 1; i < n; i++) {
			double s = ld(a, IDX(i, j), f32);
			for (int q = 0; q < j; q++) {
				s -= ld(a, IDX(i, q), f32) * ld(a, IDX(j, q), f32);
			}
			st(a, IDX(i, j), s / d, f32);
		}
	}
#undef IDX
	return 0;
}
sc_solver_status cusolverDnSpotrf(sc_solver_handle h, sc_blas_fill uplo, int n, float *a, int lda, float *work, int lwork, int *info) {
	return potrf(h, uplo, n, a, lda, work, lwork, info, 1);
}
sc_solver_status cusolverDnDpotrf(sc_solver_handle h, sc_blas_fill uplo, int n, double *a, int lda, double *work, int lwork, int *info) {
	return potrf(h, uplo, n, a, lda, work, lwork, info, 0);
}

/* ---- NVRTC: "compiles" the test's scal kernel ---- */

struct _nvrtcProgram {
	char *src, *name, *log, *ptx, *cubin;
	size_t cubinsize;
};

static const char *nvrtc_names[] = {"NVRTC_SUCCESS", "NVRTC_ERROR_OUT_OF_MEMORY", "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
                                    "NVRTC_ERROR_INVALID_INPUT", "NVRTC_ERROR_INVALID_PROGRAM", "NVRTC_ERROR_INVALID_OPTION",
                                    "NVRTC_ERROR_COMPILATION"};

const char *nvrtcGetErrorString(sc_nvrtc_result r) {
	return r >= 0 && r < 7 ? nvrtc_names[r] : "NVRTC_ERROR unknown";
}

sc_nvrtc_result nvrtcVersion(int *major, int *minor) {
	*major = 13;
	*minor = 0;
	return 0;
}

sc_nvrtc_result nvrtcCreateProgram(sc_nvrtc_program *p, const char *src, const char *name, int nh, const char *const *h,
                                   const char *const *inc) {
	if (p == NULL || src == NULL || nh != 0 || h != NULL || inc != NULL) {
		return 3;
	}
	*p = calloc(1, sizeof **p);
	(*p)->src = strdup(src);
	(*p)->name = strdup(name != NULL ? name : "default_program");
	return 0;
}

sc_nvrtc_result nvrtcDestroyProgram(sc_nvrtc_program *p) {
	if (p == NULL || *p == NULL) {
		return 4;
	}
	free((*p)->src);
	free((*p)->name);
	free((*p)->log);
	free((*p)->ptx);
	free((*p)->cubin);
	free(*p);
	*p = NULL;
	return 0;
}

sc_nvrtc_result nvrtcCompileProgram(sc_nvrtc_program p, int n, const char *const *opts) {
	if (p == NULL) {
		return 4;
	}
	const char *arch = "compute_52";
	for (int i = 0; i < n; i++) {
		if (strncmp(opts[i], "--gpu-architecture=", 19) == 0) {
			arch = opts[i] + 19;
		} else if (strcmp(opts[i], "-default-device") != 0 && strcmp(opts[i], "--use_fast_math") != 0) {
			return 5;
		}
	}
	char buf[512];
	if (strstr(p->src, "undefined_thing") != NULL) {
		snprintf(buf, sizeof buf, "%s(1): error: identifier \"undefined_thing\" is undefined\n\n1 error detected in the compilation of \"%s\".\n",
		         p->name, p->name);
		p->log = strdup(buf);
		return 6;
	}
	p->log = strdup("");
	if (strncmp(arch, "sm_", 3) == 0) {
		p->cubin = strdup("FAKECUBIN scal");
		p->cubinsize = strlen(p->cubin) + 1;
	} else {
		snprintf(buf, sizeof buf, "//\n// fake PTX for %s\n//\n.version 9.0\n.target sm_%s\n.address_size 64\n\n.visible .entry scal(\n)\n{\n\tret;\n}\n",
		         p->name, arch + 8);
		p->ptx = strdup(buf);
	}
	return 0;
}

sc_nvrtc_result nvrtcGetPTXSize(sc_nvrtc_program p, size_t *n) {
	if (p == NULL || p->ptx == NULL) {
		return 4;
	}
	*n = strlen(p->ptx) + 1;
	return 0;
}

sc_nvrtc_result nvrtcGetPTX(sc_nvrtc_program p, char *out) {
	if (p == NULL || p->ptx == NULL) {
		return 4;
	}
	memcpy(out, p->ptx, strlen(p->ptx) + 1);
	return 0;
}

sc_nvrtc_result nvrtcGetCUBINSize(sc_nvrtc_program p, size_t *n) {
	if (p == NULL) {
		return 4;
	}
	*n = p->cubin != NULL ? p->cubinsize : 0;
	return 0;
}

sc_nvrtc_result nvrtcGetCUBIN(sc_nvrtc_program p, char *out) {
	if (p == NULL || p->cubin == NULL) {
		return 4;
	}
	memcpy(out, p->cubin, p->cubinsize);
	return 0;
}

sc_nvrtc_result nvrtcGetProgramLogSize(sc_nvrtc_program p, size_t *n) {
	if (p == NULL) {
		return 4;
	}
	*n = p->log != NULL ? strlen(p->log) + 1 : 1;
	return 0;
}

sc_nvrtc_result nvrtcGetProgramLog(sc_nvrtc_program p, char *out) {
	if (p == NULL) {
		return 4;
	}
	strcpy(out, p->log != NULL ? p->log : "");
	return 0;
}
