package core_test

import (
	"context"
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
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

// runPinned submits task on worker w, waits for it and returns its
// profiling information.
func runPinned(t *testing.T, rt *core.Runtime, cl *core.Codelet, h *core.Handle, w int) core.ProfilingInfo {
	t.Helper()
	task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 1}.Encode(), ExecuteOnWorker: true, Worker: w}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(task); err != nil {
		t.Fatal(err)
	}
	p, err := rt.Profiling(task)
	if err != nil {
		t.Fatal(err)
	}
	if p.Worker != w {
		t.Fatalf("task ran on worker %d, want %d", p.Worker, w)
	}
	return p
}

// On a CPU worker and a real OpenCL device (pocl), Profiling's Predicted
// is the calibrated mean of the architecture the task ran on, and
// PredictedTransfer the bus model's time to bring its input to that
// worker's node from where it was: the device's copy up to RAM for the CPU
// worker, RAM's copy down for the device, nothing when it is there.
func TestProfilingPredictionsOpenCL(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	t.Setenv("STARPU_LIMIT_OPENCL_MEM", "16")
	cfg := testConfig(openclDir)
	cfg.NCPU = 1
	cfg.ModelDir = dir
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	cpu, ocl := -1, -1
	for _, w := range rt.Workers() {
		switch w.Arch {
		case driver.CPU:
			cpu = w.ID
		case driver.OpenCL:
			ocl = w.ID
		}
	}
	if cpu < 0 || ocl < 0 {
		t.Fatalf("workers %+v, want a CPU and an OpenCL worker (is pocl installed?)", rt.Workers())
	}
	const n = 1 << 16
	x := make([]float32, n)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	cl := &core.Codelet{Name: "predicted_scal", Modes: []core.Mode{core.RW}, Model: core.HistoryModel,
		Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32, driver.OpenCL: blasarg.ScalF32}}
	// Until both predict: a model leaves out outliers (docs/design/
	// perfmodel.md), so how many runs that takes depends on the machine.
	for i := 0; ; i++ {
		pc, po := runPinned(t, rt, cl, h, cpu), runPinned(t, rt, cl, h, ocl)
		if pc.Predicted >= 0 && po.Predicted >= 0 {
			break
		}
		if i == 20*perfmodel.MinSamples {
			t.Fatalf("not calibrated after %d runs on each worker", i+1)
		}
	}
	// With STARPU_CALIBRATE=0 the calibrated entries take no more samples:
	// what these tasks were told is what the saved model holds.
	fromDevice := runPinned(t, rt, cl, h, cpu)
	fromRAM := runPinned(t, rt, cl, h, ocl)
	inPlace := runPinned(t, rt, cl, h, ocl)
	links := rt.Bus()
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	bus := func(src, dst string) time.Duration {
		for _, l := range links {
			if l.Src == src && l.Dst == dst {
				return time.Duration((l.LatencyUs + 4*n/l.MBps) * 1e3)
			}
		}
		t.Fatalf("bus model %+v has no link %s -> %s", links, src, dst)
		return 0
	}
	m, err := perfmodel.Load(dir, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	mean := map[string]time.Duration{}
	for _, a := range m.Archs() {
		if len(a.Entries) != 1 || !a.Entries[0].Calibrated() {
			t.Fatalf("architecture %s: entries %+v, want one calibrated entry", a.Arch, a.Entries)
		}
		mean[a.Arch] = time.Duration(a.Entries[0].Mean)
	}
	if mean["cpu"] == mean["opencl_0"] || mean["cpu"] <= 0 || mean["opencl_0"] <= 0 {
		t.Fatalf("means %v: want two different calibrated means", mean)
	}
	for _, c := range []struct {
		name                string
		got                 core.ProfilingInfo
		predicted, transfer time.Duration
	}{
		{"CPU task, data on the device", fromDevice, mean["cpu"], bus("opencl_0", "RAM")},
		{"OpenCL task, data in RAM", fromRAM, mean["opencl_0"], bus("RAM", "opencl_0")},
		{"OpenCL task, data on the device", inPlace, mean["opencl_0"], 0},
	} {
		if c.got.Predicted != c.predicted || c.got.PredictedTransfer != c.transfer {
			t.Errorf("%s: predicted %v and transfer %v, want %v and %v", c.name, c.got.Predicted, c.got.PredictedTransfer, c.predicted, c.transfer)
		}
	}
}

// PredictedTransfer is 0 on a machine with RAM only, where nothing moves,
// and -1 only when a device node has no bus model (a device without memory
// to measure it with); Predicted is -1 for a codelet without a model.
func TestProfilingPredictedTransferKnown(t *testing.T) {
	for _, c := range []struct {
		name         string
		start        func(t *testing.T) *core.Runtime
		wantTransfer time.Duration
	}{
		{"RAM only", func(t *testing.T) *core.Runtime {
			cfg := testConfig(pluginDir)
			cfg.ModelDir = t.TempDir()
			return start(t, core.Options{Config: cfg})
		}, 0},
		{"device without bus model", func(t *testing.T) *core.Runtime {
			cfg := testConfig(pluginDir)
			cfg.NCPU = 1
			cfg.ModelDir = t.TempDir()
			dev := &memDevice{bufs: map[uint64][]byte{}}
			return start(t, core.Options{Config: cfg,
				Drivers: []core.DriverFactory{
					func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
						return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
					},
					func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
						dev.arena = a
						return dev, nil
					},
				},
				Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
					return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
				}})
		}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := c.start(t)
			if rt.Bus() != nil {
				t.Fatalf("bus model %+v, want none", rt.Bus())
			}
			h, err := core.RegisterVector(rt, make([]float32, 1024))
			if err != nil {
				t.Fatal(err)
			}
			p := runPinned(t, rt, scalOnCPU, h, 0)
			if p.Predicted != -1 || p.PredictedTransfer != c.wantTransfer {
				t.Errorf("predicted %v and transfer %v, want -1 and %v", p.Predicted, p.PredictedTransfer, c.wantTransfer)
			}
		})
	}
}
