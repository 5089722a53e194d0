// Package lws is StarPU's locality work-stealing policy (lws, in StarPU
// 1.3's work_stealing_policy.c): every worker has its own queue, ordered
// by priority. A task made ready by a completion goes to the queue of the
// worker that released it, where its data is warm; a task the application
// submitted goes round robin. A worker pops its own queue first; with it
// empty, it steals from its neighbours, nearest first, and only from a
// neighbour that is busy running a task (an idle one is about to pop its
// own queue).
//
// Nearness: StarPU orders neighbours by the hwloc topology (cores sharing
// a cache first). The policy sees memory nodes, not caches, so a worker's
// neighbours are the workers of its own memory node, then the others, each
// group in order of worker ID after its own (wrapping round), as StarPU
// orders them without hwloc.
//
// It differs from ws, this runtime's default, in the victim: ws steals
// from the most loaded queue anywhere, lws from the nearest busy one, and
// lws has no LOCALITY hint handling of its own (every task it queues is
// already where it was released).
package lws

import (
	"slices"

	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
)

// Description is the policy's one line in `starpu sched list`.
const Description = "locality work stealing (StarPU's lws): tasks stay with the worker that released them; idle workers steal from their nearest busy neighbour"

// Policy is the lws policy. The host calls it from one goroutine.
type Policy struct {
	workers schedkit.Table[wstate]
	closed  bool
}

// slot is one worker of the policy.
type slot = schedkit.Slot[wstate]

// wstate is what the policy keeps per worker.
type wstate struct {
	q schedkit.Queue
	// near are the other workers, nearest first; rebuilt for every worker
	// when workers come or go.
	near []*slot
}

// New returns the lws policy.
func New() *Policy { return &Policy{} }

// Init implements sched.Policy.
func (p *Policy) Init(workers []sched.Worker) error {
	if err := schedkit.CheckWorkers(workers); err != nil {
		return err
	}
	p.AddWorkers(workers)
	return nil
}

// AddWorkers implements sched.Policy: the neighbour lists are rebuilt, and
// tasks that no worker could run so far are placed again.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	p.workers.Add(workers)
	p.neighbours()
	for _, t := range p.workers.Unpark() {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: the removed workers' queued tasks
// are placed again, round robin among the others; a task bound to a
// removed worker waits until it is added back.
func (p *Policy) RemoveWorkers(ids []int) {
	var orphans []*sched.Task
	for _, s := range p.workers.Remove(ids) {
		orphans = s.State.q.Drain(orphans)
		s.State.near = nil
	}
	p.neighbours()
	for _, t := range orphans {
		t.ReleasedBy = -1 // its releaser is gone, and the warm data with it
		p.Push(t)
	}
}

// neighbours orders every worker's neighbours: same memory node first,
// then by worker ID after the worker's own, wrapping round.
func (p *Policy) neighbours() {
	slots := p.workers.Slots()
	for _, s := range slots {
		near := s.State.near[:0]
		for _, o := range slots {
			if o != s {
				near = append(near, o)
			}
		}
		slices.SortFunc(near, func(a, b *slot) int {
			if sa, sb := a.Node == s.Node, b.Node == s.Node; sa != sb {
				if sa {
					return -1
				}
				return 1
			}
			return after(s.ID, a.ID) - after(s.ID, b.ID)
		})
		s.State.near = near
	}
}

// after is how far worker id is after worker from, counting IDs upwards
// and wrapping round (from+1 is 1, from-1 is the largest).
func after(from, id int) int {
	if id > from {
		return id - from
	}
	return id - from + 1<<30
}

// Push implements sched.Policy: to the worker bound to, else to the worker
// that released the task if it can run it, else round robin.
func (p *Policy) Push(t *sched.Task) {
	if p.closed {
		return
	}
	if s := p.workers.Home(t); s != nil {
		s.State.q.Push(t)
	}
}

// Pop implements sched.Policy: the worker's own queue (most urgent, oldest
// first), then a steal from the nearest busy neighbour holding a task it
// can run, taking the least urgent, newest one there (the owner keeps its
// urgent work).
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed {
		return nil
	}
	t := s.State.q.TakeFor(&s.Worker)
	if t == nil {
		t = p.steal(s)
	}
	if t != nil {
		p.workers.Started(id)
	}
	return t
}

// steal is lws_select_victim and the steal from it: the first neighbour,
// nearest first, that is busy and holds a task s can run.
func (p *Policy) steal(s *slot) *sched.Task {
	w := &s.Worker
	for _, v := range s.State.near {
		if v.Idle() || v.State.q.Len() == 0 {
			continue
		}
		if e, ok := v.State.q.TakeLast(func(t *sched.Task) bool { return t.CanRun(w) }); ok {
			return e.Task
		}
	}
	return nil
}

// PostExec implements sched.Policy: the worker has one task fewer running.
func (p *Policy) PostExec(worker int, _ uint64, _ int64) { p.workers.Finished(worker) }

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.workers.Reset()
}
