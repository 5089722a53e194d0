package cpudriver

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// TestMain lets this test binary be a driver-cpu plugin process hosting
// the conformance kernels: TestConformance's plugin mode starts it, which
// spares building a plugin main for them.
func TestMain(m *testing.M) {
	if drivertest.IsPlugin() {
		Serve(WithKernels(conformanceKernels...))
		return
	}
	os.Exit(m.Run())
}

var nop = kernel.Kernel{Name: "nop", Func: func(*kernel.Context) error { return nil }}

// conformanceKernels are the kernels the conformance suite runs: "add1"
// adds 1 to the float32s of its buffer, "fail" fails with the text of its
// buffer.
var conformanceKernels = []kernel.Kernel{
	{Name: "add1", Func: func(ctx *kernel.Context) error {
		for i, x := range ctx.Buffers[0].Float32s() {
			ctx.Buffers[0].Float32s()[i] = x + 1
		}
		return nil
	}},
	{Name: "fail", Func: func(ctx *kernel.Context) error { return errors.New(string(ctx.Buffers[0].Bytes)) }},
	// "team" counts its rank's runs in int32 slot rank of its buffer and
	// writes the size it saw in slot 64+rank.
	{Name: "team", Func: func(ctx *kernel.Context) error {
		v := ctx.Buffers[0].Int32s()
		r := ctx.CombinedRank()
		if r < 0 || r >= 64 {
			return fmt.Errorf("rank %d", r)
		}
		v[r]++
		v[64+r] = int32(ctx.CombinedSize())
		return nil
	}},
}

// teamTask is the conformance suite's SPMD task: "team" on a buffer of
// its own, and the check of what each rank wrote there.
func teamTask(w *drivertest.Worker, size int) (drivertest.Task, func() error) {
	s := w.RAM(128 * 4)
	v := w.Bytes(s)
	clear(v)
	task := drivertest.Task{Kernel: w.Kernel("team"), Buffers: []wire.BufferDesc{drivertest.Vec(0, s.Offset, 128, 4, kernel.RW)}}
	return task, func() error {
		got := unsafe.Slice((*int32)(unsafe.Pointer(&v[0])), 128)
		for r := range 64 {
			runs, want := got[r], int32(0)
			if r < size {
				want = 1
			}
			if runs != want {
				return fmt.Errorf("rank %d ran %d times in a team of %d, want %d", r, runs, size, want)
			}
			if r < size && got[64+r] != int32(size) {
				return fmt.Errorf("rank %d saw a team of %d, want %d", r, got[64+r], size)
			}
		}
		return nil
	}
}

// TestConformance runs the driver kit's conformance suite on the CPU
// driver, in process and as a plugin process, with three workers (more
// than this machine may have cores: the workers are not bound). The
// tasks add 1 to 1024 floats: long enough that tasks queue up behind a
// worker.
func TestConformance(t *testing.T) {
	h := drivertest.Harness{
		Config: base.Config{"bind": false, "units": int64(3)},
		OK: func(w *drivertest.Worker) drivertest.Task {
			s := w.RAM(4 << 10)
			return drivertest.Task{Kernel: w.Kernel("add1"), Buffers: []wire.BufferDesc{drivertest.Vec(0, s.Offset, 1<<10, 4, kernel.RW)}}
		},
		Fail: func(w *drivertest.Worker, msg string) drivertest.Task {
			s := w.RAM(uint64(len(msg)))
			copy(w.Bytes(s), msg)
			return drivertest.Task{Kernel: w.Kernel("fail"), Buffers: []wire.BufferDesc{drivertest.Vec(0, s.Offset, uint64(len(msg)), 1, kernel.R)}}
		},
		Team: teamTask,
	}
	t.Run("in-process", func(t *testing.T) {
		h := h
		h.Start = drivertest.InProcess(func(a *shm.Arena) driver.Driver { return New(a, nil, WithKernels(conformanceKernels...)) })
		drivertest.Run(t, h)
	})
	t.Run("plugin", func(t *testing.T) {
		h := h
		h.Start = drivertest.Plugin(os.Args[0])
		drivertest.Run(t, h)
	})
}

// newRig starts an in-process driver with kernels ks and n unbound workers
// in a rig, not yet initialised.
func newRig(t *testing.T, workers int, ks ...kernel.Kernel) (*drivertest.Rig, *Driver) {
	t.Helper()
	var d *Driver
	r := drivertest.Start(t, drivertest.InProcess(func(a *shm.Arena) driver.Driver {
		d = New(a, nil, WithKernels(ks...))
		return d
	}), drivertest.Config(base.Config{"bind": false, "units": int64(workers)}), drivertest.Workers(workers), drivertest.NoInit())
	return r, d
}

func TestCompletionsRungInBatches(t *testing.T) {
	const tasks = 16
	tests := []struct {
		name   string
		urgent bool
		// rings: the worker rings once the tasks it ran since its last
		// ring are as many as those left (equal sizes here): after tasks
		// 8, 12, 14, 15 and 16.
		rings uint32
	}{
		{"batched", false, 5},
		{"urgent", true, tasks},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newRig(t, 1, nop)
			w := r.W(0)
			var ids []uint64
			for range tasks {
				ids = append(ids, w.Exec(0, nil))
			}
			if tt.urgent {
				r.CoreBell.AddUrgent(1)
			}
			before := r.CoreBell.Seq()
			r.Init()
			// Read only when the bell rings: a completion the worker
			// posts without ever ringing for it fails the test instead
			// of hanging it.
			r.WaitRung(ids...)
			r.OK(ids...)
			if got := r.Received(); !slices.Equal(got, ids) {
				t.Fatalf("completions in order %v, want %v", got, ids)
			}
			// Leave the worker idle before counting: no ring comes later.
			time.Sleep(10 * time.Millisecond)
			if got := r.CoreBell.Seq() - before; got != tt.rings {
				t.Errorf("%d completions rang the core %d times, want %d", tasks, got, tt.rings)
			}
		})
	}
}

func TestIdleWorkerMakesCoreBellUrgent(t *testing.T) {
	gate := make(chan struct{})
	r, _ := newRig(t, 1, kernel.Kernel{Name: "gate", Func: func(*kernel.Context) error { <-gate; return nil }})
	r.Init()
	waitFor(t, "the idle worker to make the core bell urgent", r.CoreBell.Urgent)
	id := r.W(0).Exec(0, nil)
	waitFor(t, "the busy worker to leave the core bell calm", func() bool { return !r.CoreBell.Urgent() })
	close(gate)
	r.WaitRung(id)
	waitFor(t, "the worker, idle again, to make the core bell urgent", r.CoreBell.Urgent)
	if err := r.Deinit(); err != nil {
		t.Fatal(err)
	}
	if r.CoreBell.Urgent() {
		t.Error("core bell still urgent after the worker stopped")
	}
}

func TestInitKeepsAProcIdle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r, _ := newRig(t, 2, nop)
	r.Init()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS = %d with 2 workers, want 3", got)
	}
	if err := r.Deinit(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS = %d after Deinit, want 1 again", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A worker's goroutine may run on the process's main thread, whose CPU set
// is what sched_getaffinity(pid) reads. Once a worker has bound that thread
// to a core, the others must still bind to their own: reading the set then
// made a worker of the first unit see one core, the second's, and bind
// there too, and a Cholesky run in about one of six went at half speed.
func TestBindThreadAfterMainThreadBound(t *testing.T) {
	d := New(nil, nil)
	if len(d.cpus) < 2 {
		t.Skipf("needs two cores to bind to, the process may run on %v", d.cpus)
	}
	pid := os.Getpid()
	var saved unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &saved); err != nil {
		t.Fatal(err)
	}
	// As a worker of the last unit on the main thread (tid = pid) leaves it.
	var last unix.CPUSet
	last.Set(d.cpus[len(d.cpus)-1])
	if err := unix.SchedSetaffinity(pid, &last); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(pid, &saved)

	for unit, want := range d.cpus[:2] {
		got := make(chan unix.CPUSet)
		go func() {
			runtime.LockOSThread()
			var before unix.CPUSet
			unix.SchedGetaffinity(0, &before)
			d.bindThread(unit)
			var set unix.CPUSet
			unix.SchedGetaffinity(0, &set)
			// Leave the thread as it was, for the next goroutine Go runs
			// on it.
			unix.SchedSetaffinity(0, &before)
			runtime.UnlockOSThread()
			got <- set
		}()
		if set := <-got; set.Count() != 1 || !set.IsSet(want) {
			t.Errorf("unit %d: thread bound to %v, want core %d alone", unit, cpusIn(set), want)
		}
	}
}
