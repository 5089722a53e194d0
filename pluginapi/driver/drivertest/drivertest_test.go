package drivertest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// TestMain lets this test binary be the toy driver's plugin process, with
// the flaw DRIVERTEST_FLAW names, so that the kit's plugin mode runs on a
// real plugin process.
func TestMain(m *testing.M) {
	if IsPlugin() {
		serveToy(os.Getenv("DRIVERTEST_FLAW"))
		return
	}
	os.Exit(m.Run())
}

// toyHarness runs the toy's "ok" kernel on a vector of 16 float32, in RAM
// or on the device worker's node, and its "fail" kernel on the message
// put in RAM.
func toyHarness(start Starter) Harness {
	return Harness{
		Start: start,
		OK: func(w *Worker) Task {
			if w.Node == 0 {
				s := w.RAM(64)
				return Task{Kernel: w.Kernel("ok"), Buffers: []wire.BufferDesc{Vec(0, s.Offset, 16, 4, kernel.RW)}}
			}
			buf := w.Buffer()
			w.OK(w.Alloc(buf, 64))
			return Task{Kernel: w.Kernel("ok"), Buffers: []wire.BufferDesc{Vec(uint8(w.Node), buf, 16, 4, kernel.RW)}}
		},
		Fail: func(w *Worker, msg string) Task {
			s := w.RAM(uint64(len(msg)))
			copy(w.Bytes(s), msg)
			return Task{Kernel: w.Kernel("fail"), Buffers: []wire.BufferDesc{Vec(0, s.Offset, uint64(len(msg)), 1, kernel.R)}}
		},
	}
}

func inProcessToy(flaw string) Starter {
	return InProcess(func(a *shm.Arena) driver.Driver { return newToy(a, flaw) })
}

// TestToy: a correct driver passes, in process and as a plugin process.
func TestToy(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { Run(t, toyHarness(inProcessToy(flawNone))) })
	t.Run("plugin", func(t *testing.T) {
		h := toyHarness(Plugin(os.Args[0]))
		h.Env = []string{"DRIVERTEST_FLAW="}
		Run(t, h)
	})
}

// TestFlawChild is the suite on a flawed toy, run by TestFlawsCaught in a
// child process (it is skipped otherwise).
func TestFlawChild(t *testing.T) {
	flaw := os.Getenv("DRIVERTEST_CHILD_FLAW")
	if flaw == "" {
		t.Skip("run by TestFlawsCaught")
	}
	var h Harness
	if os.Getenv("DRIVERTEST_CHILD_PLUGIN") != "" {
		h = toyHarness(Plugin(os.Args[0]))
		h.Env = []string{"DRIVERTEST_FLAW=" + flaw}
	} else {
		h = toyHarness(inProcessToy(flaw))
	}
	if os.Getenv("DRIVERTEST_CHILD_PATIENT") == "" {
		h.Timeout = 2 * time.Second // the flaw is caught by a wait running out
	}
	Run(t, h)
}

// TestFlawsCaught runs the suite's scenario that should catch each flaw of
// the toy, in a child process, and checks that it failed, and why.
func TestFlawsCaught(t *testing.T) {
	cases := []struct {
		flaw, scenario, want string
		plugin               bool
		// patient: the flaw is caught by what the suite sees, not by a
		// wait running out, so the child gets the default timeout: a
		// loaded machine must not turn it into a timeout's failure.
		patient bool
	}{
		{flawDuplicate, "ExactlyOnce", "a second completion for message", false, true},
		{flawDrop, "ExactlyOnce", "tasks never completed", false, false},
		{flawReleaseEarly, "ExactlyOnce", "from its scheduler ring before posting its completion", false, true},
		{flawClock, "ExactlyOnce", "times must be wire.Now's clock", false, true},
		{flawNoRing, "LastCompletionRung", "the core's bell did not ring", false, false},
		{flawNoRing, "LastCompletionRung", "the core's bell did not ring", true, false},
		{flawStopOnError, "UnknownKernel", "completions missing", false, false},
		{flawUntruncated, "LongError", "completions missing", false, false},
		{flawUntruncated, "LongError", "completions missing", true, false},
		{flawPartialCopy, "CopyOutOfRange", "changed", false, true},
		{flawNoLimit, "AllocBeyondNode", "succeeded, want a failure", false, true},
		{flawDropOnDeinit, "DeinitInFlight", "queued before Deinit never completed", false, false},
		{flawDropOnDeinit, "DeinitInFlight", "queued before Deinit never completed", true, false},
		{flawExitAfterPass, "DeinitInFlight/BusyWithSchedRing", "queued before Deinit never completed", false, false},
		{flawSlowDrain, "DeinitInFlight/WhileAsleep", "went to sleep", false, true},
		{flawNoReinit, "InitAfterDeinit", "cannot start again", false, true},
		{flawNoSleep, "SleepReported", "reports no sleep", false, true},
		{flawNoSleep, "SleepReported", "reports no sleep", true, true},
	}
	for _, c := range cases {
		name := c.flaw
		if c.plugin {
			name += "/plugin"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := "^TestFlawChild$"
			for _, part := range strings.Split(c.scenario, "/") {
				run += "/^" + part + "$"
			}
			cmd := exec.Command(os.Args[0], "-test.run", run, "-test.count=1")
			cmd.Env = append(os.Environ(), "DRIVERTEST_CHILD_FLAW="+c.flaw)
			if c.plugin {
				cmd.Env = append(cmd.Env, "DRIVERTEST_CHILD_PLUGIN=1")
			}
			if c.patient {
				cmd.Env = append(cmd.Env, "DRIVERTEST_CHILD_PATIENT=1")
			}
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a driver with flaw %q:\n%s", c.flaw, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("the suite failed a driver with flaw %q, but not with %q:\n%s", c.flaw, c.want, out)
			}
		})
	}
}
