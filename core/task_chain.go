package core

// Chains: a task queued behind its only unfinished predecessor, before it
// is ready. Design note: docs/design/hot-path.md, "Chains".
//
// A dependency hop costs three processes waking on two cores (the worker
// tells the core, the core releases the successor and tells the policy,
// the policy tells a worker); StarPU's hop stays in the worker's thread.
// When a task S has one unfinished predecessor P, and P sits in a worker's
// in-order queue, S can only start once P ends there: queueing S behind P
// on the same worker at once, the way a CUDA stream orders its kernels,
// loses nothing and spares the hop. A chain then flows through the worker
// with the core hearing of completions in batches.
//
// Protocol.
//   - The core pushes S with PushAfter, its Exec flagged ExecAfter naming
//     P, as soon as both are known: when S is submitted if P's Push is
//     already in the policy's ring (chainPushed on P), else when P is
//     pushed (chainFrom walks P's successors). It chains at most one
//     successor per predecessor (chainHasSucc): the others would queue
//     behind the first and lose the parallelism the policy would find.
//   - The policy host (pluginapi/sched, host_chain.go) queues S behind P
//     when P is the last task it gave P's worker and the policy agrees
//     (sched.Chainer); it answers with an Assign flagged AssignPosted, as
//     for any task it posts. Otherwise it answers AssignDeclined, and the
//     core pushes S again, without PushAfter, once its dependencies are
//     met.
//   - The driver runs S only if it ran P successfully; if P failed or was
//     skipped it answers with a Completion flagged Skipped, and the core
//     handles S as declined. So a failed predecessor changes nothing to
//     what its successors do: they go through the ordinary path.
//   - The core keeps S's dependencies as they are: releasing them marks S
//     ready (chainDepsMet) instead of pushing it, and a run that ends
//     before they are released (the predecessor's completion waiting for
//     a write-through) completes S only once they are. The release marks
//     an unchained job too, and S is chained only while the bit is clear,
//     both by compare-and-swap: Submit may chain S while the engine
//     releases it, and exactly one of them must push it.
//
// What is chained: a sequential task (a parallel one may need a team that
// is not P's worker: task_parallel.go) of the global context on a machine
// with RAM only, whose Exec the core encodes at push time (engine.postKernel), with
// no SCRATCH or REDUX buffers, data locks, prologue callback, worker order
// or worker of its own, not retried after a driver crash, submitted while
// no fault is under way (engine.checks is zero: no dead driver, lost
// handle or doomed task; chaining resumes once they are over), and whose every
// dependency is on P (data, or one tag group of one tag bound to P). Each
// of its handles must wait for P: a handle that waits for nothing may be
// taken meanwhile by an acquisition that ignores the order of tasks
// (AcquireCBSequentialConsistency), which the task, not yet ready, would
// let go first without chaining; with every handle behind P, any such
// acquisition waits for P anyway, and the task only follows it.
// Dependencies cannot be added to a chained task (hold fails): StarPU
// requires them declared before the task is submitted.
//
// Rejected: letting the driver release dependencies (it would need the
// core's handle and tag state); chaining every successor (a fan-out would
// serialise on one worker); asking the policy through gRPC (microseconds
// per task).

import "github.com/starpu-go/starpu/pluginapi/wire"

// Bits of job.chain. The first four are the job's state as a chained
// task; the last two describe it as a predecessor.
const (
	// chainOn: pushed with PushAfter, and neither declined nor skipped.
	chainOn uint32 = 1 << iota
	// chainAccepted: the policy queued it behind its predecessor.
	chainAccepted
	// chainDepsMet: its dependencies were released.
	chainDepsMet
	// chainRan: its run ended (chainWorker, chainErr) before they were.
	chainRan
	// chainPushed: its Push, with its Exec, is in the global policy's
	// events ring, so that a successor's PushAfter comes after it.
	chainPushed
	// chainHasSucc: a successor was chained behind it.
	chainHasSucc
)

// chainState bits that make up a chained task's state.
const chainTaskBits = chainOn | chainAccepted | chainDepsMet | chainRan

// chainable reports whether s may be queued behind a predecessor, as far
// as s alone says.
func (rt *Runtime) chainable(s *job) bool {
	t := s.task
	// A job waiting for dependencies has no implementation chosen (the
	// engine chooses it at dispatch: -1).
	return rt.chains && t != nil && s.acquire == nil && s.cl != nil && !s.cl.par && !s.nowhere && !s.arb && !s.sub &&
		s.ctx == nil && s.pinned < 0 && t.PrologueCallback == nil && t.WorkerOrder == 0 &&
		!(s.cl.retryable && rt.cfg.PluginRestarts > 0) && rt.engine.checks.Load() == 0 &&
		s.status.Load() == uint32(statusWaiting) && postable(rt.engine.postKernelImpl(s, rt.global, -1))
}

// solePred is the job every one of s's dependencies is on, or nil. For a
// task gated by its tag, the tag's owner lock must be held.
func solePred(s *job) *job {
	if s.taskDeps.Load() != 0 || s.freeHandles != 0 {
		return nil
	}
	if s.tagWait.Load() {
		if s.npred1 != 0 || s.tag == nil {
			return nil
		}
		return s.tag.soleTagPredLocked()
	}
	if s.npred1 <= 0 {
		return nil
	}
	return s.pred1
}

// soleTagPredLocked is the job whose completion alone releases the job
// gated by ts: ts has one dependency group left, of one tag, bound to a
// submitted job. ts.mu held.
func (ts *tagState) soleTagPredLocked() *job {
	if ts.pending != 1 {
		return nil
	}
	var dt *tagState
	for _, g := range ts.groups {
		if !g.complete {
			if g.only == nil || g.remaining != 1 {
				return nil
			}
			dt = g.only
		}
	}
	if dt == nil {
		return nil
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if !dt.bound || dt.notified {
		return nil
	}
	return dt.job
}

// tryChain queues s behind p if every dependency s has is on p and p has
// no chained successor yet, and reports whether it pushed s.
func (rt *Runtime) tryChain(s, p *job) bool {
	if d := int64(s.id - p.id); d != int64(int32(d)) || p.chain.Load()&chainHasSucc != 0 || !rt.chainable(s) {
		return false // ExecAfter holds the distance in 32 bits
	}
	ts := s.tag
	if !s.tagWait.Load() {
		ts = nil
	} else if ts == nil {
		return false
	}
	if ts != nil {
		// Lock order: a tag, then a job (DeclareTagDeps holds the tag
		// while it holds the job).
		ts.mu.Lock()
	}
	s.mu.Lock()
	ok := s.chain.Load()&chainTaskBits == 0 && s.status.Load() == uint32(statusWaiting) && solePred(s) == p && s.chainClaim(p)
	s.mu.Unlock()
	if ts != nil {
		ts.mu.Unlock()
	}
	if !ok {
		return false
	}
	rt.push(s, -1)
	return true
}

// chainClaim marks s chained behind p, unless p has a chained successor
// or s's dependencies were released meanwhile (the engine may be
// releasing s: ready's chainReady sets chainDepsMet on an unchained job,
// and chainOn is only set on a job without it, so that exactly one of
// them pushes s). Losing the second race, p keeps chainHasSucc, which
// only spares it a chained successor.
func (s *job) chainClaim(p *job) bool {
	for {
		old := p.chain.Load()
		if old&chainHasSucc != 0 {
			return false
		}
		if p.chain.CompareAndSwap(old, old|chainHasSucc) {
			break
		}
	}
	s.chainPred = p.id
	for {
		old := s.chain.Load()
		if old&chainTaskBits != 0 {
			return false
		}
		if s.chain.CompareAndSwap(old, old|chainOn) {
			return true
		}
	}
}

// chainSubmitted is called once s is submitted and waits for
// dependencies: it chains s behind its predecessor if that one is
// already in the policy's ring, and then what waits for s.
func (rt *Runtime) chainSubmitted(s *job) {
	if !rt.chainable(s) {
		return
	}
	var p *job
	if s.tagWait.Load() {
		if ts := s.tag; ts != nil {
			ts.mu.Lock()
			p = solePred(s)
			ts.mu.Unlock()
		}
	} else {
		// Under s.mu: s may already be running to its end, which
		// clears pred1.
		s.mu.Lock()
		p = solePred(s)
		s.mu.Unlock()
	}
	if p == nil || p.chain.Load()&chainPushed == 0 {
		return
	}
	if rt.tryChain(s, p) {
		rt.chainFrom(s) // its successors may be submitted already (tags)
	}
}

// chainFrom chains behind p, just pushed, its successor that waits for it
// alone, then behind that one its own, and so on.
func (rt *Runtime) chainFrom(p *job) {
	for p != nil {
		s := chainSucc(p)
		if s == nil || !rt.tryChain(s, p) {
			return
		}
		p = s
	}
}

// chainSucc is a successor of p that waits for p alone, or nil.
func chainSucc(p *job) *job {
	p.mu.Lock()
	if p.released {
		p.mu.Unlock()
		return nil
	}
	for _, s := range p.succs {
		// The status first: it is stored once the dependencies are.
		if s.status.Load() == uint32(statusWaiting) && s.npred1 > 0 && s.pred1 == p && s.freeHandles == 0 && !s.tagWait.Load() && s.chain.Load()&chainTaskBits == 0 {
			p.mu.Unlock()
			return s
		}
	}
	p.mu.Unlock()
	ts := p.tag
	if ts == nil {
		return nil
	}
	ts.mu.Lock()
	groups := ts.succs
	ts.mu.Unlock()
	for _, g := range groups {
		if g.ntags != 1 {
			continue
		}
		o := g.owner
		o.mu.Lock()
		s := o.gated
		o.mu.Unlock()
		if s != nil && s.status.Load() == uint32(statusWaiting) && s.npred1 == 0 && s.freeHandles == 0 && s.chain.Load()&chainTaskBits == 0 {
			return s
		}
	}
	return nil
}

// chainReady is ready's first step for a job whose dependencies are met:
// for a chained job it records that, starts it if the policy queued it,
// and reports true. Any other job it marks chainDepsMet, so that a
// tryChain racing with its release (Submit's, or another worker's
// completion's) cannot chain it while ready pushes it, and reports false.
func (rt *Runtime) chainReady(j *job, engine bool) bool {
	for {
		old := j.chain.Load()
		if old&chainOn == 0 {
			// Marked so that tryChain, racing, cannot chain it now.
			if old&chainDepsMet != 0 || j.chain.CompareAndSwap(old, old|chainDepsMet) {
				return false
			}
			continue
		}
		if j.chain.CompareAndSwap(old, old|chainDepsMet) {
			switch {
			case old&chainAccepted != 0:
				rt.chainStarted(j, old&chainRan != 0, engine)
			case old&chainRan != 0:
				// Failed before the policy answered (its policy died):
				// it completes with that error now.
				rt.complete(j, j.chainWorker, j.chainErr)
			}
			return true
		}
	}
}

// chainStarted does for a chained job whose dependencies are met and
// which its worker has what pushing it would have done, and completes it
// if its run already ended.
func (rt *Runtime) chainStarted(j *job, ran, engine bool) {
	if rt.trace != nil {
		ns := j.chainReadyNs
		if ns == 0 {
			ns = wire.Now()
		}
		// Its run's record, if it ran, is in the engine's round: the
		// converters want the ready record first.
		rt.trace.readyAt(j, ns, engine && !ran)
	}
	j.counted = true
	rt.waits.nready.Add(1)
	if ran {
		rt.complete(j, j.chainWorker, j.chainErr)
	}
}

// chainAccepted records that the policy queued chained job j behind its
// predecessor. Engine goroutine.
func (rt *Runtime) chainAccepted(j *job) {
	for {
		old := j.chain.Load()
		if old&chainOn == 0 || old&chainAccepted != 0 {
			return
		}
		if j.chain.CompareAndSwap(old, old|chainAccepted) {
			if old&(chainDepsMet|chainRan) == chainDepsMet {
				rt.chainStarted(j, false, true)
			}
			return
		}
	}
}

// chainDefer holds the completion of chained job j until its dependencies
// are met, and reports whether it did.
func (rt *Runtime) chainDefer(j *job, worker int32, err error) bool {
	j.chainWorker, j.chainErr = worker, err
	for {
		old := j.chain.Load()
		if old&chainDepsMet != 0 || old&chainOn == 0 {
			return false
		}
		if j.chain.CompareAndSwap(old, old|chainRan) {
			return true
		}
	}
}

// chainUndo turns chained job j, declined by the policy or skipped by its
// worker, back into a task waiting for its dependencies, and pushes it
// the ordinary way if they are met. Engine goroutine; j is not tracked.
func (rt *Runtime) chainUndo(j *job) {
	j.worker, j.posted = -1, false
	for {
		old := j.chain.Load()
		if old&chainOn == 0 || old&chainRan != 0 {
			return // a failure waiting for the dependencies stays so
		}
		if !j.chain.CompareAndSwap(old, old&^chainTaskBits) {
			continue
		}
		if old&chainDepsMet == 0 {
			j.status.Store(uint32(statusWaiting))
			return
		}
		if j.counted {
			j.counted = false
			rt.waits.nready.Add(-1)
		}
		rt.ready(j, -1)
		return
	}
}

// chainDecided handles the policy's answer AssignDeclined. Engine
// goroutine.
func (e *engine) chainDeclined(id uint64) {
	j := e.untrack(id)
	if j == nil {
		e.rt.log.Error("scheduler declined an unknown task", "task", id)
		return
	}
	if j.chain.Load()&chainOn == 0 || j.worker >= 0 {
		// Declining a task pushed without PushAfter, or one it placed
		// already, would lose it: keep it and say so.
		e.track(j)
		e.rt.log.Error("scheduler declined a task it may not decline: ignored", "task", j.name())
		return
	}
	e.rt.chainUndo(j)
}

// chainSkipped handles a chained task its worker did not run, its
// predecessor having failed: the slot goes back to the policy and the
// task waits for its dependencies like any other.
func (e *engine) chainSkipped(j *job, w *workerState) {
	e.sendDone(j.sctx, w.id, j.id, 0)
	e.rt.chainUndo(j)
}

// markPushed records that j's Push, with its Exec, is in the global
// policy's ring, and for a task pushed ready chains behind it what waits
// for it alone (chainFrom goes on down a chain itself).
func (e *engine) markPushed(j *job) {
	if j.chain.Or(chainPushed)&chainOn == 0 {
		e.rt.chainFrom(j)
	}
}

// postable reports whether postKernelImpl found a kernel.
func postable(_ int8, k int32) bool { return k >= 0 }
