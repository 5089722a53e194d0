// Package cudadriver is the CUDA driver plugin: one worker and one memory
// node per NVIDIA GPU, through the run-time-loaded binding of package cu,
// so that the plugin builds and starts on machines without CUDA and says
// why it found no GPU.
//
// Each worker runs StarPU's init / run_once / deinit on its own locked OS
// thread with its GPU's primary context current. It queues commands on
// four non-blocking streams (kernels, host-to-device, device-to-host,
// device-to-device copies), orders them across streams per buffer with
// events (cuStreamWaitEvent on the last writer and readers, as the OpenCL
// driver does with its two queues), and posts each completion once the
// event recorded behind its command reports, in an order consistent with
// the data. Completions are seen by polling the events for a few tens of
// microseconds, then by one waiter thread per stream sleeping in
// cuEventSynchronize on a blocking-sync event, which rings the worker's
// bell: short kernels are answered at polling latency, long ones cost no
// core.
//
// GPUs with peer access name each other as peers in the fingerprint; a
// copy from one to another goes to the source's worker and is one
// cuMemcpyPeerAsync per range (STARPU_ENABLE_CUDA_GPU_GPU_DIRECT=0 turns
// that off, and the core copies through RAM).
//
// Tasks whose implementation is flagged asynchronous (wire.ExecAsync)
// keep up to STARPU_CUDA_PIPELINE (default 2) in flight; others run one at
// a time; STARPU_CUDA_PIPELINE=0 makes every task synchronous. Deinit
// ends every task sent before it.
//
// The built-in kernels are the CPU driver's BLAS names and argument
// encodings (package blasarg) on cuBLAS (scal, axpy, dot, gemm, syrk,
// trsm) and cuSOLVER (potrf), one handle each per worker bound to its
// kernel stream; a kernel is listed only when its library loaded. User
// kernels come as CUDA C compiled by NVRTC for each GPU's compute
// capability, or as PTX, with OpenCL's calling convention: see
// docs/design/cuda.md.
package cudadriver
