// Package ws is the work-stealing scheduling policy: every worker has its own
// queue; a task goes to the queue of the worker that released it (so a chain
// stays on one warm worker), or round-robin when the application submitted
// it; an idle worker steals from the most loaded queue it can help.
package ws

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// Policy is the work-stealing policy. The host calls it from one goroutine.
type Policy struct {
	workers []sched.Worker
	queues  map[int]*queue
	order   []int // worker ids, in the order of Init/AddWorkers
	next    int   // round-robin cursor for submitted tasks
	steal   bool
}

// New returns the policy with stealing on.
func New() *Policy { return &Policy{steal: true} }

// ConfigSchema implements sched.Configurable.
func (p *Policy) ConfigSchema() *base.Schema {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "steal", Type: base.AttrBool, Default: "true", Doc: "let idle workers take tasks from other workers' queues"},
	}}
}

// SetConfig implements sched.Configurable.
func (p *Policy) SetConfig(cfg base.Config) error {
	if v, ok := cfg["steal"].(bool); ok {
		p.steal = v
	}
	return nil
}

// Init implements sched.Policy.
func (p *Policy) Init(workers []sched.Worker) error {
	p.queues = make(map[int]*queue)
	p.AddWorkers(workers)
	return nil
}

// AddWorkers implements sched.Policy.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	for _, w := range workers {
		if _, ok := p.queues[w.ID]; ok {
			continue
		}
		p.workers = append(p.workers, w)
		p.queues[w.ID] = &queue{}
		p.order = append(p.order, w.ID)
	}
}

// RemoveWorkers implements sched.Policy: the removed workers' queued tasks
// are pushed again so that another worker runs them.
func (p *Policy) RemoveWorkers(ids []int) {
	var orphans []*sched.Task
	for _, id := range ids {
		q, ok := p.queues[id]
		if !ok {
			continue
		}
		for _, b := range q.buckets {
			orphans = append(orphans, b.tasks[b.head:]...)
		}
		delete(p.queues, id)
		for i, w := range p.workers {
			if w.ID == id {
				p.workers = append(p.workers[:i], p.workers[i+1:]...)
				break
			}
		}
		for i, o := range p.order {
			if o == id {
				p.order = append(p.order[:i], p.order[i+1:]...)
				break
			}
		}
	}
	for _, t := range orphans {
		t.ReleasedBy = -1
		p.Push(t)
	}
}

// Push implements sched.Policy.
func (p *Policy) Push(t *sched.Task) {
	if t.Worker >= 0 {
		if q, ok := p.queues[int(t.Worker)]; ok {
			q.push(t)
			return
		}
	}
	if t.ReleasedBy >= 0 {
		if w := p.worker(int(t.ReleasedBy)); w != nil && t.CanRun(w) {
			p.queues[w.ID].push(t)
			return
		}
	}
	for range p.workers {
		w := &p.workers[p.next%len(p.workers)]
		p.next++
		if t.CanRun(w) {
			p.queues[w.ID].push(t)
			return
		}
	}
	// No worker can run it: the core checks this at submit, so this only
	// happens if workers were removed; keep it for a worker that may come.
	if len(p.workers) > 0 {
		p.queues[p.workers[0].ID].push(t)
	}
}

// Pop implements sched.Policy: the worker's own queue first (highest
// priority, then oldest), then the longest other queue with a task it can run.
func (p *Policy) Pop(id int) *sched.Task {
	w := p.worker(id)
	if w == nil {
		return nil
	}
	if t := p.queues[id].take(w, false); t != nil {
		return t
	}
	if !p.steal {
		return nil
	}
	var victim *queue
	for _, o := range p.order {
		if q := p.queues[o]; o != id && q.len() > 0 && (victim == nil || q.len() > victim.len()) {
			victim = q
		}
	}
	if victim == nil {
		return nil
	}
	return victim.take(w, true)
}

// PostExec implements sched.Policy.
func (p *Policy) PostExec(int, uint64, int64) {}

// Deinit implements sched.Policy.
func (p *Policy) Deinit() {}

func (p *Policy) worker(id int) *sched.Worker {
	for i := range p.workers {
		if p.workers[i].ID == id {
			return &p.workers[i]
		}
	}
	return nil
}

// queue keeps tasks by decreasing priority, oldest first among equals: one
// FIFO per distinct priority, so that push and take are O(1) in the common
// case of few priorities.
type queue struct {
	buckets []*bucket // by decreasing priority
	n       int
}

type bucket struct {
	prio  int32
	tasks []*sched.Task
	head  int
}

func (q *queue) len() int { return q.n }

func (q *queue) push(t *sched.Task) {
	i := 0
	for i < len(q.buckets) && q.buckets[i].prio > t.Priority {
		i++
	}
	if i == len(q.buckets) || q.buckets[i].prio != t.Priority {
		q.buckets = append(q.buckets, nil)
		copy(q.buckets[i+1:], q.buckets[i:])
		q.buckets[i] = &bucket{prio: t.Priority}
	}
	q.buckets[i].tasks = append(q.buckets[i].tasks, t)
	q.n++
}

// take removes the first task w can run; a thief takes from the low-priority
// end, leaving the owner its most urgent work.
func (q *queue) take(w *sched.Worker, thief bool) *sched.Task {
	nb := len(q.buckets)
	for k := 0; k < nb; k++ {
		bi := k
		if thief {
			bi = nb - 1 - k
		}
		b := q.buckets[bi]
		if t := b.take(w, thief); t != nil {
			q.n--
			if b.head == len(b.tasks) {
				q.buckets = append(q.buckets[:bi], q.buckets[bi+1:]...)
			}
			return t
		}
	}
	return nil
}

func (b *bucket) take(w *sched.Worker, thief bool) *sched.Task {
	live := b.tasks[b.head:]
	n := len(live)
	for k := 0; k < n; k++ {
		i := k
		if thief {
			i = n - 1 - k
		}
		t := live[i]
		if !t.CanRun(w) {
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
