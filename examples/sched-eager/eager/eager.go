// Package eager is StarPU's eager scheduling policy: one central FIFO of
// ready tasks; a worker with room takes the oldest task it can run. It
// ignores priorities, predictions and data placement, which makes it a
// short example of the sched.Policy hooks, built with the SDK's toolkit
// (pluginapi/sched/schedkit: a task queue and a table of workers).
package eager

import (
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
)

// Policy is the eager policy. The SDK's Host calls every hook from one
// goroutine, so there is no locking.
type Policy struct {
	workers schedkit.Table[struct{}] // the workers of the session; no state of ours per worker
	fifo    schedkit.Queue           // ready tasks, oldest first
	closed  bool
}

// New returns an eager policy; Init gives it its workers.
func New() *Policy { return &Policy{} }

// Init is called once, before any other hook, with the initial workers.
func (p *Policy) Init(workers []sched.Worker) error {
	p.AddWorkers(workers)
	return nil
}

// AddWorkers adds workers; they take tasks from the FIFO from now on,
// including tasks that waited for a worker able to run them.
func (p *Policy) AddWorkers(workers []sched.Worker) { p.workers.Add(workers) }

// RemoveWorkers forgets workers. Their tasks are still in the FIFO (eager
// gives a worker a task only when it pops it), so nothing is lost.
func (p *Policy) RemoveWorkers(ids []int) { p.workers.Remove(ids) }

// Push queues a ready task at the end of the FIFO (Append ignores its
// priority, as eager does).
func (p *Policy) Push(t *sched.Task) {
	if !p.closed {
		p.fifo.Append(t)
	}
}

// Pop gives worker id the oldest task it can run: one of its architecture
// (Task.ArchMask), not bound to another worker (Task.Worker).
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed {
		return nil
	}
	return p.fifo.TakeFor(&s.Worker)
}

// PostExec is told when a task finished and how long it ran; eager does not
// care.
func (p *Policy) PostExec(worker int, id uint64, durationNs int64) {}

// Deinit is called once at shutdown: drop the queue, give out nothing more.
func (p *Policy) Deinit() {
	p.closed = true
	p.fifo = schedkit.Queue{}
}
