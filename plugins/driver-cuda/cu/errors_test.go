package cu

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorFormatting(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"driver with text", &Error{Lib: LibDriver, Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory"},
			"cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"driver from table", driverError(nil, "cuInit", 100), "cuInit: CUDA_ERROR_NO_DEVICE (100)"},
		{"driver unknown code", driverError(nil, "cuInit", 12345), "cuInit: CUresult(12345) (12345)"},
		{"cuBLAS", blasCheck("cublasSgemm_v2", 13), "cublasSgemm_v2: CUBLAS_STATUS_EXECUTION_FAILED (13)"},
		{"cuBLAS unknown", blasCheck("cublasSgemm_v2", 99), "cublasSgemm_v2: cublasStatus_t(99) (99)"},
		{"cuSOLVER", solverCheck("cusolverDnSpotrf", 3), "cusolverDnSpotrf: CUSOLVER_STATUS_INVALID_VALUE (3)"},
		{"NVRTC build", &BuildError{Err: &Error{Lib: LibNVRTC, Call: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION"},
			Log: "k.cu(1): error: identifier \"x\" is undefined\n\n"},
			"nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6); build log:\nk.cu(1): error: identifier \"x\" is undefined"},
		{"empty build log", &BuildError{Err: &Error{Lib: LibDriver, Call: "cuModuleLoadDataEx", Code: 218, Name: "CUDA_ERROR_INVALID_PTX"}},
			"cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218) (empty build log)"},
		{"not found, one name", &LoadError{Lib: LibDriver, Attempts: []Attempt{{Name: "libcuda.so.1",
			Err: "libcuda.so.1: cannot open shared object file: No such file or directory"}}},
			"libcuda.so.1 not found (libcuda.so.1: cannot open shared object file: No such file or directory)"},
		{"not found, several names", &LoadError{Lib: LibBLAS, Attempts: []Attempt{{Name: "libcublas.so.13", Err: "libcublas.so.13: nope"},
			{Name: "libcublas.so.12", Err: "libcublas.so.12: nope"}}},
			"cuBLAS not found (libcublas.so.13: nope; libcublas.so.12: nope)"},
		{"lacks symbols", &LoadError{Lib: LibDriver, Attempts: []Attempt{{Name: "libm.so.6", Path: "/lib/libm.so.6",
			Err: "/lib/libm.so.6: undefined symbol: cuGetErrorName", Missing: []string{"cuGetErrorName", "cuInit", "cuMemAlloc_v2"}}}},
			"libm.so.6 (/lib/libm.so.6) is not a usable CUDA driver library: it lacks cuGetErrorName and 2 more entry points (/lib/libm.so.6: undefined symbol: cuGetErrorName)"},
		{"lacks one symbol", &LoadError{Lib: LibNVRTC, Attempts: []Attempt{{Name: "libnvrtc.so.13", Err: "x", Missing: []string{"nvrtcGetPTX"}}}},
			"libnvrtc.so.13 is not a usable NVRTC library: it lacks nvrtcGetPTX (x)"},
		{"too old", &VersionError{Version: 11040, Min: 12000}, "driver version 11.4 is older than the 12.0 this driver needs"},
		{"too old, wraps", &VersionError{Version: 10020, Min: 12000, Err: errors.New("libcuda.so.1 lacks x")},
			"driver version 10.2 is older than the 12.0 this driver needs (libcuda.so.1 lacks x)"},
		{"probe reason", &reasonError{reason: "cuInit failed: CUDA_ERROR_NO_DEVICE (100)", err: ErrorNoDevice}, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	oom := driverError(nil, "cuMemAlloc_v2", 2)
	wrapped := fmt.Errorf("alloc 1 GiB: %w", oom)
	for _, tc := range []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"result", wrapped, ErrorOutOfMemory, true},
		{"other result", wrapped, ErrorNoDevice, false},
		{"error by code", wrapped, &Error{Lib: LibDriver, Code: 2}, true},
		{"error by call", wrapped, &Error{Lib: LibDriver, Call: "cuMemAlloc_v2", Code: 2}, true},
		{"error other call", wrapped, &Error{Lib: LibDriver, Call: "cuMemFree_v2", Code: 2}, false},
		{"other library same code", blasCheck("cublasSgemm_v2", 2), ErrorOutOfMemory, false},
		{"blas by code", blasCheck("cublasSgemm_v2", 13), &Error{Lib: LibBLAS, Code: 13}, true},
		{"build error unwraps", &BuildError{Err: driverError(nil, "cuModuleLoadDataEx", 218).(*Error)}, ErrorInvalidPTX, true},
		{"probe reason unwraps", &reasonError{reason: "x", err: driverError(nil, "cuInit", 100)}, ErrorNoDevice, true},
		{"version error", &VersionError{Version: 1, Min: 2, Err: &LoadError{}}, &LoadError{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(tc.err, tc.target); got != tc.want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.err, tc.target, got, tc.want)
			}
		})
	}
	var le *LoadError
	if !errors.As(&VersionError{Err: &LoadError{Lib: LibDriver}}, &le) || le.Lib != LibDriver {
		t.Error("errors.As does not find the LoadError under a VersionError")
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{VersionString(13000), "13.0"},
		{VersionString(12080), "12.8"},
		{VersionString(11040), "11.4"},
		{VersionString(13010), "13.1"},
		{ErrorNoDevice.String(), "CUDA_ERROR_NO_DEVICE"},
		{ErrorNotReady.Error(), "CUDA_ERROR_NOT_READY"},
		{Result(-7).String(), "CUresult(-7)"},
		{BLASStatus(7).String(), "CUBLAS_STATUS_INVALID_VALUE"},
		{SolverStatus(10).String(), "CUSOLVER_STATUS_ZERO_PIVOT"},
		{NVRTCResult(6).String(), "NVRTC_ERROR_COMPILATION"},
		{LibDriver.String(), "CUDA driver"},
		{LibBLAS.String(), "cuBLAS"},
		{LibSolver.String(), "cuSOLVER"},
		{LibNVRTC.String(), "NVRTC"},
		{Lib(9).String(), "Lib(9)"},
		{codeName(LibSolver, 0), "CUSOLVER_STATUS_SUCCESS"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
