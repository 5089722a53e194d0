package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// chained sums the tasks of cl that ran queued behind their predecessor.
func chained(t *testing.T, rt *core.Runtime, cl *core.Codelet) (chained, tasks int64) {
	t.Helper()
	st, err := rt.CodeletStats(cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Workers {
		chained += w.Chained
		tasks += w.Tasks
	}
	return chained, tasks
}

// checkOrder fails unless each task started after the one before it
// ended: a chain runs in order, chained or not.
func checkOrder(t *testing.T, rt *core.Runtime, tasks []*core.Task) {
	t.Helper()
	var prev core.ProfilingInfo
	for i, task := range tasks {
		p, err := rt.Profiling(task)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && p.Started.Before(prev.Ended) {
			t.Fatalf("task %d started at %v, before task %d ended at %v", i, p.Started, i-1, prev.Ended)
		}
		prev = p
	}
}

// TestChainRW runs a chain of tasks through one read-write vector with the
// real plugins: every task but the first is queued behind the one before
// on its worker, the chain runs in order, and the data is right. With
// chain_tasks off none is.
func TestChainRW(t *testing.T) {
	const n = 400
	for _, tc := range []struct {
		sched   string
		noChain bool
	}{{"ws", false}, {"dmda", false}, {"ws", true}} {
		t.Run(fmt.Sprintf("%s/nochain=%v", tc.sched, tc.noChain), func(t *testing.T) {
			cfg := testConfig(pluginDir)
			cfg.Sched = tc.sched
			cfg.NoChain = tc.noChain
			rt, err := core.Init(context.Background(), core.Options{Config: cfg, Profiling: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Shutdown()
			// Tasks of some tens of microseconds: the policy, which may
			// be starved of a core while the worker runs, accepts a
			// successor only while its predecessor has not ended.
			x := make([]float32, 1<<17)
			for i := range x {
				x[i] = 3
			}
			h, err := core.RegisterVector(rt, x)
			if err != nil {
				t.Fatal(err)
			}
			cl := &core.Codelet{Name: "scal", Kernels: map[core.Arch]string{core.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}
			tasks := make([]*core.Task, n)
			// Held while the chain is submitted, so that no task runs
			// before its successor is submitted, however slow submission
			// is on a loaded machine: the chain is then all queued when
			// the hold ends.
			if err := h.Acquire(core.RW); err != nil {
				t.Fatal(err)
			}
			for i := range tasks {
				alpha := float32(2)
				if i%2 == 1 {
					alpha = 0.5
				}
				tasks[i] = &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: float64(alpha)}.Encode()}
				submit(t, rt, tasks[i])
			}
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			checkOrder(t, rt, tasks)
			c, all := chained(t, rt, cl)
			if all != n {
				t.Fatalf("%d tasks ran, want %d", all, n)
			}
			switch {
			case tc.noChain && c != 0:
				t.Errorf("chain_tasks = false, yet %d tasks were chained", c)
			case !tc.noChain && c < n/2:
				t.Errorf("%d of %d tasks were chained; a chain submitted at once should be nearly all", c, n)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			if x[0] != 3 || x[len(x)-1] != 3 {
				t.Errorf("x = %v ... %v, want 3 (x2, x0.5, ... %d times)", x[0], x[len(x)-1], n)
			}
		})
	}
}

// TestChainTags chains tasks by tags submitted before the first, as
// StarPU's tag benchmarks do: the first task's push chains the others.
func TestChainTags(t *testing.T) {
	const n = 300
	cfg := testConfig(pluginDir)
	rt, err := core.Init(context.Background(), core.Options{Config: cfg, Profiling: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	cl := &core.Codelet{Name: "empty", Kernels: map[core.Arch]string{core.CPU: blasarg.Empty}}
	tasks := make([]*core.Task, n)
	for i := range tasks {
		tasks[i] = &core.Task{Codelet: cl, Tag: core.TagID(i), UseTag: true}
	}
	for i := 1; i < n; i++ {
		if err := rt.DeclareTagDeps(core.TagID(i), core.TagID(i-1)); err != nil {
			t.Fatal(err)
		}
		submit(t, rt, tasks[i])
	}
	submit(t, rt, tasks[0])
	if err := rt.TagWait(core.TagID(n - 1)); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rt, tasks)
	if c, _ := chained(t, rt, cl); c < n/2 {
		t.Errorf("%d of %d tasks were chained", c, n)
	}
}

// runFailingChain runs a chain through one vector whose task number
// failAt fails, with chaining on or off, and returns each task's error
// and the vector's Lost state.
func runFailingChain(t *testing.T, noChain bool, n, failAt int) ([]error, bool, int64) {
	opts := withKernels(kernel.Kernel{Name: "test_inc_or_fail", Func: func(c *kernel.Context) error {
		if int(c.Arg[0]) == failAt {
			return errors.New("planned failure")
		}
		v := c.Buffers[0].Float32s()
		v[0]++
		return nil
	}})
	opts.Config.NoChain = noChain
	rt, err := core.Init(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	h, err := core.RegisterVector(rt, []float32{0})
	if err != nil {
		t.Fatal(err)
	}
	cl := &core.Codelet{Name: "inc", Kernels: map[driver.Arch]string{driver.CPU: "test_inc_or_fail"}, Modes: []core.Mode{core.RW}}
	tasks := make([]*core.Task, n)
	for i := range tasks {
		tasks[i] = &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: []byte{byte(i)}}
		submit(t, rt, tasks[i])
	}
	rt.WaitForAll()
	errs := make([]error, n)
	for i, task := range tasks {
		errs[i] = rt.Wait(task)
	}
	c, _ := chained(t, rt, cl)
	return errs, h.Lost() != nil, c
}

// TestChainFailure: a failed task in a chain does to the tasks queued
// behind it what it does without chaining: the driver skips them, and the
// core schedules them as it would have.
func TestChainFailure(t *testing.T) {
	const n, failAt = 40, 17
	off, lostOff, _ := runFailingChain(t, true, n, failAt)
	on, lostOn, c := runFailingChain(t, false, n, failAt)
	if c == 0 {
		t.Fatal("no task was chained: the test tests nothing")
	}
	t.Logf("%d tasks chained; task %d: %v; task %d: %v", c, failAt, on[failAt], failAt+1, on[failAt+1])
	if lostOn != lostOff {
		t.Errorf("data lost: %v chained, %v not", lostOn, lostOff)
	}
	for i := range on {
		if (on[i] == nil) != (off[i] == nil) || (on[i] != nil && !sameClass(on[i], off[i])) {
			t.Errorf("task %d: %v chained, %v not", i, on[i], off[i])
		}
	}
	if on[failAt] == nil || !errors.Is(on[failAt], core.ErrTaskFailed) {
		t.Errorf("task %d: %v, want ErrTaskFailed", failAt, on[failAt])
	}
}

func sameClass(a, b error) bool {
	for _, e := range []error{core.ErrTaskFailed, core.ErrDataLost} {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return true
}

// TestChainNoLateDeps: dependencies cannot be added to a task already
// queued behind its predecessor, as StarPU requires them declared before
// submission; the error says so.
func TestChainNoLateDeps(t *testing.T) {
	gate := make(chan struct{})
	rt, err := core.Init(context.Background(), withKernels(gateKernel("test_gate", gate)))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	defer close(gate)
	first := &core.Codelet{Name: "gate", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}}
	next := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	a := &core.Task{Codelet: first, Tag: 1, UseTag: true}
	b := &core.Task{Codelet: next, Tag: 2, UseTag: true}
	submit(t, rt, a)
	if err := rt.DeclareTagDeps(2, 1); err != nil {
		t.Fatal(err)
	}
	submit(t, rt, b)
	err = rt.DeclareTagDeps(2, 3)
	if !errors.Is(err, core.ErrInvalidTask) {
		t.Fatalf("DeclareTagDeps on a chained task: %v, want ErrInvalidTask", err)
	}
	t.Log(err)
}

// A finished chain is garbage: the handle's last access keeps its own
// job, not every job before it (each held its data predecessor, so 1e6
// tasks through one handle kept 700 MB after WaitForAll).
func TestFinishedChainCollected(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, err := core.RegisterVector(rt, []float32{1})
	if err != nil {
		t.Fatal(err)
	}
	const n, watched = 2000, 16
	var gone []func() bool
	for i := range n {
		task := &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 1}.Encode()}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		if i < watched {
			gone = append(gone, core.JobCollected(task))
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	kept := 0
	for _, g := range gone {
		if !g() {
			kept++
		}
	}
	if kept > 0 {
		t.Fatalf("%d of the chain's first %d jobs still in memory after WaitForAll", kept, watched)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
}

// TestChainAfterFault: a failed task turns chaining off only while its
// fault lasts. Once the value it lost is written anew, a chain is queued
// behind its predecessors again (it stayed off for the runtime's life).
func TestChainAfterFault(t *testing.T) {
	opts := withKernels(kernel.Kernel{Name: "test_inc_or_fail", Func: func(c *kernel.Context) error {
		if c.Arg[0] == 1 {
			return errors.New("planned failure")
		}
		c.Buffers[0].Float32s()[0]++
		return nil
	}})
	rt, err := core.Init(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	x := []float32{0}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	fail := &core.Codelet{Name: "fail", Kernels: map[driver.Arch]string{driver.CPU: "test_inc_or_fail"}, Modes: []core.Mode{core.RW}}
	if err := rt.Submit(&core.Task{Codelet: fail, Handles: []*core.Handle{h}, Arg: []byte{1}, Synchronous: true}); !errors.Is(err, core.ErrTaskFailed) {
		t.Fatalf("failing task: %v, want ErrTaskFailed", err)
	}
	if !errors.Is(h.Lost(), core.ErrDataLost) {
		t.Fatalf("h.Lost() = %v, want lost", h.Lost())
	}
	rt.WaitForAll() // reports the failure, once
	// Written anew: the loss ends. Held while the chain is submitted, so
	// that it is all queued when the hold ends.
	if err := h.Acquire(core.W); err != nil {
		t.Fatal(err)
	}
	x[0] = 0
	const n = 200
	inc := &core.Codelet{Name: "inc", Kernels: map[driver.Arch]string{driver.CPU: "test_inc_or_fail"}, Modes: []core.Mode{core.RW}}
	for range n {
		submit(t, rt, &core.Task{Codelet: inc, Handles: []*core.Handle{h}, Arg: []byte{0}})
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if c, all := chained(t, rt, inc); all != n || c < n/2 {
		t.Errorf("after the fault: %d of %d tasks chained (%d ran); a chain submitted at once should be nearly all", c, n, all)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != n {
		t.Errorf("x = %v, want %d", x[0], n)
	}
}
