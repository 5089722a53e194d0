package core_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// reduxCL are OpenCL kernels for a dot product by REDUX over float
// variables and vectors: rx_zero (init), rx_add (a += b: the contribution
// and the reduction), rx_dot (r = x.y, one work item as the calling
// convention runs a task writing a variable; dot itself is an OpenCL C
// built-in), and twice_plus_one (y = 2x + 1 through a SCRATCH vector
// tmp).
const reduxCL = `
kernel void rx_zero(global float *a) { a[0] = 0; }
kernel void rx_add(global float *a, global const float *b) { a[0] += b[0]; }
kernel void rx_dot(global const float *x, uint nx, global const float *y, uint ny, global float *r) {
	float s = 0;
	for (uint i = 0; i < nx; i++) s += x[i] * y[i];
	r[0] = s;
}
kernel void twice_plus_one(global const float *x, uint nx, global float *tmp, uint nt, global float *y, uint ny) {
	size_t i = get_global_id(0);
	if (i >= ny) return;
	tmp[i] = 2 * x[i];
	y[i] = tmp[i] + 1;
}`

// onBoth is a codelet with a CPU kernel and an OpenCL kernel of reduxCL.
func onBoth(name string, cpuKernel, clKernel string, modes ...core.Mode) *core.Codelet {
	cl := &core.Codelet{Name: name, Modes: modes, Kernels: map[driver.Arch]string{}, Sources: map[driver.Arch]string{}}
	if cpuKernel != "" {
		cl.Kernels[driver.CPU] = cpuKernel
	}
	if clKernel != "" {
		cl.Kernels[driver.OpenCL], cl.Sources[driver.OpenCL] = clKernel, reduxCL
	}
	return cl
}

// startCPUAndOpenCL runs one CPU worker (0) and one OpenCL worker (1) on
// pocl, with opts' trace file if any.
func startCPUAndOpenCL(t *testing.T, opts core.Options) *core.Runtime {
	t.Helper()
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	opts.Config = testConfig(openclDir)
	opts.Config.NCPU = 1
	rt := start(t, opts)
	if len(rt.Workers()) != 2 || rt.Workers()[1].Arch != driver.OpenCL {
		t.Fatalf("workers %+v, want one CPU and one OpenCL worker (is pocl installed?)", rt.Workers())
	}
	return rt
}

// TestReduxOnOpenCL: a dot product accumulated by REDUX, its contributions
// made on the CPU worker and on the OpenCL worker (each into a buffer of
// its own on its memory node, initialised there), gives the exact sum,
// phase after phase, whether the reductions run on the CPU, on the device
// or on either.
func TestReduxOnOpenCL(t *testing.T) {
	rt := startCPUAndOpenCL(t, core.Options{})
	zero := onBoth("zero", blasarg.Zero, "rx_zero", core.W)
	dot := onBoth("dot", blasarg.DotF32, "rx_dot", core.R, core.R, core.W)
	contribute := onBoth("contribute", blasarg.AddF32, "rx_add", core.Redux, core.R)
	const n, blocks = 4096, 16
	x, y := make([]float32, n), make([]float32, n)
	var want float32 = 5 // the handle's value before the contributions
	for i := range x {
		x[i], y[i] = float32(i%7-3), float32(i%5)
		want += x[i] * y[i] // small integers: every sum is exact
	}
	for _, c := range []struct {
		name  string
		redux *core.Codelet
	}{
		{"reductions on CPU", onBoth("add-cpu", blasarg.AddF32, "", core.RW, core.R)},
		{"reductions on OpenCL", onBoth("add-ocl", "", "rx_add", core.RW, core.R)},
		{"reductions anywhere", onBoth("add-both", blasarg.AddF32, "rx_add", core.RW, core.R)},
	} {
		t.Run(c.name, func(t *testing.T) {
			xh, _ := core.RegisterVector(rt, x)
			yh, _ := core.RegisterVector(rt, y)
			xs, err := xh.Partition(core.VectorBlocks(blocks, 0))
			if err != nil {
				t.Fatal(err)
			}
			ys, err := yh.Partition(core.VectorBlocks(blocks, 0))
			if err != nil {
				t.Fatal(err)
			}
			partial := make([][]float32, blocks)
			ph := make([]*core.Handle, blocks)
			for i := range ph {
				partial[i] = []float32{0}
				ph[i], _ = core.RegisterVariable(rt, &partial[i][0])
			}
			sum := []float32{5}
			sh, _ := core.RegisterVariable(rt, &sum[0])
			if err := sh.SetReductionMethods(c.redux, zero); err != nil {
				t.Fatal(err)
			}
			phase := func(k int) {
				for i := range blocks {
					submit(t, rt, &core.Task{Codelet: dot, Handles: []*core.Handle{xs[i], ys[i], ph[i]}})
					// Both workers contribute, whatever the scheduler does.
					submit(t, rt, &core.Task{Codelet: contribute, Handles: []*core.Handle{sh, ph[i]}, ExecuteOnWorker: true, Worker: i % 2})
				}
				if err := sh.Acquire(core.R); err != nil {
					t.Fatal(err)
				}
				if sum[0] != want+float32(k-1)*(want-5) {
					t.Errorf("phase %d: sum %v, want %v", k, sum[0], want+float32(k-1)*(want-5))
				}
				if err := sh.Release(); err != nil {
					t.Fatal(err)
				}
			}
			phase(1)
			phase(2) // each worker's buffer is initialised again
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			for _, h := range append(ph, sh) {
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
			}
			if err := xh.Unpartition(); err != nil {
				t.Fatal(err)
			}
			if err := yh.Unpartition(); err != nil {
				t.Fatal(err)
			}
			xh.Unregister()
			yh.Unregister()
		})
	}

	// What cannot work is refused at submit, naming why.
	t.Run("refused", func(t *testing.T) {
		v := []float32{0}
		h, _ := core.RegisterVariable(rt, &v[0])
		cpuZero := onBoth("zero-cpu", blasarg.Zero, "", core.W)
		if err := h.SetReductionMethods(onBoth("add-both", blasarg.AddF32, "rx_add", core.RW, core.R), cpuZero); err != nil {
			t.Fatal(err)
		}
		one := []float32{1}
		oh, _ := core.RegisterVariable(rt, &one[0])
		devOnly := onBoth("contribute-ocl", "", "rx_add", core.Redux, core.R)
		for _, c := range []struct {
			name string
			task *core.Task
			want string
		}{
			{"device kernel, CPU init", &core.Task{Codelet: devOnly, Handles: []*core.Handle{h, oh}},
				`the init codelet "zero-cpu" of ` + h.String() + `, which initialises each worker's REDUX buffer where the worker computes, on cpu: no worker can do both`},
			{"pinned where init cannot run", &core.Task{Codelet: contribute, Handles: []*core.Handle{h, oh}, ExecuteOnWorker: true, Worker: 1},
				"must run on worker 1 (opencl), where the init codelet of its REDUX buffer cannot run"},
		} {
			if err := rt.Submit(c.task); !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want ErrNoWorker saying %q", c.name, err, c.want)
			}
		}
		// Kept where its init runs, it contributes.
		submit(t, rt, &core.Task{Codelet: contribute, Handles: []*core.Handle{h, oh}})
		if err := h.Unregister(); err != nil || v[0] != 1 {
			t.Fatalf("after one contribution: %v, %v", v[0], err)
		}
		oh.Unregister()
	})
}

// TestScratchOnOpenCL: a SCRATCH buffer on the OpenCL worker is a device
// buffer the kernel can use, never copied in or out: the trace has the
// copy of x in and of y out, nothing for the scratch buffer, and the
// handle's own data is untouched.
func TestScratchOnOpenCL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scratch.trace")
	rt := startCPUAndOpenCL(t, core.Options{TraceFile: path})
	const n = 1000
	x, y, tmp := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], tmp[i] = float32(i), 7
	}
	xh, _ := core.RegisterVector(rt, x)
	yh, _ := core.RegisterVector(rt, y)
	th, _ := core.RegisterVector(rt, tmp)
	cl := onBoth("twice_plus_one", "", "twice_plus_one", core.R, core.Scratch, core.W)
	for range 5 {
		submit(t, rt, &core.Task{Codelet: cl, Handles: []*core.Handle{xh, th, yh}})
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*core.Handle{xh, yh, th} {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range y {
		if y[i] != 2*x[i]+1 || tmp[i] != 7 {
			t.Fatalf("y[%d] = %v (want %v), tmp[%d] = %v (want its 7 untouched)", i, y[i], 2*x[i]+1, i, tmp[i])
		}
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	tf, err := core.ReadTraceFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// x in once, y out once at Unregister; tmp never moves.
	if s := tf.Summary(); s.Transfers != 2 || s.Ran != 5 {
		t.Errorf("%d transfers and %d tasks in the trace, want 2 (x in, y out) and 5", s.Transfers, s.Ran)
	}
}

// TestScratchMultiformatOnDevice: multiformat data has its SCRATCH buffers
// in the CPU layout only, so a task with one that may run on the OpenCL
// worker is refused at submit, naming why; kept to the CPU it runs.
func TestScratchMultiformatOnDevice(t *testing.T) {
	rt := startMultiformat(t, mfPluginDir(t), 1)
	h, err := core.RegisterMultiformat(rt, newPoints(8), mfOps)
	if err != nil {
		t.Fatal(err)
	}
	touch := &core.Codelet{Name: "mf_touch", Modes: []core.Mode{core.Scratch},
		Kernels: map[driver.Arch]string{driver.CPU: "mf_add_one", driver.OpenCL: "mf_touch"},
		Sources: map[driver.Arch]string{driver.OpenCL: "kernel void mf_touch(global double *soa, uint n) {}"}}
	err = rt.Submit(&core.Task{Codelet: touch, Handles: []*core.Handle{h}})
	if !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), "a SCRATCH buffer of multiformat data has its CPU layout only") || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("SCRATCH of multiformat data on a task that may run on OpenCL: %v", err)
	}
	submit(t, rt, &core.Task{Codelet: touch, Handles: []*core.Handle{h}, Where: core.WhereCPU})
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
}
