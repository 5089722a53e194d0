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
	"sort"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: starpu <command> [flags]

commands:
  machine                  plugins found, workers and memory nodes
  run vector-scal          scale a vector on the workers and verify it
  run cholesky             tiled Cholesky factorisation, verified by a residual check
  run spmv                 sparse matrix-vector product by CSR row blocks, against a plain Go loop
  run cg                   conjugate gradient on a sparse SPD matrix, verified by its residual
  bench overhead           per-task overhead: a dependency chain (StarPU's tasks_overhead),
                           or independent tasks with --independent
  bench bandwidth          RAM <-> device transfer bandwidth and latency (saves the bus model)
  bench sgemm              OpenBLAS's own sgemm GFlop/s, the reference for the Cholesky figures
  bench soak               a long mixed workload while memory and goroutines are sampled:
                           tells whether they stay flat (--duration, --max-growth-pct)
  perfmodel list           performance models stored for this host
  perfmodel show NAME      a model's history per architecture and its regression
  perfmodel plot NAME      an SVG of duration against size (-o FILE.svg)

Run "starpu <command> -h" for the flags of a command.
`

// interruptGrace is how long the tool waits, after Ctrl-C or SIGTERM, for
// the command to stop and the runtime to shut down before it exits anyway
// (the plugin processes die with it: they get SIGKILL when the core exits).
const interruptGrace = 5 * time.Second

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
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "starpu:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "machine":
		return machine(ctx, args[1:], out)
	case "run":
		if len(args) < 2 {
			return fmt.Errorf("run: which workload? (vector-scal, cholesky, spmv, cg)")
		}
		switch args[1] {
		case "vector-scal":
			return vectorScal(ctx, args[2:], out)
		case "cholesky":
			return cholesky(ctx, args[2:], out)
		case "spmv":
			return spmvRun(ctx, args[2:], out)
		case "cg":
			return cgRun(ctx, args[2:], out)
		}
		return fmt.Errorf("run: unknown workload %q (vector-scal, cholesky, spmv, cg)", args[1])
	case "bench":
		if len(args) < 2 {
			return fmt.Errorf("bench: which benchmark? (overhead, bandwidth, sgemm, soak)")
		}
		switch args[1] {
		case "overhead":
			return overhead(ctx, args[2:], out)
		case "bandwidth":
			return bandwidth(ctx, args[2:], out)
		case "sgemm":
			return sgemmBench(ctx, args[2:], out)
		case "soak":
			return soak(ctx, args[2:], out)
		}
		return fmt.Errorf("bench: unknown benchmark %q (overhead, bandwidth, sgemm, soak)", args[1])
	case "perfmodel":
		return perfmodelCmd(args[1:], out)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
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
