package cldriver

import (
	"fmt"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestConformance runs the driver kit's conformance suite on the OpenCL
// driver, in process and as a plugin process, on the machine's OpenCL
// devices (pocl's CPU device allowed). The task scales a vector of 16
// floats on the worker's device; the failing task calls a kernel, built
// from source and named after the suite's message, with one argument too
// many, which the driver reports naming the kernel.
func TestConformance(t *testing.T) {
	needDevice(t)
	h := drivertest.Harness{
		Env: []string{EnvOnCPUs + "=1"},
		OK: func(w *drivertest.Worker) drivertest.Task {
			buf := w.Buffer()
			w.OK(w.Alloc(buf, 64))
			return drivertest.Task{Kernel: w.Kernel(blasarg.ScalF32), Arg: blasarg.ScalArg{Alpha: 1}.Encode(),
				Buffers: []wire.BufferDesc{drivertest.Vec(uint8(w.Node), buf, 16, 4, kernel.RW)}}
		},
		Fail: func(w *drivertest.Worker, msg string) drivertest.Task {
			src := fmt.Sprintf("kernel void %s(global float *x, uint n) { x[get_global_id(0)] = 0; }", msg)
			idx, err := w.Driver.LoadKernel(w.Ctx(), driver.KernelSource{Name: msg, Source: src})
			if err != nil {
				w.T.Fatalf("load a kernel named by a %d-byte message: %v", len(msg), err)
			}
			buf := w.Buffer()
			w.OK(w.Alloc(buf, 64))
			return drivertest.Task{Kernel: idx, Arg: []byte{1, 2, 3, 4},
				Buffers: []wire.BufferDesc{drivertest.Vec(uint8(w.Node), buf, 16, 4, kernel.RW)}}
		},
	}
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			h := h
			h.Start = md.start
			drivertest.Run(t, h)
		})
	}
}
