package main

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/internal/mpirun"
)

// reference is the program's result computed serially here.
func reference() float64 {
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i % 100)
	}
	for range sweeps {
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

// TestStencilMPI runs the example as a user would, under mpirun with 2
// and 4 ranks, with only a scheduler on the plugin path (the program is
// its own CPU driver): rank 0 prints x·y, which must be the serial
// computation's, and the other ranks print nothing.
func TestStencilMPI(t *testing.T) {
	if !mpi.Built() {
		t.Skip("built without MPI (nompi tag)")
	}
	if err := mpirun.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for _, b := range [][]string{{"sched-ws", "../../plugins/sched-ws"}, {"stencil-mpi", "."}} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1]).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b[0], err, out)
		}
	}
	want := reference()
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d ranks", np), func(t *testing.T) {
			res, err := mpirun.Run(context.Background(), mpirun.Job{NP: np, Prog: filepath.Join(dir, "stencil-mpi"),
				Env: []string{"STARPU_PLUGIN_PATH=" + dir, "STARPU_NCPU=1"}, Timeout: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.TimedOut || res.ExitErr != nil {
				t.Fatalf("mpirun: timed out %v, %v\n%s", res.TimedOut, res.ExitErr, res.Output)
			}
			var got float64
			var ranks int
			out := strings.TrimSpace(res.Ranks[0].Output)
			if _, err := fmt.Sscanf(out, "x·y = %g (%d ranks)", &got, &ranks); err != nil {
				t.Fatalf("rank 0's output %q: %v", out, err)
			}
			if ranks != np || math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Errorf("x·y = %.10g on %d ranks, want %.10g on %d", got, ranks, want, np)
			}
			for _, rr := range res.Ranks[1:] {
				if rr.Output != "" {
					t.Errorf("rank %d printed %q; only rank 0 should", rr.Rank, rr.Output)
				}
			}
		})
	}
}
