package core_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
)

// appRuns counts the tasks of appKernels that ran, in this process;
// appRT is the runtime app_wait waits on.
var (
	appRuns atomic.Int64
	appRT   atomic.Pointer[core.Runtime]
)

// appKernels are the kernels of the application-driven tests: app_where
// writes the process and thread it runs on, app_inc adds 1 to a float64.
var appKernels = []kernel.Kernel{
	{Name: "app_where", Func: func(ctx *kernel.Context) error {
		appRuns.Add(1)
		v := ctx.Buffers[0].Int64s()
		v[0], v[1] = int64(os.Getpid()), int64(syscall.Gettid())
		return nil
	}},
	// app_wait waits for every task from the worker that runs it.
	{Name: "app_wait", Func: func(*kernel.Context) error { return appRT.Load().WaitForAll() }},
	{Name: "app_inc", Func: func(ctx *kernel.Context) error {
		appRuns.Add(1)
		ctx.Buffers[0].Float64s()[0]++
		return nil
	}},
}

var (
	appWhere = &core.Codelet{Name: "app_where", Kernels: map[driver.Arch]string{driver.CPU: "app_where"}, Modes: []core.Mode{core.W}}
	appInc   = &core.Codelet{Name: "app_inc", Kernels: map[driver.Arch]string{driver.CPU: "app_inc"}, Modes: []core.Mode{core.RW}}
	cpu0     = core.DriverID{Arch: driver.CPU, Index: 0}
)

// appConfig is two CPU workers, unbound, over the scheduler alone: the CPU
// driver runs in the test's process.
func appConfig(t *testing.T) *config.Config {
	cfg := testConfig(schedOnlyDir(t))
	cfg.Plugins["driver-cpu"] = config.Plugin{Name: "driver-cpu", Config: base.Config{"bind": false}}
	return cfg
}

// startApp starts a runtime whose CPU worker 0 is the application's, and
// returns it with that worker's ID and the launched one's.
func startApp(t *testing.T, cfg *config.Config) (rt *core.Runtime, held, launched int) {
	t.Helper()
	rt, err := core.Init(context.Background(), core.Options{Config: cfg, Kernels: appKernels, NotLaunchedDrivers: []core.DriverID{cpu0}})
	if err != nil {
		t.Fatal(err)
	}
	held, launched = -1, -1
	for _, w := range rt.Workers() {
		switch {
		case w.Arch == driver.CPU && w.AppDriven && held < 0:
			held = w.ID
		case w.Arch == driver.CPU && !w.AppDriven:
			launched = w.ID
		case w.AppDriven:
			t.Fatalf("worker %d is application-driven too: %+v", w.ID, rt.Workers())
		}
		if w.Pid != 0 {
			t.Errorf("worker %d runs in process %d: want this process", w.ID, w.Pid)
		}
	}
	if held != 0 || launched < 0 {
		t.Fatalf("workers %+v: want CPU worker 0 application-driven, another launched", rt.Workers())
	}
	return rt, held, launched
}

// where submits app_where, pinned to worker w when w >= 0, and returns its
// task and output ({pid, tid}).
func where(t *testing.T, rt *core.Runtime, w int) (*core.Task, []int64) {
	t.Helper()
	out := make([]int64, 2)
	h, err := core.RegisterVector(rt, out)
	if err != nil {
		t.Fatal(err)
	}
	task := &core.Task{Codelet: appWhere, Handles: []*core.Handle{h}, ExecuteOnWorker: w >= 0, Worker: max(w, 0)}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	if err := h.UnregisterSubmit(); err != nil {
		t.Fatal(err)
	}
	return task, out
}

// driverThread runs f on a goroutine locked to its thread and returns
// that thread's ID and f's result.
func driverThread(f func() error) (tid int, done chan error) {
	tids, done := make(chan int), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		done <- f()
	}()
	return <-tids, done
}

// TestRunDriver: an application-driven CPU worker, run by RunDriver on a
// goroutine locked to its thread, runs the tasks pinned to it there, in
// this process, and shares the rest with the launched worker: a
// read-write chain over both comes out right. RequestDriversTermination
// ends RunDriver; a later one returns at once.
func TestRunDriver(t *testing.T) {
	rt, held, launched := startApp(t, appConfig(t))
	defer rt.Shutdown()
	tid, done := driverThread(func() error { return rt.RunDriver(context.Background(), cpu0) })

	type run struct {
		task *core.Task
		out  []int64
		on   int
	}
	var runs []run
	for i := 0; i < 20; i++ {
		on := held
		if i%4 == 3 {
			on = launched
		}
		task, out := where(t, rt, on)
		runs = append(runs, run{task, out, on})
	}
	x := []float64{0}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := rt.Submit(&core.Task{Codelet: appInc, Handles: []*core.Handle{h}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 200 {
		t.Errorf("200 increments over both workers give %v", x[0])
	}
	for i, r := range runs {
		if err := r.task.Err(); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		pid, ktid := int(r.out[0]), int(r.out[1])
		if pid != os.Getpid() {
			t.Errorf("task %d ran in process %d, want this one (%d)", i, pid, os.Getpid())
		}
		if onDriver := ktid == tid; onDriver != (r.on == held) {
			t.Errorf("task %d pinned to worker %d ran on thread %d; RunDriver's thread is %d", i, r.on, ktid, tid)
		}
	}

	select {
	case err := <-done:
		t.Fatalf("RunDriver returned before termination was requested: %v", err)
	default:
	}
	rt.RequestDriversTermination()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunDriver after RequestDriversTermination: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunDriver did not return after RequestDriversTermination")
	}
	start := time.Now()
	if err := rt.RunDriver(context.Background(), cpu0); err != nil || time.Since(start) > time.Second {
		t.Fatalf("RunDriver after termination: %v after %v, want nil at once", err, time.Since(start))
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// TestDriverRunOnce: the application interleaves its own work with
// DriverRunOnce on a goroutine locked to its thread: each call runs at
// most one task, there, and returns at once when none waits.
func TestDriverRunOnce(t *testing.T) {
	rt, held, _ := startApp(t, appConfig(t))
	defer rt.Shutdown()
	const n = 10
	var tasks []*core.Task
	var outs [][]int64
	for i := 0; i < n; i++ {
		task, out := where(t, rt, held)
		tasks, outs = append(tasks, task), append(outs, out)
	}
	before := appRuns.Load()
	var appWork, empty int
	tid, done := driverThread(func() error {
		if err := rt.DriverInit(cpu0); err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for ran := 0; ran < n; {
			if time.Now().After(deadline) {
				return errors.New("tasks did not all run in 10 s")
			}
			did, err := rt.DriverRunOnce(cpu0)
			if err != nil {
				return err
			}
			if did {
				ran++
			} else {
				empty++
			}
			if got := appRuns.Load() - before; got != int64(ran) {
				return fmt.Errorf("%d tasks ran after %d DriverRunOnce said they ran one", got, ran)
			}
			appWork++ // the application's own work, between passes
		}
		// Nothing is left: a pass returns at once, saying so.
		start := time.Now()
		if did, err := rt.DriverRunOnce(cpu0); did || err != nil || time.Since(start) > time.Second {
			return fmt.Errorf("DriverRunOnce with no task left: %v, %v after %v", did, err, time.Since(start))
		}
		return rt.DriverDeinit(cpu0)
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil { // the outputs are written back
		t.Fatal(err)
	}
	for i, task := range tasks {
		if err := task.Err(); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		if int(outs[i][1]) != tid {
			t.Errorf("task %d ran on thread %d, want the DriverRunOnce loop's %d", i, outs[i][1], tid)
		}
	}
	if appWork < n {
		t.Errorf("the application worked %d times between %d tasks", appWork, n)
	}
	t.Logf("%d passes, %d of them with nothing to run", appWork, empty)
	if _, err := rt.DriverRunOnce(cpu0); !errors.Is(err, core.ErrDriverCall) || !strings.Contains(err.Error(), "after DriverDeinit") {
		t.Fatalf("DriverRunOnce after DriverDeinit: %v", err)
	}
}

// TestAppDriverCallErrors: the calls name what is wrong when the worker
// is unknown, launched, or in a state the call does not fit.
func TestAppDriverCallErrors(t *testing.T) {
	rt, held, _ := startApp(t, appConfig(t))
	defer rt.Shutdown()
	ctx := context.Background()
	runDriver := func(id core.DriverID) func() error {
		return func() error { return rt.RunDriver(ctx, id) }
	}
	runOnce := func() error { _, err := rt.DriverRunOnce(cpu0); return err }
	init := func() error { return rt.DriverInit(cpu0) }
	deinit := func() error { return rt.DriverDeinit(cpu0) }
	check := func(t *testing.T, name string, call func() error, want string) {
		t.Helper()
		if err := call(); !errors.Is(err, core.ErrDriverCall) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrDriverCall saying %q", name, err, want)
		}
	}
	t.Run("idle", func(t *testing.T) {
		for _, c := range []struct {
			name string
			call func() error
			want string
		}{
			{"unknown CPU worker", runDriver(core.DriverID{Arch: driver.CPU, Index: 7}), "no such worker (2 cpu workers)"},
			{"unknown architecture", runDriver(core.DriverID{Arch: driver.OpenCL, Index: 0}), "no such worker (0 opencl workers)"},
			{"launched worker", runDriver(core.DriverID{Arch: driver.CPU, Index: 1}), "which the runtime launched"},
			{"run once before init", runOnce, "DriverRunOnce cpu:0 before DriverInit"},
			{"deinit before init", deinit, "not initialised by DriverInit"},
		} {
			check(t, c.name, c.call, c.want)
		}
	})
	t.Run("initialised", func(t *testing.T) {
		if err := init(); err != nil {
			t.Fatal(err)
		}
		check(t, "init twice", init, "initialised already")
		check(t, "RunDriver while initialised", runDriver(cpu0), "DriverInit made it the application's")
		if err := deinit(); err != nil {
			t.Fatal(err)
		}
		check(t, "run once after deinit", runOnce, "after DriverDeinit")
	})
	t.Run("running", func(t *testing.T) {
		runCtx, cancel := context.WithCancel(ctx)
		_, done := driverThread(func() error { return rt.RunDriver(runCtx, cpu0) })
		// A pinned task done: RunDriver runs the worker.
		task, _ := where(t, rt, held)
		if err := rt.Wait(task); err != nil {
			t.Fatal(err)
		}
		appRT.Store(rt)
		wait := &core.Task{Codelet: &core.Codelet{Name: "app_wait", Kernels: map[driver.Arch]string{driver.CPU: "app_wait"}},
			ExecuteOnWorker: true, Worker: held}
		if err := rt.Submit(wait); err != nil {
			t.Fatal(err)
		}
		if err := rt.Wait(wait); !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), core.ErrDeadlock.Error()) {
			t.Fatalf("a kernel of the worker waiting for every task: %v, want it failed with ErrDeadlock's text", err)
		}
		check(t, "RunDriver twice at once", runDriver(cpu0), "a RunDriver is running it")
		check(t, "DriverInit while RunDriver runs", init, "a RunDriver is running it")
		check(t, "DriverRunOnce while RunDriver runs", runOnce, "a RunDriver is running it")
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("RunDriver with its context cancelled: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("RunDriver did not return when its context was cancelled")
		}
	})
	t.Run("shut down", func(t *testing.T) {
		if err := rt.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := rt.RunDriver(ctx, cpu0); !errors.Is(err, core.ErrShutdown) {
			t.Errorf("RunDriver after Shutdown: %v, want ErrShutdown", err)
		}
		if err := rt.DriverInit(cpu0); !errors.Is(err, core.ErrShutdown) {
			t.Errorf("DriverInit after Shutdown: %v, want ErrShutdown", err)
		}
	})
}

// TestAppDrivenInProcessDrivers: with Options.Drivers, the CPU driver
// they give holds the worker (cpudriver implements driver.AppDriven).
func TestAppDrivenInProcessDrivers(t *testing.T) {
	cpu := func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return cpudriver.New(a, log, cpudriver.WithKernels(appKernels...)), nil
	}
	rt, err := core.Init(context.Background(), core.Options{Config: appConfig(t), Drivers: []core.DriverFactory{cpu}, NotLaunchedDrivers: []core.DriverID{cpu0}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	task, out := where(t, rt, 0)
	tid, done := driverThread(func() error {
		if err := rt.DriverInit(cpu0); err != nil {
			return err
		}
		for deadline := time.Now().Add(10 * time.Second); task.Status() != core.StatusFinished; {
			if time.Now().After(deadline) {
				return errors.New("the pinned task did not run in 10 s")
			}
			if _, err := rt.DriverRunOnce(cpu0); err != nil {
				return err
			}
		}
		return rt.DriverDeinit(cpu0)
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if int(out[1]) != tid {
		t.Fatalf("the pinned task ran on thread %d, want the driving goroutine's %d", out[1], tid)
	}
}

// TestNotLaunchedDriversInitErrors: Init refuses what cannot be run by
// the application, naming it.
func TestNotLaunchedDriversInitErrors(t *testing.T) {
	cpu1 := core.DriverID{Arch: driver.CPU, Index: 1}
	notAppDriven := func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		// Hides cpudriver's Hold and AppWorker.
		return struct{ driver.Driver }{cpudriver.New(a, log, cpudriver.WithKernels(appKernels...))}, nil
	}
	for _, c := range []struct {
		name string
		opt  core.Options
		want string
	}{
		{"OpenCL worker", core.Options{Kernels: appKernels, NotLaunchedDrivers: []core.DriverID{{Arch: driver.OpenCL, Index: 0}}}, "only CPU workers can be application-driven"},
		{"past the CPU workers", core.Options{Kernels: appKernels, NotLaunchedDrivers: []core.DriverID{{Arch: driver.CPU, Index: 2}}}, "cpu:2: there are 2 cpu workers"},
		{"twice", core.Options{Kernels: appKernels, NotLaunchedDrivers: []core.DriverID{cpu1, cpu1}}, "cpu:1 is given twice"},
		{"no kernels", core.Options{NotLaunchedDrivers: []core.DriverID{cpu0}}, "list them in Options.Kernels"},
		{"in-process driver that cannot hold", core.Options{Drivers: []core.DriverFactory{notAppDriven}, NotLaunchedDrivers: []core.DriverID{cpu0}}, "does not implement driver.AppDriven"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opt.Config = appConfig(t)
			rt, err := core.Init(context.Background(), c.opt)
			if err == nil {
				rt.Shutdown()
				t.Fatalf("Init: no error, want one saying %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Init: %v, want %q", err, c.want)
			}
		})
	}
}

// TestShutdownAbandonedAppDriver: Shutdown with a task pinned to an
// application-driven worker nobody runs fails that task after
// plugin_timeout, naming the worker, instead of waiting for ever; a
// worker run until Shutdown lets it finish its tasks.
func TestShutdownAbandonedAppDriver(t *testing.T) {
	t.Run("never run", func(t *testing.T) {
		cfg := appConfig(t)
		cfg.PluginTimeout = 300 * time.Millisecond
		rt, held, _ := startApp(t, cfg)
		task, out := where(t, rt, held)
		start := time.Now()
		err := rt.Shutdown()
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "worker 0 (cpu:0) is application-driven and nothing ran it") || !strings.Contains(err.Error(), "1 of them failed") {
			t.Fatalf("Shutdown: %v", err)
		}
		if took < cfg.PluginTimeout || took > 5*time.Second {
			t.Errorf("Shutdown took %v with plugin_timeout %v", took, cfg.PluginTimeout)
		}
		if err := task.Err(); !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "nothing ran it") {
			t.Fatalf("the abandoned worker's task: %v", err)
		}
		if out[0] != 0 {
			t.Fatal("the abandoned worker's task ran")
		}
	})
	t.Run("refused task leaves its data", func(t *testing.T) {
		// The task failed without running: the vector it would have
		// written is as it was, not lost.
		cfg := appConfig(t)
		cfg.PluginTimeout = 300 * time.Millisecond
		rt, held, _ := startApp(t, cfg)
		h, err := core.RegisterVector(rt, make([]int64, 2))
		if err != nil {
			t.Fatal(err)
		}
		task := &core.Task{Codelet: appWhere, Handles: []*core.Handle{h}, ExecuteOnWorker: true, Worker: held}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		if err := rt.Shutdown(); err == nil || !strings.Contains(err.Error(), "1 of them failed") {
			t.Fatalf("Shutdown: %v", err)
		}
		if err := task.Err(); !errors.Is(err, core.ErrTaskFailed) {
			t.Fatalf("the refused task: %v", err)
		}
		if err := h.Lost(); err != nil {
			t.Fatalf("a task refused unrun marked its data lost: %v", err)
		}
	})
	t.Run("run until Shutdown", func(t *testing.T) {
		rt, held, _ := startApp(t, appConfig(t))
		_, done := driverThread(func() error { return rt.RunDriver(context.Background(), cpu0) })
		var tasks []*core.Task
		for i := 0; i < 10; i++ {
			task, _ := where(t, rt, held)
			tasks = append(tasks, task)
		}
		if err := rt.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("RunDriver at Shutdown: %v", err)
		}
		for i, task := range tasks {
			if err := task.Err(); err != nil {
				t.Fatalf("task %d: %v", i, err)
			}
		}
	})
}

// TestAppDrivenWorkerInNoTeam: a worker the application runs is in no
// combined worker (a parallel task would wait for the application to run
// it); the launched workers still form theirs.
func TestAppDrivenWorkerInNoTeam(t *testing.T) {
	cfg := appConfig(t)
	cfg.NCPU = 3
	rt, held, _ := startApp(t, cfg)
	defer rt.Shutdown()
	teams := rt.CombinedWorkers()
	if len(teams) != 1 || len(teams[0].Members) != 2 {
		t.Fatalf("combined workers %+v, want one team of the 2 launched workers", teams)
	}
	for _, m := range teams[0].Members {
		if m == held {
			t.Fatalf("combined worker %+v holds worker %d, which the application runs", teams[0], held)
		}
	}
}
