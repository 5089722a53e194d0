package core_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// hostedKernels are the kernels this test binary hosts when the runtime
// starts it again as its CPU driver.
func hostedKernels() []kernel.Kernel {
	return append(parallelTestKernels(), []kernel.Kernel{
		{Name: "host_clamp", Func: func(ctx *kernel.Context) error {
			var lo, hi float32
			if err := ctx.Unpack(&lo, &hi); err != nil {
				return err
			}
			x := ctx.Buffers[0].Float32s()[:ctx.Buffers[0].NX]
			for i, v := range x {
				x[i] = min(max(v, lo), hi)
			}
			return nil
		}},
		// host_pid writes the hosting process's pid, to tell where it ran.
		{Name: "host_pid", Func: func(ctx *kernel.Context) error {
			ctx.Buffers[0].Int64s()[0] = int64(os.Getpid())
			return nil
		}},
		// host_exit kills its host, as a crashing user kernel would.
		{Name: "host_exit", Func: func(*kernel.Context) error {
			os.Exit(7)
			return nil
		}},
		{Name: "host_fail", Func: func(*kernel.Context) error {
			return errors.New("user kernel says no")
		}},
	}...)
}

// schedOnlyDir is a plugin directory with a scheduler and no driver-cpu:
// only the application itself can run CPU kernels there.
func schedOnlyDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "plugins")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pluginDir, "sched-ws"), filepath.Join(dir, "sched-ws")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKernelsInTheApplication: with Options.Kernels, the test binary itself
// is the CPU driver: a kernel of this package runs on a vector, in another
// process, with typed arguments; its error reaches Wait; its crash costs a
// task and a restart, not the application.
func TestKernelsInTheApplication(t *testing.T) {
	cfg := testConfig(schedOnlyDir(t))
	cfg.PluginRestarts = 2 // the crashing task is retried once on the restarted host
	rt, err := core.Init(context.Background(), core.Options{Config: cfg, Kernels: hostedKernels()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	cl := func(k string, modes ...core.Mode) *core.Codelet {
		return &core.Codelet{Name: k, Kernels: map[driver.Arch]string{driver.CPU: k}, Modes: modes}
	}

	x := []float32{-5, -0.5, 0, 0.5, 5}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Insert(cl("host_clamp", core.RW), core.Data(core.RW, h), core.Value(float32(-1), float32(1))); err != nil {
		t.Fatal(err)
	}
	pid := []int64{0}
	ph, err := core.RegisterVector(rt, pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Insert(cl("host_pid", core.W), core.Data(core.W, ph)); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*core.Handle{h, ph} {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	if want := []float32{-1, -0.5, 0, 0.5, 1}; fmt.Sprint(x) != fmt.Sprint(want) {
		t.Fatalf("clamped %v, want %v", x, want)
	}
	if pid[0] == 0 || pid[0] == int64(os.Getpid()) {
		t.Fatalf("kernel ran in pid %d; the application is %d: want another process", pid[0], os.Getpid())
	}

	// A standard kernel is not there: the error says why.
	if err := rt.Submit(&core.Task{Codelet: cl("scal_f32", core.RW), Handles: []*core.Handle{h}}); !errors.Is(err, core.ErrNoWorker) ||
		!strings.Contains(err.Error(), fmt.Sprintf("this application, hosting the %d kernels of Options.Kernels in place of the standard library (add kernels.Library()", len(hostedKernels()))) {
		t.Fatalf("a standard kernel with Options.Kernels: %v", err)
	}

	fail := &core.Task{Codelet: cl("host_fail")}
	if err := rt.Submit(fail); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(fail); err == nil || !strings.Contains(err.Error(), "user kernel says no") {
		t.Fatalf("Wait on a failing user kernel: %v", err)
	}

	crash := &core.Task{Codelet: cl("host_exit")}
	if err := rt.Submit(crash); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(crash); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("Wait on a kernel that kills its host: %v, want ErrPluginCrashed", err)
	}
	// The driver restarts as this binary again and runs the next task.
	after := []float32{9}
	ah, err := core.RegisterVector(rt, after)
	if err != nil {
		t.Fatal(err)
	}
	task := &core.Task{Codelet: cl("host_clamp", core.RW), Handles: []*core.Handle{ah}, Synchronous: true}
	if task.Arg, err = kernel.Pack(float32(0), float32(2)); err != nil {
		t.Fatal(err)
	}
	if err := rt.Submit(task); err != nil {
		t.Fatalf("task after the host's restart: %v", err)
	}
	if err := ah.Unregister(); err != nil {
		t.Fatal(err)
	}
	if after[0] != 2 {
		t.Fatalf("after restart: clamp(9) = %v, want 2", after[0])
	}
}

// TestKernelsRefused: kernel lists the runtime cannot host are Init errors
// that say what is wrong.
func TestKernelsRefused(t *testing.T) {
	nop := func(*kernel.Context) error { return nil }
	tests := []struct {
		name    string
		opt     core.Options
		wantErr string
	}{
		{"twice", core.Options{Kernels: []kernel.Kernel{{Name: "a", Func: nop}, {Name: "b", Func: nop}, {Name: "a", Func: nop}}}, `kernel "a" is given twice (Options.Kernels[0] and [2])`},
		{"no name", core.Options{Kernels: []kernel.Kernel{{Func: nop}}}, "Options.Kernels[0] has no name"},
		{"no func", core.Options{Kernels: []kernel.Kernel{{Name: "f"}}}, `kernel "f" (Options.Kernels[0]) has no function`},
		{"with in-process drivers", core.Options{Kernels: []kernel.Kernel{{Name: "f", Func: nop}}, Drivers: []core.DriverFactory{nil}}, "Options.Kernels and Options.Drivers cannot be used together"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Config = testConfig(pluginDir)
			rt, err := core.Init(context.Background(), tc.opt)
			if err == nil {
				rt.Shutdown()
				t.Fatal("Init accepted it")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Init: %v\nwant it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// An application that prints before hosting its kernels, as its main may
// before Init and as a test binary under `go test -v` does ("=== RUN"),
// still hosts them: the loader drops those lines.
func TestKernelsNoisyHost(t *testing.T) {
	t.Setenv("CORE_TEST_NOISY_HOST", "1") // read by TestMain in the child
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(schedOnlyDir(t)), Kernels: hostedKernels()})
	if err != nil {
		t.Fatalf("Init with a host that printed before its handshake: %v", err)
	}
	defer rt.Shutdown()
	x := []float32{7}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	cl := &core.Codelet{Name: "host_clamp", Kernels: map[driver.Arch]string{driver.CPU: "host_clamp"}, Modes: []core.Mode{core.RW}}
	if _, err := rt.Insert(cl, core.Data(core.RW, h), core.Value(float32(0), float32(1))); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 1 {
		t.Fatalf("clamp(7) to [0, 1] = %v in the noisy host", x[0])
	}
}

// A host that reaches Init (or HostKernels) with no kernels, as a program
// whose kernel list depends on something that differs between its runs
// would, exits saying why, and Init reports it.
func TestKernelsEmptyHost(t *testing.T) {
	t.Setenv("CORE_TEST_EMPTY_HOST", "1") // read by TestMain in the child
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(schedOnlyDir(t)), Kernels: hostedKernels()})
	if err == nil {
		rt.Shutdown()
		t.Fatal("Init succeeded with a host that has no kernels")
	}
	if !strings.Contains(err.Error(), "reached core.Init with no Options.Kernels") {
		t.Fatalf("Init: %v\nwant the host's own explanation", err)
	}
}
