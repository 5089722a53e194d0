package main

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestConformance runs the driver kit's conformance suite on the
// driver-cpu binary as the runtime starts it, with its BLAS library: the
// tasks scale 1024 floats by 1 through OpenBLAS. The failing-kernel
// scenario runs in cpudriver's tests, whose test plugin hosts a kernel
// that fails with the suite's message.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Harness{
		Start:  drivertest.Plugin(drivertest.Build(t, ".", t.TempDir(), "cpu")),
		Config: base.Config{"bind": false, "units": int64(2)},
		OK: func(w *drivertest.Worker) drivertest.Task {
			s := w.RAM(4 << 10)
			return drivertest.Task{Kernel: w.Kernel(blasarg.ScalF32), Arg: blasarg.ScalArg{Alpha: 1}.Encode(),
				Buffers: []wire.BufferDesc{drivertest.Vec(0, s.Offset, 1<<10, 4, kernel.RW)}}
		},
	})
}
