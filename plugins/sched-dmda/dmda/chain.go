package dmda

import (
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// Chain implements sched.Chainer: a task whose only unfinished predecessor
// ends a worker's queue may run there next when that worker's architecture
// is as fast for it as any other the task may run on (or nothing is known:
// the models are not calibrated), since no worker can start it before the
// predecessor ends. The task is then charged to the worker like one it
// popped, so that the expected ends of later decisions count it.
func (p *Policy) Chain(t *sched.Task, worker int) bool {
	s := p.workers.Get(worker)
	if p.closed || s == nil || !s.CanRun(t) {
		return false
	}
	// A task whose implementations the core lists is dmda's to choose
	// among when it is pushed; a chained task runs with the core's choice.
	if len(s.Impls(t)) > 0 {
		return false
	}
	ns := s.Length(t)
	if ns >= 0 {
		for _, o := range p.workers.Slots() {
			if l := o.Length(t); l >= 0 && l < ns && archCanRun(o, t) {
				return false
			}
		}
	} else {
		ns = 0
	}
	w := &s.State
	if len(w.running) == 0 {
		w.runStart = p.now()
	}
	w.running = append(w.running, flight{id: t.ID, ns: ns})
	w.runNs += ns
	return true
}
