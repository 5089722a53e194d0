package core

// Acquire, callbacks; design note: docs/design/access.md.

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
)

// Acquiring data on a memory node, asynchronous acquisitions, and the
// detection of blocking calls made where they would deadlock.
//
// Go has no goroutine identity, so callbacks are told apart by the OS
// thread they run on. The engine goroutine is locked to its thread for its
// whole life (engine.tid); task callbacks that run elsewhere, and the
// callbacks of asynchronous data calls, lock their goroutine to its thread
// while they run and record the thread (callbackThreads). A locked thread
// runs no other goroutine, so a blocking call made on one of these threads
// comes from a callback, and fails with ErrDeadlock as StarPU's fail with
// -EDEADLK. Kernels in driver plugin processes cannot call the runtime at
// all; those of an application-driven worker run marked, as callbacks do
// (plugin_appdriven.go); those of an in-process driver of Options.Drivers
// (a test facility) are not covered.

// callbackThreads are the OS threads running application callbacks off the
// engine goroutine, with their nesting depth.
type callbackThreads struct {
	mu   sync.Mutex
	tids map[int]int
}

// callback runs f, an application callback, marked as such so that the
// blocking calls it makes return ErrDeadlock instead of hanging.
func (rt *Runtime) callback(f func()) {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	c := &rt.cbs
	c.mu.Lock()
	if c.tids == nil {
		c.tids = map[int]int{}
	}
	c.tids[tid]++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.tids[tid]--; c.tids[tid] == 0 {
			delete(c.tids, tid)
		}
		c.mu.Unlock()
		runtime.UnlockOSThread()
	}()
	f()
}

// taskCallback runs a task's callback or prologue callback. worker >= 0
// says the engine goroutine is running it (it drained the completion that
// released the task); its thread marks it already, at no cost per task.
func (rt *Runtime) taskCallback(f func(*Task), t *Task, worker int32) {
	if worker >= 0 {
		f(t)
		return
	}
	rt.callback(func() { f(t) })
}

// mayBlock returns ErrDeadlock when the caller is a callback: a blocking
// call there waits for work that the callback itself holds up.
func (rt *Runtime) mayBlock(op string) error {
	tid := syscall.Gettid()
	if rt.engine != nil && int32(tid) == rt.engine.tid.Load() {
		return fmt.Errorf("%w: %s from a callback run by the runtime's engine", ErrDeadlock, op)
	}
	rt.cbs.mu.Lock()
	n := rt.cbs.tids[tid]
	rt.cbs.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("%w: %s from a task or data callback", ErrDeadlock, op)
	}
	return nil
}

// checkNode says why node is not a memory node data can be brought to.
func (rt *Runtime) checkNode(node int) error {
	if node < 0 || node >= len(rt.nodes) {
		return fmt.Errorf("%w: memory node %d does not exist (nodes 0 to %d)", ErrInvalidData, node, len(rt.nodes)-1)
	}
	if n := rt.nodes[node]; node != 0 && n.worker == nil {
		return fmt.Errorf("%w: memory node %d (%s) has no worker to move data to it", ErrInvalidData, node, n.name)
	}
	return nil
}

func (rt *Runtime) nodeName(node int) string { return rt.nodes[node].name }

// Nodes an acquisition may name instead of a memory node, as StarPU's
// STARPU_ACQUIRE_NO_NODE and STARPU_ACQUIRE_NO_NODE_LOCK_ALL: the
// acquisition is ordered with the tasks like any other, and brings the data
// nowhere. Release it with ReleaseOnNode and the same value.
const (
	// AcquireNoNode only waits for the conflicting tasks and holds later
	// ones off: no copy is fetched, written or pinned, and Go-registered
	// memory is not updated. It serves to wait for a handle's producers
	// without moving their result.
	AcquireNoNode = -1
	// AcquireNoNodeLockAll is AcquireNoNode that also keeps every copy
	// allocated at the time of the acquisition from being evicted until
	// the release.
	AcquireNoNodeLockAll = -2
)

// checkAcquire checks an acquisition's arguments.
func (h *Handle) checkAcquire(op string, node int, m Mode) error {
	if !validAcquireMode(m) {
		return fmt.Errorf("%w: %s with mode %v", ErrInvalidTask, op, m)
	}
	if err := h.rt.usable(); err != nil {
		return err
	}
	if err := h.checkAccess(m); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if node == AcquireNoNode || node == AcquireNoNodeLockAll {
		return nil
	}
	if err := h.rt.checkNode(node); err != nil {
		return fmt.Errorf("%s %s: %w", op, h, err)
	}
	if err := h.deviceErr(node); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// AcquireOnNode is Acquire with the data brought to memory node node (an
// ID from MemoryNodes) instead of RAM, as StarPU's
// starpu_data_acquire_on_node: once it returns, node holds a valid copy
// (the only one for a writing mode), which is not evicted until
// ReleaseOnNode(node). A device node's copy is not in the application's
// memory: PointerOn names the driver's buffer. Node 0 is Acquire;
// AcquireNoNode and AcquireNoNodeLockAll acquire without bringing the data
// anywhere.
func (h *Handle) AcquireOnNode(node int, m Mode) error {
	if node == 0 {
		return h.Acquire(m)
	}
	a, err := h.hold("acquire", node, m)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.held = append(h.held, a)
	h.mu.Unlock()
	return nil
}

// hold is a blocking acquisition of h on node, not recorded in h.held:
// the caller releases it with unhold.
func (h *Handle) hold(op string, node int, m Mode) (*acquisition, error) {
	if err := h.checkAcquire(op, node, m); err != nil {
		return nil, err
	}
	if err := h.rt.mayBlock(op + " " + h.String()); err != nil {
		return nil, err
	}
	a := h.acquireAsync(m)
	h.rt.await(a.granted)
	a.node = node
	if err := a.check(h); err != nil {
		h.rt.complete(a.job, -1, nil)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := h.bring(a); err != nil {
		h.rt.complete(a.job, -1, nil)
		return nil, fmt.Errorf("%s %s: bring data to %s: %w", op, h, h.rt.nodeName(node), err)
	}
	return a, nil
}

// bring makes a.node hold h for a.mode and waits: the current value unless
// the mode is write-only, the only valid copy for writing modes, and, on a
// device node, a reference that keeps the copy from eviction until unhold.
// On no node it brings nothing, and pins the allocated copies for
// AcquireNoNodeLockAll.
func (h *Handle) bring(a *acquisition) error {
	node, m := a.node, a.mode
	rt := h.rt
	switch {
	case node == AcquireNoNode || node == AcquireNoNodeLockAll && !rt.multiNode:
		return nil
	case node == AcquireNoNodeLockAll:
		rt.engine.sync(func() { rt.engine.pinAll(h, a) })
		return nil
	case node == 0:
		if err := h.fetchTo(0, m); err != nil {
			return err
		}
		h.homeOut()
		return nil
	}
	done := make(chan error, 1)
	q := &dataReq{h: h, node: node, mode: m, write: m&W != 0, hold: true, finish: func(err error) { done <- err }}
	e := rt.engine
	e.call(func() { q.step(e) })
	return <-done
}

// pinAll takes a reference on each of h's allocated device copies for
// hold a (AcquireNoNodeLockAll), recording them in a.pinned for unhold.
func (e *engine) pinAll(h *Handle, a *acquisition) {
	for i := 1; i < len(h.reps); i++ {
		if h.reps[i].allocated {
			h.reps[i].refs++
			a.pinned = append(a.pinned, i)
		}
	}
}

// homeOut brings the application's memory up to date from the RAM
// replicate.
func (h *Handle) homeOut() {
	h.mu.Lock()
	if h.home != nil && !h.homeValid {
		h.copyHomeOut()
		h.homeValid = true
	}
	h.mu.Unlock()
}

// ReleaseOnNode ends the application's oldest hold on the handle on memory
// node node, which must be the node it was acquired on (StarPU's
// starpu_data_release_on_node). After a writing hold, the nodes of the
// write-through mask are brought up to date.
func (h *Handle) ReleaseOnNode(node int) error {
	h.mu.Lock()
	i := slices.IndexFunc(h.held, func(a *acquisition) bool { return a.node == node })
	if i < 0 {
		h.mu.Unlock()
		if node == 0 {
			return fmt.Errorf("release %s: not acquired", h)
		}
		return fmt.Errorf("release %s on node %d: not acquired there", h, node)
	}
	a := h.held[i]
	h.held = slices.Delete(h.held, i, i+1)
	h.mu.Unlock()
	h.unhold(a)
	return nil
}

// unhold ends hold a: the application's changes to Go-registered memory go
// to the RAM replicate (a write on a device makes that memory stale), the
// held copy is again the only valid one, the device copy may be evicted
// again, writes go through, and the tasks waiting for the hold are
// released.
func (h *Handle) unhold(a *acquisition) {
	rt := h.rt
	// A hold on no node wrote nothing the runtime has to propagate.
	w := a.mode&W != 0 && a.node >= 0
	if w && h.home != nil {
		h.mu.Lock()
		if a.node == 0 {
			h.copyHomeIn()
		} else {
			h.homeValid = false
		}
		h.mu.Unlock()
	}
	if !rt.multiNode || a.node == AcquireNoNode || a.node == 0 && !w {
		rt.complete(a.job, -1, nil)
		return
	}
	e := rt.engine
	release := func() {
		if w {
			// A data request may have copied the held copy while the
			// application wrote it (a fetch tries again when the grant's
			// write drops its copy): as after a task's write, only the
			// held copy is valid. Before the copy is unpinned: an
			// allocation waiting for memory may evict it at once, and
			// must see it dirty.
			h.written(a.node)
		}
		pinned := a.pinned
		if a.node > 0 {
			pinned = []int{a.node}
		}
		for _, n := range pinned {
			h.reps[n].refs--
			// Allocations waiting for memory the hold pinned try again.
			if nd := e.rt.nodes[n]; len(nd.memWaiters) > 0 {
				e.wakeMemWaiters(nd)
			}
		}
		if w {
			if g := e.writeThrough(h, a.node, nil); g != nil {
				g.seal(func() { rt.complete(a.job, -1, nil) })
				return
			}
		}
		rt.complete(a.job, -1, nil)
	}
	// A release in RAM returns once the hold is over: the application
	// may try to acquire again at once.
	if a.node == 0 {
		e.callWait(release)
	} else {
		e.call(release)
	}
}

// acquireThen orders an acquisition of h in mode m with the tasks, and
// calls then, without blocking, once the accesses before it are over.
// then runs wherever the last of them completed (possibly the engine
// goroutine): it must not block, and it ends the acquisition by completing
// a.job, at once or later.
func (h *Handle) acquireThen(m Mode, then func(a *acquisition)) *acquisition {
	return h.acquireThenSeq(m, true, then)
}

// acquireThenSeq is acquireThen, ordered with the tasks only when
// sequential is set; otherwise it waits only for the data lock.
func (h *Handle) acquireThenSeq(m Mode, sequential bool, then func(a *acquisition)) *acquisition {
	j := h.rt.newJob()
	a := &acquisition{mode: m, job: j}
	a.onGrant = func() { then(a) }
	j.acquire = a
	if sequential {
		h.depend(j, m)
	} else {
		h.dependFree(j, m)
	}
	if j.ndeps.Add(-1) == 0 {
		h.rt.ready(j, -1)
	}
	return a
}

// AcquireCB is the asynchronous Acquire (StarPU's starpu_data_acquire_cb):
// it returns at once, and cb runs, on a goroutine of its own, once the
// tasks submitted before that conflict with mode m are over and the data is
// in RAM. With a nil error the application holds the data and must end the
// hold with Release (from cb or later); with an error the data could not
// be brought and there is nothing to release. WaitForAll waits for cb to
// return. Blocking calls from cb fail with ErrDeadlock.
func (h *Handle) AcquireCB(m Mode, cb func(error)) error {
	return h.AcquireOnNodeCB(0, m, cb)
}

// AcquireOnNodeCB is AcquireCB with the data brought to memory node node,
// released with ReleaseOnNode(node) (StarPU's
// starpu_data_acquire_on_node_cb).
func (h *Handle) AcquireOnNodeCB(node int, m Mode, cb func(error)) error {
	return h.acquireCB(node, m, true, cb)
}

// AcquireCBSequentialConsistency is AcquireCB that, when sequential is
// false, is not ordered with the tasks submitted before it: it waits only
// until no conflicting access holds the data (StarPU's
// starpu_data_acquire_cb_sequential_consistency).
func (h *Handle) AcquireCBSequentialConsistency(m Mode, sequential bool, cb func(error)) error {
	return h.acquireCB(0, m, sequential, cb)
}

// AcquireOnNodeCBSequentialConsistency is AcquireOnNodeCB with the
// sequential-consistency choice of AcquireCBSequentialConsistency (StarPU's
// starpu_data_acquire_on_node_cb_sequential_consistency).
func (h *Handle) AcquireOnNodeCBSequentialConsistency(node int, m Mode, sequential bool, cb func(error)) error {
	return h.acquireCB(node, m, sequential, cb)
}

func (h *Handle) acquireCB(node int, m Mode, sequential bool, cb func(error)) error {
	if cb == nil {
		return fmt.Errorf("%w: acquire %s with a nil callback", ErrInvalidTask, h)
	}
	if err := h.checkAcquire("acquire", node, m); err != nil {
		return err
	}
	rt := h.rt
	rt.beginAsync()
	h.acquireThenSeq(m, sequential, func(a *acquisition) {
		a.node = node
		cerr := a.check(h)
		granted := func(err error) {
			go func() {
				if cerr != nil {
					rt.complete(a.job, -1, nil)
					err = fmt.Errorf("acquire: %w", cerr)
				} else if err != nil {
					rt.complete(a.job, -1, nil)
					err = fmt.Errorf("acquire %s: bring data to %s: %w", h, rt.nodeName(node), err)
				} else {
					if node == 0 {
						h.homeOut()
					}
					h.mu.Lock()
					h.held = append(h.held, a)
					h.mu.Unlock()
				}
				rt.callback(func() { cb(err) })
				rt.endAsync(nil)
			}()
		}
		if !rt.multiNode || cerr != nil || node == AcquireNoNode {
			granted(nil)
			return
		}
		e := rt.engine
		if node == AcquireNoNodeLockAll {
			e.call(func() {
				e.pinAll(h, a)
				granted(nil)
			})
			return
		}
		q := &dataReq{h: h, node: node, mode: m, write: m&W != 0, hold: node != 0, finish: granted}
		e.call(func() { q.step(e) })
	})
	return nil
}

// beginAsync and endAsync count an asynchronous data operation among the
// work WaitForAll and Shutdown wait for; a failure is reported by
// WaitForAll like a task's.
func (rt *Runtime) beginAsync() { rt.waits.pending.Add(1) }

func (rt *Runtime) endAsync(err error) {
	if err != nil {
		rt.recordFailure(err)
	}
	if rt.waits.pending.Add(-1) == 0 || rt.waits.idleWaiters.Load() > 0 {
		rt.wakeIdle()
	}
}
