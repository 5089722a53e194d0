package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
)

var pluginDir string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "starpu-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginDir = filepath.Join(tmp, "plugins")
	// Models and the bus model go to the test's directory, not $HOME.
	os.Setenv("STARPU_PERF_MODEL_DIR", filepath.Join(tmp, "models"))
	// A fuzzing run (go test -run=^$ -fuzz=...) starts this binary once per
	// fuzz worker, and its targets need no plugin.
	flag.Parse()
	if flag.Lookup("test.fuzz").Value.String() == "" {
		for _, p := range []string{"driver-cpu", "sched-ws", "driver-opencl", "sched-dmda", "iface-csr", "sched-lws", "sched-prio", "sched-random", "sched-heteroprio"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(pluginDir, p), "../../plugins/"+p)
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n", p, err)
				os.Exit(1)
			}
		}
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// lastLine runs the command and parses its closing key=value line.
func lastLine(t *testing.T, args ...string) map[string]string {
	t.Helper()
	return lastLineN(t, 2, args...)
}

// lastLineN runs the command with ncpu CPU workers.
func lastLineN(t *testing.T, ncpu int, args ...string) map[string]string {
	t.Helper()
	return lastLineOf(t, append(args, "--ncpu", fmt.Sprint(ncpu))...)
}

// lastLineOf runs the command with the test's plugins and nothing else
// added, for a command that takes no --ncpu.
func lastLineOf(t *testing.T, args ...string) map[string]string {
	t.Helper()
	var out bytes.Buffer
	args = append(args, "--plugin-dir", pluginDir)
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatalf("starpu %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	kv := map[string]string{}
	for _, f := range strings.Fields(lines[len(lines)-1])[2:] {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	return kv
}

func TestRunWorkloads(t *testing.T) {
	cases := []struct {
		args []string
		want map[string]string
		keys []string
	}{
		{[]string{"run", "vector-scal", "--size", "100000"}, map[string]string{"verified": "true"}, []string{"gflops", "ms"}},
		{[]string{"run", "cholesky", "--size", "512", "--nblocks", "4"}, map[string]string{"verified": "true", "precision": "single"}, []string{"gflops", "residual"}},
		{[]string{"run", "cholesky", "--size", "384", "--nblocks", "6", "--precision", "double"}, map[string]string{"verified": "true", "precision": "double"}, []string{"gflops"}},
		// Both diagonal updates, SSYRK and the GEMM variant, as dmda
		// calibrates them: the factor still checks.
		{[]string{"run", "cholesky", "--size", "512", "--nblocks", "8", "--variants", "--sched", "dmda"}, map[string]string{"verified": "true"}, []string{"gflops"}},
		{[]string{"run", "cholesky", "--size", "384", "--nblocks", "6", "--layout", "async"}, map[string]string{"verified": "true", "layout": "async"}, []string{"gflops"}},
		// Parallel potrf and gemm in the first two steps, on combined
		// workers under dmda: the factor still checks.
		{[]string{"run", "cholesky", "--size", "768", "--nblocks", "3", "--parallel", "2", "--sched", "dmda"}, map[string]string{"verified": "true", "parallel_tasks": "3"}, []string{"team_tasks"}},
		{[]string{"run", "cholesky", "--size", "768", "--nblocks", "3", "--parallel", "3", "--precision", "double", "--sched", "dmda"}, map[string]string{"verified": "true", "parallel_tasks": "4"}, []string{"team_tasks"}},
		// The tile kernels in the driver against the same calls made
		// directly: a ratio for each of the four.
		{[]string{"bench", "kernels", "--size", "384", "--nblocks", "3"}, map[string]string{"size": "384", "nblocks": "3"}, []string{"potrf_f32_ratio", "trsm_f32_ratio", "syrk_f32_ratio", "gemm_f32_ratio", "gemm_f32_driver_us", "gemm_f32_direct_us"}},
		{[]string{"bench", "overhead", "--tasks", "2000", "--rounds", "3"}, map[string]string{"mode": "tags", "buffers": "0", "rounds": "3", "executed": "6000", "submitters": "1"}, []string{"per_task_us", "submit_us", "engine_cpu_us", "workers"}},
		{[]string{"bench", "overhead", "--tasks", "2000", "--buffers", "2"}, map[string]string{"mode": "chain", "buffers": "2", "executed": "2000"}, []string{"per_task_us"}},
		{[]string{"bench", "overhead", "--tasks", "2000", "--independent"}, map[string]string{"mode": "independent", "executed": "2000"}, []string{"per_task_us"}},
		// Several submitters: every task runs, in each mode (a share that
		// does not divide evenly included), and the tags of one round's
		// chains do not collide with the next round's.
		{[]string{"bench", "overhead", "--tasks", "2001", "--submitters", "3", "--rounds", "2"}, map[string]string{"mode": "tags", "submitters": "3", "executed": "4002"}, []string{"per_task_us"}},
		{[]string{"bench", "overhead", "--tasks", "2001", "--submitters", "3", "--buffers", "2"}, map[string]string{"mode": "chain", "submitters": "3", "executed": "2001"}, []string{"per_task_us"}},
		{[]string{"bench", "overhead", "--tasks", "2001", "--submitters", "4", "--independent"}, map[string]string{"mode": "independent", "submitters": "4", "executed": "2001"}, []string{"per_task_us"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			kv := lastLine(t, c.args...)
			for k, v := range c.want {
				if kv[k] != v {
					t.Errorf("%s = %q, want %q (line: %v)", k, kv[k], v, kv)
				}
			}
			for _, k := range c.keys {
				if _, ok := kv[k]; !ok {
					t.Errorf("missing %s= in %v", k, kv)
				}
			}
		})
	}
}

// bench overhead --trace-ab pauses the trace every other round: the
// trace holds the recorded rounds' tasks only, and the cost is reported.
func TestOverheadTraceAB(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ab.trace")
	kv := lastLine(t, "bench", "overhead", "--tasks", "500", "--buffers", "1", "--rounds", "4", "--trace-ab", "--trace", f)
	for _, k := range []string{"paused_us", "recording_us", "trace_cost_ratio"} {
		if v, err := strconv.ParseFloat(kv[k], 64); err != nil || v <= 0 {
			t.Errorf("%s = %q, want a positive number (line: %v)", k, kv[k], kv)
		}
	}
	tr, err := core.ReadTraceFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := tr.Summary(); s.Tasks != 1000 || s.Ran != 1000 {
		t.Fatalf("the trace holds %d tasks (%d ran), want the 2 recorded rounds' 1000", s.Tasks, s.Ran)
	}
}

func TestTraceFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "trace.json")
	lastLine(t, "run", "cholesky", "--size", "256", "--nblocks", "4", "--trace", f)
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string `json:"name"`
			Ph   string `json:"ph"`
			Tid  int    `json:"tid"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	// 4 potrf + 6 trsm + 6 syrk + 4 gemm for 4x4 tiles.
	counts := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" {
			counts[e.Name]++
		}
	}
	want := map[string]int{"potrf_f32": 4, "trsm_f32": 6, "syrk_f32": 6, "gemm_f32": 4}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("trace has %d %s events, want %d (all: %v)", counts[k], k, v, counts)
		}
	}
}

func TestMachine(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"machine", "--plugin-dir", pluginDir, "--ncpu", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"driver-cpu", "sched-ws", "loaded (pid", "workers: 2", "CPU 0", "CPU 1", "RAM", "memfd", "#0 global: policy ws, workers [0 1]",
		"combined workers (parallel tasks): 1", "#2 cpu, 2 workers [0 1] (driver-cpu)"} {
		if !strings.Contains(s, want) {
			t.Errorf("machine output lacks %q:\n%s", want, s)
		}
	}
}

// A bad STARPU_LIMIT_OPENCL_MEM does not stop a runtime whose OpenCL driver
// uses no device (pocl's CPU device is not used without
// STARPU_OPENCL_ON_CPUS): Init succeeds and the driver's note mentions it.
// (It used to fail Init from the driver's fingerprint.)
func TestUnusedOpenCLLimit(t *testing.T) {
	for _, c := range []struct{ limit, want string }{
		{"-1", `STARPU_LIMIT_OPENCL_MEM="-1": must not be negative`},
		{"lots", `STARPU_LIMIT_OPENCL_MEM="lots": want a whole number of MiB`},
	} {
		t.Run(c.limit, func(t *testing.T) {
			t.Setenv("STARPU_OPENCL_ON_CPUS", "0")
			t.Setenv("STARPU_LIMIT_OPENCL_MEM", c.limit)
			var out bytes.Buffer
			if err := run(context.Background(), []string{"machine", "--plugin-dir", pluginDir, "--ncpu", "1"}, &out); err != nil {
				t.Fatal(err)
			}
			if s := out.String(); !strings.Contains(s, "; ignored, as no device uses it: environment variable STARPU_LIMIT_OPENCL_MEM=") || !strings.Contains(s, c.want) {
				t.Fatalf("machine output lacks the ignored limit %q:\n%s", c.want, s)
			}
		})
	}
}

// The sgemm reference prints a positive rate for a product it really ran.
func TestBenchSgemm(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"bench", "sgemm", "--size", "96", "--reps", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.TrimSpace(out.String()))
	var gflops float64
	for _, kv := range f {
		if v, ok := strings.CutPrefix(kv, "gflops="); ok {
			fmt.Sscan(v, &gflops)
		}
	}
	if !(gflops > 0) || !strings.Contains(out.String(), "size=96") {
		t.Fatalf("bench sgemm output:\n%s", out.String())
	}
}

func TestCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"run", "fft"}, "unknown workload"},
		{[]string{"run", "cholesky", "--size", "100", "--nblocks", "3"}, "multiple of nblocks"},
		{[]string{"run", "cholesky", "--precision", "half", "--size", "64", "--nblocks", "2", "--plugin-dir", pluginDir}, "want single or double"},
		{[]string{"run", "vector-scal", "--sched", "nope", "--plugin-dir", pluginDir}, `unknown scheduler "nope"`},
		{[]string{"bench", "overhead", "--independent", "--buffers", "1"}, "take no buffers"},
		{[]string{"bench", "overhead", "--trace-ab", "--rounds", "3"}, "--rounds must be even, not 3"},
		{[]string{"bench", "overhead", "--trace-ab", "--rounds", "2", "--plugin-dir", pluginDir}, "--trace-ab needs a trace file"},
		{[]string{"bench", "sgemm", "--threads", "0"}, "bench sgemm: --threads 0 is out of range (1 to 1024)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			err := run(context.Background(), c.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error = %v, want one containing %q", err, c.msg)
			}
		})
	}
}

// Numeric flags are checked before anything is allocated or started: a
// value beyond what the command can hold is an error naming the flag, not
// an out-of-memory crash.
func TestFlagBounds(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "overhead", "--tasks", "3000000000"}, "bench overhead: --tasks 3000000000 is out of range (1 to 10000000)"},
		{[]string{"bench", "overhead", "--tasks", "0"}, "bench overhead: --tasks 0 is out of range"},
		{[]string{"bench", "overhead", "--buffers", "100000000"}, "bench overhead: --buffers 100000000 is out of range (0 to 1024)"},
		{[]string{"bench", "overhead", "--buffers", "-1"}, "bench overhead: --buffers -1 is out of range"},
		{[]string{"bench", "overhead", "--rounds", "0"}, "bench overhead: --rounds 0 is out of range (1 to 10000)"},
		{[]string{"bench", "overhead", "--tasks", "10", "--submitters", "11"}, "bench overhead: --submitters 11 is out of range (1 to 10)"},
		{[]string{"bench", "overhead", "--submitters", "0"}, "bench overhead: --submitters 0 is out of range (1 to 1024)"},
		{[]string{"run", "vector-scal", "--size", "4000000000"}, "vector-scal: --size 4000000000 is out of range (1 to 1073741824)"},
		{[]string{"run", "vector-scal", "--size", "4000000", "--nparts", "2000000"}, "vector-scal: --nparts 2000000 is out of range (1 to 1048576)"},
		{[]string{"run", "vector-scal", "--factor", "NaN"}, "vector-scal: --factor NaN is not a finite number"},
		{[]string{"run", "cholesky", "--size", "100000", "--nblocks", "10"}, "cholesky: --size 100000 is out of range (1 to 32768)"},
		{[]string{"run", "cholesky", "--size", "4096", "--nblocks", "512"}, "cholesky: --nblocks 512 is out of range (1 to 256)"},
		{[]string{"run", "cholesky", "--size", "4096", "--nblocks", "4", "--parallel", "-1"}, "cholesky: --parallel -1 is out of range (0 to 256)"},
		{[]string{"run", "spmv", "--nblocks", "5000000"}, "spmv: --nblocks 5000000 is out of range (1 to 1048576)"},
		{[]string{"run", "spmv", "--iters", "0"}, "spmv: --iters 0 is out of range (1 to 1000000)"},
		{[]string{"run", "spmv", "--iters", "2000000000"}, "spmv: --iters 2000000000 is out of range"},
		{[]string{"run", "spmv", "--nnz", "2000000000"}, "--nnz 2000000000 is out of range (5 to 268435456)"},
		{[]string{"run", "cg", "--nblocks", "5000"}, "cg: --nblocks 5000 is out of range (1 to 1024)"},
		{[]string{"run", "cg", "--maxiter", "0"}, "cg: --maxiter 0 is out of range"},
		{[]string{"run", "cg", "--tol", "NaN"}, "cg: --tol NaN is out of range (want 0 < tol < 1)"},
		{[]string{"run", "cg", "--tol", "+Inf"}, "cg: --tol +Inf is out of range"},
		{[]string{"bench", "sgemm", "--size", "1000000"}, "bench sgemm: --size 1000000 is out of range (1 to 32768)"},
		{[]string{"bench", "sgemm", "--threads", "100000"}, "bench sgemm: --threads 100000 is out of range (1 to 1024)"},
		{[]string{"bench", "sgemm", "--reps", "-3"}, "bench sgemm: --reps -3 is out of range"},
		{[]string{"bench", "bandwidth", "--size", "10000000000"}, "bench bandwidth: --size 10000000000 is out of range (1 to 1073741824)"},
		{[]string{"bench", "bandwidth", "--reps", "0"}, "bench bandwidth: --reps 0 is out of range"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			// No plugin directory: the flags must be refused before a
			// runtime starts.
			err := run(context.Background(), c.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// With pocl's OpenCL device enabled, the workloads run on a CPU worker and
// an OpenCL worker with its own memory node, and stay verified; the
// bandwidth benchmark measures both directions.
func TestOpenCLWorkloads(t *testing.T) {
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	for _, args := range [][]string{
		{"run", "vector-scal", "--size", "1000000", "--nparts", "16"},
		{"run", "cholesky", "--size", "512", "--nblocks", "4", "--check"},
	} {
		if kv := lastLineN(t, 1, args...); kv["verified"] != "true" {
			t.Errorf("starpu %s: %v", strings.Join(args, " "), kv)
		}
	}
	// Uncalibrated, dmda spreads the tasks over both architectures.
	t.Setenv("STARPU_PERF_MODEL_DIR", t.TempDir())
	t.Setenv("STARPU_SCHED", "dmda")
	kv := lastLineN(t, 1, "run", "vector-scal", "--size", "1000000", "--nparts", "16")
	if kv["verified"] != "true" || kv["cpu_tasks"] == "" || kv["opencl_tasks"] == "" {
		t.Errorf("vector-scal with dmda: %v, want tasks on cpu and opencl", kv)
	}
	// CSR row blocks too: the OpenCL worker gets each block's parts.
	kv = lastLineN(t, 1, "run", "spmv", "--nnz", "20000", "--nblocks", "8", "--iters", "3")
	if kv["verified"] != "true" || kv["cpu_tasks"] == "" || kv["opencl_tasks"] == "" {
		t.Errorf("spmv with dmda: %v, want tasks on cpu and opencl", kv)
	}
	// bench bandwidth takes no --ncpu: the CPU workers take no part in it.
	t.Setenv("STARPU_NCPU", "1")
	kv = lastLineOf(t, "bench", "bandwidth", "--size", "4194304", "--reps", "2")
	for _, k := range []string{"h2d_mbps", "d2h_mbps", "latency_us"} {
		var v float64
		if _, err := fmt.Sscan(kv[k], &v); err != nil || v <= 0 {
			t.Errorf("bench bandwidth: %s = %q, want a positive number", k, kv[k])
		}
	}
	if kv["device"] != "opencl_0" {
		t.Errorf("bench bandwidth measured %q, want opencl_0", kv["device"])
	}
}

// buildCLI builds this command into a temporary directory, for the tests
// that run the real binary (under mpirun, or to signal it).
func buildCLI(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "starpu")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}
