// Package eager is StarPU's eager scheduling policy: one central FIFO of
// ready tasks; a worker with room takes the oldest task it can run. It
// ignores priorities, predictions and data placement, which makes it a
// short example of the sched.Policy hooks.
package eager

import "github.com/starpu-go/starpu/pluginapi/sched"

// Policy is the eager policy. The SDK's Host calls every hook from one
// goroutine, so there is no locking.
type Policy struct {
	workers map[int]sched.Worker // the workers of the session, by id
	fifo    []*sched.Task        // ready tasks, oldest first
	closed  bool
}

// New returns an eager policy; Init gives it its workers.
func New() *Policy { return &Policy{workers: map[int]sched.Worker{}} }

// Init is called once, before any other hook, with the initial workers.
func (p *Policy) Init(workers []sched.Worker) error {
	p.AddWorkers(workers)
	return nil
}

// AddWorkers adds workers; they take tasks from the FIFO from now on,
// including tasks that waited for a worker able to run them.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	for _, w := range workers {
		p.workers[w.ID] = w
	}
}

// RemoveWorkers forgets workers. Their tasks are still in the FIFO (eager
// gives a worker a task only when it pops it), so nothing is lost.
func (p *Policy) RemoveWorkers(ids []int) {
	for _, id := range ids {
		delete(p.workers, id)
	}
}

// Push queues a ready task at the end of the FIFO.
func (p *Policy) Push(t *sched.Task) {
	if !p.closed {
		p.fifo = append(p.fifo, t)
	}
}

// Pop gives worker id the oldest task it can run: one of its architecture
// (Task.ArchMask), not bound to another worker (Task.Worker). Task.CanRun
// checks both.
func (p *Policy) Pop(id int) *sched.Task {
	w, ok := p.workers[id]
	if !ok || p.closed {
		return nil
	}
	for i, t := range p.fifo {
		if !t.CanRun(&w) {
			continue
		}
		if i == 0 { // the common case, O(1): append reallocates the front away
			p.fifo[0] = nil
			p.fifo = p.fifo[1:]
		} else {
			p.fifo = append(p.fifo[:i], p.fifo[i+1:]...)
		}
		return t
	}
	return nil
}

// PostExec is told when a task finished and how long it ran; eager does not
// care.
func (p *Policy) PostExec(worker int, id uint64, durationNs int64) {}

// Deinit is called once at shutdown: drop the queue, give out nothing more.
func (p *Policy) Deinit() {
	p.closed = true
	p.fifo = nil
}
