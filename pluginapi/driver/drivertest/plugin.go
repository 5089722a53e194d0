package drivertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/internal/launch"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Starter starts the driver under test on the rig's arena, with env
// ("KEY=value") set for it.
type Starter func(t testing.TB, a *shm.Arena, env []string) driver.Driver

// InProcess starts the driver newDriver returns, in the test's process.
// The environment is set for the whole test (t.Setenv, so not in parallel
// tests) before newDriver runs: drivers read it in their constructor or
// in Fingerprint.
func InProcess(newDriver func(a *shm.Arena) driver.Driver) Starter {
	return func(t testing.TB, a *shm.Arena, env []string) driver.Driver {
		t.Helper()
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		return newDriver(a)
	}
}

// Plugin starts the driver plugin binary at path as a plugin process, as
// StartPlugin does.
func Plugin(path string) Starter {
	return func(t testing.TB, a *shm.Arena, env []string) driver.Driver {
		t.Helper()
		return StartPlugin(t, path, a, env...)
	}
}

// Build compiles the driver plugin main package at pkg into
// dir/driver-<name>, the file name the runtime selects it by, and returns
// its path.
func Build(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	return launch.Build(t, pkg, dir, base.KindDriver, name)
}

// StartPlugin launches the driver plugin binary at path on arena a as the
// runtime does (go-plugin's handshake, the arena as file descriptor
// base.ArenaFD, the Driver contract over gRPC) and returns the Driver it
// serves; the process is killed when the test ends. The child gets the
// test's environment with OPENBLAS_NUM_THREADS=1, as the runtime gives
// every plugin (a worker is one thread), then env, whose entries win.
func StartPlugin(t testing.TB, path string, a *shm.Arena, env ...string) driver.Driver {
	t.Helper()
	env = append([]string{"OPENBLAS_NUM_THREADS=1"}, env...)
	raw, _, _ := launch.Start(t, path, a, base.KindDriver, &driver.Plugin{Name: filepath.Base(path)}, "drivertest", env...)
	d, ok := raw.(driver.Driver)
	if !ok {
		t.Fatalf("%s: dispensed %T, not a driver.Driver", path, raw)
	}
	return d
}

// IsPlugin reports whether this process was started as a plugin by
// StartPlugin (or the runtime): go-plugin's cookie is in its environment.
// A test binary can then serve a driver instead of running tests, which
// spares building a separate plugin binary:
//
//	func TestMain(m *testing.M) {
//		if drivertest.IsPlugin() {
//			mydriver.Serve(extraTestKernels...)
//			return
//		}
//		os.Exit(m.Run())
//	}
//
// with drivertest.Plugin(os.Args[0]) as the Starter.
func IsPlugin() bool {
	return os.Getenv(base.Handshake.MagicCookieKey) == base.Handshake.MagicCookieValue
}
