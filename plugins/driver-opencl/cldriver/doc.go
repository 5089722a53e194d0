// Package cldriver is the OpenCL driver: one unit and one memory node per
// OpenCL device, and one worker per unit the core asks for, which runs the
// core's Alloc, Free, Copy, Parts and Exec messages as commands on the
// device.
//
// # Devices
//
// GPU and accelerator devices are units; CPU-type devices (pocl) only when
// STARPU_OPENCL_ON_CPUS=1 or the config's on_cpus = true. Unit i computes
// on the driver's memory node i+1, sized by the device's global memory or
// STARPU_LIMIT_OPENCL_MEM (MiB, or limit_mem_mib) when smaller; the driver
// refuses allocations beyond it. STARPU_NOPENCL (ndevices) caps the number
// of devices. Environment variables override the config block. When no
// device qualifies, the fingerprint's Note says why. A malformed or negative
// STARPU_LIMIT_OPENCL_MEM fails the fingerprint, naming the variable, once a
// device would be capped by it; while the driver uses no device it is only
// mentioned in the Note, so that it cannot stop a runtime without OpenCL.
//
// # Worker
//
// A worker never waits for a command: it enqueues (transfers on one
// in-order queue, kernels on another), keeps the command in flight, and
// posts its completion when OpenCL's event callback reports it finished,
// in whatever order commands finish. Each buffer remembers its last writer
// and last reader per queue, and a new command waits for the events it
// conflicts with (read after write, write after read or write), so that
// the messages of a ring act in order on each buffer while independent
// transfers overlap kernels.
//
// # Calling convention
//
// A kernel receives, for each task buffer in order, the buffer (a global
// pointer; NULL for a void or zero-byte buffer) followed by its shape as
// uint arguments:
//
//	vector:    nx
//	matrix:    nx, ny, ld
//	block:     nx, ny, nz, ld, ldz
//	variable:  nothing
//	void:      nothing
//
// A plugin interface's datum (id >= 64) is instead each of its parts as a
// buffer (a sub-buffer of the region, NULL for an empty part; the core
// says where the parts lie with a Parts message), then nx, ny, nz, ld and
// ldz as ulong.
//
// Then, if the task's argument is not empty, its bytes by value as the last
// argument (a struct of the same layout in the kernel). The NDRange is the
// shape of the first buffer the task writes (else of its first buffer):
// 1-D nx for a vector, 2-D (nx, ny) for a matrix, 3-D for a block, 1
// otherwise; the implementation picks the work-group size.
//
// The built-in kernels (blasarg's names: scal, axpy, gemm, syrk, trsm, and
// the sparse products spmv_csr and spmv_bcsr, as _f32 and, when every
// device has cl_khr_fp64, _f64) take their buffers the same way, but the
// driver decodes the blasarg argument on the host and passes its fields as
// scalars (flags as int, Alpha and Beta in the kernel's precision); gemm
// runs in 16x16 work-groups over C rounded up, trsm one work item per
// column (left) or row (right) of B, the sparse products one per element
// of y.
package cldriver
