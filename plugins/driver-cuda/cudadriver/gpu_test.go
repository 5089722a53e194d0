package cudadriver

import (
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// Tests that need a real GPU: they skip with Probe's reason elsewhere.
// Run them from a `go test -c` binary on the GPU machine with
// -test.run=GPU -test.v; STARPU_TEST_DRIVER_CUDA names a driver-cuda
// binary for the plugin-process tests there.

// TestGPUCopyBandwidth measures RAM<->GPU copies through the driver with
// the arena pinned and not, for the figures in docs/design/cuda.md.
func TestGPUCopyBandwidth(t *testing.T) {
	needGPU(t)
	const size = 256 << 20
	for _, pin := range []string{"0", "1"} {
		t.Run("pin="+pin, func(t *testing.T) {
			r := drivertest.Start(t, inProcess, drivertest.Env(EnvPin+"="+pin), drivertest.ArenaSize(1<<30, 16<<20), drivertest.Timeout(time.Minute))
			w := r.W(0)
			s := w.RAM(size)
			buf := w.Buffer()
			w.OK(w.Alloc(buf, size))
			w.OK(w.Up(s, buf)) // warm
			for _, dir := range []string{"up", "down"} {
				start := time.Now()
				const rounds = 8
				for i := 0; i < rounds; i++ {
					if dir == "up" {
						w.OK(w.Up(s, buf))
					} else {
						w.OK(w.Down(buf, s))
					}
				}
				el := time.Since(start)
				t.Logf("pin=%s %s: %.2f GB/s", pin, dir, float64(rounds*size)/el.Seconds()/1e9)
			}
		})
	}
}

// TestGPUGemmRate runs a large SGEMM through the driver and reports its
// rate, against which cuBLAS's own is to be compared.
func TestGPUGemmRate(t *testing.T) {
	needGPU(t)
	w := startRig(t, modes[0])
	const n = 8192
	bufs := make([]wire.BufferDesc, 3)
	for i := range bufs {
		b := w.Buffer()
		w.OK(w.Alloc(b, n*n*4))
		bufs[i] = mat(b, n, n, n, 4, kernel.RW)
	}
	arg := blasarg.GemmArg{Alpha: 1, Beta: 0}.Encode()
	k := w.Kernel(blasarg.GemmF32)
	w.OK(w.Exec(k, arg, bufs...))
	start := time.Now()
	const rounds = 10
	var ids []uint64
	for i := 0; i < rounds; i++ {
		ids = append(ids, w.Run(drivertest.Task{Kernel: k, Arg: arg, Flags: wire.ExecAsync, Buffers: bufs}, false))
	}
	w.OK(ids...)
	el := time.Since(start)
	t.Logf("SGEMM %d: %.1f TFlop/s through the driver", n, 2*float64(n)*n*n*rounds/el.Seconds()/1e12)
}
