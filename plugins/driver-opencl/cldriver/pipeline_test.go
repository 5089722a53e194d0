package cldriver

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// spinSource is a kernel that runs a dependent chain of iters
// floating-point steps on one element: long enough, at 2e8 steps, that the
// test sees whether the worker takes its next task meanwhile.
const spinSource = `kernel void spin(global float *x, uint n, uint iters) {
	float v = x[0];
	for (uint i = 0; i < iters; i++) v = v * 1.0000001f + 1e-7f;
	x[get_global_id(0)] = v;
}`

// TestPipeline checks StarPU's rule for device tasks: a task flagged
// asynchronous (wire.ExecAsync) lets the worker take its next task while it
// runs; an unflagged one, or any with STARPU_OPENCL_PIPELINE=0, is the
// last the worker takes until it ends.
func TestPipeline(t *testing.T) {
	cases := []struct {
		name    string
		flags   uint32
		env     []string
		overlap bool
	}{
		{"sync", 0, nil, false},
		{"async", wire.ExecAsync, nil, true},
		{"async with pipeline 0", wire.ExecAsync, []string{EnvPipeline + "=0"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := startRig(t, modes[0], c.env...)
			idx, err := w.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "spin", Source: spinSource})
			if err != nil {
				t.Fatal(err)
			}
			buf := w.Buffer()
			w.OK(w.Alloc(buf, 4))
			iters := func(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }
			x := []wire.BufferDesc{vec(buf, 1, 4, kernel.RW)}
			slow := w.Run(drivertest.Task{Kernel: idx, Flags: c.flags, Arg: iters(2e8), Buffers: x}, false)
			next := w.Run(drivertest.Task{Kernel: idx, Flags: c.flags, Arg: iters(1), Buffers: x}, false)
			// The worker took the next task while the slow one ran if the
			// dispatch ring drained before any completion came. Drained is
			// read first: a completion posted before the ring drained is
			// then seen.
			overlap := false
			for deadline := time.Now().Add(time.Minute); ; {
				if w.Dispatch.Drained() {
					overlap = w.Completion.Empty()
					break
				}
				if !w.Completion.Empty() || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Microsecond)
			}
			w.OK(slow, next)
			if overlap != c.overlap {
				t.Fatalf("next task taken while the slow one ran: %v, want %v", overlap, c.overlap)
			}
		})
	}
}
