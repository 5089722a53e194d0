package core_test

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/examples/sched-eager/eager"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-dmda/dmda"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

// schedCases are the scheduling policies every end-to-end guarantee is
// checked on, each as its plugin process (sched-<sched> with cfg as its
// config block) and in process (policy).
var schedCases = []struct {
	label      string
	sched      string
	cfg        base.Config
	policy     func() sched.Policy
	priorities bool // the policy promises priority order on one worker
}{
	{"ws", "ws", nil, func() sched.Policy { return ws.New() }, true},
	{"dmda", "dmda", nil, func() sched.Policy { return dmda.New() }, false},
	{"dmdas", "dmda", base.Config{"sorted": true}, func() sched.Policy { return dmda.New() }, false},
	{"eager", "eager", nil, func() sched.Policy { return eager.New() }, false},
}

// sleepKernel is driver-crashy's test_sleep, for the in-process driver.
var sleepKernel = kernel.Kernel{Name: "test_sleep", Func: func(c *kernel.Context) error {
	time.Sleep(time.Duration(binary.LittleEndian.Uint64(c.Arg)))
	return nil
}}

// schedOptions runs scheduler case i over the plugins in dir (plugins) or
// in process.
func schedOptions(i int, inProcess bool, dir string, tune func(*config.Config)) core.Options {
	sc := schedCases[i]
	c := testConfig(dir)
	c.Sched = sc.sched
	if sc.cfg != nil {
		c.Plugins = map[string]config.Plugin{"sched-" + sc.sched: {Name: "sched-" + sc.sched, Config: sc.cfg}}
	}
	if tune != nil {
		tune(c)
	}
	opt := core.Options{Config: c}
	if inProcess {
		opt.Drivers = []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
			return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...), cpudriver.WithKernels(sleepKernel)), nil
		}}
		opt.Scheduler = func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, sc.policy(), base.Info{Name: sc.sched, Version: "test"}), nil
		}
	}
	return opt
}

// eachSched runs f for every scheduler, as a plugin and in process.
func eachSched(t *testing.T, f func(t *testing.T, i int, inProcess bool)) {
	for i, sc := range schedCases {
		for _, inProcess := range []bool{false, true} {
			mode := "plugins"
			if inProcess {
				mode = "in-process"
			}
			t.Run(sc.label+"/"+mode, func(t *testing.T) { f(t, i, inProcess) })
		}
	}
}

// access is one task's use of one vector handle, in submission order.
type access struct {
	task  int
	write bool
}

// TestSchedDependencies submits a random task graph: tasks scale or
// shift vectors (RW), take dot products of them (R, recording what they
// saw), or do nothing but wait on tags of earlier tasks. Every scheduler
// must run each task exactly once, after everything it depends on: the
// values read and the final vectors are those of the sequential program,
// and completions (callbacks) come in dependency order.
func TestSchedDependencies(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	eachSched(t, func(t *testing.T, i int, inProcess bool) {
		rng := rand.New(rand.NewSource(seed))
		rt := start(t, schedOptions(i, inProcess, pluginDir, nil))
		const nvec, vlen, ntasks = 4, 8, 300
		ones := make([]float64, vlen)
		for k := range ones {
			ones[k] = 1
		}
		hOnes, err := core.RegisterVector(rt, ones)
		if err != nil {
			t.Fatal(err)
		}
		vecs := make([][]float64, nvec)
		hv := make([]*core.Handle, nvec)
		model := make([]float64, nvec) // every element of vecs[k] is model[k]
		for k := range vecs {
			vecs[k] = make([]float64, vlen)
			if hv[k], err = core.RegisterVector(rt, vecs[k]); err != nil {
				t.Fatal(err)
			}
		}
		scal := &core.Codelet{Name: "scal", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF64}, Modes: []core.Mode{core.RW}}
		axpy := &core.Codelet{Name: "axpy", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AxpyF64}, Modes: []core.Mode{core.R, core.RW}}
		empty := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}

		var mu sync.Mutex
		var order []int // task indices in completion order
		runs := make([]int, ntasks)
		dots := make([]float64, ntasks)
		wantDot := make([]float64, ntasks)
		var dotHandles []*core.Handle
		history := make([][]access, nvec)
		tagDeps := make([][]int, ntasks)
		for n := 0; n < ntasks; n++ {
			task := &core.Task{Priority: rng.Intn(7) - 3, Tag: core.TagID(n + 1), UseTag: true}
			k := rng.Intn(nvec)
			switch r := rng.Intn(10); {
			case r < 3: // y = -y
				task.Codelet, task.Handles = scal, []*core.Handle{hv[k]}
				task.Arg = blasarg.ScalArg{Alpha: -1}.Encode()
				model[k] = -model[k]
				history[k] = append(history[k], access{n, true})
			case r < 6: // y = y + 1
				task.Codelet, task.Handles = axpy, []*core.Handle{hOnes, hv[k]}
				task.Arg = blasarg.AxpyArg{Alpha: 1}.Encode()
				model[k]++
				history[k] = append(history[k], access{n, true})
			case r < 9: // dots[n] = sum(y)
				hd, err := core.RegisterVariable(rt, &dots[n])
				if err != nil {
					t.Fatal(err)
				}
				dotHandles = append(dotHandles, hd)
				task.Codelet, task.Handles = dotF64, []*core.Handle{hOnes, hv[k], hd}
				wantDot[n] = model[k] * vlen
				history[k] = append(history[k], access{n, false})
			default:
				task.Codelet = empty
			}
			if n > 0 && rng.Intn(3) == 0 {
				var deps []core.TagID
				for d := rng.Intn(3); d >= 0; d-- {
					dep := rng.Intn(n)
					tagDeps[n] = append(tagDeps[n], dep)
					deps = append(deps, core.TagID(dep+1))
				}
				rt.DeclareTagDeps(task.Tag, deps...)
			}
			n := n
			task.Callback = func(*core.Task) {
				mu.Lock()
				order = append(order, n)
				runs[n]++
				mu.Unlock()
			}
			if err := rt.Submit(task); err != nil {
				t.Fatalf("submit task %d: %v", n, err)
			}
		}
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		for _, h := range append(dotHandles, append(hv, hOnes)...) {
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for n, c := range runs {
			if c != 1 {
				t.Fatalf("task %d completed %d times, want once", n, c)
			}
		}
		pos := make([]int, ntasks)
		for p, n := range order {
			pos[n] = p
		}
		for n, deps := range tagDeps {
			for _, d := range deps {
				if pos[d] > pos[n] {
					t.Fatalf("task %d completed before task %d, whose tag it depends on", n, d)
				}
			}
		}
		for k, h := range history {
			lastWrite := -1
			var readers []int
			for _, a := range h {
				if lastWrite >= 0 && pos[lastWrite] > pos[a.task] {
					t.Fatalf("vector %d: task %d completed before task %d, the writer it follows", k, a.task, lastWrite)
				}
				if !a.write {
					readers = append(readers, a.task)
					continue
				}
				for _, r := range readers {
					if pos[r] > pos[a.task] {
						t.Fatalf("vector %d: writer %d completed before reader %d, which precedes it", k, a.task, r)
					}
				}
				lastWrite, readers = a.task, nil
			}
			for e, v := range vecs[k] {
				if v != model[k] {
					t.Fatalf("vector %d[%d] = %v, want %v: a writer ran twice, never, or out of order", k, e, v, model[k])
				}
			}
		}
		for n := range dots {
			if dots[n] != wantDot[n] {
				t.Fatalf("task %d read a vector summing to %v, want %v: it ran at the wrong place in the sequence", n, dots[n], wantDot[n])
			}
		}
	})
}

// TestSchedPriorities: on one worker that is busy while the tasks arrive,
// a policy that honours priorities runs them by decreasing priority.
func TestSchedPriorities(t *testing.T) {
	// Plugin processes get test_sleep from the crash-test driver.
	dir := t.TempDir()
	links := map[string]string{"driver-cpu": filepath.Join(crashyDir, "driver-cpu")}
	for _, sc := range schedCases {
		links["sched-"+sc.sched] = filepath.Join(pluginDir, "sched-"+sc.sched)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	const gate = 300 * time.Millisecond
	eachSched(t, func(t *testing.T, i int, inProcess bool) {
		if !schedCases[i].priorities {
			t.Skipf("%s does not order tasks by priority", schedCases[i].label)
		}
		rng := rand.New(rand.NewSource(seed))
		rt := start(t, schedOptions(i, inProcess, dir, func(c *config.Config) { c.NCPU, c.QueueDepth = 1, 1 }))
		sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
		empty := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
		var mu sync.Mutex
		var prios []int
		begin := time.Now()
		// The gate outranks every other task: the policy may see it together
		// with the first few, and must still hand it out first.
		if err := rt.Submit(&core.Task{Codelet: sleep, Priority: 100, Arg: binary.LittleEndian.AppendUint64(nil, uint64(gate))}); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 60; n++ {
			p := rng.Intn(11) - 5
			err := rt.Submit(&core.Task{Codelet: empty, Priority: p, Callback: func(*core.Task) {
				mu.Lock()
				prios = append(prios, p)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
		if took := time.Since(begin); took > gate/2 {
			t.Fatalf("submitting took %v: the gate task (%v) may have ended before every task was queued; the machine is too loaded for this test", took, gate)
		}
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for k := 1; k < len(prios); k++ {
			if prios[k] > prios[k-1] {
				t.Fatalf("priority %d ran after %d (order %v)", prios[k], prios[k-1], prios)
			}
		}
	})
}

// TestStatusRunningWhenStarted: a task is StatusRunning once its worker
// starts it, not while it waits in the worker's ring behind another (the
// seed's "running on some worker"). One worker, four tasks whose kernels
// block until released one at a time: every policy posts several to the
// worker at once, and exactly one of them may say it runs.
func TestStatusRunningWhenStarted(t *testing.T) {
	for i, sc := range schedCases {
		t.Run(sc.label, func(t *testing.T) {
			next, stop := make(chan struct{}), make(chan struct{})
			gate := kernel.Kernel{Name: "test_next", Func: func(*kernel.Context) error {
				select {
				case <-next:
				case <-stop: // the test failed: let Shutdown end
				}
				return nil
			}}
			opt := schedOptions(i, true, pluginDir, func(c *config.Config) { c.NCPU = 1 })
			opt.Drivers = []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...), cpudriver.WithKernels(gate)), nil
			}}
			rt := start(t, opt)
			t.Cleanup(func() { close(stop) }) // before start's Shutdown
			cl := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_next"}}
			tasks := make([]*core.Task, 4)
			for k := range tasks {
				tasks[k] = &core.Task{Codelet: cl, Name: fmt.Sprintf("t%d", k)}
				submit(t, rt, tasks[k])
			}
			counts := func() (running, ready, finished int) {
				for _, task := range tasks {
					switch task.Status() {
					case core.StatusRunning:
						running++
					case core.StatusReady:
						ready++
					case core.StatusFinished:
						finished++
					}
				}
				return
			}
			for done := 0; done < len(tasks); done++ {
				var running, ready, finished int
				eventually(t, fmt.Sprintf("one task running, %d finished", done), func() bool {
					running, ready, finished = counts()
					return running == 1 && finished == done && ready == len(tasks)-done-1
				})
				next <- struct{}{}
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if running, _, finished := counts(); running != 0 || finished != len(tasks) {
				t.Fatalf("after WaitForAll: %d running, %d finished", running, finished)
			}
		})
	}
}
