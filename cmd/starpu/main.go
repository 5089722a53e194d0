// Command starpu is the runtime's command-line tool: it shows the machine as
// the runtime sees it, runs the demo workloads and the overhead benchmarks,
// and shows the performance models.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: starpu <command> [flags]

commands:
  version                  the tool's version, its Go release and the plugin API version it speaks
  machine                  plugins found, workers and memory nodes
  run vector-scal          scale a vector on the workers and verify it
  run cholesky             tiled Cholesky factorisation, verified by its residual and backward error;
                           --mpi: over the ranks of an MPI job (mpirun -np N)
  run spmv                 sparse matrix-vector product by CSR row blocks, against a plain Go loop
  run cg                   conjugate gradient on a sparse SPD matrix, verified by its residual
  bench overhead           per-task overhead: a dependency chain (StarPU's tasks_overhead),
                           or independent tasks with --independent
  bench bandwidth          RAM <-> device transfer bandwidth and latency (saves the bus model)
  bench sgemm              OpenBLAS's own sgemm GFlop/s, the reference for the Cholesky figures
  bench kernels            the Cholesky's tile kernels in the CPU driver against the same
                           OpenBLAS calls made directly (--ncpu 1: one kernel at a time)
  bench mpi                ping-pong of a handle between two ranks against raw MPI
                           (mpirun -np 2 starpu bench mpi)
  bench soak               a long mixed workload while memory and goroutines are sampled:
                           tells whether they stay flat (--duration, --max-growth-pct)
  bench faults             a seeded fault campaign: plugins killed or stopped mid-run; every
                           run must verify or fail naming the fault (--runs, --seed)
  sched list               scheduling policies in the plugin directory, with their settings
  perfmodel list           performance models stored for this host
  perfmodel show NAME      a model's history per architecture and its regression
  perfmodel plot NAME      an SVG of duration against size (-o FILE.svg)
  trace summary FILE       a trace's time per worker and codelet, critical path, efficiency
  trace view FILE          a trace as a Gantt chart (-o FILE.svg or FILE.html)
  trace dot FILE           a trace's task graph (FILE.dot); trace rec FILE: StarPU's tasks.rec (FILE.rec)
  trace json FILE          a native trace as Chrome/Perfetto JSON
  trace perfetto FILE      a trace in Perfetto's protobuf format (-o FILE.pftrace)
  trace paje FILE          a trace in StarPU's Paje format, for ViTE and StarVZ (FILE.paje)

Run "starpu <command> -h" (or "starpu help <command>") for the flags of a command.
`

// interruptGrace is how long the tool waits, after Ctrl-C or SIGTERM, for
// the command to stop and the runtime to shut down before it exits anyway
// (the plugin processes die with it: they get SIGKILL when the core exits).
const interruptGrace = 5 * time.Second

// main runs the tool with its exit status: 0, 1 when the command failed, 2
// for a usage error; a Ctrl-C or SIGTERM cancels the command's context, and
// ends the tool if the command does not stop in time.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// A second signal kills at once: the default action is back.
		stop()
		time.Sleep(interruptGrace)
		fmt.Fprintf(os.Stderr, "starpu: interrupted, and the runtime did not stop within %s; exiting\n", interruptGrace)
		os.Exit(130)
	}()
	if code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// run runs the command args asks for, writing its output, or the help it
// was asked for, to out. A usage error (usageError) tells main to exit 2.
func run(ctx context.Context, args []string, out io.Writer) error {
	err := dispatch(ctx, args, out)
	if errors.Is(err, flag.ErrHelp) {
		// The help was asked for and printed: a success.
		return nil
	}
	return err
}

// dispatch finds the command args names and runs it.
func dispatch(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usagef("no command given\n%s", usage)
	}
	switch args[0] {
	case "machine":
		return machine(ctx, args[1:], out)
	case "run":
		if len(args) < 2 {
			return usagef("run: which workload? (vector-scal, cholesky, spmv, cg)")
		}
		switch args[1] {
		case "-h", "-help", "--help":
			fmt.Fprint(out, usage)
			return nil
		case "vector-scal":
			return vectorScal(ctx, args[2:], out)
		case "cholesky":
			return cholesky(ctx, args[2:], out)
		case "spmv":
			return spmvRun(ctx, args[2:], out)
		case "cg":
			return cgRun(ctx, args[2:], out)
		}
		return usagef("run: unknown workload %q (vector-scal, cholesky, spmv, cg)", args[1])
	case "bench":
		if len(args) < 2 {
			return usagef("bench: which benchmark? (overhead, bandwidth, sgemm, kernels, soak, mpi, faults)")
		}
		switch args[1] {
		case "-h", "-help", "--help":
			fmt.Fprint(out, usage)
			return nil
		case "overhead":
			return overhead(ctx, args[2:], out)
		case "bandwidth":
			return bandwidth(ctx, args[2:], out)
		case "sgemm":
			return sgemmBench(ctx, args[2:], out)
		case "kernels":
			return kernelsBench(ctx, args[2:], out)
		case "soak":
			return soak(ctx, args[2:], out)
		case "mpi":
			return benchMPI(ctx, args[2:], out)
		case "faults":
			return faultsBench(ctx, args[2:], out)
		}
		return usagef("bench: unknown benchmark %q (overhead, bandwidth, sgemm, kernels, soak, mpi, faults)", args[1])
	case "sched":
		return schedCmd(ctx, args[1:], out)
	case "perfmodel":
		return perfmodelCmd(args[1:], out)
	case "trace":
		return traceCmd(args[1:], out)
	case "version", "-version", "--version":
		return versionCmd(args[1:], out)
	case "help", "-h", "-help", "--help":
		if args[0] == "help" && len(args) > 1 {
			// "help run cholesky" is "run cholesky -h".
			return dispatch(ctx, slices.Concat(args[1:], []string{"-h"}), out)
		}
		fmt.Fprint(out, usage)
		return nil
	}
	if strings.HasPrefix(args[0], "-") {
		return usagef("unknown flag %s: a command comes first, its flags after it\n%s", args[0], usage)
	}
	return usagef("unknown command %q\n%s", args[0], usage)
}

// kv prints the machine-readable last line: "starpu <what> key=value ...".
func kv(out io.Writer, what string, pairs map[string]any) {
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("starpu " + what)
	for _, k := range keys {
		v := pairs[k]
		if f, ok := v.(float64); ok {
			v = fmt.Sprintf("%.4g", f)
		}
		fmt.Fprintf(&b, " %s=%v", k, v)
	}
	fmt.Fprintln(out, b.String())
}
