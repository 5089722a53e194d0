package core_test

import (
	"bytes"
	"encoding/json"
	"errors"
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
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

var (
	emptyCl   = &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	emptyRW   = &core.Codelet{Name: "empty-rw", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, Modes: []core.Mode{core.RW}}
	emptyVar  = &core.Codelet{Name: "empty-var", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, NBuffers: core.VariableBuffers}
	nowhereRW = &core.Codelet{Name: "nowhere", Where: core.Nowhere, Modes: []core.Mode{core.RW}}
)

// withKernels is the in-process setup with extra Go kernels: the real CPU
// driver and ws policy, for tests that need a kernel to block or to look at
// the runtime from inside.
func withKernels(extra ...kernel.Kernel) core.Options {
	return core.Options{
		Config: testConfig(pluginDir),
		Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
			return cpudriver.New(a, log, cpudriver.WithKernels(append(kernels.Library(), extra...)...)), nil
		}},
		Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
		},
	}
}

// gateKernel blocks until its channel is closed.
func gateKernel(name string, gate <-chan struct{}) kernel.Kernel {
	return kernel.Kernel{Name: name, Func: func(*kernel.Context) error { <-gate; return nil }}
}

func submit(t *testing.T, rt *core.Runtime, tasks ...*core.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := rt.Submit(task); err != nil {
			t.Fatalf("submit %q: %v", task.Name, err)
		}
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// recorder records callback order.
type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) cb(name string) func(*core.Task) {
	return func(*core.Task) { r.add(name) }
}

func (r *recorder) add(name string) {
	r.mu.Lock()
	r.names = append(r.names, name)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

func notDone(t *testing.T, what string, f func() error) chan error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) too early", what, err)
	case <-time.After(50 * time.Millisecond):
	}
	return ch
}

func done(t *testing.T, what string, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s hung", what)
	}
}

func TestSubmitValidation(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, _ := core.RegisterVector(rt, []float32{1})
	cpu := driver.ArchBit(driver.CPU)
	cuda := driver.ArchBit(driver.CUDA)
	cl := func(f func(c *core.Codelet)) *core.Codelet {
		c := &core.Codelet{Name: "c", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
		f(c)
		return c
	}
	cases := []struct {
		name string
		task *core.Task
		is   error
		msg  string
	}{
		{"unknown codelet type", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Type = 7 })}, core.ErrInvalidTask, "type CodeletType(7): want Seq, SPMD or ForkJoin"},
		{"negative max parallelism", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Type = core.SPMD; c.MaxParallelism = -1 })}, core.ErrInvalidTask, "MaxParallelism = -1"},
		{"codelet where excludes every worker", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Where = cuda })}, core.ErrNoWorker, "Where cuda"},
		{"task where excludes every worker", &core.Task{Codelet: emptyCl, Where: cuda}, core.ErrNoWorker, "leaves no architecture"},
		{"nowhere mixed with an architecture", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Where = core.Nowhere | cpu })}, core.ErrInvalidTask, "combines Nowhere"},
		{"kernels and impls for one arch", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Impls = map[driver.Arch][]string{driver.CPU: {"x"}} })}, core.ErrInvalidTask, "both Kernels and Impls"},
		{"too many impls", &core.Task{Codelet: &core.Codelet{Name: "many", Impls: map[driver.Arch][]string{driver.CPU: make([]string, 9)}}}, core.ErrInvalidTask, "at most 8"},
		{"async flag on cpu", &core.Task{Codelet: cl(func(c *core.Codelet) { c.ImplFlags = map[driver.Arch][]core.ImplFlag{driver.CPU: {core.ImplAsync}} })}, core.ErrInvalidTask, "ImplAsync is for device"},
		{"more flags than impls", &core.Task{Codelet: cl(func(c *core.Codelet) {
			c.ImplFlags = map[driver.Arch][]core.ImplFlag{driver.CPU: {0, 0}}
		})}, core.ErrInvalidTask, "2 cpu implementation flags for 1"},
		{"nodes length", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Modes = []core.Mode{core.R}; c.Nodes = []int{0, 0} }), Handles: []*core.Handle{h}}, core.ErrInvalidTask, "2 nodes for 1 buffers"},
		{"node does not exist", &core.Task{Codelet: cl(func(c *core.Codelet) { c.Modes = []core.Mode{core.R}; c.Nodes = []int{7} }), Handles: []*core.Handle{h}}, core.ErrInvalidTask, "memory node 7 does not exist"},
		{"task nodes on a fixed codelet", &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}, Nodes: []int{0}}, core.ErrInvalidTask, "Nodes is for codelets with VariableBuffers"},
		{"task nodes length", &core.Task{Codelet: emptyVar, Handles: []*core.Handle{h}, Modes: []core.Mode{core.R}, Nodes: []int{0, 0}}, core.ErrInvalidTask, "2 nodes for 1 handles"},
		{"priority too high", &core.Task{Codelet: emptyCl, Priority: core.MaxPriority + 1}, core.ErrInvalidTask, "priority"},
		{"priority too low", &core.Task{Codelet: emptyCl, Priority: core.MinPriority - 1}, core.ErrInvalidTask, "priority"},
		{"worker order without worker", &core.Task{Codelet: emptyCl, WorkerOrder: 1}, core.ErrInvalidTask, "WorkerOrder needs ExecuteOnWorker"},
		{"no such worker", &core.Task{Codelet: emptyCl, ExecuteOnWorker: true, Worker: 9}, core.ErrNoWorker, "worker 9 does not exist"},
		{"can_execute refuses all", &core.Task{Codelet: cl(func(c *core.Codelet) {
			c.CanExecute = func(driver.Arch, *core.Task, int) bool { return false }
		})}, core.ErrNoWorker, "CanExecute"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := rt.Submit(c.task)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Submit error = %v, want %v containing %q", err, c.is, c.msg)
			}
			if s := c.task.Status(); s != core.StatusInvalid {
				t.Errorf("rejected task has status %v", s)
			}
		})
	}
	// Valid edges of the same checks.
	ok := []*core.Task{
		{Codelet: emptyCl, Priority: core.MaxPriority},
		{Codelet: emptyCl, Priority: core.MinPriority},
		{Codelet: emptyCl, Where: cpu},
		{Codelet: cl(func(c *core.Codelet) { c.Modes = []core.Mode{core.R}; c.Nodes = []int{core.NodeLocal} }), Handles: []*core.Handle{h}},
		{Codelet: emptyVar, Handles: []*core.Handle{h}, Modes: []core.Mode{core.R}, Nodes: []int{core.NodeCPU}},
		{Codelet: cl(func(c *core.Codelet) { c.Type = core.SPMD })},
		{Codelet: cl(func(c *core.Codelet) { c.Type = core.ForkJoin; c.MaxParallelism = 1 })},
	}
	for i, task := range ok {
		if err := rt.Submit(task); err != nil {
			t.Errorf("valid task %d: %v", i, err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
}

// TestNowhere: a Nowhere codelet and a task with Where Nowhere order tasks
// through their data and complete without running.
func TestNowhere(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			x := []float32{1, 2}
			h, _ := core.RegisterVector(rt, x)
			var rec recorder
			scal := func(name string) *core.Task {
				return &core.Task{Name: name, Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 3}.Encode(), Callback: rec.cb(name)}
			}
			sync1 := &core.Task{Name: "sync1", Codelet: nowhereRW, Handles: []*core.Handle{h}, Callback: rec.cb("sync1")}
			sync2 := &core.Task{Name: "sync2", Codelet: scalF32, Where: core.Nowhere, Handles: []*core.Handle{h}, Callback: rec.cb("sync2")}
			submit(t, rt, scal("a"), sync1, scal("b"), sync2)
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.get(), ","); got != "a,sync1,b,sync2" {
				t.Errorf("order %s, want a,sync1,b,sync2", got)
			}
			h.Unregister()
			if x[1] != 18 {
				t.Errorf("x = %v: the nowhere tasks must not run the kernel (want 2*9)", x)
			}
			p, err := rt.Profiling(sync2)
			if err != nil || p.Worker != -1 || !p.Started.IsZero() {
				t.Errorf("nowhere task profiling %+v, %v: want no worker, no start", p, err)
			}
		})
	}
}

// TestImplementations: the first hosted implementation that CanExecute
// accepts runs; calibration takes them in turn.
func TestImplementations(t *testing.T) {
	impls := map[driver.Arch][]string{driver.CPU: {"not_hosted", blasarg.Empty, blasarg.ScalF32}}
	arg := blasarg.ScalArg{Alpha: 2}.Encode()
	cases := []struct {
		name      string
		calibrate bool
		canExec   func(driver.Arch, *core.Task, int) bool
		impls     []int
		want      float32 // x[0] after the tasks, from 1
	}{
		{"first hosted", false, nil, []int{1, 1, 1, 1}, 1},
		{"can_execute skips empty", false, func(_ driver.Arch, _ *core.Task, i int) bool { return i != 1 }, []int{2, 2, 2, 2}, 16},
		{"calibration round-robin", true, nil, []int{1, 2, 1, 2}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := core.Options{Config: testConfig(pluginDir), Calibrate: c.calibrate}
			rt := start(t, opts)
			cl := &core.Codelet{Name: "multi", Impls: impls, Modes: []core.Mode{core.RW}, CanExecute: c.canExec}
			x := []float32{1}
			h, _ := core.RegisterVector(rt, x)
			var tasks []*core.Task
			for range c.impls {
				task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: arg}
				submit(t, rt, task)
				tasks = append(tasks, task)
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			for i, task := range tasks {
				p, err := rt.Profiling(task)
				if err != nil {
					t.Fatal(err)
				}
				if p.Implementation != c.impls[i] {
					t.Errorf("task %d ran implementation %d, want %d", i, p.Implementation, c.impls[i])
				}
			}
			h.Unregister()
			if x[0] != c.want {
				t.Errorf("x = %v, want %v", x[0], c.want)
			}
		})
	}
}

// TestManyBuffers runs tasks with 100 buffers, more than StarPU's default
// STARPU_NMAXBUFS, ordered through them.
func TestManyBuffers(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			const n = 100
			hs := make([]*core.Handle, n)
			modes := make([]core.Mode, n)
			nodes := make([]int, n)
			for i := range hs {
				hs[i], _ = core.RegisterVector(rt, []float64{float64(i)})
				modes[i] = core.RW
				nodes[i] = core.NodeLocal
			}
			var rec recorder
			wide := &core.Task{Name: "wide", Codelet: emptyVar, Handles: hs, Modes: modes, Nodes: nodes, Callback: rec.cb("wide")}
			after := &core.Task{Name: "after", Codelet: scalF64RW, Handles: []*core.Handle{hs[n-1]}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Callback: rec.cb("after")}
			if err := hs[n-1].Acquire(core.R); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, wide, after)
			eventually(t, "wide task blocked on data", func() bool { return wide.Status() == core.StatusBlockedOnData })
			hs[n-1].Release()
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.get(), ","); got != "wide,after" {
				t.Errorf("order %s", got)
			}
		})
	}
}

var scalF64RW = &core.Codelet{Name: "scal64", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF64}, Modes: []core.Mode{core.RW}}

// TestExecuteOnWorker pins tasks to a worker, and orders them there with
// WorkerOrder whatever the order they are submitted in.
func TestExecuteOnWorker(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			var pinned []*core.Task
			for i := 0; i < 20; i++ {
				task := &core.Task{Codelet: emptyCl, ExecuteOnWorker: true, Worker: 1}
				submit(t, rt, task)
				pinned = append(pinned, task)
			}
			var rec recorder
			var ordered []*core.Task
			for _, o := range []uint{3, 1, 4, 2} {
				task := &core.Task{Name: string(rune('0' + o)), Codelet: emptyCl, ExecuteOnWorker: true, Worker: 0, WorkerOrder: o}
				task.Callback = rec.cb(task.Name)
				ordered = append(ordered, task)
			}
			// Tasks 3 and 4 are ready before 1 and 2 exist.
			submit(t, rt, ordered[0], ordered[2])
			time.Sleep(20 * time.Millisecond)
			if n := len(rec.get()); n != 0 {
				t.Fatalf("%d ordered tasks ran before task 1 was submitted", n)
			}
			submit(t, rt, ordered[1], ordered[3])
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			for _, task := range append(pinned, ordered...) {
				want := 1
				if task.WorkerOrder != 0 {
					want = 0
				}
				if p, _ := rt.Profiling(task); p.Worker != want {
					t.Fatalf("task ran on worker %d, want %d", p.Worker, want)
				}
			}
			if got := strings.Join(rec.get(), ","); got != "1,2,3,4" {
				t.Errorf("worker order %s, want 1,2,3,4", got)
			}
			err := rt.Submit(&core.Task{Codelet: emptyCl, ExecuteOnWorker: true, Worker: 0, WorkerOrder: 2})
			if !errors.Is(err, core.ErrInvalidTask) || !strings.Contains(err.Error(), "has passed") {
				t.Errorf("order already passed: %v", err)
			}
		})
	}
}

func TestDetachSynchronousDup(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			x := []float32{1}
			h, _ := core.RegisterVector(rt, x)
			det := &core.Task{Name: "detached", Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Detach: true}
			submit(t, rt, det)
			if err := rt.Wait(det); !errors.Is(err, core.ErrInvalidTask) || !strings.Contains(err.Error(), "detached") {
				t.Errorf("Wait on a detached task: %v", err)
			}
			if err := rt.WaitArray(det); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("WaitArray with a detached task: %v", err)
			}
			dup := det.Dup()
			dup.Detach, dup.Name = false, "dup"
			dup.Arg[0] ^= 0xff
			if bytes.Equal(dup.Arg, det.Arg) || &dup.Handles[0] == &det.Handles[0] {
				t.Error("Dup shares its slices with the original")
			}
			dup.Arg = blasarg.ScalArg{Alpha: 5}.Encode()
			syncTask := det.Dup()
			syncTask.Detach, syncTask.Synchronous, syncTask.Name = false, true, "sync"
			submit(t, rt, dup)
			if err := rt.Submit(syncTask); err != nil {
				t.Fatal(err)
			}
			if s := syncTask.Status(); s != core.StatusFinished {
				t.Errorf("synchronous task is %v after Submit", s)
			}
			if err := rt.Wait(dup); err != nil {
				t.Fatal(err)
			}
			if err := rt.Wait(&core.Task{Codelet: emptyCl}); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("Wait on an unsubmitted task: %v", err)
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			h.Unregister()
			if x[0] != 20 {
				t.Errorf("x = %v, want 1*2*5*2", x[0])
			}
		})
	}
}

// TestRegenerate: a regenerated task runs again after each completion until
// its callback clears Regenerate; Wait returns after the last.
func TestRegenerate(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			x := []float32{1}
			h, _ := core.RegisterVector(rt, x)
			runs := 0
			var ids []uint64
			task := &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Regenerate: true}
			task.Callback = func(tk *core.Task) {
				runs++
				ids = append(ids, tk.ID())
				if runs == 5 {
					tk.Regenerate = false
				}
			}
			submit(t, rt, task)
			if err := rt.Wait(task); err != nil {
				t.Fatal(err)
			}
			if runs != 5 || task.Status() != core.StatusFinished {
				t.Fatalf("%d runs, status %v; want 5, finished", runs, task.Status())
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if rt.NSubmitted() != 0 {
				t.Errorf("%d tasks still submitted", rt.NSubmitted())
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] == ids[i-1] {
					t.Errorf("submissions %d and %d share ID %d", i-1, i, ids[i])
				}
			}
			h.Unregister()
			if x[0] != 32 {
				t.Errorf("x = %v, want 2^5", x[0])
			}
		})
	}
}

// TestCyclicTags runs a two-task cycle through tags: A (tag 1) waits for
// tag 2, B (tag 2) waits for tag 1, both regenerate; the application
// starts the cycle by notifying tag 2 and each stops after n rounds.
func TestCyclicTags(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			const n = 20
			var rec recorder
			mk := func(name string, tag core.TagID) *core.Task {
				runs := 0
				return &core.Task{Name: name, Codelet: emptyCl, Tag: tag, UseTag: true, Regenerate: true, Callback: func(tk *core.Task) {
					rec.add(name)
					if runs++; runs == n {
						tk.Regenerate = false
					}
				}}
			}
			a, b := mk("A", 1), mk("B", 2)
			if err := rt.DeclareTagDeps(1, 2); err != nil {
				t.Fatal(err)
			}
			if err := rt.DeclareTagDeps(2, 1); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, a, b)
			time.Sleep(10 * time.Millisecond)
			if len(rec.get()) != 0 || a.Status() != core.StatusBlockedOnTag {
				t.Fatalf("cycle ran before it was started (a is %v)", a.Status())
			}
			rt.TagNotifyRestartable(2)
			if err := rt.WaitArray(a, b); err != nil {
				t.Fatal(err)
			}
			got := rec.get()
			if len(got) != 2*n {
				t.Fatalf("%d runs, want %d", len(got), 2*n)
			}
			for i, name := range got {
				if want := "AB"[i%2 : i%2+1]; name != want {
					t.Fatalf("run %d was %s, want %s: %v", i, name, want, got)
				}
			}
			if rt.TaskOfTag(1) != a || rt.TaskOfTag(2) != b || rt.TaskOfTag(99) != nil {
				t.Error("TaskOfTag does not return the tags' tasks")
			}
		})
	}
}

// TestTagNotifyOR: a tag notified by the application stays notified until
// restarted: a second notification does not release its dependents again.
func TestTagNotifyOR(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			var runs atomic.Int32
			r := &core.Task{Name: "r", Codelet: emptyCl, Tag: 20, UseTag: true, Regenerate: true}
			r.Callback = func(tk *core.Task) {
				if runs.Add(1) == 2 {
					tk.Regenerate = false
				}
			}
			if err := rt.DeclareTagDeps(20, 10); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, r)
			rt.TagNotifyFromApps(10)
			eventually(t, "first run", func() bool { return runs.Load() == 1 })
			eventually(t, "second submission blocked on its tag", func() bool { return r.Status() == core.StatusBlockedOnTag })
			rt.TagNotifyFromApps(10) // OR: already notified, nothing happens
			time.Sleep(30 * time.Millisecond)
			if runs.Load() != 1 {
				t.Fatalf("a second notification without restart released the task again (%d runs)", runs.Load())
			}
			if err := rt.TagRestart(10); err != nil {
				t.Fatal(err)
			}
			rt.TagNotifyFromApps(10)
			if err := rt.Wait(r); err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 2 {
				t.Errorf("%d runs, want 2", runs.Load())
			}
			// A dependency declared on an already notified tag is met.
			late := &core.Task{Name: "late", Codelet: emptyCl, Tag: 21, UseTag: true}
			if err := rt.DeclareTagDeps(21, 10); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, late)
			if err := rt.TagWaitArray(20, 21, 10); err != nil {
				t.Fatal(err)
			}
			if err := rt.TagWait(12345); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("TagWait on an unused tag: %v", err)
			}
			if err := rt.TagRestart(20); err != nil {
				t.Errorf("restart of a tag whose task completed: %v", err)
			}
			if err := rt.TagRemove(21); err != nil {
				t.Error(err)
			}
			if err := rt.TagRemove(21); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("second TagRemove: %v", err)
			}
			if err := rt.DeclareTagDeps(5, 5); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("self tag dependency: %v", err)
			}
		})
	}
}

// TestDeclareTagDepsAfterSubmit: tag dependencies declared while the tag's
// task waits for its data still hold it.
func TestDeclareTagDepsAfterSubmit(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			h, _ := core.RegisterVector(rt, []float32{1})
			if err := h.Acquire(core.RW); err != nil {
				t.Fatal(err)
			}
			task := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}, Tag: 31, UseTag: true}
			submit(t, rt, task)
			if s := task.Status(); s != core.StatusBlockedOnData {
				t.Fatalf("status %v, want blocked on data", s)
			}
			if err := rt.DeclareTagDeps(31, 30); err != nil {
				t.Fatal(err)
			}
			h.Release()
			ch := notDone(t, "task waiting for tag 30", func() error { return rt.Wait(task) })
			if s := task.Status(); s != core.StatusBlockedOnTag {
				t.Errorf("status %v, want blocked on tag", s)
			}
			rt.TagNotifyFromApps(30)
			done(t, "task after tag 30", ch)
		})
	}
}

// TestTagChainByTasks is TestTagChain with explicit task dependencies: a
// chain of empty tasks whose head is submitted last.
func TestTaskChainHeadLast(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			const n = 100
			var mu sync.Mutex
			var order []int
			tasks := make([]*core.Task, n)
			for i := range tasks {
				i := i
				cl := emptyCl
				if i%3 == 1 {
					cl = nil // synchronisation tasks in the chain
				}
				tasks[i] = &core.Task{Codelet: cl, Callback: func(*core.Task) {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
				}}
			}
			for i := 1; i < n; i++ {
				if err := rt.DeclareDeps(tasks[i], tasks[i-1]); err != nil {
					t.Fatal(err)
				}
			}
			submit(t, rt, tasks[1:]...)
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			ran := len(order)
			mu.Unlock()
			if ran != 0 {
				t.Fatalf("%d tasks ran before the head was submitted", ran)
			}
			if s := tasks[n-1].Status(); s != core.StatusBlockedOnTask {
				t.Errorf("tail status %v, want blocked on task", s)
			}
			if s := tasks[0].Status(); s != core.StatusInvalid {
				t.Errorf("unsubmitted head status %v", s)
			}
			submit(t, rt, tasks[0])
			if err := rt.Wait(tasks[n-1]); err != nil {
				t.Fatal(err)
			}
			for i, v := range order {
				if v != i {
					t.Fatalf("completion %d was task %d", i, v)
				}
			}
		})
	}
}

// TestDeclareDepsLate declares dependencies after the predecessor ran and
// after the successor was submitted.
func TestDeclareDepsLate(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			var rec recorder
			ran := &core.Task{Name: "ran", Codelet: emptyCl, Synchronous: true}
			submit(t, rt, ran)
			succ := &core.Task{Name: "succ", Codelet: emptyCl}
			if err := rt.DeclareDeps(succ, ran); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, succ)
			if err := rt.Wait(succ); err != nil {
				t.Fatalf("a dependency on a finished task must be met: %v", err)
			}
			// The successor is submitted, waiting for its data; then it gets
			// a predecessor that is not even submitted.
			h, _ := core.RegisterVector(rt, []float32{1})
			h.Acquire(core.RW)
			late := &core.Task{Name: "late", Codelet: emptyRW, Handles: []*core.Handle{h}, Callback: rec.cb("late")}
			pred := &core.Task{Name: "pred", Codelet: emptyCl, Callback: rec.cb("pred")}
			submit(t, rt, late)
			if err := rt.DeclareDeps(late, pred); err != nil {
				t.Fatal(err)
			}
			h.Release()
			ch := notDone(t, "task with a late predecessor", func() error { return rt.Wait(late) })
			if s := late.Status(); s != core.StatusBlockedOnTask {
				t.Errorf("status %v, want blocked on task", s)
			}
			submit(t, rt, pred)
			done(t, "late", ch)
			if got := strings.Join(rec.get(), ","); got != "pred,late" {
				t.Errorf("order %s", got)
			}
			// Too late: the task completed. The dependency is for its next
			// submission.
			other := &core.Task{Name: "other", Codelet: emptyCl, Callback: rec.cb("other")}
			if err := rt.DeclareDeps(late, other); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, late)
			notDone(t, "resubmitted task", func() error { return rt.Wait(late) })
			submit(t, rt, other)
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.get(), ","); got != "pred,late,other,late" {
				t.Errorf("order %s", got)
			}
			if err := rt.DeclareDeps(late, late); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("self dependency: %v", err)
			}
		})
	}
}

// TestEndDeps: a task whose end dependencies are pending has run but does
// not appear finished: Wait blocks, successors and callback wait.
func TestEndDeps(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			var rec recorder
			a := &core.Task{Name: "a", Codelet: emptyCl, Callback: rec.cb("a")}
			e := &core.Task{Name: "e", Codelet: emptyCl, Callback: rec.cb("e")}
			succ := &core.Task{Name: "succ", Codelet: emptyCl, Callback: rec.cb("succ")}
			if err := rt.DeclareEndDeps(a, e); err != nil {
				t.Fatal(err)
			}
			if err := rt.DeclareDeps(succ, a); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, a, succ)
			eventually(t, "a to run", func() bool { return a.Status() == core.StatusStopped })
			ch := notDone(t, "Wait on a task with pending end dependencies", func() error { return rt.Wait(a) })
			if got := rec.get(); len(got) != 0 {
				t.Fatalf("callbacks ran: %v", got)
			}
			if succs := rt.TaskSuccessors(a); len(succs) != 1 || succs[0] != succ {
				t.Errorf("successors of a: %v", succs)
			}
			submit(t, rt, e)
			done(t, "Wait(a)", ch)
			if err := rt.Wait(succ); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.get(), ","); got != "e,a,succ" {
				t.Errorf("order %s, want e,a,succ", got)
			}
			// EndDepAdd / EndDepRelease.
			b := &core.Task{Name: "b", Codelet: emptyCl}
			if err := rt.EndDepAdd(b, 2); err != nil {
				t.Fatal(err)
			}
			submit(t, rt, b)
			eventually(t, "b to run", func() bool { return b.Status() == core.StatusStopped })
			if err := rt.EndDepRelease(b); err != nil {
				t.Fatal(err)
			}
			ch = notDone(t, "Wait(b) with one end dependency left", func() error { return rt.Wait(b) })
			if err := rt.EndDepRelease(b); err != nil {
				t.Fatal(err)
			}
			done(t, "Wait(b)", ch)
			if err := rt.EndDepRelease(b); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("release without end dependency: %v", err)
			}
			if err := rt.DeclareEndDeps(b, a); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("end dependency on a terminated task: %v", err)
			}
			if err := rt.EndDepAdd(b, 0); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("EndDepAdd(0): %v", err)
			}
		})
	}
}

// TestSuccessors lists a task's successors through data and explicit
// dependencies.
func TestSuccessors(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, _ := core.RegisterVector(rt, []float32{1})
	h.Acquire(core.RW)
	a := &core.Task{Name: "a", Codelet: emptyRW, Handles: []*core.Handle{h}}
	data := &core.Task{Name: "data", Codelet: emptyRW, Handles: []*core.Handle{h}}
	explicit := &core.Task{Name: "explicit", Codelet: emptyCl}
	syncT := &core.Task{Name: "sync"}
	pinned := &core.Task{Name: "pinned", Codelet: emptyCl, ExecuteOnWorker: true, Worker: 0}
	submit(t, rt, a, data)
	for _, s := range []*core.Task{explicit, syncT, pinned} {
		if err := rt.DeclareDeps(s, a); err != nil {
			t.Fatal(err)
		}
	}
	submit(t, rt, explicit, syncT, pinned)
	names := func(ts []*core.Task) string {
		var n []string
		for _, t := range ts {
			n = append(n, t.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(rt.TaskSuccessors(a)); got != "data,explicit,sync,pinned" {
		t.Errorf("successors %s", got)
	}
	if got := names(rt.ScheduledSuccessors(a)); got != "data,explicit" {
		t.Errorf("scheduled successors %s", got)
	}
	h.Release()
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
}

// TestWaitFunctions covers WaitForNoReady, WaitForNSubmitted, NReady and
// NSubmitted with tasks held by a tag.
func TestWaitFunctions(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			if err := rt.DeclareTagDeps(51, 50); err != nil {
				t.Fatal(err)
			}
			held := &core.Task{Name: "held", Codelet: emptyCl, Tag: 51, UseTag: true}
			var blocked []*core.Task
			for i := 0; i < 5; i++ {
				b := &core.Task{Codelet: emptyCl}
				if err := rt.DeclareDeps(b, held); err != nil {
					t.Fatal(err)
				}
				blocked = append(blocked, b)
			}
			submit(t, rt, held)
			submit(t, rt, blocked...)
			var free []*core.Task
			for i := 0; i < 50; i++ {
				f := &core.Task{Codelet: emptyCl}
				submit(t, rt, f)
				free = append(free, f)
			}
			if err := rt.WaitForNoReady(); err != nil {
				t.Fatal(err)
			}
			// Free tasks may still be running: they are neither ready nor done.
			if n := rt.NReady(); n != 0 {
				t.Errorf("after WaitForNoReady: %d ready, want 0", n)
			}
			if err := rt.WaitArray(free...); err != nil {
				t.Fatal(err)
			}
			if err := rt.WaitForNSubmitted(6); err != nil {
				t.Fatal(err)
			}
			if n := rt.NSubmitted(); n != 6 {
				t.Errorf("after the free tasks: %d submitted, want the 6 held", n)
			}
			ch := notDone(t, "WaitForNSubmitted(2)", func() error { return rt.WaitForNSubmitted(2) })
			rt.TagNotifyFromApps(50)
			done(t, "WaitForNSubmitted(2)", ch)
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if err := rt.WaitForNSubmitted(-1); !errors.Is(err, core.ErrInvalidTask) {
				t.Errorf("WaitForNSubmitted(-1): %v", err)
			}
		})
	}
}

// TestStatusRunningAndCurrentTask uses in-process kernels: one blocks to
// show a running task, one maps its TaskID back to its task.
func TestStatusRunningAndCurrentTask(t *testing.T) {
	gate := make(chan struct{})
	// The kernel runs on a driver goroutine, which learns of rt only
	// through shared memory: publish it atomically.
	var rtp atomic.Pointer[core.Runtime]
	var mu sync.Mutex
	seen := map[uint64]*core.Task{}
	opts := withKernels(gateKernel("test_gate", gate), kernel.Kernel{Name: "test_current", Func: func(c *kernel.Context) error {
		mu.Lock()
		seen[c.TaskID] = rtp.Load().TaskByID(c.TaskID)
		mu.Unlock()
		return nil
	}})
	rt := start(t, opts)
	rtp.Store(rt)
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}}
	current := &core.Codelet{Name: "current", Kernels: map[driver.Arch]string{driver.CPU: "test_current"}}
	var prologue atomic.Bool
	task := &core.Task{Codelet: gated, PrologueCallback: func(*core.Task) { prologue.Store(true) }}
	if task.Status() != core.StatusInvalid {
		t.Errorf("new task: %v", task.Status())
	}
	submit(t, rt, task)
	eventually(t, "running status", func() bool { return task.Status() == core.StatusRunning })
	if !prologue.Load() {
		t.Error("prologue callback did not run before the task")
	}
	if rt.TaskByID(task.ID()) != task {
		t.Error("TaskByID does not find the running task")
	}
	if err := rt.DeclareTagDeps(61, 60); err != nil {
		t.Fatal(err)
	}
	late := &core.Task{Codelet: gated, Tag: 61, UseTag: true}
	submit(t, rt, late)
	if s := late.Status(); s != core.StatusBlockedOnTag {
		t.Errorf("status %v, want blocked on tag", s)
	}
	rt.TagNotifyFromApps(60)
	// Running on the other worker, or waiting behind the first task on
	// its worker: ws may put it in either place.
	eventually(t, "second gated task released", func() bool {
		s := late.Status()
		return s == core.StatusRunning || s == core.StatusReady
	})
	close(gate)
	var cur []*core.Task
	for i := 0; i < 10; i++ {
		c := &core.Task{Codelet: current}
		submit(t, rt, c)
		cur = append(cur, c)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range cur {
		if seen[c.ID()] != c {
			t.Errorf("kernel of task %d found %v via TaskByID", c.ID(), seen[c.ID()])
		}
	}
	if task.Status() != core.StatusFinished {
		t.Errorf("status %v after completion", task.Status())
	}
}

// TestDeclareAfterReady: dependencies declared on a task that already runs
// are an error, not silently dropped.
func TestDeclareAfterReady(t *testing.T) {
	gate := make(chan struct{})
	rt := start(t, withKernels(gateKernel("test_gate", gate)))
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}}
	task := &core.Task{Codelet: gated, Tag: 71, UseTag: true}
	submit(t, rt, task)
	eventually(t, "running", func() bool { return task.Status() == core.StatusRunning })
	if err := rt.DeclareDeps(task, &core.Task{Codelet: emptyCl}); !errors.Is(err, core.ErrInvalidTask) || !strings.Contains(err.Error(), "already ready") {
		t.Errorf("DeclareDeps on a running task: %v", err)
	}
	if err := rt.DeclareTagDeps(71, 70); !errors.Is(err, core.ErrInvalidTask) {
		t.Errorf("DeclareTagDeps on a running tag task: %v", err)
	}
	close(gate)
	if err := rt.Wait(task); err != nil {
		t.Fatal(err)
	}
}

// TestSequentialConsistencyOff: a task without sequential consistency is
// not ordered after the acquisition, but still excluded by it: it waits for
// the data lock until Release.
func TestSequentialConsistencyOff(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, _ := core.RegisterVector(rt, []float32{1})
	if err := h.Acquire(core.RW); err != nil {
		t.Fatal(err)
	}
	free := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}, NoSequentialConsistency: true}
	submit(t, rt, free)
	eventually(t, "the task waits for the data lock", func() bool { return free.Status() == core.StatusBlockedOnData })
	ch := make(chan error, 1)
	go func() { ch <- rt.Wait(free) }()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	done(t, "task without sequential consistency after Release", ch)
}

// TestSyncTaskStatsTrace covers CreateSyncTask, per-codelet statistics,
// profiling times and iterations in the trace.
func TestSyncTaskStatsTrace(t *testing.T) {
	opts := core.Options{Config: testConfig(pluginDir), Trace: true, Profiling: true}
	rt := start(t, opts)
	cl := &core.Codelet{Name: "stat-empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	var synced atomic.Bool
	t1 := &core.Task{Codelet: cl, Tag: 80, UseTag: true, Flops: 1e6}
	t2 := &core.Task{Codelet: cl, Tag: 81, UseTag: true, Flops: 1e6}
	if err := rt.CreateSyncTask(82, []core.TagID{80, 81}, func() { synced.Store(true) }); err != nil {
		t.Fatal(err)
	}
	rt.IterationPush(3)
	rt.IterationPush(7)
	submit(t, rt, t1)
	if err := rt.IterationPop(); err != nil {
		t.Fatal(err)
	}
	submit(t, rt, t2)
	rt.IterationPop()
	if err := rt.IterationPop(); !errors.Is(err, core.ErrInvalidTask) {
		t.Errorf("unmatched IterationPop: %v", err)
	}
	if err := rt.TagWait(82); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if !synced.Load() {
		t.Error("sync task callback did not run")
	}
	for i := 0; i < 8; i++ {
		submit(t, rt, &core.Task{Codelet: cl, Flops: 1e6})
	}
	rt.WaitForAll()
	st, err := rt.CodeletStats(cl)
	if err != nil {
		t.Fatal(err)
	}
	if st.Tasks() != 10 {
		t.Errorf("stats count %d tasks, want 10", st.Tasks())
	}
	var flops float64
	for _, w := range st.Workers {
		flops += w.Flops
		if w.Tasks > 0 && (w.Total <= 0 || w.Mean() <= 0) {
			t.Errorf("worker %d: %d tasks in %v", w.Worker, w.Tasks, w.Total)
		}
	}
	if flops != 1e7 {
		t.Errorf("flops %v, want 1e7", flops)
	}
	if rep := rt.CodeletStatsReport(); !strings.Contains(rep, "Statistics for codelet stat-empty: 10 tasks") {
		t.Errorf("report:\n%s", rep)
	}
	if _, err := rt.CodeletStats(&core.Codelet{Name: "never"}); !errors.Is(err, core.ErrInvalidTask) {
		t.Errorf("stats of an unused codelet: %v", err)
	}
	p, err := rt.Profiling(t1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Submitted.IsZero() || p.Started.Before(p.Submitted) || p.Ended.Before(p.Started) || p.Worker < 0 {
		t.Errorf("profiling %+v: want submit <= start <= end on a worker", p)
	}
	if d := time.Since(p.Ended); d < 0 || d > time.Minute {
		t.Errorf("end time %v is not a recent wall-clock time", p.Ended)
	}
	if p.Predicted != -1 {
		t.Errorf("predicted %v without a performance model", p.Predicted)
	}
	if p.PredictedTransfer != 0 {
		t.Errorf("predicted transfer %v on a machine with RAM only, want 0", p.PredictedTransfer)
	}
	var buf bytes.Buffer
	if err := rt.WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	iters := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Args["iteration"] != nil {
			iters[strings.TrimSpace(strings.Join([]string{jsonNum(e.Args["iteration"]), jsonNum(e.Args["outer_iteration"])}, " "))]++
		}
	}
	if iters["7 3"] != 1 || iters["3"] != 1 || len(iters) != 2 {
		t.Errorf("iterations in the trace: %v, want one task at 7 in 3 and one at 3", iters)
	}
}

func jsonNum(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTaskNames(t *testing.T) {
	withModel := &core.Codelet{Name: "cl", ModelName: "model"}
	cases := []struct {
		task        *core.Task
		name, model string
	}{
		{&core.Task{Name: "n", Codelet: withModel}, "n", "model"},
		{&core.Task{Codelet: withModel}, "model", "model"},
		{&core.Task{Codelet: emptyCl}, "empty", ""},
		{&core.Task{}, "", ""},
	}
	for i, c := range cases {
		if got := c.task.TaskName(); got != c.name {
			t.Errorf("case %d: TaskName = %q, want %q", i, got, c.name)
		}
		if got := c.task.ModelName(); got != c.model {
			t.Errorf("case %d: ModelName = %q, want %q", i, got, c.model)
		}
	}
}

// A kernel error longer than a completion ring message is cut, not lost:
// the task fails with the start of it and the worker goes on running tasks
// (it used to stop, and Wait never returned).
func TestLongKernelError(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg})
	long := &core.Codelet{Name: "long", Kernels: map[driver.Arch]string{driver.CPU: "test_long_fail"}}
	tk := &core.Task{Codelet: long}
	if err := rt.Submit(tk); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Wait(tk) }()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "deliberate failure: éé") || !strings.Contains(err.Error(), "bytes cut]") {
			t.Fatalf("Wait: %.200v..., want the cut kernel error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait on a task with a long kernel error did not return")
	}
	if err := rt.Submit(&core.Task{Codelet: emptyCl, Synchronous: true}); err != nil {
		t.Fatalf("a task after the long error: %v", err)
	}
}

// A kernel name no driver hosts gets the closest names the drivers of its
// architecture do, when one is close.
func TestKernelNameSuggestion(t *testing.T) {
	rt := start(t, withKernels())
	for _, c := range []struct {
		name string
		cl   *core.Codelet
		want string // "" : no suggestion
	}{
		{"swapped digits", &core.Codelet{Name: "s1", Kernels: map[driver.Arch]string{driver.CPU: "scal_f23"}}, `did you mean "scal_f32" for cpu kernel "scal_f23"?`},
		{"one missing", &core.Codelet{Name: "s2", Impls: map[driver.Arch][]string{driver.CPU: {"gemm_f3", "axpyf64"}}}, `did you mean "gemm_f32" for cpu kernel "gemm_f3", "axpy_f64" for cpu kernel "axpyf64"?`},
		{"nothing close", &core.Codelet{Name: "s3", Kernels: map[driver.Arch]string{driver.CPU: "no_such_kernel"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := rt.Submit(&core.Task{Codelet: c.cl})
			if !errors.Is(err, core.ErrNoWorker) {
				t.Fatalf("Submit: %v, want ErrNoWorker", err)
			}
			if got := strings.Contains(err.Error(), "did you mean"); got != (c.want != "") || !strings.HasSuffix(err.Error(), c.want) {
				t.Fatalf("Submit: %v\nwant it to end %q", err, c.want)
			}
		})
	}
}
