package cu

/*
#include <stdlib.h>
#include "cushim.h"

#cgo noescape sc_cuStreamQuery
#cgo nocallback sc_cuStreamQuery
#cgo noescape sc_cuEventQuery
#cgo nocallback sc_cuEventQuery
#cgo noescape sc_cuEventRecord
#cgo nocallback sc_cuEventRecord
#cgo noescape sc_cuStreamWaitEvent
#cgo nocallback sc_cuStreamWaitEvent
#cgo noescape sc_cuMemcpyDtoDAsync
#cgo nocallback sc_cuMemcpyDtoDAsync
#cgo noescape sc_cuMemAlloc
#cgo nocallback sc_cuMemAlloc
#cgo noescape sc_cuMemFree
#cgo nocallback sc_cuMemFree
*/
import "C"

import (
	"time"
	"unsafe"
)

// check turns a CUresult into an *Error naming call, nil on success.
func check(t *C.sc_driver, call string, r C.sc_result) error {
	if r == C.SC_CUDA_SUCCESS {
		return nil
	}
	return driverError(t, call, int(r))
}

// driverError builds the *Error of a failed driver call, naming the code
// with the driver's cuGetErrorName and cuGetErrorString.
func driverError(t *C.sc_driver, call string, code int) error {
	e := &Error{Lib: LibDriver, Call: call, Code: code, Name: Result(code).String()}
	if t != nil {
		var s *C.char
		if C.sc_cuGetErrorName(t, C.sc_result(code), &s) == C.SC_CUDA_SUCCESS && s != nil {
			e.Name = C.GoString(s)
		}
		s = nil
		if C.sc_cuGetErrorString(t, C.sc_result(code), &s) == C.SC_CUDA_SUCCESS && s != nil {
			e.Text = C.GoString(s)
		}
	}
	return e
}

// Init loads the libraries (Load with the zero Config, unless Load ran
// before), checks the driver is at least the configured minimum version,
// and initializes the driver API (cuInit). Calling it again is cheap. It
// fails with a *LoadError, a *VersionError, or cuInit's *Error
// (errors.Is(err, ErrorNoDevice) on a machine without a GPU).
func Init() error {
	if _, err := Load(Config{}); err != nil {
		return err
	}
	s := current.Load()
	if v := s.libs.DriverVersion; v < s.cfg.MinDriverVersion {
		return &VersionError{Version: v, Min: s.cfg.MinDriverVersion}
	}
	return check(s.drv, "cuInit", C.sc_cuInit(s.drv, 0))
}

// DriverVersion is the CUDA version the driver supports, 13000 for 13.0
// (cuDriverGetVersion; needs Load, not Init).
func DriverVersion() (int, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	var v C.int
	err := check(t, "cuDriverGetVersion", C.sc_cuDriverGetVersion(t, &v))
	return int(v), err
}

// Device is a CUDA device: the driver's CUdevice handle (in practice the
// ordinal). Device queries need Init, not a context.
type Device int32

// DeviceCount is the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	return deviceCount(t)
}

func deviceCount(t *C.sc_driver) (int, error) {
	var n C.int
	err := check(t, "cuDeviceGetCount", C.sc_cuDeviceGetCount(t, &n))
	return int(n), err
}

// DeviceGet returns the device of the given ordinal (0 to DeviceCount-1).
func DeviceGet(ordinal int) (Device, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	return deviceGet(t, ordinal)
}

func deviceGet(t *C.sc_driver, ordinal int) (Device, error) {
	var d C.sc_device
	err := check(t, "cuDeviceGet", C.sc_cuDeviceGet(t, &d, C.int(ordinal)))
	return Device(d), err
}

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int

// Device attributes (cuda.h's CU_DEVICE_ATTRIBUTE_*).
const (
	AttrMaxThreadsPerBlock           DeviceAttribute = 1
	AttrMaxSharedMemoryPerBlock      DeviceAttribute = 8
	AttrWarpSize                     DeviceAttribute = 10
	AttrClockRate                    DeviceAttribute = 13 // kHz
	AttrMultiprocessorCount          DeviceAttribute = 16
	AttrIntegrated                   DeviceAttribute = 18
	AttrCanMapHostMemory             DeviceAttribute = 19
	AttrConcurrentKernels            DeviceAttribute = 31
	AttrPCIBusID                     DeviceAttribute = 33
	AttrPCIDeviceID                  DeviceAttribute = 34
	AttrMemoryClockRate              DeviceAttribute = 36 // kHz
	AttrGlobalMemoryBusWidth         DeviceAttribute = 37 // bits
	AttrL2CacheSize                  DeviceAttribute = 38
	AttrMaxThreadsPerMultiprocessor  DeviceAttribute = 39
	AttrAsyncEngineCount             DeviceAttribute = 40
	AttrUnifiedAddressing            DeviceAttribute = 41
	AttrPCIDomainID                  DeviceAttribute = 50
	AttrComputeCapabilityMajor       DeviceAttribute = 75
	AttrComputeCapabilityMinor       DeviceAttribute = 76
	AttrStreamPrioritiesSupported    DeviceAttribute = 78
	AttrMaxSharedMemoryPerMultiproc  DeviceAttribute = 81
	AttrManagedMemory                DeviceAttribute = 83
	AttrMaxSharedMemoryPerBlockOptin DeviceAttribute = 97
	AttrHostRegisterSupported        DeviceAttribute = 99
)

// Attribute queries one attribute of the device.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	return deviceAttr(t, d, a)
}

func deviceAttr(t *C.sc_driver, d Device, a DeviceAttribute) (int, error) {
	var v C.int
	err := check(t, "cuDeviceGetAttribute", C.sc_cuDeviceGetAttribute(t, &v, C.int(a), C.sc_device(d)))
	return int(v), err
}

// Name is the device's name, "NVIDIA H100 80GB HBM3".
func (d Device) Name() (string, error) {
	t := drv()
	if t == nil {
		return "", ErrNotLoaded
	}
	return deviceName(t, d)
}

func deviceName(t *C.sc_driver, d Device) (string, error) {
	var buf [256]C.char
	if err := check(t, "cuDeviceGetName", C.sc_cuDeviceGetName(t, &buf[0], C.int(len(buf)), C.sc_device(d))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// TotalMem is the device's memory in bytes.
func (d Device) TotalMem() (uint64, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	return deviceTotalMem(t, d)
}

func deviceTotalMem(t *C.sc_driver, d Device) (uint64, error) {
	var n C.size_t
	err := check(t, "cuDeviceTotalMem_v2", C.sc_cuDeviceTotalMem(t, &n, C.sc_device(d)))
	return uint64(n), err
}

// ComputeCapability is the device's compute capability, 9.0 for an H100.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(AttrComputeCapabilityMinor)
	return major, minor, err
}

// MultiprocessorCount is the number of streaming multiprocessors.
func (d Device) MultiprocessorCount() (int, error) { return d.Attribute(AttrMultiprocessorCount) }

// PCIBusID is the device's PCI address, "0000:65:00.0".
func (d Device) PCIBusID() (string, error) {
	t := drv()
	if t == nil {
		return "", ErrNotLoaded
	}
	return devicePCIBusID(t, d)
}

func devicePCIBusID(t *C.sc_driver, d Device) (string, error) {
	var buf [64]C.char
	if err := check(t, "cuDeviceGetPCIBusId", C.sc_cuDeviceGetPCIBusId(t, &buf[0], C.int(len(buf)), C.sc_device(d))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// CanAccessPeer reports whether contexts on d can access peer's memory
// directly (after EnablePeerAccess).
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	t := drv()
	if t == nil {
		return false, ErrNotLoaded
	}
	var v C.int
	err := check(t, "cuDeviceCanAccessPeer", C.sc_cuDeviceCanAccessPeer(t, &v, C.sc_device(d), C.sc_device(peer)))
	return v != 0, err
}

// DeviceInfo describes a device, as Probe lists it.
type DeviceInfo struct {
	Ordinal int
	Name    string
	// TotalMem is the device memory in bytes.
	TotalMem uint64
	// Major and Minor are the compute capability (9.0 for an H100).
	Major, Minor int
	// Multiprocessors is the number of SMs.
	Multiprocessors int
	// PCIBusID is "0000:65:00.0" ("" if the driver could not say).
	PCIBusID string
}

// Info gathers the DeviceInfo of d.
func (d Device) Info() (DeviceInfo, error) {
	t := drv()
	if t == nil {
		return DeviceInfo{}, ErrNotLoaded
	}
	return deviceInfo(t, d, -1)
}

func deviceInfo(t *C.sc_driver, d Device, ordinal int) (DeviceInfo, error) {
	i := DeviceInfo{Ordinal: ordinal}
	if ordinal < 0 {
		i.Ordinal = int(d)
	}
	var err error
	if i.Name, err = deviceName(t, d); err != nil {
		return i, err
	}
	if i.TotalMem, err = deviceTotalMem(t, d); err != nil {
		return i, err
	}
	if i.Major, err = deviceAttr(t, d, AttrComputeCapabilityMajor); err != nil {
		return i, err
	}
	if i.Minor, err = deviceAttr(t, d, AttrComputeCapabilityMinor); err != nil {
		return i, err
	}
	if i.Multiprocessors, err = deviceAttr(t, d, AttrMultiprocessorCount); err != nil {
		return i, err
	}
	i.PCIBusID, _ = devicePCIBusID(t, d)
	return i, nil
}

// ContextFlags are a primary context's scheduling flags (CU_CTX_SCHED_*).
type ContextFlags uint32

// Scheduling flags: how a host thread waits for the GPU.
const (
	CtxSchedAuto         ContextFlags = 0
	CtxSchedSpin         ContextFlags = 1
	CtxSchedYield        ContextFlags = 2
	CtxSchedBlockingSync ContextFlags = 4
)

// SetPrimaryCtxFlags sets the flags the device's primary context is (or
// will be) created with.
func (d Device) SetPrimaryCtxFlags(f ContextFlags) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuDevicePrimaryCtxSetFlags_v2", C.sc_cuDevicePrimaryCtxSetFlags(t, C.sc_device(d), C.uint(f)))
}

// Context is a device's primary context: the one context per device per
// process that cuBLAS, cuSOLVER and the CUDA runtime also use.
//
// A context is current per OS thread, and every call that allocates,
// copies, launches or creates streams, events, modules or library handles
// acts on the calling thread's current context. A goroutine that uses one
// must therefore call runtime.LockOSThread, then SetCurrent, and stay on
// that thread while it works (the driver's workers each own one thread).
type Context struct {
	c   C.sc_context
	dev Device
}

// PrimaryCtxRetain retains (creating it the first time) the device's
// primary context; each retain is undone by one Release.
func (d Device) PrimaryCtxRetain() (Context, error) {
	t := drv()
	if t == nil {
		return Context{}, ErrNotLoaded
	}
	var c C.sc_context
	if err := check(t, "cuDevicePrimaryCtxRetain", C.sc_cuDevicePrimaryCtxRetain(t, &c, C.sc_device(d))); err != nil {
		return Context{}, err
	}
	return Context{c: c, dev: d}, nil
}

// Device is the context's device.
func (c Context) Device() Device { return c.dev }

// IsNil reports whether c is the zero Context.
func (c Context) IsNil() bool { return c.c == nil }

// Release undoes one PrimaryCtxRetain; the context is destroyed when the
// last retain is released.
func (c Context) Release() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuDevicePrimaryCtxRelease_v2", C.sc_cuDevicePrimaryCtxRelease(t, C.sc_device(c.dev)))
}

// SetCurrent makes c the calling OS thread's current context (see Context
// for why the caller must have locked its goroutine to the thread).
func (c Context) SetCurrent() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuCtxSetCurrent", C.sc_cuCtxSetCurrent(t, c.c))
}

// ClearCurrent leaves the calling thread with no current context.
func ClearCurrent() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuCtxSetCurrent", C.sc_cuCtxSetCurrent(t, nil))
}

// IsCurrent reports whether c is the calling thread's current context.
func (c Context) IsCurrent() (bool, error) {
	t := drv()
	if t == nil {
		return false, ErrNotLoaded
	}
	var cur C.sc_context
	err := check(t, "cuCtxGetCurrent", C.sc_cuCtxGetCurrent(t, &cur))
	return err == nil && cur == c.c && c.c != nil, err
}

// PushCurrent pushes c on the calling thread's context stack, making it
// current until PopCurrent.
func (c Context) PushCurrent() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuCtxPushCurrent_v2", C.sc_cuCtxPushCurrent(t, c.c))
}

// PopCurrent pops the calling thread's current context, restoring the one
// below it.
func PopCurrent() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	var c C.sc_context
	return check(t, "cuCtxPopCurrent_v2", C.sc_cuCtxPopCurrent(t, &c))
}

// Synchronize waits for all work of the current context (cuCtxSynchronize).
func Synchronize() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuCtxSynchronize", C.sc_cuCtxSynchronize(t))
}

// EnablePeerAccess lets the calling thread's current context access
// memory of peer's device (MemcpyPeerAsync and kernels then go over
// NVLink/PCIe directly). Enabling it twice is not an error.
func EnablePeerAccess(peer Context) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	r := C.sc_cuCtxEnablePeerAccess(t, peer.c)
	if r == C.SC_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
		return nil
	}
	return check(t, "cuCtxEnablePeerAccess", r)
}

// DevicePtr is an address in device memory (CUdeviceptr).
type DevicePtr uint64

// Offset is p advanced by n bytes.
func (p DevicePtr) Offset(n uint64) DevicePtr { return p + DevicePtr(n) }

// MemAlloc allocates n bytes (n > 0) of device memory in the current
// context.
func MemAlloc(n uint64) (DevicePtr, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	var p C.sc_dptr
	if err := check(t, "cuMemAlloc_v2", C.sc_cuMemAlloc(t, &p, C.size_t(n))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// MemFree frees memory from MemAlloc (0 is allowed and does nothing). It
// may wait for work using the memory to finish.
func MemFree(p DevicePtr) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	if p == 0 {
		return nil
	}
	return check(t, "cuMemFree_v2", C.sc_cuMemFree(t, C.sc_dptr(p)))
}

// MemGetInfo is the free and total memory of the current context's device.
func MemGetInfo() (free, total uint64, err error) {
	t := drv()
	if t == nil {
		return 0, 0, ErrNotLoaded
	}
	var f, tot C.size_t
	err = check(t, "cuMemGetInfo_v2", C.sc_cuMemGetInfo(t, &f, &tot))
	return uint64(f), uint64(tot), err
}

// HostRegisterFlags are cuMemHostRegister's flags.
type HostRegisterFlags uint32

// Host registration flags (CU_MEMHOSTREGISTER_*).
const (
	// HostRegisterPortable makes the registration count for every context,
	// not only the current one: what a shared arena used by several GPUs
	// needs.
	HostRegisterPortable  HostRegisterFlags = 1
	HostRegisterDeviceMap HostRegisterFlags = 2
	HostRegisterIOMemory  HostRegisterFlags = 4
	HostRegisterReadOnly  HostRegisterFlags = 8
)

// MemHostRegister page-locks n bytes of host memory at p and maps them
// for DMA, so asynchronous copies from and to it are real asynchronous
// DMA (from unregistered memory the driver stages them and the call
// blocks). p should be page aligned memory Go does not manage (an mmap,
// the shared-memory arena); it stays registered until MemHostUnregister.
func MemHostRegister(p unsafe.Pointer, n uint64, flags HostRegisterFlags) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemHostRegister_v2", C.sc_cuMemHostRegister(t, p, C.size_t(n), C.uint(flags)))
}

// MemHostRegisterBytes registers b's memory (see MemHostRegister).
func MemHostRegisterBytes(b []byte, flags HostRegisterFlags) error {
	if len(b) == 0 {
		return &Error{Lib: LibDriver, Call: "cuMemHostRegister_v2", Code: int(ErrorInvalidValue), Name: ErrorInvalidValue.String()}
	}
	return MemHostRegister(unsafe.Pointer(&b[0]), uint64(len(b)), flags)
}

// MemHostUnregister undoes MemHostRegister of the memory starting at p.
func MemHostUnregister(p unsafe.Pointer) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemHostUnregister", C.sc_cuMemHostUnregister(t, p))
}

// The asynchronous copies below are queued on stream s (the zero Stream is
// the legacy default stream) and return before the copy is done. The host
// memory must stay valid, unchanged (HtoD) and unread (DtoH) until the
// stream has passed the copy, which cgo forbids for Go memory: give them
// memory Go does not manage, such as the shared-memory arena (mmapped) or
// an mmap of one's own, registered with MemHostRegister for true DMA.

// MemcpyHtoDAsync copies n bytes from host memory src to dst.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemcpyHtoDAsync_v2", C.sc_cuMemcpyHtoDAsync(t, C.sc_dptr(dst), src, C.size_t(n), s.s))
}

// MemcpyDtoHAsync copies n bytes from src to host memory dst.
func MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemcpyDtoHAsync_v2", C.sc_cuMemcpyDtoHAsync(t, dst, C.sc_dptr(src), C.size_t(n), s.s))
}

// MemcpyHtoDAsyncBytes copies src to dst (see MemcpyHtoDAsync for what
// src's memory must be); an empty src does nothing.
func MemcpyHtoDAsyncBytes(dst DevicePtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	return MemcpyHtoDAsync(dst, unsafe.Pointer(&src[0]), uint64(len(src)), s)
}

// MemcpyDtoHAsyncBytes copies len(dst) bytes from src into dst (see
// MemcpyHtoDAsync for what dst's memory must be).
func MemcpyDtoHAsyncBytes(dst []byte, src DevicePtr, s Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), src, uint64(len(dst)), s)
}

// MemcpyDtoDAsync copies n bytes between two device addresses of the
// current context (or, with unified addressing, of any two contexts).
func MemcpyDtoDAsync(dst, src DevicePtr, n uint64, s Stream) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemcpyDtoDAsync_v2", C.sc_cuMemcpyDtoDAsync(t, C.sc_dptr(dst), C.sc_dptr(src), C.size_t(n), s.s))
}

// MemcpyPeerAsync copies n bytes from src in srcCtx to dst in dstCtx,
// directly when peer access is enabled, else staged through the host by
// the driver.
func MemcpyPeerAsync(dst DevicePtr, dstCtx Context, src DevicePtr, srcCtx Context, n uint64, s Stream) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemcpyPeerAsync", C.sc_cuMemcpyPeerAsync(t, C.sc_dptr(dst), dstCtx.c, C.sc_dptr(src), srcCtx.c, C.size_t(n), s.s))
}

// MemsetD8Async sets n bytes at dst to v.
func MemsetD8Async(dst DevicePtr, v byte, n uint64, s Stream) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuMemsetD8Async", C.sc_cuMemsetD8Async(t, C.sc_dptr(dst), C.uchar(v), C.size_t(n), s.s))
}

// StreamFlags are cuStreamCreate's flags.
type StreamFlags uint32

// Stream flags (CU_STREAM_*).
const (
	StreamDefault StreamFlags = 0
	// StreamNonBlocking: the stream does not synchronize with the legacy
	// default stream (what a worker's streams want).
	StreamNonBlocking StreamFlags = 1
)

// Stream is a CUDA stream of the context current when it was created. The
// zero Stream is the legacy default stream (NULL).
type Stream struct{ s C.sc_stream }

// StreamCreate creates a stream in the current context.
func StreamCreate(flags StreamFlags) (Stream, error) {
	t := drv()
	if t == nil {
		return Stream{}, ErrNotLoaded
	}
	var s C.sc_stream
	err := check(t, "cuStreamCreate", C.sc_cuStreamCreate(t, &s, C.uint(flags)))
	return Stream{s}, err
}

// IsNil reports whether s is the zero (default) Stream.
func (s Stream) IsNil() bool { return s.s == nil }

// Destroy destroys the stream once its queued work is done (it does not
// wait for it).
func (s Stream) Destroy() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuStreamDestroy_v2", C.sc_cuStreamDestroy(t, s.s))
}

// Synchronize waits until the stream's queued work is done; it returns the
// error of a failed kernel or copy.
func (s Stream) Synchronize() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuStreamSynchronize", C.sc_cuStreamSynchronize(t, s.s))
}

// Query reports whether the stream's queued work is done, without waiting.
func (s Stream) Query() (bool, error) {
	t := drv()
	if t == nil {
		return false, ErrNotLoaded
	}
	r := C.sc_cuStreamQuery(t, s.s)
	if r == C.SC_CUDA_ERROR_NOT_READY {
		return false, nil
	}
	return r == C.SC_CUDA_SUCCESS, check(t, "cuStreamQuery", r)
}

// WaitEvent makes work queued on s after this call wait until e's recorded
// work is done (on the device; the host does not wait).
func (s Stream) WaitEvent(e Event) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuStreamWaitEvent", C.sc_cuStreamWaitEvent(t, s.s, e.e))
}

// EventFlags are cuEventCreate's flags.
type EventFlags uint32

// Event flags (CU_EVENT_*).
const (
	EventDefault EventFlags = 0
	// EventBlockingSync: Synchronize sleeps instead of spinning.
	EventBlockingSync EventFlags = 1
	// EventDisableTiming: no timestamps (cheaper; completion only).
	EventDisableTiming EventFlags = 2
)

// Event marks a point in a stream's work.
type Event struct{ e C.sc_event }

// EventCreate creates an event in the current context.
func EventCreate(flags EventFlags) (Event, error) {
	t := drv()
	if t == nil {
		return Event{}, ErrNotLoaded
	}
	var e C.sc_event
	err := check(t, "cuEventCreate", C.sc_cuEventCreate(t, &e, C.uint(flags)))
	return Event{e}, err
}

// IsNil reports whether e is the zero Event.
func (e Event) IsNil() bool { return e.e == nil }

// Record captures the work queued on s so far; the event completes when
// that work is done. Recording again moves the event.
func (e Event) Record(s Stream) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuEventRecord", C.sc_cuEventRecord(t, e.e, s.s))
}

// Query reports whether the recorded work is done, without waiting (an
// event never recorded is done).
func (e Event) Query() (bool, error) {
	t := drv()
	if t == nil {
		return false, ErrNotLoaded
	}
	r := C.sc_cuEventQuery(t, e.e)
	if r == C.SC_CUDA_ERROR_NOT_READY {
		return false, nil
	}
	return r == C.SC_CUDA_SUCCESS, check(t, "cuEventQuery", r)
}

// Synchronize waits until the recorded work is done.
func (e Event) Synchronize() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuEventSynchronize", C.sc_cuEventSynchronize(t, e.e))
}

// Elapsed is the device time between start and end, both recorded and
// complete, both created without EventDisableTiming (about 0.5 us
// resolution).
func Elapsed(start, end Event) (time.Duration, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	var ms C.float
	if err := check(t, "cuEventElapsedTime", C.sc_cuEventElapsedTime(t, &ms, start.e, end.e)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy destroys the event (after its recorded work, if pending).
func (e Event) Destroy() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	return check(t, "cuEventDestroy_v2", C.sc_cuEventDestroy(t, e.e))
}
