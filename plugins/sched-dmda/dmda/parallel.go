package dmda

// Parallel tasks (sched.ParallelPolicy), as StarPU's pheft places them: a
// parallel task is decided among the workers that can run it alone and
// the combined workers of the sizes it may run on, by the same fitness:
// a combined worker's expected end is when its last member is free plus
// the task's predicted length at its size. While some architecture or
// size has no prediction (its model is not calibrated, or the codelet has
// none) the tasks calibrate them, as dmda does architectures: each goes
// to the next of them in turn (a worker alone, then each size), on the
// least loaded worker or team there; a codelet without a model thus
// spreads its tasks over every size.
//
// A task placed on a combined worker is queued on every member, each
// charged up to the team's expected end, as StarPU queues an alias of it
// per member. A member that pops its copy waits for the others (its Pop
// returns nothing while it waits); the last to pop it hands it out,
// naming the combined worker (sched.Task.SetCombined). The task thus
// starts after what was decided before it on each member, as the
// decision assumed.
//
// Members must never wait for each other in a cycle, and the queues'
// order alone does not ensure it: with priorities (dmdas), a team task
// pushed later may overtake, on one member, a team another member has
// already reached. So once a member reaches a team, the team goes first
// among the teams of the other members: when the next task of a member's
// queue is a team's copy, it takes instead the copy of the first team
// others reached and it has not (its sequential tasks decided before go
// first, as decided). The team first reached among those still forming
// then always has every member coming to it, and forms. dmdar, which may
// take a task out of order, never takes one past a team's copy, nor
// while teammates wait.

import (
	"math"
	"slices"

	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// team is a combined worker the policy may hand parallel tasks to.
type team struct {
	sched.Worker
}

// ptask is a parallel task queued on a team's members, until the last of
// them pops it.
type ptask struct {
	t       *sched.Task
	c       *team
	arrived int
}

// SetCombinedWorkers implements sched.ParallelPolicy. The tasks queued
// for a combined worker that is gone are decided again.
func (p *Policy) SetCombinedWorkers(combined []sched.Worker) {
	p.combined = p.combined[:0]
	for _, c := range combined {
		p.combined = append(p.combined, &team{Worker: c})
	}
	gone := func(c *team) bool {
		for _, o := range p.combined {
			if o.ID == c.ID {
				return false
			}
		}
		return true
	}
	for _, t := range p.cancelTeams(gone) {
		p.Push(t)
	}
}

// teamByID is the combined worker with that ID, or nil.
func (p *Policy) teamByID(id int) *team {
	for _, c := range p.combined {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// members calls f with each member's slot, and reports false (after
// calling it on those before) when one is not a worker of the policy.
func (p *Policy) members(c *team, f func(s *slot)) bool {
	for _, m := range c.Members {
		s := p.workers.Get(m)
		if s == nil {
			return false
		}
		f(s)
	}
	return true
}

// teamLoad is when c's last member is free to start a task of priority
// prio pushed now, and the most tasks a member has; ok is false when c
// has a member the policy does not schedule.
func (p *Policy) teamLoad(c *team, prio int32, now int64) (free int64, n int, ok bool) {
	ok = p.members(c, func(s *slot) {
		free = max(free, p.free(&s.State, prio, now))
		n = max(n, s.State.q.Len()+len(s.State.running))
	})
	return free, n, ok
}

// pushParallel decides a parallel task bound to no worker, among the
// workers able to run it alone and the combined workers it may run on,
// and reports whether it placed it on a combined worker; when it did not,
// Push places it on the worker it returns (nil: no worker can run it).
func (p *Policy) pushParallel(t *sched.Task, now int64, l *[wire.NumArch]int64) (*slot, bool) {
	// Calibrating: the workers alone (when an architecture able to run t
	// has no prediction) and each size without one take t in turn.
	alone := p.calibrating(t, now, l)
	var sizes []int
	for _, c := range p.combined {
		n := len(c.Members)
		if ns, ok := t.LengthOnSize(n); ok && ns < 0 && t.CanRunCombined(&c.Worker) && !slices.Contains(sizes, n) {
			sizes = append(sizes, n)
		}
	}
	if alone != nil || len(sizes) > 0 {
		k := p.calibSize % uint(len(sizes)+b2i(alone != nil))
		p.calibSize++
		if alone != nil {
			if k == 0 {
				return alone, false
			}
			k--
		}
		if c := p.leastLoaded(t, sizes[k], now); c != nil {
			p.warnUncalibratedSizes(t)
			p.assignTeam(c, t, now)
			return nil, true
		}
	}
	s := p.best(t, now, l) // the best worker alone, nil when none
	// Fitness against the least end of every candidate, alone or team.
	minEnd := int64(math.MaxInt64)
	for _, o := range p.workers.Slots() {
		if archCanRun(o, t) {
			minEnd = min(minEnd, p.free(&o.State, t.Priority, now)+lengthOn(o, l))
		}
	}
	type option struct {
		c   *team
		end int64
	}
	var opts []option
	for _, c := range p.combined {
		ns, ok := t.LengthOnSize(len(c.Members))
		if !ok || ns < 0 || !t.CanRunCombined(&c.Worker) {
			continue
		}
		if free, _, ok := p.teamLoad(c, t.Priority, now); ok {
			opts = append(opts, option{c, free + ns})
			minEnd = min(minEnd, free+ns)
		}
	}
	bestFit := math.Inf(1)
	if s != nil {
		bestFit = p.alpha*float64(p.free(&s.State, t.Priority, now)+lengthOn(s, l)-minEnd) + p.beta*float64(s.Transfer(t))
	}
	var best *team
	for _, o := range opts {
		// Ties go to the worker alone: a team holds its members.
		if fit := p.alpha * float64(o.end-minEnd); fit < bestFit {
			best, bestFit = o.c, fit
		}
	}
	if best == nil {
		return s, false
	}
	p.assignTeam(best, t, now)
	return nil, true
}

// leastLoaded is the combined worker of the given size that t may run on
// whose members have the fewest tasks, then are free first; nil when
// none.
func (p *Policy) leastLoaded(t *sched.Task, size int, now int64) *team {
	var best *team
	var bestN int
	var bestFree int64
	for _, c := range p.combined {
		if len(c.Members) != size || !t.CanRunCombined(&c.Worker) {
			continue
		}
		free, n, ok := p.teamLoad(c, t.Priority, now)
		if ok && (best == nil || n < bestN || n == bestN && free < bestFree) {
			best, bestN, bestFree = c, n, free
		}
	}
	return best
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// warnUncalibratedSizes logs, the first time only, that tasks of codelet
// c are placed on combined workers without a prediction for their size.
func (p *Policy) warnUncalibratedSizes(t *sched.Task) {
	c := t.Codelet
	if p.warnedSizes[c] {
		return
	}
	if p.warnedSizes == nil {
		p.warnedSizes = map[uint32]bool{}
	}
	p.warnedSizes[c] = true
	p.log.Warn("uncalibrated performance model for combined workers: the codelet's parallel tasks go to each size in turn until it is calibrated",
		"model", modelOf(t))
}

// assignTeam queues t on every member of c, each charged up to c's
// expected end (its wait for the other members, then t's length), and
// notes it pending until the last member pops it.
func (p *Policy) assignTeam(c *team, t *sched.Task, now int64) {
	free, _, _ := p.teamLoad(c, t.Priority, now)
	ns, _ := t.LengthOnSize(len(c.Members))
	end := free + max(ns, 0)
	prio := t.Priority
	if !p.sorted {
		prio = 0 // one FIFO
	}
	t.SetImpl(-1) // the core chooses the implementation of a team's run
	p.members(c, func(s *slot) {
		s.State.q.PushAs(t, prio, max(end-p.free(&s.State, t.Priority, now), 0))
	})
	if p.pending == nil {
		p.pending = map[uint64]*ptask{}
	}
	p.pending[t.ID] = &ptask{t: t, c: c}
}

// arrive is Pop for member s of pt's team, which just took its copy: it
// waits (nil) until the last member takes it, which hands pt's task out
// for the team. The first to come sends the others to the team next.
func (p *Policy) arrive(s *slot, pt *ptask) *sched.Task {
	pt.arrived++
	if pt.arrived == 1 {
		p.members(pt.c, func(m *slot) {
			if m != s {
				m.State.next = append(m.State.next, pt)
			}
		})
	}
	if pt.arrived < len(pt.c.Members) {
		s.State.blocked = pt
		return nil
	}
	p.members(pt.c, func(m *slot) { m.State.blocked = nil })
	delete(p.pending, pt.t.ID)
	pt.t.SetCombined(pt.c.ID)
	return pt.t
}

// joinNext is Pop for a member other members are waiting for, whose
// queue's next task is a team's copy: it takes its copy of the first team
// they reached instead, and arrives there.
func (p *Policy) joinNext(s *slot) *sched.Task {
	w := &s.State
	pt := w.next[0]
	w.next = w.next[1:]
	e, ok := w.q.TakeFirst(func(t *sched.Task) bool { return t == pt.t })
	if !ok {
		e.Task = pt.t // not queued here: not reached (cancelTeams keeps both in step)
	}
	if len(w.running) == 0 {
		w.runStart = p.now()
	}
	w.running = append(w.running, flight{id: pt.t.ID, ns: e.Cost})
	w.runNs += e.Cost
	return p.arrive(s, pt)
}

// isTeamCopy reports whether t, in a worker's queue, is a team's copy.
func (p *Policy) isTeamCopy(t *sched.Task) bool {
	return len(p.pending) > 0 && p.pending[t.ID] != nil
}

// cancelTeams takes back the pending tasks of the combined workers drop
// says to drop: their copies leave the members' queues, the members that
// popped theirs are unblocked and uncharged. It returns the tasks, to be
// decided again.
func (p *Policy) cancelTeams(drop func(c *team) bool) []*sched.Task {
	var out []*sched.Task
	for id, pt := range p.pending {
		if !drop(pt.c) {
			continue
		}
		delete(p.pending, id)
		for _, m := range pt.c.Members {
			s := p.workers.Get(m)
			if s == nil {
				continue
			}
			s.State.next = slices.DeleteFunc(s.State.next, func(o *ptask) bool { return o == pt })
			if s.State.blocked == pt {
				s.State.blocked = nil
				p.finish(s, id)
			} else {
				s.State.q.TakeFirst(func(o *sched.Task) bool { return o == pt.t })
			}
		}
		out = append(out, pt.t)
	}
	return out
}
