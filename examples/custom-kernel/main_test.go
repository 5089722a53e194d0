package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCustomKernel builds the custom driver and the work-stealing scheduler
// into a plugin directory and runs the example against them.
func TestCustomKernel(t *testing.T) {
	dir := t.TempDir()
	for _, b := range [][2]string{{"driver-cpu", "./driver-cpu"}, {"sched-ws", "../../plugins/sched-ws"}} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1]).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b[1], err, out)
		}
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Env = append(cmd.Environ(), "STARPU_PLUGIN_DIR="+dir, "STARPU_NCPU=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example failed: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, "[-1 -0.5 0 0.5 1]") {
		t.Fatalf("output %q, want the clamped vector [-1 -0.5 0 0.5 1]", got)
	}
}
