package cudadriver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// The tests that run the driver do so on a real GPU when Probe finds one,
// and otherwise on cu/testdata/fakecuda.c: a fake libcuda, cuBLAS,
// cuSOLVER and NVRTC on host memory, built by TestMain with the C compiler
// and selected through the library variables, which plugin processes
// inherit. A `go test -c` binary carried to the GPU machine finds the GPU
// and needs neither the fake's source nor Go.

// EnvTestPlugin names a driver-cuda binary for the tests that run the
// driver as a plugin process; without it they build one with go, and skip
// where there is no go.
const EnvTestPlugin = "STARPU_TEST_DRIVER_CUDA"

var (
	// backend is "gpu" or "fake", or "" when neither is available and
	// noBackend says why.
	backend   string
	noBackend string
	tmpDir    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "driver-cuda-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpDir = dir
	setBackend()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// setBackend picks the real GPU or builds and selects the fake libraries.
func setBackend() {
	_, perr := cu.Probe(cu.Config{})
	if perr == nil {
		backend = "gpu"
		return
	}
	lib, err := buildFake(tmpDir)
	if err != nil {
		noBackend = fmt.Sprintf("no usable CUDA device (%v) and no fake libraries (%v)", perr, err)
		return
	}
	for _, v := range []string{cu.EnvDriverLibrary, cu.EnvBLASLibrary, cu.EnvSolverLibrary, cu.EnvNVRTCLibrary} {
		os.Setenv(v, lib)
	}
	for _, v := range []string{"CUDA_FAKE_DEVICES", "CUDA_FAKE_INIT", "CUDA_FAKE_VERSION", "CUDA_FAKE_PEER", "CUDA_FAKE_LOG"} {
		os.Unsetenv(v)
	}
	backend = "fake"
}

// buildFake compiles the cu package's fake libraries into dir, with weak
// stubs for the entry points the fake does not define.
func buildFake(dir string) (string, error) {
	src := filepath.Join("..", "cu", "testdata", "fakecuda.c")
	hdr := filepath.Join("..", "cu", "cushim.h")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("the fake's source: %w", err)
	}
	compiler := ""
	for _, c := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			compiler = p
			break
		}
	}
	if compiler == "" {
		return "", fmt.Errorf("no C compiler")
	}
	var stubs strings.Builder
	for _, lib := range []cu.Lib{cu.LibDriver, cu.LibBLAS, cu.LibSolver, cu.LibNVRTC} {
		for _, s := range cu.SymbolNames(lib) {
			fmt.Fprintf(&stubs, "__attribute__((weak)) int %s(void) { return 801; }\n", strings.TrimSuffix(s, "?"))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stubs.c"), []byte(stubs.String()), 0o644); err != nil {
		return "", err
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	lib := filepath.Join(dir, "libfakecuda.so.1")
	cmd := exec.Command(compiler, "-shared", "-fPIC", "-O1", "-I", abs(filepath.Dir(hdr)), "-o", lib, abs(src), "stubs.c", "-lm")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the fake: %v\n%s", err, out)
	}
	return lib, nil
}

// need skips a test that runs the driver where there is neither a GPU nor
// the fake.
func need(t testing.TB) {
	t.Helper()
	if backend == "" {
		t.Skip(noBackend)
	}
}

// needGPU skips a test that needs a real GPU, with Probe's reason.
func needGPU(t testing.TB) {
	t.Helper()
	if backend != "gpu" {
		_, err := cu.Probe(cu.Config{DriverNames: cu.DefaultDriverNames})
		t.Skipf("needs a real GPU: %v", err)
	}
}

var (
	pluginOnce sync.Once
	pluginBin  string
	pluginSkip string
)

// pluginPath is the driver-cuda binary for plugin-process tests: the one
// EnvTestPlugin names, or one built with go, or a skip saying why not.
func pluginPath(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		if p := os.Getenv(EnvTestPlugin); p != "" {
			pluginBin = p
			return
		}
		if _, err := exec.LookPath("go"); err != nil {
			pluginSkip = fmt.Sprintf("no driver-cuda binary: set %s to one (no go on PATH to build it)", EnvTestPlugin)
			return
		}
		out := filepath.Join(tmpDir, "driver-cuda")
		if b, err := exec.Command("go", "build", "-o", out, "github.com/starpu-go/starpu/plugins/driver-cuda").CombinedOutput(); err != nil {
			pluginSkip = fmt.Sprintf("build driver-cuda: %v\n%s", err, b)
			return
		}
		pluginBin = out
	})
	if pluginSkip != "" {
		t.Skip(pluginSkip)
	}
	return pluginBin
}

// inProcess returns a driver in this process, with env set for the test.
var inProcess = drivertest.InProcess(func(a *shm.Arena) driver.Driver {
	return New(a, hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}))
})

// launch starts the driver as a plugin process, as the runtime does.
func launch(t testing.TB, a *shm.Arena, env []string) driver.Driver {
	t.Helper()
	return drivertest.StartPlugin(t, pluginPath(t), a, env...)
}

// mode is one way of running the driver.
type mode struct {
	name  string
	start drivertest.Starter
}

var modes = []mode{{"in-process", inProcess}, {"plugin", launch}}

// startRig starts the driver with one worker on unit 0 and returns it.
func startRig(t testing.TB, m mode, env ...string) *drivertest.Worker {
	t.Helper()
	need(t)
	r := drivertest.Start(t, m.start, drivertest.Env(env...), drivertest.Timeout(time.Minute))
	return r.W(0)
}

// vec describes a vector on the worker's GPU, node 1.
func vec(buf, n uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return drivertest.Vec(1, buf, n, elem, m)
}

// mat describes a matrix on the worker's GPU, node 1.
func mat(buf, nx, ny, ld uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return drivertest.Mat(1, buf, nx, ny, ld, elem, m)
}
