package core

// Tags; design note: docs/design/tasks.md.

import (
	"errors"
	"fmt"
	"sync"
)

// Tags follow StarPU's model. A tag is notified when the task bound to it
// (Task.Tag with UseTag) terminates, or by the application
// (TagNotifyFromApps). DeclareTagDeps(id, deps...) adds a dependency group
// to tag id: the group completes once every tag of deps has been notified
// since the group last completed. The task bound to id starts once all of
// id's groups have completed; that consumes them, so that in a cyclic graph
// (tasks with Regenerate) the next submission waits for the next
// notifications. A notified tag stays notified until it is restarted or a
// task is bound to it again: notifying it again does nothing (OR
// semantics).

// tagTable holds the tags declared or used so far; mu guards byID (each
// tagState has its own mu, taken after this one).
type tagTable struct {
	mu   sync.Mutex
	byID map[TagID]*tagState
}

// tagState is one tag.
type tagState struct {
	id TagID
	mu sync.Mutex
	// notified until restarted or bound to a new submission.
	notified bool
	// everNotified, or any use, makes TagWait on the tag legitimate.
	used bool
	// job is the submission bound to the tag that has not terminated;
	// task the task last bound.
	job  *job
	task *Task
	// bound is set once job has registered its dependencies (bind).
	bound bool
	// groups are the dependency groups of this tag; pending counts those
	// not completed in this round; gated is the bound job while it waits
	// for them (it holds one of the job's ndeps).
	groups  []*tagGroup
	pending int
	gated   *job
	// succs are the groups of other tags that count this tag's
	// notifications.
	succs  []*tagGroup
	doneCh chan struct{}
}

// tagGroup is one DeclareTagDeps call: its owner waits for ntags tags.
// remaining and complete are guarded by the owner's mutex.
type tagGroup struct {
	owner     *tagState
	ntags     int
	remaining int
	complete  bool
	// only is the group's tag when it has one: a chain of tags
	// (task_chain.go) follows it to the predecessor.
	only *tagState
}

func (rt *Runtime) tag(id TagID) *tagState {
	rt.tags.mu.Lock()
	defer rt.tags.mu.Unlock()
	ts, ok := rt.tags.byID[id]
	if !ok {
		ts = &tagState{id: id}
		rt.tags.byID[id] = ts
	}
	return ts
}

func (rt *Runtime) lookupTag(id TagID) *tagState {
	rt.tags.mu.Lock()
	defer rt.tags.mu.Unlock()
	return rt.tags.byID[id]
}

// DeclareTagDeps makes tag id depend on the given tags: the task bound to
// id starts only after every tag in deps has been notified. Declared after
// that task's submission, the dependencies still hold it if it is waiting
// for other dependencies; it is an error once it is ready. Tags already
// notified count at once.
func (rt *Runtime) DeclareTagDeps(id TagID, deps ...TagID) error {
	if len(deps) == 0 {
		return nil
	}
	for _, d := range deps {
		if d == id {
			return fmt.Errorf("%w: tag %d cannot depend on itself", ErrInvalidTask, id)
		}
	}
	owner := rt.tag(id)
	g := &tagGroup{owner: owner, ntags: len(deps), remaining: len(deps)}
	if len(deps) == 1 {
		g.only = rt.tag(deps[0])
	}
	owner.mu.Lock()
	if j := owner.gated; j != nil && j.chain.Load()&chainOn != 0 {
		owner.mu.Unlock()
		return fmt.Errorf("%w: tag %d: its task %q is already queued behind its predecessor; declare tag dependencies before submitting the task", ErrInvalidTask, id, j.name())
	}
	if j := owner.job; j != nil && owner.bound && owner.gated == nil {
		if !j.hold() {
			owner.mu.Unlock()
			return fmt.Errorf("%w: tag %d: its task %q is already ready; declare tag dependencies before it can start", ErrInvalidTask, id, j.name())
		}
		owner.gated = j
		j.tagWait.Store(true)
	}
	owner.groups = append(owner.groups, g)
	owner.pending++
	owner.used = true
	owner.mu.Unlock()
	var release []*job
	for _, d := range deps {
		dt := rt.tag(d)
		dt.mu.Lock()
		dt.succs = append(dt.succs, g)
		dt.used = true
		notified := dt.notified
		dt.mu.Unlock()
		if notified {
			if j := g.count(); j != nil {
				release = append(release, j)
			}
		}
	}
	rt.releaseAll(release)
	return nil
}

// count records one notification of one of g's tags and returns the job
// that its completion releases, if any.
func (g *tagGroup) count() *job {
	o := g.owner
	o.mu.Lock()
	defer o.mu.Unlock()
	g.remaining--
	if g.remaining > 0 {
		return nil
	}
	g.remaining = g.ntags
	if !g.complete {
		g.complete = true
		o.pending--
	}
	if o.pending > 0 || o.gated == nil {
		return nil
	}
	j := o.gated
	o.gated = nil
	j.tagWait.Store(false)
	o.newRound()
	return j
}

// newRound consumes the completed groups for the submission that starts.
func (ts *tagState) newRound() {
	for _, g := range ts.groups {
		g.complete = false
	}
	ts.pending = len(ts.groups)
}

// checkTag reserves t's tag for job j at submit.
func (rt *Runtime) checkTag(t *Task, j *job) error {
	if !t.UseTag {
		return nil
	}
	ts := rt.tag(t.Tag)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.job != nil && ts.job != j {
		return fmt.Errorf("%w: task %q: tag %d is bound to task %q, which has not completed", ErrInvalidTask, t.TaskName(), t.Tag, ts.job.name())
	}
	ts.job = j
	ts.task = t
	ts.used = true
	j.tag = ts
	return nil
}

// bind starts j's round on its tag: the tag is no longer notified, and j
// waits for the tag's dependency groups unless they have completed.
func (ts *tagState) bind(j *job) {
	ts.mu.Lock()
	ts.notified = false
	ts.bound = true
	if ts.pending > 0 {
		ts.gated = j
		j.tagWait.Store(true)
		j.ndeps.Add(1)
	} else {
		ts.newRound()
	}
	ts.mu.Unlock()
}

// notify marks the tag notified and returns the jobs that this releases.
// by is the terminating job bound to the tag, or nil for the application.
func (ts *tagState) notify(by *job) []*job {
	ts.mu.Lock()
	if by != nil && ts.job == by {
		ts.job = nil
		ts.bound = false
	}
	if ts.notified {
		ts.mu.Unlock()
		return nil
	}
	ts.notified = true
	ts.used = true
	if ts.doneCh != nil {
		close(ts.doneCh)
		ts.doneCh = nil
	}
	succs := ts.succs
	ts.mu.Unlock()
	var out []*job
	for _, g := range succs {
		if j := g.count(); j != nil {
			out = append(out, j)
		}
	}
	return out
}

// releaseAll drops one dependency of each job, on the application's
// goroutine.
func (rt *Runtime) releaseAll(js []*job) {
	for _, j := range js {
		if j.ndeps.Add(-1) == 0 {
			rt.ready(j, -1)
		}
	}
}

// TagWait blocks until tag id has been notified (its task completed, or the
// application notified it). A tag nothing ever used is an error rather than
// a wait that cannot end.
func (rt *Runtime) TagWait(id TagID) error {
	if err := rt.mayBlock("TagWait"); err != nil {
		return err
	}
	ts := rt.lookupTag(id)
	if ts == nil {
		return fmt.Errorf("%w: tag %d is not used by any task or declaration", ErrInvalidTask, id)
	}
	ts.mu.Lock()
	if ts.notified {
		ts.mu.Unlock()
		return nil
	}
	if ts.doneCh == nil {
		ts.doneCh = make(chan struct{})
	}
	ch := ts.doneCh
	ts.mu.Unlock()
	rt.await(ch)
	return nil
}

// TagWaitArray blocks until every tag of ids has been notified.
func (rt *Runtime) TagWaitArray(ids ...TagID) error {
	var errs []error
	for _, id := range ids {
		if err := rt.TagWait(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TagNotifyFromApps notifies tag id from the application, releasing what
// depends on it, as if a task bound to it had completed. Once notified, the
// tag ignores further notifications until TagRestart: several notifiers
// make an OR dependency.
func (rt *Runtime) TagNotifyFromApps(id TagID) {
	rt.releaseAll(rt.tag(id).notify(nil))
}

// TagRestart clears tag id's notified state, so that the next notification
// releases its dependents again. A tag bound to a task in flight cannot be
// restarted: the task's completion notifies it.
func (rt *Runtime) TagRestart(id TagID) error {
	ts := rt.tag(id)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.job != nil {
		return fmt.Errorf("%w: tag %d is bound to task %q in flight; it restarts when that task is submitted again", ErrInvalidTask, id, ts.job.name())
	}
	ts.notified = false
	ts.used = true
	return nil
}

// TagNotifyRestartable notifies tag id from the application and restarts it
// at once (StarPU's starpu_tag_notify_restart_from_apps): its dependents
// are released, and a later notification releases them again. It starts
// cyclic graphs.
func (rt *Runtime) TagNotifyRestartable(id TagID) {
	ts := rt.tag(id)
	js := ts.notify(nil)
	ts.mu.Lock()
	ts.notified = false
	ts.mu.Unlock()
	rt.releaseAll(js)
}

// TagRemove forgets tag id. Its task must have completed; tags that depend
// on it keep the notifications they counted, and a later use of id starts
// a new tag.
func (rt *Runtime) TagRemove(id TagID) error {
	rt.tags.mu.Lock()
	defer rt.tags.mu.Unlock()
	ts, ok := rt.tags.byID[id]
	if !ok {
		return fmt.Errorf("%w: tag %d does not exist", ErrInvalidTask, id)
	}
	ts.mu.Lock()
	busy := ts.job
	ts.mu.Unlock()
	if busy != nil {
		return fmt.Errorf("%w: tag %d is bound to task %q, which has not completed", ErrInvalidTask, id, busy.name())
	}
	delete(rt.tags.byID, id)
	return nil
}

// TaskOfTag returns the task last bound to tag id, or nil.
func (rt *Runtime) TaskOfTag(id TagID) *Task {
	ts := rt.lookupTag(id)
	if ts == nil {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.task
}

// CreateSyncTask submits a task that runs nowhere, bound to tag syncTag,
// that completes (running callback, when not nil) once every tag of deps
// has been notified: StarPU's starpu_create_sync_task.
func (rt *Runtime) CreateSyncTask(syncTag TagID, deps []TagID, callback func()) error {
	if err := rt.DeclareTagDeps(syncTag, deps...); err != nil {
		return err
	}
	t := &Task{Name: fmt.Sprintf("sync-tag-%d", syncTag), Tag: syncTag, UseTag: true, Detach: true}
	if callback != nil {
		t.Callback = func(*Task) { callback() }
	}
	return rt.Submit(t)
}
