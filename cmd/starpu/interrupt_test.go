package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// children lists the processes whose parent is pid (forked by any of its
// threads: the runtime forks plugins from a thread of their own).
func children(pid int) []int {
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, w := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(w); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// execed tells whether every process in pids runs another program than
// bin, the tool that forked them: each is past its exec.
func execed(pids []int, bin string) bool {
	for _, p := range pids {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/exe"); err != nil || exe == bin {
			return false
		}
	}
	return true
}

// alive tells whether pid is a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestInterruptWithStoppedPlugins: Ctrl-C stops the tool even when its
// plugin processes are stopped (SIGSTOP) and the runtime waits on them
// forever, and the plugins do not outlive it.
func TestInterruptWithStoppedPlugins(t *testing.T) {
	bin := buildCLI(t)
	// A million chained tasks: seconds of run once submitted. Five million
	// kept the tool submitting (gigabytes of tasks, the collector busy)
	// when the plugins were stopped, which delayed the signal's delivery
	// by seconds and made the exit time depend on the submission loop,
	// not on the stopped plugins.
	cmd := exec.Command(bin, "bench", "overhead", "--tasks", "1000000", "--plugin-dir", pluginDir, "--ncpu", "2")
	// Long enough that the plugins' heartbeat is not what ends the run.
	cmd.Env = append(os.Environ(), "STARPU_PLUGIN_TIMEOUT=60s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until the plugins have all started: the same children for
	// 500 ms, each past its exec. A child stopped between fork and exec
	// would hold the forking thread in vfork, which is not the case this
	// test is about.
	var kids []int
	stable := time.Now()
	for deadline := time.Now().Add(20 * time.Second); len(kids) < 2 || time.Since(stable) < 500*time.Millisecond; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool's plugin processes did not settle in 20s: %v", kids)
		}
		now := children(cmd.Process.Pid)
		if !slices.Equal(now, kids) || !execed(now, bin) {
			kids, stable = now, time.Now()
		}
	}
	for _, k := range kids {
		syscall.Kill(k, syscall.SIGSTOP)
	}
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("the interrupted tool exited with %v, want a failure", err)
		}
		t.Logf("exited %v after Ctrl-C (%v)", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(interruptGrace + 10*time.Second):
		t.Fatalf("the tool did not exit within %v of Ctrl-C", interruptGrace+10*time.Second)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var left []int
		for _, k := range kids {
			if alive(k) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, k := range left {
				syscall.Kill(k, syscall.SIGKILL)
			}
			t.Fatalf("plugin processes %v outlived the tool by 10s", left)
		}
	}
}
