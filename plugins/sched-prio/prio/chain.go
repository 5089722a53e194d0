package prio

import "github.com/starpu-go/starpu/pluginapi/sched"

// Chain implements sched.Chainer: a task whose only unfinished predecessor
// ends a worker's queue runs there next; priorities order the tasks that
// are ready, and this one cannot start anywhere before its predecessor
// ends.
func (p *Policy) Chain(t *sched.Task, worker int) bool {
	s := p.workers.Get(worker)
	return !p.closed && s != nil && s.CanRun(t)
}
