// Package ws is the work-stealing scheduling policy. Every worker has its own
// queue, ordered by priority. A task goes to the queue of the worker that
// released it (its data is warm there and a dependency chain stays on one
// thread), or round robin when the application submitted it. A worker pops
// its own queue first; with it empty, it steals from the most loaded queue
// holding a task it can run, taking the least urgent task there. A task with
// the LOCALITY hint stays with the worker that released it unless that
// worker's queue is overloaded or the thief has been idle for a while.
// docs/design/scheduling.md explains the choices.
package ws

import (
	"fmt"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Description is the policy's one line in `starpu sched list`.
const Description = "work stealing: tasks stay with the worker that released them; idle workers steal from the most loaded queue"

// Defaults of the locality rule (config attrs locality_overload and
// locality_idle_us).
const (
	DefaultLocalityOverload = 4
	DefaultLocalityIdle     = 500 * time.Microsecond
)

// Policy is the work-stealing policy. The host calls it from one goroutine.
type Policy struct {
	workers schedkit.Table[wstate]
	tried   []bool // scratch for Pop's victim search, by position in workers.Slots
	closed  bool

	steal            bool
	localityOverload int
	localityIdleNs   int64
	now              func() int64 // monotonic ns; a field so tests can drive time
}

// slot is one worker of the policy.
type slot = schedkit.Slot[wstate]

// wstate is what the policy keeps per worker.
type wstate struct {
	q         queue
	idleSince int64 // when it was last found with nothing to run; 0 when busy
}

// New returns the policy with its defaults: stealing on, locality as above.
func New() *Policy {
	return &Policy{steal: true, localityOverload: DefaultLocalityOverload,
		localityIdleNs: DefaultLocalityIdle.Nanoseconds(), now: wire.Now}
}

// ConfigSchema implements sched.Configurable.
func (p *Policy) ConfigSchema() *base.Schema {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "steal", Type: base.AttrBool, Default: "true", Doc: "let idle workers take tasks from other workers' queues"},
		{Name: "locality_overload", Type: base.AttrInt, Default: fmt.Sprint(DefaultLocalityOverload),
			Doc: "a LOCALITY task may be stolen from a queue holding more than this many tasks"},
		{Name: "locality_idle_us", Type: base.AttrInt, Default: fmt.Sprint(DefaultLocalityIdle.Microseconds()),
			Doc: "... or by a worker that has had nothing to run for this many microseconds"},
	}}
}

// SetConfig implements sched.Configurable.
func (p *Policy) SetConfig(cfg base.Config) error {
	if v, ok := cfg["steal"].(bool); ok {
		p.steal = v
	}
	if v, ok := cfg["locality_overload"].(int64); ok {
		if v < 0 {
			return fmt.Errorf("locality_overload %d: must not be negative", v)
		}
		p.localityOverload = int(v)
	}
	if v, ok := cfg["locality_idle_us"].(int64); ok {
		if v < 0 {
			return fmt.Errorf("locality_idle_us %d: must not be negative", v)
		}
		p.localityIdleNs = v * 1000
	}
	return nil
}

// Init implements sched.Policy.
func (p *Policy) Init(workers []sched.Worker) error {
	if err := schedkit.CheckWorkers(workers); err != nil {
		return err
	}
	p.AddWorkers(workers)
	return nil
}

// AddWorkers implements sched.Policy. Tasks that no worker could run so far
// are placed again.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	for _, s := range p.workers.Add(workers) {
		s.State.q.owner = s.ID
	}
	for _, t := range p.workers.Unpark() {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: the removed workers' queued tasks
// are placed again, on other workers; a task bound to a removed worker
// waits until that worker is added back.
func (p *Policy) RemoveWorkers(ids []int) {
	var orphans []*sched.Task
	for _, s := range p.workers.Remove(ids) {
		orphans = s.State.q.Drain(orphans)
	}
	for _, t := range orphans {
		t.ReleasedBy = -1 // its data is no longer anywhere useful
		p.Push(t)
	}
}

// Push implements sched.Policy.
func (p *Policy) Push(t *sched.Task) {
	if p.closed {
		return
	}
	if s := p.workers.Home(t); s != nil {
		s.State.q.push(t)
	}
}

// Pop implements sched.Policy: the worker's own queue first (highest
// priority, then oldest), then a steal.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed {
		return nil
	}
	t := s.State.q.take(&s.Worker)
	if t == nil && p.steal {
		t = p.stealFor(s)
	}
	if t == nil {
		if s.Idle() && s.State.idleSince == 0 {
			s.State.idleSince = p.now()
		}
		return nil
	}
	p.workers.Started(id)
	s.State.idleSince = 0
	return t
}

// stealFor finds a task for s in another worker's queue: the victim is the
// most loaded queue holding a task s may take, the task the least urgent one
// there. Ties go to the first victim after a cursor that moves at every
// steal, so that thieves spread over equally loaded victims.
func (p *Policy) stealFor(s *slot) *sched.Task {
	slots := p.workers.Slots()
	n := len(slots)
	if len(p.tried) < n {
		p.tried = make([]bool, n)
	}
	tried := p.tried[:n]
	clear(tried)
	idleLong := -1 // whether s has been idle long enough, computed on demand
	mayTakeLocal := func(v *slot) bool {
		if v.State.q.Len() > p.localityOverload {
			return true
		}
		if idleLong < 0 {
			idleLong = 0
			if s.Idle() && s.State.idleSince != 0 && p.now()-s.State.idleSince >= p.localityIdleNs {
				idleLong = 1
			}
		}
		return idleLong == 1
	}
	start := p.workers.Rotate()
	for {
		var victim *slot
		vi := -1
		for k := 0; k < n; k++ {
			i := (start + k) % n
			v := slots[i]
			q := &v.State.q
			if v == s || tried[i] || q.Len() == 0 || (victim != nil && q.Len() <= victim.State.q.Len()) {
				continue
			}
			if q.Len() > q.local+q.bound || q.local > 0 && mayTakeLocal(v) {
				victim, vi = v, i
			}
		}
		if victim == nil {
			return nil
		}
		q := &victim.State.q
		if t := q.steal(&s.Worker, q.local > 0 && mayTakeLocal(victim)); t != nil {
			return t
		}
		tried[vi] = true
	}
}

// PostExec implements sched.Policy.
func (p *Policy) PostExec(worker int, _ uint64, _ int64) {
	p.workers.Finished(worker)
}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.workers.Reset()
}

// queue is one worker's queue (schedkit.Queue: by decreasing priority,
// oldest first among equals), with the counts the victim search needs.
type queue struct {
	schedkit.Queue
	owner int
	bound int // tasks bound to the owner (Task.Worker)
	local int // other LOCALITY tasks released by the owner, kept for it
}

// pinnedLocal reports whether t is a LOCALITY task kept by its releaser.
func (q *queue) pinnedLocal(t *sched.Task) bool {
	return t.Locality && int(t.ReleasedBy) == q.owner
}

func (q *queue) count(t *sched.Task, d int) {
	if t.Worker >= 0 {
		q.bound += d
	} else if q.pinnedLocal(t) {
		q.local += d
	}
}

func (q *queue) push(t *sched.Task) {
	q.Push(t)
	q.count(t, 1)
}

// take is the owner's pop: the most urgent, oldest task w can run.
func (q *queue) take(w *sched.Worker) *sched.Task {
	t := q.TakeFor(w)
	if t != nil {
		q.count(t, -1)
	}
	return t
}

// steal is a thief's: from the other end (lowest priority, newest),
// leaving the owner its urgent work, and not a LOCALITY task the owner
// keeps unless withLocal.
func (q *queue) steal(w *sched.Worker, withLocal bool) *sched.Task {
	e, ok := q.TakeLast(func(t *sched.Task) bool {
		return t.CanRun(w) && (withLocal || !q.pinnedLocal(t))
	})
	if !ok {
		return nil
	}
	q.count(e.Task, -1)
	return e.Task
}

// Drain empties q onto out.
func (q *queue) Drain(out []*sched.Task) []*sched.Task {
	out = q.Queue.Drain(out)
	q.bound, q.local = 0, 0
	return out
}
