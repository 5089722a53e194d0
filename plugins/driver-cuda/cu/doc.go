// Package cu is a small binding over NVIDIA's CUDA driver API, cuBLAS,
// cuSOLVER and NVRTC that loads the libraries at run time. It holds what
// the CUDA driver plugin needs and no more.
//
// # Why run-time loading
//
// The plugin must build on every machine, CI included, and none of them
// has CUDA: gorgonia.org/cu (v0.9.6) includes cuda.h and links -lcuda at
// compile time, so it needs the toolkit's headers (Debian's
// nvidia-cuda-dev: 774 MB to download), and it has neither pinned host
// memory nor a way to bind cuBLAS to a stream. This package declares the
// few types and prototypes it calls in its own C header (cushim.h: no
// CUDA header is included), opens the libraries with dlopen and resolves
// every entry point with dlsym into a table of function pointers. Go calls
// small C shims that call through the table, so the C compiler checks
// every call against the prototype. Building needs only cgo and -ldl; a
// machine without CUDA gets a clear error at run time.
//
// The prototypes follow cuda.h, cublas_api.h, cusolverDn.h and nvrtc.h
// (CUDA 12.6 and 13.0): handles are pointers to the headers' own struct
// tags, CUdeviceptr is unsigned long long, enums are int. Entry points
// are resolved under the versioned names cuda.h maps to (cuMemAlloc_v2,
// cuMemcpyHtoDAsync_v2, cuStreamDestroy_v2, cuDevicePrimaryCtxRelease_v2,
// cublasSgemm_v2 ...); cuEventElapsedTime is tried as _v2 (CUDA 13's name)
// then plain. testdata/abicheck.c, compiled by TestABI wherever NVIDIA's
// headers are found ($STARPU_CUDA_INCLUDE or /usr/local/cuda/include),
// checks every prototype and every constant of this package against them.
//
// # Loading
//
// Load (or Init, which calls it with the zero Config) opens, once per
// process:
//
//   - the driver API, libcuda.so.1, required (STARPU_CUDA_LIBRARY names
//     another file, a path or a colon-separated list);
//   - cuBLAS (libcublas.so.13, .12, .11, libcublas.so), cuSOLVER
//     (libcusolver.so.12, .11, libcusolver.so) and NVRTC (libnvrtc.so.13,
//     .12, .11, libnvrtc.so), each optional and reported separately in
//     Libraries; STARPU_CUBLAS_LIBRARY, STARPU_CUSOLVER_LIBRARY and
//     STARPU_NVRTC_LIBRARY replace the names, and they are also looked for
//     in STARPU_CUDA_LIBDIR, $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
//     /usr/local/cuda/lib64.
//
// A library that is absent gives a *LoadError listing the names tried and
// dlerror's text ("libcuda.so.1 not found (libcuda.so.1: cannot open
// shared object file: No such file or directory)"); one that opens but
// lacks entry points names the first missing one ("libm.so.6 ... is not a
// usable CUDA driver library: it lacks cuGetErrorName and 45 more entry
// points"); a driver older than Config.MinDriverVersion (default 12.0)
// gives a *VersionError. Probe answers the same questions without changing
// the package's state, for `starpu machine` and the driver's fingerprint:
// the devices (name, memory, compute capability, SMs, PCI bus id) with the
// driver's version, or one exact reason there is none.
//
// # Contexts and threads
//
// The package uses each device's primary context (Device.PrimaryCtxRetain),
// the one cuBLAS, cuSOLVER and the CUDA runtime use too. A CUDA context is
// current per OS thread, and every call that allocates, copies, launches,
// or creates a stream, event, module or library handle acts on the calling
// thread's current context. A goroutine doing GPU work must therefore call
// runtime.LockOSThread, then Context.SetCurrent, and keep to that thread:
// in the driver plugin each worker owns one locked thread and its device's
// context. Device queries (name, memory, attributes) and NVRTC compilation
// need no context.
//
// # Memory and asynchrony
//
// Device memory is a DevicePtr (MemAlloc, MemFree). Copies are
// asynchronous on a Stream and return before the copy is done, so the host
// side must be memory Go does not manage: cgo forbids C from holding Go
// memory after a call returns, and the garbage collector may reuse it. The
// driver plugin passes the shared-memory arena, which is mmapped; register
// it with MemHostRegister (HostRegisterPortable) so the copies are real
// DMA rather than staged by the driver. Streams are created non-blocking
// (StreamNonBlocking) so they never synchronize with the legacy default
// stream; completion is observed with Events (EventDisableTiming for
// cheap completion markers, EventBlockingSync to sleep in Synchronize).
//
// # Kernels and libraries
//
// CUDA C is compiled with NVRTC (Compile; the build log comes back in a
// *BuildError) to PTX (--gpu-architecture=compute_90) or a cubin
// (sm_90); ModuleLoadData loads either (the JIT's error log comes back in a
// *BuildError), Module.Function finds an extern "C" kernel and LaunchKernel
// queues it with its parameters given as pointers to their values. BLAS and
// Solver wrap one cuBLAS and one cuSOLVER handle each, to be bound to a
// worker's stream: scal, axpy, dot, gemm, syrk, trsm and potrf in float32
// and float64, column-major as in cuBLAS. Scalars are passed by value (host
// pointer mode, read before the call returns) and dot writes its result to
// device memory (device pointer mode), so nothing waits for the GPU.
//
// # Errors
//
// A failed call returns an *Error with the entry point and the status under
// the library's own name: "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out
// of memory" (cuGetErrorName, cuGetErrorString), "cublasSgemm_v2:
// CUBLAS_STATUS_EXECUTION_FAILED (13)" (a table, as for cuSOLVER),
// "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)" (nvrtcGetErrorString).
// errors.Is(err, cu.ErrorOutOfMemory) tests a driver status; errors.Is(err,
// &cu.Error{Lib: cu.LibBLAS, Code: 13}) one of another library.
//
// # Testing
//
// Without CUDA the tests cover the loader (an absent library, libm.so.6
// standing for a library without the entry points, the environment
// variables), error formatting, and Probe's every answer against a fake
// driver built from testdata/fakecuda.c with the system's C compiler. The
// same fake, which also stands in for cuBLAS, cuSOLVER and NVRTC with host
// memory and naive routines that validate their arguments as the real ones
// do, runs the whole GPU test suite in a child process, so every Go
// wrapper is exercised down to its C entry point. The GPU tests proper
// (gpu_test.go) run on a machine with a device and skip with Probe's
// reason elsewhere. The C sources are embedded in the test binary: a
// `go test -c` binary carried to the GPU machine needs no source tree and
// no Go toolchain (TestABI also needs cc and CUDA's headers there, and
// skips without them).
//
// # Not covered
//
// Explicit (non-primary) contexts, the CUDA runtime API, managed and
// virtual memory, memory pools, graphs, textures, 2D/3D copies, cooperative
// launches, the 64-bit cuBLAS interfaces and every BLAS or LAPACK routine
// beyond those listed. Adding an entry point takes one line in the table of
// cushim.h, one shim and one Go function.
package cu
