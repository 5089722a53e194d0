package cudadriver

// The runtime's device memory over this driver, end to end: core.Init
// starts the driver as a plugin process (with the fake libcuda, CUDA_FAKE_*
// variables and all, when there is no GPU), and what the GPU was asked to
// do is read from the fake's call log.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

var (
	rtDirOnce sync.Once
	rtDir     string
	rtDirSkip string
)

// runtimeDir is a plugin directory with this driver and sched-ws, for
// runtimes without CPU workers: built once, or a skip saying why not.
func runtimeDir(t *testing.T) string {
	t.Helper()
	bin := pluginPath(t)
	rtDirOnce.Do(func() {
		dir := filepath.Join(tmpDir, "runtime-plugins")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			rtDirSkip = err.Error()
			return
		}
		if err := os.Symlink(bin, filepath.Join(dir, "driver-cuda")); err != nil {
			rtDirSkip = err.Error()
			return
		}
		if _, err := exec.LookPath("go"); err != nil {
			rtDirSkip = "no go on PATH to build sched-ws"
			return
		}
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, "sched-ws"), "github.com/starpu-go/starpu/plugins/sched-ws").CombinedOutput(); err != nil {
			rtDirSkip = fmt.Sprintf("build sched-ws: %v\n%s", err, b)
			return
		}
		rtDir = dir
	})
	if rtDirSkip != "" {
		t.Skip(rtDirSkip)
	}
	return rtDir
}

// busLinks writes a bus model with every link among nodes into dir, so
// that the runtime does not measure the bus at start: the tests count
// the copies and allocations of their own data.
func busLinks(t *testing.T, dir string, nodes ...string) {
	t.Helper()
	var b perfmodel.Bus
	for _, a := range nodes {
		for _, c := range nodes {
			if a != c {
				if err := b.Set(a, c, 1000, 10); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := b.Save(dir); err != nil {
		t.Fatal(err)
	}
}

// startRuntime starts a runtime on the GPUs alone (no CPU worker) with
// the environment env, and its model directory.
func startRuntime(t *testing.T, env []string, nodes ...string) *core.Runtime {
	t.Helper()
	cfg := config.Default()
	cfg.PluginDir = runtimeDir(t)
	cfg.NCPU = 0
	cfg.ArenaSize = 256 << 20
	cfg.ModelDir = t.TempDir()
	busLinks(t, cfg.ModelDir, nodes...)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	return rt
}

// live is the bytes of device memory the log's allocations hold on GPU
// dev at its end and at most, those of the driver's own potrf status
// words left out.
func live(t *testing.T, log string, dev int) (now, peak uint64) {
	t.Helper()
	held := map[string]uint64{}
	for _, l := range fakeCalls(t, log, "alloc", "free") {
		f := strings.Fields(l)
		switch {
		case f[0] == "alloc" && f[1] == strconv.Itoa(dev):
			n, _ := strconv.ParseUint(f[2], 10, 64)
			if n == infoSlots*4 {
				continue
			}
			held[f[3]] = n
			now += n
			peak = max(peak, now)
		case f[0] == "free":
			now -= held[f[1]]
			delete(held, f[1])
		}
	}
	return now, peak
}

// total is how many lines of the log start with prefix and the bytes
// they give last.
func total(t *testing.T, log, prefix string) (n, bytes int) {
	t.Helper()
	kind, _, _ := strings.Cut(prefix, " ")
	for _, l := range fakeCalls(t, log, kind) {
		if strings.HasPrefix(l, prefix+" ") {
			f := strings.Fields(l)
			b, _ := strconv.Atoi(f[len(f)-1])
			n, bytes = n+1, bytes+b
		}
	}
	return n, bytes
}

// count is how many lines of the log are line; an alloc line matches
// whatever pointer it ends with.
func count(t *testing.T, log, line string) int {
	t.Helper()
	kind, _, _ := strings.Cut(line, " ")
	n := 0
	for _, l := range fakeCalls(t, log, kind) {
		if l == line || kind == "alloc" && strings.HasPrefix(l+" ", line+" ") {
			n++
		}
	}
	return n
}

var scal = &core.Codelet{Name: "scal", Kernels: map[driver.Arch]string{driver.CUDA: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}

// scaled registers n floats 1, 2, 3 ..., scales them by alpha on the GPU
// and returns the handle and its memory.
func scaled(t *testing.T, rt *core.Runtime, n int, alpha float64) (*core.Handle, []float32) {
	t.Helper()
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000 + 1)
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: alpha}.Encode(), Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	return h, x
}

// check acquires h in RAM and compares it with alpha times what scaled
// registered.
func check(t *testing.T, what string, h *core.Handle, x []float32, alpha float32) {
	t.Helper()
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	values(t, what, x, alpha)
}

// values compares x with alpha times what scaled registered.
func values(t *testing.T, what string, x []float32, alpha float32) {
	t.Helper()
	for i, v := range x {
		if want := alpha * float32(i%1000+1); v != want {
			t.Fatalf("%s: element %d is %v, want %v", what, i, v, want)
		}
	}
}

// TestRuntimeDeviceMemory: the runtime's allocation cache and memory limit
// on a GPU node (STARPU_LIMIT_CUDA_MEM=1, a MiB). A freed allocation is
// reused by the next datum of its size: the GPU sees one cuMemAlloc for
// two vectors used one after the other. Under pressure the cache is given
// back before any data is evicted: the allocation that does not fit
// frees the cached one, and the dirty vector on the GPU stays there,
// unwritten; the next one that does not fit writes that vector back and
// evicts it; data larger than the node fails its task with "out of device
// memory", its value untouched. The GPU never holds more than the limit.
func TestRuntimeDeviceMemory(t *testing.T) {
	need(t)
	log, env := fakeLog(t, 1)
	if log == "" {
		t.Skip("counts the fake libcuda's calls")
	}
	rt := startRuntime(t, append(env, EnvLimitMem+"=1"), "RAM", "cuda_0")
	const kib = 1 << 10 / 4 // floats in a KiB
	// Reuse: one cuMemAlloc of 96 KiB for two vectors.
	a, ax := scaled(t, rt, 96*kib, 2)
	if err := a.Unregister(); err != nil {
		t.Fatal(err)
	}
	values(t, "the first vector", ax, 2)
	b, bx := scaled(t, rt, 96*kib, 3)
	check(t, "the second vector, in a reused allocation", b, bx, 3)
	if n := count(t, log, "alloc 0 98304"); n != 1 {
		t.Errorf("%d cuMemAlloc of 96 KiB for two vectors of that size, one after the other: want 1", n)
	}
	if err := b.Unregister(); err != nil {
		t.Fatal(err)
	}
	// 96 KiB cached. Now 384 KiB dirty on the GPU, then 640 KiB: the
	// cache must go, not the dirty vector.
	c, cx := scaled(t, rt, 384*kib, 4)
	d, dx := scaled(t, rt, 640*kib, 5)
	if n := count(t, log, "dtoh 0 393216"); n != 0 {
		t.Errorf("the dirty 384 KiB vector was written back %d times while the cache could make room", n)
	}
	if st, err := c.QueryStatus(1); err != nil || !st.Valid {
		t.Errorf("the 384 KiB vector left the GPU: %+v, %v", st, err)
	}
	if n := count(t, log, "alloc 0 98304"); n != 1 {
		t.Errorf("%d allocations of 96 KiB", n)
	}
	if now, _ := live(t, log, 0); now != (384+640)*1024 {
		t.Errorf("%d bytes on the GPU, want the two vectors' %d (the cached 96 KiB freed)", now, (384+640)*1024)
	}
	// 512 KiB more: the vectors the GPU holds are written back, oldest
	// first, and evicted.
	e, ex := scaled(t, rt, 512*kib, 6)
	if n := count(t, log, "dtoh 0 393216"); n != 1 {
		t.Errorf("the 384 KiB vector written back %d times when evicted, want once", n)
	}
	// Beyond the node: a clear failure, the data untouched.
	big := make([]float32, 2<<20/4)
	h, err := core.RegisterVector(rt, big)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true})
	if err == nil || !strings.Contains(err.Error(), "out of device memory") || !strings.Contains(err.Error(), "cuda_0") {
		t.Errorf("2 MiB on a 1 MiB GPU: %v, want out of device memory on cuda_0", err)
	}
	for _, v := range []struct {
		h     *core.Handle
		x     []float32
		alpha float32
	}{{c, cx, 4}, {d, dx, 5}, {e, ex, 6}} {
		check(t, fmt.Sprintf("%d floats", len(v.x)), v.h, v.x, v.alpha)
	}
	if _, peak := live(t, log, 0); peak > 1<<20 {
		t.Errorf("the GPU held %d bytes at most, more than its 1 MiB limit", peak)
	}
}

// TestRuntimePeerCopy: data written by a task on GPU 0 and read by a task
// on GPU 1 goes over the peer link in one copy (one cuMemcpyPeerAsync,
// even for a matrix with gaps between its columns in RAM: it is packed
// alike on both GPUs), without RAM becoming valid on the way, and the bus
// statistics count one transfer from cuda_0 to cuda_1. Without peer access
// (turned off, or not supported) it goes through RAM as two copies. The
// values are right either way.
func TestRuntimePeerCopy(t *testing.T) {
	need(t)
	for _, pc := range peerCases {
		for _, dc := range []struct {
			name string
			// data registers the datum and its task's other (read-only)
			// handles; it returns the handles, the codelet and argument of
			// the task run on each GPU, the datum's bytes on a GPU, and a
			// check of the value after both tasks.
			data func(t *testing.T, rt *core.Runtime) (hs []*core.Handle, cl *core.Codelet, arg []byte, bytes int, check func(*testing.T))
		}{
			{"vector", peerVector},
			{"padded matrix", peerMatrix},
		} {
			t.Run(pc.name+"/"+dc.name, func(t *testing.T) {
				log, env := fakeLog(t, 2)
				if log == "" {
					t.Skip("counts the fake libcuda's calls")
				}
				stats := filepath.Join(t.TempDir(), "bus-stats")
				env = append(env, "STARPU_BUS_STATS=1", "STARPU_BUS_STATS_FILE="+stats)
				rt := startRuntime(t, append(env, pc.env...), "RAM", "cuda_0", "cuda_1")
				ws := rt.Workers()
				if len(ws) != 2 || ws[0].Node != 1 || ws[1].Node != 2 {
					t.Fatalf("workers %+v, want one per fake GPU", ws)
				}
				if d := rt.MemoryNodes()[1].Description; strings.Contains(d, "direct copies to cuda_1") != pc.peer {
					t.Errorf("cuda_0 is described as %q", d)
				}
				hs, cl, arg, bytes, check := dc.data(t, rt)
				for _, w := range ws {
					if err := rt.Submit(&core.Task{Codelet: cl, Handles: hs, Arg: arg, ExecuteOnWorker: true, Worker: w.ID, Synchronous: true}); err != nil {
						t.Fatal(err)
					}
				}
				// Through RAM, the datum goes down from GPU 0 (a matrix a
				// column at a time) and up to GPU 1.
				peers, peerBytes := total(t, log, "peer 0 1")
				_, down := total(t, log, "dtoh 0")
				if pc.peer && (peers != 1 || peerBytes != bytes || down != 0) || !pc.peer && (peers != 0 || down != bytes) {
					t.Errorf("%d peer copies of %d bytes and %d bytes copied down to RAM, for a datum of %d bytes", peers, peerBytes, down, bytes)
				}
				for _, h := range hs {
					if err := h.Unregister(); err != nil {
						t.Fatal(err)
					}
				}
				check(t)
				if err := rt.Shutdown(); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(stats)
				if err != nil {
					t.Fatal(err)
				}
				direct := strings.Contains(string(b), "cuda_0 -> cuda_1")
				viaRAM := strings.Contains(string(b), "cuda_0 -> RAM")
				if direct != pc.peer || viaRAM == pc.peer {
					t.Errorf("bus statistics: a cuda_0 -> cuda_1 link %v, cuda_0 -> RAM %v; want %v and %v:\n%s", direct, viaRAM, pc.peer, !pc.peer, b)
				}
				if pc.peer && !strings.Contains(string(b), "cuda_0 -> cuda_1\t") || pc.peer && !regexpOne.MatchString(string(b)) {
					t.Errorf("bus statistics: want one transfer from cuda_0 to cuda_1:\n%s", b)
				}
			})
		}
	}
}

// regexpOne finds the bus statistics' line of one transfer from cuda_0 to
// cuda_1.
var regexpOne = regexp.MustCompile(`cuda_0 -> cuda_1\t.*\(transfers : 1 -`)

// peerVector is 4096 floats scaled by 2 on each GPU.
func peerVector(t *testing.T, rt *core.Runtime) ([]*core.Handle, *core.Codelet, []byte, int, func(*testing.T)) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%1000 + 1)
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	return []*core.Handle{h}, scal, blasarg.ScalArg{Alpha: 2}.Encode(), 4 * len(x), func(t *testing.T) { values(t, "the vector", x, 4) }
}

// peerMatrix is C (24 x 16, LD 30 in RAM) += A*B on each GPU, A and B
// read from RAM.
func peerMatrix(t *testing.T, rt *core.Runtime) ([]*core.Handle, *core.Codelet, []byte, int, func(*testing.T)) {
	const m, n, k, ld = 24, 16, 8, 30
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, ld*n)
	for i := range a {
		a[i] = float32(i%5 + 1)
	}
	for i := range b {
		b[i] = float32(i%3 - 1)
	}
	for i := range c {
		c[i] = float32(i % 7)
	}
	want := append([]float32(nil), c...)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float32
			for l := 0; l < k; l++ {
				s += a[i+l*m] * b[l+j*k]
			}
			want[i+j*ld] += 2 * s
		}
	}
	var hs []*core.Handle
	for _, r := range []struct {
		v             []float32
		ld, rows, col int
	}{{a, m, m, k}, {b, k, k, n}, {c, ld, m, n}} {
		h, err := core.RegisterMatrix(rt, r.v, r.ld, r.rows, r.col)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	gemm := &core.Codelet{Name: "gemm", Kernels: map[driver.Arch]string{driver.CUDA: blasarg.GemmF32}, Modes: []core.Mode{core.R, core.R, core.RW}}
	return hs, gemm, blasarg.GemmArg{Alpha: 1, Beta: 1}.Encode(), 4 * m * n, func(t *testing.T) {
		for i, v := range c {
			if v != want[i] {
				t.Fatalf("the matrix: element %d is %v, want %v", i, v, want[i])
			}
		}
	}
}

// TestBenchBandwidth: `starpu bench bandwidth` on two GPUs with peer
// access measures RAM to each GPU and back and each GPU to the other,
// prints the six links and stores them in the bus model, replacing what
// was there.
func TestBenchBandwidth(t *testing.T) {
	need(t)
	log, env := fakeLog(t, 2)
	if log == "" {
		t.Skip("needs two GPUs with peer access: runs on the fake libcuda's")
	}
	dir := runtimeDir(t)
	exe := filepath.Join(t.TempDir(), "starpu")
	if b, err := exec.Command("go", "build", "-o", exe, "github.com/starpu-go/starpu/cmd/starpu").CombinedOutput(); err != nil {
		t.Fatalf("build the tool: %v\n%s", err, b)
	}
	models := t.TempDir()
	nodes := []string{"RAM", "cuda_0", "cuda_1"}
	// A model with every link at 1 MB/s and 1 us: the bench must replace
	// each, and the start finds nothing to measure.
	var old perfmodel.Bus
	for _, a := range nodes {
		for _, c := range nodes {
			if a != c {
				if err := old.Set(a, c, 1, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := old.Save(models); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "bench", "bandwidth", "--size", "1048576", "--reps", "2", "--plugin-dir", dir)
	cmd.Env = append(os.Environ(), append(env, "STARPU_NCPU=0", "STARPU_PERF_MODEL_DIR="+models)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("starpu bench bandwidth: %v\n%s", err, out)
	}
	t.Logf("\n%s", out)
	printed := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] != "FROM" {
			printed[f[0]+" "+f[1]] = f[2]
		}
	}
	bus, found, err := perfmodel.LoadBus(models)
	if err != nil || !found {
		t.Fatalf("bus model: %v (found %v)", err, found)
	}
	links := bus.Links()
	if len(links) != 6 || len(printed) != 6 {
		t.Fatalf("%d links stored, %d printed, want 6: %+v\n%s", len(links), len(printed), links, out)
	}
	for _, l := range links {
		if l.MBps == 1 && l.LatencyUs == 1 {
			t.Errorf("link %s -> %s: still the old model's figures", l.Src, l.Dst)
		}
		if p := printed[l.Src+" "+l.Dst]; p != fmt.Sprintf("%.0f", l.MBps) {
			t.Errorf("link %s -> %s: %v MB/s stored, %q printed", l.Src, l.Dst, l.MBps, p)
		}
	}
	if !strings.Contains(string(out), "bus model saved to "+perfmodel.BusPath(models)) {
		t.Errorf("the output does not say where the model went:\n%s", out)
	}
	if n, _ := total(t, log, "peer 0 1"); n < 2 {
		t.Errorf("%d peer copies from GPU 0 to GPU 1, want the bench's", n)
	}
}

// TestRuntimePeerEviction: after a peer copy, the GPU that wrote the data
// stays its owner (RAM still lacks the value) while the copy is shared, so
// that evicting both frees the shared copy as it is and writes the owner
// back first: the value survives. x is written on GPU 0 and read on GPU 1
// (axpy into y); then each GPU fills with other data (STARPU_LIMIT_CUDA_MEM
// of a MiB each).
func TestRuntimePeerEviction(t *testing.T) {
	need(t)
	log, env := fakeLog(t, 2)
	if log == "" {
		t.Skip("counts the fake libcuda's calls")
	}
	rt := startRuntime(t, append(env, EnvLimitMem+"=1"), "RAM", "cuda_0", "cuda_1")
	ws := rt.Workers()
	on := func(w int, cl *core.Codelet, arg []byte, hs ...*core.Handle) {
		t.Helper()
		if err := rt.Submit(&core.Task{Codelet: cl, Handles: hs, Arg: arg, ExecuteOnWorker: true, Worker: ws[w].ID, Synchronous: true}); err != nil {
			t.Fatal(err)
		}
	}
	register := func(n int) (*core.Handle, []float32) {
		t.Helper()
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%1000 + 1)
		}
		h, err := core.RegisterVector(rt, v)
		if err != nil {
			t.Fatal(err)
		}
		return h, v
	}
	const kib = 1 << 10 / 4
	axpy := &core.Codelet{Name: "axpy", Kernels: map[driver.Arch]string{driver.CUDA: blasarg.AxpyF32}, Modes: []core.Mode{core.R, core.RW}}
	x, xv := register(256 * kib)
	y, yv := register(256 * kib)
	on(0, scal, blasarg.ScalArg{Alpha: 2}.Encode(), x)
	on(1, axpy, blasarg.AxpyArg{Alpha: 1}.Encode(), x, y) // y = 3 * v
	if n, _ := total(t, log, "peer 0 1"); n != 1 {
		t.Fatalf("%d peer copies of x, want 1", n)
	}
	z, zv := register(768 * kib)
	on(1, scal, blasarg.ScalArg{Alpha: 5}.Encode(), z)
	w, wv := register(896 * kib)
	on(0, scal, blasarg.ScalArg{Alpha: 7}.Encode(), w)
	if n := count(t, log, "dtoh 0 262144"); n != 1 {
		t.Errorf("x written back from GPU 0 %d times when evicted, want once", n)
	}
	for _, h := range []*core.Handle{x, y, z, w} {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	values(t, "x", xv, 2)
	values(t, "y", yv, 3)
	values(t, "z", zv, 5)
	values(t, "w", wv, 7)
}
