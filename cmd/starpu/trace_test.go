package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run traced by STARPU_TRACE alone, with no flag, reads back through
// every trace subcommand.
func TestTraceCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.trace")
	t.Setenv("STARPU_TRACE", file)
	lastLine(t, "run", "cholesky", "--size", "256", "--nblocks", "4")
	os.Unsetenv("STARPU_TRACE") // the trace commands start no runtime anyway
	for _, c := range []struct {
		args   []string
		out    string   // the file written, "" for stdout
		holds  []string // what the output holds
		stdout string   // what stdout holds
	}{
		{args: []string{"summary", file}, holds: []string{"native format, complete", "tasks: 20, ran on workers: 20", "critical path:", "parallel efficiency:", "potrf_f32", "gemm_f32",
			"fetching", "scheduling", "sleeping", "idle", "plugin start at", "driver-cpu (pid "}},
		{args: []string{"view", file, "-o", filepath.Join(dir, "g.svg")}, out: "g.svg", holds: []string{"<svg", "potrf_f32", "critical path"}, stdout: "wrote " + filepath.Join(dir, "g.svg")},
		{args: []string{"view", "-o", filepath.Join(dir, "g.html"), file}, out: "g.html", holds: []string{"<!DOCTYPE html>", "<svg", "<pre>", "<script>"}},
		{args: []string{"view", file}, out: "run.html", holds: []string{"<svg"}}, // beside the trace by default
		{args: []string{"dot", file, "-o", filepath.Join(dir, "dag.dot")}, out: "dag.dot", holds: []string{"digraph G {", `label="trsm_f32"`, "->"}},
		{args: []string{"dot", file}, out: "run.dot", holds: []string{"digraph G {"}}, // every output beside the trace by default
		{args: []string{"rec", file}, out: "run.rec", holds: []string{"Name: syrk_f32\n"}},
		{args: []string{"paje", file}, out: "run.paje", holds: []string{"%EventDef\tPajeDefineContainerType\t1\n"}},
		{args: []string{"rec", file, "-o", "-"}, holds: []string{"Name: syrk_f32\n", "DependsOn: ", "Modes: R RW\n", "\nFootprints: ", "MPIRank: 0\n\n"}},
		{args: []string{"json", file}, out: "run.json", holds: []string{`{"traceEvents":[`, `"name":"potrf_f32","cat":"task","ph":"X"`, `"complete":true`}, stdout: "wrote " + filepath.Join(dir, "run.json")},
		{args: []string{"perfetto", file}, out: "run.pftrace", holds: []string{"starpu workers", "potrf_f32", "scheduling"}, stdout: "wrote " + filepath.Join(dir, "run.pftrace")},
		{args: []string{"paje", file, "-o", filepath.Join(dir, "paje.trace")}, out: "paje.trace", holds: []string{"%EventDef\tPajeDefineContainerType\t1\n", "\"potrf_f32\"", "\tS\tcl0\n", "\tS\tSc\n", "\tSl\tS\tSleeping\t"}},
	} {
		t.Run(strings.Join(c.args[:1], " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(context.Background(), append([]string{"trace"}, c.args...), &stdout, &stderr); code != 0 {
				t.Fatalf("exit status %d: %s", code, stderr.String())
			}
			got := stdout.String()
			if c.out != "" {
				b, err := os.ReadFile(filepath.Join(dir, c.out))
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
				if !strings.Contains(stdout.String(), c.stdout) {
					t.Errorf("stdout %q lacks %q", stdout.String(), c.stdout)
				}
			}
			for _, w := range c.holds {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%.2000s", w, got)
				}
			}
		})
	}
}

// The trace commands' usage errors and failures.
func TestTraceCommandErrors(t *testing.T) {
	dir := t.TempDir()
	notTrace := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notTrace, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mpi.rank0.trace"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trace"}, 2, "trace: which subcommand?"},
		{[]string{"trace", "replay", "f"}, 2, `trace: unknown subcommand "replay"`},
		{[]string{"trace", "summary"}, 2, "trace summary: want one trace file"},
		{[]string{"trace", "summary", "a", "b"}, 2, "trace summary: want one trace file"},
		{[]string{"trace", "summary", "f", "-o", "x"}, 2, "trace summary takes no -o: it prints to stdout"},
		{[]string{"trace", "summary", "f", "--ncpu", "2"}, 2, "trace summary takes no --ncpu"},
		{[]string{"trace", "view", notTrace, "-o", "x.png"}, 1, "neither a native trace"},
		{[]string{"trace", "summary", filepath.Join(dir, "missing.trace")}, 1, "no such file"},
		{[]string{"trace", "summary", notTrace}, 1, "neither a native trace"},
		{[]string{"trace", "json", notTrace, "-o", "-"}, 1, "not a native trace"},
		{[]string{"trace", "json", filepath.Join(dir, "x.json")}, 2, "would overwrite its input"},
		{[]string{"trace", "paje", filepath.Join(dir, "paje.trace"), "-o", filepath.Join(dir, ".", "paje.trace")}, 2, "trace paje: " + filepath.Join(dir, "paje.trace") + " would overwrite its input"},
		{[]string{"trace", "perfetto", notTrace, "-o", filepath.Join(dir, "x.pftrace")}, 1, "neither a native trace"},
		// A multi-rank trace by its base name: the converters stream one
		// file and say so.
		{[]string{"trace", "json", filepath.Join(dir, "mpi.trace")}, 1, "is the trace of an MPI run, one file per rank (" + filepath.Join(dir, "mpi.rank0.trace") + "): convert each rank's file"},
		{[]string{"trace", "perfetto", filepath.Join(dir, "mpi.trace")}, 1, "is the trace of an MPI run"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(context.Background(), c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit status %d, stderr %q; want %d and %q", code, stderr.String(), c.code, c.want)
			}
		})
	}
	// A picture format view does not know.
	file := filepath.Join(dir, "t.json")
	if err := os.WriteFile(file, []byte(`{"traceEvents":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := cli(context.Background(), []string{"trace", "view", file, "-o", "x.png"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "want an .svg or .html file") {
		t.Errorf("view -o x.png: exit status %d, stderr %q", code, stderr.String())
	}
}

// --trace names the file of a bad path in the error, before the run.
func TestTraceFlagBadPath(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "missing", "t.trace")
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "vector-scal", "--size", "1000", "--trace", bad, "--plugin-dir", pluginDir}, &out)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("run with --trace %s: %v; want an error naming it", bad, err)
	}
}
