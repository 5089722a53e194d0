package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
)

// Upper bounds of the numeric flags. Each keeps what the command allocates
// from one flag within a few GiB, and every product of flags within int
// and the runtime's limits, so that a mistyped value is an error naming the
// flag instead of an out-of-memory crash.
const (
	// maxTasks bounds bench overhead --tasks: the command holds every
	// core.Task in one array, and the runtime keeps about 0.4 to 0.8 KiB per
	// task until it completes (a tag chain completes only once all are
	// submitted): 10 million tasks are about 8 GiB.
	maxTasks = 10_000_000
	// maxBuffers bounds bench overhead --buffers: an Exec message carries
	// 56 bytes per buffer and the dispatch ring's messages stop at 64 KiB.
	maxBuffers = 1024
	// maxVectorSize bounds run vector-scal --size: 4 bytes an element, in
	// the Go slice and again in the arena.
	maxVectorSize = 1 << 30
	// maxParts bounds the handles and tasks of one partition (--nparts,
	// spmv's --nblocks).
	maxParts = 1 << 20
	// maxMatrixOrder bounds the order of the dense matrices of run cholesky
	// and bench sgemm: a 32768 x 32768 matrix is 4 GiB in single precision.
	maxMatrixOrder = 1 << 15
	// maxTiles bounds run cholesky --nblocks: n tiles per dimension make
	// about n^3/6 tasks (2.8 million for 256).
	maxTiles = 256
	// maxCGBlocks bounds run cg --nblocks: each of the n SpMV tasks of an
	// iteration reads the n blocks of p.
	maxCGBlocks = 1024
	// maxIters bounds repetitions and iterations (--iters, --maxiter,
	// --reps).
	maxIters = 1_000_000
	// maxThreads bounds bench sgemm --threads.
	maxThreads = 1024
	// maxTransfer bounds bench bandwidth --size, in bytes.
	maxTransfer = 1 << 30
)

// checkFlag reports v outside [lo, hi] as a usage error of command cmd
// that names the flag.
func checkFlag(cmd, name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return usagef("%s: --%s %d is out of range (%d to %d)", cmd, name, v, lo, hi)
	}
	return nil
}

// checkFlags returns the first error of checks.
func checkFlags(checks ...error) error {
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// runtimeFlags are the flags of the commands that start a runtime; they
// override the config file and the environment.
type runtimeFlags struct {
	cmd       string // the command, for the errors
	config    string
	pluginDir string
	sched     string
	ncpu      optionalInt
	trace     string
	stats     bool
	dashboard string
	progress  *progressLine // on a terminal (trace_progress.go)
}

// rtFlags says which of the runtime flags beyond --config and --plugin-dir
// a command takes: only those that change what it does or reports.
type rtFlags uint8

const (
	// withSched: the command runs tasks, which the policy places.
	withSched rtFlags = 1 << iota
	// withNCPU: the command runs tasks, or reports the workers.
	withNCPU
	// withTrace: the command runs tasks, which --trace, --stats and
	// --dashboard observe.
	withTrace
	// allRuntimeFlags: the command runs tasks on the runtime it starts.
	allRuntimeFlags = withSched | withNCPU | withTrace
)

// register adds every runtime flag to fs, for a command that runs tasks on
// the runtime it starts.
func (f *runtimeFlags) register(fs *flag.FlagSet) { f.registerSome(fs, allRuntimeFlags) }

// registerSome adds --config, --plugin-dir and those of the other runtime
// flags that which names, so that a command refuses a flag that would
// change nothing in what it does.
func (f *runtimeFlags) registerSome(fs *flag.FlagSet, which rtFlags) {
	f.cmd = fs.Name()
	fs.StringVar(&f.config, "config", "", "read the configuration from `FILE` (default $STARPU_CONFIG; none if it is unset)")
	fs.StringVar(&f.pluginDir, "plugin-dir", "", "load the plugins from `DIR` alone (default $STARPU_PLUGIN_DIR, else the config file's plugin_dir, else the search path: $STARPU_PLUGIN_PATH, plugins/ beside this binary, then the installations; see starpu machine)")
	if which&withSched != 0 {
		fs.StringVar(&f.sched, "sched", "", "scheduling `POLICY` (default $STARPU_SCHED, else the config file's sched, else ws: work stealing)")
	}
	if which&withNCPU != 0 {
		fs.Var(&f.ncpu, "ncpu", "`N` CPU workers, 0 for none, -1 for one per core (default $STARPU_NCPU, else the config file's ncpu, else one per core)")
	}
	if which&withTrace != 0 {
		fs.StringVar(&f.trace, "trace", "", "stream a trace of the run to `FILE`: .json is Chrome/Perfetto JSON, any other extension the native format; read it with starpu trace (default $STARPU_TRACE)")
		fs.BoolVar(&f.stats, "stats", false, "print the worker and bus statistics at the end, as STARPU_WORKER_STATS=1 and STARPU_BUS_STATS=1 do (to stderr, or to $STARPU_WORKER_STATS_FILE and $STARPU_BUS_STATS_FILE)")
		fs.StringVar(&f.dashboard, "dashboard", "", "serve the live dashboard on `ADDR` (host:port; port 0 picks one) while the command runs; no authentication: bind it to localhost (default $STARPU_DASHBOARD)")
	}
}

// start loads the configuration, applies the flags and starts a runtime.
func (f *runtimeFlags) start(ctx context.Context) (*core.Runtime, error) {
	if f.ncpu.set && f.ncpu.v < config.DefaultNCPU {
		return nil, usagef("%s: --ncpu %d is out of range (want a number of CPU workers, or -1 for one per core)", f.cmd, f.ncpu.v)
	}
	cfg, err := config.Load(os.Getenv, f.config)
	if err != nil {
		return nil, err
	}
	if f.pluginDir != "" {
		cfg.PluginDir = f.pluginDir
	}
	if f.sched != "" {
		// --sched dmdas selects dmda with sorted = true, as
		// STARPU_SCHED=dmdas does (Load resolved the latter).
		cfg.Sched = f.sched
		cfg.ResolveSchedAliases()
	}
	if f.ncpu.set {
		cfg.NCPU = f.ncpu.v
	}
	opt := core.Options{Config: cfg, TraceFile: f.trace, Dashboard: f.dashboard}
	if f.stats {
		opt.Getenv = withStats(os.Getenv)
	}
	rt, err := core.Init(ctx, opt)
	if err == nil {
		if addr := rt.DashboardAddr(); addr != "" {
			fmt.Fprintf(os.Stderr, "starpu %s: dashboard on http://%s/\n", f.cmd, addr)
		}
		f.startProgress(rt)
	}
	return rt, err
}

// withStats is getenv with STARPU_WORKER_STATS and STARPU_BUS_STATS set to
// 1, which is what --stats means.
func withStats(getenv func(string) string) func(string) string {
	return func(name string) string {
		if name == core.EnvWorkerStats || name == core.EnvBusStats {
			return "1"
		}
		return getenv(name)
	}
}

// finish shuts the runtime down, which completes the trace file.
func (f *runtimeFlags) finish(rt *core.Runtime) error {
	f.progress.Stop()
	return rt.Shutdown()
}
