package cl

// #include <CL/cl.h>
import "C"

import "fmt"

// Error is a failed OpenCL call: which call and the status code it returned
// (or, for a command that failed while running, the negative execution
// status of its event).
type Error struct {
	// Call is the OpenCL function, "clEnqueueNDRangeKernel".
	Call string
	// Code is the status, CL_INVALID_WORK_GROUP_SIZE (-54) and the like.
	Code int32
}

// Error reads "clEnqueueNDRangeKernel: CL_INVALID_WORK_GROUP_SIZE (-54)".
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.Call, CodeName(e.Code), e.Code)
}

// Is makes errors.Is(err, &Error{Code: c}) match any call failing with c,
// and errors.Is(err, &Error{Call: f, Code: c}) the call f only.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Call == "" || t.Call == e.Call)
}

// check turns a status code into an *Error naming call, or nil on success.
func check(call string, code C.cl_int) error {
	if code == C.CL_SUCCESS {
		return nil
	}
	return &Error{Call: call, Code: int32(code)}
}

// Status codes the driver tests for by name.
const (
	Success                    int32 = 0
	DeviceNotFound             int32 = -1
	MemObjectAllocationFailure int32 = -4
	OutOfResources             int32 = -5
	BuildProgramFailure        int32 = -11
	InvalidArgIndex            int32 = -49
	InvalidArgSize             int32 = -51
	InvalidKernelArgs          int32 = -52
	InvalidWorkGroupSize       int32 = -54
	InvalidBufferSize          int32 = -61
	PlatformNotFoundKHR        int32 = -1001
)

var codeNames = map[int32]string{
	0:     "CL_SUCCESS",
	-1:    "CL_DEVICE_NOT_FOUND",
	-2:    "CL_DEVICE_NOT_AVAILABLE",
	-3:    "CL_COMPILER_NOT_AVAILABLE",
	-4:    "CL_MEM_OBJECT_ALLOCATION_FAILURE",
	-5:    "CL_OUT_OF_RESOURCES",
	-6:    "CL_OUT_OF_HOST_MEMORY",
	-7:    "CL_PROFILING_INFO_NOT_AVAILABLE",
	-8:    "CL_MEM_COPY_OVERLAP",
	-9:    "CL_IMAGE_FORMAT_MISMATCH",
	-10:   "CL_IMAGE_FORMAT_NOT_SUPPORTED",
	-11:   "CL_BUILD_PROGRAM_FAILURE",
	-12:   "CL_MAP_FAILURE",
	-13:   "CL_MISALIGNED_SUB_BUFFER_OFFSET",
	-14:   "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
	-15:   "CL_COMPILE_PROGRAM_FAILURE",
	-16:   "CL_LINKER_NOT_AVAILABLE",
	-17:   "CL_LINK_PROGRAM_FAILURE",
	-18:   "CL_DEVICE_PARTITION_FAILED",
	-19:   "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
	-30:   "CL_INVALID_VALUE",
	-31:   "CL_INVALID_DEVICE_TYPE",
	-32:   "CL_INVALID_PLATFORM",
	-33:   "CL_INVALID_DEVICE",
	-34:   "CL_INVALID_CONTEXT",
	-35:   "CL_INVALID_QUEUE_PROPERTIES",
	-36:   "CL_INVALID_COMMAND_QUEUE",
	-37:   "CL_INVALID_HOST_PTR",
	-38:   "CL_INVALID_MEM_OBJECT",
	-39:   "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
	-40:   "CL_INVALID_IMAGE_SIZE",
	-41:   "CL_INVALID_SAMPLER",
	-42:   "CL_INVALID_BINARY",
	-43:   "CL_INVALID_BUILD_OPTIONS",
	-44:   "CL_INVALID_PROGRAM",
	-45:   "CL_INVALID_PROGRAM_EXECUTABLE",
	-46:   "CL_INVALID_KERNEL_NAME",
	-47:   "CL_INVALID_KERNEL_DEFINITION",
	-48:   "CL_INVALID_KERNEL",
	-49:   "CL_INVALID_ARG_INDEX",
	-50:   "CL_INVALID_ARG_VALUE",
	-51:   "CL_INVALID_ARG_SIZE",
	-52:   "CL_INVALID_KERNEL_ARGS",
	-53:   "CL_INVALID_WORK_DIMENSION",
	-54:   "CL_INVALID_WORK_GROUP_SIZE",
	-55:   "CL_INVALID_WORK_ITEM_SIZE",
	-56:   "CL_INVALID_GLOBAL_OFFSET",
	-57:   "CL_INVALID_EVENT_WAIT_LIST",
	-58:   "CL_INVALID_EVENT",
	-59:   "CL_INVALID_OPERATION",
	-60:   "CL_INVALID_GL_OBJECT",
	-61:   "CL_INVALID_BUFFER_SIZE",
	-62:   "CL_INVALID_MIP_LEVEL",
	-63:   "CL_INVALID_GLOBAL_WORK_SIZE",
	-64:   "CL_INVALID_PROPERTY",
	-65:   "CL_INVALID_IMAGE_DESCRIPTOR",
	-66:   "CL_INVALID_COMPILER_OPTIONS",
	-67:   "CL_INVALID_LINKER_OPTIONS",
	-68:   "CL_INVALID_DEVICE_PARTITION_COUNT",
	-69:   "CL_INVALID_PIPE_SIZE",
	-70:   "CL_INVALID_DEVICE_QUEUE",
	-71:   "CL_INVALID_SPEC_ID",
	-72:   "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
	-1001: "CL_PLATFORM_NOT_FOUND_KHR",
	-1057: "CL_DEVICE_PARTITION_FAILED_EXT",
	-1121: "CL_CONTEXT_TERMINATED_KHR",
}

// CodeName is the CL_ name of a status code, or "unknown OpenCL error" for
// a code this package does not know (vendor extensions).
func CodeName(code int32) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return "unknown OpenCL error"
}
