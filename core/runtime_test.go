package core_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

var (
	scalF32 = &core.Codelet{Name: "scal", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}
	axpyF64 = &core.Codelet{Name: "axpy", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AxpyF64}, Modes: []core.Mode{core.R, core.RW}}
	dotF64  = &core.Codelet{Name: "dot", Kernels: map[driver.Arch]string{driver.CPU: blasarg.DotF64}, Modes: []core.Mode{core.R, core.R, core.W}}
	gemmF64 = &core.Codelet{Name: "gemm", Kernels: map[driver.Arch]string{driver.CPU: blasarg.GemmF64}, Modes: []core.Mode{core.R, core.R, core.RW}}
)

// setups are the two ways to run the runtime: plugins in their own
// processes, and the same plugins in process. Every contract test runs on
// both.
var setups = []struct {
	name string
	opts func() core.Options
}{
	{"plugins", func() core.Options { return core.Options{Config: testConfig(pluginDir)} }},
	{"in-process", func() core.Options {
		return core.Options{
			Config: testConfig(pluginDir),
			Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
			}},
			Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
				return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
			},
		}
	}},
}

func start(t testing.TB, opt core.Options) *core.Runtime {
	t.Helper()
	rt, err := core.Init(context.Background(), opt)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	return rt
}

func TestVectorScal(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			x := make([]float32, 10000)
			for i := range x {
				x[i] = float32(i)
			}
			h, err := core.RegisterVector(rt, x)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ { // RW chain: x * 2 * 2 * 2
				if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}); err != nil {
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
			if s.name == "plugins" {
				for _, w := range rt.Workers() {
					if w.Pid == 0 || w.Pid == os.Getpid() {
						t.Errorf("worker %d runs in pid %d, want a driver plugin process", w.ID, w.Pid)
					}
				}
			}
		})
	}
}

// TestReadersAndWriters checks sequential consistency: readers of a handle
// run after its last writer and before the next one.
func TestReadersAndWriters(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			n := 1000
			x, y := make([]float64, n), make([]float64, n)
			for i := range x {
				x[i], y[i] = 1, float64(i)
			}
			hx, _ := core.RegisterVector(rt, x)
			hy, _ := core.RegisterVector(rt, y)
			dots := make([]float64, 8)
			hd := make([]*core.Handle, len(dots))
			// y += x (writer), then 8 readers of y, then y += x again.
			submit := func(cl *core.Codelet, arg []byte, hs ...*core.Handle) {
				t.Helper()
				if err := rt.Submit(&core.Task{Codelet: cl, Handles: hs, Arg: arg}); err != nil {
					t.Fatal(err)
				}
			}
			submit(axpyF64, blasarg.AxpyArg{Alpha: 1}.Encode(), hx, hy)
			for i := range dots {
				hd[i], _ = core.RegisterVariable(rt, &dots[i])
				submit(dotF64, nil, hx, hy, hd[i])
			}
			submit(axpyF64, blasarg.AxpyArg{Alpha: 1}.Encode(), hx, hy)
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			for _, h := range append(hd, hx, hy) {
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
			}
			want := float64(n*(n-1)/2 + n) // sum(i) + n after one axpy
			for i, d := range dots {
				if d != want {
					t.Errorf("dot %d = %v, want %v (a reader saw the wrong version)", i, d, want)
				}
			}
			for i, v := range y {
				if v != float64(i)+2 {
					t.Fatalf("y[%d] = %v, want %v", i, v, float64(i)+2)
				}
			}
		})
	}
}

// TestMatrixWithLeadingDimension runs gemm on sub-matrices of padded
// storage: the padding must come back untouched.
func TestMatrixWithLeadingDimension(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	const n, ld = 3, 5
	a := []float64{1, 2, 3, -1, -1, 4, 5, 6, -1, -1, 7, 8, 9, -1, -1}
	id := []float64{1, 0, 0, -1, -1, 0, 1, 0, -1, -1, 0, 0, 1, -1, -1}
	c := make([]float64, ld*n)
	for i := range c {
		c[i] = -1
	}
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			c[i+j*ld] = 0
		}
	}
	ha, _ := core.RegisterMatrix(rt, a, ld, n, n)
	hi, _ := core.RegisterMatrix(rt, id, ld, n, n)
	hc, err := core.RegisterMatrix(rt, c, ld, n, n)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Submit(&core.Task{Codelet: gemmF64, Handles: []*core.Handle{ha, hi, hc}, Arg: blasarg.GemmArg{Alpha: 2, Beta: 1}.Encode(), Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*core.Handle{ha, hi, hc} {
		h.Unregister()
	}
	for j := 0; j < n; j++ {
		for i := 0; i < ld; i++ {
			want := -1.0
			if i < n {
				want = 2 * a[i+j*ld]
			}
			if c[i+j*ld] != want {
				t.Errorf("c[%d,%d] = %v, want %v", i, j, c[i+j*ld], want)
			}
		}
	}
}

func TestAcquireRelease(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			x := []float32{1, 2, 3, 4}
			h, _ := core.RegisterVector(rt, x)
			scal := func() {
				if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 10}.Encode()}); err != nil {
					t.Fatal(err)
				}
			}
			scal()
			if err := h.Acquire(core.RW); err != nil {
				t.Fatal(err)
			}
			if x[0] != 10 {
				t.Fatalf("after acquire x[0] = %v, want 10 (the task's result)", x[0])
			}
			scal() // must wait for the release
			x[0] = 5
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
			if err := h.Acquire(core.R); err != nil {
				t.Fatal(err)
			}
			if x[0] != 50 || x[1] != 200 {
				t.Fatalf("x = %v, want [50 200 ...]: the task must see the application's write", x)
			}
			h.Release()
			if err := h.Release(); err == nil {
				t.Error("second release of one acquire succeeded")
			}
			// Data allocated in the arena is used in place.
			m, err := core.Malloc[float32](rt, 4)
			if err != nil {
				t.Fatal(err)
			}
			copy(m, []float32{1, 1, 1, 1})
			hm, _ := core.RegisterVector(rt, m)
			if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{hm}, Arg: blasarg.ScalArg{Alpha: 3}.Encode()}); err != nil {
				t.Fatal(err)
			}
			hm.Acquire(core.R)
			if m[3] != 3 {
				t.Errorf("arena vector = %v, want all 3", m)
			}
			hm.Release()
			hm.Unregister()
			if err := core.Free(rt, m); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestTagChain unrolls a chain declared by tags with the head submitted
// last, recording completion order in callbacks.
func TestTagChain(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	empty := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	const n = 200
	var mu sync.Mutex
	var order []int
	tasks := make([]*core.Task, n)
	for i := range tasks {
		i := i
		tasks[i] = &core.Task{Codelet: empty, Tag: core.TagID(i), UseTag: true, Callback: func(*core.Task) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}}
	}
	for i := 1; i < n; i++ {
		rt.DeclareTagDeps(core.TagID(i), core.TagID(i-1))
		if err := rt.Submit(tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(order) != 0 {
		t.Fatalf("%d tasks ran before the head of the chain was submitted", len(order))
	}
	mu.Unlock()
	if err := rt.Submit(tasks[0]); err != nil {
		t.Fatal(err)
	}
	if err := rt.TagWait(n - 1); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("completion %d was task %d: chain order broken (%v...)", i, v, order[:i+1])
		}
	}
}

func TestTaskErrors(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	x := []float32{1}
	h, _ := core.RegisterVector(rt, x)
	gone, _ := core.RegisterVector(rt, []float32{1})
	gone.Unregister()
	nokernel := &core.Codelet{Name: "nowhere", Kernels: map[driver.Arch]string{driver.CPU: "no_such_kernel"}}
	cudaOnly := &core.Codelet{Name: "gpu", Kernels: map[driver.Arch]string{driver.CUDA: "sgemm"}}
	badMode := &core.Codelet{Name: "badmode", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32}, Modes: []core.Mode{0}}
	variable := &core.Codelet{Name: "var", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, NBuffers: core.VariableBuffers}
	cases := []struct {
		name string
		task *core.Task
		is   error
		msg  string
	}{
		{"kernel hosted nowhere", &core.Task{Codelet: nokernel}, core.ErrNoWorker, "no_such_kernel"},
		{"architecture without workers", &core.Task{Codelet: cudaOnly}, core.ErrNoWorker, "cuda"},
		{"too many handles", &core.Task{Codelet: scalF32, Handles: []*core.Handle{h, h}}, core.ErrInvalidTask, "takes 1 buffers, task gives 2"},
		{"too few handles", &core.Task{Codelet: scalF32}, core.ErrInvalidTask, "takes 1 buffers, task gives 0"},
		{"invalid mode", &core.Task{Codelet: badMode, Handles: []*core.Handle{h}}, core.ErrInvalidTask, "invalid mode"},
		{"variable without modes", &core.Task{Codelet: variable, Handles: []*core.Handle{h}}, core.ErrInvalidTask, "1 handles but 0 modes"},
		{"modes on a fixed codelet", &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Modes: []core.Mode{core.R}}, core.ErrInvalidTask, "VariableBuffers"},
		{"unregistered handle", &core.Task{Codelet: scalF32, Handles: []*core.Handle{gone}}, core.ErrUnregistered, "handle 0"},
		{"nil handle", &core.Task{Codelet: scalF32, Handles: []*core.Handle{nil}}, core.ErrInvalidTask, "nil"},
		{"handles without codelet", &core.Task{Handles: []*core.Handle{h}}, core.ErrInvalidTask, "no codelet"},
		{"oversized argument", &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: make([]byte, 1<<20)}, core.ErrInvalidTask, "exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := rt.Submit(c.task)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Submit error = %v, want %v containing %q", err, c.is, c.msg)
			}
		})
	}
	// A kernel error reaches Wait; the runtime goes on. The data the task
	// writes is lost until written anew.
	err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: []byte{1}, Synchronous: true})
	if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "scal") {
		t.Fatalf("bad argument: error = %v, want a task failure naming the kernel", err)
	}
	if err := h.Lost(); !errors.Is(err, core.ErrDataLost) {
		t.Fatalf("h.Lost() after a kernel error = %v, want ErrDataLost", err)
	}
	if err := h.Acquire(core.W); err != nil {
		t.Fatal(err)
	}
	x[0] = 1
	h.Release()
	if err := rt.Submit(&core.Task{Codelet: variable, Handles: []*core.Handle{h}, Modes: []core.Mode{core.RW}, Synchronous: true}); err != nil {
		t.Fatalf("variable-buffer task: %v", err)
	}
	if _, err := core.RegisterMatrix(rt, make([]float32, 10), 2, 3, 3); !errors.Is(err, core.ErrInvalidData) {
		t.Errorf("matrix with ld < nx: %v", err)
	}
	if _, err := core.RegisterMatrix(rt, make([]float32, 5), 3, 3, 3); !errors.Is(err, core.ErrInvalidData) {
		t.Errorf("matrix larger than its slice: %v", err)
	}
	if err := gone.Unregister(); !errors.Is(err, core.ErrUnregistered) {
		t.Errorf("second unregister: %v", err)
	}
}

func TestInitErrors(t *testing.T) {
	bogusDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(bogusDir, "sched-ws"), []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pluginDir, "driver-cpu"), filepath.Join(bogusDir, "driver-cpu")); err != nil {
		t.Fatal(err)
	}
	schedOnly := t.TempDir()
	if err := os.Symlink(filepath.Join(pluginDir, "sched-ws"), filepath.Join(schedOnly, "sched-ws")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  func(c *config.Config)
		env  map[string]string
		msg  string
	}{
		{"driver plugin missing", func(c *config.Config) { c.PluginDir = schedOnly }, nil, "no plugin driver-cpu"},
		{"config for an unknown plugin", func(c *config.Config) {
			c.Plugins = map[string]config.Plugin{"driver-gpu": {Name: "driver-gpu", Config: base.Config{}}}
		}, nil, `plugin "driver-gpu", which is not found in`},
		{"unknown scheduler", func(c *config.Config) { c.Sched = "nope" }, nil, `unknown scheduler "nope"`},
		{"missing plugin dir", func(c *config.Config) { c.PluginDir = "/nonexistent/plugins" }, nil, "/nonexistent/plugins"},
		{"handshake refused", func(c *config.Config) { c.PluginDir = bogusDir }, nil, "sched-ws"},
		{"driver crashes at start", func(c *config.Config) { c.PluginDir = crashyDir }, map[string]string{"STARPU_TEST_CRASHY_EXIT_AT_START": "1"}, "driver-cpu"},
		{"bad plugin config", func(c *config.Config) {
			c.Plugins = map[string]config.Plugin{"sched-ws": {Name: "sched-ws", Config: base.Config{"stael": true}}}
		}, nil, `unknown attribute "stael"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg := testConfig(pluginDir)
			c.cfg(cfg)
			rt, err := core.Init(context.Background(), core.Options{Config: cfg})
			if err == nil {
				rt.Shutdown()
				t.Fatal("Init succeeded")
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Init error = %v, want it to mention %q", err, c.msg)
			}
		})
	}
	t.Run("malformed config file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "bad.hcl")
		os.WriteFile(f, []byte("sched = \n"), 0o644)
		_, err := core.Init(context.Background(), core.Options{ConfigFile: f, Getenv: func(string) string { return "" }})
		if err == nil || !strings.Contains(err.Error(), "bad.hcl:") {
			t.Fatalf("Init error = %v, want one naming the file and line", err)
		}
	})
}

// TestDriverCrashMidRun kills the driver process from inside a kernel: the
// task fails with an error from Wait, later tasks fail at once, nothing
// hangs, and registered data is still written back at shutdown.
func TestDriverCrashMidRun(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 0 // TestDriverRestart has them
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2}
	h, _ := core.RegisterVector(rt, x)
	if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	panicky := &core.Codelet{Name: "panicky", Kernels: map[driver.Arch]string{driver.CPU: "test_panic"}}
	if err := rt.Submit(&core.Task{Codelet: panicky, Synchronous: true}); !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("panicking kernel: %v", err)
	}
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	arg := binary.LittleEndian.AppendUint64(nil, uint64(200*time.Millisecond))
	sleeper := &core.Task{Codelet: sleep, Arg: arg}
	if err := rt.Submit(sleeper); err != nil {
		t.Fatal(err)
	}
	crash := &core.Codelet{Name: "crash", Kernels: map[driver.Arch]string{driver.CPU: "test_exit"}}
	crasher := &core.Task{Codelet: crash}
	if err := rt.Submit(crasher); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Wait(crasher) }()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrPluginCrashed) {
			t.Fatalf("Wait on the crashing task: %v, want ErrPluginCrashed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait on a task whose driver crashed hung")
	}
	// The sleeper either finished before the crash (queued ahead of the
	// crasher on one worker) or died with the process (on the other one).
	if err := rt.Wait(sleeper); err != nil && !errors.Is(err, core.ErrPluginCrashed) {
		t.Errorf("task running beside the crash: %v, want nil or ErrPluginCrashed", err)
	}
	err = rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true})
	if !errors.Is(err, core.ErrPluginCrashed) && !errors.Is(err, core.ErrNoWorker) {
		t.Errorf("task after the crash: %v", err)
	}
	rt.Shutdown()
	if x[0] != 2 || x[1] != 4 {
		t.Errorf("x = %v after shutdown, want [2 4]: the completed task's result must be written back", x)
	}
}

func TestTraceAndShutdown(t *testing.T) {
	before := shmEntries(t)
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{1, 2, 3}
	h, _ := core.RegisterVector(rt, x)
	scal := &core.Codelet{Name: "scal64", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF64}, Modes: []core.Mode{core.RW}}
	for i := 0; i < 4; i++ {
		rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Name: "double-it"})
	}
	rt.WaitForAll()
	var buf bytes.Buffer
	if err := rt.WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	tasks := 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Name == "double-it" {
			tasks++
		}
	}
	if tasks != 4 {
		t.Errorf("trace has %d task events, want 4", tasks)
	}
	// Shutdown writes back the handle the application did not unregister.
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if x[2] != 48 {
		t.Errorf("x = %v after shutdown, want it scaled by 16", x)
	}
	if err := rt.Submit(&core.Task{Codelet: scal}); !errors.Is(err, core.ErrShutdown) {
		t.Errorf("submit after shutdown: %v", err)
	}
	if left := newShmEntries(before); len(left) > 0 {
		t.Errorf("/dev/shm gained %v after shutdown", left)
	}
	if math.IsNaN(x[0]) {
		t.Fatal("unreachable")
	}
}

// shmEntries lists /dev/shm. The runtime's arena is a memfd and never
// appears there; what does is a leak, of ours or of a library we load.
func shmEntries(t *testing.T) map[string]bool {
	t.Helper()
	es, err := os.ReadDir("/dev/shm")
	if err != nil {
		return nil
	}
	names := make(map[string]bool, len(es))
	for _, e := range es {
		names[e.Name()] = true
	}
	return names
}

// newShmEntries is what /dev/shm holds now that it did not in before,
// less the entries of programs that run beside this package under make
// test: OpenMPI's shared-memory transport (the core/mpi tests, in
// parallel) and Chromium (the dashboard's browser test, whose helpers may
// outlive it by a moment). Counting those made the leak checks fail for
// what other processes did.
func newShmEntries(before map[string]bool) []string {
	foreign := []string{"vader_segment", "sm_segment", "ompi.", "pmix", ".org.chromium.", "sem.org.chromium."}
	es, err := os.ReadDir("/dev/shm")
	if err != nil {
		return nil
	}
	var left []string
	for _, e := range es {
		n := e.Name()
		if before[n] || slices.ContainsFunc(foreign, func(p string) bool { return strings.HasPrefix(n, p) }) {
			continue
		}
		left = append(left, n)
	}
	return left
}

// TestBlockAndVoid registers a strided block and a void handle: the void
// handle orders two tasks that read the block, the application writes the
// block under an acquire, and unregister never overwrites the application's
// memory with an older copy.
func TestBlockAndVoid(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	const nx, ny, nz, ld, ldz = 2, 2, 2, 3, 7
	b := make([]int32, ldz*nz)
	for i := range b {
		b[i] = -1
	}
	hb, err := core.RegisterBlock(rt, b, ld, ldz, nx, ny, nz)
	if err != nil {
		t.Fatal(err)
	}
	if l := hb.Layout(); l.Len() != uint64((ldz*(nz-1)+ld*(ny-1)+nx)*4) {
		t.Fatalf("block spans %d bytes", l.Len())
	}
	hv, err := rt.RegisterVoid()
	if err != nil {
		t.Fatal(err)
	}
	empty := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, NBuffers: core.VariableBuffers}
	var order []string
	for _, name := range []string{"first", "second"} {
		name := name
		err := rt.Submit(&core.Task{Codelet: empty, Handles: []*core.Handle{hv, hb}, Modes: []core.Mode{core.RW, core.R}, Name: name,
			Callback: func(*core.Task) { order = append(order, name) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := hb.Acquire(core.RW); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < nz; k++ {
		for j := 0; j < ny; j++ {
			for i := 0; i < nx; i++ {
				b[i+j*ld+k*ldz] = int32(100*k + 10*j + i)
			}
		}
	}
	hb.Release()
	rt.WaitForAll()
	if len(order) != 2 || order[0] != "first" {
		t.Errorf("tasks ordered by a void handle ran as %v", order)
	}
	for i := range b {
		b[i] = 0
	}
	if err := hb.Unregister(); err != nil {
		t.Fatal(err)
	}
	hv.Unregister()
	// Unregister writes back only if the arena copy is newer: it is not,
	// so b keeps the zeros written after the release.
	for i, v := range b {
		if v != 0 {
			t.Fatalf("b[%d] = %d after unregister: the stale arena copy overwrote the application's memory", i, v)
		}
	}
	if _, err := core.RegisterBlock(rt, make([]int32, 10), 3, 5, 2, 2, 2); !errors.Is(err, core.ErrInvalidData) {
		t.Errorf("block with ldz < ld*ny: %v", err)
	}
}

// In-process plugins keep threads busy polling their rings: the runtime
// gives Go a P for each (engine, application, two workers, the policy host)
// while it runs, and puts GOMAXPROCS back at shutdown. With too few Ps a
// dependency hop waited for Go's sysmon to take a P back from a sleeper.
func TestInProcessReservesThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rt, err := core.Init(context.Background(), setups[1].opts())
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got < 5 {
		t.Errorf("GOMAXPROCS = %d while in-process plugins run, want at least 5", got)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS = %d after shutdown, want 1 again", got)
	}
}

// The engine's thread and the application's get a P each even when every
// plugin runs in its own process: under mpirun's default binding a rank
// starts with GOMAXPROCS 1, which the engine's sleep would hold, and every
// wake-up of another goroutine waited for Go's sysmon to take it back
// (core/mpi's ping-pong: 550 µs one way instead of 130). ReserveThreads
// adds a P for an extension's locked thread (core/mpi's progression
// goroutine); all is undone at shutdown, and a reservation after it does
// nothing.
func TestReservesThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rt, err := core.Init(context.Background(), setups[0].opts())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		reserve int
		want    int
	}{
		{"after Init", 0, 2},
		{"ReserveThreads(1)", 1, 3},
		{"ReserveThreads(0)", 0, 3},
		{"ReserveThreads(2)", 2, 5},
	}
	for _, s := range steps {
		rt.ReserveThreads(s.reserve)
		if got := runtime.GOMAXPROCS(0); got != s.want {
			t.Errorf("%s: GOMAXPROCS = %d, want %d", s.name, got, s.want)
		}
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	rt.ReserveThreads(1)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS = %d after shutdown and a reservation, want 1 again", got)
	}
}

// badArch is the CPU driver claiming an architecture the runtime does not
// know.
type badArch struct{ *cpudriver.Driver }

func (b badArch) Fingerprint(ctx context.Context) (*driver.Fingerprint, error) {
	fp, err := b.Driver.Fingerprint(ctx)
	if err == nil {
		fp.Arch = "tpu"
	}
	return fp, err
}

// An in-process driver's fingerprint is checked as a plugin's reply is:
// Init refuses an architecture no task could name.
func TestInProcessFingerprintChecked(t *testing.T) {
	_, err := core.Init(context.Background(), core.Options{
		Config: testConfig(pluginDir),
		Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
			return badArch{cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...))}, nil
		}},
	})
	if err == nil || !strings.Contains(err.Error(), `architecture "tpu"`) {
		t.Fatalf("Init with a driver of architecture tpu: %v, want an error naming it", err)
	}
}
