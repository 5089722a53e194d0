package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/internal/mpirun"
)

// kvOf parses the last "starpu cholesky ..." line of out.
func kvOf(out string) map[string]string {
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "starpu cholesky ") {
			line = l
		}
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// TestCholeskyMPI runs run cholesky --mpi on real ranks under mpirun: the
// factor gathered on rank 0 passes the residual check, every rank ran
// tasks, and all the tasks of the graph ran once in all; a grid that does
// not match the job fails on every rank with an error naming both; and
// without mpirun, it runs as a job of one rank.
func TestCholeskyMPI(t *testing.T) {
	if !mpi.Built() {
		t.Skip("built without MPI (nompi tag)")
	}
	if err := mpirun.Available(); err != nil {
		t.Skip(err)
	}
	exe := buildCLI(t)
	const nb = 4
	cases := []struct {
		name     string
		np       int
		args     []string
		wantGrid string
		wantErr  string // on every rank; "" for success
	}{
		{name: "2 ranks", np: 2, wantGrid: "2x1"},
		{name: "4 ranks", np: 4, wantGrid: "2x2"},
		{name: "4 ranks in a row, double", np: 4, args: []string{"--grid", "1x4", "--precision", "double"}, wantGrid: "1x4"},
		{name: "grid of another job", np: 2, args: []string{"--grid", "2x2"}, wantErr: "--grid 2x2 has 4 ranks, the job has 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "cholesky", "--mpi", "--size", "256", "--nblocks", strconv.Itoa(nb),
				"--ncpu", "1", "--plugin-dir", pluginDir}, tc.args...)
			res, err := mpirun.Run(context.Background(), mpirun.Job{NP: tc.np, Prog: exe, Args: args, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.TimedOut {
				t.Fatalf("timed out:\n%s", res.Output)
			}
			if tc.wantErr != "" {
				if res.ExitErr == nil {
					t.Fatalf("mpirun succeeded, want every rank to fail with %q:\n%s", tc.wantErr, res.Output)
				}
				for _, rr := range res.Ranks {
					if !strings.Contains(rr.Output, tc.wantErr) {
						t.Errorf("rank %d said %q, want %q", rr.Rank, rr.Output, tc.wantErr)
					}
				}
				return
			}
			if res.ExitErr != nil {
				t.Fatalf("mpirun: %v\n%s", res.ExitErr, res.Output)
			}
			kv := kvOf(res.Ranks[0].Output)
			t.Logf("rank 0:\n%s", res.Ranks[0].Output)
			for k, want := range map[string]string{"verified": "true", "ranks": strconv.Itoa(tc.np), "grid": tc.wantGrid} {
				if kv[k] != want {
					t.Errorf("%s=%q, want %q", k, kv[k], want)
				}
			}
			var sum int
			for r := 0; r < tc.np; r++ {
				n, err := strconv.Atoi(kv[fmt.Sprintf("rank%d_tasks", r)])
				if err != nil || n <= 0 {
					t.Errorf("rank%d_tasks=%q: every rank owns tiles and should run tasks", r, kv[fmt.Sprintf("rank%d_tasks", r)])
				}
				sum += n
			}
			// potrf, trsm, syrk and gemm tasks of nb x nb tiles.
			if want := nb * (nb + 1) * (nb + 2) / 6; sum != want {
				t.Errorf("the ranks ran %d tasks in all, the graph has %d", sum, want)
			}
			for _, rr := range res.Ranks[1:] {
				if strings.Contains(rr.Output, "starpu cholesky") {
					t.Errorf("rank %d printed a result; only rank 0 should:\n%s", rr.Rank, rr.Output)
				}
			}
		})
	}
	// Without mpirun, MPI's singleton start makes a job of one rank.
	t.Run("1 rank without mpirun", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe, "run", "cholesky", "--mpi", "--size", "128", "--nblocks", "2", "--ncpu", "1", "--plugin-dir", pluginDir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		kv := kvOf(out.String())
		if kv["verified"] != "true" || kv["ranks"] != "1" || kv["rank0_tasks"] != "4" {
			t.Errorf("verified=%s ranks=%s rank0_tasks=%s, want true, 1 and 4:\n%s", kv["verified"], kv["ranks"], kv["rank0_tasks"], out.String())
		}
	})
}

// TestCholeskyMPIFlags checks the command lines refused before MPI starts.
func TestCholeskyMPIFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--grid", "2x2"}, "--grid needs --mpi"},
		{[]string{"--mpi", "--grid", "2"}, `--grid "2": want PxQ`},
		{[]string{"--mpi", "--grid", "0x2"}, `--grid "0x2": want PxQ`},
		{[]string{"--mpi", "--layout", "partition"}, "--layout partition with --mpi"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"run", "cholesky", "--size", "64", "--nblocks", "2"}, tc.args...), &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if !errors.As(err, new(usageError)) {
				t.Errorf("err = %v is not a usage error", err)
			}
		})
	}
}
