package sched

// Chained tasks, the host's side. Design note: docs/design/hot-path.md,
// "Chains"; the core's side is core/task_chain.go.
//
// The core pushes a task flagged PushAfter before it is ready, when its
// only unfinished predecessor P is in this policy's hands. The host queues
// it behind P on P's worker W, without the policy, when P is the last task
// the host gave W (the task then starts as soon as P ends, exactly where a
// policy could have started it at the earliest) and the policy agrees
// (Chainer). When P is still in the policy's queue, the chained task waits
// for P to be placed. Otherwise the host declines (AssignDeclined) and the
// core pushes the task again once it is ready. Chained tasks go to W ahead
// of the policy's own for W, in order, within W's queue depth.
//
// Rejected: handing chained tasks to the policy (it could not start them
// anywhere before P ends, and would need to know why); remembering every
// task the policy holds (a map operation per task for every push, where a
// small table that may forget is enough: forgetting only declines).

import (
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Chainer is implemented by a policy that lets the host queue a task
// behind its only unfinished predecessor, on the worker that runs it, as
// soon as the task is submitted. Chain reports whether the policy agrees
// to t running on worker w; the host asks only when w's queue ends with
// the predecessor. A policy without it never has tasks chained.
type Chainer interface {
	Chain(t *Task, worker int) bool
}

// queuedSlots sizes the table of tasks in the policy's hands.
const queuedSlots = 4096

// chainHost is the host's chaining state; nil when the policy is not a
// Chainer or no worker has a scheduler ring.
type chainHost struct {
	policy Chainer
	// tail[w] is the last task posted to worker w's scheduler ring or held
	// for it (hasTail[w]); held[w] the chained tasks waiting for room in
	// w's queue, in order.
	tail    []uint64
	hasTail []bool
	held    [][]*Task
	// waiting maps a task in the policy's hands, or itself waiting, to
	// the chained task to place behind it once it is placed; waitingIDs
	// holds the ids of the tasks waiting.
	waiting    map[uint64]*Task
	waitingIDs map[uint64]struct{}
	// queued holds the ids of tasks pushed to the policy and not yet
	// assigned, by id modulo its size: a task overwritten by another is
	// forgotten, and a task chained behind it is declined.
	queued [queuedSlots]uint64
}

func newChainHost(p Policy, nworkers int) *chainHost {
	c, ok := p.(Chainer)
	if !ok {
		return nil
	}
	return &chainHost{policy: c, tail: make([]uint64, nworkers), hasTail: make([]bool, nworkers),
		held: make([][]*Task, nworkers), waiting: map[uint64]*Task{}, waitingIDs: map[uint64]struct{}{}}
}

// grow makes room for worker id.
func (c *chainHost) grow(id int) {
	for len(c.tail) <= id {
		c.tail = append(c.tail, 0)
		c.hasTail = append(c.hasTail, false)
		c.held = append(c.held, nil)
	}
}

// pushed notes a task handed to the policy.
func (c *chainHost) pushed(id uint64) { c.queued[id%queuedSlots] = id }

// inPolicy reports whether task id is in the policy's hands, as far as
// the table remembers.
func (c *chainHost) inPolicy(id uint64) bool { return c.queued[id%queuedSlots] == id }

// pushAfter takes a Push flagged PushAfter.
func (h *Host) pushAfter(t *Task) {
	c := h.chain
	p := t.after
	if c == nil {
		h.decline(t)
		return
	}
	for w := range c.tail {
		if c.hasTail[w] && c.tail[w] == p {
			h.place(t, w)
			return
		}
	}
	_, waits := c.waitingIDs[p]
	if _, taken := c.waiting[p]; !taken && (waits || c.inPolicy(p)) {
		c.waiting[p] = t
		c.waitingIDs[t.ID] = struct{}{}
		return
	}
	h.decline(t)
}

// place queues chained task t behind the tail of worker w, and then the
// tasks waiting for it.
func (h *Host) place(t *Task, w int) {
	c := h.chain
	for t != nil {
		delete(c.waitingIDs, t.ID)
		wk := h.worker(w)
		if wk == nil || w >= len(h.rings) || h.rings[w] == nil || !t.CanRun(wk) || !c.policy.Chain(t, w) {
			h.decline(t)
			return
		}
		c.tail[w], c.hasTail[w] = t.ID, true
		if len(c.held[w]) > 0 || h.inflight[w] >= h.depth(w) || !h.postChained(w, t) {
			c.held[w] = append(c.held[w], t)
		}
		next, ok := c.waiting[t.ID]
		if !ok {
			return
		}
		delete(c.waiting, t.ID)
		t = next
	}
}

// placed is called when the policy's task id went to worker w: to its
// scheduler ring (posted), or through the core. Chained tasks waiting for
// it follow it in the first case and are declined in the second.
func (h *Host) placed(id uint64, w int, posted bool) {
	c := h.chain
	if c.inPolicy(id) {
		c.queued[id%queuedSlots] = 0
	}
	c.grow(w)
	if posted {
		c.tail[w], c.hasTail[w] = id, true
	} else {
		c.hasTail[w] = false
	}
	next, ok := c.waiting[id]
	if !ok {
		return
	}
	delete(c.waiting, id)
	if !posted {
		h.decline(next)
		return
	}
	h.place(next, w)
}

// postChained posts chained task t to worker w's scheduler ring and tells
// the core, or reports false when the ring has no room, or the decisions
// ring none for telling the core first.
func (h *Host) postChained(w int, t *Task) bool {
	wr := h.rings[w]
	slot := wr.ring.Reserve(len(t.exec))
	if slot == nil {
		return false
	}
	b := h.reserveRing(wire.AssignSize)
	if b == nil {
		return false // the slot is given up, never committed
	}
	h.announce(w, t, b, wr)
	h.post(t, wr, slot, -1)
	h.inflight[w]++
	return true
}

// offerHeld posts the chained tasks held for worker w while its queue has
// room, and reports whether any is still held (the policy's tasks then
// wait: they would run before them).
func (h *Host) offerHeld(w int) bool {
	c := h.chain
	q := c.held[w]
	n := 0
	for n < len(q) && h.inflight[w] < h.depth(w) && h.postChained(w, q[n]) {
		q[n] = nil
		n++
	}
	c.held[w] = q[n:]
	if len(c.held[w]) == 0 {
		c.held[w] = q[:0]
	}
	return len(c.held[w]) > 0
}

// chainDone notes that task id completed on worker w.
func (h *Host) chainDone(w int, id uint64) {
	c := h.chain
	if w < len(c.tail) && c.hasTail[w] && c.tail[w] == id && len(c.held[w]) == 0 {
		c.hasTail[w] = false
	}
}

// dropWorker declines the chained tasks held for a worker leaving the
// policy.
func (h *Host) dropWorker(w int) {
	c := h.chain
	if w >= len(c.tail) {
		return
	}
	c.hasTail[w] = false
	q := c.held[w]
	c.held[w] = nil
	for _, t := range q {
		h.decline(t)
	}
}

// decline answers AssignDeclined for t and for the tasks waiting for it.
func (h *Host) decline(t *Task) {
	for t != nil {
		a := wire.Assign{Worker: -1, ID: t.ID, Flags: wire.AssignDeclined}
		a.Encode(h.reserve(wire.AssignSize))
		h.commit()
		h.answered++
		if h.chain == nil {
			return
		}
		delete(h.chain.waitingIDs, t.ID)
		next, ok := h.chain.waiting[t.ID]
		if !ok {
			return
		}
		delete(h.chain.waiting, t.ID)
		t = next
	}
}

// worker is the worker with id w, or nil.
func (h *Host) worker(w int) *Worker {
	for i := range h.workers {
		if h.workers[i].ID == w {
			return &h.workers[i]
		}
	}
	return nil
}
