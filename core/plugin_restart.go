package core

// Driver restart, task retry; design note: docs/design/plugins.md.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Restarting a driver plugin that died, and retrying its tasks.
//
// When checkPlugins finds a driver plugin's process gone, its transfers and
// the tasks on its workers fail or are retried (below), and its device
// memory, gone with the process, is wiped (wipeNodes): every replicate
// there is dropped, and a handle whose only valid copy was there is marked
// lost (data_lost.go), naming the node. When the driver may be restarted
// (plugin_restarts left), the engine
//
//  1. marks the driver restarting, so that push does not fail the tasks
//     only its workers can run (deadArch leaves it out): they wait in the
//     policies;
//  2. removes the driver's workers from every live context (a Workers
//     message, as SchedContext.RemoveWorkers sends): the policies place the
//     tasks they had queued there elsewhere, or hold them, and once a
//     policy echoes the message it assigns nothing more to those workers,
//     and every Assign it made before, posted ones included, has been read;
//  3. retries the tasks that were on the dead workers when that cannot
//     give a wrong result, and fails the others (retryJob);
//  4. once every context has echoed, restarts the plugin on a goroutine of
//     its own (restartDriver), after a backoff: a new process, its config,
//     a fingerprint that must list the same kernels in the same order (the
//     codelets' kernel indices are kept) and the same memory nodes, the
//     dead workers' rings emptied (what the dead process left there
//     belongs to tasks that were failed or retried), driver Init with the
//     same worker specs, and the kernels compiled from codelets' sources
//     loaded again in their first order, so that they keep their indices;
//  5. on the engine goroutine, swaps the new process in, marks the driver
//     alive, and adds the workers back to the contexts.
//
// A driver that cannot be restarted, or has used its restarts, stays dead:
// deadArch then covers its architecture, and the tasks no other driver can
// run fail at push, with those the policies held for it.
//
// Rejected: restarting without taking the workers out of the policies.
// The policy keeps assigning and posting to the dead workers' scheduler
// rings while the new process starts; an Exec the core has already
// failed could then run in the new process, over data other tasks have
// been given since. The Workers echo is the barrier that makes emptying
// the rings safe.
//
// A task is retried when running it again gives what running it once
// would have: none of its buffers is read and written (each is R, or W
// without R, so the dead run cannot have changed an input), or its codelet
// is Retryable and the core saved a snapshot of its read-write buffers when
// it was pushed, which is copied back first. SCRATCH and REDUX tasks, and
// tasks on runtimes with device memory, are not retried. Each task is
// retried once: a task that kills its driver every time fails on the second
// death.

// Completions after a death.
//
// A completion names its task by id, and a retried task keeps its id: a
// completion the dead process committed just before dying, read after the
// task was retried, would complete the retry (whose snapshot was restored
// and which runs again later), releasing its successors over data it has
// not written yet. So completions are fenced by incarnation: when
// checkPlugins finds a driver dead, it first reads what the process
// committed to its workers' completion rings and applies it (those are the
// outcomes of the runs dispatched to that process, complete: a message is
// visible only once published), and only then fails or retries the tasks
// still on its workers. From then on the driver is fenced: whatever is
// read from its workers' rings (nothing, but for a death misread) is
// counted as stale, logged and dropped, never applied, until the new
// process is swapped in. A retried task's completion can then only come
// from the worker it was dispatched to again, in the new process (the
// worker check in drainCompletions).
//
// Rejected: an attempt number in every Exec and Completion. It costs ring
// bytes on the hot path of every task to guard what happens only at a
// death, and every driver, in any language, would have to echo it right;
// the ring of a dead process is already a fence once it has been read.

// faultCounts counts what the fault handling did, for Runtime.Faults.
type faultCounts struct {
	deaths, restarts, retried, stale atomic.Int64
}

// FaultStats counts the runtime's driver faults and what was done about
// them.
type FaultStats struct {
	// DriverDeaths counts the driver processes found dead.
	DriverDeaths int64
	// DriverRestarts counts the driver processes started again.
	DriverRestarts int64
	// TasksRetried counts the tasks pushed again after their driver died.
	TasksRetried int64
	// StaleCompletions counts the completions dropped because they came
	// from a process already found dead and read (see "Completions after
	// a death" in core/plugin_restart.go).
	StaleCompletions int64
}

// Faults returns the runtime's fault counts so far.
func (rt *Runtime) Faults() FaultStats {
	f := &rt.engine.faults
	return FaultStats{DriverDeaths: f.deaths.Load(), DriverRestarts: f.restarts.Load(),
		TasksRetried: f.retried.Load(), StaleCompletions: f.stale.Load()}
}

// dropStale drops what is in the completion ring of w, whose driver is
// fenced: it came from a dead process whose ring was already read.
// Engine goroutine.
func (e *engine) dropStale(w *workerState) {
	var c wire.Completion
	for msg := w.completion.Peek(); msg != nil; msg = w.completion.Peek() {
		id := uint64(0)
		if wire.Type(msg) == wire.TypeCompletion && c.Decode(msg) == nil {
			id = c.ID
		}
		w.completion.Release()
		e.faults.stale.Add(1)
		e.rt.log.Error("stale completion from a dead driver process dropped", "driver", "driver-"+w.drv.name, "worker", w.id, "task", id)
	}
}

// restartState coordinates plugin restarts with teardown: wg counts the
// restarts under way and stop, closed at teardown, calls them off. mu
// guards off (set at teardown: no new restart) and orders wg.Add before
// teardown's wg.Wait.
type restartState struct {
	wg   sync.WaitGroup
	stop chan struct{}
	mu   sync.Mutex
	off  bool
}

// wipeNodes forgets d's device memory, which died with its process: every
// replicate on d's nodes is dropped, with the allocation cache, and a
// handle left with no valid copy anywhere is marked lost, unless a failed
// task already marked it. Engine goroutine, after d's transfers and tasks
// failed (their replicate references are released by then or when they
// complete, on replicates that no longer hold memory).
func (e *engine) wipeNodes(d *driverInst, cause error) {
	for _, nd := range e.rt.nodes[1:] {
		if nd.drv != d {
			continue
		}
		for r := range nd.reps {
			r.allocated, r.state, r.buf, r.filling = false, invalid, 0, nil
			h := r.h
			h.publishValid()
			if h.validMask.Load() == 0 && h.lost.Load() == nil {
				h.markLost(&lostData{h: h, on: nd.name, cause: cause})
			}
		}
		clear(nd.reps)
		clear(nd.cache)
		nd.used = 0
		if len(nd.memWaiters) > 0 {
			e.wakeMemWaiters(nd)
		}
	}
}

// maxRestartBackoff bounds the wait before a restart.
const maxRestartBackoff = 5 * time.Second

// restartBackoff is the wait before restart number n (from 1): 100 ms,
// doubling.
func restartBackoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 10)
	return min(d, maxRestartBackoff)
}

// canRestart tells whether the dead driver d may be started again.
func (rt *Runtime) canRestart(d *driverInst) bool {
	if d.proc == nil || d.restarts >= rt.cfg.RestartsFor("driver-"+d.name) || rt.broken.Load() != nil || rt.shutdown.Load() {
		return false
	}
	for _, c := range *rt.engine.ctxs.Load() {
		if c.restarting.Load() {
			return false // one restart at a time (sched_restart.go)
		}
	}
	return len(d.workers) > 0
}

// beginRestart takes d's workers out of the contexts' policies and, once
// every policy has echoed, restarts d. Engine goroutine.
func (e *engine) beginRestart(d *driverInst) {
	rt := e.rt
	d.restarts++
	d.restarting.Store(true)
	ids := make([]int, len(d.workers))
	for i, w := range d.workers {
		ids[i] = w.id
	}
	removed := map[*SchedContext][]int{}
	pending := 1 // released below, after every message is sent
	done := func() {
		if pending--; pending > 0 {
			return
		}
		rt.restarts.mu.Lock()
		defer rt.restarts.mu.Unlock()
		if rt.restarts.off {
			e.restartFailed(d, ErrShutdown)
			return
		}
		rt.restarts.wg.Add(1)
		go rt.restartDriver(d, removed)
	}
	for _, c := range *e.ctxs.Load() {
		c.mu.Lock()
		var mine []int
		for _, id := range c.workers {
			if slices.Contains(ids, id) {
				mine = append(mine, id)
			}
		}
		if len(mine) > 0 && !c.deleted && c.alive() {
			pending++
			if _, err := c.sendWorkersLocked(wire.WorkersRemove, mine, done); err != nil {
				pending--
				rt.log.Warn("cannot take the dead driver's workers out of a context", "context", c.name, "error", err)
			} else {
				removed[c] = mine
			}
		}
		c.mu.Unlock()
	}
	done()
}

// restartDriver starts driver d again and brings its workers back into the
// contexts they were removed from. Its own goroutine.
func (rt *Runtime) restartDriver(d *driverInst, removed map[*SchedContext][]int) {
	defer rt.restarts.wg.Done()
	e := rt.engine
	wait := restartBackoff(d.restarts)
	rt.log.Warn("restarting driver plugin", "driver", "driver-"+d.name, "attempt", d.restarts, "of", rt.cfg.RestartsFor("driver-"+d.name), "after", wait)
	select {
	case <-time.After(wait):
	case <-rt.restarts.stop:
		e.call(func() { e.restartFailed(d, ErrShutdown) })
		return
	}
	p, drv, err := rt.relaunchDriver(d)
	if err == nil {
		select {
		case <-rt.restarts.stop:
			p.Kill()
			return
		default:
		}
		// Kernels compiled from sources are loaded into the new process
		// under loadMu, held until it is swapped in, so that a codelet
		// resolved meanwhile waits for it instead of asking the dead one.
		d.loadMu.Lock()
		defer d.loadMu.Unlock()
		// The rings, then the new workers: nothing writes to them now
		// (the process is dead, the policies have let go of the workers,
		// and the engine posts nothing to a dead driver's workers).
		e.sync(func() { err = e.emptyRings(d) })
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			req := &driver.InitRequest{SpinIters: rt.cfg.SpinIters}
			for _, w := range d.workers {
				req.Workers = append(req.Workers, w.spec)
			}
			if err = drv.Init(ctx, req); err != nil {
				err = fmt.Errorf("init: %w", err)
			} else {
				err = d.reloadKernels(ctx, drv)
			}
			cancel()
		}
		if err != nil {
			p.Kill()
		}
	}
	if err != nil {
		rt.log.Error("driver plugin restart failed", "driver", "driver-"+d.name, "error", err)
		e.sync(func() { e.restartFailed(d, fmt.Errorf("restart: %w", err)) })
		return
	}
	// Waited for: teardown stops the engine only once the restarts are
	// over, so that the new process is known to it and killed with the
	// others.
	e.sync(func() {
		d.pmu.Lock()
		d.proc, d.drv = p, drv
		d.pmu.Unlock()
		d.dead.Store(false)
		e.checks.Add(-1)
		d.restarting.Store(false)
		d.fenced = false // emptyRings read the dead process's rings
		e.faults.restarts.Add(1)
		e.noteDeadDrivers()
		for c, ids := range removed {
			c.mu.Lock()
			if !c.deleted && c.alive() {
				if _, err := c.sendWorkersLocked(wire.WorkersAdd, ids, nil); err != nil {
					rt.log.Error("cannot give the restarted workers back to a context", "context", c.name, "error", err)
				}
			}
			c.mu.Unlock()
		}
		rt.log.Warn("driver plugin restarted", "driver", "driver-"+d.name, "pid", p.Pid())
	})
}

// startDriverPlugin launches driver n's plugin from c, starting it again
// while its process dies during its start (loader.ErrDiedStarting) and the
// driver has restarts left, after the restart backoff, as a driver that
// dies later is restarted: a crash at start-up is a crash like another.
// used is how many restarts were used before; it returns how many are
// used after. Init's goroutine.
func (rt *Runtime) startDriverPlugin(ctx context.Context, n string, c loader.Candidate, used int) (*loader.Plugin, driver.Driver, int, error) {
	for {
		p, err := rt.launch(ctx, c)
		if err == nil {
			d, err := p.Driver()
			if err != nil {
				p.Kill()
				return nil, nil, used, err
			}
			return p, d, used, nil
		}
		if !errors.Is(err, loader.ErrDiedStarting) {
			return nil, nil, used, err
		}
		if err := rt.restartWait(ctx, "driver-"+n, &used, err); err != nil {
			return nil, nil, used, err
		}
	}
}

// restartWait counts one more restart of plugin name in *used and waits
// the restart backoff, or says why it may not restart: its restarts are
// spent (named, with plugin_restarts), or ctx ended. cause is why it must
// restart.
func (rt *Runtime) restartWait(ctx context.Context, name string, used *int, cause error) error {
	budget := rt.cfg.RestartsFor(name)
	switch {
	case budget == 0:
		return fmt.Errorf("%w (plugin_restarts is 0: set it, or STARPU_PLUGIN_RESTARTS, to restart a plugin that dies)", cause)
	case *used >= budget:
		return fmt.Errorf("%w (restarted %d times, all of plugin_restarts = %d)", cause, *used, budget)
	}
	*used++
	wait := restartBackoff(*used)
	rt.log.Warn("plugin died while the runtime started; starting it again", "plugin", name, "attempt", *used, "of", budget, "after", wait, "error", cause)
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (a restart was called off: %w)", cause, ctx.Err())
	}
}

// died reports whether err, from a call to plugin p (nil: in process),
// came from p's death.
func died(p *loader.Plugin, err error) bool {
	return p != nil && (p.Exited() || errors.Is(err, base.ErrPluginExited))
}

// restartStarting starts driver d again after its process died while the
// runtime started (cause says how), while it has restarts left: a new
// process, configured and, once d has a fingerprint, checked to be the same
// driver (relaunchDriver), swapped in. Init's goroutine, before the
// engine runs.
func (rt *Runtime) restartStarting(ctx context.Context, d *driverInst, cause error) error {
	if err := rt.restartWait(ctx, "driver-"+d.name, &d.restarts, cause); err != nil {
		return err
	}
	d.proc.Kill() // reaped, its heartbeat slot freed
	var p *loader.Plugin
	var drv driver.Driver
	var err error
	if d.fp != nil {
		p, drv, err = rt.relaunchDriver(d)
	} else {
		p, drv, d.restarts, err = rt.startDriverPlugin(ctx, d.name, rt.cands["driver-"+d.name], d.restarts)
	}
	if err != nil {
		return fmt.Errorf("%w; starting it again: %w", cause, err)
	}
	d.pmu.Lock()
	d.proc, d.drv = p, drv
	d.pmu.Unlock()
	rt.log.Warn("driver plugin started again", "driver", "driver-"+d.name, "pid", p.Pid())
	return nil
}

// relaunchDriver starts d's plugin again and checks that it is the same
// driver: same architecture, the units its workers use, the same kernels in
// the same order.
func (rt *Runtime) relaunchDriver(d *driverInst) (*loader.Plugin, driver.Driver, error) {
	c, ok := rt.cands["driver-"+d.name]
	if !ok {
		return nil, nil, fmt.Errorf("driver-%s is no longer found %s", d.name, rt.pluginsWhere)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := rt.launch(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	drv, err := p.Driver()
	if err == nil {
		err = rt.configure(ctx, drv, "driver-"+d.name)
	}
	var fp *driver.Fingerprint
	if err == nil {
		fp, err = drv.Fingerprint(ctx)
	}
	if err == nil {
		err = d.sameDriver(fp)
	}
	if err != nil {
		p.Kill()
		return nil, nil, err
	}
	return p, drv, nil
}

// sameDriver says how fp, the fingerprint of d's restarted process, differs
// from d's in what the runtime relies on: the architecture, the kernels in
// order (the codelets' kernel indices), the scheduler rings, the memory
// nodes, and the unit and node of each of d's workers.
func (d *driverInst) sameDriver(fp *driver.Fingerprint) error {
	switch {
	case fp.Arch != d.fp.Arch:
		return fmt.Errorf("it is now a %s driver, not %s", fp.Arch, d.fp.Arch)
	case !slices.Equal(fp.Kernels, d.fp.Kernels):
		return fmt.Errorf("its kernels changed (%d now, %d before): the codelets' kernel indices would be wrong", len(fp.Kernels), len(d.fp.Kernels))
	case fp.SchedRing != d.fp.SchedRing:
		return fmt.Errorf("it no longer reads scheduler rings the same way")
	case len(fp.Nodes) != len(d.fp.Nodes):
		return fmt.Errorf("it has %d memory nodes, %d before", len(fp.Nodes), len(d.fp.Nodes))
	}
	for _, w := range d.workers {
		switch u := w.spec.Unit; {
		case u >= len(fp.Units):
			return fmt.Errorf("it has %d units, worker %d used unit %d", len(fp.Units), w.id, u)
		case fp.Units[u].Node != d.fp.Units[u].Node:
			return fmt.Errorf("unit %d (worker %d) is on its memory node %d, %d before", u, w.id, fp.Units[u].Node, d.fp.Units[u].Node)
		}
	}
	return nil
}

// reloadKernels has the new instance drv of d compile again the kernels d
// compiled from codelets' sources, in the order they were first loaded:
// the codelets keep the indices they resolved, so each must come back at
// its old index. The caller holds d.loadMu.
func (d *driverInst) reloadKernels(ctx context.Context, drv driver.Driver) error {
	type kernel struct {
		key   string
		index int
	}
	ks := make([]kernel, 0, len(d.loaded))
	for key, k := range d.loaded {
		ks = append(ks, kernel{key, k})
	}
	slices.SortFunc(ks, func(a, b kernel) int { return a.index - b.index })
	for _, k := range ks {
		name, source, _ := strings.Cut(k.key, "\x00")
		got, err := drv.LoadKernel(ctx, driver.KernelSource{Name: name, Source: source})
		if err != nil {
			return fmt.Errorf("kernel %q from its source: %w", name, err)
		}
		if got != k.index {
			return fmt.Errorf("kernel %q from its source came back as kernel %d, was %d: the codelets' indices would be wrong", name, got, k.index)
		}
	}
	return nil
}

// emptyRings drops what the dead process left in its workers' dispatch and
// scheduler rings, and reads the completions it rang before dying. Engine
// goroutine, with nothing producing into those rings.
func (e *engine) emptyRings(d *driverInst) error {
	e.drainCompletions()
	for _, w := range d.workers {
		spans := []base.Span{w.spec.Dispatch}
		if w.hasSchedRing() {
			spans = append(spans, w.spec.SchedRing)
		}
		for _, s := range spans {
			r, err := shm.OpenRing(e.rt.arena.Bytes(s))
			if err != nil {
				return fmt.Errorf("worker %d: %w", w.id, err)
			}
			for r.Peek() != nil {
				r.Release()
			}
		}
		for _, j := range w.overflow {
			e.fail(j, w.id, fmt.Errorf("%w: driver-%s is gone; worker %d cannot run task %q", ErrPluginCrashed, d.name, w.id, j.name()))
		}
		clear(w.overflow)
		w.overflow = w.overflow[:0]
		w.ctlOverflow = nil
	}
	return nil
}

// restartFailed gives up on d: it stays dead, and the tasks only it could
// run fail, those the policies hold for it included. Engine goroutine.
func (e *engine) restartFailed(d *driverInst, err error) {
	d.restarting.Store(false)
	e.noteDeadDrivers()
	dead := e.deadArch.Load()
	for _, j := range e.jobsWhere(func(j *job) bool { return j.worker < 0 && j.archMask&^dead == 0 }) {
		if e.untrack(j.id) != nil {
			e.rt.failLater(j, fmt.Errorf("%w: task %q: no live worker can run it (driver-%s exited, %w)", ErrPluginCrashed, j.name(), d.name, err))
		}
	}
}

// retryable tells whether j can run again after its driver died under it
// without giving a wrong result (see the header).
func (e *engine) retryable(j *job) bool {
	if j.retried || j.sub || j.acquire != nil || j.task == nil || e.rt.multiNode {
		return false
	}
	if x := j.ext.Load(); x != nil && x.snap != nil {
		return true
	}
	for _, m := range j.modes {
		if m&R != 0 && m&W != 0 || m&(Redux|Scratch) != 0 {
			return false
		}
	}
	return true
}

// retry pushes j, which was on worker wid of a driver that died, to the
// scheduler again, its read-write buffers restored from its snapshot.
// Engine goroutine.
func (e *engine) retry(j *job, wid int) {
	if e.untrack(j.id) == nil {
		return
	}
	e.sendDone(j.sctx, j.doneWorker(wid), j.id, 0)
	e.dropTeamCopies(j)
	j.restoreSnapshot(e.rt)
	j.retried = true
	e.faults.retried.Add(1)
	j.worker, j.posted, j.impl, j.comb = -1, false, -1, nil
	e.rt.log.Warn("retrying a task whose driver died", "task", j.name(), "worker", wid)
	e.push(j, -1)
}

// snapshot saves j's read-write buffers in the arena, for a Retryable
// codelet's task to be retried should its driver die while running it.
// From push, before the scheduler has it: its inputs are final and no one
// else may write them until it completes.
func (j *job) snapshot(rt *Runtime) error {
	var spans []base.Span
	for i, h := range j.task.Handles {
		if j.modes[i]&R == 0 || j.modes[i]&W == 0 || h.span.Size == 0 {
			spans = append(spans, base.Span{})
			continue
		}
		// The handle's own bytes: a tile's span also covers its
		// neighbours' (the leading dimension), which other tasks write.
		runs := h.ramRuns()
		s, err := rt.scratchAlloc(runsLen(runs))
		if err != nil {
			for _, s := range spans {
				if s.Size > 0 {
					rt.scratchFree(s)
				}
			}
			return fmt.Errorf("snapshot of %s for retry: %w", h, err)
		}
		streamCopy(rt.arena.Bytes(s), []wire.CopyRange{{Len: s.Size}}, rt.arena.Bytes(h.span), runs)
		spans = append(spans, s)
	}
	j.mu.Lock()
	j.x().snap = spans
	j.mu.Unlock()
	return nil
}

// restoreSnapshot copies j's snapshot back into its buffers.
func (j *job) restoreSnapshot(rt *Runtime) {
	x := j.ext.Load()
	if x == nil {
		return
	}
	for i, s := range x.snap {
		if s.Size > 0 {
			h := j.task.Handles[i]
			streamCopy(rt.arena.Bytes(h.span), h.ramRuns(), rt.arena.Bytes(s), []wire.CopyRange{{Len: s.Size}})
		}
	}
}

// dropSnapshot frees j's snapshot, once j has completed.
func (j *job) dropSnapshot(rt *Runtime) {
	x := j.ext.Load()
	if x == nil || x.snap == nil {
		return
	}
	for _, s := range x.snap {
		if s.Size > 0 {
			rt.scratchKeep(s, snapKeep)
		}
	}
	x.snap = nil
}

// onDeadWorker handles j, assigned to worker wid of a driver that died:
// it is retried when its driver restarts (or another live driver can run
// it) and running it again is safe, and fails with err otherwise. Engine
// goroutine.
func (e *engine) onDeadWorker(j *job, wid int, d *driverInst, err error) {
	if j.chain.Load()&chainOn != 0 && (d.restarting.Load() || j.archMask&^e.deadArch.Load() != 0) && e.retryable(j) {
		// A chained task is pushed again once its dependencies are
		// met, as if the policy had declined it: its predecessor died
		// with the same driver.
		if e.untrack(j.id) != nil {
			e.sendDone(j.sctx, wid, j.id, 0)
			j.retried = true
			e.faults.retried.Add(1)
			e.rt.chainUndo(j)
		}
		return
	}
	if (d.restarting.Load() || j.archMask&^e.deadArch.Load() != 0) && e.retryable(j) {
		e.retry(j, wid)
		return
	}
	j.mayHaveRun = true // queued or running there: it may have started
	e.fail(j, wid, err)
}

// snapKeep is how many snapshot buffers of a size are kept for reuse:
// a snapshot lives from push to completion, so there are as many as
// ready tasks, far more than workers.
const snapKeep = 256

// runsLen is the bytes runs cover.
func runsLen(runs []wire.CopyRange) uint64 {
	var n uint64
	for _, r := range runs {
		n += r.Len
	}
	return n
}
