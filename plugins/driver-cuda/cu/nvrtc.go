package cu

/*
#include <stdlib.h>
#include "cushim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// nvrtcTable is NVRTC's table, or the reason it is not loaded.
func nvrtcTable() (*C.sc_nvrtc, error) {
	s := current.Load()
	if s == nil || s.drv == nil {
		return nil, ErrNotLoaded
	}
	if s.nvrtc == nil {
		return nil, fmt.Errorf("%w: %w", ErrNotLoaded, s.libs.NVRTC.Err)
	}
	return s.nvrtc, nil
}

func nvrtcCheck(t *C.sc_nvrtc, call string, r C.sc_nvrtc_result) error {
	if r == 0 {
		return nil
	}
	e := &Error{Lib: LibNVRTC, Call: call, Code: int(r), Name: NVRTCResult(r).String()}
	if s := C.sc_nvrtcGetErrorString(t, C.int(r)); s != nil {
		e.Name = C.GoString(s)
	}
	return e
}

// NVRTCVersion is the loaded NVRTC's version, 13.0 say. PTX from an NVRTC
// newer than the driver does not load (ErrorUnsupportedPTXVersion):
// compile for a real architecture (sm_90) to get a cubin instead.
func NVRTCVersion() (major, minor int, err error) {
	t, err := nvrtcTable()
	if err != nil {
		return 0, 0, err
	}
	var ma, mi C.int
	err = nvrtcCheck(t, "nvrtcVersion", C.sc_nvrtcVersion(t, &ma, &mi))
	return int(ma), int(mi), err
}

// Program is CUDA C compiled by NVRTC.
type Program struct {
	// PTX is the PTX text (without a trailing NUL), empty when the
	// compilation targeted a real architecture only.
	PTX []byte
	// CUBIN is the cubin when the compilation targeted a real
	// architecture (--gpu-architecture=sm_90), else empty.
	CUBIN []byte
	// Log is the compiler's log (warnings), often empty.
	Log string
}

// Image is what ModuleLoadData takes: the cubin if there is one, else
// the PTX.
func (p *Program) Image() []byte {
	if len(p.CUBIN) > 0 {
		return p.CUBIN
	}
	return p.PTX
}

// Compile compiles CUDA C source (name is the file name its messages
// use, "scal.cu") with NVRTC options such as "--gpu-architecture=compute_90"
// (PTX, JIT-compiled at load) or "--gpu-architecture=sm_90" (a cubin),
// "-default-device", "--use_fast_math". Kernels should be extern "C" so
// Module.Function finds them by their plain name. A compilation error is a
// *BuildError carrying NVRTC's log. No context is needed.
func Compile(src, name string, options ...string) (*Program, error) {
	t, err := nvrtcTable()
	if err != nil {
		return nil, err
	}
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var prog C.sc_nvrtc_program
	if err := nvrtcCheck(t, "nvrtcCreateProgram", C.sc_nvrtcCreateProgram(t, &prog, csrc, cname)); err != nil {
		return nil, err
	}
	defer C.sc_nvrtcDestroyProgram(t, &prog)

	// The options array lives in C memory: it holds C pointers only.
	var opts **C.char
	if n := len(options); n > 0 {
		opts = (**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		arr := unsafe.Slice(opts, n)
		for i, o := range options {
			arr[i] = C.CString(o)
		}
		defer func() {
			for _, p := range arr {
				C.free(unsafe.Pointer(p))
			}
			C.free(unsafe.Pointer(opts))
		}()
	}
	r := C.sc_nvrtcCompileProgram(t, prog, C.int(len(options)), opts)
	p := &Program{Log: programLog(t, prog)}
	if err := nvrtcCheck(t, "nvrtcCompileProgram", r); err != nil {
		return nil, &BuildError{Err: err.(*Error), Log: p.Log}
	}
	var ptxErr error
	var n C.size_t
	if ptxErr = nvrtcCheck(t, "nvrtcGetPTXSize", C.sc_nvrtcGetPTXSize(t, prog, &n)); ptxErr == nil && n > 1 {
		buf := make([]byte, n)
		if ptxErr = nvrtcCheck(t, "nvrtcGetPTX", C.sc_nvrtcGetPTX(t, prog, (*C.char)(unsafe.Pointer(&buf[0])))); ptxErr == nil {
			p.PTX = cBytes(buf)
		}
	}
	if t.nvrtcGetCUBINSize != nil && t.nvrtcGetCUBIN != nil {
		n = 0
		if C.sc_nvrtcGetCUBINSize(t, prog, &n) == 0 && n > 0 {
			buf := make([]byte, n)
			if C.sc_nvrtcGetCUBIN(t, prog, (*C.char)(unsafe.Pointer(&buf[0]))) == 0 {
				p.CUBIN = buf
			}
		}
	}
	if len(p.PTX) == 0 && len(p.CUBIN) == 0 {
		if ptxErr == nil {
			ptxErr = &Error{Lib: LibNVRTC, Call: "nvrtcGetPTX", Code: 4, Name: NVRTCResult(4).String()}
		}
		return nil, ptxErr
	}
	return p, nil
}

func programLog(t *C.sc_nvrtc, prog C.sc_nvrtc_program) string {
	var n C.size_t
	if C.sc_nvrtcGetProgramLogSize(t, prog, &n) != 0 || n <= 1 {
		return ""
	}
	buf := make([]byte, n)
	if C.sc_nvrtcGetProgramLog(t, prog, (*C.char)(unsafe.Pointer(&buf[0]))) != 0 {
		return ""
	}
	return string(cBytes(buf))
}

// cBytes is b up to its first NUL.
func cBytes(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
