package schedtest

import (
	"path/filepath"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/internal/launch"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Build compiles the scheduler plugin main package at pkg into
// dir/sched-<name>, the file name the runtime selects it by, and returns
// its path.
func Build(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	return launch.Build(t, pkg, dir, base.KindScheduler, name)
}

// RunPlugin runs the conformance scenarios that go through the rings on the
// plugin binary at path, across the process boundary: each scenario starts
// the binary as the runtime does (go-plugin's handshake, the arena as file
// descriptor base.ArenaFD, the Scheduler contract over gRPC), configures
// it with cfg when cfg is not nil (checked against the schema the plugin
// reports, as the runtime checks a config block), and drives it through
// its rings. The scenarios that call a policy's hooks directly need the
// policy in process: Run has them.
func RunPlugin(t *testing.T, path string, cfg base.Config, opts ...Option) {
	fresh := func() subject {
		return subject{start: func(t *testing.T, a *shm.Arena) sched.Scheduler {
			s := Start(t, path, a)
			if cfg != nil {
				schema, err := s.ConfigSchema(t.Context())
				if err != nil {
					t.Fatalf("%s: config schema: %v", path, err)
				}
				if err := schema.Validate(cfg); err != nil {
					t.Fatalf("%s: config %v: %v", path, cfg, err)
				}
				if err := s.SetConfig(t.Context(), cfg); err != nil {
					t.Fatalf("%s: set config %v: %v", path, cfg, err)
				}
			}
			return s
		}}
	}
	run(t, fresh, opts)
}

// Start launches the scheduler plugin binary at path on arena a as the
// runtime does and returns the Scheduler it serves, which the test drives
// as the core would; the process is killed when the test ends.
func Start(t testing.TB, path string, a *shm.Arena) sched.Scheduler {
	t.Helper()
	raw, _, _ := launch.Start(t, path, a, base.KindScheduler, &sched.Plugin{Name: filepath.Base(path)}, "schedtest")
	s, ok := raw.(sched.Scheduler)
	if !ok {
		t.Fatalf("%s: dispensed %T, not a sched.Scheduler", path, raw)
	}
	return s
}
