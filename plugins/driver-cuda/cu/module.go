package cu

/*
#include <stdlib.h>
#include <string.h>
#include "cushim.h"

#cgo noescape sc_cuLaunchKernel
#cgo nocallback sc_cuLaunchKernel
*/
import "C"

import (
	"errors"
	"runtime"
	"strings"
	"unsafe"
)

// jitLogSize is the JIT error log buffer for ModuleLoadData.
const jitLogSize = 16 << 10

// Module is code loaded into the context current when it was loaded: PTX
// (JIT-compiled by the driver for the device) or a cubin. It keeps a C
// copy of its image until Unload.
type Module struct {
	m     C.sc_module
	image unsafe.Pointer
}

// ModuleLoadData loads PTX text or a cubin image into the current context.
// PTX need not be NUL-terminated (a copy with a NUL is passed). A PTX the
// JIT rejects gives a *BuildError carrying the JIT's error log; PTX newer
// than the driver gives ErrorUnsupportedPTXVersion.
func ModuleLoadData(image []byte) (Module, error) {
	t := drv()
	if t == nil {
		return Module{}, ErrNotLoaded
	}
	if len(image) == 0 {
		return Module{}, &Error{Lib: LibDriver, Call: "cuModuleLoadDataEx", Code: int(ErrorInvalidImage), Name: ErrorInvalidImage.String(), Text: "empty image"}
	}
	img := C.malloc(C.size_t(len(image) + 1))
	if img == nil {
		return Module{}, &Error{Lib: LibDriver, Call: "cuModuleLoadDataEx", Code: int(ErrorOutOfMemory), Name: ErrorOutOfMemory.String()}
	}
	C.memcpy(img, unsafe.Pointer(&image[0]), C.size_t(len(image)))
	*(*byte)(unsafe.Add(img, len(image))) = 0
	log := (*C.char)(C.calloc(jitLogSize, 1))
	defer C.free(unsafe.Pointer(log))
	var m C.sc_module
	r := C.sc_cuModuleLoad(t, &m, img, log, jitLogSize)
	if err := check(t, "cuModuleLoadDataEx", r); err != nil {
		C.free(img)
		if l := strings.TrimSpace(C.GoString(log)); l != "" {
			return Module{}, &BuildError{Err: err.(*Error), Log: l}
		}
		return Module{}, err
	}
	return Module{m: m, image: img}, nil
}

// Unload unloads the module (once; its Functions become invalid).
func (m Module) Unload() error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	err := check(t, "cuModuleUnload", C.sc_cuModuleUnload(t, m.m))
	if m.image != nil {
		C.free(m.image)
	}
	return err
}

// Function is a kernel (a __global__ function) of a module.
type Function struct{ f C.sc_function }

// Function finds the kernel called name: the extern "C" name, or the
// mangled name of a C++ kernel. A missing kernel gives ErrorNotFound.
func (m Module) Function(name string) (Function, error) {
	t := drv()
	if t == nil {
		return Function{}, ErrNotLoaded
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.sc_function
	if err := check(t, "cuModuleGetFunction", C.sc_cuModuleGetFunction(t, &f, m.m, cs)); err != nil {
		e := err.(*Error)
		e.Text = strings.TrimSpace(e.Text + " (kernel " + name + ")")
		return Function{}, e
	}
	return Function{f}, nil
}

// FunctionAttribute is a CUfunction_attribute.
type FunctionAttribute int

// Function attributes (CU_FUNC_ATTRIBUTE_*).
const (
	FuncMaxThreadsPerBlock        FunctionAttribute = 0
	FuncSharedSizeBytes           FunctionAttribute = 1
	FuncConstSizeBytes            FunctionAttribute = 2
	FuncLocalSizeBytes            FunctionAttribute = 3
	FuncNumRegs                   FunctionAttribute = 4
	FuncPTXVersion                FunctionAttribute = 5
	FuncBinaryVersion             FunctionAttribute = 6
	FuncMaxDynamicSharedSizeBytes FunctionAttribute = 8
)

// Attribute queries one attribute of the kernel (FuncMaxThreadsPerBlock
// bounds the block size a launch may use).
func (f Function) Attribute(a FunctionAttribute) (int, error) {
	t := drv()
	if t == nil {
		return 0, ErrNotLoaded
	}
	var v C.int
	err := check(t, "cuFuncGetAttribute", C.sc_cuFuncGetAttribute(t, &v, C.int(a), f.f))
	return int(v), err
}

// Dim3 is a grid or block shape; a zero dimension counts as 1.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) c() (x, y, z C.uint) {
	one := func(v uint32) C.uint {
		if v == 0 {
			return 1
		}
		return C.uint(v)
	}
	return one(d.X), one(d.Y), one(d.Z)
}

// LaunchKernel queues f on stream s over grid blocks of block threads with
// sharedMem bytes of dynamic shared memory. params has one entry per
// kernel parameter, each pointing to the parameter's value (a DevicePtr,
// an int32, a float32...), exactly as cuLaunchKernel's kernelParams: for
//
//	__global__ void scal(float *x, int n, float a)
//
// pass []unsafe.Pointer{unsafe.Pointer(&x), unsafe.Pointer(&n),
// unsafe.Pointer(&a)} with x a DevicePtr, n an int32, a a float32. The
// values are read before LaunchKernel returns. Go values are pinned for
// the call, so the array of pointers may be Go memory.
func LaunchKernel(f Function, grid, block Dim3, sharedMem uint32, s Stream, params []unsafe.Pointer) error {
	t := drv()
	if t == nil {
		return ErrNotLoaded
	}
	// The void** array is a copy (on the stack for up to 16 parameters):
	// cgo checks the whole array passed, and a caller's slice may hold
	// stale pointers past its length.
	var small [16]unsafe.Pointer
	var arr []unsafe.Pointer
	if len(params) <= len(small) {
		arr = small[:len(params)]
	} else {
		arr = make([]unsafe.Pointer, len(params))
	}
	var pp *unsafe.Pointer
	var pin runtime.Pinner
	if len(params) > 0 {
		for i, p := range params {
			if p == nil {
				return errors.New("cu: LaunchKernel: nil kernel parameter pointer")
			}
			pin.Pin(p)
			arr[i] = p
		}
		defer pin.Unpin()
		pp = &arr[0]
	}
	gx, gy, gz := grid.c()
	bx, by, bz := block.c()
	return check(t, "cuLaunchKernel", C.sc_cuLaunchKernel(t, f.f, gx, gy, gz, bx, by, bz, C.uint(sharedMem), s.s, pp))
}
