package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
	bin := filepath.Join(t.TempDir(), "starpu")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "bench", "overhead", "--tasks", "5000000", "--plugin-dir", pluginDir, "--ncpu", "2")
	// Long enough that the plugins' heartbeat is not what ends the run.
	cmd.Env = append(os.Environ(), "STARPU_PLUGIN_TIMEOUT=60s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var kids []int
	for deadline := time.Now().Add(20 * time.Second); len(kids) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool started %d plugin processes in 20s", len(kids))
		}
		kids = children(cmd.Process.Pid)
	}
	time.Sleep(500 * time.Millisecond) // into the benchmark
	kids = children(cmd.Process.Pid)
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
