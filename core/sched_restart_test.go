package core_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// crashOnce configures sched-crashy to die at its first task of priority
// 99 only: the instance a restart brings up takes that task.
func crashOnce(t *testing.T, cfg *config.Config) {
	cfg.Plugins["sched-crashy"] = config.Plugin{Name: "sched-crashy", Config: base.Config{"once_file": filepath.Join(t.TempDir(), "crashed")}}
}

// restartLoad submits work that keeps both workers busy and leaves the
// policy holding tasks, then the task that kills the policy: a read-write
// chain (a task run twice or lost shows in x) and independent tasks on
// handles of their own. check waits for all of it and checks the results.
func restartLoad(t *testing.T, rt *core.Runtime, c *core.SchedContext) (check func()) {
	t.Helper()
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	var tasks []*core.Task
	submit := func(tk *core.Task) {
		t.Helper()
		tk.SchedContext = c
		if err := rt.Submit(tk); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, tk)
	}
	for range 2 {
		submit(&core.Task{Codelet: sleep, Arg: binary.LittleEndian.AppendUint64(nil, uint64(200*time.Millisecond))})
	}
	x := []float32{1}
	hx, _ := core.RegisterVector(rt, x)
	const chain = 20
	for range chain {
		submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{hx}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()})
	}
	ys := make([][]float32, 100)
	hs := make([]*core.Handle, len(ys))
	for i := range ys {
		ys[i] = []float32{1, float32(i)}
		hs[i], _ = core.RegisterVector(rt, ys[i])
		submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{hs[i]}, Arg: blasarg.ScalArg{Alpha: 3}.Encode()})
	}
	submit(&core.Task{Codelet: emptyCL, Priority: 99})
	return func() {
		t.Helper()
		for i, tk := range tasks {
			if err := rt.Wait(tk); err != nil {
				t.Fatalf("task %d (%s): %v", i, tk.TaskName(), err)
			}
		}
		if err := hx.Unregister(); err != nil {
			t.Fatal(err)
		}
		if x[0] != 1<<chain {
			t.Errorf("x = %v after a chain of %d doublings, want %d: a task ran twice or not at all", x[0], chain, 1<<chain)
		}
		for i, h := range hs {
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			if ys[i][0] != 3 || ys[i][1] != 3*float32(i) {
				t.Fatalf("y[%d] = %v, want [3 %d]", i, ys[i], 3*i)
			}
		}
	}
}

func schedPid(t *testing.T, rt *core.Runtime) string {
	t.Helper()
	ps, err := rt.ProbePlugins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Name == "sched-crashy" {
			return p.Status
		}
	}
	t.Fatal("sched-crashy not listed")
	return ""
}

// The global policy's process dies holding tasks: it is started again,
// handed the tasks it held, and every task runs once, with the right
// result; the runtime stays usable.
func TestSchedulerRestart(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.Sched = "crashy"
	crashOnce(t, cfg)
	rt := start(t, core.Options{Config: cfg})
	before := schedPid(t, rt)
	begin := time.Now()
	restartLoad(t, rt, nil)()
	t.Logf("all tasks done %v after submission, across a scheduler restart", time.Since(begin).Round(time.Millisecond))
	if after := schedPid(t, rt); after == before || !strings.HasPrefix(after, "loaded") {
		t.Fatalf("scheduler %q after the crash, %q before: want a new process", after, before)
	}
	if err := rt.Submit(&core.Task{Codelet: emptyCL, Synchronous: true}); err != nil {
		t.Fatalf("task after the restart: %v", err)
	}
}

// A context's policy restarts the same way, and the context's workers can
// change again afterwards.
func TestContextSchedulerRestart(t *testing.T) {
	cfg := testConfig(crashyDir)
	crashOnce(t, cfg)
	rt := start(t, core.Options{Config: cfg})
	c, err := rt.CreateSchedContext("phoenix", []int{0, 1}, "crashy")
	if err != nil {
		t.Fatal(err)
	}
	restartLoad(t, rt, c)()
	if err := c.RemoveWorkers(1); err != nil {
		t.Fatalf("RemoveWorkers after the restart: %v", err)
	}
	ranOn(t, rt, "restarted context", submitWait(t, rt, c, 20), 0)
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
}

// A policy whose restart fails (its binary is gone) leaves the runtime
// broken as a crash without restarts does, the restart's error named.
func TestSchedulerRestartFails(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"driver-cpu", "sched-crashy"} {
		b, err := os.ReadFile(filepath.Join(crashyDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(dir)
	cfg.Sched = "crashy"
	rt := start(t, core.Options{Config: cfg})
	if err := os.Remove(filepath.Join(dir, "sched-crashy")); err != nil {
		t.Fatal(err)
	}
	task := &core.Task{Codelet: emptyCL, Priority: 99}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	err := rt.Wait(task)
	if !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "restart failed") {
		t.Fatalf("Wait: %v, want ErrPluginCrashed saying the restart failed", err)
	}
	if err := rt.Submit(&core.Task{Codelet: emptyCL}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("submit after the failed restart: %v", err)
	}
}
