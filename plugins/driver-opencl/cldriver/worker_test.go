package cldriver

import (
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
)

// TestRetireOrder drives a worker's bookkeeping by hand with user events,
// completing them against the dependency order: completions must still go
// out in dependency order, and a failed command must name its call.
func TestRetireOrder(t *testing.T) {
	needDevice(t)
	a := newArena(t)
	d := inProcess(t, a, []string{EnvOnCPUs + "=1"}).(*Driver)
	d.mu.Lock()
	if _, err := d.freeze(); err != nil {
		t.Fatal(err)
	}
	dev, err := d.openDevice(0)
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.close() })
	spec := driver.WorkerSpec{ID: 1}
	_, spec.Dispatch = drivertest.CarveRing(t, a, 1<<12)
	completion, cs := drivertest.CarveRing(t, a, 1<<12)
	spec.Completion = cs
	_, spec.Bell = drivertest.CarveBell(t, a)
	_, spec.CoreBell = drivertest.CarveBell(t, a)
	w, err := d.newWorker(spec, dev, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.sink.Close()

	// Three flights: 2 depends on 1, 3 on 2.
	evs := make([]cl.Event, 3)
	for i := range evs {
		if evs[i], err = dev.ctx.CreateUserEvent(); err != nil {
			t.Fatal(err)
		}
		w.after = w.after[:0]
		if i > 0 {
			w.after = append(w.after, w.seq)
		}
		if err := w.launch(flight{id: uint64(10 + i), ev: evs[i], what: "test", call: "clEnqueueTest"}); err != nil {
			t.Fatal(err)
		}
	}
	posted := func() []wire.Completion {
		var out []wire.Completion
		for msg := completion.Peek(); msg != nil; msg = completion.Peek() {
			var c wire.Completion
			if err := c.Decode(msg); err != nil {
				t.Fatal(err)
			}
			c.Err = append([]byte(nil), c.Err...)
			out = append(out, c)
			completion.Release()
		}
		return out
	}
	// complete sets a user event and waits until its callback has come.
	complete := func(i int, status int32) {
		t.Helper()
		if err := evs[i].SetUserStatus(status); err != nil {
			t.Fatal(err)
		}
		// The run loop polls when no callback comes for a while.
		if !w.rings.Bell.Wait(w.pending.Load, 0, time.Second) {
			w.poll()
		}
		if !w.pending.Load() {
			t.Fatalf("event %d neither called back nor polled", i)
		}
		if err := w.retire(); err != nil {
			t.Fatal(err)
		}
	}
	complete(2, cl.Complete)
	if got := posted(); len(got) != 0 {
		t.Fatalf("flight 3 retired before its dependencies: %+v", got)
	}
	complete(0, cl.OutOfResources)
	got := posted()
	if len(got) != 1 || got[0].ID != 10 || !got[0].Failed || string(got[0].Err) != "test: clEnqueueTest: CL_OUT_OF_RESOURCES (-5)" {
		t.Fatalf("after the first: %+v", got)
	}
	complete(1, cl.Complete)
	got = posted()
	if len(got) != 2 || got[0].ID != 11 || got[1].ID != 12 || got[0].Failed || got[1].Failed {
		t.Fatalf("after the second: %+v", got)
	}
	if w.inflight != 0 || len(w.live) != 0 || len(w.ready) != 0 || len(w.free) != 3 {
		t.Fatalf("bookkeeping left: %d in flight, %d live, %d ready, %d free slots", w.inflight, len(w.live), len(w.ready), len(w.free))
	}
	if !strings.HasPrefix(dev.name, "OpenCL 0 (") {
		t.Fatalf("device name %q", dev.name)
	}
}

// TestDeinitDrains stops the driver with commands in flight: Deinit waits
// for them and their completions are posted; a second Init reopens the
// device with the kernels loaded before.
func TestDeinitDrains(t *testing.T) {
	r := startRig(t, modes[0])
	const n = 1 << 22
	s := r.RAM(n * 4)
	r.OK(r.Alloc(1, n*4))
	scal := r.Kernel(blasarg.ScalF32)
	ids := []uint64{r.Up(s, 1)}
	for i := 0; i < 8; i++ {
		ids = append(ids, r.Exec(scal, blasarg.ScalArg{Alpha: 1}.Encode(), vec(1, n, 4, kernel.RW)))
	}
	ids = append(ids, r.Down(1, s))
	if err := r.Deinit(); err != nil {
		t.Fatal(err)
	}
	r.OK(ids...)

	idx, err := r.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "twice", Source: "kernel void twice(global float *x, uint n) { x[get_global_id(0)] *= 2; }"})
	if err != nil {
		t.Fatal(err)
	}
	r.Init() // fresh rings
	r = r.W(0)
	x := r.F32(s)
	x[0], x[1] = 1.5, -3
	r.OK(r.Alloc(1, 8))
	r.OK(r.Up(base.Span{Offset: s.Offset, Size: 8}, 1), r.Exec(idx, nil, vec(1, 2, 4, kernel.RW)), r.Down(1, base.Span{Offset: s.Offset, Size: 8}))
	if x[0] != 3 || x[1] != -6 {
		t.Fatalf("after reinit: %v %v", x[0], x[1])
	}
}
