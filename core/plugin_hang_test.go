package core_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/internal/syncbuf"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
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

// stopAndWait SIGSTOPs pid and waits until it is stopped.
func stopAndWait(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	for deadline := time.Now().Add(5 * time.Second); procState(pid) != 'T'; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped", pid)
		}
	}
}

// A stopped plugin misses its heartbeat: after plugin_timeout it is
// killed and handled as crashed, and the error says why.
func TestStoppedPluginDetected(t *testing.T) {
	// The driver is restarted but the task, read-write, cannot be retried:
	// it fails. The scheduler is restarted and handed the task: it runs.
	cases := []struct {
		name, plugin, sched string
		runs                bool
	}{
		{"driver", "/driver-cpu", "ws", false},
		{"scheduler", "/sched-ws", "ws", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(pluginDir)
			cfg.PluginTimeout = 500 * time.Millisecond
			rt, err := core.Init(context.Background(), core.Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Shutdown()
			h, _ := core.RegisterVector(rt, []float32{1, 2})
			if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}); err != nil {
				t.Fatal(err)
			}
			pid := childPid(t, c.plugin)
			stopAndWait(t, pid)
			start := time.Now()
			task := &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
			err = rt.Submit(task)
			if err != nil && !errors.Is(err, core.ErrPluginCrashed) {
				t.Fatal(err)
			}
			if err == nil {
				done := make(chan error, 1)
				go func() { done <- rt.Wait(task) }()
				select {
				case err = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("task on a stopped plugin still waiting after 20s")
				}
			}
			t.Logf("stopped %s noticed after %v: %v", c.name, time.Since(start).Round(time.Millisecond), err)
			if c.runs && err != nil {
				t.Fatalf("task error %v, want the task run by the restarted %s", err, c.name)
			}
			if !c.runs && (!errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "no heartbeat")) {
				t.Fatalf("task error %v, want ErrPluginCrashed saying the plugin missed its heartbeat", err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if s := procState(pid); s == 0 || s == 'Z' {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("stopped plugin %d not killed", pid)
				}
			}
		})
	}
}

// The watchdog reports a stretch with tasks pending and none completed.
func TestWatchdogWarns(t *testing.T) {
	var log syncbuf.Buffer
	cfg := testConfig(crashyDir)
	cfg.WatchdogTimeout = 150 * time.Millisecond
	rt, err := core.Init(context.Background(), core.Options{Config: cfg,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Warn})})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	arg := binary.LittleEndian.AppendUint64(nil, uint64(600*time.Millisecond))
	if err := rt.Submit(&core.Task{Codelet: sleep, Arg: arg, Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "watchdog: no task completed for") {
		t.Fatalf("no watchdog report in the log:\n%s", log.String())
	}
	// Idle, nothing pending: no report.
	n := strings.Count(log.String(), "watchdog:")
	time.Sleep(400 * time.Millisecond)
	if m := strings.Count(log.String(), "watchdog:"); m != n {
		t.Fatalf("watchdog reported %d times while nothing was pending", m-n)
	}
}

// watchdogChild runs in a child test process: a runtime whose watchdog
// aborts, and a task longer than its timeout.
func watchdogChild() int {
	cfg := testConfig(os.Getenv("CORE_TEST_PLUGINS"))
	cfg.WatchdogTimeout, cfg.WatchdogCrash = 200*time.Millisecond, true
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	arg := binary.LittleEndian.AppendUint64(nil, uint64(20*time.Second))
	rt.Submit(&core.Task{Codelet: sleep, Arg: arg, Synchronous: true})
	return 0
}

// With watchdog_crash the watchdog aborts the process with every
// goroutine's stack, as StarPU aborts.
func TestWatchdogCrash(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CORE_TEST_WATCHDOG=1", "CORE_TEST_PLUGINS="+crashyDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the watchdog did not abort within 15s")
	}
	t.Logf("aborted after %v", time.Since(start).Round(time.Millisecond))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("child ended with %v, want exit status 2 (SIGABRT)", err)
	}
	if s := out.String(); !strings.Contains(s, "watchdog: no task completed") || !strings.Contains(s, "goroutine ") {
		t.Fatalf("child output lacks the watchdog report or the stacks:\n%.2000s", s)
	}
}

// A driver stopped (SIGSTOP) when the runtime shuts down does not answer
// Deinit: Shutdown kills it and its error says so, naming the process and
// its state, not a bare "context deadline exceeded".
func TestStoppedAtShutdown(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.PluginTimeout = 0 // no heartbeat check: Shutdown meets the stopped process
	rt, err := core.Init(t.Context(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	pid := rt.Workers()[0].Pid
	stopAndWait(t, pid)
	err = rt.Shutdown()
	if err == nil || !strings.Contains(err.Error(), "no answer to Deinit") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (stopped)", pid)) {
		t.Fatalf("Shutdown with a stopped driver: %v, want it to name the stopped process", err)
	}
}
