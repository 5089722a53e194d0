package cldriver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
)

// pluginPath is the driver-opencl binary TestMain builds, for the tests
// that run the driver as a real plugin process.
var pluginPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "driver-opencl-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginPath = filepath.Join(dir, "driver-opencl")
	out, err := exec.Command("go", "build", "-o", pluginPath, "github.com/starpu-go/starpu/plugins/driver-opencl").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build driver-opencl: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// machine is what the test machine's OpenCL offers, found through the
// binding rather than the driver.
type machine struct {
	cpus, others int // CPU-type devices, GPU and accelerator devices
	firstCPU     string
	cpuMem       uint64
}

func probe(t testing.TB) machine {
	t.Helper()
	var m machine
	ps, err := cl.Platforms()
	if err != nil {
		return m
	}
	for _, p := range ps {
		pname, _ := p.Name()
		ds, err := p.Devices(cl.DeviceAll)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			info, err := d.Info()
			if err != nil {
				t.Fatal(err)
			}
			if info.Type&(cl.DeviceGPU|cl.DeviceAccelerator) != 0 {
				m.others++
				continue
			}
			if m.cpus == 0 {
				m.firstCPU, m.cpuMem = pname+": "+info.Name, info.GlobalMemSize
			}
			m.cpus++
		}
	}
	return m
}

// needDevice skips a test on a machine without any OpenCL device.
func needDevice(t testing.TB) machine {
	t.Helper()
	m := probe(t)
	if m.cpus+m.others == 0 {
		t.Skip("no OpenCL device on this machine (install pocl-opencl-icd for a CPU one)")
	}
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newArena makes the core's shared-memory arena: rings and bells in the
// control region, buffers in the heap.
func newArena(t testing.TB) *shm.Arena {
	t.Helper()
	a, err := shm.Create(512<<20, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// launch starts the driver as a plugin process with env added to the
// test's environment, as the core's loader does: arena on fd 3, go-plugin
// handshake, gRPC.
func launch(t testing.TB, a *shm.Arena, env ...string) driver.Driver {
	t.Helper()
	cmd := exec.Command(pluginPath)
	cmd.ExtraFiles = []*os.File{a.File()}
	cmd.Env = append(os.Environ(), env...)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{base.APIVersion: {string(base.KindDriver): &driver.Plugin{Name: "driver-opencl"}}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
		StartTimeout:     time.Minute,
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(string(base.KindDriver))
	if err != nil {
		t.Fatal(err)
	}
	return raw.(driver.Driver)
}

// inProcess returns a driver in this process, with env set for the test.
func inProcess(t testing.TB, a *shm.Arena, env ...string) driver.Driver {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return New(a, hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}))
}

// mode is one way of running the driver.
type mode struct {
	name  string
	start func(t testing.TB, a *shm.Arena, env ...string) driver.Driver
}

var modes = []mode{{"in-process", inProcess}, {"plugin", launch}}

// rig is the core's side of one driver with one worker on unit 0.
type rig struct {
	t          testing.TB
	arena      *shm.Arena
	drv        driver.Driver
	fp         *driver.Fingerprint
	dispatch   *shm.Ring
	completion *shm.Ring
	bell       *shm.Bell
	coreBell   *shm.Bell
	nextID     uint64
	// got holds the completions received, by ID; order lists their IDs
	// in arrival order.
	got   map[uint64]wire.Completion
	order []uint64
}

func carveRing(t testing.TB, a *shm.Arena, capacity uint64) (*shm.Ring, base.Span) {
	s, err := a.Carve(shm.RingBytes(capacity), 64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := shm.InitRing(a.Bytes(s))
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

func carveBell(t testing.TB, a *shm.Arena) (*shm.Bell, uint64) {
	s, err := a.Carve(shm.BellSize, 64)
	if err != nil {
		t.Fatal(err)
	}
	return a.Bell(s.Offset), s.Offset
}

// startRig starts drv's worker on unit 0 (with OpenCL on CPUs allowed).
func startRig(t testing.TB, m mode, env ...string) *rig {
	t.Helper()
	needDevice(t)
	a := newArena(t)
	env = append([]string{EnvOnCPUs + "=1"}, env...)
	drv := m.start(t, a, env...)
	r := &rig{t: t, arena: a, drv: drv, got: map[uint64]wire.Completion{}}
	fp, err := drv.Fingerprint(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(fp.Units) == 0 {
		t.Fatalf("no unit: %s", fp.Note)
	}
	r.fp = fp
	spec := driver.WorkerSpec{ID: 7, Unit: 0}
	r.dispatch, spec.Dispatch = carveRing(t, a, 1<<17)
	r.completion, spec.Completion = carveRing(t, a, 1<<16)
	r.bell, spec.Bell = carveBell(t, a)
	r.coreBell, spec.CoreBell = carveBell(t, a)
	if err := drv.Init(ctxT(t), &driver.InitRequest{Workers: []driver.WorkerSpec{spec}, SpinIters: 100}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drv.Deinit(context.Background()); err != nil {
			t.Errorf("Deinit: %v", err)
		}
	})
	return r
}

func (r *rig) id() uint64 { r.nextID++; return r.nextID }

// send posts a message of n bytes, written by enc, on the dispatch ring.
func (r *rig) send(n int, enc func([]byte)) {
	b, err := r.dispatch.ReserveWait(n, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	enc(b)
	r.dispatch.Commit()
	r.bell.Ring()
}

func (r *rig) alloc(buf, size uint64) uint64 {
	a := wire.Alloc{ID: r.id(), Node: 1, Buffer: buf, Size: size}
	r.send(wire.AllocSize, a.Encode)
	return a.ID
}

func (r *rig) free(buf uint64) {
	f := wire.Free{Node: 1, Buffer: buf}
	r.send(wire.FreeSize, f.Encode)
}

func (r *rig) copy(srcNode, dstNode uint32, src, dst uint64, ranges ...wire.CopyRange) uint64 {
	c := wire.Copy{ID: r.id(), SrcNode: srcNode, DstNode: dstNode, SrcBuffer: src, DstBuffer: dst, Ranges: ranges}
	r.send(wire.CopyLen(len(ranges)), c.Encode)
	return c.ID
}

// up copies n bytes of RAM at span s to device buffer buf; down the other
// way.
func (r *rig) up(s base.Span, buf uint64) uint64 {
	return r.copy(0, 1, s.Offset, buf, wire.CopyRange{Len: s.Size})
}

func (r *rig) down(buf uint64, s base.Span) uint64 {
	return r.copy(1, 0, buf, s.Offset, wire.CopyRange{Len: s.Size})
}

func (r *rig) exec(k int, arg []byte, bufs ...wire.BufferDesc) uint64 {
	e := wire.Exec{ID: r.id(), Kernel: uint32(k), Buffers: bufs, Arg: arg}
	r.send(wire.ExecSize(len(bufs), len(arg)), e.Encode)
	return e.ID
}

// wait collects completions until every id has one, failing the test after
// a minute.
func (r *rig) wait(ids ...uint64) {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	missing := func() int {
		n := 0
		for _, id := range ids {
			if _, ok := r.got[id]; !ok {
				n++
			}
		}
		return n
	}
	for missing() > 0 {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of %d completions missing after a minute", missing(), len(ids))
		}
		r.coreBell.Wait(func() bool { return !r.completion.Empty() }, 1000, 100*time.Millisecond)
		for msg := r.completion.Peek(); msg != nil; msg = r.completion.Peek() {
			var c wire.Completion
			if err := c.Decode(msg); err != nil {
				r.t.Fatal(err)
			}
			c.Err = append([]byte(nil), c.Err...)
			if _, dup := r.got[c.ID]; dup {
				r.t.Fatalf("two completions for %d", c.ID)
			}
			r.got[c.ID] = c
			r.order = append(r.order, c.ID)
			r.completion.Release()
		}
	}
}

// ok waits for ids and fails the test if any failed.
func (r *rig) ok(ids ...uint64) {
	r.t.Helper()
	r.wait(ids...)
	for _, id := range ids {
		if c := r.got[id]; c.Failed {
			r.t.Fatalf("message %d failed: %s", id, c.Err)
		}
	}
}

// failed waits for id and returns its error text, failing the test if it
// succeeded.
func (r *rig) failed(id uint64) string {
	r.t.Helper()
	r.wait(id)
	c := r.got[id]
	if !c.Failed {
		r.t.Fatalf("message %d succeeded, want a failure", id)
	}
	return string(c.Err)
}

// before reports whether a's completion arrived before b's.
func (r *rig) before(a, b uint64) bool {
	for _, id := range r.order {
		switch id {
		case a:
			return true
		case b:
			return false
		}
	}
	return false
}

// has reports whether the driver lists the named kernel (the _f64 ones
// need cl_khr_fp64 on every device).
func (r *rig) has(name string) bool { return slices.Contains(r.fp.Kernels, name) }

// kernel is the index of the named kernel in the fingerprint.
func (r *rig) kernel(name string) int {
	r.t.Helper()
	for i, k := range r.fp.Kernels {
		if k == name {
			return i
		}
	}
	r.t.Fatalf("kernel %s not in %v", name, r.fp.Kernels)
	return -1
}

// ram allocates n bytes of the arena heap.
func (r *rig) ram(n uint64) base.Span {
	s, err := r.arena.Alloc(n)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) f32(s base.Span) []float32 {
	b := r.arena.Bytes(s)
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func (r *rig) f64(s base.Span) []float64 {
	b := r.arena.Bytes(s)
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func vec(buf, n uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return wire.BufferDesc{Node: 1, Offset: buf, Mode: m, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: elem, NX: n}}
}

func mat(buf, nx, ny, ld uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return wire.BufferDesc{Node: 1, Offset: buf, Mode: m, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: elem, NX: nx, NY: ny, LD: ld}}
}
