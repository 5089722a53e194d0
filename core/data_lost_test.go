package core_test

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

var (
	failRW   = &core.Codelet{Name: "failer", Kernels: map[driver.Arch]string{driver.CPU: "test_fail"}, Modes: []core.Mode{core.RW}}
	halfExit = &core.Codelet{Name: "half-writer", Kernels: map[driver.Arch]string{driver.CPU: "test_half_exit"}, Modes: []core.Mode{core.RW}}
	axpy32   = &core.Codelet{Name: "axpy32", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AxpyF32}, Modes: []core.Mode{core.R, core.RW}}
	zero32   = &core.Codelet{Name: "zero32", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.W}}
)

// wantLost checks that err reports h's value lost by task by.
func wantLost(t *testing.T, what string, err error, by string, cause error) {
	t.Helper()
	if !errors.Is(err, core.ErrDataLost) || !errors.Is(err, cause) || !strings.Contains(err.Error(), `"`+by+`"`) {
		t.Fatalf("%s: %v, want ErrDataLost and %v naming task %q", what, err, cause, by)
	}
}

// TestKernelErrorLosesData: a task whose kernel fails loses the data it
// writes. A reader of it fails instead of running and loses its own output
// in turn, naming the first task; Acquire for reading and Unregister
// report the loss, and the registered memory is not overwritten; a
// write-only task makes the value good again.
func TestKernelErrorLosesData(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(crashyDir)})
	x := []float32{1, 2, 3, 4}
	y := []float32{5, 6, 7, 8}
	hx, _ := core.RegisterVector(rt, x)
	hy, _ := core.RegisterVector(rt, y)
	err := rt.Submit(&core.Task{Codelet: failRW, Handles: []*core.Handle{hx}, Synchronous: true})
	if !errors.Is(err, core.ErrTaskFailed) {
		t.Fatalf("failing task: %v", err)
	}
	wantLost(t, "hx.Lost", hx.Lost(), "failer", core.ErrTaskFailed)
	if !strings.Contains(hx.Lost().Error(), hx.String()) {
		t.Fatalf("hx.Lost() = %v, want it to name %s", hx.Lost(), hx)
	}
	reader := &core.Task{Codelet: axpy32, Handles: []*core.Handle{hx, hy}, Arg: blasarg.AxpyArg{Alpha: 1}.Encode()}
	if err := rt.Submit(reader); err != nil {
		t.Fatal(err)
	}
	wantLost(t, "task reading lost data", rt.Wait(reader), "failer", core.ErrTaskFailed)
	wantLost(t, "hy.Lost after a reader of hx failed", hy.Lost(), "failer", core.ErrTaskFailed)
	if !strings.Contains(hy.Lost().Error(), `"axpy32"`) {
		t.Fatalf("hy.Lost() = %v, want it to name the task that did not run", hy.Lost())
	}
	wantLost(t, "Acquire(R)", hx.Acquire(core.R), "failer", core.ErrTaskFailed)
	wantLost(t, "Acquire(RW)", hx.Acquire(core.RW), "failer", core.ErrTaskFailed)
	// Writing without reading makes hx good again.
	if err := rt.Submit(&core.Task{Codelet: zero32, Handles: []*core.Handle{hx}, Synchronous: true}); err != nil {
		t.Fatalf("write-only task on lost data: %v", err)
	}
	if err := hx.Lost(); err != nil {
		t.Fatalf("hx still lost after a write-only task: %v", err)
	}
	if err := hx.Acquire(core.R); err != nil {
		t.Fatalf("Acquire after the rewrite: %v", err)
	}
	if x[0] != 0 || x[3] != 0 {
		t.Fatalf("x = %v, want zeros", x)
	}
	hx.Release()
	// Acquire(W) rewrites hy: the application writes it anew.
	if err := hy.Acquire(core.W); err != nil {
		t.Fatalf("Acquire(W) on lost data: %v", err)
	}
	y[0] = 42
	hy.Release()
	if err := hy.Lost(); err != nil {
		t.Fatalf("hy still lost after Acquire(W): %v", err)
	}
	// Lost again, then unregistered: the error says so and y keeps its value.
	if err := rt.Submit(&core.Task{Codelet: failRW, Handles: []*core.Handle{hy}, Synchronous: true}); err == nil {
		t.Fatal("failing task succeeded")
	}
	wantLost(t, "Unregister of lost data", hy.Unregister(), "failer", core.ErrTaskFailed)
	if y[0] != 42 {
		t.Fatalf("y = %v after Unregister of lost data, want the registered memory untouched", y)
	}
	if err := hx.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err == nil {
		t.Fatal("WaitForAll reported no failed task")
	}
}

// One failed task whose output 20 tasks read in a chain: WaitForAll says
// the failure, the first task that did not run because of it, and counts
// the others in one line, rather than repeating the cause 20 times.
func TestWaitForAllFoldsLostData(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(crashyDir)})
	hx, _ := core.RegisterVector(rt, []float32{1, 2, 3, 4})
	hy, _ := core.RegisterVector(rt, []float32{5, 6, 7, 8})
	if err := rt.Submit(&core.Task{Codelet: failRW, Handles: []*core.Handle{hx}}); err != nil {
		t.Fatal(err)
	}
	const readers = 20
	for range readers {
		if err := rt.Submit(&core.Task{Codelet: axpy32, Handles: []*core.Handle{hx, hy}, Arg: blasarg.AxpyArg{Alpha: 1}.Encode()}); err != nil {
			t.Fatal(err)
		}
	}
	err := rt.WaitForAll()
	if !errors.Is(err, core.ErrTaskFailed) {
		t.Fatalf("WaitForAll: %v, want the failed task's error", err)
	}
	lines := strings.Split(err.Error(), "\n")
	more := fmt.Sprintf("and %d more tasks did not run because data task %q was writing was lost", readers-1, "failer")
	if n := strings.Count(err.Error(), "did not run: data lost"); n != 1 || len(lines) != 3 || !slices.Contains(lines, more) {
		t.Fatalf("WaitForAll: %d lines, %d saying a task did not run:\n%q\nwant the failure, one task that did not run and a count of the others", len(lines), n, err.Error())
	}
	for _, h := range []*core.Handle{hx, hy} {
		_ = h.Unregister() // says they are lost: not what this test is about
	}
}

// TestDriverKilledMidKernelLosesData: the driver dies after writing half
// of a vector. Acquire and Unregister return an error naming the handle,
// the task and the crash, and the half-written value never reaches the
// application's memory.
func TestDriverKilledMidKernelLosesData(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(crashyDir)})
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(i)
	}
	h, _ := core.RegisterVector(rt, x)
	// A task before the crash: its result is in the handle, not yet in x.
	if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}); err != nil {
		t.Fatal(err)
	}
	crasher := &core.Task{Codelet: halfExit, Handles: []*core.Handle{h}}
	if err := rt.Submit(crasher); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(crasher); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("Wait on the crashing task: %v", err)
	}
	wantLost(t, "Acquire", h.Acquire(core.R), "half-writer", core.ErrPluginCrashed)
	err := h.Unregister()
	wantLost(t, "Unregister", err, "half-writer", core.ErrPluginCrashed)
	if !strings.Contains(err.Error(), "not written back") {
		t.Fatalf("Unregister: %v, want it to say the value was not written back", err)
	}
	for i, v := range x {
		if v != float32(i) {
			t.Fatalf("x[%d] = %v: the lost value reached the application's memory", i, v)
		}
	}
	if err := h.Unregister(); !errors.Is(err, core.ErrUnregistered) {
		t.Fatalf("second Unregister: %v", err)
	}
}

// TestSchedulerCrashLongChain kills the scheduler under a long chain of
// tasks: failing them must not nest one call per task (it overflowed the
// stack), and every task fails with the crash.
func TestSchedulerCrashLongChain(t *testing.T) {
	const n = 50000
	// Well above what the runtime needs, well below what one nested call
	// per task needs.
	defer debug.SetMaxStack(debug.SetMaxStack(16 << 20))
	cfg := testConfig(crashyDir)
	cfg.Sched = "crashy"
	cfg.PluginRestarts = 0
	rt := start(t, core.Options{Config: cfg})
	h, _ := rt.RegisterVoid()
	if err := h.Acquire(core.RW); err != nil {
		t.Fatal(err)
	}
	tasks := make([]*core.Task, n)
	for i := range tasks {
		tasks[i] = &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}}
		if i == 0 {
			tasks[i].Priority = 99 // sched-crashy exits when pushed it
		}
		if err := rt.Submit(tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	h.Release()
	if err := rt.WaitForAll(); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("WaitForAll: %v", err)
	}
	t.Logf("%d chained tasks failed in %v after the scheduler crash", n, time.Since(start))
	for _, i := range []int{0, 1, n / 2, n - 1} {
		if err := rt.Wait(tasks[i]); !errors.Is(err, core.ErrPluginCrashed) {
			t.Fatalf("task %d: %v", i, err)
		}
	}
}

// TestDriverCrashFailsTasksAtPush: once the only CPU driver is gone for
// good (no restarts), the
// tasks released later fail where they are pushed, naming the driver,
// instead of each going through the scheduler to a dead worker.
func TestDriverCrashFailsTasksAtPush(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 0
	rt := start(t, core.Options{Config: cfg})
	h, _ := rt.RegisterVoid()
	crash := &core.Codelet{Name: "crash", Kernels: map[driver.Arch]string{driver.CPU: "test_exit"}}
	if err := rt.Submit(&core.Task{Codelet: crash, Synchronous: true}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("crashing task: %v", err)
	}
	// Held back by an acquisition submitted before the crash was noticed
	// would be the same: submit now, while the handle is held.
	if err := h.Acquire(core.RW); err != nil {
		t.Fatal(err)
	}
	var tasks []*core.Task
	for i := 0; i < 1000; i++ {
		tk := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}}
		if err := rt.Submit(tk); err != nil {
			// Submit refuses once it knows no worker is left: fine too.
			if !errors.Is(err, core.ErrNoWorker) && !errors.Is(err, core.ErrPluginCrashed) {
				t.Fatalf("submit after the crash: %v", err)
			}
			break
		}
		tasks = append(tasks, tk)
	}
	h.Release()
	rt.WaitForAll()
	for i, tk := range tasks {
		err := rt.Wait(tk)
		if !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "driver-cpu") {
			t.Fatalf("task %d: %v, want ErrPluginCrashed naming driver-cpu", i, err)
		}
	}
}

// TestUnregisterRacingSubmit submits tasks on a handle while another
// goroutine unregisters it. Each task must either run before the value is
// written back (its effect is in it) or fail; none may run on the freed
// memory, which the next registration takes.
func TestUnregisterRacingSubmit(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	const size = 1 << 12
	for round := 0; round < 200; round++ {
		x := make([]float32, size)
		for i := range x {
			x[i] = 1
		}
		h, err := core.RegisterVector(rt, x)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg       sync.WaitGroup
			accepted []*core.Task
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(accepted) < 100 { // 2^100 is still exact in float32
				tk := &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
				if err := rt.Submit(tk); err != nil {
					if !errors.Is(err, core.ErrUnregistered) {
						t.Errorf("submit: %v", err)
					}
					return
				}
				accepted = append(accepted, tk)
			}
		}()
		time.Sleep(time.Duration(round%7) * 10 * time.Microsecond)
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		// The memory Unregister freed goes to the next registration.
		next := make([]float32, size)
		hn, err := core.RegisterVector(rt, next)
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		rt.WaitForAll()
		ran := 0
		for _, tk := range accepted {
			switch err := rt.Wait(tk); {
			case err == nil:
				ran++
			case !errors.Is(err, core.ErrUnregistered):
				t.Fatalf("round %d: task accepted on a handle being unregistered: %v", round, err)
			}
		}
		if want := float32(math.Pow(2, float64(ran))); x[0] != want || x[size-1] != want {
			t.Fatalf("round %d: %d tasks ran, x = %v...%v, want %v: a task ran after the write-back", round, ran, x[0], x[size-1], want)
		}
		if err := hn.Acquire(core.R); err != nil {
			t.Fatal(err)
		}
		for i, v := range next {
			if v != 0 {
				t.Fatalf("round %d: next[%d] = %v: a task of the unregistered handle wrote into the new one", round, i, v)
			}
		}
		hn.Release()
		if err := hn.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNilAndOversizedArguments: calls with a nil task or an allocation
// that overflows return errors instead of panicking.
func TestNilAndOversizedArguments(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"Submit(nil)", func() error { return rt.Submit(nil) }, core.ErrInvalidTask},
		{"Wait(nil)", func() error { return rt.Wait(nil) }, core.ErrInvalidTask},
		{"WaitArray(nil)", func() error { return rt.WaitArray(nil) }, core.ErrInvalidTask},
		{"DeclareDeps(nil)", func() error { return rt.DeclareDeps(nil, &core.Task{Codelet: emptyCl}) }, core.ErrInvalidTask},
		{"Malloc overflowing", func() error { _, err := core.Malloc[float64](rt, math.MaxInt); return err }, core.ErrInvalidData},
		{"Malloc beyond the arena", func() error { _, err := core.Malloc[byte](rt, 1<<40); return err }, core.ErrInvalidData},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, c.want) {
				t.Fatalf("%s = %v, want %v", c.name, err, c.want)
			}
		})
	}
}
