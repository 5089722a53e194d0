package sched

// Parallel tasks, the host's side (parallel.go has the protocol).

import (
	"fmt"
	"slices"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// initCombined checks and keeps the combined workers of an Init request:
// IDs that no worker has, and members that are workers (of the request or
// added later).
func (h *Host) initCombined(cs []Worker) error {
	h.combined, h.active, h.teamTasks = nil, nil, nil
	for _, c := range cs {
		switch {
		case c.ID < 0:
			return fmt.Errorf("combined worker id %d: must not be negative", c.ID)
		case workerIndex(h.workers, c.ID) >= 0 || workerIndex(h.combined, c.ID) >= 0:
			return fmt.Errorf("combined worker id %d: taken by another worker", c.ID)
		case len(c.Members) == 0:
			return fmt.Errorf("combined worker %d has no member", c.ID)
		}
		for _, m := range c.Members {
			if m < 0 || m == c.ID {
				return fmt.Errorf("combined worker %d: member %d is not a worker", c.ID, m)
			}
		}
		c.Members = slices.Clone(c.Members)
		h.combined = append(h.combined, c)
	}
	return nil
}

// updateCombined works out which combined workers have all their members
// among the host's workers, and tells a ParallelPolicy when that changed
// (or always, at Init).
func (h *Host) updateCombined(always bool) {
	var active []Worker
	for _, c := range h.combined {
		all := true
		for _, m := range c.Members {
			all = all && workerIndex(h.workers, m) >= 0
		}
		if all {
			active = append(active, c)
		}
	}
	changed := len(active) != len(h.active)
	for i := 0; !changed && i < len(active); i++ {
		changed = active[i].ID != h.active[i].ID
	}
	h.active = active
	if p, ok := h.policy.(ParallelPolicy); ok && (changed || always) {
		p.SetCombinedWorkers(slices.Clone(active))
	}
}

// assignTeam sends the decision to run t, which the policy's Pop for
// worker w handed to a combined worker, there: an Assign naming the
// combined worker, which the core posts to every member. The task counts
// in each member's queue until its Done. A combined worker the host does
// not know is the core's to refuse; the task then counts on w.
func (h *Host) assignTeam(w int, t *Task) {
	c := t.Combined()
	a := wire.Assign{Worker: int32(c), ID: t.ID}
	if impl := t.Impl(); impl != -1 {
		a.Flags |= wire.AssignImpl
		a.Impl = uint32(impl)
	}
	a.Encode(h.reserve(wire.AssignSize))
	h.commit()
	charged := []int{w}
	if i := workerIndex(h.active, c); i >= 0 {
		charged = h.active[i].Members
	}
	if h.teamTasks == nil {
		h.teamTasks = map[uint64][]int{}
	}
	h.teamTasks[t.ID] = charged
	for _, m := range charged {
		if m < len(h.inflight) {
			h.inflight[m]++
		}
	}
}

// teamDone returns the slots of the workers a task handed to a combined
// worker counted on, and reports whether d was such a task's.
func (h *Host) teamDone(d *wire.Done) bool {
	charged, ok := h.teamTasks[d.ID]
	if !ok {
		return false
	}
	delete(h.teamTasks, d.ID)
	for _, m := range charged {
		if m < len(h.inflight) && h.inflight[m] > 0 {
			h.inflight[m]--
			h.observe(m, d.DurationNs)
		}
	}
	return true
}
