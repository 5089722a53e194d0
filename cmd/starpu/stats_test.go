package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStatsFlag: --stats prints the worker and bus summaries at the end of
// the run (here to the files $STARPU_*_STATS_FILE name); without it
// nothing is printed.
func TestStatsFlag(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		want  bool
	}{
		{"without", nil, false},
		{"with", []string{"--stats"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			workers, bus := filepath.Join(dir, "workers.txt"), filepath.Join(dir, "bus.txt")
			t.Setenv("STARPU_WORKER_STATS_FILE", workers)
			t.Setenv("STARPU_BUS_STATS_FILE", bus)
			kv := lastLine(t, append([]string{"run", "vector-scal", "--size", "100000", "--nparts", "8"}, c.flags...)...)
			if kv["verified"] != "true" {
				t.Fatalf("run vector-scal: %v", kv)
			}
			for _, f := range []struct{ path, want string }{
				{workers, "Worker stats:"},
				{workers, "worker 0 (cpu"},
				{workers, "worker 1 (cpu"},
				{bus, "Data transfer stats:"},
			} {
				b, err := os.ReadFile(f.path)
				switch {
				case !c.want && !os.IsNotExist(err):
					t.Errorf("%s written without --stats (%v): %s", f.path, err, b)
				case c.want && err != nil:
					t.Errorf("--stats: %v", err)
				case c.want && !strings.Contains(string(b), f.want):
					t.Errorf("--stats: %s lacks %q:\n%s", filepath.Base(f.path), f.want, b)
				}
			}
			if !c.want {
				return
			}
			// The workers' task counts add up to the run's 8 tasks.
			b, _ := os.ReadFile(workers)
			n := 0
			for _, m := range regexp.MustCompile(`(\d+) task\(s\)`).FindAllStringSubmatch(string(b), -1) {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
			if n != 8 {
				t.Errorf("--stats: the workers ran %d tasks, want 8:\n%s", n, b)
			}
		})
	}
}

// TestDashboardFlag: --dashboard serves while the command runs; a bad
// address or a port in use is an error naming it.
func TestDashboardFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		addr, wantErr string
	}{
		{"127.0.0.1:0", ""},
		{"127.0.0.1", `dashboard address "127.0.0.1"`},
		{busy.Addr().String(), "address already in use"},
	} {
		t.Run(c.addr, func(t *testing.T) {
			args := []string{"bench", "overhead", "--tasks", "500", "--ncpu", "1", "--plugin-dir", pluginDir, "--dashboard", c.addr}
			var out bytes.Buffer
			err := run(context.Background(), args, &out)
			if c.wantErr == "" {
				if err != nil || !strings.Contains(out.String(), "per_task_us=") {
					t.Fatalf("starpu %s: %v\n%s", strings.Join(args, " "), err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("starpu %s: %v; want an error with %q", strings.Join(args, " "), err, c.wantErr)
			}
		})
	}
}
