package core

// Scheduling contexts; design note: docs/design/scheduling.md.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// maxContexts bounds the scheduling contexts alive at once, the global one
// included (StarPU's STARPU_NMAX_SCHED_CTXS is 10 by default): their rings
// come from the arena's control region, sized at Init.
const maxContexts = 16

// GlobalSchedContextName names the context that holds every worker at Init.
const GlobalSchedContextName = "global"

// ErrSchedContextDeleted is the error of work given to a scheduling context
// that was deleted.
var ErrSchedContextDeleted = errors.New("scheduling context is deleted")

// ctxRings are one policy instance's rings and doorbell; the instance rings
// the engine's bell.
type ctxRings struct {
	events, decisions *shm.Ring
	bell              *shm.Bell
	refs              sched.RingRefs
}

func carveCtxRings(a *shm.Arena, coreBell uint64) (*ctxRings, error) {
	r := &ctxRings{refs: sched.RingRefs{CoreBell: coreBell}}
	var err error
	if r.events, r.refs.Events, err = carveRing(a, eventsRingCap); err != nil {
		return nil, fmt.Errorf("scheduler events ring: %w", err)
	}
	if r.decisions, r.refs.Decisions, err = carveRing(a, decisionsRingCap); err != nil {
		return nil, fmt.Errorf("scheduler decisions ring: %w", err)
	}
	if r.bell, r.refs.Bell, err = carveBell(a); err != nil {
		return nil, err
	}
	return r, nil
}

// reset empties rings a deleted context left, for a new context.
func (r *ctxRings) reset(a *shm.Arena) error {
	var err error
	if r.events, err = shm.InitRing(a.Bytes(r.refs.Events)); err != nil {
		return err
	}
	r.decisions, err = shm.InitRing(a.Bytes(r.refs.Decisions))
	return err
}

// SchedContext is a scheduling context, StarPU's sched_ctx: a set of workers
// scheduled by their own instance of a policy (its own plugin process, or
// in-process instance, with its own rings). Tasks whose Task.SchedContext is set
// go to that instance; the others go to the global context, which holds
// every worker at Init and runs the configured policy. A worker may belong
// to several contexts: each instance counts its own tasks on the worker.
// (Named so that it is never mistaken for a context.Context, which the
// runtime's calls also take.)
type SchedContext struct {
	rt     *Runtime
	id     int
	name   string
	policy string
	rings  *ctxRings
	sched  sched.Scheduler
	proc   *loader.Plugin // nil in process

	// mu serialises the events ring's producers and guards deleted,
	// workers and seq: a push that finds the context alive writes its Push
	// before Delete's removal message.
	mu sync.Mutex
	// hostRing: events were sent during the engine's round, whose end
	// rings the policy's bell once (engine.ringHost).
	hostRing atomic.Bool
	deleted  bool
	workers  []int
	seq      uint64
	// named[c]: codelet c's name went to the policy's current instance
	// (wire.PushName). Under mu.
	named []bool

	// broken holds why the context cannot schedule (its plugin died).
	broken atomic.Pointer[error]
	// restarting: a new instance of the dead policy is starting; push
	// tracks its tasks without writing them (sched_restart.go). Set and
	// cleared under mu; restarts counts the restarts (engine goroutine).
	restarting atomic.Bool
	restarts   int
	// cfg is the policy's configuration when WithPolicyConfig gave one
	// (nil: its plugin block), kept to configure a restarted instance.
	cfg base.Config
	// stopped is set by the engine goroutine once a deleted context's
	// queued tasks have moved: completions no longer reach its policy.
	stopped bool

	// pending counts the tasks submitted to the context and not finished.
	pending atomic.Int64
	idleMu  sync.Mutex
	idle    *sync.Cond
	// nWaiters counts the WaitForNSubmitted calls asleep on idle, which
	// need a broadcast at every completion, not only the last.
	nWaiters atomic.Int32

	acksMu sync.Mutex
	acks   map[uint64]*ackWait
}

// ackWait is a Workers message waiting for the policy's echo.
type ackWait struct {
	done chan struct{}
	err  error
	then func() // run on the engine goroutine when the echo arrives
}

// ctxTable is the runtime's side of its scheduling contexts (the live list
// is the engine's, engine.ctxs): mu serialises creating and deleting
// contexts, and guards freeRings, the rings of deleted contexts kept for
// new ones.
type ctxTable struct {
	mu        sync.Mutex
	freeRings []*ctxRings
}

func newContext(rt *Runtime, id int, name, policy string, rings *ctxRings, workers []int) *SchedContext {
	c := &SchedContext{rt: rt, id: id, name: name, policy: policy, rings: rings, workers: workers, acks: map[uint64]*ackWait{}}
	c.idle = sync.NewCond(&c.idleMu)
	return c
}

// Name is the context's name.
func (c *SchedContext) Name() string { return c.name }

// ID numbers the context; the global context is 0.
func (c *SchedContext) ID() int { return c.id }

// Policy is the name of the context's scheduling policy.
func (c *SchedContext) Policy() string { return c.policy }

// Workers lists the IDs of the context's workers.
func (c *SchedContext) Workers() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.workers)
}

// String names the context and its policy, for errors and logs.
func (c *SchedContext) String() string { return fmt.Sprintf("context %q (%s)", c.name, c.policy) }

// alive is the check while waiting for room in the context's events ring.
func (c *SchedContext) alive() bool {
	e := c.rt.engine
	return !e.stopping.Load() && c.broken.Load() == nil && c.rt.broken.Load() == nil && (c.proc == nil || !c.proc.Exited())
}

// SchedContextOption changes how CreateSchedContext sets up a context.
type SchedContextOption func(*config.Context)

// WithPolicyConfig configures the context's policy instance with cfg (the
// attributes of a plugin config block) instead of the policy's plugin block
// in the config file.
func WithPolicyConfig(cfg base.Config) SchedContextOption {
	return func(x *config.Context) { x.Config = cfg }
}

// CreateSchedContext starts a scheduling context named name over the workers
// (IDs from Workers) with its own instance of policy ("" for the runtime's
// policy). The workers stay in the other contexts they belong to; remove
// them from the global context (GlobalSchedContext().RemoveWorkers) to dedicate
// them.
func (rt *Runtime) CreateSchedContext(name string, workers []int, policy string, opts ...SchedContextOption) (*SchedContext, error) {
	x := config.Context{Name: name, Workers: workers, Sched: policy}
	for _, o := range opts {
		o(&x)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rt.createContext(ctx, x)
}

// SchedContext returns the context named name.
func (rt *Runtime) SchedContext(name string) (*SchedContext, error) {
	rt.ctxs.mu.Lock()
	defer rt.ctxs.mu.Unlock()
	var names []string
	for _, c := range *rt.engine.ctxs.Load() {
		if c.name == name {
			return c, nil
		}
		names = append(names, c.name)
	}
	return nil, fmt.Errorf("no scheduling context %q (contexts: %s)", name, strings.Join(names, ", "))
}

// GlobalSchedContext is the context that holds every worker at Init and runs
// the configured policy; tasks with no SchedContext go there.
func (rt *Runtime) GlobalSchedContext() *SchedContext { return rt.global }

// SchedContexts lists the live scheduling contexts, the global one first.
func (rt *Runtime) SchedContexts() []*SchedContext {
	return slices.Clone(*rt.engine.ctxs.Load())
}

func (rt *Runtime) createContext(ctx context.Context, x config.Context) (_ *SchedContext, err error) {
	if err := rt.usable(); err != nil {
		return nil, err
	}
	x = rt.cfg.ResolveContextSched(x) // StarPU's aliases: a context may be dmdas or dmdar
	if strings.TrimSpace(x.Name) == "" {
		return nil, errors.New("create scheduling context: empty name")
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("create scheduling context %q: %w", x.Name, fmt.Errorf(format, args...))
	}
	if len(x.Workers) == 0 {
		return nil, fail("no workers")
	}
	if err := rt.checkWorkerIDs(x.Workers); err != nil {
		return nil, fail("%w", err)
	}
	if x.Sched == "" {
		x.Sched = rt.cfg.Sched
	}
	rt.ctxs.mu.Lock()
	defer rt.ctxs.mu.Unlock()
	live := *rt.engine.ctxs.Load()
	for _, c := range live {
		if c.name == x.Name {
			return nil, fail("a context of that name exists")
		}
	}
	if len(live) >= maxContexts {
		return nil, fail("too many contexts: at most %d at once", maxContexts)
	}
	s, proc, err := rt.startPolicy(ctx, x.Sched)
	if err != nil {
		return nil, fail("%w", err)
	}
	defer func() {
		if err != nil && proc != nil {
			proc.Kill()
		}
	}()
	if x.Config != nil {
		err = rt.applyConfig(ctx, s, "sched-"+x.Sched, x.Config)
	} else {
		err = rt.configure(ctx, s, "sched-"+x.Sched)
	}
	if err != nil {
		return nil, fail("%w", err)
	}
	var rings *ctxRings
	if n := len(rt.ctxs.freeRings); n > 0 {
		rings = rt.ctxs.freeRings[n-1]
		if err := rings.reset(rt.arena); err != nil {
			return nil, fail("reuse rings: %v", err)
		}
	} else if rings, err = carveCtxRings(rt.arena, rt.engine.coreBellRef); err != nil {
		return nil, fail("%w", err)
	}
	id := 0
	for _, c := range live {
		id = max(id, c.id)
	}
	c := newContext(rt, id+1, x.Name, x.Sched, rings, slices.Clone(x.Workers))
	c.sched, c.proc, c.cfg = s, proc, x.Config
	if proc == nil {
		// An in-process policy's thread needs a P, as the global one's.
		rt.reserveThreads(1)
	}
	if err := s.Init(ctx, rt.schedInit(x.Workers, rings)); err != nil {
		return nil, fail("policy %s: init: %w", x.Sched, err)
	}
	if n := len(rt.ctxs.freeRings); n > 0 && rt.ctxs.freeRings[n-1] == rings {
		rt.ctxs.freeRings = rt.ctxs.freeRings[:n-1]
	}
	next := append(slices.Clone(live), c)
	rt.engine.ctxs.Store(&next)
	return c, nil
}

// schedInit is the InitRequest of a policy instance scheduling workers.
func (rt *Runtime) schedInit(workers []int, rings *ctxRings) *sched.InitRequest {
	req := &sched.InitRequest{Rings: rings.refs, QueueDepth: rt.cfg.QueueDepth, MaxQueueDepth: config.MaxQueueDepth,
		QueuedWork: queuedWork, SpinIters: rt.cfg.SpinIters, Combined: rt.schedCombined()}
	for _, id := range workers {
		w := rt.workers[id]
		req.Workers = append(req.Workers, sched.Worker{ID: w.id, Arch: w.drv.fp.Arch, Node: w.node})
	}
	// The global policy writes the workers' scheduler rings, whichever of
	// them it starts with: a worker removed and added back keeps its ring.
	if rings == rt.global.rings {
		for _, w := range rt.workers {
			if w.hasSchedRing() {
				req.WorkerRings = append(req.WorkerRings, sched.WorkerRing{Worker: w.id, Ring: w.spec.SchedRing, Bell: w.spec.Bell})
			}
		}
	}
	return req
}

// startPolicy starts a new instance of the named policy: a plugin process
// from the plugin directory, or the in-process factory for the runtime's
// own policy when Options.Scheduler gave one.
func (rt *Runtime) startPolicy(ctx context.Context, name string) (sched.Scheduler, *loader.Plugin, error) {
	if rt.schedFactory != nil && name == rt.cfg.Sched {
		s, err := rt.schedFactory(rt.arena, rt.log)
		if err != nil {
			return nil, nil, fmt.Errorf("in-process scheduler: %w", err)
		}
		return s, nil, nil
	}
	if rt.cands == nil {
		cands, where, err := findPlugins(rt.cfg)
		if err != nil {
			return nil, nil, err
		}
		rt.cands, rt.pluginsWhere = cands, where
	}
	c, ok := rt.cands["sched-"+name]
	if !ok {
		return nil, nil, fmt.Errorf("unknown scheduling policy %q: no plugin sched-%s %s (available: %v)", name, name, rt.pluginsWhere, available(rt.cands, base.KindScheduler))
	}
	p, err := rt.launch(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	s, err := p.Scheduler()
	if err != nil {
		p.Kill()
		return nil, nil, err
	}
	return s, p, nil
}

// applyConfig validates cfg against p's schema and applies it.
func (rt *Runtime) applyConfig(ctx context.Context, p base.Plugin, name string, cfg base.Config) error {
	schema, err := p.ConfigSchema(ctx)
	if err != nil {
		return fmt.Errorf("plugin %s: config schema: %w", name, err)
	}
	if err := schema.Validate(cfg); err != nil {
		return fmt.Errorf("config for plugin %s: %w", name, err)
	}
	if err := p.SetConfig(ctx, cfg); err != nil {
		return fmt.Errorf("plugin %s: set config: %w", name, err)
	}
	return nil
}

// checkWorkerIDs rejects unknown and repeated worker IDs.
func (rt *Runtime) checkWorkerIDs(ids []int) error {
	seen := map[int]bool{}
	for _, id := range ids {
		if id < 0 || id >= len(rt.workers) {
			return fmt.Errorf("unknown worker %d (workers are 0..%d)", id, len(rt.workers)-1)
		}
		if seen[id] {
			return fmt.Errorf("worker %d given twice", id)
		}
		seen[id] = true
	}
	return nil
}

// AddWorkers adds workers to the context while it runs. It returns once the
// policy has them. Call it from the application, never from a task's
// callback (the engine thread that runs callbacks reads the policy's
// answer).
func (c *SchedContext) AddWorkers(ids ...int) error {
	return c.changeWorkers(wire.WorkersAdd, ids)
}

// RemoveWorkers removes workers from the context while it runs. Tasks
// already assigned to them finish there; tasks the policy had queued for
// them go to the context's other workers (a task that only a removed worker
// could run waits until one able to run it is added). It returns once the
// policy has applied the removal: from then on the context assigns nothing
// to those workers. Call it from the application, never from a callback.
func (c *SchedContext) RemoveWorkers(ids ...int) error {
	return c.changeWorkers(wire.WorkersRemove, ids)
}

func (c *SchedContext) changeWorkers(op uint32, ids []int) error {
	verb := map[uint32]string{wire.WorkersAdd: "add", wire.WorkersRemove: "remove"}[op]
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s workers %v in %s: %w", verb, ids, c, fmt.Errorf(format, args...))
	}
	if err := c.rt.usable(); err != nil {
		return fail("%w", err)
	}
	if len(ids) == 0 {
		return fail("no workers given")
	}
	if err := c.rt.checkWorkerIDs(ids); err != nil {
		return fail("%w", err)
	}
	c.mu.Lock()
	if c.deleted {
		c.mu.Unlock()
		return fail("%w", ErrSchedContextDeleted)
	}
	for _, id := range ids {
		in := slices.Contains(c.workers, id)
		if op == wire.WorkersAdd && in {
			c.mu.Unlock()
			return fail("worker %d is already in the context", id)
		}
		if op == wire.WorkersRemove && !in {
			c.mu.Unlock()
			return fail("worker %d is not in the context", id)
		}
	}
	w, err := c.sendWorkersLocked(op, ids, nil)
	if err == nil && op == wire.WorkersAdd {
		c.workers = append(c.workers, ids...)
	} else if err == nil {
		c.workers = slices.DeleteFunc(c.workers, func(id int) bool { return slices.Contains(ids, id) })
	}
	c.mu.Unlock()
	if err == nil {
		err = w.wait()
	}
	if err != nil {
		return fail("%w", err)
	}
	return nil
}

// sendWorkersLocked writes a Workers message on the events ring (c.mu
// held) and registers the wait for its echo; then runs on the engine
// goroutine when the echo arrives.
func (c *SchedContext) sendWorkersLocked(op uint32, ids []int, then func()) (*ackWait, error) {
	// The engine marks a context broken under c.mu before failing its
	// waits: checked here, a wait registered below is failed if no echo
	// can come.
	if !c.alive() {
		if p := c.broken.Load(); p != nil {
			return nil, *p
		}
		if c.restarting.Load() {
			return nil, fmt.Errorf("scheduler sched-%s of %s is restarting after a crash: try again", c.policy, c)
		}
		return nil, fmt.Errorf("scheduler sched-%s is not running", c.policy)
	}
	c.seq++
	m := wire.Workers{Op: op, Seq: c.seq}
	for _, id := range ids {
		w := c.rt.workers[id]
		m.Workers = append(m.Workers, wire.WorkerRef{ID: int32(id), Arch: driver.ArchBit(w.drv.fp.Arch), Node: int32(w.node)})
	}
	w := &ackWait{done: make(chan struct{}), then: then}
	c.acksMu.Lock()
	c.acks[m.Seq] = w
	c.acksMu.Unlock()
	b, err := c.rings.events.ReserveWait(wire.WorkersLen(len(m.Workers)), c.alive)
	if err != nil {
		c.acksMu.Lock()
		delete(c.acks, m.Seq)
		c.acksMu.Unlock()
		return nil, fmt.Errorf("scheduler events ring: %w", err)
	}
	m.Encode(b)
	c.rings.events.Commit()
	c.rings.bell.Ring()
	return w, nil
}

func (w *ackWait) wait() error {
	<-w.done
	return w.err
}

// acked is the engine goroutine's handling of a policy's echo.
func (c *SchedContext) acked(seq uint64) {
	c.acksMu.Lock()
	w := c.acks[seq]
	delete(c.acks, seq)
	c.acksMu.Unlock()
	if w == nil {
		c.rt.log.Error("scheduler echoed an unknown workers message", "context", c.name, "seq", seq)
		return
	}
	if w.then != nil {
		w.then()
	}
	close(w.done)
}

// failAcks releases the waits for echoes that will not come, with err
// (nil when a restarted instance took the change in at its Init). With
// runThen their then runs as it would have at the echo: the policy that
// could have assigned to the workers concerned is gone. Engine goroutine.
func (c *SchedContext) failAcks(err error, runThen bool) {
	c.acksMu.Lock()
	var ws []*ackWait
	for seq, w := range c.acks {
		ws = append(ws, w)
		delete(c.acks, seq)
	}
	c.acksMu.Unlock()
	for _, w := range ws {
		if runThen && w.then != nil {
			w.then()
		}
		w.err = err
		close(w.done)
	}
}

// WaitForAll blocks until every task submitted to the context has
// completed, including those that moved to the global context when it was
// deleted. Task errors are reported by Runtime.WaitForAll and Wait.
func (c *SchedContext) WaitForAll() error {
	if err := c.rt.mayBlock("SchedContext.WaitForAll"); err != nil {
		return err
	}
	c.idleMu.Lock()
	for c.pending.Load() > 0 {
		c.idle.Wait()
	}
	c.idleMu.Unlock()
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// WaitForNSubmitted blocks until at most n of the tasks submitted to the
// context have not completed (StarPU's
// starpu_task_wait_for_n_submitted_in_ctx). From a callback it returns
// ErrDeadlock.
func (c *SchedContext) WaitForNSubmitted(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: wait for %d submitted tasks in %s", ErrInvalidTask, n, c)
	}
	if err := c.rt.mayBlock("SchedContext.WaitForNSubmitted"); err != nil {
		return err
	}
	c.idleMu.Lock()
	c.nWaiters.Add(1)
	for c.pending.Load() > int64(n) {
		c.idle.Wait()
	}
	c.nWaiters.Add(-1)
	c.idleMu.Unlock()
	return nil
}

func (c *SchedContext) taskFinished() {
	if c.pending.Add(-1) == 0 || c.nWaiters.Load() > 0 {
		c.idleMu.Lock()
		c.idle.Broadcast()
		c.idleMu.Unlock()
	}
}

// Delete deletes the context: the tasks its policy holds and has not
// assigned, and the tasks submitted to it that become ready later, go to the
// global context; tasks already assigned finish where they are. Then its
// policy instance stops. Submitting to a deleted context is an error.
func (c *SchedContext) Delete() error {
	rt := c.rt
	if c == rt.global {
		return errors.New("delete scheduling context: the global context cannot be deleted")
	}
	if err := rt.usable(); err != nil {
		return fmt.Errorf("delete %s: %w", c, err)
	}
	c.mu.Lock()
	if c.deleted {
		c.mu.Unlock()
		return fmt.Errorf("delete %s: %w", c, ErrSchedContextDeleted)
	}
	c.deleted = true
	// Removing every worker makes the policy keep what it has unassigned;
	// once the echo is read no Assign of this context is left to come, and
	// the engine moves the unassigned tasks.
	w, err := c.sendWorkersLocked(wire.WorkersRemove, c.workers, func() { rt.engine.moveTasks(c) })
	c.workers = nil
	c.mu.Unlock()
	if err == nil {
		err = w.wait()
	}
	if err != nil {
		// The policy is gone: move its tasks anyway, on the engine goroutine.
		rt.engine.sync(func() { rt.engine.moveTasks(c) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if c.proc == nil || !c.proc.Exited() {
		if derr := c.sched.Deinit(ctx); derr != nil {
			errs = append(errs, fmt.Errorf("policy deinit: %w", derr))
		}
	}
	if c.proc != nil {
		c.proc.Kill()
	}
	rt.ctxs.mu.Lock()
	live := *rt.engine.ctxs.Load()
	next := slices.DeleteFunc(slices.Clone(live), func(x *SchedContext) bool { return x == c })
	rt.engine.ctxs.Store(&next)
	if !c.restarting.Load() {
		// A restart under way may still use the rings: not reused then.
		rt.ctxs.freeRings = append(rt.ctxs.freeRings, c.rings)
	}
	rt.ctxs.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("delete %s: %w", c, errors.Join(errs...))
	}
	return nil
}

// moveTasks hands the tasks a deleted context's policy holds unassigned to
// the global context (engine goroutine).
func (e *engine) moveTasks(c *SchedContext) {
	c.stopped = true
	for _, j := range e.jobsWhere(func(j *job) bool { return j.sctx == c && j.worker < 0 }) {
		e.push(j, -1)
	}
}

// checkContextTask checks that t can run in its context: not deleted, and
// some worker of the context can run it (j.archMask, j.pinned).
func (rt *Runtime) checkContextTask(t *Task, j *job) error {
	c := t.SchedContext
	if c.rt != rt {
		return fmt.Errorf("%w: task %q: %s belongs to another runtime", ErrInvalidTask, t.TaskName(), c)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("task %q: submit to %s: %w", t.TaskName(), c, ErrSchedContextDeleted)
	}
	if p := c.broken.Load(); p != nil {
		return fmt.Errorf("task %q: submit to %s: %w", t.TaskName(), c, *p)
	}
	if j.nowhere {
		return nil
	}
	for _, id := range c.workers {
		if j.pinned >= 0 && int(j.pinned) != id {
			continue
		}
		if j.archMask&driver.ArchBit(rt.workers[id].drv.fp.Arch) != 0 {
			return nil
		}
	}
	if j.pinned >= 0 {
		return fmt.Errorf("%w: task %q runs on worker %d, which is not in %s (workers %v)", ErrNoWorker, t.TaskName(), j.pinned, c, c.workers)
	}
	return fmt.Errorf("%w: task %q: no worker of %s (workers %v) can run it", ErrNoWorker, t.TaskName(), c, c.workers)
}
