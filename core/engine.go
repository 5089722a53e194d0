package core

// The engine's round; design note: docs/design/hot-path.md.

// The engine: how a ready task reaches a worker and how its completion
// comes back. docs/design/scheduling.md and hot-path.md give the figures.
//
// Processes and rings. The core, each policy instance (one per scheduling
// context, a plugin process) and each driver plugin share one arena
// (pluginapi/shm). Between them run single-producer single-consumer rings
// and doorbells:
//
//	application goroutines --Push-->      events ring    --> policy
//	engine goroutine       --Done/Workers--> events ring --> policy
//	policy                 --Assign/echo--> decisions ring --> engine
//	policy                 --Exec-->     scheduler ring  --> CPU worker
//	engine                 --Exec/Alloc/Copy/Free--> dispatch ring --> worker
//	worker                 --Completion--> completion ring --> engine
//
// The events ring has several producers (every goroutine that pushes, and
// the engine): SchedContext.mu serialises them. Every other ring has one.
//
// The round. One goroutine, locked to its thread, runs loop: it waits on
// the core's doorbell (any producer above rings it), then in order runs
// the calls other goroutines posted (engine_mailbox.go), reads every
// context's decisions (drainDecisions: dispatch, posted, acked), reads
// every worker's completions (drainCompletions: transfers end, tasks
// complete and release their successors, Done goes to the policy), posts
// what waited for room (flushOverflow), then rings the policies and the
// workers it wrote to, once each (ringHosts, ringWorkers). Every
// livenessCheckEvery it checks the plugins (checkPlugins: deaths,
// heartbeats, the watchdog, restarts). Ringing once per round, not per
// message, is what keeps a burst of completions from costing one wake-up
// each.
//
// Who owns what.
//   - The engine goroutine: the replicates and transfers of every handle
//     (mem_coherency.go), device memory, workers' overflow queues,
//     engine.xfers, the decision and completion rings' consumer side. No
//     other goroutine touches them; they hand it work with call.
//   - Any goroutine: push (a task's dependencies are met), under the
//     target context's mu; engine.jobs under jobsMu (push tracks, the
//     engine untracks).
//   - job.mu: a task's dependency counts and successors (task.go);
//     Handle.mu: a handle's access order (data_access.go). Lock order:
//     a handle's, then a job's (accessLocked adds dependencies under the
//     handle's lock), never the reverse.
//   - Policies own their queues; the core never asks a policy anything on
//     the hot path. Drivers own their workers' threads.
//
// Rejected: a gRPC call per task (tens of microseconds each way; gRPC is
// for setup and configuration only); one goroutine per worker in the core
// (with 2 cores, wake-ups between them cost more than the work; one
// engine with batched rings does not); letting application goroutines
// read completions (completion handling touches replicate state, which
// would then need a lock on every access).

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Ring capacities. The dispatch and completion rings never fill: the
// scheduler hands a worker at most QueueDepth tasks at a time. The events
// ring may fill when the application submits faster than the policy
// decides; submit then waits.
const (
	maxWorkers        = 128
	eventsRingCap     = 1 << 20
	decisionsRingCap  = 1 << 18
	dispatchRingCap   = 1 << 17
	completionRingCap = 1 << 16
	schedRingCap      = 1 << 17
	// maxPostedExec bounds the Exec a Push carries for the scheduler to
	// post: a full queue of them fits in a scheduler ring. Larger tasks
	// take the core's dispatch.
	maxPostedExec      = schedRingCap / (2 * config.MaxQueueDepth)
	livenessCheckEvery = 50 * time.Millisecond
	// queuedWork is how much predicted work the scheduler keeps queued on
	// each worker: enough to last while the engine and the policy wait for
	// a core that busy workers hold (docs/design/scheduling.md).
	queuedWork = 1000 * time.Microsecond
)

func controlBytes(workers int) uint64 {
	n := maxContexts*(shm.RingBytes(eventsRingCap)+shm.RingBytes(decisionsRingCap)+shm.BellSize) + shm.BellSize
	n += uint64(workers) * (shm.RingBytes(dispatchRingCap) + shm.RingBytes(completionRingCap) + shm.RingBytes(schedRingCap) + shm.BellSize)
	return n + shm.HeaderSize + 64*1024
}

func defaultArenaSize() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil && si.Totalram > 0 {
		return uint64(si.Totalram) * uint64(si.Unit)
	}
	return 8 << 30
}

// workerState is the core's side of one worker.
type workerState struct {
	id         int
	drv        *driverInst
	driverIdx  int
	spec       driver.WorkerSpec
	dispatch   *shm.Ring
	completion *shm.Ring
	// sched is the worker's scheduler ring (nil: none), which the policy
	// writes; the core only reads where the worker stands in it.
	sched    *shm.Ring
	bell     *shm.Bell
	mustRing bool   // the engine posted tasks since it last rang the bell
	overflow []*job // assigned tasks waiting for room in the dispatch ring
	// node is the memory node the worker computes on; ctlOverflow holds
	// device-memory messages waiting for room in the dispatch ring.
	node        int
	ctlOverflow []ctlMsg
	// archKey is the worker's key in the performance models.
	archKey string
}

// hasSchedRing: the policy may post tasks to the worker directly
// (driver.WorkerSpec.SchedRing).
func (w *workerState) hasSchedRing() bool { return w.spec.SchedRing.Size > 0 }

// engine moves tasks between the core, the scheduler and the workers: the
// application's goroutines push ready tasks to the scheduler; one engine
// goroutine turns decisions into dispatches and completions into
// dependency releases.
type engine struct {
	rt *Runtime
	// ctxs are the live scheduling contexts, the global one first; each
	// has its own policy instance and rings. Copied on change.
	ctxs        atomic.Pointer[[]*SchedContext]
	coreBell    *shm.Bell
	coreBellRef uint64

	jobsMu sync.Mutex
	jobs   jobTable // pushed to the scheduler, not yet completed (engine_jobs.go)

	// Data transfers and allocations in flight, by completion ID; device
	// buffer numbering; a clock for least-recently-used eviction. Engine
	// goroutine only.
	xfers   map[uint64]*xfer
	nextBuf uint64
	clock   uint64
	// Work other goroutines hand the engine (see call).
	callMu sync.Mutex
	calls  []func()
	ncalls atomic.Int32

	// tid is the engine goroutine's thread (it is locked to it): blocking
	// calls made there would never return (see mayBlock).
	tid atomic.Int32

	// postDriver is the index of the driver whose workers have scheduler
	// rings, or -1: the kernel index a Push's Exec carries is that
	// driver's.
	postDriver int

	// checks counts what push must look for now (see pushCheck): a broken
	// runtime (for good), each dead driver until it is restarted, each
	// lost handle until it is written anew, each task doomed by
	// Unregister until it ends. While it is zero push pays one load for
	// them all and tasks may be chained (task_chain.go); once the faults
	// are over it is zero again, so that one fault does not slow the rest
	// of the run.
	checks atomic.Int64
	// faults counts what the fault handling did (Runtime.Faults).
	faults faultCounts
	// deadArch has the bit of each architecture whose driver plugins are
	// all dead (driver.ArchBit).
	deadArch atomic.Uint32

	spinner shm.Spinner
	// inRound: the engine is draining its rings; policies are rung at the
	// end (ringHost).
	inRound   atomic.Bool
	started   bool
	stopping  atomic.Bool
	done      chan struct{}
	lastCheck time.Time
	// The watchdog's (plugin_health.go): tasks completed on workers,
	// their count at the last check and since when it has not moved, and
	// when the engine started.
	completed, wdCompleted uint64
	wdSince, startedAt     time.Time
	// wdReports say what pending tasks may wait for
	// (Runtime.AddWatchdogReport); under wdMu.
	wdMu      sync.Mutex
	wdReports []func() string
}

func newEngine(rt *Runtime) (*engine, error) {
	e := &engine{rt: rt, jobs: newJobTable(), xfers: map[uint64]*xfer{}, spinner: shm.Spinner{Spin: rt.cfg.SpinIters}, done: make(chan struct{}), postDriver: -1}
	var err error
	if e.coreBell, e.coreBellRef, err = carveBell(rt.arena); err != nil {
		return nil, err
	}
	rings, err := carveCtxRings(rt.arena, e.coreBellRef)
	if err != nil {
		return nil, err
	}
	rt.global = newContext(rt, 0, GlobalSchedContextName, rt.cfg.Sched, rings, nil)
	rt.global.sched, rt.global.proc = rt.sched, rt.schedP
	e.ctxs.Store(&[]*SchedContext{rt.global})
	return e, nil
}

func carveRing(a *shm.Arena, capacity uint64) (*shm.Ring, base.Span, error) {
	s, err := a.Carve(shm.RingBytes(capacity), 64)
	if err != nil {
		return nil, s, err
	}
	r, err := shm.InitRing(a.Bytes(s))
	return r, s, err
}

func carveBell(a *shm.Arena) (*shm.Bell, uint64, error) {
	s, err := a.Carve(shm.BellSize, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("doorbell: %w", err)
	}
	return a.Bell(s.Offset), s.Offset, nil
}

func (e *engine) addWorker(d *driverInst, unit int) (*workerState, error) {
	rt := e.rt
	w := &workerState{id: len(rt.workers), drv: d, driverIdx: -1}
	for i, di := range rt.drivers {
		if di == d {
			w.driverIdx = i
		}
	}
	var err error
	w.spec = driver.WorkerSpec{ID: w.id, Unit: unit, CoreBell: e.coreBellRef}
	if w.dispatch, w.spec.Dispatch, err = carveRing(rt.arena, dispatchRingCap); err != nil {
		return nil, fmt.Errorf("worker %d dispatch ring: %w", w.id, err)
	}
	if w.completion, w.spec.Completion, err = carveRing(rt.arena, completionRingCap); err != nil {
		return nil, fmt.Errorf("worker %d completion ring: %w", w.id, err)
	}
	if w.bell, w.spec.Bell, err = carveBell(rt.arena); err != nil {
		return nil, err
	}
	// Scheduler rings go to the RAM workers of one driver, the first that
	// reads them, so that one kernel index serves all of them.
	if d.fp.SchedRing && d.fp.Units[unit].Node == 0 && (e.postDriver < 0 || e.postDriver == w.driverIdx) {
		if w.sched, w.spec.SchedRing, err = carveRing(rt.arena, schedRingCap); err != nil {
			return nil, fmt.Errorf("worker %d scheduler ring: %w", w.id, err)
		}
		e.postDriver = w.driverIdx
	}
	rt.maxExec = shm.MaxMessage(w.dispatch)
	rt.workers = append(rt.workers, w)
	d.workers = append(d.workers, w)
	return w, nil
}

func (e *engine) start() {
	rt := e.rt
	rt.chains = !rt.cfg.NoChain && e.postDriver >= 0 && !rt.multiNode
	e.started = true
	e.lastCheck = time.Now()
	e.startedAt = e.lastCheck
	onThread := make(chan struct{})
	go e.loop(onThread)
	<-onThread // tid is set: Runtime.EngineCPU reads it
}

func (e *engine) stop() {
	if !e.started {
		return
	}
	if e.stopping.CompareAndSwap(false, true) {
		e.coreBell.Ring()
		<-e.done
	}
}

// push hands a ready task to the scheduler. A task that cannot run (the
// runtime is broken, no live worker can run it, its input was lost, its
// handle was unregistered under it) fails here, through failLater: push is
// called while releasing a predecessor's successors, and failing inline
// would recurse once per task of a chain.
func (e *engine) push(j *job, releasedBy int32) {
	if e.checks.Load() != 0 {
		if err := e.pushCheck(j); err != nil {
			if j.chain.Load()&chainOn != 0 {
				e.rt.chainUndo(j) // it meets the error once it is ready
				return
			}
			e.rt.failLater(j, err)
			return
		}
	}
	if j.cl.retryable && !e.rt.multiNode && !j.sub && e.rt.cfg.PluginRestarts > 0 {
		if x := j.ext.Load(); x == nil || x.snap == nil {
			if err := j.snapshot(e.rt); err != nil {
				e.rt.log.Debug("task pushed without a snapshot: it will not be retried", "task", j.name(), "error", err)
			}
		}
	}
	p := wire.Push{ID: j.id, Priority: int32(j.task.Priority), ArchMask: j.archMask, Worker: j.pinned, ReleasedBy: releasedBy, Codelet: j.cl.id,
		Length: [wire.NumArch]int64{-1, -1, -1}}
	e.predict(j, &p)
	e.predictParallel(j, &p) // the combined workers it may run on (task_parallel.go)
	for _, m := range j.modes {
		if m&Locality != 0 {
			p.Flags |= wire.PushLocality
		}
	}
	c := e.rt.global
	if j.ctx != nil {
		c = j.ctx
	}
	c.mu.Lock()
	if c.deleted {
		// Its tasks go to the global context, which is never deleted.
		c.mu.Unlock()
		c = e.rt.global
		c.mu.Lock()
	}
	if bp := c.broken.Load(); bp != nil {
		c.mu.Unlock()
		if j.chain.Load()&chainOn != 0 {
			e.rt.chainUndo(j) // it meets the error once it is ready
			return
		}
		e.rt.failLater(j, *bp)
		return
	}
	j.sctx = c
	if c.restarting.Load() {
		// Held for the policy's next instance (sched_restart.go).
		e.track(j)
		c.mu.Unlock()
		return
	}
	if id := j.cl.id; int(id) >= len(c.named) || !c.named[id] {
		// The policy's messages name the codelet (wire.PushName).
		if int(id) >= len(c.named) {
			c.named = append(c.named, make([]bool, int(id)+1-len(c.named))...)
		}
		c.named[id] = true
		p.Flags |= wire.PushName
		p.Name = j.cl.modelName
	}
	n := p.Len() // the header, the transfers, the implementations, the name
	i, k := e.postKernel(j, c)
	j.pushImpl = -1
	if k >= 0 {
		j.pushImpl = i
		p.Flags |= wire.PushExec
		n += wire.ExecSize(len(j.task.Handles), len(j.task.Arg))
	}
	after := j.chain.Load()&chainOn != 0
	if after {
		if k < 0 || c != e.rt.global {
			// Chained tasks travel with their Exec to the global policy
			// only: wait for the dependencies instead.
			c.mu.Unlock()
			e.rt.chainUndo(j)
			return
		}
		p.Flags |= wire.PushAfter
	}
	b, err := c.rings.events.ReserveWait(n, c.alive)
	if err == nil {
		p.Encode(b)
		if k >= 0 {
			e.encodeExec(b[p.ExecOffset():], j, k, 0, 0)
		}
		if after {
			wire.SetExecAfter(b[p.ExecOffset():], j.chainPred)
		}
		// Tracked after push's last access to j, before the policy can
		// decide on it, and under c.mu: Delete's removal message, and so
		// its move of the unassigned tasks, comes after this push.
		e.track(j)
		c.rings.events.Commit()
	} else if c.proc != nil && c.proc.Exited() && !e.stopping.Load() {
		// The policy died with its ring full: the engine restarts it and
		// hands the new instance the tasks tracked for it, or fails them.
		e.track(j)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if err != nil {
		if after {
			// It waits for its dependencies, then meets the same error.
			e.untrack(j.id)
			e.rt.chainUndo(j)
			return
		}
		e.rt.failLater(j, fmt.Errorf("push task to %s: %w", c, err))
		return
	}
	if releasedBy < 0 {
		c.rings.bell.Ring() // a submission: the policy has it at once
	} else {
		e.ringHost(c)
	}
	if k >= 0 && e.rt.chains {
		e.markPushed(j)
	}
}

// pushCheck says why j cannot be pushed, if it cannot.
func (e *engine) pushCheck(j *job) error {
	rt := e.rt
	if p := rt.broken.Load(); p != nil {
		return *p
	}
	if err := j.doomErr(); err != nil {
		return err
	}
	if dead := e.deadArch.Load(); dead != 0 {
		if j.archMask&^dead == 0 {
			return fmt.Errorf("%w: task %q: no live worker can run it (%s)", ErrPluginCrashed, j.name(), rt.deadDrivers())
		}
		if j.pinned >= 0 {
			if d := rt.workers[j.pinned].drv; d.dead.Load() && !d.restarting.Load() {
				return fmt.Errorf("%w: task %q must run on worker %d, whose driver-%s exited", ErrPluginCrashed, j.name(), j.pinned, d.name)
			}
		}
	}
	if rt.nlost.Load() > 0 {
		return j.lostInput()
	}
	return nil
}

// deadDrivers names the driver plugins that exited, for errors.
func (rt *Runtime) deadDrivers() string {
	var names []string
	for _, d := range rt.drivers {
		if d.dead.Load() {
			p, _ := d.current()
			names = append(names, fmt.Sprintf("driver-%s (pid %d) %s", d.name, p.Pid(), exitNote(p)))
		}
	}
	return strings.Join(names, ", ")
}

// noteDeadDrivers recomputes deadArch after drivers died.
func (e *engine) noteDeadDrivers() {
	var live, all uint32
	for _, d := range e.rt.drivers {
		if len(d.workers) == 0 {
			continue
		}
		bit := driver.ArchBit(d.fp.Arch)
		all |= bit
		if !d.dead.Load() || d.restarting.Load() {
			live |= bit
		}
	}
	e.deadArch.Store(all &^ live)
}

// ringHost wakes c's policy: at once, or at the end of the engine's round
// when one is under way, so that a policy woken by the first of a batch of
// completions does not take the CPU from the engine still releasing the
// rest.
func (e *engine) ringHost(c *SchedContext) {
	if e.inRound.Load() {
		c.hostRing.Store(true)
		// Either the engine's ringHosts, after its round, sees the flag,
		// or this sees the round over.
		if e.inRound.Load() {
			return
		}
	}
	c.rings.bell.Ring()
}

func (rt *Runtime) push(j *job, releasedBy int32) { rt.engine.push(j, releasedBy) }

// schedUsable is the per-message check: a dead scheduler is recorded in
// rt.broken by checkPlugins.
func (e *engine) schedUsable() bool {
	return !e.stopping.Load() && e.rt.broken.Load() == nil
}

// track publishes j, after push's last access to it: the engine finds it
// in jobs once the scheduler has decided.
func (e *engine) track(j *job) {
	e.jobsMu.Lock()
	e.jobs.put(j)
	e.jobsMu.Unlock()
}

func (e *engine) untrack(id uint64) *job {
	e.jobsMu.Lock()
	j := e.jobs.take(id)
	e.jobsMu.Unlock()
	return j
}

func (e *engine) lookup(id uint64) *job {
	e.jobsMu.Lock()
	j := e.jobs.get(id)
	e.jobsMu.Unlock()
	return j
}

// loop is the engine's goroutine.
func (e *engine) loop(onThread chan<- struct{}) {
	runtime.LockOSThread()
	e.tid.Store(int32(syscall.Gettid()))
	close(onThread)
	defer func() {
		for _, c := range *e.ctxs.Load() {
			c.failAcks(ErrShutdown, false)
		}
		e.tid.Store(0)
		close(e.done)
	}()
	// Every producer rings after its message (a worker may ring once for
	// a batch of completions: cpudriver's backlog), so the engine waits
	// for a ring since it last looked rather than polling every ring.
	var seq uint32
	rung := func() bool { return e.coreBell.Seq() != seq || e.ncalls.Load() > 0 || e.stopping.Load() }
	for {
		seq = e.coreBell.Seq()
		e.inRound.Store(true)
		e.runCalls()
		e.drainDecisions()
		e.drainCompletions()
		e.flushOverflow()
		e.ringHosts()
		e.ringWorkers()
		if time.Since(e.lastCheck) >= livenessCheckEvery {
			e.checkPlugins()
		}
		if e.rt.trace != nil {
			e.rt.trace.flushRound() // after the rings: off the hop (task_trace.go)
		}
		if e.stopping.Load() {
			return
		}
		// A worker running a long task may hold the completions it
		// batched before it: look again after queuedWork at the latest.
		timeout := livenessCheckEvery
		if e.inFlight() {
			timeout = queuedWork
		}
		e.spinner.Wait(e.coreBell, rung, timeout)
	}
}

// inFlight reports whether tasks are with the scheduler or the workers.
func (e *engine) inFlight() bool {
	e.jobsMu.Lock()
	n := e.jobs.len()
	e.jobsMu.Unlock()
	return n > 0
}

func (e *engine) drainDecisions() {
	for _, c := range *e.ctxs.Load() {
		e.drainContext(c)
	}
}

// drainContext reads one context's decisions: assignments, and the echoes
// of Workers messages.
func (e *engine) drainContext(c *SchedContext) {
	var a wire.Assign
	d := c.rings.decisions
	for msg := d.Peek(); msg != nil; msg = d.Peek() {
		switch wire.Type(msg) {
		case wire.TypeAssign:
			if a.Decode(msg) == nil {
				d.Release()
				if a.Flags&wire.AssignDeclined != 0 {
					e.chainDeclined(a.ID)
				} else if a.Flags&wire.AssignPosted != 0 {
					e.posted(c, &a)
				} else {
					e.dispatch(&a)
				}
				continue
			}
		case wire.TypeWorkers:
			var w wire.Workers
			if w.Decode(msg) == nil {
				d.Release()
				c.acked(w.Seq)
				continue
			}
		}
		e.rt.log.Error("scheduler sent a malformed decision", "context", c.name, "type", wire.Type(msg), "len", len(msg))
		d.Release()
	}
}

// ringWorkers wakes the workers that were posted tasks.
func (e *engine) ringWorkers() {
	for _, w := range e.rt.workers {
		if w.mustRing {
			w.mustRing = false
			w.bell.Ring()
		}
	}
}

// dispatch sends task id to worker wid.
func (e *engine) dispatch(a *wire.Assign) {
	wid, id := int(a.Worker), a.ID
	j := e.lookup(id)
	if j == nil {
		e.rt.log.Error("scheduler assigned an unknown task", "task", id, "worker", wid)
		return
	}
	if j.worker >= 0 {
		// Run twice, a read-write task would corrupt its data.
		e.rt.log.Error("scheduler assigned a task twice: ignored", "task", j.name(), "worker", wid, "first", j.worker)
		return
	}
	if c := e.rt.combinedByID(wid); c != nil {
		e.dispatchTeam(j, c, a) // task_parallel.go
		return
	}
	if wid < 0 || wid >= len(e.rt.workers) {
		e.fail(j, wid, fmt.Errorf("scheduler assigned task to worker %d, which does not exist", wid))
		return
	}
	if j.pinned >= 0 && wid != int(j.pinned) {
		e.fail(j, wid, fmt.Errorf("scheduler assigned task %q to worker %d; it must run on worker %d", j.name(), wid, j.pinned))
		return
	}
	w := e.rt.workers[wid]
	if a.Flags&wire.AssignImpl != 0 {
		if err := e.rt.policyImpl(j, w, a.Impl); err != nil {
			e.fail(j, wid, err)
			return
		}
	}
	j.worker = int32(wid)
	e.enqueue(w, j)
}

// posted records that c's policy posted task id to worker wid's scheduler
// ring itself, with the implementation it chose, if it did. The task may
// have completed already: the echo follows the Exec by a ring, and the
// completion by the worker.
func (e *engine) posted(c *SchedContext, a *wire.Assign) {
	wid, id := int(a.Worker), a.ID
	j := e.lookup(id)
	if j == nil {
		return // completed
	}
	if c != e.rt.global || wid < 0 || wid >= len(e.rt.workers) || !e.rt.workers[wid].hasSchedRing() {
		e.fail(j, wid, fmt.Errorf("scheduler says it posted task %q to worker %d, which has no scheduler ring", j.name(), wid))
		return
	}
	w := e.rt.workers[wid]
	if a.Flags&wire.AssignImpl != 0 {
		if err := e.rt.policyImpl(j, w, a.Impl); err != nil {
			// The worker may be running it with whatever kernel the policy
			// wrote: its result cannot be trusted.
			e.fail(j, wid, err)
			return
		}
	}
	if j.impl < 0 && j.pushImpl >= 0 {
		// The kernel in the Exec the policy posted: the model may have
		// changed its mind since push chose it.
		j.impl = j.pushImpl
	}
	j.worker, j.posted = int32(wid), true
	if w.drv.dead.Load() {
		e.onDeadWorker(j, wid, w.drv, fmt.Errorf("%w: driver-%s is gone; worker %d cannot run task %q", ErrPluginCrashed, w.drv.name, wid, j.name()))
		return
	}
	e.rt.assign(j, w)
	j.queued(w, w.sched, a.At)
	e.notePrediction(j, w)
	if j.chain.Load()&chainOn != 0 {
		e.rt.chainAccepted(j)
	}
}

// enqueue posts j to w, behind the tasks already waiting for room.
func (e *engine) enqueue(w *workerState, j *job) {
	if len(w.overflow) > 0 || !e.post(w, j) {
		w.overflow = append(w.overflow, j)
	}
}

// post writes task j into w's dispatch ring; false when the ring has no
// room now. The engine never waits for a worker: it would not drain the
// worker's completions meanwhile.
func (e *engine) post(w *workerState, j *job) bool {
	if j.isMemberCopy(w) {
		return e.postMember(w, j) // a team's (task_parallel.go)
	}
	if w.drv.dead.Load() {
		j.worker = int32(w.id)
		e.onDeadWorker(j, w.id, w.drv, fmt.Errorf("%w: driver-%s is gone; worker %d cannot run task %q", ErrPluginCrashed, w.drv.name, w.id, j.name()))
		return true
	}
	k := e.rt.assign(j, w)
	if k < 0 {
		e.fail(j, w.id, fmt.Errorf("%w: scheduler assigned task %q to worker %d (%s), which has no kernel for it", ErrNoWorker, j.name(), w.id, w.drv.fp.Arch))
		return true
	}
	if j.comb != nil {
		e.notePredictionTeam(j)
	} else {
		e.notePrediction(j, w)
	}
	t := j.task
	if j.sub && !e.prepareSub(j, w) {
		return true // failed, or posted again once its REDUX buffers are initialised
	}
	if e.rt.multiNode {
		ready, err := e.prepare(j, w)
		if err != nil {
			e.fail(j, w.id, fmt.Errorf("task %q on worker %d: %w", j.name(), w.id, err))
			return true
		}
		if !ready {
			return true // posted again once its data is in place
		}
	}
	if len(w.ctlOverflow) > 0 {
		// Control messages first: an Exec may need what they say
		// (wire.Parts) before the worker runs it.
		if e.flushCtl(w); len(w.ctlOverflow) > 0 {
			return false
		}
	}
	b := w.dispatch.Reserve(wire.ExecSize(len(t.Handles), len(t.Arg)) + j.teamLen())
	if b == nil {
		return false
	}
	e.encodeExec(b, j, k, j.cl.execFlags(w.driverIdx, j.impl)|j.teamFlags(), w.node)
	j.putTeam(b)
	j.queued(w, w.dispatch, w.dispatch.ReservedAt())
	w.dispatch.Commit()
	w.mustRing = true
	if j.comb != nil {
		e.postTeam(j) // and to the other members, in this step
	}
	return true
}

// encodeExec writes j's Exec, with kernel index k and wire flags, for a
// worker on memory node into b (wire.ExecSize bytes).
func (e *engine) encodeExec(b []byte, j *job, k int32, flags uint32, node int) {
	t := j.task
	wire.PutExecHeader(b, j.id, uint32(k), flags, len(t.Handles), len(t.Arg))
	p := b[wire.ExecHeaderSize:]
	hs, modes := t.Handles, j.modes
	if j.sub {
		hs, modes = j.buffers()
	}
	for i, h := range hs {
		d := wire.BufferDesc{Offset: h.span.Offset, Mode: modes[i] &^ (Locality | Commute), Layout: h.layout}
		if node != 0 {
			d.Node, d.Offset, d.Layout = uint8(e.rt.nodes[node].local), h.reps[node].buf, h.nodeLayout(node)
		}
		wire.EncodeBuffer(p, &d)
		p = p[wire.BufferDescSize:]
	}
	copy(p, t.Arg)
}

// postKernel is the implementation and the kernel index j runs with on the workers that have a
// scheduler ring, when its Exec can travel with its Push to c's policy, or
// -1, -1. It can when c is the global context (the one policy writing those
// rings), RAM is the only memory node (nothing to fetch, pin or invalidate
// at dispatch), j has no per-worker buffers (SCRATCH, REDUX), and the
// implementation it runs is known before a worker is (not round-robin
// while calibrating). Called by push, from any goroutine: it only reads;
// the engine sets j.impl to the same choice once it learns where j runs.
func (e *engine) postKernel(j *job, c *SchedContext) (int8, int32) {
	return e.postKernelImpl(j, c, int(j.impl))
}

// postKernelImpl is postKernel for a job whose implementation is i (-1:
// not chosen yet). Chaining asks it of jobs the engine may be assigning
// as it asks: it must not read their impl.
func (e *engine) postKernelImpl(j *job, c *SchedContext, i int) (int8, int32) {
	rt := e.rt
	if e.postDriver < 0 || c != rt.global || rt.multiNode || j.sub || j.cl.par {
		return -1, -1
	}
	if n := wire.ExecSize(len(j.task.Handles), len(j.task.Arg)); n > maxPostedExec {
		return -1, -1
	}
	d := e.postDriver
	if i < 0 {
		mask := j.implMaskOf(d)
		if mask == 0 || (rt.calibrate && mask&(mask-1) != 0) {
			return -1, -1
		}
		i = rt.defaultImpl(j, d, mask)
	}
	return int8(i), j.cl.impls[d][i]
}

// flushOverflow posts the tasks that found a worker's ring full.
func (e *engine) flushOverflow() {
	for _, w := range e.rt.workers {
		if len(w.ctlOverflow) > 0 {
			e.flushCtl(w)
		}
		n := 0
		for n < len(w.overflow) && e.post(w, w.overflow[n]) {
			n++
		}
		if n > 0 {
			clear(w.overflow[:n])
			w.overflow = w.overflow[n:]
		}
	}
}

// fail completes a task that was assigned but could not run, returning the
// worker's slot to the scheduler.
func (e *engine) fail(j *job, wid int, err error) {
	if e.untrack(j.id) == nil {
		return // failed already, e.g. by its transfers when a driver died
	}
	e.dropTeamCopies(j)
	e.dropData(j, false)
	e.sendDone(j.sctx, j.doneWorker(wid), j.id, 0)
	e.rt.complete(j, -1, err)
}

// sendDone returns a worker's slot to the context whose policy assigned
// the task.
func (e *engine) sendDone(c *SchedContext, wid int, id uint64, dur int64) {
	if c == nil || c.stopped || !e.schedUsable() || c.broken.Load() != nil || c.restarting.Load() {
		return
	}
	d := wire.Done{Worker: int32(wid), ID: id, DurationNs: dur}
	c.mu.Lock()
	b, err := c.rings.events.ReserveWait(wire.DoneSize, c.alive)
	if err == nil {
		d.Encode(b)
		c.rings.events.Commit()
	}
	c.mu.Unlock()
	e.ringHost(c)
}

// ringHosts ends the engine's round: it wakes the policies sent events
// during it.
func (e *engine) ringHosts() {
	e.inRound.Store(false)
	for _, c := range *e.ctxs.Load() {
		if c.hostRing.Swap(false) {
			c.rings.bell.Ring()
		}
	}
}

// xferDone takes the transfer a completion ends, if it ends one: with RAM
// only there are none and the map is never probed.
func (e *engine) xferDone(id uint64) *xfer {
	if len(e.xfers) == 0 {
		return nil
	}
	x := e.xfers[id]
	if x != nil {
		delete(e.xfers, id)
	}
	return x
}

func (e *engine) drainCompletions() {
	var c wire.Completion
	for _, w := range e.rt.workers {
		if w.drv.fenced {
			e.dropStale(w)
			continue
		}
		for msg := w.completion.Peek(); msg != nil; msg = w.completion.Peek() {
			if wire.Type(msg) != wire.TypeCompletion || c.Decode(msg) != nil {
				e.rt.log.Error("worker sent a malformed completion", "worker", w.id, "type", wire.Type(msg))
				w.completion.Release()
				continue
			}
			if x := e.xferDone(c.ID); x != nil {
				if e.rt.trace != nil {
					e.rt.trace.xferDone(c.ID, c.StartNs, c.EndNs, c.Failed)
					e.rt.trace.slept(w.id, c.SleepStartNs, c.SleepEndNs)
				}
				var err error
				if c.Failed {
					err = fmt.Errorf("worker %d (%s): %s", w.id, w.drv.fp.Arch, c.Err)
				}
				w.completion.Release()
				e.finishXfer(x, err)
				continue
			}
			j := e.untrack(c.ID)
			if j != nil && j.worker >= 0 && int(j.worker) != w.id {
				// A driver may only complete what its own worker ran; the
				// real completion comes from the worker that has it.
				e.track(j)
				e.rt.log.Error("worker completed a task assigned to another worker: ignored", "worker", w.id, "task", j.name(), "assigned", j.worker)
				w.completion.Release()
				continue
			}
			var err error
			e.completed++
			if j != nil && c.Failed {
				// A task refused unrun left its data as they were.
				j.mayHaveRun = !c.NotRun
				err = fmt.Errorf("%w: task %q on worker %d (%s): %s", ErrTaskFailed, j.name(), w.id, w.drv.fp.Arch, c.Err)
			}
			w.completion.Release()
			if j == nil {
				e.rt.log.Error("worker completed an unknown task", "worker", w.id, "task", c.ID)
				continue
			}
			if j.worker < 0 && j.sctx != nil && j.manyImpls(w.driverIdx) {
				// Posted by the scheduler, its Assign not read yet: read
				// it first, for the implementation the task ran with
				// (with one, there is nothing to learn from it).
				e.track(j)
				e.drainContext(j.sctx)
				if e.untrack(j.id) == nil {
					continue // the Assign was refused, failing the task
				}
			}
			if j.worker < 0 { // posted by the scheduler, echo not read yet
				j.worker, j.posted = int32(w.id), true
				e.rt.assign(j, w)
				j.status.Store(uint32(StatusRunning)) // ran: where it lay no longer matters
				e.notePrediction(j, w)                // before record adds this run
				if j.chain.Load()&chainOn != 0 {
					e.rt.chainAccepted(j)
				}
			}
			if c.Skipped {
				if j.chain.Load()&chainOn != 0 {
					e.chainSkipped(j, w)
					continue
				}
				// Only a chained task may be skipped: the task did not
				// run, and nothing will run it.
				err = fmt.Errorf("%w: task %q: worker %d (%s) skipped it, but it was not queued behind another task", ErrTaskFailed, j.name(), w.id, w.drv.fp.Arch)
			}
			j.start, j.end = c.StartNs, c.EndNs
			if e.rt.trace != nil {
				e.rt.traceTask(w.id, j, c.StartNs, c.EndNs, c.SleepStartNs, c.SleepEndNs, err != nil)
			}
			wt := e.dropData(j, err == nil)
			if err == nil {
				if j.comb != nil {
					e.recordTeam(j, c.EndNs-c.StartNs)
				} else {
					e.record(j, w, c.EndNs-c.StartNs)
				}
			}
			e.sendDone(j.sctx, j.doneWorker(w.id), j.id, c.EndNs-c.StartNs)
			if wt != nil {
				// The task completes once its writes are through.
				wid := int32(w.id)
				wt.seal(func() { e.rt.complete(j, wid, nil) })
				continue
			}
			e.rt.complete(j, int32(w.id), err)
		}
	}
}

// checkPlugins fails the tasks held by plugin processes that died.
func (e *engine) checkPlugins() {
	e.lastCheck = time.Now()
	e.checkHeartbeats()
	e.watchdog(e.lastCheck)
	rt := e.rt
	var died []*driverInst
	for _, d := range rt.drivers {
		if d.proc == nil || d.dead.Load() || !d.proc.Exited() {
			continue
		}
		d.dead.Store(true)
		e.checks.Add(1) // until restartDriver swaps a new process in
		rt.log.Error("driver plugin "+exitNote(d.proc), "driver", d.name, "pid", d.proc.Pid())
		rt.tracePluginExit("driver-"+d.name, d.proc)
		died = append(died, d)
	}
	if len(died) > 0 {
		// The fence (plugin_restart.go, "Completions after a death"):
		// what the dead processes committed to their completion rings
		// before dying is the outcome of the runs dispatched to them, and
		// is applied now, before any of their tasks is failed or retried;
		// from here on nothing read from their rings is applied.
		e.drainCompletions()
		for _, d := range died {
			d.fenced = true
			e.faults.deaths.Add(1)
		}
	}
	// A dead driver's transfers and allocations never complete: fail them,
	// at every check since finishing one may post another there, so that
	// nothing waits for them (tasks, acquisitions, write-through,
	// prefetches). Before its tasks: those waiting for the transfers fail
	// through them.
	if len(e.xfers) > 0 {
		var lost []*xfer
		for id, x := range e.xfers {
			if d := x.runner(); d != nil && d.dead.Load() {
				delete(e.xfers, id)
				lost = append(lost, x)
			}
		}
		for _, x := range lost {
			d := x.runner()
			e.finishXfer(x, fmt.Errorf("%w: driver-%s (pid %d) %s during a transfer on %s", ErrPluginCrashed, d.name, d.proc.Pid(), exitNote(d.proc), x.dev.name))
		}
	}
	spent := map[*driverInst]string{}
	for _, d := range died {
		// First: the policies let go of its workers before any of its
		// tasks is pushed again.
		if rt.canRestart(d) {
			e.beginRestart(d)
		} else if n := rt.cfg.RestartsFor("driver-" + d.name); d.restarts >= n {
			// Said in the errors: why it stays dead.
			if n == 0 {
				spent[d] = " (not restarted: plugin_restarts is 0)"
			} else {
				spent[d] = fmt.Sprintf(" (not restarted: its %d restarts, plugin_restarts, are spent)", n)
			}
		}
	}
	if len(died) > 0 {
		e.noteDeadDrivers()
	}
	for _, d := range died {
		for _, j := range e.jobsWhere(func(j *job) bool { return j.worker >= 0 && rt.workers[j.worker].drv == d }) {
			e.onDeadWorker(j, int(j.worker), d, fmt.Errorf("%w: driver-%s (pid %d) %s while task %q was on worker %d%s", ErrPluginCrashed, d.name, d.proc.Pid(), exitNote(d.proc), j.name(), j.worker, spent[d]))
		}
		e.wipeNodes(d, fmt.Errorf("%w: driver-%s (pid %d) %s", ErrPluginCrashed, d.name, d.proc.Pid(), exitNote(d.proc)))
	}
	for _, c := range *e.ctxs.Load() {
		if c.proc == nil || c.restarting.Load() || c.broken.Load() != nil || rt.broken.Load() != nil || !c.proc.Exited() {
			continue
		}
		rt.tracePluginExit("sched-"+c.policy, c.proc)
		// Its last decisions first: the tasks it assigned run.
		e.drainContext(c)
		if why := e.schedRestartBlocked(c); why != "" {
			rt.log.Error("scheduler plugin exited", "context", c.name, "sched", c.policy, "restart", why)
			e.schedDied(c, fmt.Errorf("%w: scheduler sched-%s of %s (pid %d) %s", ErrPluginCrashed, c.policy, c, c.proc.Pid(), exitNote(c.proc)))
			continue
		}
		e.beginSchedRestart(c)
	}
}

func (e *engine) jobsWhere(pred func(*job) bool) []*job {
	e.jobsMu.Lock()
	defer e.jobsMu.Unlock()
	var out []*job
	e.jobs.each(func(j *job) bool {
		if pred(j) {
			out = append(out, j)
		}
		return true
	})
	return out
}

func (j *job) name() string {
	if j.task == nil {
		return "acquire"
	}
	if j.task.Name != "" {
		return j.task.Name
	}
	if j.task.Codelet != nil {
		return j.task.Codelet.Name
	}
	return "sync"
}
