package core_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

// A codelet with a slow and a fast CPU implementation (scal over 1 MiB,
// which doubles x, and the empty kernel), run as a chain of tasks on real
// plugin processes: under dmda both are measured first, then the fast one
// runs, whichever index it has; under ws, the models uncalibrated, the
// core runs the first one (TestCoreChoosesFastestImplementation: once
// they are calibrated, the fastest).
// x tells how many times the slow kernel really ran, which must be what
// Profiling says: the posted Execs carry the chosen kernel. Then, the
// models calibrated, independent tasks run the fast one too.
func TestPolicyChoosesImplementation(t *testing.T) {
	const slow, fast = blasarg.ScalF32, blasarg.Empty
	const n, tail = 80, 30 // room to calibrate when samples are left out as outliers
	cases := []struct {
		name, sched string
		impls       []string
		want        int // the implementation of (nearly) every task of the tail
		calibrates  bool
	}{
		{"dmda, the fast one second", "dmda", []string{slow, fast}, 1, true},
		{"dmda, the fast one first", "dmda", []string{fast, slow}, 0, true},
		{"ws, the core's first", "ws", []string{slow, fast}, 0, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(pluginDir)
			cfg.Sched = c.sched
			cfg.ModelDir = t.TempDir()
			rt, err := core.Init(t.Context(), core.Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Shutdown()
			name := fmt.Sprintf("impl_choice_%d", i)
			cl := &core.Codelet{Name: name, Impls: map[driver.Arch][]string{driver.CPU: c.impls}, Modes: []core.Mode{core.RW}, Model: core.HistoryModel}
			tasks, h, x := doublings(t, rt, cl, n)
			var ran [2]int
			inTail := 0
			for k, impl := range implsRun(t, rt, tasks) {
				ran[impl]++
				if k >= n-tail && impl == c.want {
					inTail++
				}
			}
			_, posted := posted(t, rt, cl)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			slowRuns := ran[0]
			if c.impls[1] == slow {
				slowRuns = ran[1]
			}
			if want := math.Ldexp(1, slowRuns); float64(x[0]) != want {
				t.Fatalf("x = %v: the slow kernel ran %v times, but Profiling says %d", x[0], math.Log2(float64(x[0])), slowRuns)
			}
			t.Logf("implementations run %v, %d of the last %d the expected one, %d posted by the policy", ran, inTail, tail, posted)
			if inTail < tail-1 {
				t.Errorf("%d of the last %d tasks ran implementation %d (runs per implementation: %v)", inTail, tail, c.want, ran)
			}
			if c.calibrates && (ran[0] < perfmodel.MinSamples || ran[1] < perfmodel.MinSamples) {
				t.Errorf("runs per implementation %v: each should have been measured %d times first", ran, perfmodel.MinSamples)
			}
			if !c.calibrates && ran[1] != 0 {
				t.Errorf("runs per implementation %v: the core's choice is the first", ran)
			}
			if posted == 0 {
				t.Errorf("no task went the posted way: the policy host did not post a chosen implementation's Exec")
			}
			// Independent tasks, each on its own vector of the same shape
			// (the same model entries).
			xs := make([][]float32, 20)
			hs := make([]*core.Handle, len(xs))
			for k := range xs {
				xs[k] = make([]float32, 1<<18)
				xs[k][0] = 1
				if hs[k], err = core.RegisterVector(rt, xs[k]); err != nil {
					t.Fatal(err)
				}
				tasks[k] = &core.Task{Codelet: cl, Handles: []*core.Handle{hs[k]}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
				if err := rt.Submit(tasks[k]); err != nil {
					t.Fatal(err)
				}
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			workers, expected := map[int]bool{}, 0
			for k := range xs {
				p, err := rt.Profiling(tasks[k])
				if err != nil {
					t.Fatal(err)
				}
				if err := hs[k].Unregister(); err != nil {
					t.Fatal(err)
				}
				if ranSlow := xs[k][0] == 2; ranSlow != (c.impls[p.Implementation] == slow) {
					t.Fatalf("independent task %d: x = %v, but Profiling says implementation %d (%s) ran", k, xs[k][0], p.Implementation, c.impls[p.Implementation])
				}
				workers[p.Worker] = true
				if p.Implementation == c.want {
					expected++
				}
			}
			t.Logf("independent tasks: %d of %d ran implementation %d, on workers %v", expected, len(xs), c.want, workers)
			if expected < len(xs)-1 {
				t.Errorf("independent tasks: %d of %d ran implementation %d", expected, len(xs), c.want)
			}
			if err := rt.Shutdown(); err != nil {
				t.Fatal(err)
			}
			m, err := perfmodel.Load(cfg.ModelDir, name)
			if err != nil {
				t.Fatal(err)
			}
			var impls []int
			for _, a := range m.Archs() {
				impls = append(impls, a.Impl)
			}
			if want := fmt.Sprint([]int{0, 1}); c.calibrates && fmt.Sprint(impls) != want {
				t.Errorf("saved model has implementations %v, want %s", impls, want)
			}
		})
	}
}

// The core checks the implementation a policy chooses: one the worker's
// driver does not have, or that CanExecute refused, fails the task with an
// error naming it, whether the policy says it posted the task or not; a
// valid one runs.
func TestPolicyImplementationChecked(t *testing.T) {
	refuse1 := func(_ driver.Arch, _ *core.Task, impl int) bool { return impl != 1 }
	cases := []struct {
		name       string
		canExecute func(driver.Arch, *core.Task, int) bool
		flags      uint32
		impl       uint32
		want       string // in the error; "" for none
	}{
		{"no such implementation", nil, wire.AssignImpl, 5, "scheduler chose implementation 5 of codelet \"two\" for task \"two\" on worker 0 (cpu), where the task may run implementations [0 1] only"},
		{"posted, no such implementation", nil, wire.AssignImpl | wire.AssignPosted, 7, "scheduler chose implementation 7"},
		{"refused by CanExecute", refuse1, wire.AssignImpl, 1, "may run implementations [0] only"},
		{"valid", nil, wire.AssignImpl, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := start(t, core.Options{
				Config: testConfig(pluginDir),
				Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
					return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
				}},
				Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
					return &liar{arena: a, decide: func(p wire.Push) []wire.Assign {
						return []wire.Assign{{Worker: 0, ID: p.ID, Flags: c.flags, Impl: c.impl}}
					}}, nil
				},
			})
			cl := &core.Codelet{Name: "two", Impls: map[driver.Arch][]string{driver.CPU: {blasarg.Empty, blasarg.ScalF32}},
				Modes: []core.Mode{core.RW}, CanExecute: c.canExecute}
			x := []float32{1}
			h, err := core.RegisterVector(rt, x)
			if err != nil {
				t.Fatal(err)
			}
			task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
			if err := rt.Submit(task); err != nil {
				t.Fatal(err)
			}
			err = rt.Wait(task)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
				if x[0] != 2 {
					t.Fatalf("x = %v, want 2: implementation 1 (scal) did not run", x[0])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// With a policy that leaves the choice to the core (ws), a codelet's
// implementations are run in turn while calibrating, and once the model
// predicts each of them the core runs the one predicted fastest, whatever
// its index: x counts the slow kernel's runs.
func TestCoreChoosesFastestImplementation(t *testing.T) {
	const slow, fast = blasarg.ScalF32, blasarg.Empty
	const n = 2*perfmodel.MinSamples + 4
	dir := t.TempDir()
	run := func(calibrate int) (ran [2]int, slowRuns float64) {
		cfg := testConfig(pluginDir)
		cfg.Sched = "ws"
		cfg.ModelDir = dir
		cfg.Calibrate = calibrate
		rt, err := core.Init(t.Context(), core.Options{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Shutdown()
		cl := &core.Codelet{Name: "fastest_impl", Impls: map[driver.Arch][]string{driver.CPU: {slow, fast}}, Modes: []core.Mode{core.RW}, Model: core.HistoryModel}
		tasks, h, x := doublings(t, rt, cl, n)
		for _, impl := range implsRun(t, rt, tasks) {
			ran[impl]++
		}
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		return ran, math.Log2(float64(x[0]))
	}
	// Calibrating runs until both entries predict: outliers are left
	// out (docs/design/perfmodel.md), so how many that takes depends on
	// the machine.
	for round := 0; ; round++ {
		ran, slowRuns := run(1)
		if ran[0] < n/2-1 || ran[1] < n/2-1 {
			t.Fatalf("calibrating: runs per implementation %v, want them in turn", ran)
		}
		if slowRuns != float64(ran[0]) {
			t.Fatalf("calibrating: the slow kernel ran %v times, Profiling says %d", slowRuns, ran[0])
		}
		m, err := perfmodel.Load(dir, "fastest_impl")
		if err != nil {
			t.Fatal(err)
		}
		calibrated := 0
		for _, a := range m.Archs() {
			if len(a.Entries) == 1 && a.Entries[0].Calibrated() {
				calibrated++
			}
		}
		if calibrated == 2 {
			break
		}
		if round == 10 {
			t.Fatalf("model %+v: not calibrated after %d rounds", m.Archs(), round+1)
		}
	}
	ran, slowRuns := run(0)
	if ran[1] != n || slowRuns != 0 {
		t.Errorf("calibrated: runs per implementation %v (the slow kernel's really %v): want all %d on the fast one, implementation 1", ran, slowRuns, n)
	}
}

// doublings registers a vector x of 2^18 floats with x[0] = 1, submits n
// tasks of cl on it in a chain, each with the argument of a scal by 2 (the
// slow implementation doubles x[0], the empty one leaves it), and waits for
// them. The handle stays registered.
func doublings(t *testing.T, rt *core.Runtime, cl *core.Codelet, n int) ([]*core.Task, *core.Handle, []float32) {
	t.Helper()
	x := make([]float32, 1<<18)
	x[0] = 1
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	tasks := make([]*core.Task, n)
	for k := range tasks {
		tasks[k] = &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
		if err := rt.Submit(tasks[k]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	return tasks, h, x
}

// implsRun is the implementation each of tasks ran, as Profiling says, 0
// or 1; anything else fails the test.
func implsRun(t *testing.T, rt *core.Runtime, tasks []*core.Task) []int {
	t.Helper()
	impls := make([]int, len(tasks))
	for k, tk := range tasks {
		p, err := rt.Profiling(tk)
		if err != nil {
			t.Fatal(err)
		}
		if p.Implementation < 0 || p.Implementation > 1 {
			t.Fatalf("task %d ran implementation %d", k, p.Implementation)
		}
		impls[k] = p.Implementation
	}
	return impls
}
