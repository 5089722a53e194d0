package core_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestSchedulerCrashMidRun: a scheduler that dies again once restarted
// leaves the runtime broken: the tasks waiting for a decision fail, Wait
// returns, later submits fail, shutdown completes.
func TestSchedulerCrashMidRun(t *testing.T) {
	cfg := testConfig(crashyDir)
	cfg.Sched = "crashy"
	cfg.PluginRestarts = 1 // the restarted instance dies on the same task
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	empty := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	if err := rt.Submit(&core.Task{Codelet: empty, Synchronous: true}); err != nil {
		t.Fatalf("task before the crash: %v", err)
	}
	doomed := &core.Task{Codelet: empty, Priority: 99}
	if err := rt.Submit(doomed); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Wait(doomed) }()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "sched-crashy") {
			t.Fatalf("Wait: %v, want ErrPluginCrashed naming the scheduler", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait hung after the scheduler crashed")
	}
	if err := rt.Submit(&core.Task{Codelet: empty}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("submit after the crash: %v", err)
	}
}

// childRuntime runs in a child test process: it starts a runtime with the
// real plugins, prints the plugin pids, and waits to be killed.
func childRuntime() int {
	cfg := testConfig(os.Getenv("CORE_TEST_PLUGINS"))
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	x := make([]float32, 1<<20)
	h, _ := core.RegisterVector(rt, x)
	_ = h
	for _, w := range rt.Workers() {
		fmt.Println("pid", w.Pid)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

// TestCoreKilled kills the core process with SIGKILL: its plugin processes
// must exit and no shared memory may remain.
func TestCoreKilled(t *testing.T) {
	before := shmEntries(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CORE_TEST_CHILD=1", "CORE_TEST_PLUGINS="+pluginDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			n, _ := strconv.Atoi(p)
			pids = append(pids, n)
		}
		if line == "ready" {
			break
		}
		if strings.HasPrefix(line, "error") {
			t.Fatal(line)
		}
	}
	if len(pids) == 0 {
		cmd.Process.Kill()
		t.Fatal("child printed no plugin pid")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("plugin process %d outlived the killed core by 10s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if left := newShmEntries(before); len(left) > 0 {
		t.Errorf("/dev/shm gained %v after the core was killed", left)
	}
}
