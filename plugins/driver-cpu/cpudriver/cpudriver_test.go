package cpudriver

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// rig is one in-process driver over a real arena, with the core's side of
// its workers' rings and bells played by the test.
type rig struct {
	d        *Driver
	a        *shm.Arena
	specs    []driver.WorkerSpec
	dispatch []*shm.Ring
	done     []*shm.Ring
	bells    []*shm.Bell
	coreBell *shm.Bell
}

func newRig(t *testing.T, workers int, ks ...kernel.Kernel) *rig {
	t.Helper()
	a, err := shm.Create(64<<20, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	r := &rig{a: a, d: New(a, nil, WithKernels(ks...))}
	if err := r.d.SetConfig(context.Background(), base.Config{"bind": false}); err != nil {
		t.Fatal(err)
	}
	var core uint64
	r.coreBell, core = r.bell(t)
	for i := 0; i < workers; i++ {
		spec := driver.WorkerSpec{ID: i, Unit: i, CoreBell: core}
		var ring *shm.Ring
		ring, spec.Dispatch = r.ring(t)
		r.dispatch = append(r.dispatch, ring)
		ring, spec.Completion = r.ring(t)
		r.done = append(r.done, ring)
		var b *shm.Bell
		b, spec.Bell = r.bell(t)
		r.bells = append(r.bells, b)
		r.specs = append(r.specs, spec)
	}
	return r
}

func (r *rig) ring(t *testing.T) (*shm.Ring, base.Span) {
	s, err := r.a.Carve(shm.RingBytes(1<<16), 64)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := shm.InitRing(r.a.Bytes(s))
	if err != nil {
		t.Fatal(err)
	}
	return ring, s
}

func (r *rig) bell(t *testing.T) (*shm.Bell, uint64) {
	s, err := r.a.Carve(shm.BellSize, 64)
	if err != nil {
		t.Fatal(err)
	}
	return r.a.Bell(s.Offset), s.Offset
}

func (r *rig) init(t *testing.T) {
	t.Helper()
	if err := r.d.Init(context.Background(), &driver.InitRequest{Workers: r.specs, SpinIters: 50}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.d.Deinit(context.Background()) })
}

// post queues task id for kernel k on worker w, without ringing.
func (r *rig) post(t *testing.T, w int, id uint64, k uint32) {
	t.Helper()
	e := wire.Exec{ID: id, Kernel: k}
	b := r.dispatch[w].Reserve(wire.ExecSize(0, 0))
	if b == nil {
		t.Fatal("dispatch ring full")
	}
	e.Encode(b)
	r.dispatch[w].Commit()
}

// collect reads worker w's completions until it has n, waiting on the core
// bell as the engine does: for a ring since it last looked, sleeping at
// once. A completion the worker posts without ever ringing for it fails
// the test instead of hanging it.
func (r *rig) collect(t *testing.T, w, n int) []uint64 {
	t.Helper()
	var ids []uint64
	var c wire.Completion
	for {
		seq := r.coreBell.Seq()
		for msg := r.done[w].Peek(); msg != nil; msg = r.done[w].Peek() {
			if err := c.Decode(msg); err != nil {
				t.Fatal(err)
			}
			if c.Failed {
				t.Fatalf("task %d failed: %s", c.ID, c.Err)
			}
			ids = append(ids, c.ID)
			r.done[w].Release()
		}
		if len(ids) >= n {
			return ids
		}
		if !r.coreBell.Wait(func() bool { return r.coreBell.Seq() != seq }, 0, 5*time.Second) {
			t.Fatalf("worker %d posted %d of %d completions and stopped ringing", w, len(ids), n)
		}
	}
}

var nop = kernel.Kernel{Name: "nop", Func: func(*kernel.Context) error { return nil }}

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
			r := newRig(t, 1, nop)
			for i := 1; i <= tasks; i++ {
				r.post(t, 0, uint64(i), 0)
			}
			if tt.urgent {
				r.coreBell.AddUrgent(1)
			}
			before := r.coreBell.Seq()
			r.init(t)
			ids := r.collect(t, 0, tasks)
			for i, id := range ids {
				if id != uint64(i+1) {
					t.Fatalf("completion %d is task %d, want %d", i, id, i+1)
				}
			}
			// Leave the worker idle before counting: no ring comes later.
			time.Sleep(10 * time.Millisecond)
			if got := r.coreBell.Seq() - before; got != tt.rings {
				t.Errorf("%d completions rang the core %d times, want %d", tasks, got, tt.rings)
			}
		})
	}
}

func TestIdleWorkerMakesCoreBellUrgent(t *testing.T) {
	gate := make(chan struct{})
	r := newRig(t, 1, kernel.Kernel{Name: "gate", Func: func(*kernel.Context) error { <-gate; return nil }})
	r.init(t)
	waitFor(t, "the idle worker to make the core bell urgent", r.coreBell.Urgent)
	r.post(t, 0, 1, 0)
	r.bells[0].Ring()
	waitFor(t, "the busy worker to leave the core bell calm", func() bool { return !r.coreBell.Urgent() })
	close(gate)
	r.collect(t, 0, 1)
	waitFor(t, "the worker, idle again, to make the core bell urgent", r.coreBell.Urgent)
	if err := r.d.Deinit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.coreBell.Urgent() {
		t.Error("core bell still urgent after the worker stopped")
	}
}

func TestInitKeepsAProcIdle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r := newRig(t, 2, nop)
	r.init(t)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS = %d with 2 workers, want 3", got)
	}
	if err := r.d.Deinit(context.Background()); err != nil {
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
