package shm

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// futexPrivate is FUTEX_PRIVATE_FLAG: the test's word is its own.
const futexPrivate = 128

func TestReschedTick(t *testing.T) {
	const ms = int64(time.Millisecond)
	// Each step: the time passed to Tick and whether it must reschedule.
	steps := []struct {
		now  int64
		want bool
	}{
		{0, false},        // the zero Resched's last pass is at 0
		{3 * ms, false},   // under ReschedEvery
		{4 * ms, true},    // due
		{5 * ms, false},   // 1 ms after
		{8*ms - 1, false}, // 1 ns short
		{8 * ms, true},
		{2 * ms, false}, // out of order: not due, and the last pass stays at 8 ms
		{11 * ms, false},
		{12 * ms, true},
	}
	var r Resched
	for i, s := range steps {
		if got := r.Tick(s.now); got != s.want {
			t.Errorf("step %d: Tick(%d) = %v, want %v", i, s.now, got, s.want)
		}
	}
}

// TestReschedQuietsSysmon runs the pattern of the loops locked to their
// threads (a goroutine that blocks only in system calls, never parking)
// for 300 ms, without and then with Resched, and counts the context
// switches of the process's other threads, where the runtime's sysmon is:
// without, sysmon takes the goroutine's P at almost every visit and keeps
// visiting every 20 µs; with, it slows down to its 10 ms period.
func TestReschedQuietsSysmon(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts threads' context switches in /proc")
	}
	var word atomic.Uint32
	ts := unix.NsecToTimespec(100_000)
	block := func() { futex(&word, futexWait|futexPrivate, 0, &ts) } // times out: nobody wakes it
	var r Resched
	start := time.Now()
	bell, err := NewBell(make([]byte, BellSize))
	if err != nil {
		t.Fatal(err)
	}
	never := func() bool { return false }
	without := otherThreadSwitches(t, block)
	with := otherThreadSwitches(t, func() { block(); r.Tick(int64(time.Since(start))) })
	// A Bell's sleep ticks by itself: the engine's and the policy host's
	// waits.
	sleeping := otherThreadSwitches(t, func() { bell.Wait(never, 0, 100*time.Microsecond) })
	t.Logf("context switches of the other threads in 300 ms: %d without Resched, %d with, %d sleeping on a Bell", without, with, sleeping)
	if without < 500 {
		t.Skipf("this Go runtime's sysmon did not chase the blocked goroutine (%d switches): nothing to quiet", without)
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"with Resched", with}, {"sleeping on a Bell", sleeping}} {
		if c.n*4 > without {
			t.Errorf("%s the other threads switched %d times, without Resched %d: want at most a quarter", c.name, c.n, without)
		}
	}
}

// otherThreadSwitches runs a goroutine locked to its thread that calls
// wait (a block of about 100 µs in a system call) for 300 ms, after 20 ms
// to let its scheduling tick go stale, and returns how many context
// switches the process's other threads made meanwhile.
func otherThreadSwitches(t *testing.T, wait func()) int {
	t.Helper()
	tidc := make(chan int)
	startc := make(chan int)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		tidc <- unix.Gettid()
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
			wait()
		}
		<-startc
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			wait()
		}
	}()
	tid := <-tidc
	time.Sleep(20 * time.Millisecond)
	before := threadSwitches(t, tid)
	startc <- 0
	<-done
	return threadSwitches(t, tid) - before
}

// threadSwitches sums the voluntary and involuntary context switches of the
// process's threads but skip.
func threadSwitches(t *testing.T, skip int) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if filepath.Base(d) == strconv.Itoa(skip) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.Atoi(strings.TrimSpace(v))
				n += c
			}
		}
	}
	return n
}

// BenchmarkGoschedLocked is what a Resched pass costs the loops it is for:
// runtime.Gosched from a goroutine locked to its thread.
func BenchmarkGoschedLocked(b *testing.B) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range b.N {
			runtime.Gosched()
		}
		close(done)
	}()
	<-done
}
