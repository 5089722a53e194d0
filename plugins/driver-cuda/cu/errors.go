package cu

import (
	"errors"
	"fmt"
	"strings"
)

// Lib names one of the libraries the package loads.
type Lib int

// The libraries.
const (
	LibDriver Lib = iota // the driver API, libcuda.so.1 (required)
	LibBLAS              // cuBLAS
	LibSolver            // cuSOLVER (dense)
	LibNVRTC             // NVRTC, the run-time CUDA C compiler
)

// String is the library's usual name: "CUDA driver", "cuBLAS", "cuSOLVER",
// "NVRTC".
func (l Lib) String() string {
	switch l {
	case LibDriver:
		return "CUDA driver"
	case LibBLAS:
		return "cuBLAS"
	case LibSolver:
		return "cuSOLVER"
	case LibNVRTC:
		return "NVRTC"
	}
	return fmt.Sprintf("Lib(%d)", int(l))
}

// Error is a failed call into one of the libraries: which call and the
// status it returned, with the library's own name for it.
type Error struct {
	// Lib is the library the call belongs to.
	Lib Lib
	// Call is the C entry point, "cuMemAlloc_v2" or "cublasSgemm_v2".
	Call string
	// Code is the CUresult, cublasStatus_t, cusolverStatus_t or nvrtcResult.
	Code int
	// Name is the library's name for Code: "CUDA_ERROR_OUT_OF_MEMORY"
	// (cuGetErrorName), "NVRTC_ERROR_COMPILATION" (nvrtcGetErrorString),
	// "CUBLAS_STATUS_EXECUTION_FAILED" (this package's table).
	Name string
	// Text is the driver's description of a CUresult (cuGetErrorString),
	// "" for the other libraries.
	Text string
}

// Status reads "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory": the name,
// code and description, without the call.
func (e *Error) Status() string {
	s := fmt.Sprintf("%s (%d)", e.Name, e.Code)
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// Error reads "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
func (e *Error) Error() string { return e.Call + ": " + e.Status() }

// Is makes errors.Is(err, cu.ErrorOutOfMemory) match a driver call that
// failed with that CUresult, and errors.Is(err, &cu.Error{Lib: l, Code: c})
// any call of library l failing with c (or only call f, if Call is set).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Result:
		return e.Lib == LibDriver && e.Code == int(t)
	case *Error:
		return t.Lib == e.Lib && t.Code == e.Code && (t.Call == "" || t.Call == e.Call)
	}
	return false
}

// Result is a CUresult, the driver API's status. It is an error so that
// errors.Is(err, cu.ErrorNoDevice) reads naturally; its text is the name.
type Result int

// CUresult values the package and its callers test for (cuda.h).
const (
	Success                          Result = 0
	ErrorInvalidValue                Result = 1
	ErrorOutOfMemory                 Result = 2
	ErrorNotInitialized              Result = 3
	ErrorDeinitialized               Result = 4
	ErrorStubLibrary                 Result = 34
	ErrorNoDevice                    Result = 100
	ErrorInvalidDevice               Result = 101
	ErrorInvalidImage                Result = 200
	ErrorInvalidContext              Result = 201
	ErrorNoBinaryForGPU              Result = 209
	ErrorInvalidPTX                  Result = 218
	ErrorUnsupportedPTXVersion       Result = 222
	ErrorInvalidHandle               Result = 400
	ErrorNotFound                    Result = 500
	ErrorNotReady                    Result = 600
	ErrorIllegalAddress              Result = 700
	ErrorLaunchOutOfResources        Result = 701
	ErrorPeerAccessAlreadyEnabled    Result = 704
	ErrorPeerAccessNotEnabled        Result = 705
	ErrorHostMemoryAlreadyRegistered Result = 712
	ErrorHostMemoryNotRegistered     Result = 713
	ErrorLaunchFailed                Result = 719
	ErrorNotSupported                Result = 801
	ErrorSystemDriverMismatch        Result = 803
	ErrorCompatNotSupportedOnDevice  Result = 804
	ErrorUnknown                     Result = 999
)

// resultNames is cuda.h's name for the CUresults; the driver's own
// cuGetErrorName is asked first, this table serves when it cannot answer.
var resultNames = map[int]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
	46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	102: "CUDA_ERROR_DEVICE_NOT_LICENSED", 200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT",
	202: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	214: "CUDA_ERROR_ECC_UNCORRECTABLE", 216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
	217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", 218: "CUDA_ERROR_INVALID_PTX",
	221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	223: "CUDA_ERROR_JIT_COMPILATION_DISABLED", 300: "CUDA_ERROR_INVALID_SOURCE", 301: "CUDA_ERROR_FILE_NOT_FOUND",
	302: "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", 303: "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
	304: "CUDA_ERROR_OPERATING_SYSTEM", 400: "CUDA_ERROR_INVALID_HANDLE", 401: "CUDA_ERROR_ILLEGAL_STATE",
	500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", 705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	708: "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", 709: "CUDA_ERROR_CONTEXT_IS_DESTROYED", 710: "CUDA_ERROR_ASSERT",
	711: "CUDA_ERROR_TOO_MANY_PEERS", 712: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	713: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", 714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION", 716: "CUDA_ERROR_MISALIGNED_ADDRESS",
	717: "CUDA_ERROR_INVALID_ADDRESS_SPACE", 718: "CUDA_ERROR_INVALID_PC", 719: "CUDA_ERROR_LAUNCH_FAILED",
	720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", 800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED",
	802: "CUDA_ERROR_SYSTEM_NOT_READY", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 909: "CUDA_ERROR_TIMEOUT", 999: "CUDA_ERROR_UNKNOWN",
}

// String is cuda.h's name, "CUDA_ERROR_NO_DEVICE", or "CUresult(n)".
func (r Result) String() string {
	if s, ok := resultNames[int(r)]; ok {
		return s
	}
	return fmt.Sprintf("CUresult(%d)", int(r))
}

// Error is the name, as String.
func (r Result) Error() string { return r.String() }

// BLASStatus is a cublasStatus_t.
type BLASStatus int

var blasStatusNames = map[int]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// String is cublas_api.h's name, "CUBLAS_STATUS_EXECUTION_FAILED".
func (s BLASStatus) String() string {
	if n, ok := blasStatusNames[int(s)]; ok {
		return n
	}
	return fmt.Sprintf("cublasStatus_t(%d)", int(s))
}

// SolverStatus is a cusolverStatus_t.
type SolverStatus int

var solverStatusNames = map[int]string{
	0: "CUSOLVER_STATUS_SUCCESS", 1: "CUSOLVER_STATUS_NOT_INITIALIZED", 2: "CUSOLVER_STATUS_ALLOC_FAILED",
	3: "CUSOLVER_STATUS_INVALID_VALUE", 4: "CUSOLVER_STATUS_ARCH_MISMATCH", 5: "CUSOLVER_STATUS_MAPPING_ERROR",
	6: "CUSOLVER_STATUS_EXECUTION_FAILED", 7: "CUSOLVER_STATUS_INTERNAL_ERROR",
	8: "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED", 9: "CUSOLVER_STATUS_NOT_SUPPORTED",
	10: "CUSOLVER_STATUS_ZERO_PIVOT", 11: "CUSOLVER_STATUS_INVALID_LICENSE", 31: "CUSOLVER_STATUS_INVALID_WORKSPACE",
}

// String is cusolver_common.h's name, "CUSOLVER_STATUS_INVALID_VALUE".
func (s SolverStatus) String() string {
	if n, ok := solverStatusNames[int(s)]; ok {
		return n
	}
	return fmt.Sprintf("cusolverStatus_t(%d)", int(s))
}

// NVRTCResult is an nvrtcResult.
type NVRTCResult int

var nvrtcResultNames = map[int]string{
	0: "NVRTC_SUCCESS", 1: "NVRTC_ERROR_OUT_OF_MEMORY", 2: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3: "NVRTC_ERROR_INVALID_INPUT", 4: "NVRTC_ERROR_INVALID_PROGRAM", 5: "NVRTC_ERROR_INVALID_OPTION",
	6: "NVRTC_ERROR_COMPILATION", 7: "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8: "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION", 9: "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", 11: "NVRTC_ERROR_INTERNAL_ERROR",
	12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
}

// String is nvrtc.h's name, "NVRTC_ERROR_COMPILATION" (NVRTC's own
// nvrtcGetErrorString is asked first when the library is loaded).
func (r NVRTCResult) String() string {
	if n, ok := nvrtcResultNames[int(r)]; ok {
		return n
	}
	return fmt.Sprintf("nvrtcResult(%d)", int(r))
}

// codeName is the table name of a status of lib.
func codeName(lib Lib, code int) string {
	switch lib {
	case LibDriver:
		return Result(code).String()
	case LibBLAS:
		return BLASStatus(code).String()
	case LibSolver:
		return SolverStatus(code).String()
	case LibNVRTC:
		return NVRTCResult(code).String()
	}
	return fmt.Sprintf("status(%d)", code)
}

// BuildError is CUDA C that NVRTC could not compile, or PTX the driver's
// JIT could not load: the failed call and the compiler's log.
type BuildError struct {
	Err *Error
	Log string
}

// Error reads "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6); build log:"
// followed by the log.
func (e *BuildError) Error() string {
	if strings.TrimSpace(e.Log) == "" {
		return e.Err.Error() + " (empty build log)"
	}
	return e.Err.Error() + "; build log:\n" + strings.TrimRight(e.Log, "\n")
}

// Unwrap gives the status.
func (e *BuildError) Unwrap() error { return e.Err }

// Attempt is one library name the loader tried.
type Attempt struct {
	// Name is what was passed to dlopen: a soname or a path.
	Name string
	// Path is the file the dynamic linker opened ("" when none).
	Path string
	// Err is dlerror's text when the library did not open, or when it
	// lacked a symbol, the text for the first missing one.
	Err string
	// Missing lists the required entry points the library lacks.
	Missing []string
	// DriverVersion is what a driver library lacking entry points says
	// its version is (cuDriverGetVersion), 0 if it could not say.
	DriverVersion int
}

// LoadError is a library that could not be loaded: none of the names tried
// opened, or the one that opened lacks entry points the package needs.
type LoadError struct {
	Lib      Lib
	Attempts []Attempt
}

// Error reads "libcuda.so.1 not found (libcuda.so.1: cannot open shared
// object file: No such file or directory)" when nothing opened, or
// "libm.so.6 (/lib/x86_64-linux-gnu/libm.so.6) is not a CUDA driver
// library: it lacks cuGetErrorName and 45 more entry points
// (...: undefined symbol: cuGetErrorName)".
func (e *LoadError) Error() string {
	var opened *Attempt
	var notFound []string
	for i := range e.Attempts {
		a := &e.Attempts[i]
		if len(a.Missing) > 0 {
			if opened == nil {
				opened = a
			}
			continue
		}
		notFound = append(notFound, a.Err)
	}
	if opened != nil {
		name := opened.Name
		if opened.Path != "" && opened.Path != opened.Name {
			name += " (" + opened.Path + ")"
		}
		s := fmt.Sprintf("%s is not a usable %s library: it lacks %s", name, e.Lib, opened.Missing[0])
		if n := len(opened.Missing) - 1; n > 0 {
			s += fmt.Sprintf(" and %d more entry points", n)
		}
		if opened.Err != "" {
			s += " (" + opened.Err + ")"
		}
		if len(notFound) > 0 {
			s += "; not found: " + strings.Join(notFound, "; ")
		}
		return s
	}
	if len(e.Attempts) == 1 {
		return fmt.Sprintf("%s not found (%s)", e.Attempts[0].Name, e.Attempts[0].Err)
	}
	if len(e.Attempts) == 0 {
		return fmt.Sprintf("%s not found (no library names to try)", e.Lib)
	}
	return fmt.Sprintf("%s not found (%s)", e.Lib, strings.Join(notFound, "; "))
}

// Missing is the first attempt's list of missing entry points, nil when no
// library opened.
func (e *LoadError) Missing() []string {
	for _, a := range e.Attempts {
		if len(a.Missing) > 0 {
			return a.Missing
		}
	}
	return nil
}

// VersionError is a driver older than the package (or the caller) needs.
type VersionError struct {
	// Version is cuDriverGetVersion's answer, 12040 for CUDA 12.4.
	Version int
	// Min is the oldest version accepted.
	Min int
	// Err is the *LoadError of a driver so old it lacks entry points, nil
	// when it has them all.
	Err error
}

// Error reads "driver version 11.4 is older than the 12.0 this driver
// needs", followed by the missing entry points if there are any.
func (e *VersionError) Error() string {
	s := fmt.Sprintf("driver version %s is older than the %s this driver needs", VersionString(e.Version), VersionString(e.Min))
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

// Unwrap gives the load error, if any.
func (e *VersionError) Unwrap() error { return e.Err }

// ErrNotLoaded is returned by every call made before Init (or Load) has
// loaded the driver library, and by BLAS, Solver and NVRTC calls whose
// library did not load (wrapped with the *LoadError that says why).
var ErrNotLoaded = errors.New("cu: CUDA library not loaded (call cu.Init first)")

// reasonError is a probe's one-line reason wrapping the error behind it.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.reason }
func (e *reasonError) Unwrap() error { return e.err }

// VersionString renders a CUDA version number as "major.minor": 13000 is
// "13.0", 12080 "12.8".
func VersionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
