// Package cl is a small cgo binding over the system's OpenCL ICD loader
// (libOpenCL), at the OpenCL 1.2 level: platforms and devices, contexts,
// in-order command queues, buffers, programs built from source, kernels and
// events. It holds what the OpenCL driver plugin needs and no more.
//
// Every failing call returns an *Error naming the OpenCL function and the
// status code by name, "clEnqueueNDRangeKernel: CL_INVALID_WORK_GROUP_SIZE
// (-54)"; a failed build returns a *BuildError carrying the build log.
//
// Handles (Context, Queue, Mem, Program, Kernel, Event) are small values
// wrapping OpenCL's reference-counted objects: copying one does not retain
// it, and each must be released once with Release. Non-blocking reads and
// writes keep using the host memory after the call returns, which cgo
// forbids for Go memory: give them memory Go does not manage (the
// shared-memory arena, or an mmap).
package cl

/*
#cgo CFLAGS: -DCL_TARGET_OPENCL_VERSION=120
#cgo LDFLAGS: -lOpenCL
#cgo noescape clSetKernelArg
#cgo nocallback clSetKernelArg
#cgo noescape clEnqueueNDRangeKernel
#cgo nocallback clEnqueueNDRangeKernel
#cgo noescape clGetEventProfilingInfo
#cgo nocallback clGetEventProfilingInfo
#cgo noescape clGetEventInfo
#cgo nocallback clGetEventInfo
#include <stdint.h>
#include <stdlib.h>
#include <CL/cl.h>

cl_int starpuSetEventDone(cl_event e, uintptr_t tag);
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// Platform is an OpenCL platform (an installed implementation, pocl say).
type Platform struct{ id C.cl_platform_id }

// Platforms lists the installed platforms. With no ICD installed the loader
// answers CL_PLATFORM_NOT_FOUND_KHR, which is returned as an *Error.
func Platforms() ([]Platform, error) {
	var n C.cl_uint
	if err := check("clGetPlatformIDs", C.clGetPlatformIDs(0, nil, &n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	ids := make([]C.cl_platform_id, n)
	if err := check("clGetPlatformIDs", C.clGetPlatformIDs(n, &ids[0], &n)); err != nil {
		return nil, err
	}
	ps := make([]Platform, n)
	for i := range ps {
		ps[i] = Platform{ids[i]}
	}
	return ps, nil
}

// Name is the platform's name ("Portable Computing Language").
func (p Platform) Name() (string, error) { return p.info("CL_PLATFORM_NAME", C.CL_PLATFORM_NAME) }

// Version is the platform's version string.
func (p Platform) Version() (string, error) {
	return p.info("CL_PLATFORM_VERSION", C.CL_PLATFORM_VERSION)
}

func (p Platform) info(what string, param C.cl_platform_info) (string, error) {
	var n C.size_t
	if err := check("clGetPlatformInfo", C.clGetPlatformInfo(p.id, param, 0, nil, &n)); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return "", nil
	}
	b := make([]byte, n)
	if err := check("clGetPlatformInfo", C.clGetPlatformInfo(p.id, param, n, unsafe.Pointer(&b[0]), nil)); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return cString(b), nil
}

// DeviceType is a bit set of OpenCL device types.
type DeviceType uint64

// Device types.
const (
	DeviceDefault     DeviceType = C.CL_DEVICE_TYPE_DEFAULT
	DeviceCPU         DeviceType = C.CL_DEVICE_TYPE_CPU
	DeviceGPU         DeviceType = C.CL_DEVICE_TYPE_GPU
	DeviceAccelerator DeviceType = C.CL_DEVICE_TYPE_ACCELERATOR
	DeviceAll         DeviceType = C.CL_DEVICE_TYPE_ALL
)

// String names the types in t, "GPU" or "CPU|accelerator".
func (t DeviceType) String() string {
	var s []string
	for _, b := range []struct {
		bit  DeviceType
		name string
	}{{DeviceDefault, "default"}, {DeviceCPU, "CPU"}, {DeviceGPU, "GPU"}, {DeviceAccelerator, "accelerator"}, {C.CL_DEVICE_TYPE_CUSTOM, "custom"}} {
		if t&b.bit != 0 {
			s = append(s, b.name)
		}
	}
	if len(s) == 0 {
		return fmt.Sprintf("type(%#x)", uint64(t))
	}
	return strings.Join(s, "|")
}

// Device is an OpenCL device of a platform.
type Device struct{ id C.cl_device_id }

// Devices lists the platform's devices of the given types; none is an empty
// list, not an error.
func (p Platform) Devices(t DeviceType) ([]Device, error) {
	var n C.cl_uint
	code := C.clGetDeviceIDs(p.id, C.cl_device_type(t), 0, nil, &n)
	if code == C.CL_DEVICE_NOT_FOUND || code == C.CL_SUCCESS && n == 0 {
		return nil, nil
	}
	if err := check("clGetDeviceIDs", code); err != nil {
		return nil, err
	}
	ids := make([]C.cl_device_id, n)
	if err := check("clGetDeviceIDs", C.clGetDeviceIDs(p.id, C.cl_device_type(t), n, &ids[0], &n)); err != nil {
		return nil, err
	}
	ds := make([]Device, n)
	for i := range ds {
		ds[i] = Device{ids[i]}
	}
	return ds, nil
}

// DeviceInfo is what the driver needs to know about a device.
type DeviceInfo struct {
	Name, Vendor, Version string
	Type                  DeviceType
	// GlobalMemSize is the device's memory in bytes.
	GlobalMemSize uint64
	// MaxAllocSize is the largest buffer the device allocates.
	MaxAllocSize uint64
	// MaxWorkGroupSize is the most work items a work-group may have.
	MaxWorkGroupSize uint64
	// BaseAlign is the alignment in bytes of a sub-buffer's origin in its
	// buffer (CL_DEVICE_MEM_BASE_ADDR_ALIGN, which OpenCL gives in bits).
	BaseAlign  uint64
	Extensions string
}

// HasExtension reports whether the device supports the named extension
// ("cl_khr_fp64").
func (i *DeviceInfo) HasExtension(name string) bool {
	for _, e := range strings.Fields(i.Extensions) {
		if e == name {
			return true
		}
	}
	return false
}

// Info queries the device.
func (d Device) Info() (DeviceInfo, error) {
	var i DeviceInfo
	var err error
	str := func(what string, p C.cl_device_info) string {
		if err != nil {
			return ""
		}
		var n C.size_t
		if err = check("clGetDeviceInfo", C.clGetDeviceInfo(d.id, p, 0, nil, &n)); err != nil || n == 0 {
			err = wrapWhat(what, err)
			return ""
		}
		b := make([]byte, n)
		err = wrapWhat(what, check("clGetDeviceInfo", C.clGetDeviceInfo(d.id, p, n, unsafe.Pointer(&b[0]), nil)))
		return cString(b)
	}
	u64 := func(what string, p C.cl_device_info, size C.size_t) uint64 {
		if err != nil {
			return 0
		}
		var v C.cl_ulong // large enough for cl_ulong, size_t and cl_bitfield
		err = wrapWhat(what, check("clGetDeviceInfo", C.clGetDeviceInfo(d.id, p, size, unsafe.Pointer(&v), nil)))
		return uint64(v)
	}
	i.Name = strings.TrimSpace(str("CL_DEVICE_NAME", C.CL_DEVICE_NAME))
	i.Vendor = strings.TrimSpace(str("CL_DEVICE_VENDOR", C.CL_DEVICE_VENDOR))
	i.Version = str("CL_DEVICE_VERSION", C.CL_DEVICE_VERSION)
	i.Extensions = str("CL_DEVICE_EXTENSIONS", C.CL_DEVICE_EXTENSIONS)
	i.Type = DeviceType(u64("CL_DEVICE_TYPE", C.CL_DEVICE_TYPE, C.sizeof_cl_device_type))
	i.GlobalMemSize = u64("CL_DEVICE_GLOBAL_MEM_SIZE", C.CL_DEVICE_GLOBAL_MEM_SIZE, C.sizeof_cl_ulong)
	i.MaxAllocSize = u64("CL_DEVICE_MAX_MEM_ALLOC_SIZE", C.CL_DEVICE_MAX_MEM_ALLOC_SIZE, C.sizeof_cl_ulong)
	i.MaxWorkGroupSize = u64("CL_DEVICE_MAX_WORK_GROUP_SIZE", C.CL_DEVICE_MAX_WORK_GROUP_SIZE, C.sizeof_size_t)
	i.BaseAlign = u64("CL_DEVICE_MEM_BASE_ADDR_ALIGN", C.CL_DEVICE_MEM_BASE_ADDR_ALIGN, C.sizeof_cl_uint) / 8
	return i, err
}

func wrapWhat(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Context is an OpenCL context over one or more devices of a platform.
type Context struct{ c C.cl_context }

// CreateContext makes a context over devs.
func CreateContext(devs ...Device) (Context, error) {
	if len(devs) == 0 {
		return Context{}, &Error{Call: "clCreateContext", Code: int32(C.CL_INVALID_VALUE)}
	}
	ids := make([]C.cl_device_id, len(devs))
	for i, d := range devs {
		ids[i] = d.id
	}
	var code C.cl_int
	c := C.clCreateContext(nil, C.cl_uint(len(ids)), &ids[0], nil, nil, &code)
	if err := check("clCreateContext", code); err != nil {
		return Context{}, err
	}
	return Context{c}, nil
}

// Release drops the context.
func (c Context) Release() error { return check("clReleaseContext", C.clReleaseContext(c.c)) }

// Queue is an in-order command queue of one device.
type Queue struct{ q C.cl_command_queue }

// CreateQueue makes an in-order queue on d; with profiling its events carry
// start and end times (Event.ProfilingTimes).
func (c Context) CreateQueue(d Device, profiling bool) (Queue, error) {
	var props C.cl_command_queue_properties
	if profiling {
		props |= C.CL_QUEUE_PROFILING_ENABLE
	}
	var code C.cl_int
	q := C.clCreateCommandQueue(c.c, d.id, props, &code)
	if err := check("clCreateCommandQueue", code); err != nil {
		return Queue{}, err
	}
	return Queue{q}, nil
}

// Flush submits the queued commands to the device without waiting.
func (q Queue) Flush() error { return check("clFlush", C.clFlush(q.q)) }

// Finish waits for every command of the queue.
func (q Queue) Finish() error { return check("clFinish", C.clFinish(q.q)) }

// Release drops the queue.
func (q Queue) Release() error { return check("clReleaseCommandQueue", C.clReleaseCommandQueue(q.q)) }

// Mem is a buffer in a device's memory.
type Mem struct{ m C.cl_mem }

// CreateBuffer allocates a read-write buffer of size bytes (size > 0).
func (c Context) CreateBuffer(size uint64) (Mem, error) {
	var code C.cl_int
	m := C.clCreateBuffer(c.c, C.CL_MEM_READ_WRITE, C.size_t(size), nil, &code)
	if err := check("clCreateBuffer", code); err != nil {
		return Mem{}, err
	}
	return Mem{m}, nil
}

// SubBuffer makes a buffer of the bytes [origin, origin+size) of m
// (clCreateSubBuffer), for a kernel argument that starts inside m. origin
// must be a multiple of the device's DeviceInfo.BaseAlign and size more
// than 0; release it before m.
func (m Mem) SubBuffer(origin, size uint64) (Mem, error) {
	r := C.cl_buffer_region{origin: C.size_t(origin), size: C.size_t(size)}
	var code C.cl_int
	sub := C.clCreateSubBuffer(m.m, C.CL_MEM_READ_WRITE, C.CL_BUFFER_CREATE_TYPE_REGION, unsafe.Pointer(&r), &code)
	if err := check("clCreateSubBuffer", code); err != nil {
		return Mem{}, err
	}
	return Mem{sub}, nil
}

// IsNil reports whether m is the zero Mem (no buffer).
func (m Mem) IsNil() bool { return m.m == nil }

// Release drops the buffer; the device frees it once the commands using it
// are done.
func (m Mem) Release() error { return check("clReleaseMemObject", C.clReleaseMemObject(m.m)) }

// Event is the completion handle of an enqueued command.
type Event struct{ e C.cl_event }

// IsNil reports whether e is the zero Event.
func (e Event) IsNil() bool { return e.e == nil }

// Command execution statuses (Event.Status); a negative status is the error
// the command failed with.
const (
	Complete  int32 = C.CL_COMPLETE
	Running   int32 = C.CL_RUNNING
	Submitted int32 = C.CL_SUBMITTED
	Queued    int32 = C.CL_QUEUED
)

// Status is the command's execution status: Complete, Running, Submitted,
// Queued, or a negative error code.
func (e Event) Status() (int32, error) {
	var s C.cl_int
	err := check("clGetEventInfo", C.clGetEventInfo(e.e, C.CL_EVENT_COMMAND_EXECUTION_STATUS, C.sizeof_cl_int, unsafe.Pointer(&s), nil))
	return int32(s), err
}

// Wait blocks until the command has finished; a command that failed gives
// CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST.
func (e Event) Wait() error { return check("clWaitForEvents", C.clWaitForEvents(1, &e.e)) }

// ProfilingTimes is when the command started and ended on the device, in
// nanoseconds of the device's clock; the queue must have profiling on.
func (e Event) ProfilingTimes() (start, end uint64, err error) {
	var s, t C.cl_ulong
	if err := check("clGetEventProfilingInfo", C.clGetEventProfilingInfo(e.e, C.CL_PROFILING_COMMAND_START, C.sizeof_cl_ulong, unsafe.Pointer(&s), nil)); err != nil {
		return 0, 0, err
	}
	if err := check("clGetEventProfilingInfo", C.clGetEventProfilingInfo(e.e, C.CL_PROFILING_COMMAND_END, C.sizeof_cl_ulong, unsafe.Pointer(&t), nil)); err != nil {
		return 0, 0, err
	}
	return uint64(s), uint64(t), nil
}

// CreateUserEvent makes an event the host completes with SetUserStatus:
// commands waiting on it start then.
func (c Context) CreateUserEvent() (Event, error) {
	var code C.cl_int
	e := C.clCreateUserEvent(c.c, &code)
	return Event{e}, check("clCreateUserEvent", code)
}

// SetUserStatus completes a user event: Complete, or a negative error
// that fails the commands waiting on it.
func (e Event) SetUserStatus(status int32) error {
	return check("clSetUserEventStatus", C.clSetUserEventStatus(e.e, C.cl_int(status)))
}

// Release drops the event.
func (e Event) Release() error { return check("clReleaseEvent", C.clReleaseEvent(e.e)) }

// waitList is the C view of a wait list: Event is a one-pointer struct, so a
// []Event has the layout of a cl_event array.
func waitList(w []Event) (C.cl_uint, *C.cl_event) {
	if len(w) == 0 {
		return 0, nil
	}
	return C.cl_uint(len(w)), (*C.cl_event)(unsafe.Pointer(&w[0]))
}

func outEvent(want bool, e *Event) *C.cl_event {
	if want {
		return &e.e
	}
	return nil
}

func bool32(b bool) C.cl_bool {
	if b {
		return C.CL_TRUE
	}
	return C.CL_FALSE
}

// EnqueueWrite copies src to m at byte offset off once the commands of wait
// have finished. Unless blocking, src must stay valid (and not be Go
// memory) until the command completes. With wantEvent the command's event is
// returned, to be released by the caller.
func (q Queue) EnqueueWrite(m Mem, blocking bool, off uint64, src []byte, wait []Event, wantEvent bool) (Event, error) {
	var ev Event
	if len(src) == 0 {
		return ev, &Error{Call: "clEnqueueWriteBuffer", Code: int32(C.CL_INVALID_VALUE)}
	}
	n, w := waitList(wait)
	code := C.clEnqueueWriteBuffer(q.q, m.m, bool32(blocking), C.size_t(off), C.size_t(len(src)), unsafe.Pointer(&src[0]), n, w, outEvent(wantEvent, &ev))
	return ev, check("clEnqueueWriteBuffer", code)
}

// EnqueueRead copies m from byte offset off into dst, as EnqueueWrite does
// the other way.
func (q Queue) EnqueueRead(m Mem, blocking bool, off uint64, dst []byte, wait []Event, wantEvent bool) (Event, error) {
	var ev Event
	if len(dst) == 0 {
		return ev, &Error{Call: "clEnqueueReadBuffer", Code: int32(C.CL_INVALID_VALUE)}
	}
	n, w := waitList(wait)
	code := C.clEnqueueReadBuffer(q.q, m.m, bool32(blocking), C.size_t(off), C.size_t(len(dst)), unsafe.Pointer(&dst[0]), n, w, outEvent(wantEvent, &ev))
	return ev, check("clEnqueueReadBuffer", code)
}

// EnqueueCopy copies size bytes from src at srcOff to dst at dstOff, both
// buffers of the queue's context.
func (q Queue) EnqueueCopy(src, dst Mem, srcOff, dstOff, size uint64, wait []Event, wantEvent bool) (Event, error) {
	var ev Event
	n, w := waitList(wait)
	code := C.clEnqueueCopyBuffer(q.q, src.m, dst.m, C.size_t(srcOff), C.size_t(dstOff), C.size_t(size), n, w, outEvent(wantEvent, &ev))
	return ev, check("clEnqueueCopyBuffer", code)
}

// EnqueueNDRange runs k over global work items (1 to 3 dimensions), in
// work-groups of local items, or of a size the implementation picks when
// local is nil.
func (q Queue) EnqueueNDRange(k Kernel, global, local []uint64, wait []Event, wantEvent bool) (Event, error) {
	var ev Event
	if len(global) < 1 || len(global) > 3 || local != nil && len(local) != len(global) {
		return ev, &Error{Call: "clEnqueueNDRangeKernel", Code: int32(C.CL_INVALID_WORK_DIMENSION)}
	}
	var g, l [3]C.size_t
	for i, v := range global {
		g[i] = C.size_t(v)
	}
	var lp *C.size_t
	if local != nil {
		for i, v := range local {
			l[i] = C.size_t(v)
		}
		lp = &l[0]
	}
	n, w := waitList(wait)
	code := C.clEnqueueNDRangeKernel(q.q, k.k, C.cl_uint(len(global)), nil, &g[0], lp, n, w, outEvent(wantEvent, &ev))
	return ev, check("clEnqueueNDRangeKernel", code)
}

// EnqueueMarker returns an event that completes when the commands of wait
// (or, with an empty wait, every command enqueued before it) have finished.
func (q Queue) EnqueueMarker(wait []Event) (Event, error) {
	var ev Event
	n, w := waitList(wait)
	code := C.clEnqueueMarkerWithWaitList(q.q, n, w, &ev.e)
	return ev, check("clEnqueueMarkerWithWaitList", code)
}

// Program is OpenCL C source built for devices.
type Program struct{ p C.cl_program }

// BuildError is a program that failed to build: the status and the build
// log of the device(s) it failed on.
type BuildError struct {
	Err *Error
	Log string
}

// Error reads "clBuildProgram: CL_BUILD_PROGRAM_FAILURE (-11); build log:"
// followed by the log.
func (e *BuildError) Error() string {
	if e.Log == "" {
		return e.Err.Error() + " (empty build log)"
	}
	return e.Err.Error() + "; build log:\n" + e.Log
}

// Unwrap gives the status.
func (e *BuildError) Unwrap() error { return e.Err }

// BuildProgram compiles src for devs with the given compiler options. A
// compilation error is a *BuildError carrying the log.
func (c Context) BuildProgram(src string, devs []Device, options string) (Program, error) {
	cs := C.CString(src)
	defer C.free(unsafe.Pointer(cs))
	var code C.cl_int
	p := C.clCreateProgramWithSource(c.c, 1, &cs, nil, &code)
	if err := check("clCreateProgramWithSource", code); err != nil {
		return Program{}, err
	}
	prog := Program{p}
	ids := make([]C.cl_device_id, len(devs))
	for i, d := range devs {
		ids[i] = d.id
	}
	var idp *C.cl_device_id
	if len(ids) > 0 {
		idp = &ids[0]
	}
	copts := C.CString(options)
	defer C.free(unsafe.Pointer(copts))
	code = C.clBuildProgram(p, C.cl_uint(len(ids)), idp, copts, nil, nil)
	if code != C.CL_SUCCESS {
		be := &BuildError{Err: &Error{Call: "clBuildProgram", Code: int32(code)}}
		var logs []string
		for _, d := range devs {
			if l := strings.TrimSpace(prog.BuildLog(d)); l != "" {
				logs = append(logs, l)
			}
		}
		be.Log = strings.Join(logs, "\n")
		prog.Release()
		return Program{}, be
	}
	return prog, nil
}

// BuildLog is the compiler's output for device d ("" when unavailable).
func (p Program) BuildLog(d Device) string {
	var n C.size_t
	if C.clGetProgramBuildInfo(p.p, d.id, C.CL_PROGRAM_BUILD_LOG, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	b := make([]byte, n)
	if C.clGetProgramBuildInfo(p.p, d.id, C.CL_PROGRAM_BUILD_LOG, n, unsafe.Pointer(&b[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return cString(b)
}

// Release drops the program.
func (p Program) Release() error { return check("clReleaseProgram", C.clReleaseProgram(p.p)) }

// Kernel is a kernel function of a built program, with its arguments.
// Setting arguments and enqueueing must not race on one Kernel.
type Kernel struct{ k C.cl_kernel }

// CreateKernel finds the kernel function name in the program.
func (p Program) CreateKernel(name string) (Kernel, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var code C.cl_int
	k := C.clCreateKernel(p.p, cs, &code)
	if err := check("clCreateKernel", code); err != nil {
		return Kernel{}, fmt.Errorf("kernel %q: %w", name, err)
	}
	return Kernel{k}, nil
}

// NumArgs is the number of arguments the kernel function takes.
func (k Kernel) NumArgs() (int, error) {
	var n C.cl_uint
	err := check("clGetKernelInfo", C.clGetKernelInfo(k.k, C.CL_KERNEL_NUM_ARGS, C.sizeof_cl_uint, unsafe.Pointer(&n), nil))
	return int(n), err
}

// SetArgMem sets argument i to buffer m (a null pointer when m is nil).
func (k Kernel) SetArgMem(i int, m Mem) error {
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.sizeof_cl_mem, unsafe.Pointer(&m.m)))
}

// SetArgUint32 sets argument i, a uint, to v.
func (k Kernel) SetArgUint32(i int, v uint32) error {
	c := C.cl_uint(v)
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.sizeof_cl_uint, unsafe.Pointer(&c)))
}

// SetArgUint64 sets argument i, a ulong, to v.
func (k Kernel) SetArgUint64(i int, v uint64) error {
	c := C.cl_ulong(v)
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.sizeof_cl_ulong, unsafe.Pointer(&c)))
}

// SetArgInt32 sets argument i, an int, to v.
func (k Kernel) SetArgInt32(i int, v int32) error {
	c := C.cl_int(v)
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.sizeof_cl_int, unsafe.Pointer(&c)))
}

// SetArgFloat32 sets argument i, a float, to v.
func (k Kernel) SetArgFloat32(i int, v float32) error {
	c := C.cl_float(v)
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.sizeof_cl_float, unsafe.Pointer(&c)))
}

// SetArgFloat64 sets argument i, a double, to v.
func (k Kernel) SetArgFloat64(i int, v float64) error {
	c := C.cl_double(v)
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.sizeof_cl_double, unsafe.Pointer(&c)))
}

// SetArgBytes sets argument i to the bytes of b passed by value (a struct
// or scalar of len(b) bytes in the kernel).
func (k Kernel) SetArgBytes(i int, b []byte) error {
	if len(b) == 0 {
		return &Error{Call: "clSetKernelArg", Code: int32(C.CL_INVALID_ARG_SIZE)}
	}
	return check("clSetKernelArg", C.clSetKernelArg(k.k, C.cl_uint(i), C.size_t(len(b)), unsafe.Pointer(&b[0])))
}

// Release drops the kernel.
func (k Kernel) Release() error { return check("clReleaseKernel", C.clReleaseKernel(k.k)) }

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
