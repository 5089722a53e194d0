package core_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// A driver plugin that dies is started again: its workers come back, the
// task that killed it fails (it writes a buffer, so it cannot be retried),
// a task without read-write buffers that was beside it is retried and
// succeeds, and later tasks run on the new process.
func TestDriverRestart(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 3
	rt := start(t, core.Options{Config: cfg})
	before := rt.Workers()[0].Pid
	x := []float32{1, 2}
	h, _ := core.RegisterVector(rt, x)
	if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	sleeper := &core.Task{Codelet: sleep, Arg: binary.LittleEndian.AppendUint64(nil, uint64(300*time.Millisecond))}
	// The crasher writes a buffer: it cannot be retried, so it kills the
	// driver once.
	crash := &core.Codelet{Name: "crash", Kernels: map[driver.Arch]string{driver.CPU: "test_exit"}, Modes: []core.Mode{core.RW}}
	hc, _ := core.RegisterVector(rt, []float32{0})
	crasher := &core.Task{Codelet: crash, Handles: []*core.Handle{hc}}
	for _, tk := range []*core.Task{sleeper, crasher} {
		if err := rt.Submit(tk); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := rt.Wait(crasher); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("the task that kills its driver: %v, want ErrPluginCrashed", err)
	}
	if err := rt.Wait(sleeper); err != nil {
		t.Fatalf("the task beside it: %v, want it retried", err)
	}
	if !errors.Is(hc.Lost(), core.ErrDataLost) {
		t.Fatalf("the crasher's buffer: Lost() = %v, want lost", hc.Lost())
	}
	if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}); err != nil {
		t.Fatalf("task after the restart: %v", err)
	}
	t.Logf("back to work %v after the first crash", time.Since(start).Round(time.Millisecond))
	if after := rt.Workers()[0].Pid; after == before || after == 0 {
		t.Fatalf("worker pid %d after the restart, %d before", after, before)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 4 || x[1] != 8 {
		t.Fatalf("x = %v, want [4 8]", x)
	}
}

// A Retryable codelet's task whose driver dies mid-kernel (after writing
// half its buffer) runs again on the restarted driver from a snapshot, and
// the result is right; without Retryable the task fails and its data is
// lost.
func TestRetryableSnapshot(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 3
	rt := start(t, core.Options{Config: cfg})
	dir := t.TempDir()
	cases := []struct {
		name      string
		retryable bool
	}{{"retryable", true}, {"not retryable", false}}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := &core.Codelet{Name: "crash-once", Kernels: map[driver.Arch]string{driver.CPU: "test_crash_once"},
				Modes: []core.Mode{core.RW}, Retryable: c.retryable}
			x := make([]float32, 1024)
			for k := range x {
				x[k] = float32(k)
			}
			h, _ := core.RegisterVector(rt, x)
			marker := filepath.Join(dir, c.name)
			err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: []byte(marker), Synchronous: true})
			if !c.retryable {
				if !errors.Is(err, core.ErrPluginCrashed) {
					t.Fatalf("task: %v, want ErrPluginCrashed", err)
				}
				if !errors.Is(h.Lost(), core.ErrDataLost) {
					t.Fatalf("h.Lost() = %v, want the data lost", h.Lost())
				}
				return
			}
			if err != nil {
				t.Fatalf("retryable task: %v", err)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			for k, v := range x {
				if v != 2*float32(k) {
					t.Fatalf("case %d: x[%d] = %v, want %v: the retry did not start from the snapshot", i, k, v, 2*float32(k))
				}
			}
		})
	}
}

// A task that kills its driver each time it runs is retried once, then
// fails; the driver comes back after each death while it has restarts.
func TestPoisonTaskRetriedOnce(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 2
	rt := start(t, core.Options{Config: cfg})
	crash := &core.Codelet{Name: "crash", Kernels: map[driver.Arch]string{driver.CPU: "test_exit"}}
	if err := rt.Submit(&core.Task{Codelet: crash, Synchronous: true}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("poison task: %v, want ErrPluginCrashed", err)
	}
	// Two deaths, two restarts: the driver is back.
	if err := rt.Submit(&core.Task{Codelet: emptyCl, Synchronous: true}); err != nil {
		t.Fatalf("task after the restarts: %v", err)
	}
	// No restart left: the next death is for good, and the error says why.
	if err := rt.Submit(&core.Task{Codelet: crash, Synchronous: true}); !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "its 2 restarts, plugin_restarts, are spent") {
		t.Fatalf("poison task: %v, want ErrPluginCrashed naming the spent restarts", err)
	}
	err := rt.Submit(&core.Task{Codelet: emptyCl, Synchronous: true})
	if !errors.Is(err, core.ErrPluginCrashed) && !errors.Is(err, core.ErrNoWorker) {
		t.Fatalf("task with no restart left: %v, want it to fail", err)
	}
}

// A driver that cannot be started again stays dead: the tasks only it can
// run, those waiting in the policy included, fail with the restart's
// error instead of waiting for workers that will not come back.
func TestRestartFails(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 1
	rt := start(t, core.Options{Config: cfg})
	// From now on the crash-test driver exits as it starts.
	t.Setenv("STARPU_TEST_CRASHY_EXIT_AT_START", "1")
	h, _ := rt.RegisterVoid()
	if err := h.Acquire(core.RW); err != nil {
		t.Fatal(err)
	}
	waiting := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}}
	if err := rt.Submit(waiting); err != nil {
		t.Fatal(err)
	}
	crash := &core.Codelet{Name: "crash", Kernels: map[driver.Arch]string{driver.CPU: "test_exit"}, Modes: []core.Mode{core.RW}}
	hc, _ := rt.RegisterVoid()
	if err := rt.Submit(&core.Task{Codelet: crash, Handles: []*core.Handle{hc}, Synchronous: true}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("crashing task: %v", err)
	}
	h.Release() // the waiting task is pushed while the driver is down
	done := make(chan error, 1)
	go func() { done <- rt.Wait(waiting) }()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "restart") {
			t.Fatalf("task after a failed restart: %v, want ErrPluginCrashed naming the restart", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("task still waiting 20s after the restart failed")
	}
}

// A device driver that dies takes its memory with it: a handle whose only
// valid copy was on the device is lost, naming the node, and stays lost; a
// handle that also had a copy in RAM keeps its value. The driver comes
// back, with the kernel compiled from a codelet's source at its old index,
// and runs tasks again.
func TestDeviceDriverRestart(t *testing.T) {
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	cfg := testConfig(openclDir)
	cfg.NCPU = 1
	cfg.PluginRestarts = 2
	rt := start(t, core.Options{Config: cfg})
	ws := rt.Workers()
	if len(ws) != 2 || ws[1].Arch != driver.OpenCL {
		t.Fatalf("workers %+v, want one CPU and one OpenCL worker (is pocl installed?)", ws)
	}
	ocl := ws[1]
	twice := &core.Codelet{Name: "twice", Modes: []core.Mode{core.RW},
		Kernels: map[driver.Arch]string{driver.OpenCL: "twice"},
		Sources: map[driver.Arch]string{driver.OpenCL: `
kernel void twice(global float *x, uint nx) {
	size_t i = get_global_id(0);
	if (i < nx) x[i] *= 2;
}`}}
	a, b := make([]float32, 256), make([]float32, 256)
	for i := range a {
		a[i], b[i] = float32(i), float32(i)
	}
	ha, _ := core.RegisterVector(rt, a)
	hb, _ := core.RegisterVector(rt, b)
	// b is written on the device, its only valid copy; a is read there.
	if err := rt.Submit(&core.Task{Codelet: twice, Handles: []*core.Handle{hb}, Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	if err := ha.FetchOnNode(ocl.Node); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(ocl.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for rt.Workers()[1].Pid == ocl.Pid || rt.Workers()[1].Pid == 0 {
		if time.Since(killed) > 20*time.Second {
			t.Fatal("the OpenCL driver was not restarted within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("OpenCL driver back %v after the kill", time.Since(killed).Round(time.Millisecond))
	lost := hb.Lost()
	if !errors.Is(lost, core.ErrDataLost) || !errors.Is(lost, core.ErrPluginCrashed) || !strings.Contains(lost.Error(), "only valid copy was on opencl_0") {
		t.Fatalf("b, whose only copy was on the device: Lost() = %v, want lost with the driver", lost)
	}
	if err := ha.Lost(); err != nil {
		t.Fatalf("a, which had a copy in RAM: %v", err)
	}
	// The restarted driver runs the source kernel again, on a.
	if err := rt.Submit(&core.Task{Codelet: twice, Handles: []*core.Handle{ha}, Synchronous: true}); err != nil {
		t.Fatalf("a task on the restarted driver: %v", err)
	}
	if err := ha.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i, v := range a {
		if v != float32(2*i) {
			t.Fatalf("a[%d] = %v, want %v", i, v, 2*i)
		}
	}
	// A task reading b fails, naming the loss; so does Unregister, which
	// leaves b's memory as it was registered.
	if err := rt.Submit(&core.Task{Codelet: twice, Handles: []*core.Handle{hb}, Synchronous: true}); !errors.Is(err, core.ErrDataLost) {
		t.Fatalf("a task reading lost b: %v, want ErrDataLost", err)
	}
	if err := hb.Unregister(); !errors.Is(err, core.ErrDataLost) {
		t.Fatalf("Unregister of lost b: %v, want ErrDataLost", err)
	}
}

// A completion the dead process committed before dying, read after the
// core learned of the death, is the outcome of the run dispatched there:
// it is applied, and the task is not run again from its snapshot. Before
// the fence, the task was retried first (its snapshot restored) and the
// stale completion then completed the retry: Wait returned, a reader saw
// the restored input, and the retry ran later over it.
func TestStaleCompletionFenced(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 3
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg})
	gate := &core.Codelet{Name: "gate", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"},
		Modes: []core.Mode{core.RW}, Retryable: true}
	x := []float32{1, 2}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gate")
	task := &core.Task{Codelet: gate, Handles: []*core.Handle{h}, Arg: []byte(path)}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path + ".started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gated task did not start in a minute")
		}
	}
	if err := core.KillWithCompletionUnread(rt, 0, func() error { return os.WriteFile(path, nil, 0o600) }); err != nil {
		t.Fatal(err)
	}
	if errs := waitBounded(t, rt, time.Minute, "the gated task", task); errs[0] != nil {
		t.Fatalf("the task whose completion was committed: %v", errs[0])
	}
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	got := append([]float32(nil), x...)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if got[0] != 2 || got[1] != 4 {
		t.Fatalf("after the task, x = %v, want [2 4]: a completed task's output was rolled back", got)
	}
	// The restarted driver runs what comes next, once.
	if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}); err != nil {
		t.Fatalf("task after the restart: %v", err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 4 || x[1] != 8 {
		t.Fatalf("x = %v, want [4 8]: the gated task ran twice", x)
	}
	f := rt.Faults()
	if f.DriverDeaths != 1 || f.TasksRetried != 0 {
		t.Fatalf("faults %+v, want one death and no retry", f)
	}
}

// A driver that dies while the runtime starts (before its handshake, or
// in its Init) is started again while it has restarts, as one that dies
// later; once they are spent, or with none, Init's error says so.
func TestDriverDiesStarting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restarts int
		env      func(dir string) map[string]string
		want     string // Init's error, or "" when Init succeeds
	}{
		{"dies starting twice, two restarts", 2, func(dir string) map[string]string {
			return map[string]string{"STARPU_TEST_CRASHY_DIE_STARTING": filepath.Join(dir, "starts") + ":2"}
		}, ""},
		{"dies starting three times, two restarts", 2, func(dir string) map[string]string {
			return map[string]string{"STARPU_TEST_CRASHY_DIE_STARTING": filepath.Join(dir, "starts") + ":3"}
		}, "restarted 2 times, all of plugin_restarts = 2"},
		{"dies starting, no restart", 0, func(dir string) map[string]string {
			return map[string]string{"STARPU_TEST_CRASHY_DIE_STARTING": filepath.Join(dir, "starts") + ":1"}
		}, "plugin_restarts is 0"},
		{"killed in Init, one restart", 1, func(dir string) map[string]string {
			return map[string]string{"STARPU_TEST_CRASHY_DIE_IN_INIT": filepath.Join(dir, "init")}
		}, ""},
		{"killed in Init, no restart", 0, func(dir string) map[string]string {
			return map[string]string{"STARPU_TEST_CRASHY_DIE_IN_INIT": filepath.Join(dir, "init")}
		}, "plugin_restarts is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env(t.TempDir()) {
				t.Setenv(k, v)
			}
			cfg := testConfig(crashyDir)
			cfg.PluginRestarts = tc.restarts
			rt, err := core.Init(t.Context(), core.Options{Config: cfg})
			if tc.want != "" {
				if err == nil {
					rt.Shutdown()
					t.Fatalf("Init succeeded, want an error saying %q", tc.want)
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "driver-cpu") {
					t.Fatalf("Init: %v, want it to name driver-cpu and say %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			defer rt.Shutdown()
			x := []float32{1, 2}
			h, _ := core.RegisterVector(rt, x)
			if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}); err != nil {
				t.Fatalf("task on the restarted driver: %v", err)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			if x[0] != 2 || x[1] != 4 {
				t.Fatalf("x = %v, want [2 4]", x)
			}
		})
	}
}
