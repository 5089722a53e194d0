package lws

import "github.com/starpu-go/starpu/pluginapi/sched"

// Chain implements sched.Chainer: a task whose only unfinished predecessor
// ends a worker's queue runs there next, where locality work stealing would have
// kept it anyway (the worker that releases a task keeps it). The worker
// counts it running until its PostExec.
func (p *Policy) Chain(t *sched.Task, worker int) bool {
	s := p.workers.Get(worker)
	if p.closed || s == nil || !s.CanRun(t) {
		return false
	}
	p.workers.Started(worker)
	return true
}
