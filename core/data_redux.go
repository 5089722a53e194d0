package core

// Reductions, scratch; design note: docs/design/access.md.

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// REDUX and SCRATCH accesses: per-worker contribution buffers, their init
// kernels and the reduction jobs, and scratch buffers. See
// docs/design/access.md.

// reduction is a handle's REDUX state: its methods and per-worker
// contributions.
type reduction struct {
	redCl, initCl     *Codelet
	redInfo, initInfo *codeletInfo
	initMode          Mode
	// phase numbers the REDUX groups; contribs has one buffer per worker,
	// created with the first group. A worker's buffer lives on the memory
	// node it computes on; it is a handle of its own, so the reductions
	// bring it where they run like any data.
	phase    uint64
	contribs []*contrib
}

// contrib is one worker's REDUX buffer for a handle.
type contrib struct {
	h *Handle
	// initPhase is the phase it was last initialised for; initX the init
	// kernel in flight, or the allocation it waits for on a device node
	// (engine goroutine).
	initPhase atomic.Uint64
	initX     *xfer
}

// reduxUse is one REDUX access of a job.
type reduxUse struct {
	h     *Handle
	red   *reduction
	phase uint64
}

// reduceStep marks a reduction job: it folds contribution c of phase into
// the handle, and is skipped when no task contributed through c.
type reduceStep struct {
	c     *contrib
	phase uint64
}

// SetReductionMethods gives h the codelets of REDUX accesses (StarPU's
// starpu_data_set_reduction_methods): init sets a per-worker buffer to the
// neutral element (one buffer, W or RW), redux folds its second buffer (R)
// into its first (RW). The CPU driver's blasarg.Zero and blasarg.AddF32 or
// AddF64 make a sum. h must be a variable, vector, matrix or block, and
// have no REDUX access pending. A REDUX task runs only on workers the init
// codelet can run on, since each worker initialises its own buffer, on
// its memory node; the reductions run wherever the reduction codelet can.
func (h *Handle) SetReductionMethods(redux, init *Codelet) error {
	if redux == nil || init == nil {
		return fmt.Errorf("%w: reduction methods of %s: both the reduction and the init codelet are needed", ErrInvalidTask, h)
	}
	switch h.layout.Interface {
	case kernel.Variable, kernel.Vector, kernel.Matrix, kernel.Block:
	default:
		return fmt.Errorf("%w: reduction methods of %s: REDUX is for variables, vectors, matrices and blocks", ErrInvalidData, h)
	}
	if err := h.checkUsable(); err != nil {
		return fmt.Errorf("reduction methods: %w", err)
	}
	rt := h.rt
	ri, err := rt.resolve(redux)
	if err != nil {
		return fmt.Errorf("reduction methods of %s: reduction codelet: %w", h, err)
	}
	ii, err := rt.resolve(init)
	if err != nil {
		return fmt.Errorf("reduction methods of %s: init codelet: %w", h, err)
	}
	if err := checkMethodModes(redux, []Mode{RW, R}); err != nil {
		return fmt.Errorf("%w: reduction methods of %s: reduction codelet %q: %w", ErrInvalidTask, h, redux.Name, err)
	}
	if err := checkMethodModes(init, []Mode{W}); err != nil {
		return fmt.Errorf("%w: reduction methods of %s: init codelet %q: %w", ErrInvalidTask, h, init.Name, err)
	}
	if ri.nowhere || ii.nowhere {
		return fmt.Errorf("%w: reduction methods of %s: the codelets must run somewhere", ErrInvalidTask, h)
	}
	if err := h.checkReduction(redux, ri, init, ii); err != nil {
		return err
	}
	initMode := W
	if init.nbuffers() != VariableBuffers {
		initMode = init.Modes[0] &^ Locality
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state()
	if st.group != nil && st.group.redux {
		return fmt.Errorf("%w: reduction methods of %s: REDUX accesses are pending; set the methods before them", ErrInvalidTask, h)
	}
	rd := &reduction{redCl: redux, initCl: init, redInfo: ri, initInfo: ii, initMode: initMode}
	if old := st.red; old != nil {
		// The buffers' init phases refer to the old numbering: go on with it.
		rd.phase, rd.contribs = old.phase, old.contribs
	}
	st.red = rd
	return nil
}

// checkMethodModes checks a reduction method's buffers: as many as want,
// each with at least want's bits (R only for an R buffer).
func checkMethodModes(cl *Codelet, want []Mode) error {
	n := cl.nbuffers()
	if n == VariableBuffers {
		return nil
	}
	if n != len(want) {
		return fmt.Errorf("it takes %d buffers, want %d", n, len(want))
	}
	for i, w := range want {
		m := cl.Modes[i] &^ Locality
		if m&w != w || (w == R && m != R) {
			return fmt.Errorf("buffer %d has mode %v, want %v", i, m, w)
		}
	}
	return nil
}

// ensureContribs creates the per-worker buffer handles of rd (without
// memory: the engine allocates it at first use); h.mu held.
func (h *Handle) ensureContribs(rd *reduction) {
	if rd.contribs != nil {
		return
	}
	rt := h.rt
	rd.contribs = make([]*contrib, len(rt.workers))
	for _, w := range rt.workers {
		rd.contribs[w.id] = &contrib{h: rt.newHandle(h.layout, h.size)}
	}
}

// closeRedux ends the open REDUX group: it creates the jobs that fold each
// worker's contribution into h, one after the other after every member of
// the group, and makes the last one h's last writer; h.mu held. The caller
// starts the jobs once h.mu is released.
func (h *Handle) closeRedux(st *accessState) []*job {
	g, rd, rt := st.group, st.red, h.rt
	st.group = nil
	var jobs []*job
	var prev *job
	for _, c := range rd.contribs {
		if c == nil {
			continue
		}
		t := &Task{Codelet: rd.redCl, Handles: []*Handle{h, c.h}, Detach: true, Name: "reduce " + h.String()}
		if rd.redCl.nbuffers() == VariableBuffers {
			t.Modes = []Mode{RW, R}
		}
		j := rt.newJob()
		j.task, t.job = t, j
		j.traced = rt.trace.recording() // no submit record: the runtime made it
		// Before checkTask: a reduction job may fold into a handle being
		// unregistered (the unregistration's access closes the group).
		j.access().reduce = &reduceStep{c: c, phase: g.phase}
		if err := rt.checkTask(t, j); err != nil {
			// Reported by WaitForAll; the contribution is lost.
			j.nowhere = true
			j.err = fmt.Errorf("reduce %s: %w", h, err)
		}
		if st.locking {
			j.lockOn(h, st, RW)
		}
		j.arb = true
		j.status.Store(uint32(statusWaiting))
		if prev == nil {
			for _, m := range g.members {
				rt.dependOn(m, j)
			}
		} else {
			rt.dependOn(prev, j)
		}
		rt.waits.pending.Add(1)
		jobs = append(jobs, j)
		prev = j
	}
	h.lastWriter = prev
	return jobs
}

// skipReduction completes a ready reduction job at once when no task
// contributed through its buffer; true when it did.
func (rt *Runtime) skipReduction(j *job) bool {
	r := j.ext.Load().acc.reduce
	if r == nil || r.c.initPhase.Load() == r.phase {
		return false
	}
	j.nowhere = true
	rt.complete(j, -1, nil)
	return true
}

// flushReductions folds the pending REDUX contributions of every handle
// into its data, at shutdown.
func (rt *Runtime) flushReductions() error {
	rt.handles.mu.Lock()
	var hs []*Handle
	for h := range rt.handles.set {
		h.mu.Lock()
		if h.acc != nil && h.acc.group != nil && h.acc.group.redux {
			hs = append(hs, h)
		}
		h.mu.Unlock()
	}
	rt.handles.mu.Unlock()
	var errs []error
	for _, h := range hs {
		if err := h.Acquire(R); err != nil {
			errs = append(errs, fmt.Errorf("reduce %s: %w", h, err))
			continue
		}
		if err := h.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkScratchRedux checks, at submit, a task with SCRATCH or REDUX
// buffers, and keeps it to the workers that can initialise its REDUX
// buffers.
func (rt *Runtime) checkScratchRedux(t *Task, j *job, name string) error {
	mask := j.archMask
	for i, h := range t.Handles {
		m := j.modes[i] &^ Locality
		if m == Scratch && h.mf != nil {
			if err := rt.ramOnly(j, name, i, h, "a SCRATCH buffer of multiformat data has its CPU layout only"); err != nil {
				return err
			}
		}
		if m != Redux {
			continue
		}
		if t.NoSequentialConsistency {
			return fmt.Errorf("%w: task %q: buffer %d: REDUX needs sequential consistency, and the task has NoSequentialConsistency", ErrInvalidTask, name, i)
		}
		if t.HandlesNoSequentialConsistency != nil && t.HandlesNoSequentialConsistency[i] {
			return fmt.Errorf("%w: task %q: buffer %d: REDUX needs sequential consistency, which HandlesNoSequentialConsistency drops for it", ErrInvalidTask, name, i)
		}
		h.mu.Lock()
		var rd *reduction
		noSeq := false
		if h.acc != nil {
			rd, noSeq = h.acc.red, h.acc.noSeq
		}
		h.mu.Unlock()
		if rd == nil {
			return fmt.Errorf("%w: task %q: buffer %d: REDUX access to %s, which has no reduction methods (SetReductionMethods)", ErrInvalidTask, name, i, h)
		}
		if noSeq {
			return fmt.Errorf("%w: task %q: buffer %d: REDUX access to %s, whose sequential consistency is off", ErrInvalidTask, name, i, h)
		}
		if mask&rd.initInfo.archMask == 0 {
			return fmt.Errorf("%w: task %q: buffer %d: codelet %q runs on %s and the init codelet %q of %s, which initialises each worker's REDUX buffer where the worker computes, on %s: no worker can do both",
				ErrNoWorker, name, i, t.Codelet.Name, describeWhere(mask), rd.initCl.Name, h, describeWhere(rd.initInfo.archMask))
		}
		mask &= rd.initInfo.archMask
	}
	if j.pinned >= 0 {
		if w := rt.workers[j.pinned]; mask&driver.ArchBit(w.drv.fp.Arch) == 0 {
			return fmt.Errorf("%w: task %q must run on worker %d (%s), where the init codelet of its REDUX buffer cannot run", ErrNoWorker, name, j.pinned, w.drv.fp.Arch)
		}
	}
	j.archMask = mask
	j.sub = true
	j.access()
	return nil
}

// ramOnly refuses a task that may run on a worker computing on a device
// node when its buffer i, of h, can only be in RAM (why says why): it
// would fail there, or, kept to RAM workers in silence, not run where its
// codelet says it may.
func (rt *Runtime) ramOnly(j *job, name string, i int, h *Handle, why string) error {
	for _, w := range rt.workers {
		if w.node == 0 || j.archMask&driver.ArchBit(w.drv.fp.Arch) == 0 || j.implMaskOf(w.driverIdx) == 0 || (j.pinned >= 0 && int(j.pinned) != w.id) {
			continue
		}
		return fmt.Errorf("%w: task %q: buffer %d of %s: %s, and the task may run on worker %d, which computes on %s; keep it to RAM workers (Task.Where)",
			ErrNoWorker, name, i, h, why, w.id, rt.nodeName(w.node))
	}
	return nil
}

// prepareSub gives a SCRATCH and REDUX task its buffers on worker w, and
// makes sure its REDUX buffers there are initialised for its phase (engine
// goroutine). False when the task cannot be posted now: it failed, or it
// waits for init kernels and is posted again when they are done.
func (e *engine) prepareSub(j *job, w *workerState) bool {
	rt := e.rt
	a := j.ext.Load().acc
	if a.bufs == nil {
		hs := j.task.Handles
		a.bufs, a.modes = make([]*Handle, len(hs)), make([]Mode, len(hs))
		for i, h := range hs {
			switch m := j.modes[i] &^ Locality; m {
			case Scratch:
				sh := rt.newHandle(h.layout, h.size)
				if w.node != 0 {
					// Allocated on the worker's node by prepare, never
					// copied, freed into the node's cache by dropData.
					sh.iface = h.iface
					sh.reps[0].allocated, sh.reps[0].state = false, invalid
					sh.publishValid()
					a.bufs[i], a.modes[i] = sh, RW
					continue
				}
				s, err := rt.scratchAlloc(h.size)
				if err != nil {
					e.fail(j, w.id, fmt.Errorf("task %q: SCRATCH buffer %d: %w", j.name(), i, err))
					return false
				}
				sh.span = s
				a.bufs[i], a.modes[i] = sh, RW
			case Redux:
				c := a.contrib(h, w.id)
				if c == nil {
					e.fail(j, w.id, fmt.Errorf("%w: task %q: REDUX buffer %d of %s has no per-worker buffer on worker %d", ErrNoWorker, j.name(), i, h, w.id))
					return false
				}
				a.bufs[i], a.modes[i] = c.h, RW
			default:
				a.bufs[i], a.modes[i] = h, m&^Commute
			}
		}
	}
	pending := 0
	var iw *initWaiter
	for _, u := range a.redux {
		c := u.red.contribs[w.id]
		if c == nil || c.initPhase.Load() == u.phase {
			continue
		}
		if c.initX == nil {
			if err := e.startInit(u, c, w); err != nil {
				e.fail(j, w.id, fmt.Errorf("%w: task %q: REDUX buffer of %s on worker %d: %w", ErrTaskFailed, j.name(), u.h, w.id, err))
				return false
			}
		}
		if iw == nil {
			iw = &initWaiter{j: j, w: w}
		}
		c.initX.wait(iw)
		pending++
	}
	if pending > 0 {
		a.initWait, a.initErr = pending, nil
		return false
	}
	return true
}

// contrib is worker wid's REDUX buffer of h for a, nil if it has none
// (checkScratchRedux keeps REDUX tasks to the workers that have one).
func (a *jobAccess) contrib(h *Handle, wid int) *contrib {
	for _, u := range a.redux {
		if u.h == h {
			return u.red.contribs[wid]
		}
	}
	return nil
}

// startInit posts the init kernel of u's REDUX buffer c on worker w, as a
// transfer the engine completes like a copy (engine goroutine). On a
// device node the buffer is allocated there first (initAlloc).
func (e *engine) startInit(u reduxUse, c *contrib, w *workerState) error {
	rd := u.red
	if rd.initInfo.implMask[w.driverIdx] == 0 {
		return fmt.Errorf("init codelet %q has no implementation for driver-%s", rd.initCl.Name, w.drv.name)
	}
	if c.h.span.Size == 0 {
		// In RAM even for a device worker's buffer: a reduction on a CPU
		// worker brings it there.
		s, err := e.rt.arena.Alloc(c.h.size)
		if err != nil {
			return fmt.Errorf("allocate: %w", err)
		}
		c.h.span = s
	}
	// Registered in e.xfers when the kernel is posted; its driver's death
	// fails it.
	x := &xfer{id: e.rt.nextJob.Add(1), drv: w.drv}
	c.initX = x
	phase := u.phase
	rt := e.rt
	x.then = append(x.then, func(err error) {
		c.initX = nil
		if err != nil {
			return
		}
		c.initPhase.Store(phase)
		if rt.multiNode {
			c.h.written(w.node)
		}
	})
	e.postInit(u, c, w, x)
	return nil
}

// postInit posts x, the init kernel of c on w, once c has room on w's node
// (an allocation there may wait for one, or for memory).
func (e *engine) postInit(u reduxUse, c *contrib, w *workerState, x *xfer) {
	rd := u.red
	d := wire.BufferDesc{Offset: c.h.span.Offset, Mode: rd.initMode, Layout: c.h.layout}
	if w.node != 0 {
		p, err := e.need(c.h, w.node, W, &initAlloc{u: u, c: c, w: w, x: x}, e.clock)
		if err != nil {
			e.finishXfer(x, fmt.Errorf("allocate on %s: %w", e.rt.nodeName(w.node), err))
			return
		}
		if p > 0 {
			return // initAlloc posts it
		}
		r := &c.h.reps[w.node]
		r.refs++ // not evicted under the kernel
		x.then = append(x.then, func(error) { r.refs-- })
		d.Node, d.Offset, d.Layout = uint8(e.rt.nodes[w.node].local), r.buf, c.h.nodeLayout(w.node)
	}
	i := bits.TrailingZeros8(rd.initInfo.implMask[w.driverIdx])
	k := rd.initInfo.impls[w.driverIdx][i]
	flags := rd.initInfo.execFlags(w.driverIdx, int8(i))
	e.xfers[x.id] = x
	e.postCtl(w, wire.ExecSize(1, 0), func(b []byte) {
		wire.PutExecHeader(b, x.id, uint32(k), flags, 1, 0)
		wire.EncodeBuffer(b[wire.ExecHeaderSize:], &d)
	})
}

// initAlloc waits for the allocation of a REDUX buffer on a device node,
// then posts its init kernel.
type initAlloc struct {
	u reduxUse
	c *contrib
	w *workerState
	x *xfer
}

func (ia *initAlloc) xferDone(e *engine, err error) {
	if err != nil {
		e.finishXfer(ia.x, fmt.Errorf("allocate on %s: %w", e.rt.nodeName(ia.w.node), err))
		return
	}
	e.postInit(ia.u, ia.c, ia.w, ia.x)
}

// initWaiter is a task waiting for the init kernels of its REDUX buffers.
type initWaiter struct {
	j *job
	w *workerState
}

func (iw *initWaiter) xferDone(e *engine, err error) {
	a := iw.j.ext.Load().acc
	if err != nil && a.initErr == nil {
		a.initErr = err
	}
	a.initWait--
	if a.initWait > 0 {
		return
	}
	if a.initErr != nil {
		e.fail(iw.j, iw.w.id, fmt.Errorf("%w: task %q: init codelet of its REDUX buffer: %w", ErrTaskFailed, iw.j.name(), a.initErr))
		return
	}
	e.enqueue(iw.w, iw.j)
}

// scratchAlloc takes a scratch buffer of size bytes, a freed one if any.
func (rt *Runtime) scratchAlloc(size uint64) (base.Span, error) {
	c := &rt.access
	c.scratchMu.Lock()
	if l := c.scratch[size]; len(l) > 0 {
		s := l[len(l)-1]
		c.scratch[size] = l[:len(l)-1]
		c.scratchMu.Unlock()
		return s, nil
	}
	c.scratchMu.Unlock()
	return rt.arena.Alloc(size)
}

// scratchFree keeps a scratch buffer for reuse, up to one per worker and
// size; the others go back to the arena.
func (rt *Runtime) scratchFree(s base.Span) { rt.scratchKeep(s, len(rt.workers)) }

// scratchKeep keeps s for reuse while fewer than keep buffers of its size
// are kept, and frees it otherwise. Freeing punches a hole in the shared
// memory (every process mapping it faults it in again): callers with many
// buffers in flight keep more.
func (rt *Runtime) scratchKeep(s base.Span, keep int) {
	c := &rt.access
	c.scratchMu.Lock()
	if c.scratch == nil {
		c.scratch = map[uint64][]base.Span{}
	}
	if l := c.scratch[s.Size]; len(l) < keep {
		c.scratch[s.Size] = append(l, s)
		c.scratchMu.Unlock()
		return
	}
	c.scratchMu.Unlock()
	if err := rt.arena.Free(s); err != nil {
		rt.log.Error("free scratch buffer", "error", err)
	}
}
