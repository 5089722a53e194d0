package core_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

// Tasks of a codelet with a history model calibrate it; the model is saved
// at shutdown, and the next runtime predicts the tasks' durations.
func TestPerformanceModelCalibration(t *testing.T) {
	dir := t.TempDir()
	cl := &core.Codelet{Name: "scal_model", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW}, Model: core.HistoryModel}
	run := func() time.Duration {
		cfg := testConfig(pluginDir)
		cfg.ModelDir = dir
		rt, err := core.Init(t.Context(), core.Options{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 1<<16)
		h, err := core.RegisterVector(rt, x)
		if err != nil {
			t.Fatal(err)
		}
		var first *core.Task
		for i := 0; i < 4*perfmodel.MinSamples; i++ { // room for outliers left out
			task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 1}.Encode()}
			if first == nil {
				first = task
			}
			if err := rt.Submit(task); err != nil {
				t.Fatal(err)
			}
		}
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		p, err := rt.Profiling(first)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Shutdown(); err != nil {
			t.Fatal(err)
		}
		return p.Predicted
	}
	if p := run(); p >= 0 {
		t.Errorf("first task of the first run predicted %v with no model yet", p)
	}
	m, err := perfmodel.Load(dir, "scal_model")
	if err != nil {
		t.Fatal(err)
	}
	archs := m.Archs()
	if len(archs) != 1 || archs[0].Arch != "cpu" || len(archs[0].Entries) != 1 || archs[0].Entries[0].Samples < perfmodel.MinSamples {
		t.Fatalf("saved model %+v: want one cpu entry with >= %d samples", archs, perfmodel.MinSamples)
	}
	if p := run(); p <= 0 {
		t.Errorf("first task of the second run predicted %v, want the calibrated mean", p)
	}
}

// recordingPolicy is ws that remembers what the core told it about tasks.
type recordingPolicy struct {
	*ws.Policy
	mu    sync.Mutex
	tasks []sched.Task
}

func (p *recordingPolicy) Push(t *sched.Task) {
	p.mu.Lock()
	p.tasks = append(p.tasks, *t)
	p.mu.Unlock()
	p.Policy.Push(t)
}

// The scheduler learns the LOCALITY hint, the model's predicted lengths
// and the model's name.
func TestPushCarriesHints(t *testing.T) {
	pol := &recordingPolicy{Policy: ws.New()}
	cfg := testConfig(pluginDir)
	cfg.ModelDir = t.TempDir()
	// Chained tasks reach the host, not the policy's Push: this test
	// reads what Push gets.
	cfg.NoChain = true
	rt := start(t, core.Options{Config: cfg, Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
		return sched.NewHost(a, pol, base.Info{Name: "ws", Version: "test"}), nil
	}})
	cl := &core.Codelet{Name: "scal_hint", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW | core.Locality}, Model: core.HistoryModel}
	x := make([]float32, 64)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	// Enough tasks to calibrate with a few outliers left out.
	const n = 4 * perfmodel.MinSamples
	for i := 0; i < n; i++ {
		if err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 1}.Encode()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if len(pol.tasks) != n {
		t.Fatalf("policy saw %d tasks, want %d", len(pol.tasks), n)
	}
	for i, task := range pol.tasks {
		if !task.Locality {
			t.Fatalf("task %d: Locality not set", i)
		}
		if task.Model != "scal_hint" {
			t.Fatalf("task %d: the policy knows its model as %q, want the codelet's name", i, task.Model)
		}
		cpu := task.Length[driver.ArchIndex(driver.CPU)]
		if i < perfmodel.MinSamples && cpu != -1 {
			t.Errorf("task %d: predicted %d ns before calibration", i, cpu)
		}
		if i == n-1 && cpu <= 0 {
			t.Errorf("task %d: predicted %d ns after %d runs", i, cpu, i)
		}
	}
}
