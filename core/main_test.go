package core_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
)

// pluginDir holds the real plugins (driver-cpu, sched-ws, sched-dmda,
// sched-eager) built for the tests; crashyDir holds sched-ws and the
// crash-test driver as driver-cpu; openclDir the real plugins and
// driver-opencl.
var pluginDir, crashyDir, openclDir string

// modelDir keeps the tests' performance and bus models away from $HOME;
// brokenDir holds the real plugins and a device driver that cannot start.
var modelDir, brokenDir string

func TestMain(m *testing.M) {
	// When the runtime starts this test binary again as its own CPU
	// driver (plugin_kernelhost_test.go), it serves these and exits.
	if os.Getenv("CORE_TEST_NOISY_HOST") != "" && os.Getenv(core.EnvKernelHost) != "" {
		fmt.Println("=== RUN   a line before HostKernels") // as `go test -v` prints
	}
	if os.Getenv("CORE_TEST_EMPTY_HOST") != "" {
		core.HostKernels() // a host whose main reached Init without the kernels
	}
	core.HostKernels(hostedKernels()...)
	if os.Getenv("CORE_TEST_CHILD") != "" {
		os.Exit(childRuntime())
	}
	if os.Getenv("CORE_TEST_WATCHDOG") != "" {
		os.Exit(watchdogChild())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "starpu-core-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	pluginDir = filepath.Join(tmp, "plugins")
	crashyDir = filepath.Join(tmp, "crashy")
	openclDir = filepath.Join(tmp, "opencl")
	modelDir = filepath.Join(tmp, "models")
	brokenDir = filepath.Join(tmp, "broken")
	builds := []struct{ out, pkg string }{
		{filepath.Join(pluginDir, "driver-cpu"), "../plugins/driver-cpu"},
		{filepath.Join(pluginDir, "sched-ws"), "../plugins/sched-ws"},
		{filepath.Join(pluginDir, "iface-csr"), "../plugins/iface-csr"},
		{filepath.Join(pluginDir, "sched-dmda"), "../plugins/sched-dmda"},
		{filepath.Join(pluginDir, "sched-eager"), "../examples/sched-eager"},
		{filepath.Join(crashyDir, "driver-cpu"), "./testdata/driver-crashy"},
		{filepath.Join(crashyDir, "sched-ws"), "../plugins/sched-ws"},
		{filepath.Join(crashyDir, "sched-crashy"), "./testdata/sched-crashy"},
		{filepath.Join(openclDir, "driver-cpu"), "../plugins/driver-cpu"},
		{filepath.Join(openclDir, "sched-ws"), "../plugins/sched-ws"},
		{filepath.Join(openclDir, "driver-opencl"), "../plugins/driver-opencl"},
		{filepath.Join(tmp, "broken", "driver-cpu"), "../plugins/driver-cpu"},
		{filepath.Join(tmp, "broken", "sched-ws"), "../plugins/sched-ws"},
		{filepath.Join(tmp, "broken", "driver-broken"), "./testdata/driver-crashy"},
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", b.pkg, err)
			return 1
		}
	}
	return m.Run()
}

// testConfig is a configuration over the test plugins with two CPU workers.
func testConfig(dir string) *config.Config {
	c := config.Default()
	c.PluginDir = dir
	c.NCPU = 2
	c.ArenaSize = 1 << 30
	c.SpinIters = 200
	c.ModelDir = modelDir
	return c
}
