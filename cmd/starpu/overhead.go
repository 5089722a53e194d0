package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// overhead reproduces StarPU's tasks_overhead and async_tasks_overhead:
// empty tasks, timed from the first submit to the end of wait-for-all.
//   - 0 buffers: a chain by tags, task i depending on tag i-1, the head
//     submitted last so that the whole chain unrolls through the runtime;
//   - B buffers: every task accesses the same B vectors in RW, so implicit
//     dependencies chain them;
//   - --independent: N independent tasks.
//
// --submitters S splits the tasks between S goroutines submitting at once,
// each chain becoming S chains side by side (each its own buffers or its
// own tags): one submitting thread saturates before the engine does, so
// this is how the engine's own ceiling is found on a machine with the cores
// for it (scripts/scaling.sh).
func overhead(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("bench overhead", "[flags]", "Time empty tasks from the first submit to the end of wait-for-all: a chain by\ntags (--buffers 0), a chain through RW buffers, or independent tasks.")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	ntasks := fs.Int("tasks", 100000, "number of tasks")
	nbuffers := fs.Int("buffers", 0, "vector handles every task accesses in RW; 0, the default, chains the tasks by tags instead")
	independent := fs.Bool("independent", false, "independent tasks instead of a chain (async_tasks_overhead)")
	rounds := fs.Int("rounds", 1, "run the tasks this many times in one runtime and report the median round")
	submitters := fs.Int("submitters", 1, "goroutines submitting at once, each its share of the tasks; a chain becomes one chain per submitter (its own buffers or tags), side by side")
	traceAB := fs.Bool("trace-ab", false, "with a trace (--trace or $STARPU_TRACE), pause it every other round and report what recording costs: the median ratio of each recorded round to the paused one before it (--rounds, even)")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench overhead"
	if err := checkFlags(checkFlag(cmd, "tasks", *ntasks, 1, maxTasks), checkFlag(cmd, "buffers", *nbuffers, 0, maxBuffers),
		checkFlag(cmd, "rounds", *rounds, 1, 10000), checkFlag(cmd, "submitters", *submitters, 1, min(*ntasks, 1024))); err != nil {
		return err
	}
	if *independent && *nbuffers > 0 {
		return usagef("bench overhead: --independent tasks take no buffers")
	}
	if *traceAB && *rounds%2 != 0 {
		return usagef("bench overhead: --trace-ab alternates paused and recorded rounds: --rounds must be even, not %d", *rounds)
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	if *traceAB && !rt.Tracing() {
		rt.Shutdown()
		return usagef("bench overhead: --trace-ab needs a trace file: --trace FILE or $STARPU_TRACE")
	}
	modes := make([]core.Mode, *nbuffers)
	for i := range modes {
		modes[i] = core.RW
	}
	// chains[s] are the buffers of submitter s's tasks.
	chains := make([][]*core.Handle, *submitters)
	for s := range chains {
		for range *nbuffers {
			h, err := core.RegisterVector(rt, make([]float32, 1))
			if err != nil {
				rt.Shutdown()
				return err
			}
			chains[s] = append(chains[s], h)
		}
	}
	cl := &core.Codelet{Name: "empty", Kernels: map[core.Arch]string{core.CPU: blasarg.Empty}, Modes: modes}
	mode := "chain"
	switch {
	case *independent:
		mode = "independent"
	case *nbuffers == 0:
		mode = "tags"
	}
	var per, sub, eng []float64 // per round, us per task
	for r := 0; r < *rounds && err == nil; r++ {
		if *traceAB {
			if r%2 == 0 {
				rt.PauseTrace()
			} else {
				rt.ResumeTrace()
			}
		}
		var rs roundTimes
		// Tags are unique in a runtime: each round has its own.
		rs, err = overheadRound(rt, cl, chains, mode, *ntasks, core.TagID(r*(*ntasks)))
		per, sub, eng = append(per, rs.per), append(sub, rs.submit), append(eng, rs.engine)
	}
	// What ran, against what was submitted: a round that lost tasks would
	// time less work than it claims.
	var executed int64
	if err == nil {
		var st core.CodeletStats
		if st, err = rt.CodeletStats(cl); err == nil {
			executed = st.Tasks()
		}
		if want := int64(*ntasks) * int64(*rounds); err == nil && executed != want {
			err = fmt.Errorf("bench overhead: %d tasks ran of the %d submitted", executed, want)
		}
	}
	for _, hs := range chains {
		for _, h := range hs {
			if uerr := h.Unregister(); uerr != nil && err == nil {
				err = uerr
			}
		}
	}
	if ferr := rf.finish(rt); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	p, su, e := median(per), median(sub), median(eng)
	by := ""
	if *submitters > 1 {
		by = fmt.Sprintf(", %d submitters", *submitters)
	}
	fmt.Fprintf(out, "overhead: %d empty tasks (%s, %d buffers, %d workers%s): per task %.2f us, submit %.2f us, engine CPU %.2f us (%.0f%% busy)",
		*ntasks, mode, *nbuffers, len(rt.Workers()), by, p, su, e, 100*e/p)
	if *rounds > 1 {
		fmt.Fprintf(out, ", median of %d rounds", *rounds)
	}
	fmt.Fprintln(out)
	kvs := map[string]any{"tasks": *ntasks, "buffers": *nbuffers, "mode": mode, "sched": rt.SchedName(), "workers": len(rt.Workers()),
		"per_task_us": p, "submit_us": su, "engine_cpu_us": e, "rounds": *rounds, "submitters": *submitters, "executed": executed}
	if *traceAB {
		var off, on, ratios []float64
		for r := 0; r+1 < len(per); r += 2 {
			off, on = append(off, per[r]), append(on, per[r+1])
			ratios = append(ratios, per[r+1]/per[r])
		}
		m := median(ratios)
		fmt.Fprintf(out, "trace cost: paused %.2f us, recording %.2f us per task (medians of %d rounds each); recording costs %+.1f%% (median of the pairs' ratios)\n",
			median(off), median(on), len(off), 100*(m-1))
		kvs["paused_us"], kvs["recording_us"], kvs["trace_cost_ratio"] = median(off), median(on), m
	}
	kv(out, "overhead", kvs)
	return nil
}

// roundTimes is one round of bench overhead, in microseconds per task:
// first submit to the end of wait-for-all, submitting, and the engine's
// CPU time.
type roundTimes struct{ per, submit, engine float64 }

// overheadRound submits n empty tasks of codelet cl and waits for them,
// split between one submitting goroutine per entry of chains, whose tasks
// access that entry's handles (tags chains each submitter's tasks by tags,
// from tag0 on).
func overheadRound(rt *core.Runtime, cl *core.Codelet, chains [][]*core.Handle, mode string, n int, tag0 core.TagID) (roundTimes, error) {
	tasks := make([]core.Task, n)
	share := func(s int) (lo, hi int) { return s * n / len(chains), (s + 1) * n / len(chains) }
	for s, hs := range chains {
		lo, hi := share(s)
		for i := lo; i < hi; i++ {
			tasks[i] = core.Task{Codelet: cl, Handles: hs}
		}
	}
	cpu0, err := rt.EngineCPU()
	if err != nil {
		return roundTimes{}, err
	}
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	start := time.Now()
	submit := func(s int) {
		lo, hi := share(s)
		errs[s] = submitRange(rt, tasks[lo:hi], mode == "tags", tag0+core.TagID(lo))
	}
	for s := 1; s < len(chains); s++ {
		wg.Go(func() { submit(s) })
	}
	// The first share on this goroutine: one submitter runs as it did
	// before there were several.
	submit(0)
	wg.Wait()
	err = errors.Join(errs...)
	submitTime := time.Since(start)
	if werr := rt.WaitForAll(); err == nil {
		err = werr
	}
	elapsed := time.Since(start)
	cpu1, cerr := rt.EngineCPU()
	if err == nil {
		err = cerr
	}
	if mode == "tags" && err == nil {
		// Untimed: each round starts with the tags the one before found,
		// as StarPU's tasks_overhead, one round per process, does. Kept,
		// they would hold 20 MB per round of 50000 tasks (the tasks the
		// tags were last bound to among them), which the next rounds'
		// collections would scan and their allocations fault in afresh.
		for i := range n {
			if err = rt.TagRemove(tag0 + core.TagID(i)); err != nil {
				break
			}
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }
	return roundTimes{per: us(elapsed), submit: us(submitTime), engine: us(cpu1 - cpu0)}, err
}

// submitRange submits tasks in order, or with byTags as a chain by tags
// from tag0 on whose head goes last, so that the whole chain unrolls
// through the runtime.
func submitRange(rt *core.Runtime, tasks []core.Task, byTags bool, tag0 core.TagID) error {
	if !byTags {
		for i := range tasks {
			if err := rt.Submit(&tasks[i]); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 1; i < len(tasks); i++ {
		if err := rt.DeclareTagDeps(tag0+core.TagID(i), tag0+core.TagID(i-1)); err != nil {
			return err
		}
		tasks[i].Tag, tasks[i].UseTag = tag0+core.TagID(i), true
		if err := rt.Submit(&tasks[i]); err != nil {
			return err
		}
	}
	tasks[0].Tag, tasks[0].UseTag = tag0, true
	return rt.Submit(&tasks[0])
}

// median is the middle value of xs (the mean of the two middle ones for
// an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Sorted(slices.Values(xs))
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}
