// Package launch builds and starts plugin binaries for the plugin kits'
// tests (ifacetest, schedtest), as the runtime starts them: go-plugin's
// handshake over gRPC, the arena as file descriptor base.ArenaFD, killed
// with the test.
package launch

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
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Build compiles the plugin main package at pkg into dir/<kind>-<name>,
// the file name the runtime selects it by, and returns its path.
func Build(t testing.TB, pkg, dir string, kind base.Kind, name string) string {
	t.Helper()
	out := filepath.Join(dir, string(kind)+"-"+name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Start launches the plugin binary at path on arena a and dispenses its
// kind, served through p (the kind's go-plugin adapter). It returns the
// dispensed value, the client and the command; the process is killed when
// the test ends. log names the kit in the plugin's log lines. env
// ("KEY=value") is added to the test's environment for the plugin, later
// entries winning, so that a test sets the child's variables without
// changing its own.
func Start(t testing.TB, path string, a *shm.Arena, kind base.Kind, p plugin.Plugin, log string, env ...string) (any, *plugin.Client, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(path)
	cmd.ExtraFiles = []*os.File{a.File()} // fd 3 == base.ArenaFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// go-plugin appends the host's environment after cmd.Env unless told
	// not to, and the last of duplicate keys wins: the host's values would
	// override env. So the host's come first here, and go-plugin adds
	// only its own variables.
	cmd.Env = append(os.Environ(), env...)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{base.APIVersion: {string(kind): p}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: log, Level: hclog.Warn, Output: os.Stderr}),
		StartTimeout:     20 * time.Second,
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	raw, err := rpc.Dispense(string(kind))
	if err != nil {
		t.Fatalf("dispense %s: %v", path, err)
	}
	return raw, client, cmd
}
