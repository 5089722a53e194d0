package cldriver

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// The driver's side of the binding's benchmarks (package cl): the same 64
// MiB moved and scaled through the dispatch and completion rings of a
// plugin process, so that the cost of the runtime's path shows against the
// raw OpenCL figures.

const benchBytes = 64 << 20

func benchRig(b *testing.B) (*drivertest.Worker, uint64) {
	r := startRig(b, modes[1])
	s := r.RAM(benchBytes)
	for i, x := 0, r.F32(s); i < len(x); i++ {
		x[i] = 1
	}
	r.OK(r.Alloc(1, benchBytes))
	r.OK(r.Up(s, 1))
	return r, s.Offset
}

// BenchmarkDriverWrite64MiB is a 64 MiB Copy from RAM to the device.
func BenchmarkDriverWrite64MiB(b *testing.B) {
	r, off := benchRig(b)
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.OK(r.Copy(0, 1, off, 1, wire.CopyRange{Len: benchBytes}))
	}
}

// BenchmarkDriverRead64MiB is a 64 MiB Copy from the device to RAM.
func BenchmarkDriverRead64MiB(b *testing.B) {
	r, off := benchRig(b)
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.OK(r.Copy(1, 0, 1, off, wire.CopyRange{Len: benchBytes}))
	}
}

// BenchmarkDriverScal64MiB is an Exec of scal_f32 on a 64 MiB vector
// already on the device.
func BenchmarkDriverScal64MiB(b *testing.B) {
	r, _ := benchRig(b)
	scal := r.Kernel(blasarg.ScalF32)
	arg := blasarg.ScalArg{Alpha: 1}.Encode()
	r.OK(r.Exec(scal, arg, vec(1, benchBytes/4, 4, kernel.RW))) // first launch compiles
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.OK(r.Exec(scal, arg, vec(1, benchBytes/4, 4, kernel.RW)))
	}
}

// BenchmarkDriverExecSmall is the round trip of one tiny scal_f32 Exec
// (ring, enqueue, event callback, completion): the driver's per-task
// overhead.
func BenchmarkDriverExecSmall(b *testing.B) {
	r := startRig(b, modes[1])
	r.OK(r.Alloc(1, 64))
	scal := r.Kernel(blasarg.ScalF32)
	arg := blasarg.ScalArg{Alpha: 1}.Encode()
	r.OK(r.Exec(scal, arg, vec(1, 16, 4, kernel.RW)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.OK(r.Exec(scal, arg, vec(1, 16, 4, kernel.RW)))
	}
}
