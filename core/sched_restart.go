package core

// Scheduler restart; design note: docs/design/plugins.md.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Restarting a scheduling policy whose plugin process died, and handing
// the new instance the tasks the old one held.
//
// A policy holds tasks that no one else remembers: pushed to it, not yet
// assigned. The core keeps every pushed task in engine.jobs until it
// completes, so the tasks of a dead policy are exactly the tracked tasks
// of its context that no worker has (worker < 0) — once the assignments
// it made before dying are all known. When checkPlugins finds a policy's
// process gone and it may restart (schedRestartBlocked), the engine
//
//  1. reads the decisions the policy wrote before dying (drainContext),
//     and marks the context restarting: from then on push tracks the
//     context's tasks without writing them anywhere (tasks pushed into the
//     dead process's ring before that are tracked too), completions are
//     not reported to it, and Workers messages wait for the restart;
//  2. after a backoff, on a goroutine of its own (restartSched), starts a
//     new process of the policy and configures it as the old one was;
//  3. for the global context, waits for every live worker's scheduler ring
//     to drain: a task the policy posted there, whose echo it did not write,
//     runs there; drivers commit a task's completion before releasing its
//     Exec (driver.WorkerSpec.SchedRing), so a drained ring means every
//     task posted there has completed, and reading the completions then
//     accounts for all of them;
//  4. on the engine goroutine, reads those completions and empties the
//     context's events and decisions rings, whose producer and consumer
//     are dead; then Inits the new instance with the context's workers (of
//     live drivers) and the same rings;
//  5. on the engine goroutine, swaps the instance in, ends the restart, and
//     takes the context's tracked unassigned tasks, under the context's
//     lock so that no push slips between; Workers messages the old
//     instance never echoed are settled (the new one started with the
//     change in place), and the restart goroutine pushes the taken tasks
//     to the new instance.
//
// A policy that may not restart (in process, out of restarts, turned off
// for the plugin, its context deleted, or another plugin restarting at the
// same time), or whose restart fails, leaves its context broken: its
// unassigned tasks fail with an error naming it, and for the global
// context the runtime is broken.
//
// Rejected: replaying the events ring to the new instance. The ring holds
// what the old process had not read yet, not what it had read and queued,
// and a Push it had read may also have been assigned; the tracked set is
// exact and needs nothing from the dead process. Rejected too: restarting
// while a driver restarts. Each restart relies on the policies' Workers
// echoes as a barrier, and a policy starting anew has none to give for the
// other: a second death during a restart fails cleanly instead.

// schedRestartBlocked says why c's dead policy may not be restarted, or ""
// if it may. Engine goroutine.
func (e *engine) schedRestartBlocked(c *SchedContext) string {
	rt := e.rt
	switch n := rt.cfg.RestartsFor("sched-" + c.policy); {
	case c.proc == nil:
		return "in process"
	case n == 0:
		return "restarts are off"
	case c.restarts >= n:
		return fmt.Sprintf("restarted %d times already", c.restarts)
	}
	for _, d := range rt.drivers {
		if d.restarting.Load() {
			return "driver-" + d.name + " is restarting"
		}
	}
	for _, o := range *e.ctxs.Load() {
		if o.restarting.Load() {
			return "the policy of " + o.String() + " is restarting"
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return "its context is deleted"
	}
	return ""
}

// beginSchedRestart holds c's tasks and starts the restart of its policy.
// Engine goroutine.
func (e *engine) beginSchedRestart(c *SchedContext) {
	rt := e.rt
	c.restarts++
	c.mu.Lock()
	c.restarting.Store(true)
	c.mu.Unlock()
	rt.log.Error("scheduler plugin exited; restarting it", "context", c.name, "sched", c.policy,
		"pid", c.proc.Pid(), "exit", exitNote(c.proc), "attempt", c.restarts)
	rt.restarts.mu.Lock()
	off := rt.restarts.off
	if !off {
		rt.restarts.wg.Add(1)
	}
	rt.restarts.mu.Unlock()
	if off {
		e.schedDied(c, fmt.Errorf("%w: scheduler sched-%s of %s %s during shutdown", ErrPluginCrashed, c.policy, c, exitNote(c.proc)))
		return
	}
	go rt.restartSched(c)
}

// restartSched starts c's policy again and hands it the tasks it held (see
// the header). Its own goroutine.
func (rt *Runtime) restartSched(c *SchedContext) {
	defer rt.restarts.wg.Done()
	e := rt.engine
	dead := c.proc // this goroutine is the only writer until the swap
	var p *loader.Plugin
	fail := func(err error) {
		if p != nil {
			p.Kill()
		}
		c.mu.Lock()
		deleted := c.deleted
		c.mu.Unlock()
		if deleted {
			rt.abandonRestart(c)
			return
		}
		rt.log.Error("scheduler plugin restart failed", "context", c.name, "sched", c.policy, "error", err)
		e.sync(func() {
			e.schedDied(c, fmt.Errorf("%w: scheduler sched-%s of %s (pid %d) %s, and its restart failed: %w",
				ErrPluginCrashed, c.policy, c, dead.Pid(), exitNote(dead), err))
		})
	}
	select {
	case <-time.After(restartBackoff(c.restarts)):
	case <-rt.restarts.stop:
		fail(ErrShutdown)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, p, err := rt.startPolicy(ctx, c.policy)
	if err == nil && c.cfg != nil {
		err = rt.applyConfig(ctx, s, "sched-"+c.policy, c.cfg)
	} else if err == nil {
		err = rt.configure(ctx, s, "sched-"+c.policy)
	}
	if err == nil && c == rt.global {
		err = rt.waitSchedRings()
	}
	if err != nil {
		fail(err)
		return
	}
	var workers []int
	e.sync(func() {
		e.drainCompletions()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.deleted {
			err = ErrSchedContextDeleted // Delete moved its tasks
			return
		}
		if err = c.rings.reset(rt.arena); err != nil {
			err = fmt.Errorf("reset its rings: %w", err)
			return
		}
		for _, id := range c.workers {
			if !rt.workers[id].drv.dead.Load() {
				workers = append(workers, id)
			}
		}
	})
	if errors.Is(err, ErrSchedContextDeleted) {
		p.Kill()
		rt.abandonRestart(c)
		return
	}
	if err == nil {
		if err = s.Init(ctx, rt.schedInit(workers, c.rings)); err != nil {
			err = fmt.Errorf("init: %w", err)
		}
	}
	if err != nil {
		fail(err)
		return
	}
	var held []*job
	e.sync(func() {
		c.mu.Lock()
		if c.deleted {
			// Delete moved its tasks to the global context.
			c.mu.Unlock()
			err = ErrSchedContextDeleted
			return
		}
		c.sched, c.proc = s, p
		c.named = nil // the new instance has heard of no codelet
		c.restarting.Store(false)
		held = e.jobsWhere(func(j *job) bool { return j.sctx == c && j.worker < 0 })
		c.mu.Unlock()
		c.failAcks(nil, true)
		rt.log.Warn("scheduler plugin restarted", "context", c.name, "sched", c.policy, "pid", p.Pid(), "tasks", len(held))
	})
	if err != nil {
		p.Kill()
		rt.abandonRestart(c)
		return
	}
	for _, j := range held {
		e.push(j, -1)
	}
}

// abandonRestart ends the restart of deleted context c's policy: Delete
// moved its tasks and left it its rings (a restart under way may still
// use them), which go back to the free list now, unless Delete is still
// to reach that step and will free them itself, seeing no restart.
func (rt *Runtime) abandonRestart(c *SchedContext) {
	rt.log.Info("scheduler plugin restart called off: its context was deleted", "context", c.name, "sched", c.policy)
	rt.ctxs.mu.Lock()
	defer rt.ctxs.mu.Unlock()
	c.restarting.Store(false)
	if !slices.Contains(*rt.engine.ctxs.Load(), c) {
		rt.ctxs.freeRings = append(rt.ctxs.freeRings, c.rings)
	}
}

// waitSchedRings waits until every scheduler ring of a live worker is
// drained (step 3 of the header).
func (rt *Runtime) waitSchedRings() error {
	var rings []*shm.Ring
	var owners []*workerState
	for _, w := range rt.workers {
		if !w.hasSchedRing() {
			continue
		}
		r, err := shm.OpenRing(rt.arena.Bytes(w.spec.SchedRing))
		if err != nil {
			return fmt.Errorf("worker %d scheduler ring: %w", w.id, err)
		}
		rings, owners = append(rings, r), append(owners, w)
	}
	for {
		busy := 0
		for i, r := range rings {
			if !r.Drained() && !owners[i].drv.dead.Load() {
				busy++
			}
		}
		if busy == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-rt.restarts.stop:
			return ErrShutdown
		}
	}
}

// schedDied leaves c broken by err: its unassigned tasks fail, and with
// the global context the runtime breaks. Engine goroutine.
func (e *engine) schedDied(c *SchedContext, err error) {
	rt := e.rt
	// Under c.mu: a push or Workers message either saw the context broken
	// or is tracked by now, and is failed below.
	c.mu.Lock()
	c.broken.Store(&err)
	c.restarting.Store(false)
	c.mu.Unlock()
	global := c == rt.global
	if global {
		rt.broken.Store(&err)
		e.checks.Add(1) // for good
		for _, o := range *e.ctxs.Load() {
			o.failAcks(err, false)
		}
	} else {
		// Their then runs: a driver restart waiting for this policy to
		// let go of its workers goes on, since it will assign nothing more.
		c.failAcks(err, true)
	}
	for _, j := range e.jobsWhere(func(j *job) bool { return j.worker < 0 && (global || j.sctx == c) }) {
		if e.untrack(j.id) != nil {
			rt.failLater(j, err)
		}
	}
}

// plugin is the context's policy process, nil in process.
func (c *SchedContext) plugin() *loader.Plugin {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}
