package core

// Explicit and end dependencies; design note: docs/design/tasks.md.

import (
	"fmt"
	"slices"
)

// Explicit dependencies between tasks, as StarPU's starpu_task_dep.h. They
// may be declared before any of the tasks is submitted, in any order: a
// predecessor submitted later is waited for, one that already terminated
// counts as met. Declarations must not race with Submit of the same tasks.

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
	for _, p := range preds {
		pj := rt.predJob(p)
		pj.mu.Lock()
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
	// Kept on the head for the runs Regenerate makes (redeclareDeps).
	h := t.job
	h.mu.Lock()
	x := h.x()
	for _, p := range preds {
		if !slices.Contains(x.declPreds, p) {
			x.declPreds = append(x.declPreds, p)
		}
	}
	h.mu.Unlock()
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

// redeclareDeps makes j, the next run of regenerated task t (head h), wait
// for t's declared predecessors: the run of each in flight, else the next
// run of one with Regenerate set; a predecessor that terminated and will
// not run again counts as met. Before j is enqueued.
func (rt *Runtime) redeclareDeps(t *Task, h, j *job) {
	h.mu.Lock()
	var preds []*Task
	if x := h.ext.Load(); x != nil {
		preds = slices.Clone(x.declPreds)
	}
	h.mu.Unlock()
	for _, p := range preds {
		pj := rt.predJob(p)
		pj.mu.Lock()
		if pj.released {
			pj.mu.Unlock()
			if !p.Regenerate {
				rt.traceEndedPred(pj, j, true) // j's submission is recorded
				continue
			}
			pj = rt.nextRun(p)
			pj.mu.Lock()
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
