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
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Defaults of the locality rule (config attrs locality_overload and
// locality_idle_us).
const (
	DefaultLocalityOverload = 4
	DefaultLocalityIdle     = 500 * time.Microsecond
)

// Policy is the work-stealing policy. The host calls it from one goroutine.
type Policy struct {
	ws     []*wstate // by worker id; nil where there is no worker
	order  []int     // worker ids in the order of Init/AddWorkers
	next   int       // round-robin cursor over order, for submitted tasks
	parked []*sched.Task
	tried  []bool // scratch for Pop's victim search, by worker id
	closed bool

	steal            bool
	localityOverload int
	localityIdleNs   int64
	now              func() int64 // monotonic ns; a field so tests can drive time
}

// wstate is one worker as the policy tracks it.
type wstate struct {
	w         sched.Worker
	q         queue
	running   int   // tasks popped for it and not yet finished
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
	for _, w := range workers {
		if w.ID < 0 {
			return fmt.Errorf("worker id %d: must not be negative", w.ID)
		}
	}
	p.AddWorkers(workers)
	return nil
}

// AddWorkers implements sched.Policy. Tasks that no worker could run so far
// are placed again.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	for _, w := range workers {
		if w.ID < 0 || w.ID < len(p.ws) && p.ws[w.ID] != nil {
			continue
		}
		for w.ID >= len(p.ws) {
			p.ws = append(p.ws, nil)
			p.tried = append(p.tried, false)
		}
		p.ws[w.ID] = &wstate{w: w}
		p.order = append(p.order, w.ID)
	}
	parked := p.parked
	p.parked = nil
	for _, t := range parked {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: the removed workers' queued tasks
// are placed again, on other workers; a task bound to a removed worker
// waits until that worker is added back.
func (p *Policy) RemoveWorkers(ids []int) {
	var orphans []*sched.Task
	for _, id := range ids {
		s := p.state(id)
		if s == nil {
			continue
		}
		orphans = s.q.appendAll(orphans)
		p.ws[id] = nil
		for i, o := range p.order {
			if o == id {
				p.order = append(p.order[:i], p.order[i+1:]...)
				break
			}
		}
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
	if t.Worker >= 0 {
		if s := p.state(int(t.Worker)); s != nil {
			s.q.push(t, s.w.ID)
		} else {
			p.parked = append(p.parked, t)
		}
		return
	}
	if s := p.state(int(t.ReleasedBy)); s != nil && t.CanRun(&s.w) {
		s.q.push(t, s.w.ID)
		return
	}
	for range p.order {
		s := p.ws[p.order[p.next%len(p.order)]]
		p.next++
		if t.CanRun(&s.w) {
			s.q.push(t, s.w.ID)
			return
		}
	}
	p.parked = append(p.parked, t) // no worker can run it now
}

// Pop implements sched.Policy: the worker's own queue first (highest
// priority, then oldest), then a steal.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.state(id)
	if s == nil || p.closed {
		return nil
	}
	t := s.q.take(&s.w, false, true)
	if t == nil && p.steal {
		t = p.stealFor(s)
	}
	if t == nil {
		if s.running == 0 && s.idleSince == 0 {
			s.idleSince = p.now()
		}
		return nil
	}
	s.running++
	s.idleSince = 0
	return t
}

// stealFor finds a task for s in another worker's queue: the victim is the
// most loaded queue holding a task s may take, the task the least urgent one
// there. Ties go to the first victim after a cursor that moves at every
// steal, so that thieves spread over equally loaded victims.
func (p *Policy) stealFor(s *wstate) *sched.Task {
	clear(p.tried)
	idleLong := -1 // whether s has been idle long enough, computed on demand
	mayTakeLocal := func(v *wstate) bool {
		if v.q.n > p.localityOverload {
			return true
		}
		if idleLong < 0 {
			idleLong = 0
			if s.running == 0 && s.idleSince != 0 && p.now()-s.idleSince >= p.localityIdleNs {
				idleLong = 1
			}
		}
		return idleLong == 1
	}
	n := len(p.order)
	p.next++
	for {
		var victim *wstate
		for k := 0; k < n; k++ {
			v := p.ws[p.order[(p.next+k)%n]]
			if v == s || p.tried[v.w.ID] || v.q.n == 0 || (victim != nil && v.q.n <= victim.q.n) {
				continue
			}
			if v.q.n > v.q.local+v.q.bound || v.q.local > 0 && mayTakeLocal(v) {
				victim = v
			}
		}
		if victim == nil {
			return nil
		}
		if t := victim.q.take(&s.w, true, victim.q.local > 0 && mayTakeLocal(victim)); t != nil {
			return t
		}
		p.tried[victim.w.ID] = true
	}
}

// PostExec implements sched.Policy.
func (p *Policy) PostExec(worker int, _ uint64, _ int64) {
	if s := p.state(worker); s != nil && s.running > 0 {
		s.running--
	}
}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.ws, p.order, p.parked = nil, nil, nil
}

func (p *Policy) state(id int) *wstate {
	if id < 0 || id >= len(p.ws) {
		return nil
	}
	return p.ws[id]
}

// queue keeps one worker's tasks by decreasing priority, oldest first among
// equals: one FIFO per distinct priority, so that push and take are O(1) in
// the common case of few priorities.
type queue struct {
	owner   int
	buckets []*bucket // by decreasing priority
	n       int       // tasks queued
	bound   int       // of which tasks bound to the owner (Task.Worker)
	local   int       // of which other LOCALITY tasks released by the owner
	spare   *bucket   // a drained bucket kept for reuse: no allocation per task in a chain
}

type bucket struct {
	prio  int32
	tasks []*sched.Task
	head  int
}

// pinnedLocal reports whether t is a LOCALITY task kept by its releaser.
func (q *queue) pinnedLocal(t *sched.Task) bool {
	return t.Locality && int(t.ReleasedBy) == q.owner
}

func (q *queue) count(t *sched.Task, d int) {
	q.n += d
	if t.Worker >= 0 {
		q.bound += d
	} else if q.pinnedLocal(t) {
		q.local += d
	}
}

func (q *queue) push(t *sched.Task, owner int) {
	q.owner = owner
	i := 0
	for i < len(q.buckets) && q.buckets[i].prio > t.Priority {
		i++
	}
	if i == len(q.buckets) || q.buckets[i].prio != t.Priority {
		q.buckets = append(q.buckets, nil)
		copy(q.buckets[i+1:], q.buckets[i:])
		b := q.spare
		if b == nil {
			b = &bucket{}
		}
		q.spare = nil
		b.prio = t.Priority
		q.buckets[i] = b
	}
	q.buckets[i].tasks = append(q.buckets[i].tasks, t)
	q.count(t, 1)
}

// take removes the first task w can run: the owner takes the most urgent,
// oldest task; a thief takes from the other end (lowest priority, newest),
// leaving the owner its urgent work, and skips LOCALITY tasks unless
// withLocal.
func (q *queue) take(w *sched.Worker, thief, withLocal bool) *sched.Task {
	nb := len(q.buckets)
	for k := 0; k < nb; k++ {
		bi := k
		if thief {
			bi = nb - 1 - k
		}
		b := q.buckets[bi]
		if t := b.take(w, thief, thief && !withLocal, q.owner); t != nil {
			q.count(t, -1)
			if b.head == len(b.tasks) {
				q.buckets = append(q.buckets[:bi], q.buckets[bi+1:]...)
				b.tasks, b.head = b.tasks[:0], 0
				q.spare = b
			}
			return t
		}
	}
	return nil
}

// appendAll empties q onto out.
func (q *queue) appendAll(out []*sched.Task) []*sched.Task {
	for _, b := range q.buckets {
		out = append(out, b.tasks[b.head:]...)
	}
	*q = queue{owner: q.owner}
	return out
}

// take removes the first task w can run, from the oldest end or, fromTail,
// the newest; with skipLocal, not a LOCALITY task kept by owner.
func (b *bucket) take(w *sched.Worker, fromTail, skipLocal bool, owner int) *sched.Task {
	live := b.tasks[b.head:]
	n := len(live)
	for k := 0; k < n; k++ {
		i := k
		if fromTail {
			i = n - 1 - k
		}
		t := live[i]
		if !t.CanRun(w) || skipLocal && t.Locality && int(t.ReleasedBy) == owner {
			continue
		}
		switch {
		case i == 0:
			live[0] = nil
			b.head++
		case i == n-1:
			live[i] = nil
			b.tasks = b.tasks[:len(b.tasks)-1]
		default:
			copy(live[i:], live[i+1:])
			live[n-1] = nil
			b.tasks = b.tasks[:len(b.tasks)-1]
		}
		if b.head > 64 && b.head*2 > len(b.tasks) {
			m := copy(b.tasks, b.tasks[b.head:])
			clear(b.tasks[m:])
			b.tasks = b.tasks[:m]
			b.head = 0
		}
		return t
	}
	return nil
}
