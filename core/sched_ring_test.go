package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

// scalChain submits n tasks doubling x (a fresh codelet, so that its
// statistics count these tasks only), waits, and checks x.
func scalChain(t *testing.T, rt *core.Runtime, ctx *core.SchedContext, n int) *core.Codelet {
	t.Helper()
	cl := &core.Codelet{Name: "scal_chain", Kernels: scalF32.Kernels, Modes: scalF32.Modes}
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i)
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), SchedContext: ctx}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if want := float32(i) * float32(uint32(1)<<n); v != want {
			t.Fatalf("x[%d] = %v after %d doublings, want %v", i, v, n, want)
		}
	}
	return cl
}

func posted(t *testing.T, rt *core.Runtime, cl *core.Codelet) (tasks, posted int64) {
	t.Helper()
	s, err := rt.CodeletStats(cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range s.Workers {
		posted += w.Posted
	}
	return s.Tasks(), posted
}

// Tasks of the global context whose data is all in RAM go from the policy
// straight to the worker's scheduler ring; tasks of another context, and
// every task on a machine with a device memory node, take the core's
// dispatch. Either way each runs once, in dependency order.
func TestSchedulerRings(t *testing.T) {
	const n = 20
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			cl := scalChain(t, rt, nil, n)
			if tasks, p := posted(t, rt, cl); tasks != n || p != n {
				t.Fatalf("global context: %d tasks, %d posted by the scheduler; want %d and %d", tasks, p, n, n)
			}
			ctx, err := rt.CreateSchedContext("side", []int{0, 1}, "ws")
			if err != nil {
				t.Fatal(err)
			}
			cl = scalChain(t, rt, ctx, n)
			if tasks, p := posted(t, rt, cl); tasks != n || p != 0 {
				t.Fatalf("context %q: %d tasks, %d posted by the scheduler; want %d and none", ctx.Name(), tasks, p, n)
			}
		})
	}
	t.Run("device node", func(t *testing.T) {
		rt, _ := startWithDevice(t, 1<<20)
		cl := scalChain(t, rt, nil, n)
		if tasks, p := posted(t, rt, cl); tasks != n || p != 0 {
			t.Fatalf("with a device node: %d tasks, %d posted by the scheduler; want %d and none", tasks, p, n)
		}
	})
}

// liar is a scheduler that says it posted every task to worker 1 itself,
// or makes the decisions decide returns.
type liar struct {
	arena  *shm.Arena
	decide func(p wire.Push) []wire.Assign
	stop   chan struct{}
	done   chan struct{}
}

func (l *liar) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindScheduler, Name: "liar", APIVersions: []int{base.APIVersion}}, nil
}
func (l *liar) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }
func (l *liar) SetConfig(context.Context, base.Config) error       { return nil }

func (l *liar) Init(_ context.Context, req *sched.InitRequest) error {
	events, err := shm.OpenRing(l.arena.Bytes(req.Rings.Events))
	if err != nil {
		return err
	}
	decisions, err := shm.OpenRing(l.arena.Bytes(req.Rings.Decisions))
	if err != nil {
		return err
	}
	bell, coreBell := l.arena.Bell(req.Rings.Bell), l.arena.Bell(req.Rings.CoreBell)
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			bell.Wait(func() bool { return !events.Empty() }, 10, 10*time.Millisecond)
			for msg := events.Peek(); msg != nil; msg = events.Peek() {
				var p wire.Push
				if wire.Type(msg) == wire.TypePush && p.Decode(msg) == nil {
					as := []wire.Assign{{Worker: 1, ID: p.ID, Flags: wire.AssignPosted}}
					if l.decide != nil {
						as = l.decide(p)
					}
					for _, a := range as {
						if b := decisions.Reserve(wire.AssignSize); b != nil {
							a.Encode(b)
							decisions.Commit()
						}
					}
					coreBell.Ring()
				}
				events.Release()
			}
		}
	}()
	return nil
}

func (l *liar) Deinit(context.Context) error {
	close(l.stop)
	<-l.done
	return nil
}

// A policy claiming to have posted a task to a worker without a scheduler
// ring fails that task with an error saying so; nothing hangs.
func TestPostedToWorkerWithoutRing(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	dev := &memDevice{capacity: 1 << 20, bufs: map[uint64][]byte{}}
	rt := start(t, core.Options{
		Config: cfg,
		Drivers: []core.DriverFactory{
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
			},
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				dev.arena = a
				return dev, nil
			},
		},
		Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) { return &liar{arena: a}, nil },
	})
	task := &core.Task{Codelet: emptyCL, Synchronous: true}
	err := rt.Submit(task)
	if err == nil {
		err = task.Err()
	}
	if err == nil || !strings.Contains(err.Error(), "no scheduler ring") {
		t.Fatalf("task posted to a worker without a scheduler ring: error %v, want one saying so", err)
	}
}

// A policy's wrong decisions do not run a task twice or where it may not
// run: a second Assign of a task is ignored (a read-write chain shows a
// task run twice), and an Assign off a task's pinned worker fails it.
func TestSchedulerLies(t *testing.T) {
	liarOn := func(decide func(p wire.Push) []wire.Assign) core.Options {
		cfg := testConfig(pluginDir)
		return core.Options{
			Config: cfg,
			Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
			}},
			Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
				return &liar{arena: a, decide: decide}, nil
			},
		}
	}
	t.Run("assigned twice", func(t *testing.T) {
		rt := start(t, liarOn(func(p wire.Push) []wire.Assign {
			return []wire.Assign{{Worker: 0, ID: p.ID}, {Worker: 1, ID: p.ID}}
		}))
		x := []float32{1}
		h, _ := core.RegisterVector(rt, x)
		const n = 10
		for range n {
			if err := rt.Submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		if x[0] != 1<<n {
			t.Fatalf("x = %v after %d doublings, want %d: a task assigned twice ran twice", x[0], n, 1<<n)
		}
	})
	t.Run("pinned elsewhere", func(t *testing.T) {
		rt := start(t, liarOn(func(p wire.Push) []wire.Assign {
			return []wire.Assign{{Worker: 1, ID: p.ID}}
		}))
		task := &core.Task{Codelet: emptyCL, ExecuteOnWorker: true, Worker: 0, Synchronous: true}
		err := rt.Submit(task)
		if err == nil {
			err = task.Err()
		}
		if err == nil || !strings.Contains(err.Error(), "must run on worker 0") {
			t.Fatalf("task pinned to worker 0, assigned to 1: error %v, want one saying so", err)
		}
	})
}
