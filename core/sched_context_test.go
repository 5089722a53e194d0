package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

var emptyCL = &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}

// startWorkers starts a runtime over the plugin processes with n CPU
// workers.
func startWorkers(t *testing.T, n int, tune func(*config.Config)) *core.Runtime {
	t.Helper()
	c := testConfig(pluginDir)
	c.NCPU = n
	if tune != nil {
		tune(c)
	}
	return start(t, core.Options{Config: c})
}

// submitTo submits n empty tasks to ctx (nil: the global context).
func submitTo(t *testing.T, rt *core.Runtime, ctx *core.SchedContext, n int) []*core.Task {
	t.Helper()
	var ts []*core.Task
	for i := 0; i < n; i++ {
		tk := &core.Task{Codelet: emptyCL, SchedContext: ctx}
		if err := rt.Submit(tk); err != nil {
			t.Fatalf("submit to %v: %v", ctx, err)
		}
		ts = append(ts, tk)
	}
	return ts
}

// ranOn checks that every task finished without error on one of workers.
func ranOn(t *testing.T, rt *core.Runtime, what string, ts []*core.Task, workers ...int) {
	t.Helper()
	for _, tk := range ts {
		if s := tk.Status(); s != core.StatusFinished {
			t.Fatalf("%s: task %d is %v after its context's WaitForAll", what, tk.ID(), s)
		}
		if err := tk.Err(); err != nil {
			t.Fatalf("%s: task %d failed: %v", what, tk.ID(), err)
		}
		p, err := rt.Profiling(tk)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(workers, p.Worker) {
			t.Fatalf("%s: task %d ran on worker %d, not one of %v", what, tk.ID(), p.Worker, workers)
		}
	}
}

// Two contexts on disjoint workers, each its own plugin process: a
// context's tasks run only on its workers, and its WaitForAll waits for
// them, whichever policy schedules it.
func TestContextsDisjointWorkers(t *testing.T) {
	for _, policy := range []string{"ws", "dmda", "eager"} {
		t.Run(policy, func(t *testing.T) {
			rt := startWorkers(t, 4, nil)
			a, err := rt.CreateSchedContext("a", []int{0, 1}, policy)
			if err != nil {
				t.Fatal(err)
			}
			b, err := rt.CreateSchedContext("b", []int{2, 3}, "ws")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := rt.SchedContext("a"); err != nil || got != a {
				t.Fatalf("SchedContext(a) = %v, %v", got, err)
			}
			if a.Policy() != policy || !slices.Equal(a.Workers(), []int{0, 1}) || a.ID() == 0 {
				t.Fatalf("context a: policy %s, workers %v, id %d", a.Policy(), a.Workers(), a.ID())
			}
			var ta, tb []*core.Task
			for i := 0; i < 10; i++ {
				ta = append(ta, submitTo(t, rt, a, 30)...)
				tb = append(tb, submitTo(t, rt, b, 30)...)
			}
			tg := submitTo(t, rt, nil, 50)
			if err := a.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			ranOn(t, rt, "context a", ta, 0, 1)
			if err := b.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			ranOn(t, rt, "context b", tb, 2, 3)
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			ranOn(t, rt, "global context", tg, 0, 1, 2, 3)
		})
	}
}

// Workers leave and join a context while its tasks run: every task runs
// once, and tasks submitted after RemoveWorkers returned never run on the
// removed worker.
func TestContextAddRemoveWorkers(t *testing.T) {
	for _, policy := range []string{"ws", "dmda", "eager"} {
		t.Run(policy, func(t *testing.T) {
			rt := startWorkers(t, 3, nil)
			c, err := rt.CreateSchedContext("c", []int{0, 1}, policy)
			if err != nil {
				t.Fatal(err)
			}
			before := submitTo(t, rt, c, 300)
			if err := c.RemoveWorkers(1); err != nil {
				t.Fatal(err)
			}
			after := submitTo(t, rt, c, 300)
			bound := &core.Task{Codelet: emptyCL, SchedContext: c, ExecuteOnWorker: true, Worker: 1}
			if err := rt.Submit(bound); !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), "not in") {
				t.Fatalf("task bound to a removed worker: err = %v, want ErrNoWorker", err)
			}
			if err := c.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			ranOn(t, rt, "before removal", before, 0, 1)
			ranOn(t, rt, "after removal", after, 0)
			if err := c.AddWorkers(2); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Workers(), []int{0, 2}) {
				t.Fatalf("workers = %v, want [0 2]", c.Workers())
			}
			added := submitTo(t, rt, c, 300)
			if err := c.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			ranOn(t, rt, "after adding worker 2", added, 0, 2)
			for _, tc := range []struct {
				name string
				err  error
				want string
			}{
				{"remove absent", c.RemoveWorkers(1), "worker 1 is not in the context"},
				{"add present", c.AddWorkers(0), "worker 0 is already in the context"},
				{"unknown", c.AddWorkers(7), "unknown worker 7"},
				{"none", c.RemoveWorkers(), "no workers given"},
			} {
				if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
					t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
				}
			}
		})
	}
}

// Deleting a context hands its queued tasks, and its tasks that become
// ready later, to the global context; its plugin process stops.
func TestContextDelete(t *testing.T) {
	rt := startWorkers(t, 2, nil)
	d, err := rt.CreateSchedContext("d", []int{1}, "dmda")
	if err != nil {
		t.Fatal(err)
	}
	const queuedGate, laterGate core.TagID = 1000, 2000
	gated := func(gate core.TagID, first core.TagID, n int) []*core.Task {
		var ts []*core.Task
		for i := 0; i < n; i++ {
			tag := first + core.TagID(i)
			if err := rt.DeclareTagDeps(tag, gate); err != nil {
				t.Fatal(err)
			}
			tk := &core.Task{Codelet: emptyCL, SchedContext: d, UseTag: true, Tag: tag}
			if err := rt.Submit(tk); err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tk)
		}
		return ts
	}
	queued := gated(queuedGate, 1, 50)
	later := gated(laterGate, 3000, 50)
	// With no worker, d's policy keeps the tasks made ready: they are in
	// it, unassigned, when Delete comes.
	if err := d.RemoveWorkers(1); err != nil {
		t.Fatal(err)
	}
	rt.TagNotifyFromApps(queuedGate)
	if err := d.Delete(); err != nil {
		t.Fatal(err)
	}
	rt.TagNotifyFromApps(laterGate)
	if err := d.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	ranOn(t, rt, "queued in the deleted context", queued, 0, 1)
	ranOn(t, rt, "ready after the delete", later, 0, 1)
	if err := rt.Submit(&core.Task{Codelet: emptyCL, SchedContext: d}); !errors.Is(err, core.ErrSchedContextDeleted) {
		t.Fatalf("submit to a deleted context: err = %v, want ErrSchedContextDeleted", err)
	}
	if err := d.Delete(); !errors.Is(err, core.ErrSchedContextDeleted) {
		t.Fatalf("second Delete: err = %v, want ErrSchedContextDeleted", err)
	}
	if err := d.AddWorkers(0); !errors.Is(err, core.ErrSchedContextDeleted) {
		t.Fatalf("AddWorkers on a deleted context: err = %v, want ErrSchedContextDeleted", err)
	}
	if _, err := rt.SchedContext("d"); err == nil {
		t.Fatal("SchedContext(d) found a deleted context")
	}
	if err := rt.GlobalSchedContext().Delete(); err == nil {
		t.Fatal("the global context was deleted")
	}
	// Its rings serve a new context.
	e, err := rt.CreateSchedContext("d", []int{0}, "ws")
	if err != nil {
		t.Fatal(err)
	}
	ranOn(t, rt, "new context", submitWait(t, rt, e, 20), 0)
}

func submitWait(t *testing.T, rt *core.Runtime, c *core.SchedContext, n int) []*core.Task {
	t.Helper()
	ts := submitTo(t, rt, c, n)
	if err := c.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestCreateContextErrors(t *testing.T) {
	rt := startWorkers(t, 2, nil)
	if _, err := rt.CreateSchedContext("taken", []int{0}, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ctx string
		workers   []int
		policy    string
		want      string
	}{
		{"empty worker set", "x", nil, "ws", "no workers"},
		{"unknown worker", "x", []int{0, 5}, "ws", "unknown worker 5"},
		{"negative worker", "x", []int{-1}, "ws", "unknown worker -1"},
		{"worker twice", "x", []int{1, 1}, "ws", "worker 1 given twice"},
		{"unknown policy", "x", []int{0}, "nosuch", `unknown scheduling policy "nosuch"`},
		{"duplicate name", "taken", []int{1}, "ws", "a context of that name exists"},
		{"global name", core.GlobalSchedContextName, []int{1}, "ws", "a context of that name exists"},
		{"empty name", "", []int{1}, "ws", "empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := rt.CreateSchedContext(tc.ctx, tc.workers, tc.policy); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := rt.CreateSchedContext("badcfg", []int{0}, "ws", core.WithPolicyConfig(map[string]any{"nosuch": 1})); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("bad policy config: err = %v", err)
	}
	if _, err := rt.SchedContext("nope"); err == nil || !strings.Contains(err.Error(), "global") {
		t.Fatalf("SchedContext(nope): err = %v, want one listing the contexts", err)
	}
}

// Contexts declared in the config file exist after Init, with their
// policies and workers; a bad declaration fails Init with its name.
func TestContextsFromConfig(t *testing.T) {
	src := `
context "fast" {
  workers = [1]
  sched   = "dmda"
  config {
    sorted = true
  }
}
context "rest" {
  workers = [0]
}
`
	parsed, err := config.Parse([]byte(src), "ctx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	rt := startWorkers(t, 2, func(c *config.Config) { c.Contexts = parsed.Contexts })
	fast, err := rt.SchedContext("fast")
	if err != nil {
		t.Fatal(err)
	}
	rest, err := rt.SchedContext("rest")
	if err != nil {
		t.Fatal(err)
	}
	if fast.Policy() != "dmda" || rest.Policy() != "ws" || !slices.Equal(fast.Workers(), []int{1}) {
		t.Fatalf("fast: %s %v; rest: %s %v", fast.Policy(), fast.Workers(), rest.Policy(), rest.Workers())
	}
	ranOn(t, rt, "fast", submitWait(t, rt, fast, 50), 1)
	ranOn(t, rt, "rest", submitWait(t, rt, rest, 50), 0)

	for _, tc := range []struct {
		name string
		ctx  config.Context
		want string
	}{
		{"unknown worker", config.Context{Name: "w", Workers: []int{9}}, `context "w": unknown worker 9`},
		{"unknown policy", config.Context{Name: "p", Workers: []int{0}, Sched: "nosuch"}, `unknown scheduling policy "nosuch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(pluginDir)
			c.Contexts = []config.Context{tc.ctx}
			rt, err := core.Init(context.Background(), core.Options{Config: c})
			if err == nil {
				rt.Shutdown()
				t.Fatal("Init succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Init: %v, want %q", err, tc.want)
			}
		})
	}
}

// A context's policy process dies: the tasks waiting in it fail naming it,
// the context refuses work without hanging, the global context goes on.
func TestContextSchedulerCrash(t *testing.T) {
	cfg := testConfig(crashyDir)
	off := 0 // restarts off for this plugin only
	cfg.Plugins["sched-crashy"] = config.Plugin{Name: "sched-crashy", Restarts: &off}
	rt := start(t, core.Options{Config: cfg})
	c, err := rt.CreateSchedContext("doomed", []int{0}, "crashy")
	if err != nil {
		t.Fatal(err)
	}
	doomed := &core.Task{Codelet: emptyCL, SchedContext: c, Priority: 99}
	if err := rt.Submit(doomed); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Wait(doomed) }()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "sched-crashy") || !strings.Contains(err.Error(), `"doomed"`) {
			t.Fatalf("Wait: %v, want ErrPluginCrashed naming the context's scheduler", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait hung after the context's scheduler crashed")
	}
	if err := rt.Submit(&core.Task{Codelet: emptyCL, SchedContext: c}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("submit to the crashed context: %v", err)
	}
	if err := c.RemoveWorkers(0); err == nil {
		t.Fatal("RemoveWorkers on the crashed context succeeded")
	}
	ranOn(t, rt, "global context", submitWait(t, rt, rt.GlobalSchedContext(), 20), 0, 1)
	if err := c.Delete(); err != nil {
		t.Fatalf("Delete of the crashed context: %v", err)
	}
}
