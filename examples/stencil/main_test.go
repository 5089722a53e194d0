package main

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// reference is the program's result computed serially here.
func reference() float64 {
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i % 100)
	}
	for s := 0; s < sweeps; s++ {
		for i := range x {
			prev, next := x[(i+n-1)%n], x[(i+1)%n]
			y[i] = (prev + x[i] + next) / 3
		}
		x, y = y, x
	}
	var sum float64
	for i := range x {
		y[i] += 2 * x[i]
		sum += float64(x[i]) * float64(y[i])
	}
	return sum
}

// TestStencil runs the example as a user would, with only a scheduler on
// the plugin path: the program is its own CPU driver, hosting its smooth
// kernel and the standard BLAS library.
func TestStencil(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "sched-ws"), "../../plugins/sched-ws").CombinedOutput(); err != nil {
		t.Fatalf("build sched-ws: %v\n%s", err, out)
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Env = append(cmd.Environ(), "STARPU_PLUGIN_PATH="+dir, "STARPU_NCPU=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example failed: %v\n%s", err, out)
	}
	var got float64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "x·y = %g", &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if want := reference(); math.Abs(got-want) > 1e-4*math.Abs(want) {
		t.Fatalf("x·y = %g, want %g", got, want)
	}
}
