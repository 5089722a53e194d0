package core

// Access order, locks, arbiters; design note: docs/design/access.md.

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Access modes beyond R, W and RW. See docs/design/access.md for how the
// runtime implements them.
const (
	// Scratch gives the task a temporary buffer with the handle's layout,
	// on the memory node of the worker that runs it: its contents are
	// undefined when the kernel starts and are dropped when it ends,
	// never copied anywhere; the handle's data is neither read nor
	// written, and the access orders with nothing (StarPU's
	// STARPU_SCRATCH). Multiformat data has a SCRATCH buffer in RAM only.
	Scratch = kernel.Scratch
	// Redux makes the task contribute to the handle's value through the
	// handle's reduction methods (SetReductionMethods; StarPU's
	// STARPU_REDUX): each worker accumulates into a buffer of its own,
	// initialised by the init codelet on first use, and the contributions
	// are combined into the data by the reduction codelet before the next
	// access in another mode (a task, an acquisition, Unregister). REDUX
	// accesses run concurrently with each other, after the accesses
	// before them. Each worker's buffer lives on the memory node the
	// worker computes on and is initialised there, so a REDUX task runs
	// only where the init codelet can; the reductions run wherever the
	// reduction codelet can, the buffers brought to them like any data.
	Redux = kernel.Redux
	// Commute, or'ed into W or RW, lets consecutive such accesses to a
	// handle run in any order, one at a time, still after the accesses
	// before them and before the accesses after them (StarPU's
	// STARPU_COMMUTE).
	Commute = kernel.Commute
)

// ErrWouldBlock is TryAcquire's error when the access cannot be granted at
// once.
var ErrWouldBlock = errors.New("access would block")

// accessRT is the runtime's share of access modes and arbitration.
type accessRT struct {
	// noSeqDefault is the default for new handles: sequential consistency
	// off (StarPU's default flag, inverted so that the zero value is on).
	noSeqDefault atomic.Bool
	nextArbiter  atomic.Uint64
	// scratch keeps freed scratch buffers by size for the next tasks.
	scratchMu sync.Mutex
	scratch   map[uint64][]base.Span
}

// SetDefaultSequentialConsistency sets whether handles registered from now
// on order the accesses made to them (StarPU's
// starpu_data_set_default_sequential_consistency_flag). It is on unless
// turned off.
func (rt *Runtime) SetDefaultSequentialConsistency(on bool) { rt.access.noSeqDefault.Store(!on) }

// DefaultSequentialConsistency tells whether handles registered now order
// their accesses (StarPU's starpu_data_get_default_sequential_consistency_flag).
func (rt *Runtime) DefaultSequentialConsistency() bool { return !rt.access.noSeqDefault.Load() }

// SetSequentialConsistency sets whether the accesses to h are ordered
// (StarPU's starpu_data_set_sequential_consistency_flag). With it on (the
// default, unless changed by SetDefaultSequentialConsistency), tasks and
// acquisitions access h in submission order: readers after the writer
// before them, writers after everything before them. With it off, accesses
// submitted from now on are not ordered with the others; they only exclude
// each other like a reader-writer lock (several readers or one writer at a
// time) when they start. Partition children inherit their parent's setting.
func (h *Handle) SetSequentialConsistency(on bool) {
	h.mu.Lock()
	h.state().noSeq = !on
	h.mu.Unlock()
}

// SequentialConsistency tells whether the accesses to h are ordered
// (StarPU's starpu_data_get_sequential_consistency_flag).
func (h *Handle) SequentialConsistency() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acc == nil || !h.acc.noSeq
}

// inheritConsistency gives h, a partition child, its parent's sequential
// consistency, as StarPU's filters do.
func (h *Handle) inheritConsistency(parent *Handle) {
	on := parent.SequentialConsistency()
	h.mu.Lock()
	switch {
	case !on:
		h.state().noSeq = true
	case h.acc != nil:
		h.acc.noSeq = false
	}
	h.mu.Unlock()
}

// accessState is what a handle needs beyond ordering plain accesses; nil
// until something needs it. Guarded by h.mu, except lock.
type accessState struct {
	noSeq bool
	// locking: every access takes the data lock, since the first one
	// without sequential consistency. The ordered accesses still waiting
	// then were made to take it too; legacy are those already ready or
	// running without it: accesses without sequential consistency wait for
	// them.
	locking bool
	legacy  []*job
	// free counts the accesses without sequential consistency submitted and
	// not terminated; Unregister waits until freeDone closes.
	free     int
	freeDone chan struct{}
	// used: some access went through accessState (an arbiter may no longer
	// be assigned).
	used    bool
	arbiter *Arbiter
	// group is the open run of COMMUTE or REDUX accesses.
	group *accessGroup
	red   *reduction
	// lock is the data lock; guarded by h.mu, or by arbiter.mu when the
	// handle has an arbiter.
	lock dataLock
}

// state returns h's access state, creating it; h.mu held.
func (h *Handle) state() *accessState {
	if h.acc == nil {
		h.acc = &accessState{}
	}
	return h.acc
}

// accessGroup is a run of consecutive COMMUTE (or REDUX) accesses: they
// wait for preds, the accesses before the run, and not for each other; the
// accesses after the run wait for all its members.
type accessGroup struct {
	redux   bool
	phase   uint64 // REDUX: the reduction phase, numbered from 1
	preds   []*job
	members []*job
}

// jobAccess is a job's side of data locks, SCRATCH and REDUX buffers.
type jobAccess struct {
	// locks are the data locks the job takes before it starts, sorted
	// (arbiter, handle) at the first attempt; it holds locks[:pos].
	locks  []lockReq
	pos    int
	sorted bool
	// free are the handles the job accesses without sequential consistency.
	free []lockReq
	// redux are the job's REDUX accesses and their phases.
	redux []reduxUse
	// reduce is set for the runtime's reduction jobs.
	reduce *reduceStep
	// bufs and modes are what the worker gets (engine goroutine): the
	// per-worker buffer for REDUX, a scratch buffer for SCRATCH.
	bufs  []*Handle
	modes []Mode
	// initWait counts the REDUX init kernels the job waits for.
	initWait int
	initErr  error
}

// access returns j's jobAccess, creating it.
func (j *job) access() *jobAccess {
	j.mu.Lock()
	defer j.mu.Unlock()
	x := j.x()
	if x.acc == nil {
		x.acc = &jobAccess{}
	}
	return x.acc
}

// buffers are the handles and modes a worker gets for j.
func (j *job) buffers() ([]*Handle, []Mode) {
	if j.sub {
		a := j.ext.Load().acc
		return a.bufs, a.modes
	}
	return j.task.Handles, j.modes
}

// lockReq is one data lock a job takes: R (shared) or W (exclusive).
type lockReq struct {
	h    *Handle
	st   *accessState
	arb  *Arbiter
	mode Mode
}

// lockOn makes j take h's data lock for m when it becomes ready. Under j.mu:
// another handle's lockOutstanding may add a lock to a job being submitted.
func (j *job) lockOn(h *Handle, st *accessState, m Mode) {
	j.mu.Lock()
	x := j.x()
	if x.acc == nil {
		x.acc = &jobAccess{}
	}
	x.acc.lockOn(h, st, m)
	j.arb = true
	j.mu.Unlock()
}

func (a *jobAccess) lockOn(h *Handle, st *accessState, m Mode) {
	lm := R
	if m&W != 0 {
		lm = W
	}
	for i := range a.locks {
		if a.locks[i].h == h {
			a.locks[i].mode |= lm
			return
		}
	}
	a.locks = append(a.locks, lockReq{h: h, st: st, arb: st.arbiter, mode: lm})
}

// dataLock is a handle's reader-writer lock, taken by jobs when they become
// ready and released when they have executed. Waiters are served in order.
type dataLock struct {
	readers int
	writer  bool
	waiters []*job
}

// grantable tells whether m can be taken now; head is set for the first
// waiter, which other waiters do not hold back.
func (l *dataLock) grantable(m Mode, head bool) bool {
	if l.writer || (!head && len(l.waiters) > 0) {
		return false
	}
	return m&W == 0 || l.readers == 0
}

func (l *dataLock) take(m Mode) {
	if m&W != 0 {
		l.writer = true
	} else {
		l.readers++
	}
}

func (l *dataLock) drop(m Mode) {
	if m&W != 0 {
		l.writer = false
	} else {
		l.readers--
	}
}

// wake grants the lock to the waiters at the head of the queue that it
// suits, and appends them to out.
func (l *dataLock) wake(out []*job) []*job {
	for len(l.waiters) > 0 {
		w := l.waiters[0]
		wa := w.ext.Load().acc
		m := wa.locks[wa.pos].mode
		if !l.grantable(m, true) {
			break
		}
		l.take(m)
		wa.pos++
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		out = append(out, w)
	}
	if len(l.waiters) == 0 {
		l.waiters = nil
	}
	return out
}

// Arbiter arbitrates the accesses to the handles assigned to it centrally
// (StarPU's starpu_arbiter_t): a task takes all its locks on those handles
// at once or none, so that tasks accessing several of them (COMMUTE ones,
// or handles without sequential consistency) neither deadlock nor hold some
// while waiting for others.
type Arbiter struct {
	rt *Runtime
	id uint64
	mu sync.Mutex
	// handles counts the registered handles assigned to it.
	handles   int
	destroyed bool
}

// NewArbiter creates an arbiter (StarPU's starpu_arbiter_create).
func (rt *Runtime) NewArbiter() *Arbiter {
	return &Arbiter{rt: rt, id: rt.access.nextArbiter.Add(1)}
}

// AssignArbiter makes a arbitrate the accesses to h (StarPU's
// starpu_data_assign_arbiter). Assign it before any task or acquisition
// accesses h; a handle has one arbiter for its lifetime.
func (h *Handle) AssignArbiter(a *Arbiter) error {
	if a == nil {
		return fmt.Errorf("%w: assign arbiter to %s: nil arbiter", ErrInvalidData, h)
	}
	if a.rt != h.rt {
		return fmt.Errorf("%w: assign arbiter to %s: the arbiter belongs to another runtime", ErrInvalidData, h)
	}
	if h.unregistered.Load() {
		return fmt.Errorf("assign arbiter to %s: %w", h, ErrUnregistered)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.destroyed {
		return fmt.Errorf("%w: assign arbiter to %s: the arbiter is destroyed", ErrInvalidData, h)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.acc != nil && h.acc.arbiter != nil {
		return fmt.Errorf("%w: assign arbiter to %s: it already has one", ErrInvalidData, h)
	}
	if h.lastWriter != nil || len(h.readers) > 0 || (h.acc != nil && h.acc.used) {
		return fmt.Errorf("%w: assign arbiter to %s: tasks or acquisitions have accessed it already; assign the arbiter first", ErrInvalidData, h)
	}
	h.state().arbiter = a
	a.handles++
	return nil
}

// Destroy ends the arbiter (StarPU's starpu_arbiter_destroy); every handle
// assigned to it must be unregistered first.
func (a *Arbiter) Destroy() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.destroyed {
		return fmt.Errorf("%w: destroy arbiter: already destroyed", ErrInvalidData)
	}
	if a.handles > 0 {
		return fmt.Errorf("%w: destroy arbiter: %d handles assigned to it are still registered", ErrInvalidData, a.handles)
	}
	a.destroyed = true
	return nil
}

// dependFree records the access of j, a task or acquisition without
// sequential consistency, to h.
func (h *Handle) dependFree(j *job, mode Mode) {
	h.mu.Lock()
	if !h.admits(j) {
		h.mu.Unlock()
		return
	}
	h.access(j, mode, false)
}

// access is depend's path for handles with an access state or modes beyond
// R and W; h.mu is held and released here.
func (h *Handle) access(j *job, mode Mode, seq bool) {
	start := h.accessLocked(j, mode, seq)
	h.mu.Unlock()
	for _, r := range start {
		if r.ndeps.Add(-1) == 0 {
			h.rt.ready(r, -1)
		}
	}
}

// accessLocked records j's access to h (h.mu held) and returns the
// reduction jobs it created, for the caller to start once h.mu is
// released.
func (h *Handle) accessLocked(j *job, mode Mode, seq bool) []*job {
	st := h.state()
	st.used = true
	m := mode &^ Locality
	if m == Scratch {
		return nil
	}
	// REDUX needs ordering, checked at submit; if the handle's flag
	// changed since, ordering it is the safe side.
	seq = m == Redux || (seq && !st.noSeq)
	var start []*job
	if !seq {
		if !st.locking {
			st.locking = true
			start = h.lockOutstanding(st)
		}
		if len(st.legacy) > 0 {
			st.legacy = pruneReleased(st.legacy)
			for _, p := range st.legacy {
				h.rt.dependOn(p, j)
			}
		}
		st.free++
		ja := j.access()
		ja.free = append(ja.free, lockReq{h: h, st: st})
		j.lockOn(h, st, m)
		return start
	}
	if g := st.group; g != nil && g.redux && m != Redux {
		start = h.closeRedux(st)
	}
	switch {
	case m == Redux:
		h.join(st, j, true)
		ja := j.access()
		ja.redux = append(ja.redux, reduxUse{h: h, red: st.red, phase: st.group.phase})
		return start
	case m&Commute != 0:
		h.join(st, j, false)
		j.lockOn(h, st, m)
		return start
	case m&W == 0:
		if g := st.group; g != nil {
			for _, p := range g.members {
				h.rt.dependOn(p, j)
			}
		} else {
			h.rt.dependOn(h.lastWriter, j)
		}
		if len(h.readers) >= 64 {
			h.readers = pruneReleased(h.readers)
		}
		h.readers = append(h.readers, j)
	default:
		switch {
		case len(h.readers) > 0:
			for _, r := range h.readers {
				h.rt.dependOn(r, j)
			}
		case st.group != nil:
			for _, p := range st.group.members {
				h.rt.dependOn(p, j)
			}
		default:
			h.rt.dependOn(h.lastWriter, j)
		}
		clear(h.readers)
		h.readers = h.readers[:0]
		h.lastWriter = j
		st.group = nil
	}
	if st.locking {
		j.lockOn(h, st, m)
	}
	return start
}

// lockOutstanding makes the ordered accesses to h that have not terminated
// (the last writer and the readers since) take the data lock, when h
// starts locking (h.mu held): those still waiting for dependencies take it
// when ready; they are held meanwhile, and returned for the caller to
// release. Those already ready or running become st.legacy.
func (h *Handle) lockOutstanding(st *accessState) []*job {
	var held []*job
	add := func(p *job, m Mode) {
		switch {
		case p.hold():
			p.lockOn(h, st, m)
			held = append(held, p)
		case !isReleased(p):
			st.legacy = append(st.legacy, p)
		}
	}
	if h.lastWriter != nil {
		add(h.lastWriter, W)
	}
	for _, r := range h.readers {
		add(r, R)
	}
	return held
}

// inFlight are the ordered accesses to h ready or running and not
// terminated; h.mu held.
func (h *Handle) inFlight() []*job {
	var out []*job
	for _, p := range append([]*job{h.lastWriter}, h.readers...) {
		if p != nil && p.ndeps.Load() == 0 && !isReleased(p) {
			out = append(out, p)
		}
	}
	return out
}

// join adds j to the open group of its kind, or opens one after the
// accesses before it; h.mu held.
func (h *Handle) join(st *accessState, j *job, redux bool) {
	g := st.group
	if g != nil && g.redux == redux && len(h.readers) == 0 {
		if len(g.preds) >= 64 {
			g.preds = pruneReleased(g.preds)
		}
		for _, p := range g.preds {
			h.rt.dependOn(p, j)
		}
		if len(g.members) >= 64 {
			g.members = pruneReleased(g.members)
		}
		g.members = append(g.members, j)
		return
	}
	var preds []*job
	switch {
	case len(h.readers) > 0:
		preds = append(preds, h.readers...)
	case g != nil:
		preds = g.members
	case h.lastWriter != nil:
		preds = []*job{h.lastWriter}
	}
	for _, p := range preds {
		h.rt.dependOn(p, j)
	}
	ng := &accessGroup{redux: redux, preds: preds, members: []*job{j}}
	if redux {
		st.red.phase++
		ng.phase = st.red.phase
		h.ensureContribs(st.red)
	}
	st.group = ng
	clear(h.readers)
	h.readers = h.readers[:0]
	h.lastWriter = nil
}

// lockData takes j's data locks in order, from the first it does not hold;
// false when one is taken by others: j then waits in that lock's queue and
// goes on when it is granted (see wakeLocked).
func (rt *Runtime) lockData(j *job) bool {
	a := j.ext.Load().acc
	if !a.sorted {
		sort.Slice(a.locks, func(p, q int) bool {
			lp, lq := &a.locks[p], &a.locks[q]
			if ip, iq := lp.arb.order(), lq.arb.order(); ip != iq {
				return ip < iq
			}
			return lp.h.id < lq.h.id
		})
		a.sorted = true
	}
	for a.pos < len(a.locks) {
		l := &a.locks[a.pos]
		if l.arb == nil {
			l.h.mu.Lock()
			if !l.st.lock.grantable(l.mode, false) {
				park(j, &l.st.lock)
				l.h.mu.Unlock()
				return false
			}
			l.st.lock.take(l.mode)
			l.h.mu.Unlock()
			a.pos++
			continue
		}
		end := groupEnd(a.locks, a.pos)
		l.arb.mu.Lock()
		if b := tryGroup(a.locks[a.pos:end], false); b >= 0 {
			park(j, &a.locks[a.pos+b].st.lock)
			l.arb.mu.Unlock()
			return false
		}
		l.arb.mu.Unlock()
		a.pos = end
	}
	return true
}

// park queues j on a lock; its status says it waits for data.
func park(j *job, l *dataLock) {
	l.waiters = append(l.waiters, j)
	if j.task != nil {
		j.status.Store(uint32(statusWaiting))
	}
}

func (a *Arbiter) order() uint64 {
	if a == nil {
		return 0
	}
	return a.id
}

// groupEnd is the end of the run of locks from i that share i's arbiter.
func groupEnd(ls []lockReq, i int) int {
	e := i + 1
	for e < len(ls) && ls[e].arb == ls[i].arb {
		e++
	}
	return e
}

// tryGroup takes all of ls (one arbiter's locks, its mutex held) or none;
// it returns the index of the first one that cannot be taken, or -1.
func tryGroup(ls []lockReq, retry bool) int {
	for i := range ls {
		if !ls[i].st.lock.grantable(ls[i].mode, retry) {
			return i
		}
	}
	for i := range ls {
		ls[i].st.lock.take(ls[i].mode)
	}
	return -1
}

// locked goes on with a job whose data locks were granted after a wait.
func (rt *Runtime) locked(j *job, releasedBy int32) {
	switch {
	case j.acquire != nil:
		j.acquire.grant()
	case j.nowhere:
		rt.complete(j, -1, nil)
	default:
		j.status.Store(uint32(StatusReady))
		rt.pushLocked(j, releasedBy)
	}
}

// accessDone runs when j has executed: it releases j's data locks, handing
// them to the jobs waiting, counts its accesses without sequential
// consistency as over, and frees its scratch buffers.
func (rt *Runtime) accessDone(j *job, worker int32) {
	x := j.ext.Load()
	if x == nil || x.acc == nil {
		return
	}
	a := x.acc
	var woken []*job
	for i := 0; i < a.pos; {
		l := &a.locks[i]
		if l.arb == nil {
			l.h.mu.Lock()
			l.st.lock.drop(l.mode)
			woken = l.st.lock.wake(woken)
			l.h.mu.Unlock()
			i++
			continue
		}
		end := groupEnd(a.locks, i)
		l.arb.mu.Lock()
		for k := i; k < end; k++ {
			a.locks[k].st.lock.drop(a.locks[k].mode)
		}
		for k := i; k < end; k++ {
			woken = retryWaiters(a.locks[k].st, woken)
		}
		l.arb.mu.Unlock()
		i = end
	}
	a.pos = 0
	for _, f := range a.free {
		f.h.mu.Lock()
		st := f.st
		st.free--
		if st.free == 0 && st.freeDone != nil {
			close(st.freeDone)
			st.freeDone = nil
		}
		f.h.mu.Unlock()
	}
	if j.sub && a.bufs != nil {
		for i, m := range j.modes {
			// A device worker's SCRATCH buffer has no RAM span: dropData
			// gave its allocation back.
			if m&^Locality == Scratch && a.bufs[i] != nil && a.bufs[i].span.Size > 0 {
				rt.scratchFree(a.bufs[i].span)
			}
		}
	}
	for _, w := range woken {
		if rt.lockData(w) {
			rt.locked(w, worker)
		}
	}
}

// retryWaiters tries again, for the jobs waiting on st's lock, the group of
// arbitered locks they wait for (the arbiter's mutex held): those that get
// it are appended to out, the others wait on the lock that stops them.
func retryWaiters(st *accessState, out []*job) []*job {
	ws := st.lock.waiters
	st.lock.waiters = nil
	for _, w := range ws {
		wa := w.ext.Load().acc
		end := groupEnd(wa.locks, wa.pos)
		if b := tryGroup(wa.locks[wa.pos:end], true); b >= 0 {
			bl := &wa.locks[wa.pos+b].st.lock
			bl.waiters = append(bl.waiters, w)
			continue
		}
		wa.pos = end
		out = append(out, w)
	}
	return out
}

// waitFree waits until no access to h without sequential consistency is in
// flight.
func (h *Handle) waitFree() {
	for {
		h.mu.Lock()
		st := h.acc
		if st == nil || st.free == 0 {
			h.mu.Unlock()
			return
		}
		if st.freeDone == nil {
			st.freeDone = make(chan struct{})
		}
		ch := st.freeDone
		h.mu.Unlock()
		h.rt.await(ch)
	}
}

// afterFree runs f once no access to h without sequential consistency is
// in flight: at once when none is, else on a goroutine of its own.
func (h *Handle) afterFree(f func()) {
	h.mu.Lock()
	busy := h.acc != nil && h.acc.free > 0
	h.mu.Unlock()
	if !busy {
		f()
		return
	}
	go func() {
		h.waitFree()
		f()
	}()
}

// validAcquireMode tells whether the application may acquire data in m:
// SCRATCH and REDUX are for tasks.
func validAcquireMode(m Mode) bool {
	return validMode(m) && m&(Scratch|Redux) == 0
}

// TryAcquire acquires h like Acquire if it can be granted at once, and
// otherwise returns an error wrapping ErrWouldBlock without changing
// anything (StarPU's starpu_data_acquire_try): it cannot when a task or an
// acquisition that conflicts with m is pending (submitted and not
// terminated, with sequential consistency on; holding the data, with it
// off), or when REDUX contributions wait to be reduced. Release it with
// Release.
func (h *Handle) TryAcquire(m Mode) error { return h.TryAcquireOnNode(0, m) }

// TryAcquireOnNode is TryAcquire with the data brought to memory node node,
// as AcquireOnNode (StarPU's starpu_data_acquire_on_node_try); node may be
// AcquireNoNode or AcquireNoNodeLockAll. Only the wait for other accesses
// is refused: once granted, it waits for the transfer that brings the data
// to node. Release it with ReleaseOnNode(node).
func (h *Handle) TryAcquireOnNode(node int, m Mode) error {
	if err := h.checkAcquire("try acquire", node, m); err != nil {
		return err
	}
	// Granted at once, but bringing the data to RAM may wait for the engine.
	if err := h.rt.mayBlock("try acquire " + h.String()); err != nil {
		return err
	}
	h.mu.Lock()
	var arb *Arbiter
	if h.acc != nil {
		arb = h.acc.arbiter
	}
	h.mu.Unlock()
	// An arbiter is assigned before any access and for good, so arb is
	// still h's once h.mu is taken again.
	if arb != nil {
		arb.mu.Lock()
	}
	h.mu.Lock()
	if why := h.blocker(m); why != "" {
		h.mu.Unlock()
		if arb != nil {
			arb.mu.Unlock()
		}
		return fmt.Errorf("try acquire %s in mode %v: %w: %s", h, m, ErrWouldBlock, why)
	}
	j := h.rt.newJob()
	a := &acquisition{mode: m, job: j, granted: make(chan struct{})}
	j.acquire = a
	var start []*job
	if h.acc != nil || m&^(RW|Locality) != 0 {
		start = h.accessLocked(j, m, true)
	} else {
		h.dependPlain(j, m)
	}
	if j.arb {
		// The lock is free (blocker checked it under the same mutexes).
		ja := j.ext.Load().acc
		for i := range ja.locks {
			ja.locks[i].st.lock.take(ja.locks[i].mode)
		}
		ja.pos, ja.sorted = len(ja.locks), true
	}
	// Ready before h.mu is released: lockOutstanding must not take j for
	// a waiting access and add a lock it already holds.
	ready := j.ndeps.Add(-1) == 0
	h.mu.Unlock()
	if arb != nil {
		arb.mu.Unlock()
	}
	for _, r := range start {
		if r.ndeps.Add(-1) == 0 {
			h.rt.ready(r, -1)
		}
	}
	if ready {
		h.rt.ready(j, -1)
	}
	h.rt.await(a.granted)
	if node == 0 {
		return h.finishAcquire(a)
	}
	a.node = node
	if err := h.bring(a); err != nil {
		h.rt.complete(a.job, -1, nil)
		return fmt.Errorf("try acquire %s: bring data to %s: %w", h, h.rt.nodeName(node), err)
	}
	h.mu.Lock()
	h.held = append(h.held, a)
	h.mu.Unlock()
	return nil
}

// blocker says why an acquisition of h in m would wait, or ""; h.mu held,
// and the arbiter's mutex if h has one.
func (h *Handle) blocker(m Mode) string {
	st := h.acc
	m &^= Locality
	seq := st == nil || !st.noSeq
	if seq {
		if st != nil && st.group != nil && st.group.redux {
			return "REDUX contributions wait to be reduced"
		}
		for _, p := range h.conflicts(m) {
			if p != nil && !isReleased(p) {
				return fmt.Sprintf("%s is pending", p.describe())
			}
		}
	} else {
		pending := st.legacy
		if !st.locking {
			pending = h.inFlight()
		}
		for _, p := range pending {
			if !isReleased(p) {
				return fmt.Sprintf("%s is pending", p.describe())
			}
		}
	}
	if st != nil && (st.locking || !seq || m&Commute != 0) {
		lm := R
		if m&W != 0 {
			lm = W
		}
		if !st.lock.grantable(lm, false) {
			return "a running task or an acquisition holds the data"
		}
	}
	return ""
}

// conflicts are the accesses an ordered access in m waits for; h.mu held.
func (h *Handle) conflicts(m Mode) []*job {
	var g *accessGroup
	if h.acc != nil {
		g = h.acc.group
	}
	switch {
	case m&W == 0:
		if g != nil {
			return g.members
		}
		return []*job{h.lastWriter}
	case m&Commute != 0 && g != nil && !g.redux && len(h.readers) == 0:
		return g.preds
	case len(h.readers) > 0:
		return h.readers
	case g != nil:
		return g.members
	}
	return []*job{h.lastWriter}
}

func isReleased(j *job) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.released
}

// describe names j in messages.
func (j *job) describe() string {
	if j.acquire != nil {
		return "an acquisition"
	}
	return fmt.Sprintf("task %q", j.name())
}

// AcquireSequentialConsistency is Acquire with the choice of ordering
// (StarPU's starpu_data_acquire_cb_sequential_consistency, blocking): with
// sequential false, the acquisition waits for no task submitted before it,
// only for the data lock (no task running on the data in a conflicting
// mode), and tasks submitted after it do not wait for it beyond that lock.
func (h *Handle) AcquireSequentialConsistency(m Mode, sequential bool) error {
	if sequential {
		return h.Acquire(m)
	}
	if !validAcquireMode(m) {
		return fmt.Errorf("%w: acquire with mode %v", ErrInvalidTask, m)
	}
	if err := h.checkAccess(m); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := h.rt.mayBlock("acquire " + h.String()); err != nil {
		return err
	}
	j := h.rt.newJob()
	a := &acquisition{mode: m, job: j, granted: make(chan struct{})}
	j.acquire = a
	h.dependFree(j, m)
	if j.ndeps.Add(-1) == 0 {
		h.rt.ready(j, -1)
	}
	h.rt.await(a.granted)
	return h.finishAcquire(a)
}

// finishAcquire brings the data of a granted acquisition to RAM and to the
// application's memory, and records the hold for Release.
func (h *Handle) finishAcquire(a *acquisition) error {
	if err := h.fetchTo(0, a.mode); err != nil {
		h.rt.complete(a.job, -1, nil)
		return fmt.Errorf("acquire %s: bring data to RAM: %w", h, err)
	}
	h.mu.Lock()
	if h.home != nil && !h.homeValid {
		h.copyHomeOut()
		h.homeValid = true
	}
	h.held = append(h.held, a)
	h.mu.Unlock()
	return nil
}

// dropAccess frees what h's access state holds, at unregister: the REDUX
// buffers and its place in its arbiter.
func (h *Handle) dropAccess() error {
	h.mu.Lock()
	st := h.acc
	h.acc = nil
	h.mu.Unlock()
	if st == nil {
		return nil
	}
	if a := st.arbiter; a != nil {
		a.mu.Lock()
		a.handles--
		a.mu.Unlock()
	}
	var errs []error
	if st.red != nil {
		for _, c := range st.red.contribs {
			if c == nil || c.h.span.Size == 0 {
				continue
			}
			c.h.dropReplicates()
			if err := h.rt.arena.Free(c.h.span); err != nil {
				errs = append(errs, fmt.Errorf("free REDUX buffer of %s: %w", h, err))
			}
		}
	}
	return errors.Join(errs...)
}
