package core

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

// handScheduler is a scheduler that does nothing by itself: the test
// plays the policy on its rings.
type handScheduler struct {
	arena *shm.Arena
	req   *sched.InitRequest
}

func (s *handScheduler) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindScheduler, Name: "hand", APIVersions: []int{base.APIVersion}}, nil
}
func (s *handScheduler) ConfigSchema(context.Context) (*base.Schema, error) {
	return &base.Schema{}, nil
}
func (s *handScheduler) SetConfig(context.Context, base.Config) error { return nil }
func (s *handScheduler) Init(_ context.Context, req *sched.InitRequest) error {
	s.req = req
	return nil
}
func (s *handScheduler) Deinit(context.Context) error { return nil }

func (s *handScheduler) ring(t *testing.T, span base.Span) *shm.Ring {
	t.Helper()
	r, err := shm.OpenRing(s.arena.Bytes(span))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A task the policy posted with its implementation may complete before
// the engine has read the Assign saying so (the host writes the Assign,
// then the Exec; the engine reads decisions, then completions, and the
// Assign can land between the two): the engine reads the Assign then, so
// that Profiling and the model see the implementation that ran, not the
// one the core would have chosen.
func TestCompletionBeforePostedAssign(t *testing.T) {
	cfg := config.Default()
	cfg.NCPU = 1
	cfg.ArenaSize = 64 << 20
	cfg.ModelDir = t.TempDir()
	hs := &handScheduler{}
	rt, err := Init(t.Context(), Options{Config: cfg,
		Drivers: []DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
			return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
		}},
		Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) { hs.arena = a; return hs, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	if len(hs.req.WorkerRings) != 1 {
		t.Fatalf("worker rings %+v, want the CPU worker's", hs.req.WorkerRings)
	}
	events, decisions := hs.ring(t, hs.req.Rings.Events), hs.ring(t, hs.req.Rings.Decisions)
	wr := hs.req.WorkerRings[0]
	posted, workerBell := hs.ring(t, wr.Ring), hs.arena.Bell(wr.Bell)

	cl := &Codelet{Name: "two_impls", Impls: map[driver.Arch][]string{driver.CPU: {blasarg.Empty, blasarg.ScalF32}},
		Modes: []Mode{RW}, Model: HistoryModel}
	x := []float32{1}
	h, err := RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{Codelet: cl, Handles: []*Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var p wire.Push
	for {
		if msg := events.Peek(); msg != nil {
			if err := p.Decode(msg); err != nil {
				t.Fatal(err)
			}
			events.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no push")
		}
		time.Sleep(time.Millisecond)
	}
	cpu := driver.ArchIndex(driver.CPU)
	if p.Flags&(wire.PushExec|wire.PushImpls) != wire.PushExec|wire.PushImpls || len(p.Impls[cpu]) != 2 {
		t.Fatalf("push flags %#x, implementations %v: want the Exec and two implementations", p.Flags, p.Impls)
	}
	done := make(chan string, 1)
	rt.engine.call(func() {
		// As the host does: the Assign, then the Exec with implementation
		// 1's kernel; then the completion is read before the Assign.
		a := wire.Assign{Worker: 0, ID: p.ID, Flags: wire.AssignPosted | wire.AssignImpl, Impl: 1}
		a.Encode(decisions.Reserve(wire.AssignSize))
		decisions.Commit()
		slot := posted.Reserve(len(p.Exec))
		copy(slot, p.Exec)
		wire.SetExecKernel(slot, uint32(p.Impls[cpu][1].Kernel))
		posted.Commit()
		workerBell.Ring()
		for rt.workers[0].completion.Peek() == nil {
			if time.Now().After(deadline) {
				done <- "the worker did not complete the task"
				return
			}
		}
		rt.engine.drainCompletions()
		done <- ""
	})
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
	if err := rt.Wait(task); err != nil {
		t.Fatal(err)
	}
	prof, err := rt.Profiling(task)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 2 || prof.Implementation != 1 {
		t.Fatalf("x = %v (scal, implementation 1, ran: 2) and Profiling says implementation %d, want 1", x[0], prof.Implementation)
	}
}
