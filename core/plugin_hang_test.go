package core_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
)

// childPid is the pid of this process's child whose command line ends with
// suffix.
func childPid(t *testing.T, suffix string) int {
	t.Helper()
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + f + "/cmdline")
			if strings.HasSuffix(string(bytes.TrimRight(cmd, "\x00")), suffix) {
				pid, _ := strconv.Atoi(f)
				return pid
			}
		}
	}
	t.Fatalf("no child process %s", suffix)
	return 0
}

// procState is the state letter of /proc/PID/stat ('T' stopped), or 0 when
// the process is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// A scheduler plugin that no longer answers (stopped) costs Shutdown a
// bounded time: its Deinit times out and its process is killed, and the
// driver still gets a Deinit of its own.
func TestShutdownWithStoppedScheduler(t *testing.T) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir)})
	if err != nil {
		t.Fatal(err)
	}
	pid := childPid(t, "/sched-ws")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	for deadline := time.Now().Add(5 * time.Second); procState(pid) != 'T'; {
		if time.Now().After(deadline) {
			t.Fatal("scheduler plugin not stopped")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- rt.Shutdown() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown still running after 30s")
	}
	d := time.Since(start)
	t.Logf("Shutdown took %s: %v", d.Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "scheduler deinit") {
		t.Errorf("Shutdown error %v, want the scheduler's Deinit timing out", err)
	}
	if err != nil && strings.Contains(err.Error(), "driver-cpu deinit") {
		t.Errorf("the driver did not get its Deinit: %v", err)
	}
	if d > 12*time.Second {
		t.Errorf("Shutdown took %s", d)
	}
	if s := procState(pid); s != 0 && s != 'Z' {
		t.Errorf("scheduler process %d still there (state %c)", pid, s)
	}
}
