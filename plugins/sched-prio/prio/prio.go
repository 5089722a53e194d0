// Package prio is StarPU's prio policy (eager_central_priority_policy.c):
// one central queue of ready tasks ordered by priority, oldest first among
// equal priorities; a worker with room takes the most urgent task it can
// run. Like eager it ignores predictions and data placement; unlike eager
// it honours priorities across all workers.
package prio

import (
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
)

// Description is the policy's one line in `starpu sched list`.
const Description = "one central queue by priority (StarPU's prio): a worker takes the most urgent task it can run"

// Policy is the prio policy. The host calls it from one goroutine.
type Policy struct {
	workers schedkit.Table[struct{}]
	queue   schedkit.Queue
	closed  bool
}

// New returns the prio policy.
func New() *Policy { return &Policy{} }

// Init implements sched.Policy.
func (p *Policy) Init(workers []sched.Worker) error {
	if err := schedkit.CheckWorkers(workers); err != nil {
		return err
	}
	p.workers.Add(workers)
	return nil
}

// AddWorkers implements sched.Policy: the new workers take from the
// central queue from now on, tasks that waited for them included.
func (p *Policy) AddWorkers(workers []sched.Worker) { p.workers.Add(workers) }

// RemoveWorkers implements sched.Policy. Nothing was queued for a worker
// in particular: the tasks stay in the central queue, where a task bound
// to a removed worker waits for it to come back.
func (p *Policy) RemoveWorkers(ids []int) { p.workers.Remove(ids) }

// Push implements sched.Policy.
func (p *Policy) Push(t *sched.Task) {
	if !p.closed {
		p.queue.Push(t)
	}
}

// Pop implements sched.Policy: the most urgent, oldest task the worker
// can run.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed {
		return nil
	}
	return p.queue.TakeFor(&s.Worker)
}

// PostExec implements sched.Policy; prio keeps no account of running tasks.
func (p *Policy) PostExec(int, uint64, int64) {}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.queue = schedkit.Queue{}
	p.workers.Reset()
}
