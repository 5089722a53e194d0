package schedtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Build compiles the scheduler plugin main package at pkg into
// dir/sched-<name>, the file name the runtime selects it by, and returns
// its path.
func Build(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, "sched-"+name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
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
	cmd := exec.Command(path)
	cmd.ExtraFiles = []*os.File{a.File()} // fd 3 == base.ArenaFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	label := filepath.Base(path)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{base.APIVersion: {string(base.KindScheduler): &sched.Plugin{Name: label}}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "schedtest", Level: hclog.Warn, Output: os.Stderr}),
		StartTimeout:     20 * time.Second,
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	raw, err := rpc.Dispense(string(base.KindScheduler))
	if err != nil {
		t.Fatalf("dispense %s: %v", path, err)
	}
	s, ok := raw.(sched.Scheduler)
	if !ok {
		t.Fatalf("%s: dispensed %T, not a sched.Scheduler", path, raw)
	}
	return s
}
