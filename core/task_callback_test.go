package core_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// Every blocking call made from a task callback returns ErrDeadlock
// instead of hanging the completion path, whether the callback runs on the
// engine goroutine (a task completed by a worker) or on a callback thread
// (a task without a codelet, completed where it was released).
func TestBlockingCallsFromCallback(t *testing.T) {
	rt := startWorkers(t, 1, nil)
	other := &core.Task{Codelet: emptyCl}
	if err := rt.Submit(other); err != nil {
		t.Fatal(err)
	}
	held := &core.Task{Codelet: emptyCl, Tag: 77, UseTag: true}
	if err := rt.DeclareTagDeps(77, 78); err != nil {
		t.Fatal(err)
	}
	if err := rt.Submit(held); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		f    func() error
	}{
		{"Wait", func() error { return rt.Wait(other) }},
		{"Wait on a task held by a tag", func() error { return rt.Wait(held) }},
		{"WaitArray", func() error { return rt.WaitArray(other) }},
		{"WaitForAll", rt.WaitForAll},
		{"WaitForNSubmitted", func() error { return rt.WaitForNSubmitted(0) }},
		{"WaitForNoReady", rt.WaitForNoReady},
		{"TagWait", func() error { return rt.TagWait(77) }},
		{"TagWaitArray", func() error { return rt.TagWaitArray(77) }},
		{"synchronous Submit", func() error { return rt.Submit(&core.Task{Codelet: emptyCl, Synchronous: true}) }},
		{"global context WaitForAll", rt.GlobalSchedContext().WaitForAll},
	}
	for _, where := range []struct {
		name string
		cl   *core.Codelet
	}{{"worker task", emptyCl}, {"task without codelet", nil}} {
		t.Run(where.name, func(t *testing.T) {
			errs := make([]error, len(calls))
			tk := &core.Task{Codelet: where.cl, Callback: func(*core.Task) {
				for i, c := range calls {
					errs[i] = c.f()
				}
			}}
			if err := rt.Submit(tk); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- rt.Wait(tk) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("a blocking call from the callback hung")
			}
			for i, c := range calls {
				if !errors.Is(errs[i], core.ErrDeadlock) {
					t.Errorf("%s from a callback: %v, want ErrDeadlock", c.name, errs[i])
				}
			}
		})
	}
	rt.TagNotifyFromApps(78)
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
}

// A task with Regenerate whose runs fail: its callback sees each run's
// error in Task.Err, WaitForAll reports every failed run, and Wait, once
// the task stops, returns all of them.
func TestRegenerateFailures(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(crashyDir)})
	fail := &core.Codelet{Name: "fail", Kernels: map[driver.Arch]string{driver.CPU: "test_fail"}}
	var seen []error
	tk := &core.Task{Codelet: fail, Regenerate: true}
	tk.Callback = func(t *core.Task) {
		seen = append(seen, t.Err())
		if len(seen) == 3 {
			t.Regenerate = false
		}
	}
	if err := rt.Submit(tk); err != nil {
		t.Fatal(err)
	}
	err := rt.Wait(tk)
	if n := strings.Count(fmt.Sprint(err), "deliberate failure"); n != 3 {
		t.Fatalf("Wait: %v: %d failures named, want the 3 runs'", err, n)
	}
	if !errors.Is(tk.Err(), core.ErrTaskFailed) {
		t.Fatalf("Err after the last run: %v", tk.Err())
	}
	for i, e := range seen {
		if e == nil || !strings.Contains(e.Error(), "deliberate failure") {
			t.Errorf("Err in the callback of run %d: %v, want the run's failure", i+1, e)
		}
	}
	all := rt.WaitForAll()
	if n := strings.Count(fmt.Sprint(all), "deliberate failure"); n != 3 {
		t.Fatalf("WaitForAll: %v: %d failures, want 3", all, n)
	}
}

// A task may submit itself again from its own callback (StarPU's
// subgraph_repeat does): each submission runs once, in order.
func TestResubmitFromCallback(t *testing.T) {
	rt := startWorkers(t, 1, nil)
	x := []float32{1}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	var subErr error
	done := make(chan struct{})
	tk := &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
	tk.Callback = func(t *core.Task) {
		if runs.Add(1) < 4 {
			if err := rt.Submit(t); err != nil {
				subErr = err
				close(done)
			}
			return
		}
		close(done)
	}
	if err := rt.Submit(tk); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the resubmissions did not end")
	}
	if subErr != nil {
		t.Fatalf("Submit from the task's own callback: %v", subErr)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 4 || x[0] != 16 {
		t.Fatalf("%d runs, x = %v; want 4 runs and 16", runs.Load(), x[0])
	}
	// Submitting it twice from one callback is still refused.
	var second error
	tw := &core.Task{Codelet: emptyCl}
	tw.Callback = func(t *core.Task) {
		if runs.Add(1) == 5 {
			_ = rt.Submit(t)
			second = rt.Submit(t)
		}
	}
	if err := rt.Submit(tw); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second, core.ErrInvalidTask) {
		t.Fatalf("a second Submit from the same callback: %v, want ErrInvalidTask", second)
	}
}

// Dependencies declared with DeclareDeps hold for every run Regenerate
// makes: run k of the successor waits for run k of its predecessor.
func TestDeclareDepsPersistAcrossRegenerations(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(crashyDir)})
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	const rounds = 3
	var aRuns atomic.Int32
	var mu sync.Mutex
	var seen []int32 // A's runs finished when each run of B ran its callback
	a := &core.Task{Codelet: sleep, Arg: binary.LittleEndian.AppendUint64(nil, uint64(30*time.Millisecond)), Regenerate: true}
	a.Callback = func(t *core.Task) {
		if aRuns.Add(1) == rounds {
			t.Regenerate = false
		}
	}
	b := &core.Task{Codelet: emptyCl, Regenerate: true}
	b.Callback = func(t *core.Task) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, aRuns.Load())
		if len(seen) == rounds {
			t.Regenerate = false
		}
	}
	if err := rt.DeclareDeps(b, a); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*core.Task{b, a} {
		if err := rt.Submit(tk); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- rt.WaitForAll() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the regenerated tasks did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range seen {
		if n < int32(k+1) {
			t.Fatalf("run %d of B ran after only %d runs of A (%v): its dependency lasted one run", k+1, n, seen)
		}
	}
}

// StarPU's subgraph_repeat tests: a diamond A -> B, C -> D whose
// dependencies are declared once, run again and again, each run of each
// task after the same run of its predecessors. In "resubmit", D's callback
// submits A, B, C and D again (tests/main/subgraph_repeat.c); in
// "regenerate", B, C and D have Regenerate set and D's callback submits A
// again (subgraph_repeat_regenerate.c). Before, the first was refused
// ("already submitted": the resubmitted tasks kept no dependency, so D ran
// before A) and in the second a regenerated B ran before the next A.
func TestSubgraphRepeat(t *testing.T) {
	for _, regenerate := range []bool{false, true} {
		name := map[bool]string{false: "resubmit", true: "regenerate"}[regenerate]
		t.Run(name, func(t *testing.T) {
			rt := startWorkers(t, 2, nil)
			const niter = 25
			var runs [4]atomic.Int32 // A, B, C, D
			var mu sync.Mutex
			var bad []string
			check := func(what string, ok bool) {
				if !ok {
					mu.Lock()
					bad = append(bad, what)
					mu.Unlock()
				}
			}
			tasks := make([]*core.Task, 4)
			for i, n := range []string{"A", "B", "C", "D"} {
				tasks[i] = &core.Task{Codelet: emptyCl, Name: n, Regenerate: regenerate && i > 0}
			}
			a, b, c, d := tasks[0], tasks[1], tasks[2], tasks[3]
			done := make(chan error, 1)
			a.Callback = func(*core.Task) { runs[0].Add(1) }
			for i, tk := range []*core.Task{b, c} {
				tk.Callback = func(tk *core.Task) {
					k := runs[i+1].Add(1)
					check(fmt.Sprintf("%s run %d after %d runs of A", tk.Name, k, runs[0].Load()), runs[0].Load() == k)
					if k == niter {
						tk.Regenerate = false // as StarPU's test does
					}
				}
			}
			d.Callback = func(tk *core.Task) {
				k := runs[3].Add(1)
				check(fmt.Sprintf("D run %d after %d runs of B and %d of C", k, runs[1].Load(), runs[2].Load()), runs[1].Load() == k && runs[2].Load() == k)
				if k == niter {
					tk.Regenerate = false
					done <- nil
					return
				}
				resubmit := tasks
				if regenerate {
					resubmit = tasks[:1]
				}
				for _, r := range resubmit {
					if err := rt.Submit(r); err != nil {
						done <- fmt.Errorf("run %d: resubmit %s: %w", k, r.Name, err)
						return
					}
				}
			}
			for _, dep := range [][2]*core.Task{{b, a}, {c, a}, {d, b}, {d, c}} {
				if err := rt.DeclareDeps(dep[0], dep[1]); err != nil {
					t.Fatal(err)
				}
			}
			for _, tk := range tasks {
				if err := rt.Submit(tk); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("hung: runs %d %d %d %d", runs[0].Load(), runs[1].Load(), runs[2].Load(), runs[3].Load())
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			for i := range runs {
				if n := runs[i].Load(); n != niter {
					t.Errorf("task %s ran %d times, want %d", tasks[i].Name, n, niter)
				}
			}
			if len(bad) > 0 {
				t.Fatalf("out of order: %v", bad[:min(len(bad), 5)])
			}
		})
	}
}
