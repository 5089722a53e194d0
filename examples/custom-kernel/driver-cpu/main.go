// Command driver-cpu is a CPU driver plugin built with the SDK: the standard
// BLAS kernel library plus one kernel of our own, "clamp_f32". Build it into
// a plugin directory next to sched-ws and point the runtime there.
package main

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

// clamp limits every element of a float32 vector to [lo, hi], given as two
// little-endian float32 in the task's argument.
func clamp(ctx *kernel.Context) error {
	if len(ctx.Buffers) != 1 || ctx.Buffers[0].Interface != kernel.Vector || ctx.Buffers[0].ElemSize != 4 {
		return fmt.Errorf("clamp_f32: want one float32 vector")
	}
	if len(ctx.Arg) != 8 {
		return fmt.Errorf("clamp_f32: argument is %d bytes, want 8 (lo, hi float32)", len(ctx.Arg))
	}
	lo := math.Float32frombits(binary.LittleEndian.Uint32(ctx.Arg))
	hi := math.Float32frombits(binary.LittleEndian.Uint32(ctx.Arg[4:]))
	x := ctx.Buffers[0].Float32s()[:ctx.Buffers[0].NX]
	for i, v := range x {
		x[i] = min(max(v, lo), hi)
	}
	return nil
}

func main() {
	cpudriver.Serve(
		cpudriver.WithKernels(kernels.Library()...),
		cpudriver.WithKernels(kernel.Kernel{Name: "clamp_f32", Func: clamp}),
		cpudriver.WithSetup(func() { blas.SetNumThreads(1) }),
	)
}
