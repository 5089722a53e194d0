package core

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// TagID names a tag: a point in the task graph that tasks and the
// application can depend on, as in StarPU.
type TagID uint64

// Task is one execution of a codelet on a list of data handles.
type Task struct {
	// Codelet is what to run; nil makes a synchronisation task that runs
	// nowhere and completes as soon as its dependencies are met.
	Codelet *Codelet
	Handles []*Handle
	// Modes gives one mode per handle for codelets with VariableBuffers.
	Modes []Mode
	// Arg is passed to the kernel as is.
	Arg []byte
	// Priority orders ready tasks in policies that honour it; higher first.
	Priority int
	Name     string
	// Callback runs after the task completes, on the runtime's completion
	// thread: keep it short and never block in it.
	Callback func(*Task)
	// Synchronous makes Submit wait for the task's completion.
	Synchronous bool
	// Tag, when UseTag is set, is notified when the task completes; tasks
	// and tags that depend on it wait for that.
	Tag    TagID
	UseTag bool

	job *job
}

// Err returns the task's error once it has completed: a kernel failure, a
// crashed plugin, or nil.
func (t *Task) Err() error {
	if t.job == nil {
		return nil
	}
	return t.job.err
}

// job is the runtime's side of a task, or of an application's acquire.
type job struct {
	id    uint64
	task  *Task
	cl    *codeletInfo
	modes []Mode
	// ndeps counts unmet dependencies plus one while submit is in progress.
	ndeps atomic.Int32

	mu       sync.Mutex
	released bool   // dependencies of successors released
	succs    []*job // run when this job is released
	finished bool
	doneCh   chan struct{}

	err    error
	worker int32
	start  int64
	end    int64

	// Data placement (engine goroutine only, multi-node runtimes): the
	// node the job runs on, whether it holds references on its replicates
	// there, and the transfers it waits for before being posted.
	node         int
	dataHeld     bool
	waitWorker   *workerState
	pendingXfers int
	xferErr      error

	// acquire is set for a job that stands for an application's acquire.
	acquire *acquisition
	tag     *tagState
}

func (rt *Runtime) newJob() *job {
	j := &job{id: rt.nextJob.Add(1), worker: -1}
	j.ndeps.Store(1)
	return j
}

// addDep makes succ wait for pred, unless pred is already released or is
// succ itself (a task touching one handle twice).
func addDep(pred, succ *job) {
	if pred == nil || pred == succ {
		return
	}
	pred.mu.Lock()
	if !pred.released {
		pred.succs = append(pred.succs, succ)
		succ.ndeps.Add(1)
	}
	pred.mu.Unlock()
}

// Submit hands a task to the runtime. Errors in the task (wrong number of
// handles, an unregistered handle, a codelet no worker can run) are returned
// here; errors while running are returned by Wait.
func (rt *Runtime) Submit(t *Task) error {
	if err := rt.usable(); err != nil {
		return err
	}
	if t.job != nil && !t.job.isFinished() {
		return fmt.Errorf("%w: task %q is already submitted", ErrInvalidTask, t.Name)
	}
	j := rt.newJob()
	j.task = t
	if err := rt.checkTask(t, j); err != nil {
		return err
	}
	t.job = j
	rt.pending.Add(1)
	for i, h := range t.Handles {
		h.depend(j, j.modes[i])
	}
	if t.UseTag {
		rt.bindTag(t.Tag, j)
	}
	if j.ndeps.Add(-1) == 0 {
		rt.ready(j, -1)
	}
	if t.Synchronous {
		return rt.Wait(t)
	}
	return nil
}

func (rt *Runtime) checkTask(t *Task, j *job) error {
	name := t.Name
	if name == "" && t.Codelet != nil {
		name = t.Codelet.Name
	}
	if t.Codelet == nil {
		if len(t.Handles) > 0 {
			return fmt.Errorf("%w: task %q has handles but no codelet", ErrInvalidTask, name)
		}
		return nil
	}
	info, err := rt.resolve(t.Codelet)
	if err != nil {
		return err
	}
	j.cl = info
	cl := t.Codelet
	if n := cl.nbuffers(); n == VariableBuffers {
		if len(t.Modes) != len(t.Handles) {
			return fmt.Errorf("%w: task %q: codelet %q has variable buffers: %d handles but %d modes", ErrInvalidTask, name, cl.Name, len(t.Handles), len(t.Modes))
		}
		for i, m := range t.Modes {
			if !validMode(m) {
				return fmt.Errorf("%w: task %q: buffer %d has invalid mode %v", ErrInvalidTask, name, i, m)
			}
		}
		j.modes = t.Modes
	} else {
		if len(t.Handles) != n {
			return fmt.Errorf("%w: task %q: codelet %q takes %d buffers, task gives %d handles", ErrInvalidTask, name, cl.Name, n, len(t.Handles))
		}
		if len(t.Modes) != 0 {
			return fmt.Errorf("%w: task %q: Modes is for codelets with VariableBuffers; codelet %q fixes its modes", ErrInvalidTask, name, cl.Name)
		}
		j.modes = cl.Modes
	}
	for i, h := range t.Handles {
		if h == nil {
			return fmt.Errorf("%w: task %q: handle %d is nil", ErrInvalidTask, name, i)
		}
		if h.rt != rt {
			return fmt.Errorf("%w: task %q: handle %d belongs to another runtime", ErrInvalidTask, name, i)
		}
		if err := h.checkUsable(); err != nil {
			return fmt.Errorf("task %q: handle %d: %w", name, i, err)
		}
	}
	if max := rt.maxExec; wire.ExecSize(len(t.Handles), len(t.Arg)) > max {
		return fmt.Errorf("%w: task %q: argument of %d bytes with %d buffers exceeds the %d-byte dispatch message", ErrInvalidTask, name, len(t.Arg), len(t.Handles), max)
	}
	return nil
}

// ready is called once a job's dependencies are all met; releasedBy is the
// worker whose task completion made it ready, or -1.
func (rt *Runtime) ready(j *job, releasedBy int32) {
	switch {
	case j.acquire != nil:
		j.acquire.grant()
	case j.task.Codelet == nil:
		rt.complete(j, -1, nil)
	default:
		rt.push(j, releasedBy)
	}
}

// Wait blocks until t has completed and returns its error.
func (rt *Runtime) Wait(t *Task) error {
	j := t.job
	if j == nil {
		return fmt.Errorf("%w: task %q was not submitted", ErrInvalidTask, t.Name)
	}
	j.mu.Lock()
	if !j.finished {
		if j.doneCh == nil {
			j.doneCh = make(chan struct{})
		}
		ch := j.doneCh
		j.mu.Unlock()
		<-ch
	} else {
		j.mu.Unlock()
	}
	return j.err
}

func (j *job) isFinished() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.finished
}

// WaitForAll blocks until every submitted task has completed and returns the
// errors of the tasks that failed since the previous WaitForAll.
func (rt *Runtime) WaitForAll() error {
	rt.idleMu.Lock()
	for rt.pending.Load() > 0 {
		rt.idle.Wait()
	}
	errs := rt.failed
	dropped := rt.failedDropped
	rt.failed, rt.failedDropped = nil, 0
	rt.idleMu.Unlock()
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("and %d more failed tasks", dropped))
	}
	return errors.Join(errs...)
}

// complete ends a job: it releases its successors, runs the callback and
// wakes the waiters. worker is where it ran, or -1.
func (rt *Runtime) complete(j *job, worker int32, err error) {
	// A stack instead of recursion: chains of synchronisation tasks release
	// one another. Only the first job can carry an error.
	var buf [8]*job
	stack := append(buf[:0], j)
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		j.err = err
		j.mu.Lock()
		j.released = true
		succs := j.succs
		j.succs = nil
		j.mu.Unlock()
		if j.task != nil && j.cl != nil && err == nil {
			rt.noteWrites(j)
		}
		if j.tag != nil {
			succs = append(succs, j.tag.notify()...)
		}
		for _, s := range succs {
			if s.ndeps.Add(-1) == 0 {
				if s.task != nil && s.task.Codelet == nil && s.acquire == nil {
					stack = append(stack, s)
					continue
				}
				rt.ready(s, worker)
			}
		}
		if j.acquire != nil {
			continue
		}
		if j.task.Callback != nil {
			j.task.Callback(j.task)
		}
		j.mu.Lock()
		j.finished = true
		ch := j.doneCh
		j.mu.Unlock()
		if ch != nil {
			close(ch)
		}
		if err != nil {
			rt.recordFailure(err)
			err = nil
		}
		if rt.pending.Add(-1) == 0 {
			rt.idleMu.Lock()
			rt.idle.Broadcast()
			rt.idleMu.Unlock()
		}
	}
}

func (rt *Runtime) recordFailure(err error) {
	rt.idleMu.Lock()
	if len(rt.failed) < 16 {
		rt.failed = append(rt.failed, err)
	} else {
		rt.failedDropped++
	}
	rt.idleMu.Unlock()
}

// noteWrites marks the application's copies of written handles stale.
func (rt *Runtime) noteWrites(j *job) {
	for i, h := range j.task.Handles {
		if j.modes[i]&W != 0 && h.home != nil {
			h.mu.Lock()
			h.homeValid = false
			h.mu.Unlock()
		}
	}
}

// tagState is a tag: the job bound to it, whether it was notified, and who
// waits for it.
type tagState struct {
	mu      sync.Mutex
	done    bool
	deps    []TagID
	waiters []*job
	doneCh  chan struct{}
	hasTask bool
}

func (rt *Runtime) tag(id TagID) *tagState {
	rt.tagMu.Lock()
	defer rt.tagMu.Unlock()
	ts, ok := rt.tags[id]
	if !ok {
		ts = &tagState{}
		rt.tags[id] = ts
	}
	return ts
}

// DeclareTagDeps makes tag id depend on the given tags: the task bound to id
// starts only after every tag in deps has been notified. Declare before
// submitting the task that uses id.
func (rt *Runtime) DeclareTagDeps(id TagID, deps ...TagID) {
	ts := rt.tag(id)
	ts.mu.Lock()
	ts.deps = append(ts.deps, deps...)
	ts.mu.Unlock()
}

// bindTag ties job j to tag id: j waits for the tag's dependencies and
// notifies the tag when it completes.
func (rt *Runtime) bindTag(id TagID, j *job) {
	ts := rt.tag(id)
	ts.mu.Lock()
	deps := append([]TagID(nil), ts.deps...)
	ts.hasTask = true
	ts.mu.Unlock()
	j.tag = ts
	for _, d := range deps {
		rt.tag(d).wait(j)
	}
}

// wait makes j depend on the tag unless it is already notified.
func (ts *tagState) wait(j *job) {
	ts.mu.Lock()
	if !ts.done {
		ts.waiters = append(ts.waiters, j)
		j.ndeps.Add(1)
	}
	ts.mu.Unlock()
}

// notify marks the tag done and returns the jobs waiting for it.
func (ts *tagState) notify() []*job {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.done = true
	w := ts.waiters
	ts.waiters = nil
	if ts.doneCh != nil {
		close(ts.doneCh)
		ts.doneCh = nil
	}
	return w
}

// TagWait blocks until tag id has been notified (its task completed).
func (rt *Runtime) TagWait(id TagID) error {
	ts := rt.tag(id)
	ts.mu.Lock()
	if ts.done {
		ts.mu.Unlock()
		return nil
	}
	if !ts.hasTask && len(ts.deps) == 0 {
		ts.mu.Unlock()
		return fmt.Errorf("%w: tag %d has no task bound to it", ErrInvalidTask, id)
	}
	if ts.doneCh == nil {
		ts.doneCh = make(chan struct{})
	}
	ch := ts.doneCh
	ts.mu.Unlock()
	<-ch
	return nil
}
