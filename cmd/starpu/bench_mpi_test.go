package main

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/internal/mpirun"
)

// TestBenchMPI runs bench mpi on two real ranks over small sizes: rank 0
// prints a row per size and a kv line of finite, positive figures, rank 1
// prints nothing; a job of one rank, or none at all (no mpirun), fails
// with an error saying it needs two; bad flags are usage errors.
func TestBenchMPI(t *testing.T) {
	t.Run("flags", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--min-size", "0"}, "--min-size 0 is out of range"},
			{[]string{"--min-size", "64", "--max-size", "8"}, "--max-size 8 is out of range (64 to"},
			{[]string{"--rounds", "0"}, "--rounds 0 is out of range"},
			{[]string{"--sched", "ws"}, "it runs no task"},
		} {
			err := run(context.Background(), append([]string{"bench", "mpi"}, tc.args...), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("bench mpi %v: %v, want an error saying %q", tc.args, err, tc.want)
			}
		}
	})
	if !mpi.Built() {
		t.Skip("built without MPI (nompi tag)")
	}
	t.Run("without mpirun", func(t *testing.T) {
		err := run(context.Background(), []string{"bench", "mpi", "--plugin-dir", pluginDir}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "not started by mpirun") || !strings.Contains(err.Error(), "mpirun -np 2") {
			t.Fatalf("bench mpi without mpirun: %v, want an error asking for mpirun -np 2", err)
		}
	})
	if err := mpirun.Available(); err != nil {
		t.Skip(err)
	}
	exe := buildCLI(t)
	args := []string{"bench", "mpi", "--min-size", "8", "--max-size", "4096", "--rounds", "1", "--iters", "20", "--ncpu", "1", "--plugin-dir", pluginDir}
	t.Run("1 rank", func(t *testing.T) {
		res, err := mpirun.Run(context.Background(), mpirun.Job{NP: 1, Prog: exe, Args: args, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitErr == nil || !strings.Contains(res.Ranks[0].Output, "the job has 1 ranks, the ping-pong needs 2") {
			t.Fatalf("a job of 1 rank: %v, want an error saying it needs 2:\n%s", res.ExitErr, res.Output)
		}
	})
	t.Run("2 ranks", func(t *testing.T) {
		res, err := mpirun.Run(context.Background(), mpirun.Job{NP: 2, Prog: exe, Args: args, Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOut || res.ExitErr != nil {
			t.Fatalf("mpirun: timed out %v, %v\n%s", res.TimedOut, res.ExitErr, res.Output)
		}
		out := res.Ranks[0].Output
		t.Logf("rank 0:\n%s", out)
		if o := res.Ranks[1].Output; strings.Contains(o, "starpu mpi") || strings.Contains(o, "SIZE") {
			t.Errorf("rank 1 printed results; only rank 0 should:\n%s", o)
		}
		// One row per size: 8, 32, 128, 512, 2048, then 4096.
		var sizes []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 6 && f[0] != "SIZE" {
				sizes = append(sizes, f[0])
			}
		}
		if got := strings.Join(sizes, " "); got != "8 32 128 512 2048 4096" {
			t.Errorf("rows for sizes %q, want 8 32 128 512 2048 4096", got)
		}
		kv := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "starpu mpi ") {
				for _, f := range strings.Fields(l)[2:] {
					k, v, _ := strings.Cut(f, "=")
					kv[k] = v
				}
			}
		}
		if kv["min_size"] != "8" || kv["max_size"] != "4096" || kv["ranks"] != "2" {
			t.Errorf("kv line %v: want min_size=8 max_size=4096 ranks=2", kv)
		}
		for _, k := range []string{"lat_runtime_us", "lat_raw_us", "lat_ratio", "bw_runtime_gbps", "bw_raw_gbps", "bw_ratio"} {
			v, err := strconv.ParseFloat(kv[k], 64)
			if err != nil || v <= 0 || math.IsInf(v, 0) {
				t.Errorf("%s=%q, want a positive finite number", k, kv[k])
			}
		}
		// 8 bytes one way take well under a second, even on loaded cores.
		if v, _ := strconv.ParseFloat(kv["lat_raw_us"], 64); v > 1e6 {
			t.Errorf("lat_raw_us=%v: more than a second one way", v)
		}
	})
}
