package main

// bench faults: a seeded fault campaign. Design note: docs/design/plugins.md,
// "The fault campaign".

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// The campaign runs small workloads (a tiled Cholesky in double precision,
// checked by its backward error, and a chain of scalings through one
// vector, whose result is exact) on a fresh runtime each, on every policy
// asked for in turn, while an injector seeded by --seed picks, for each
// run, a fault and a moment: the driver plugin killed (SIGKILL), the driver
// stopped (SIGSTOP: its heartbeat stops and the runtime kills it after
// plugin_timeout), the scheduler plugin killed, or nothing (a control).
// Every codelet is Retryable and the runtime may restart its plugins, so
// the right outcome of a run is its verified result; the only other
// acceptable one is an error that says which fault it was (it wraps
// ErrPluginCrashed, ErrDataLost or ErrTaskFailed). A run that returns a
// wrong result without an error is "wrong", one that does not end within
// --run-timeout is a "hang", and either fails the campaign.

// faultKinds are the faults the injector picks from.
var faultKinds = []string{"none", "kill-driver", "stop-driver", "kill-sched"}

// faultTally counts the campaign's runs by outcome.
type faultTally struct {
	runs, injected, verified, clear, unclear, wrong, hangs int
	notes                                                  []string
}

func (ft *faultTally) note(format string, args ...any) {
	if len(ft.notes) < 10 {
		ft.notes = append(ft.notes, fmt.Sprintf(format, args...))
	}
}

func faultsBench(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("bench faults", "[flags]", "Run small workloads while a seeded injector kills or stops the driver or\nscheduler plugin at a random moment, and check that every run either verifies\nor fails with an error naming the fault: never a wrong result, never a hang.")
	fs := c.FlagSet
	pluginDir := fs.String("plugin-dir", "", "load the plugins from `DIR` alone (default: as every command finds them)")
	runs := fs.Int("runs", 24, "how many runs")
	seed := fs.Uint64("seed", 1, "the injector's `SEED`: the same seed makes the same choices")
	scheds := fs.String("scheds", "ws,dmda,lws,prio,random,heteroprio", "the policies, used in turn (a comma-separated `LIST`)")
	runTimeout := fs.Duration("run-timeout", 2*time.Minute, "a run not over by then is a hang")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench faults"
	if err := checkFlags(checkFlag(cmd, "runs", *runs, 1, 100000)); err != nil {
		return err
	}
	if *runTimeout <= 0 {
		return usagef("bench faults: --run-timeout must be positive")
	}
	policies := strings.Split(*scheds, ",")
	rng := rand.New(rand.NewPCG(*seed, 0x5eed))
	var ft faultTally
	for i := 0; i < *runs && ctx.Err() == nil; i++ {
		r := faultRun{
			sched:    policies[i%len(policies)],
			workload: []string{"cholesky", "chain"}[rng.IntN(2)],
			fault:    faultKinds[rng.IntN(len(faultKinds))],
			after:    time.Duration(rng.IntN(40)) * time.Millisecond,
		}
		ft.runs++
		if r.fault != "none" {
			ft.injected++
		}
		type result struct {
			ok       bool
			injected bool
			err      error
		}
		done := make(chan result, 1)
		go func() {
			ok, injected, err := r.run(ctx, *pluginDir)
			done <- result{ok, injected, err}
		}()
		var res result
		select {
		case res = <-done:
		case <-time.After(*runTimeout):
			ft.hangs++
			ft.note("run %d (%s): hung for %v", i, r, *runTimeout)
			// The run's runtime is left behind: the process ends soon.
			printFaultTally(out, &ft, *seed)
			return fmt.Errorf("bench faults: run %d (%s) hung", i, r)
		}
		if r.fault != "none" && !res.injected {
			ft.injected-- // the run ended before the moment came
		}
		switch {
		case res.err == nil && res.ok:
			ft.verified++
		case res.err == nil:
			ft.wrong++
			ft.note("run %d (%s): WRONG result, no error", i, r)
		case errors.Is(res.err, core.ErrPluginCrashed) || errors.Is(res.err, core.ErrDataLost) || errors.Is(res.err, core.ErrTaskFailed):
			ft.clear++
		default:
			ft.unclear++
			ft.note("run %d (%s): an error that names no fault: %v", i, r, res.err)
		}
	}
	printFaultTally(out, &ft, *seed)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("bench faults: interrupted: %w", ctx.Err())
	case ft.wrong > 0 || ft.unclear > 0:
		return fmt.Errorf("bench faults: %d wrong results, %d unclear errors (first: %s)", ft.wrong, ft.unclear, ft.notes[0])
	}
	return nil
}

func printFaultTally(out io.Writer, ft *faultTally, seed uint64) {
	for _, n := range ft.notes {
		fmt.Fprintln(out, n)
	}
	kv(out, "faults", map[string]any{"seed": seed, "runs": ft.runs, "injected": ft.injected, "verified": ft.verified,
		"clear_errors": ft.clear, "unclear_errors": ft.unclear, "wrong": ft.wrong, "hangs": ft.hangs})
}

// faultRun is one run of the campaign: a workload on a policy, and the
// fault injected after a delay from the first submission.
type faultRun struct {
	sched, workload, fault string
	after                  time.Duration
}

func (r faultRun) String() string {
	return fmt.Sprintf("sched %s, %s, %s after %v", r.sched, r.workload, r.fault, r.after)
}

// run starts a runtime, runs the workload with the fault injected, and
// reports whether its result is right, whether the fault was injected
// (the workload may end first), and its error.
func (r faultRun) run(ctx context.Context, pluginDir string) (ok, injected bool, err error) {
	cfg, err := config.Load(os.Getenv, "")
	if err != nil {
		return false, false, err
	}
	if pluginDir != "" {
		cfg.PluginDir = pluginDir
	}
	cfg.Sched = r.sched
	cfg.NCPU = 2
	cfg.PluginRestarts = 3
	cfg.PluginTimeout = 2 * time.Second // a stopped plugin is killed soon
	rt, err := core.Init(ctx, core.Options{Config: cfg})
	if err != nil {
		return false, false, fmt.Errorf("init: %w", err)
	}
	defer rt.Shutdown()
	fired := make(chan bool, 1)
	start := make(chan struct{})
	go func() {
		<-start
		time.Sleep(r.after)
		fired <- r.inject(rt)
	}()
	switch r.workload {
	case "cholesky":
		close(start)
		var res choleskyResult
		res, err = runCholesky[float64](rt, 768, 6, true, "partition", 0, choleskyKernels{blasarg.PotrfF64, blasarg.TrsmF64, blasarg.SyrkF64, blasarg.GemmF64, true, false})
		ok = err == nil && res.check.verified()
	default:
		ok, err = faultChain(rt, start)
	}
	return ok, <-fired, err
}

// inject applies the run's fault to rt's plugins and reports whether it
// did.
func (r faultRun) inject(rt *core.Runtime) bool {
	var pid int
	sig := syscall.SIGKILL
	switch r.fault {
	case "kill-driver", "stop-driver":
		if ws := rt.Workers(); len(ws) > 0 {
			pid = ws[0].Pid
		}
		if r.fault == "stop-driver" {
			sig = syscall.SIGSTOP
		}
	case "kill-sched":
		pid = rt.SchedPid()
	}
	return pid > 0 && syscall.Kill(pid, sig) == nil
}

// faultChain scales a vector 400 times in turn by 2 and by 0.5 through one
// read-write handle, with a Retryable codelet, and reports whether it came
// back exact. The chain is all submitted before start is closed.
func faultChain(rt *core.Runtime, start chan struct{}) (bool, error) {
	x := make([]float32, 1<<14)
	for i := range x {
		x[i] = float32(i % 97)
	}
	want := slices.Clone(x)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		close(start)
		return false, err
	}
	cl := &core.Codelet{Name: "scal", Kernels: map[core.Arch]string{core.CPU: blasarg.ScalF32}, Modes: []core.Mode{core.RW}, Retryable: true}
	var serr error
	for i := range 400 {
		alpha := 2.0
		if i%2 == 1 {
			alpha = 0.5
		}
		if serr = rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: alpha}.Encode()}); serr != nil {
			break
		}
	}
	close(start)
	err = rt.WaitForAll()
	if uerr := h.Unregister(); err == nil {
		err = uerr
	}
	if err == nil {
		err = serr
	}
	return err == nil && slices.Equal(x, want), err
}
