// The C side of event callbacks: OpenCL calls eventDone on one of its own
// threads; it hands the tag and status to Go.
#include <stdint.h>
#include <CL/cl.h>
#include "_cgo_export.h"

static void CL_CALLBACK eventDone(cl_event e, cl_int status, void *user) {
	(void)e;
	goEventDone((uintptr_t)user, status);
}

cl_int starpuSetEventDone(cl_event e, uintptr_t tag) {
	return clSetEventCallback(e, CL_COMPLETE, eventDone, (void *)tag);
}
