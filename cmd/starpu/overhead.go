package main

import (
	"context"
	"fmt"
	"io"
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
func overhead(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("bench overhead", "[flags]", "Time empty tasks from the first submit to the end of wait-for-all: a chain by\ntags (--buffers 0), a chain through RW buffers, or independent tasks.")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	ntasks := fs.Int("tasks", 100000, "number of tasks")
	nbuffers := fs.Int("buffers", 0, "vector handles every task accesses in RW; 0, the default, chains the tasks by tags instead")
	independent := fs.Bool("independent", false, "independent tasks instead of a chain (async_tasks_overhead)")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench overhead"
	if err := checkFlags(checkFlag(cmd, "tasks", *ntasks, 1, maxTasks), checkFlag(cmd, "buffers", *nbuffers, 0, maxBuffers)); err != nil {
		return err
	}
	if *independent && *nbuffers > 0 {
		return usagef("bench overhead: --independent tasks take no buffers")
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	modes := make([]core.Mode, *nbuffers)
	handles := make([]*core.Handle, *nbuffers)
	for i := range handles {
		modes[i] = core.RW
		v := make([]float32, 1)
		if handles[i], err = core.RegisterVector(rt, v); err != nil {
			rt.Shutdown()
			return err
		}
	}
	cl := &core.Codelet{Name: "empty", Kernels: map[core.Arch]string{core.CPU: blasarg.Empty}, Modes: modes}
	tasks := make([]core.Task, *ntasks)
	for i := range tasks {
		tasks[i] = core.Task{Codelet: cl, Handles: handles}
	}
	mode := "chain"
	var submitTime time.Duration
	cpu0, err := rt.EngineCPU()
	if err != nil {
		rt.Shutdown()
		return err
	}
	start := time.Now()
	switch {
	case *independent:
		mode = "independent"
		for i := range tasks {
			if err = rt.Submit(&tasks[i]); err != nil {
				break
			}
		}
	case *nbuffers == 0:
		mode = "tags"
		for i := 1; i < len(tasks) && err == nil; i++ {
			if err = rt.DeclareTagDeps(core.TagID(i), core.TagID(i-1)); err != nil {
				break
			}
			tasks[i].Tag, tasks[i].UseTag = core.TagID(i), true
			err = rt.Submit(&tasks[i])
		}
		if err == nil {
			tasks[0].Tag, tasks[0].UseTag = 0, true
			err = rt.Submit(&tasks[0])
		}
	default:
		for i := range tasks {
			if err = rt.Submit(&tasks[i]); err != nil {
				break
			}
		}
	}
	submitTime = time.Since(start)
	if werr := rt.WaitForAll(); err == nil {
		err = werr
	}
	elapsed := time.Since(start)
	cpu1, cerr := rt.EngineCPU()
	if err == nil {
		err = cerr
	}
	for _, h := range handles {
		if uerr := h.Unregister(); uerr != nil && err == nil {
			err = uerr
		}
	}
	if ferr := rf.finish(rt); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	per := float64(elapsed.Nanoseconds()) / 1e3 / float64(*ntasks)
	sub := float64(submitTime.Nanoseconds()) / 1e3 / float64(*ntasks)
	eng := float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(*ntasks)
	fmt.Fprintf(out, "overhead: %d empty tasks (%s, %d buffers, %d workers): total %v, per task %.2f us, submit %.2f us, engine CPU %.2f us (%.0f%% busy)\n",
		*ntasks, mode, *nbuffers, len(rt.Workers()), elapsed, per, sub, eng, 100*eng/per)
	kv(out, "overhead", map[string]any{"tasks": *ntasks, "buffers": *nbuffers, "mode": mode, "sched": rt.SchedName(), "workers": len(rt.Workers()),
		"per_task_us": per, "submit_us": sub, "engine_cpu_us": eng})
	return nil
}
