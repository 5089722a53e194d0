// Package rttest starts a runtime for the interface plugins' tests, over
// plugins built from this tree: the CPU driver, the work-stealing scheduler
// and the interface plugins a test names, each a real process on a real
// shared-memory arena.
package rttest

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
)

const module = "github.com/starpu-go/starpu/"

// Start builds driver-cpu, sched-ws and the interface plugins ifaces
// (their directories under plugins/: "iface-bcsr") into a temporary plugin
// directory and starts a runtime over them with two CPU workers, its
// performance models in a temporary directory too; the runtime is shut
// down at the test's end.
func Start(t testing.TB, ifaces ...string) *core.Runtime {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator), module + "plugins/driver-cpu", module + "plugins/sched-ws"}
	for _, name := range ifaces {
		args = append(args, module+"plugins/"+name)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("building the plugins: %v\n%s", err, out)
	}
	c := config.Default()
	c.PluginDir = dir
	c.Sched = "ws"
	c.NCPU = 2
	c.ArenaSize = 1 << 28
	c.ModelDir = t.TempDir()
	rt, err := core.Init(context.Background(), core.Options{Config: c})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	return rt
}
