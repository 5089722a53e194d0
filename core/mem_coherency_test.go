package core_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// memDevice is a device driver whose memory node is Go memory: it exercises
// the core's coherency protocol (allocations, copies, write-backs,
// eviction) with a second memory node in unit tests. The protocol is also
// tested on a real OpenCL device in plugins/driver-opencl.
type memDevice struct {
	arena    *shm.Arena
	capacity uint64

	mu   sync.Mutex
	bufs map[uint64][]byte
	// execFlags are the wire flags of the Execs run, in order.
	execFlags []uint32
	copies    atomic.Int64
	stop      atomic.Bool
	wg        sync.WaitGroup
	// hold, when set (under mu), keeps the Execs after the first passes
	// from running until it is closed: a task stays in flight on the
	// device as long as a test needs.
	hold   chan struct{}
	passes int
	// waiting counts the Execs held now.
	waiting atomic.Int32
}

// holdExecs lets the next passes Execs run and keeps the ones after in
// flight until the returned function is called.
func (d *memDevice) holdExecs(passes int) (release func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	d.hold, d.passes = ch, passes
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		d.hold = nil
		d.mu.Unlock()
		close(ch)
	}
}

// waitHold waits while Execs are held.
func (d *memDevice) waitHold() {
	d.mu.Lock()
	ch := d.hold
	if ch != nil && d.passes > 0 {
		d.passes--
		ch = nil
	}
	d.mu.Unlock()
	if ch != nil {
		d.waiting.Add(1)
		<-ch
		d.waiting.Add(-1)
	}
}

func (d *memDevice) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "memdev", Version: "test", APIVersions: []int{base.APIVersion}}, nil
}
func (d *memDevice) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }
func (d *memDevice) SetConfig(context.Context, base.Config) error       { return nil }
func (d *memDevice) LoadKernel(context.Context, driver.KernelSource) (int, error) {
	return 0, errors.New("memdev: no source kernels")
}
func (d *memDevice) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	return &driver.Fingerprint{Arch: driver.OpenCL, Units: []driver.Unit{{Name: "memdev0", Node: 1}},
		Nodes: []driver.MemoryNode{{Name: "memdev0-mem", Bytes: d.capacity}}, Kernels: []string{"dev_scal_f32"}}, nil
}

func (d *memDevice) Init(_ context.Context, req *driver.InitRequest) error {
	for _, spec := range req.Workers {
		disp, err := shm.OpenRing(d.arena.Bytes(spec.Dispatch))
		if err != nil {
			return err
		}
		comp, err := shm.OpenRing(d.arena.Bytes(spec.Completion))
		if err != nil {
			return err
		}
		bell, coreBell := d.arena.Bell(spec.Bell), d.arena.Bell(spec.CoreBell)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			ready := func() bool { return !disp.Empty() || d.stop.Load() }
			for !d.stop.Load() {
				bell.Wait(ready, 100, 50*time.Millisecond)
				for msg := disp.Peek(); msg != nil; msg = disp.Peek() {
					if wire.Type(msg) == wire.TypeExec {
						d.waitHold()
					}
					id, err := d.handle(msg)
					disp.Release()
					if id == 0 {
						continue
					}
					c := wire.Completion{ID: id, StartNs: wire.Now(), EndNs: wire.Now()}
					if err != nil {
						c.Failed, c.Err = true, []byte(err.Error())
					}
					b, _ := comp.ReserveWait(wire.CompletionLen(len(c.Err)), func() bool { return !d.stop.Load() })
					if b == nil {
						return
					}
					c.Encode(b)
					comp.Commit()
					coreBell.Ring()
				}
			}
		}()
	}
	return nil
}

func (d *memDevice) Deinit(context.Context) error {
	d.stop.Store(true)
	d.wg.Wait()
	return nil
}

// handle runs one message and returns the ID to complete (0 for none).
func (d *memDevice) handle(msg []byte) (uint64, error) {
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
		if _, ok := d.bufs[f.Buffer]; !ok {
			panic(fmt.Sprintf("memdev: free of unknown buffer %d", f.Buffer))
		}
		delete(d.bufs, f.Buffer)
		return 0, nil
	case wire.TypeCopy:
		var c wire.Copy
		c.Decode(msg)
		d.copies.Add(1)
		side := func(node uint32, buf uint64) []byte {
			if node == 0 {
				return d.arena.Bytes(base.Span{Offset: buf, Size: d.arena.Size() - buf})
			}
			return d.bufs[buf]
		}
		src, dst := side(c.SrcNode, c.SrcBuffer), side(c.DstNode, c.DstBuffer)
		if src == nil || dst == nil {
			return c.ID, fmt.Errorf("memdev: copy with unknown buffer %d or %d", c.SrcBuffer, c.DstBuffer)
		}
		for _, r := range c.Ranges {
			copy(dst[r.DstOffset:r.DstOffset+r.Len], src[r.SrcOffset:r.SrcOffset+r.Len])
		}
		return c.ID, nil
	case wire.TypeExec:
		var e wire.Exec
		e.Decode(msg)
		d.execFlags = append(d.execFlags, e.Flags)
		b := e.Buffers[0]
		mem, ok := d.bufs[b.Offset]
		if b.Node != 1 || !ok {
			return e.ID, fmt.Errorf("memdev: buffer on node %d, number %d, is not on the device", b.Node, b.Offset)
		}
		alpha := float32(math.Float64frombits(binary.LittleEndian.Uint64(e.Arg)))
		l := b.Layout
		for j := uint64(0); j < max(l.NY, 1); j++ {
			for i := uint64(0); i < l.NX; i++ {
				off := (i + j*l.LD) * 4
				if l.Interface == kernel.Vector {
					off = i * 4
				}
				v := math.Float32frombits(binary.LittleEndian.Uint32(mem[off:]))
				binary.LittleEndian.PutUint32(mem[off:], math.Float32bits(v*alpha))
			}
		}
		return e.ID, nil
	}
	return 0, fmt.Errorf("memdev: unexpected message %d", wire.Type(msg))
}

var scalOnCPU = &core.Codelet{Name: "scal_cpu", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}

// devices are the second memory nodes the coherency tests run on: Go
// memory behind an in-process driver, and a real OpenCL device (pocl) behind
// the driver-opencl plugin process.
var devices = []struct {
	name  string
	start func(t *testing.T, capacity uint64) (*core.Runtime, *core.Codelet)
}{
	{"memdev", func(t *testing.T, capacity uint64) (*core.Runtime, *core.Codelet) {
		rt, _ := startWithDevice(t, capacity)
		return rt, &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	}},
	{"opencl", startWithOpenCL},
}

// startWithOpenCL runs one CPU worker and one OpenCL worker on pocl, whose
// memory is limited to capacity (rounded up to MiB).
func startWithOpenCL(t *testing.T, capacity uint64) (*core.Runtime, *core.Codelet) {
	t.Helper()
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	t.Setenv("STARPU_LIMIT_OPENCL_MEM", fmt.Sprint((capacity+1<<20-1)>>20))
	cfg := testConfig(openclDir)
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg})
	if len(rt.Workers()) != 2 || rt.Workers()[1].Arch != driver.OpenCL {
		t.Fatalf("workers %+v, want one CPU and one OpenCL worker (is pocl installed?)", rt.Workers())
	}
	return rt, &core.Codelet{Name: "scal_ocl", Kernels: map[driver.Arch]string{driver.OpenCL: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}
}

// startWithDevice runs one CPU worker (a plugin process) and a memDevice
// of capacity bytes in process.
func startWithDevice(t testing.TB, capacity uint64) (*core.Runtime, *memDevice) {
	t.Helper()
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	dev := &memDevice{capacity: capacity, bufs: map[uint64][]byte{}}
	rt := start(t, core.Options{
		Config: cfg,
		Drivers: []core.DriverFactory{
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
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
	return rt, dev
}

func scal(t *testing.T, rt *core.Runtime, cl *core.Codelet, h *core.Handle, alpha float32) *core.Task {
	t.Helper()
	task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: float64(alpha)}.Encode()}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	return task
}

// Tasks alternating between RAM and the device see each other's writes;
// the device's copy is written back at unregister.
func TestCoherencyTwoNodes(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			testTwoNodes(t, rt, scalOnDev)
		})
	}
	// The in-process device counts its copies.
	rt, dev := startWithDevice(t, 1<<20)
	x := make([]float32, 10)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	scalOnDev := &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	for i := 0; i < 6; i++ {
		cl := scalOnCPU
		if i%2 == 1 {
			cl = scalOnDev
		}
		scal(t, rt, cl, h, 2)
	}
	scal(t, rt, scalOnDev, h, 3)
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	// In, out, in, out, in, and the write-back at unregister: 6 copies.
	if c := dev.copies.Load(); c != 6 {
		t.Errorf("%d copies, want 6", c)
	}
}

func testTwoNodes(t *testing.T, rt *core.Runtime, scalOnDev *core.Codelet) {
	if n := len(rt.MemoryNodes()); n != 2 {
		t.Fatalf("%d memory nodes, want 2", n)
	}
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		cl := scalOnCPU
		if i%2 == 1 {
			cl = scalOnDev
		}
		scal(t, rt, cl, h, 2)
	}
	scal(t, rt, scalOnDev, h, 3) // the device holds the only valid copy
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if v != float32(i)*64*3 {
			t.Fatalf("x[%d] = %v, want %v", i, v, float32(i)*64*3)
		}
	}
}

// A matrix with gaps between its columns travels as one range per column
// and comes back without touching the gaps.
func TestCoherencyStridedMatrix(t *testing.T) {
	rt, _ := startWithDevice(t, 1<<20)
	testStridedMatrix(t, rt, &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}})
}

// On OpenCL, C = 2*A*I with A and C strided: A goes to the device column by
// column, C comes back the same way, and C's gaps are left alone.
func TestCoherencyStridedMatrixOpenCL(t *testing.T) {
	rt, _ := startWithOpenCL(t, 1<<20)
	gemm := &core.Codelet{Name: "gemm_ocl", Kernels: map[driver.Arch]string{driver.OpenCL: blasarg.GemmF32}, Modes: []core.Mode{core.R, core.R, core.RW}}
	const ld, nx, ny = 10, 7, 5
	a, c := make([]float32, ld*ny), make([]float32, ld*ny)
	id := make([]float32, ny*ny)
	for i := range a {
		a[i], c[i] = float32(i), -1
	}
	for i := 0; i < ny; i++ {
		id[i+i*ny] = 1
	}
	ha, err := core.RegisterMatrix(rt, a, ld, nx, ny)
	if err != nil {
		t.Fatal(err)
	}
	hi, err := core.RegisterMatrix(rt, id, ny, ny, ny)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := core.RegisterMatrix(rt, c, ld, nx, ny)
	if err != nil {
		t.Fatal(err)
	}
	task := &core.Task{Codelet: gemm, Handles: []*core.Handle{ha, hi, hc}, Arg: blasarg.GemmArg{Alpha: 2, Beta: 0}.Encode()}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(task); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*core.Handle{ha, hi, hc} {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	for j := 0; j < ny; j++ {
		for i := 0; i < ld; i++ {
			want := float32(-1)
			if i < nx {
				want = 2 * float32(i+j*ld)
			}
			if got := c[i+j*ld]; got != want {
				t.Fatalf("c[%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
}

func testStridedMatrix(t *testing.T, rt *core.Runtime, scalOnDev *core.Codelet) {
	const ld, nx, ny = 10, 7, 5
	m := make([]float32, ld*ny)
	for i := range m {
		m[i] = float32(i)
	}
	h, err := core.RegisterMatrix(rt, m, ld, nx, ny)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(scal(t, rt, scalOnDev, h, 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < ny; j++ {
		for i := 0; i < ld; i++ {
			want := float32(i + j*ld)
			if i < nx {
				want *= 2
			}
			if got := m[i+j*ld]; got != want {
				t.Fatalf("m[%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
	h.Release()
}

// More data than the device holds: clean replicates are evicted, dirty
// ones written back first, and every value comes home right.
func TestCoherencyEviction(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			const size = 1 << 18 // 1 MiB of float32
			rt, scalOnDev := d.start(t, 3*size*4)
			testEviction(t, rt, scalOnDev, size)
		})
	}
}

func testEviction(t *testing.T, rt *core.Runtime, scalOnDev *core.Codelet, size int) {
	const n = 12
	xs := make([][]float32, n)
	hs := make([]*core.Handle, n)
	for k := range xs {
		xs[k] = make([]float32, size)
		for i := range xs[k] {
			xs[k][i] = float32(k)
		}
		var err error
		if hs[k], err = core.RegisterVector(rt, xs[k]); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 3; round++ {
		for k := range hs {
			scal(t, rt, scalOnDev, hs[k], 2)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for k, h := range hs {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		for i, v := range xs[k] {
			if v != float32(k*8) {
				t.Fatalf("x%d[%d] = %v, want %v", k, i, v, k*8)
			}
		}
	}
}

// Data larger than the device fails its task with a clear error; the data
// is intact and later tasks elsewhere still run.
func TestCoherencyTooBig(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			testTooBig(t, rt, scalOnDev)
		})
	}
}

func testTooBig(t *testing.T, rt *core.Runtime, scalOnDev *core.Codelet) {
	x := make([]float32, 1<<19)
	for i := range x {
		x[i] = 1
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	task := scal(t, rt, scalOnDev, h, 2)
	err = rt.Wait(task)
	if err == nil || !strings.Contains(err.Error(), "out of device memory") || !strings.Contains(err.Error(), "2097152 bytes") {
		t.Fatalf("task error %v, want out of device memory naming 2097152 bytes", err)
	}
	scal(t, rt, scalOnCPU, h, 3)
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 3 || x[len(x)-1] != 3 {
		t.Fatalf("x = %v ... %v, want 3", x[0], x[len(x)-1])
	}
}

// A codelet's OpenCL C source is compiled by the driver at the first
// submit; a broken source fails the submit with the build log.
func TestOpenCLSourceKernel(t *testing.T) {
	rt, _ := startWithOpenCL(t, 1<<20)
	twice := &core.Codelet{Name: "twice", Modes: []core.Mode{core.RW},
		Kernels: map[driver.Arch]string{driver.OpenCL: "twice"},
		Sources: map[driver.Arch]string{driver.OpenCL: `
kernel void twice(global float *x, uint nx) {
	size_t i = get_global_id(0);
	if (i < nx) x[i] *= 2;
}`}}
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := rt.Submit(&core.Task{Codelet: twice, Handles: []*core.Handle{h}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if v != float32(8*i) {
			t.Fatalf("x[%d] = %v, want %v", i, v, 8*i)
		}
	}
	broken := &core.Codelet{Name: "broken", Modes: []core.Mode{core.RW},
		Kernels: map[driver.Arch]string{driver.OpenCL: "broken"},
		Sources: map[driver.Arch]string{driver.OpenCL: "kernel void broken(global float *x, uint nx) { x[0] = undefined_thing; }"}}
	y := make([]float32, 4)
	hy, err := core.RegisterVector(rt, y)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Submit(&core.Task{Codelet: broken, Handles: []*core.Handle{hy}})
	if !errors.Is(err, core.ErrInvalidTask) || !strings.Contains(err.Error(), "undefined_thing") {
		t.Fatalf("submit with a broken source: %v, want ErrInvalidTask with the build log", err)
	}
}

// A device driver that cannot start costs its devices, not the runtime: the
// CPU workers run and the runtime says what happened to the driver.
func TestDeviceDriverFailsToStart(t *testing.T) {
	t.Setenv("STARPU_TEST_CRASHY_EXIT_AT_START", "1")
	rt := start(t, core.Options{Config: testConfig(brokenDir)})
	if n := len(rt.Workers()); n != 2 {
		t.Fatalf("%d workers, want the 2 CPU workers", n)
	}
	notes := rt.DriverNotes()
	if len(notes) != 1 || notes[0].Driver != "driver-broken" || !strings.Contains(notes[0].Note, "did not start") {
		t.Fatalf("driver notes %+v, want driver-broken did not start", notes)
	}
	x := []float32{1, 2}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	scal(t, rt, scalOnCPU, h, 2)
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[1] != 4 {
		t.Fatalf("x = %v", x)
	}
}

// A device driver that starts but cannot describe its devices (here a bad
// STARPU_LIMIT_OPENCL_MEM with pocl's device present) is skipped like one
// that does not start, with the driver's reason in its note.
func TestDeviceDriverFailsFingerprint(t *testing.T) {
	t.Setenv("STARPU_LIMIT_OPENCL_MEM", "-1")
	rt := start(t, core.Options{Config: testConfig(openclDir)})
	notes := rt.DriverNotes()
	if len(notes) != 1 || notes[0].Driver != "driver-opencl" || !strings.Contains(notes[0].Note, "STARPU_LIMIT_OPENCL_MEM") {
		t.Fatalf("driver notes %+v, want driver-opencl's note naming STARPU_LIMIT_OPENCL_MEM", notes)
	}
	for _, w := range rt.Workers() {
		if w.Arch != driver.CPU {
			t.Fatalf("worker %+v: want CPU workers only", w)
		}
	}
}

// A driver turned off by its device count (STARPU_NOPENCL=0, as
// STARPU_NCUDA=0) is not started at all: no process, no worker, a note.
func TestDeviceDriverTurnedOff(t *testing.T) {
	t.Setenv("STARPU_NOPENCL", "0")
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1") // pocl's device would be found otherwise
	rt := start(t, core.Options{Config: testConfig(openclDir)})
	notes := rt.DriverNotes()
	if len(notes) != 1 || notes[0].Driver != "driver-opencl" || notes[0].Note != "not started: STARPU_NOPENCL is 0" {
		t.Fatalf("driver notes %+v, want driver-opencl not started", notes)
	}
	for _, w := range rt.Workers() {
		if w.Arch != driver.CPU {
			t.Fatalf("worker %+v: want CPU workers only", w)
		}
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...
		comm, rest, _ := strings.Cut(string(b), ") ")
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && strings.HasSuffix(comm, "(driver-opencl") {
			t.Fatalf("a driver-opencl process runs: %s", b)
		}
	}
}

// TestImplAsyncReachesDriver checks that an implementation flagged
// ImplAsync is run with wire.ExecAsync, and one not flagged without it:
// the driver decides by it how many tasks it keeps in flight.
func TestImplAsyncReachesDriver(t *testing.T) {
	rt, dev := startWithDevice(t, 1<<20)
	x := []float32{1, 2}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	plain := &core.Codelet{Name: "scal_sync", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	async := &core.Codelet{Name: "scal_async", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW},
		ImplFlags: map[driver.Arch][]core.ImplFlag{driver.OpenCL: {core.ImplAsync}}}
	for _, cl := range []*core.Codelet{plain, async, plain} {
		scal(t, rt, cl, h, 2)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	dev.mu.Lock()
	got := slices.Clone(dev.execFlags)
	dev.mu.Unlock()
	if want := []uint32{0, wire.ExecAsync, 0}; !slices.Equal(got, want) {
		t.Fatalf("Exec flags %v, want %v", got, want)
	}
	if x[0] != 8 || x[1] != 16 {
		t.Fatalf("x = %v, want [8 16]", x)
	}
}

// TestPredictedForWorkerArch: Profiling's Predicted is the model's
// prediction for the architecture the task ran on (not the first one with
// a prediction), and PredictedTransfer the bus model's for the worker's
// node.
func TestPredictedForWorkerArch(t *testing.T) {
	rt, _ := startWithDevice(t, 1<<20)
	x := make([]float32, 1<<14)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	cl := &core.Codelet{Name: "scal_both", Modes: []core.Mode{core.RW}, Model: core.HistoryModel,
		Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32, driver.OpenCL: "dev_scal_f32"}}
	var cpu, dev int = -1, -1
	for _, w := range rt.Workers() {
		switch w.Arch {
		case driver.CPU:
			cpu = w.ID
		case driver.OpenCL:
			dev = w.ID
		}
	}
	on := func(worker int) *core.Task {
		task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 1}.Encode(), ExecuteOnWorker: true, Worker: worker}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		if err := rt.Wait(task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	// Calibrate both architectures. The in-process device's kernel takes
	// nanoseconds, the CPU plugin's microseconds.
	for i := 0; i < 40; i++ { // room for outliers left out
		on(cpu)
		on(dev)
	}
	pc, err := rt.Profiling(on(cpu))
	if err != nil {
		t.Fatal(err)
	}
	pd, err := rt.Profiling(on(dev))
	if err != nil {
		t.Fatal(err)
	}
	if pc.Predicted <= 0 || pd.Predicted <= 0 || pd.Predicted >= pc.Predicted {
		t.Fatalf("predicted %v on the CPU and %v on the device: want both known and the device's the shorter", pc.Predicted, pd.Predicted)
	}
	// Each task finds the data on the other node.
	if pc.PredictedTransfer <= 0 || pd.PredictedTransfer <= 0 {
		t.Fatalf("predicted transfers %v and %v, want both known", pc.PredictedTransfer, pd.PredictedTransfer)
	}
}
