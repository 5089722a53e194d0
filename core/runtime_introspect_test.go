package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestEngineCPU: the engine's CPU time grows with the tasks it handles,
// and reading it after Shutdown is an error, not a stale figure.
func TestEngineCPU(t *testing.T) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir)})
	if err != nil {
		t.Fatal(err)
	}
	before, err := rt.EngineCPU()
	if err != nil {
		t.Fatal(err)
	}
	empty := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	for range 5000 {
		if err := rt.Submit(&core.Task{Codelet: empty}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	after, err := rt.EngineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("engine CPU time %v after 5000 tasks, %v before", after, before)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if d, err := rt.EngineCPU(); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("EngineCPU after Shutdown = %v, %v; want an error", d, err)
	}
}
