package core

// Explicit and end dependencies; design note: docs/design/tasks.md.

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Explicit dependencies between tasks, as StarPU's starpu_task_dep.h. They
// may be declared before any of the tasks is submitted, in any order: a
// predecessor submitted later is waited for, one that already terminated
// counts as met. Declarations must not race with Submit of the same tasks.
//
// Declared once, they hold for every later run of the task, submitted
// again or regenerated, as in StarPU (tests/main/subgraph_repeat*.c): runs
// are matched by count. Each task counts its submissions (Task.nsub); for
// each predecessor P the task remembers which run of P its last run waited
// for (declPred.seen), and its next run waits for the run after that: P's
// run in flight or over if P has been submitted that often, else P's next
// submission (nextRun), however long it takes to come. So in a diamond
// A -> B, C -> D whose D resubmits all four from its callback, run k of B
// waits for run k of A, whichever order the callback submits them in and
// however fast A runs.
//
// Rejected: waiting for the predecessor's run in flight, and counting one
// that is over as met (what was done before). A rerun then raced its
// predecessor's resubmission: B resubmitted after the next A, or
// regenerated, ran before that A had run.

// taskDecl is what DeclareDeps declared on a task, for all its runs. mu
// guards it; bound is the run (Task.nsub) the declared dependencies were
// last bound to.
type taskDecl struct {
	mu    sync.Mutex
	preds []declPred
	bound int32
}

// declPred is a declared predecessor and the run of it that the task's
// run bound last waits for (its Task.nsub then, or the one to come).
type declPred struct {
	t    *Task
	seen int32
}

// DeclareDeps makes t wait for the termination of every task of preds
// (StarPU's starpu_task_declare_deps; pass a slice with preds...). Calls
// add up; duplicates are harmless. Declared before t's submission, the
// dependencies hold for that submission. Declared after it, they hold if t
// still waits for other dependencies, and are an error once t is ready,
// unless t has Regenerate set: they then hold for its next submission.
// As in StarPU, they also hold for every run Regenerate makes: each run
// waits for the predecessor's run in flight, or, when that one is over
// and the predecessor has Regenerate set, for its next run.
func (rt *Runtime) DeclareDeps(t *Task, preds ...*Task) error {
	if t == nil {
		return fmt.Errorf("%w: DeclareDeps on a nil task", ErrInvalidTask)
	}
	for i, p := range preds {
		if p == nil {
			return fmt.Errorf("%w: task %q: predecessor %d is nil", ErrInvalidTask, t.TaskName(), i)
		}
		if p == t {
			return fmt.Errorf("%w: task %q cannot depend on itself", ErrInvalidTask, t.TaskName())
		}
	}
	if len(preds) == 0 {
		return nil
	}
	j, live := rt.declTarget(t)
	// The run of t the dependencies apply to: its current one when it is
	// in flight, else its next submission.
	run := atomic.LoadInt32(&t.nsub)
	if !live {
		run++
	}
	seen := make([]int32, len(preds))
	for i, p := range preds {
		pj := rt.predJob(p)
		pj.mu.Lock()
		seen[i] = atomic.LoadInt32(&p.nsub)
		if !pj.isSubmitted() {
			seen[i]++ // p's next submission
		}
		if pj.released {
			pj.mu.Unlock()
			rt.traceEndedPred(pj, j, live)
			continue
		}
		if live {
			if !j.hold() {
				pj.mu.Unlock()
				if t.Regenerate {
					return rt.DeclareDeps(t, preds...)
				}
				return fmt.Errorf("%w: task %q is already ready; declare its dependencies before it can start", ErrInvalidTask, t.TaskName())
			}
		} else {
			j.ndeps.Add(1)
		}
		j.taskDeps.Add(1)
		pj.x().tsuccs = append(pj.x().tsuccs, j)
		pj.mu.Unlock()
	}
	// Kept on the task for its later runs (bindDeclared).
	if t.decl == nil {
		t.decl = &taskDecl{}
	}
	d := t.decl
	d.mu.Lock()
	d.bound = max(d.bound, run)
	for i, p := range preds {
		k := slices.IndexFunc(d.preds, func(dp declPred) bool { return dp.t == p })
		if k < 0 {
			d.preds = append(d.preds, declPred{t: p, seen: seen[i]})
		} else {
			d.preds[k].seen = max(d.preds[k].seen, seen[i])
		}
	}
	d.mu.Unlock()
	return nil
}

// traceEndedPred records, for a trace, that succ depends on pred, which
// terminated before DeclareDeps was called: at once when succ is submitted
// (live), else once it is (traceEndedPreds), as its submit record must come
// first.
func (rt *Runtime) traceEndedPred(pred, succ *job, live bool) {
	switch {
	case rt.trace == nil:
	case live:
		rt.trace.edge(pred, succ, false)
	default:
		succ.mu.Lock()
		x := succ.x()
		x.endedPreds = append(x.endedPreds, pred)
		succ.mu.Unlock()
	}
}

// traceEndedPreds records the edges traceEndedPred kept for j, once its
// submission is recorded.
func (rt *Runtime) traceEndedPreds(j *job) {
	x := j.ext.Load()
	if x == nil {
		return
	}
	j.mu.Lock()
	preds := x.endedPreds
	x.endedPreds = nil
	j.mu.Unlock()
	for _, p := range preds {
		rt.trace.edge(p, j, false)
	}
}

// bindDeclared makes j, run number run of t (Submit's or Regenerate's),
// wait for t's declared predecessors, each for the run after the one t's
// previous run waited for (see the header), unless DeclareDeps bound them
// to this run already. Before j is enqueued.
func (rt *Runtime) bindDeclared(t *Task, j *job, run int32) {
	d := t.decl
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bound >= run {
		return
	}
	d.bound = run
	for i := range d.preds {
		dp := &d.preds[i]
		p := dp.t
		want := dp.seen + 1
		var pj *job
		if atomic.LoadInt32(&p.nsub) >= want {
			// p has run that often: its run in flight, or over.
			pj, dp.seen = p.current(), atomic.LoadInt32(&p.nsub)
		} else {
			pj, dp.seen = rt.nextRun(p), want
		}
		pj.mu.Lock()
		if pj.released {
			pj.mu.Unlock()
			rt.traceEndedPred(pj, j, true) // j's submission is recorded
			continue
		}
		j.ndeps.Add(1)
		j.taskDeps.Add(1)
		pj.x().tsuccs = append(pj.x().tsuccs, j)
		pj.mu.Unlock()
	}
}

// nextRun returns the job of p's next submission, made now if need be:
// Regenerate and Submit take it.
func (rt *Runtime) nextRun(p *Task) *job {
	h := p.job
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.x()
	if x.next == nil {
		x.next = rt.newJob()
		x.next.task = p
	}
	return x.next
}

// hold adds a dependency to a job still waiting for some, so that it keeps
// waiting; false when it is already ready.
func (j *job) hold() bool {
	// Under j.mu, which tryChain holds while it chains j: a chained job
	// is queued on its worker and takes no more dependencies.
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.chain.Load()&chainOn != 0 {
		return false
	}
	for {
		n := j.ndeps.Load()
		if n == 0 {
			return false
		}
		if j.ndeps.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// declTarget returns the job that dependencies declared on t now apply to,
// and whether it is submitted and in flight (then only hold may add to it).
func (rt *Runtime) declTarget(t *Task) (*job, bool) {
	h := t.job
	if h == nil {
		j := rt.newJob()
		j.task = t
		t.job = j
		return j, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isSubmitted() {
		return h, false
	}
	cur, ended := h, h.released
	if x := h.ext.Load(); x != nil && x.cur != nil {
		cur = x.cur
		cur.mu.Lock()
		ended = cur.released || h.finished
		cur.mu.Unlock()
	}
	if !ended && !(t.Regenerate && cur.ndeps.Load() == 0) {
		return cur, true
	}
	x := h.x()
	if x.next == nil {
		x.next = rt.newJob()
		x.next.task = t
	}
	return x.next, false
}

// predJob returns the job a dependency on p waits for: p's submission in
// flight or last made, or the job of its first submission to come.
func (rt *Runtime) predJob(p *Task) *job {
	if p.job == nil {
		j := rt.newJob()
		j.task = p
		p.job = j
		return j
	}
	return p.current()
}

// DeclareEndDeps makes t's termination wait for that of every task of
// preds (StarPU's starpu_task_declare_end_deps): t may run, but it is not
// considered terminated (Wait does not return, its successors and tag are
// not released, its callback does not run) until they are. Declare before t
// terminates.
func (rt *Runtime) DeclareEndDeps(t *Task, preds ...*Task) error {
	for i, p := range preds {
		if p == nil {
			return fmt.Errorf("%w: task %q: end predecessor %d is nil", ErrInvalidTask, t.TaskName(), i)
		}
		if p == t {
			return fmt.Errorf("%w: task %q cannot end-depend on itself", ErrInvalidTask, t.TaskName())
		}
	}
	if len(preds) == 0 {
		return nil
	}
	j, err := rt.endTarget(t, len(preds))
	if err != nil {
		return err
	}
	for _, p := range preds {
		pj := rt.predJob(p)
		pj.mu.Lock()
		if pj.released {
			pj.mu.Unlock()
			rt.terminate(termination{j: j, endDep: true}, -1)
			continue
		}
		pj.x().esuccs = append(pj.x().esuccs, j)
		pj.mu.Unlock()
	}
	return nil
}

// EndDepAdd adds n end dependencies to t: it will not terminate before n
// calls to EndDepRelease (StarPU's starpu_task_end_dep_add).
func (rt *Runtime) EndDepAdd(t *Task, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: task %q: EndDepAdd of %d dependencies", ErrInvalidTask, t.TaskName(), n)
	}
	_, err := rt.endTarget(t, n)
	return err
}

// EndDepRelease releases one end dependency of t added by EndDepAdd; t
// terminates at the last one if it has run, and its callback then runs on
// the caller's goroutine.
func (rt *Runtime) EndDepRelease(t *Task) error {
	j := t.current()
	if j == nil {
		return fmt.Errorf("%w: task %q has no end dependency", ErrInvalidTask, t.TaskName())
	}
	j.mu.Lock()
	n := j.endDeps()
	j.mu.Unlock()
	if n <= 0 {
		return fmt.Errorf("%w: task %q has no end dependency left to release", ErrInvalidTask, t.TaskName())
	}
	rt.terminate(termination{j: j, endDep: true}, -1)
	return nil
}

// endTarget adds n end dependencies to the job of t's submission in flight,
// or of its next one.
func (rt *Runtime) endTarget(t *Task, n int) (*job, error) {
	j := t.current()
	if j == nil {
		j = rt.predJob(t)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.released {
		return nil, fmt.Errorf("%w: task %q has already terminated: declare end dependencies before", ErrInvalidTask, t.TaskName())
	}
	j.x().endDeps += int32(n)
	return j, nil
}

// TaskSuccessors returns the tasks that wait for t's current submission
// through explicit or implicit data dependencies (StarPU's
// starpu_task_get_task_succs). It is meaningful until t terminates, and
// may be outdated as soon as it returns.
func (rt *Runtime) TaskSuccessors(t *Task) []*Task {
	return successors(t, false)
}

// ScheduledSuccessors is TaskSuccessors without the tasks that skip the
// scheduler: those that run nowhere or on a given worker.
func (rt *Runtime) ScheduledSuccessors(t *Task) []*Task {
	return successors(t, true)
}

func successors(t *Task, scheduled bool) []*Task {
	j := t.current()
	if j == nil {
		return nil
	}
	j.mu.Lock()
	js := append([]*job(nil), j.succs...)
	if x := j.ext.Load(); x != nil {
		js = append(js, x.tsuccs...)
	}
	j.mu.Unlock()
	seen := map[*Task]bool{}
	var out []*Task
	for _, s := range js {
		st := s.task
		if st == nil || seen[st] {
			continue
		}
		if scheduled && (s.nowhere || st.Codelet == nil || st.ExecuteOnWorker) {
			continue
		}
		seen[st] = true
		out = append(out, st)
	}
	return out
}
