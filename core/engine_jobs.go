package core

// The engine's table of tasks pushed to a policy and not yet completed,
// by task id: every task is put in it at push, looked up when its policy
// posts it, and taken out at its completion, so three operations per task
// on the hot path.
//
// Task ids are handed out in order and tasks mostly complete in about the
// order they were pushed, so a direct-mapped array indexed by the id's
// low bits finds almost every task with one load and no hashing; a task
// whose slot holds an older task still in flight (a chain pushed far
// ahead, a slow task among many fast ones) goes to a map beside it.
//
// Rejected: a Go map alone (hashing and, with tens of thousands of tasks
// in flight, cache misses in its control groups: 15% of the core's time
// with a long chain pushed ahead); a slab whose index travels with the task
// (the wire's ids are the task ids, which policies and traces show).

// jobSlots is the direct-mapped part's size, a power of two: more than the
// tasks in flight in most runs.
const jobSlots = 1 << 15

// jobTable holds the tracked jobs; engine.jobsMu guards it.
type jobTable struct {
	slots []*job
	over  map[uint64]*job
	n     int
}

func newJobTable() jobTable {
	return jobTable{slots: make([]*job, jobSlots), over: map[uint64]*job{}}
}

// put tracks j, replacing what was tracked under its id.
func (t *jobTable) put(j *job) {
	s := &t.slots[j.id&(jobSlots-1)]
	switch {
	case *s == nil:
		if len(t.over) > 0 {
			if _, had := t.over[j.id]; had {
				// Put there while its slot was taken: it stays there.
				t.over[j.id] = j
				return
			}
		}
		*s = j
	case (*s).id == j.id:
		*s = j
		return
	default:
		_, had := t.over[j.id]
		t.over[j.id] = j
		if had {
			return
		}
	}
	t.n++
}

// get is the job tracked under id, or nil.
func (t *jobTable) get(id uint64) *job {
	if j := t.slots[id&(jobSlots-1)]; j != nil && j.id == id {
		return j
	}
	if len(t.over) == 0 {
		return nil
	}
	return t.over[id]
}

// take untracks the job tracked under id and returns it, or nil.
func (t *jobTable) take(id uint64) *job {
	s := &t.slots[id&(jobSlots-1)]
	if j := *s; j != nil && j.id == id {
		*s = nil
		t.n--
		return j
	}
	if len(t.over) == 0 {
		return nil
	}
	j, ok := t.over[id]
	if ok {
		delete(t.over, id)
		t.n--
	}
	return j
}

// len is how many jobs are tracked.
func (t *jobTable) len() int { return t.n }

// each calls f with every tracked job until f returns false.
func (t *jobTable) each(f func(*job) bool) {
	if t.n == 0 {
		return
	}
	for _, j := range t.slots {
		if j != nil && !f(j) {
			return
		}
	}
	for _, j := range t.over {
		if !f(j) {
			return
		}
	}
}
