package core_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

// point is the CPU layout of the multiformat tests' data; on OpenCL it is
// a struct of arrays of float64, x[n] then y[n] (16 bytes an object), so
// that a kernel given the wrong layout reads garbage.
type point struct{ X, Y float32 }

// mfOpenCL holds the OpenCL kernels: the conversion from the CPU layout and
// a kernel on the device layout.
const mfOpenCL = `
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef struct { float x, y; } point;
kernel void mf_aos_to_soa(global const point *aos, uint n, global double *soa, uint m) {
	size_t i = get_global_id(0);
	if (i < n && n == m) { soa[i] = aos[i].x; soa[n + i] = aos[i].y; }
}
kernel void mf_add_x(global double *soa, uint n, float a) {
	size_t i = get_global_id(0);
	if (i < n) soa[i] += a;
}
`

// The multiformat tests' codelets: conversions, a CPU kernel scaling the
// points and an OpenCL one adding to their x.
var (
	mfToOpenCL = &core.Codelet{Name: "mf_cpu_to_opencl", Modes: []core.Mode{core.R, core.W},
		Kernels: map[driver.Arch]string{driver.OpenCL: "mf_aos_to_soa"}, Sources: map[driver.Arch]string{driver.OpenCL: mfOpenCL}}
	mfToCPU = &core.Codelet{Name: "mf_opencl_to_cpu", Modes: []core.Mode{core.R, core.W},
		Kernels: map[driver.Arch]string{driver.CPU: "mf_soa_to_aos"}}
	mfScale = &core.Codelet{Name: "mf_scale", Modes: []core.Mode{core.RW}, Kernels: map[driver.Arch]string{driver.CPU: "mf_scale"}}
	mfAddX  = &core.Codelet{Name: "mf_add_x", Modes: []core.Mode{core.RW},
		Kernels: map[driver.Arch]string{driver.OpenCL: "mf_add_x"}, Sources: map[driver.Arch]string{driver.OpenCL: mfOpenCL}}
	mfOps = core.MultiformatOps{CPUElemSize: 8, OpenCLElemSize: 16, CPUToOpenCL: mfToOpenCL, OpenCLToCPU: mfToCPU}
)

// mfPluginDir is a plugin directory with driver-opencl, sched-ws and
// testdata/driver-multiformat as driver-cpu (the points' CPU kernels).
func mfPluginDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "driver-cpu"), "./testdata/driver-multiformat")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build driver-multiformat: %v\n%s", err, out)
	}
	for _, p := range []string{"sched-ws", "driver-opencl"} {
		if err := os.Symlink(filepath.Join(openclDir, p), filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startMultiformat runs one CPU worker and one OpenCL worker on pocl.
func startMultiformat(t *testing.T, dir string, ncpu int) *core.Runtime {
	t.Helper()
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	cfg := testConfig(dir)
	cfg.NCPU = ncpu
	rt := start(t, core.Options{Config: cfg})
	ws := rt.Workers()
	if len(ws) != ncpu+1 || ws[ncpu].Arch != driver.OpenCL {
		t.Fatalf("workers %+v, want %d CPU and one OpenCL worker (is pocl installed?)", ws, ncpu)
	}
	return rt
}

// mfWith is mfOps changed by f.
func mfWith(f func(o *core.MultiformatOps)) core.MultiformatOps {
	o := mfOps
	f(&o)
	return o
}

func f32(a float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(a)) }

func newPoints(n int) []point {
	p := make([]point, n)
	for i := range p {
		p[i] = point{float32(i), -float32(i) / 2}
	}
	return p
}

// mfOp is one step of the tests' task sequences, run as a task or
// serially on the reference.
type mfOp struct {
	cl *core.Codelet
	a  float32
}

// apply runs o on p: a scale, or an addition to x for the device kernels.
func (o mfOp) apply(p []point) {
	for i := range p {
		if o.cl == mfScale {
			p[i].X *= o.a
			p[i].Y *= o.a
		} else {
			p[i].X += o.a
		}
	}
}

func submitOps(t *testing.T, rt *core.Runtime, h *core.Handle, ops []mfOp) {
	t.Helper()
	for _, o := range ops {
		if err := rt.Submit(&core.Task{Codelet: o.cl, Handles: []*core.Handle{h}, Arg: f32(o.a)}); err != nil {
			t.Fatal(err)
		}
	}
}

func checkPoints(t *testing.T, what string, got, want []point) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: point %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestMultiformat(t *testing.T) {
	dir := mfPluginDir(t)

	// CPU tasks see the array of structs, OpenCL tasks the struct of
	// arrays: the data is converted on the way to the device (there) and
	// back (on a CPU worker), for tasks, Acquire and Unregister.
	t.Run("tasks", func(t *testing.T) {
		rt := startMultiformat(t, dir, 2)
		const n = 1000
		p, ref := newPoints(n), newPoints(n)
		h, err := core.RegisterMultiformat(rt, p, mfOps)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(h.String(), "multiformat") || h.Interface() != "multiformat" {
			t.Errorf("String() = %q, Interface() = %q, want them to say multiformat", h.String(), h.Interface())
		}
		ops := []mfOp{{mfScale, 2}, {mfAddX, 3}, {mfScale, 0.5}, {mfAddX, 1}, {mfAddX, 2}, {mfScale, -1}, {mfAddX, 4}}
		submitOps(t, rt, h, ops)
		for _, o := range ops {
			o.apply(ref)
		}
		// The device holds the value: Acquire brings it back in the CPU layout.
		if err := h.Acquire(core.R); err != nil {
			t.Fatal(err)
		}
		checkPoints(t, "after Acquire", p, ref)
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		ram, err := h.InterfaceOn(0)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := h.InterfaceOn(1)
		if err != nil {
			t.Fatal(err)
		}
		if ram.Layout.ElemSize != 8 || dev.Layout.ElemSize != 16 || dev.Layout.NX != n || dev.AllocSize != 16*n {
			t.Errorf("layouts: RAM %+v, OpenCL %+v (%d bytes), want 8- and 16-byte elements", ram.Layout, dev.Layout, dev.AllocSize)
		}
		more := []mfOp{{mfAddX, 5}, {mfScale, 3}, {mfAddX, 0.25}}
		submitOps(t, rt, h, more)
		for _, o := range more {
			o.apply(ref)
		}
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		checkPoints(t, "after Unregister", p, ref)
	})

	// Pack, what MPI sends too, gives the CPU layout of a value the
	// device holds; RegisterSame makes multiformat data again.
	t.Run("pack and same", func(t *testing.T) {
		rt := startMultiformat(t, dir, 1)
		p, ref := newPoints(64), newPoints(64)
		h, err := core.RegisterMultiformat(rt, p, mfOps)
		if err != nil {
			t.Fatal(err)
		}
		submitOps(t, rt, h, []mfOp{{mfAddX, 7}})
		mfOp{mfAddX, 7}.apply(ref)
		b, err := h.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 8*len(ref) {
			t.Fatalf("Pack: %d bytes, want %d", len(b), 8*len(ref))
		}
		checkPoints(t, "Pack", unsafe.Slice((*point)(unsafe.Pointer(&b[0])), len(ref)), ref)

		s, err := h.RegisterSame()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unpack(b); err != nil {
			t.Fatal(err)
		}
		submitOps(t, rt, s, []mfOp{{mfAddX, 1}, {mfScale, 2}})
		mfOp{mfAddX, 1}.apply(ref)
		mfOp{mfScale, 2}.apply(ref)
		if err := s.Acquire(core.R); err != nil {
			t.Fatal(err)
		}
		checkPoints(t, "RegisterSame's handle", unsafe.Slice((*point)(s.LocalPointer()), len(ref)), ref)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		for _, x := range []*core.Handle{s, h} {
			if err := x.Unregister(); err != nil {
				t.Fatal(err)
			}
		}
	})

	// REDUX with CPU methods: contributions in the CPU layout fold into a
	// value the device held.
	t.Run("redux", func(t *testing.T) {
		rt := startMultiformat(t, dir, 1)
		p, ref := newPoints(100), newPoints(100)
		h, err := core.RegisterMultiformat(rt, p, mfOps)
		if err != nil {
			t.Fatal(err)
		}
		add := &core.Codelet{Name: "mf_add", Modes: []core.Mode{core.RW, core.R}, Kernels: map[driver.Arch]string{driver.CPU: "mf_add"}}
		zero := &core.Codelet{Name: "mf_zero", Modes: []core.Mode{core.W}, Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}}
		onBoth := &core.Codelet{Name: "mf_add_both", Modes: []core.Mode{core.RW, core.R},
			Kernels: map[driver.Arch]string{driver.CPU: "mf_add", driver.OpenCL: "mf_add_x"}, Sources: map[driver.Arch]string{driver.OpenCL: mfOpenCL}}
		err = h.SetReductionMethods(onBoth, zero)
		if !errors.Is(err, core.ErrInvalidTask) || !strings.Contains(err.Error(), "CPU workers only") {
			t.Fatalf("reduction methods with an OpenCL implementation: %v, want ErrInvalidTask naming CPU workers", err)
		}
		if err := h.SetReductionMethods(add, zero); err != nil {
			t.Fatal(err)
		}
		submitOps(t, rt, h, []mfOp{{mfAddX, 10}})
		mfOp{mfAddX, 10}.apply(ref)
		contrib := &core.Codelet{Name: "mf_add_one", Modes: []core.Mode{core.Redux}, Kernels: map[driver.Arch]string{driver.CPU: "mf_add_one"}}
		const k = 5
		for range k {
			if err := rt.Submit(&core.Task{Codelet: contrib, Handles: []*core.Handle{h}}); err != nil {
				t.Fatal(err)
			}
		}
		submitOps(t, rt, h, []mfOp{{mfAddX, 1}})
		mfOp{mfAddX, 1}.apply(ref)
		for i := range ref {
			ref[i].X += k
			ref[i].Y += 2 * k
		}
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		checkPoints(t, "after REDUX", p, ref)
	})

	// A conversion that fails fails what waited for it, naming it, and
	// leaves the data as it was; one whose driver dies fails too, instead
	// of leaving its waiters hanging.
	t.Run("failed conversions", func(t *testing.T) {
		rt := startMultiformat(t, dir, 1)
		bad := &core.Codelet{Name: "mf_bad_to_opencl", Modes: []core.Mode{core.R, core.W},
			Kernels: map[driver.Arch]string{driver.OpenCL: "mf_bad_to_soa"},
			Sources: map[driver.Arch]string{driver.OpenCL: "kernel void mf_bad_to_soa(global const float *aos, uint n, global double *soa) {}"}}
		p, ref := newPoints(16), newPoints(16)
		h, err := core.RegisterMultiformat(rt, p, mfWith(func(o *core.MultiformatOps) { o.CPUToOpenCL = bad }))
		if err != nil {
			t.Fatal(err)
		}
		task := &core.Task{Codelet: mfAddX, Handles: []*core.Handle{h}, Arg: f32(1)}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		if err := rt.Wait(task); !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "CPUToOpenCL to opencl_0") {
			t.Fatalf("task after a failed conversion: %v, want ErrTaskFailed naming CPUToOpenCL", err)
		}
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		checkPoints(t, "after a failed conversion", p, ref)

		exit := &core.Codelet{Name: "mf_exit", Modes: []core.Mode{core.R, core.W}, Kernels: map[driver.Arch]string{driver.CPU: "mf_exit"}}
		h, err = core.RegisterMultiformat(rt, newPoints(16), mfWith(func(o *core.MultiformatOps) { o.OpenCLToCPU = exit }))
		if err != nil {
			t.Fatal(err)
		}
		submitOps(t, rt, h, []mfOp{{mfAddX, 1}})
		done := make(chan error, 1)
		go func() { done <- h.Unregister() }()
		select {
		case err := <-done:
			if !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "OpenCLToCPU from opencl_0") {
				t.Fatalf("Unregister through a crashing conversion: %v, want ErrPluginCrashed naming OpenCLToCPU", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Unregister through a crashing conversion hangs")
		}
	})

	// A device with room for the device layout but not for the RAM one
	// beside it, for the conversion, fails the task rather than waiting
	// for memory the conversion itself holds.
	t.Run("no room for the conversion", func(t *testing.T) {
		t.Setenv("STARPU_LIMIT_OPENCL_MEM", "1") // MiB
		rt := startMultiformat(t, dir, 1)
		const n = 50000 // 800,000 bytes on the device, 400,000 in RAM
		p, ref := newPoints(n), newPoints(n)
		h, err := core.RegisterMultiformat(rt, p, mfOps)
		if err != nil {
			t.Fatal(err)
		}
		task := &core.Task{Codelet: mfAddX, Handles: []*core.Handle{h}, Arg: f32(1)}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rt.Wait(task) }()
		select {
		case err := <-done:
			if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "out of device memory") || !strings.Contains(err.Error(), "CPUToOpenCL") {
				t.Fatalf("task: %v, want ErrTaskFailed: out of device memory in CPUToOpenCL", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the conversion waits for memory it holds itself")
		}
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		checkPoints(t, "after the failed task", p, ref)
	})

	// What cannot work is refused, naming why.
	t.Run("refused", func(t *testing.T) {
		rt := startMultiformat(t, dir, 1)
		noCPUKernel := &core.Codelet{Name: "mf_to_cpu_on_opencl", Modes: []core.Mode{core.R, core.W},
			Kernels: map[driver.Arch]string{driver.OpenCL: "mf_aos_to_soa"}, Sources: map[driver.Arch]string{driver.OpenCL: mfOpenCL}}
		onCPU := &core.Codelet{Name: "mf_to_opencl_on_cpu", Modes: []core.Mode{core.R, core.W},
			Kernels: map[driver.Arch]string{driver.CPU: "mf_soa_to_aos"}}
		oneBuffer := &core.Codelet{Name: "mf_one_buffer", Modes: []core.Mode{core.RW},
			Kernels: map[driver.Arch]string{driver.OpenCL: "mf_aos_to_soa"}, Sources: map[driver.Arch]string{driver.OpenCL: mfOpenCL}}
		for _, c := range []struct {
			name string
			ops  core.MultiformatOps
			is   error
			says string
		}{
			{"wrong CPU element size", mfWith(func(o *core.MultiformatOps) { o.CPUElemSize = 12 }), core.ErrInvalidData, "CPUElemSize = 12"},
			{"no OpenCL element size", mfWith(func(o *core.MultiformatOps) { o.OpenCLElemSize = 0 }), core.ErrInvalidData, "OpenCLElemSize = 0"},
			{"negative OpenCL element size", mfWith(func(o *core.MultiformatOps) { o.OpenCLElemSize = -16 }), core.ErrInvalidData, "OpenCLElemSize = -16"},
			{"no conversion back", mfWith(func(o *core.MultiformatOps) { o.OpenCLToCPU = nil }), core.ErrInvalidData, "OpenCLToCPU is nil"},
			{"no conversion there", mfWith(func(o *core.MultiformatOps) { o.CPUToOpenCL = nil }), core.ErrInvalidData, "CPUToOpenCL is nil"},
			{"no OpenCL layout", core.MultiformatOps{CPUElemSize: 8}, core.ErrNoWorker, "OpenCLElemSize, CPUToOpenCL and OpenCLToCPU"},
			{"conversion back not on CPU", mfWith(func(o *core.MultiformatOps) { o.OpenCLToCPU = noCPUKernel }), core.ErrNoWorker, "OpenCLToCPU codelet \"mf_to_cpu_on_opencl\""},
			{"conversion there not on OpenCL", mfWith(func(o *core.MultiformatOps) { o.CPUToOpenCL = onCPU }), core.ErrNoWorker, "CPUToOpenCL codelet \"mf_to_opencl_on_cpu\""},
			{"conversion with one buffer", mfWith(func(o *core.MultiformatOps) { o.CPUToOpenCL = oneBuffer }), core.ErrInvalidTask, "two buffers"},
			{"half a CUDA layout", mfWith(func(o *core.MultiformatOps) { o.CUDAElemSize = 16 }), core.ErrInvalidData, "CPUToCUDA is nil"},
		} {
			t.Run(c.name, func(t *testing.T) {
				h, err := core.RegisterMultiformat(rt, newPoints(4), c.ops)
				if err == nil {
					h.Unregister()
				}
				if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("RegisterMultiformat: %v, want %v saying %q", err, c.is, c.says)
				}
			})
		}
		if _, err := core.RegisterMultiformat(rt, []point{}, mfOps); !errors.Is(err, core.ErrInvalidData) {
			t.Errorf("no objects: %v, want ErrInvalidData", err)
		}
		type withPtr struct {
			X    float32
			Name string
		}
		if _, err := core.RegisterMultiformat(rt, make([]withPtr, 4), core.MultiformatOps{OpenCLElemSize: 8, CPUToOpenCL: mfToOpenCL, OpenCLToCPU: mfToCPU}); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "field Name") {
			t.Errorf("a struct with a string: %v, want ErrInvalidData naming field Name", err)
		}

		h, err := core.RegisterMultiformat(rt, newPoints(8), mfOps)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Partition(core.VectorBlocks(2, 0)); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "cannot be partitioned") {
			t.Errorf("Partition: %v, want ErrInvalidData saying it cannot be partitioned", err)
		}
		if _, err := h.Plan(core.VectorBlocks(2, 0)); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "cannot be partitioned") {
			t.Errorf("Plan: %v, want ErrInvalidData saying it cannot be partitioned", err)
		}
		// The handle still works after the refusals.
		submitOps(t, rt, h, []mfOp{{mfAddX, 1}})
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	})
}

// With RAM only, multiformat data is its CPU layout and needs no device
// layout.
func TestMultiformatRAMOnly(t *testing.T) {
	dir := mfPluginDir(t)
	t.Setenv("STARPU_NOPENCL", "0")
	cfg := testConfig(dir)
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg})
	p, ref := newPoints(10), newPoints(10)
	h, err := core.RegisterMultiformat(rt, p, core.MultiformatOps{})
	if err != nil {
		t.Fatal(err)
	}
	submitOps(t, rt, h, []mfOp{{mfScale, 3}})
	mfOp{mfScale, 3}.apply(ref)
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	checkPoints(t, "RAM only", p, ref)
}

// fakeCUDA is an in-process driver of architecture CUDA whose device memory
// is Go memory, with kernels in Go on the tests' point layouts: no GPU is
// at hand, and it shows that CUDA nodes get CUDA's layout and conversions.
// The path is OpenCL's, tested for real above.
type fakeCUDA struct {
	arena *shm.Arena
	mu    sync.Mutex
	bufs  map[uint64][]byte
	// toDevice counts the conversions into the CUDA layout.
	toDevice atomic.Int64
	stop     atomic.Bool
	wg       sync.WaitGroup
}

func (d *fakeCUDA) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "fakecuda", Version: "test", APIVersions: []int{base.APIVersion}}, nil
}
func (d *fakeCUDA) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }
func (d *fakeCUDA) SetConfig(context.Context, base.Config) error       { return nil }
func (d *fakeCUDA) LoadKernel(context.Context, driver.KernelSource) (int, error) {
	return 0, errors.New("fakecuda: no source kernels")
}
func (d *fakeCUDA) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	return &driver.Fingerprint{Arch: driver.CUDA, Units: []driver.Unit{{Name: "fakecuda0", Node: 1}},
		Nodes: []driver.MemoryNode{{Name: "fakecuda0-mem", Bytes: 1 << 20}}, Kernels: []string{"cuda_aos_to_soa", "cuda_add_x"}}, nil
}

func (d *fakeCUDA) Init(_ context.Context, req *driver.InitRequest) error {
	for _, spec := range req.Workers {
		r, err := driver.OpenRings(d.arena, spec, 100)
		if err != nil {
			return err
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			alive := func() bool { return !d.stop.Load() }
			for !d.stop.Load() {
				r.Idle(func() bool { return r.HasWork() || d.stop.Load() }, 50*time.Millisecond)
				for msg := r.Dispatch.Peek(); msg != nil; msg = r.Dispatch.Peek() {
					id, err := d.handle(msg)
					if id != 0 {
						c := wire.Completion{ID: id, StartNs: wire.Now(), EndNs: wire.Now()}
						if r.Post(&c, err, alive) != nil {
							return
						}
					}
					r.Dispatch.Release()
					r.CoreBell.Ring()
				}
			}
		}()
	}
	return nil
}

func (d *fakeCUDA) Deinit(context.Context) error {
	d.stop.Store(true)
	d.wg.Wait()
	return nil
}

// handle runs one message and returns the ID to complete (0 for none).
func (d *fakeCUDA) handle(msg []byte) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch wire.Type(msg) {
	case wire.TypeAlloc:
		var a wire.Alloc
		a.Decode(msg)
		d.bufs[a.Buffer] = make([]byte, a.Size)
		return a.ID, nil
	case wire.TypeFree:
		var f wire.Free
		f.Decode(msg)
		delete(d.bufs, f.Buffer)
		return 0, nil
	case wire.TypeCopy:
		var c wire.Copy
		c.Decode(msg)
		side := func(node uint32, buf uint64) []byte {
			if node == 0 {
				return d.arena.Bytes(base.Span{Offset: buf, Size: d.arena.Size() - buf})
			}
			return d.bufs[buf]
		}
		src, dst := side(c.SrcNode, c.SrcBuffer), side(c.DstNode, c.DstBuffer)
		if src == nil || dst == nil {
			return c.ID, fmt.Errorf("fakecuda: copy with unknown buffer %d or %d", c.SrcBuffer, c.DstBuffer)
		}
		for _, r := range c.Ranges {
			copy(dst[r.DstOffset:r.DstOffset+r.Len], src[r.SrcOffset:r.SrcOffset+r.Len])
		}
		return c.ID, nil
	case wire.TypeExec:
		var e wire.Exec
		e.Decode(msg)
		return e.ID, d.exec(&e)
	}
	return 0, fmt.Errorf("fakecuda: unexpected message %d", wire.Type(msg))
}

// exec runs cuda_aos_to_soa (kernel 0) or cuda_add_x (kernel 1), checking
// that each buffer has the layout the kernel expects.
func (d *fakeCUDA) exec(e *wire.Exec) error {
	mem := func(i int, es uint32, m core.Mode) ([]byte, error) {
		if i >= len(e.Buffers) {
			return nil, fmt.Errorf("fakecuda: no buffer %d", i)
		}
		b := e.Buffers[i]
		if b.Node != 1 || b.Layout.ElemSize != es || b.Mode != m {
			return nil, fmt.Errorf("fakecuda: buffer %d on node %d with %d-byte elements in mode %v, want node 1, %d bytes, %v", i, b.Node, b.Layout.ElemSize, b.Mode, es, m)
		}
		return d.bufs[b.Offset], nil
	}
	n := int(e.Buffers[0].Layout.NX)
	switch e.Kernel {
	case 0:
		aos, err := mem(0, 8, core.R)
		if err != nil {
			return err
		}
		soa, err := mem(1, 16, core.W)
		if err != nil {
			return err
		}
		p := unsafe.Slice((*point)(unsafe.Pointer(&aos[0])), n)
		s := unsafe.Slice((*float64)(unsafe.Pointer(&soa[0])), 2*n)
		for i := range p {
			s[i], s[n+i] = float64(p[i].X), float64(p[i].Y)
		}
		d.toDevice.Add(1)
		return nil
	case 1:
		soa, err := mem(0, 16, core.RW)
		if err != nil {
			return err
		}
		a := math.Float32frombits(binary.LittleEndian.Uint32(e.Arg))
		s := unsafe.Slice((*float64)(unsafe.Pointer(&soa[0])), n)
		for i := range s {
			s[i] += float64(a)
		}
		return nil
	}
	return fmt.Errorf("fakecuda: no kernel %d", e.Kernel)
}

// goPointKernels are the CPU kernels of the CUDA test, for an in-process
// CPU driver: mf_scale and the conversion back from the struct of arrays.
func goPointKernels() []kernel.Kernel {
	view := func(b *kernel.Buffer) []point {
		return unsafe.Slice((*point)(unsafe.Pointer(&b.Bytes[0])), b.NX)
	}
	return []kernel.Kernel{
		{Name: "mf_scale", Func: func(ctx *kernel.Context) error {
			a := math.Float32frombits(binary.LittleEndian.Uint32(ctx.Arg))
			p := view(&ctx.Buffers[0])
			for i := range p {
				p[i].X *= a
				p[i].Y *= a
			}
			return nil
		}},
		{Name: "go_soa_to_aos", Func: func(ctx *kernel.Context) error {
			s, a := &ctx.Buffers[0], &ctx.Buffers[1]
			if s.ElemSize != 16 || a.ElemSize != 8 {
				return fmt.Errorf("go_soa_to_aos: %d- and %d-byte elements, want 16 and 8", s.ElemSize, a.ElemSize)
			}
			n := int(s.NX)
			soa, p := unsafe.Slice((*float64)(unsafe.Pointer(&s.Bytes[0])), 2*n), view(a)
			for i := range p {
				p[i] = point{float32(soa[i]), float32(soa[n+i])}
			}
			return nil
		}},
	}
}

// On CUDA workers multiformat data takes CUDA's layout and conversions:
// OpenCL's alone are refused, and CUDA's run where OpenCL's would.
func TestMultiformatCUDA(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	dev := &fakeCUDA{bufs: map[uint64][]byte{}}
	rt := start(t, core.Options{
		Config: cfg,
		Drivers: []core.DriverFactory{
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...), cpudriver.WithKernels(goPointKernels()...)), nil
			},
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				dev.arena = a
				return dev, nil
			},
		},
		Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
		},
	})
	p, ref := newPoints(100), newPoints(100)
	if _, err := core.RegisterMultiformat(rt, p, mfOps); !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), "CUDAElemSize, CPUToCUDA and CUDAToCPU") {
		t.Fatalf("OpenCL's layout alone with CUDA workers: %v, want ErrNoWorker naming CUDA's fields", err)
	}
	ops := core.MultiformatOps{CUDAElemSize: 16,
		CPUToCUDA: &core.Codelet{Name: "mf_cpu_to_cuda", Modes: []core.Mode{core.R, core.W}, Kernels: map[driver.Arch]string{driver.CUDA: "cuda_aos_to_soa"}},
		CUDAToCPU: &core.Codelet{Name: "mf_cuda_to_cpu", Modes: []core.Mode{core.R, core.W}, Kernels: map[driver.Arch]string{driver.CPU: "go_soa_to_aos"}}}
	h, err := core.RegisterMultiformat(rt, p, ops)
	if err != nil {
		t.Fatal(err)
	}
	addX := &core.Codelet{Name: "mf_add_x_cuda", Modes: []core.Mode{core.RW}, Kernels: map[driver.Arch]string{driver.CUDA: "cuda_add_x"}}
	steps := []mfOp{{mfScale, 2}, {addX, 3}, {mfScale, 0.5}, {addX, 1}, {addX, 2}}
	for _, o := range steps {
		if err := rt.Submit(&core.Task{Codelet: o.cl, Handles: []*core.Handle{h}, Arg: f32(o.a)}); err != nil {
			t.Fatal(err)
		}
		o.apply(ref)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	checkPoints(t, "after Unregister", p, ref)
	if n := dev.toDevice.Load(); n != 2 {
		t.Errorf("%d conversions into the CUDA layout, want 2", n)
	}
}

// A round trip RAM -> OpenCL -> RAM of n points: a task on the device,
// then one on the CPU. "multiformat" converts both ways (the AoS goes to
// a staging buffer and is converted there, the SoA comes to RAM and is
// converted by a CPU worker); "vector" moves the same 8 bytes a point as
// a float32 vector, with no conversion.
func BenchmarkMultiformatRoundTrip(b *testing.B) {
	dir := mfPluginDir(b)
	b.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	cfg := testConfig(dir)
	cfg.NCPU = 1
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Shutdown()
	scalOCL := &core.Codelet{Name: "scal_ocl", Kernels: map[driver.Arch]string{driver.OpenCL: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}
	scalCPU := &core.Codelet{Name: "scal_cpu", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}
	one := blasarg.ScalArg{Alpha: 1}.Encode()
	for _, n := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("multiformat/%d", n), func(b *testing.B) {
			h, err := core.RegisterMultiformat(rt, newPoints(n), mfOps)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Unregister()
			b.SetBytes(int64(16 * n))
			for range b.N {
				for _, cl := range []*core.Codelet{mfAddX, mfScale} {
					if err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: f32(1), Synchronous: true}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("vector/%d", n), func(b *testing.B) {
			h, err := core.RegisterVector(rt, make([]float32, 2*n))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Unregister()
			b.SetBytes(int64(16 * n))
			for range b.N {
				for _, cl := range []*core.Codelet{scalOCL, scalCPU} {
					if err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: one, Synchronous: true}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
