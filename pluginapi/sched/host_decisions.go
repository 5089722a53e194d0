package sched

// The decisions ring: the host never waits for the core.
//
// The core writes the events ring from several goroutines under its
// scheduling context's lock, waiting for room there when the ring is full:
// an application goroutine submitting, and the engine goroutine releasing
// a task's successors or taking back a declined chained task. The engine is
// also the decisions ring's only reader. A host that waited for room in the
// decisions ring would stop reading events, so a submitter would wait for
// the host while holding the lock, the engine would wait for the lock, and
// the host for the engine: `starpu bench overhead --buffers 1` hung so,
// once in a few runs of 40 rounds of 50000 tasks.
//
// So a decision the ring has no room for waits in the host's backlog, in
// order, and every decision after it joins it until the ring has room
// again; the loop moves the backlog on first thing at each pass. Its
// memory is bounded by the tasks in the policy's hands, a few dozen bytes
// each. A decision that must reach the core before something else happens
// (an Assign before its Exec is posted to a worker, where the worker could
// complete it first) asks for the ring itself (reserveRing) and gives up
// posting when it cannot have it; a chained task, which has no other way
// to its worker, is then held (postChained). Either way the loop polls the
// ring every 50 µs and offers again until a pass finds room: nothing else
// would wake it, as the core, waiting for those tasks, sends no event.
//
// Rejected: the core draining decisions while it waits for room in the
// events ring (the engine would reenter the decision handling that made it
// push), and rings sized for the worst case (a chain pushed ahead is as long
// as the application makes it).

// reserve returns a slot of n bytes for the next decision: in the ring
// when it has room and no decision waits before this one, else in the
// backlog. commit publishes it.
func (h *Host) reserve(n int) []byte {
	if b := h.reserveRing(n); b != nil {
		return b
	}
	b := make([]byte, n)
	h.backlog = append(h.backlog, b)
	return b
}

// reserveRing returns a slot of n bytes in the ring for the next decision,
// or nil when the ring has no room or a decision waits in the backlog (this
// one would overtake it).
func (h *Host) reserveRing(n int) []byte {
	h.inRing = false
	if len(h.backlog) > 0 {
		return nil
	}
	b := h.decisions.Reserve(n)
	h.inRing = b != nil
	h.wantRoom = h.wantRoom || b == nil
	return b
}

// commit publishes the decision last reserved: to the core at once when
// it is in the ring, else when flush moves it there.
func (h *Host) commit() {
	if h.inRing {
		h.decisions.Commit()
		h.inRing = false
	}
}

// flush moves the backlog's decisions to the ring while it has room, and
// reports whether it moved any (the core's bell is then due).
func (h *Host) flush() bool {
	n := 0
	for n < len(h.backlog) {
		b := h.decisions.Reserve(len(h.backlog[n]))
		if b == nil {
			break
		}
		copy(b, h.backlog[n])
		h.decisions.Commit()
		h.backlog[n] = nil
		n++
	}
	h.backlog = h.backlog[n:]
	if len(h.backlog) == 0 {
		h.backlog = nil
	}
	return n > 0
}
