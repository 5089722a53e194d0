// Package schedkit is the toolkit scheduling policies are built from: the
// priority queue of tasks (Queue) and the table of workers (Table) that
// every policy needs and that ws, dmda and eager once each wrote for
// themselves. A policy keeps as many queues as its design wants (one
// central queue, one per worker, one per bucket) and one table.
//
// It is a sub-package of pluginapi/sched rather than part of it because
// sched is the contract between the core and a policy (what crosses the
// process boundary), while this is code a policy runs inside its own
// process: the core never imports it, and a policy that wants other data
// structures does not have to carry it.
//
// Like a policy, nothing here locks: the SDK's Host calls a policy's hooks
// from one goroutine.
package schedkit

import "github.com/starpu-go/starpu/pluginapi/sched"

// Entry is a queued task and the cost the policy charged for it where it
// is queued (dmda: the predicted ns on the queue's worker); Queue keeps the
// sum of the costs, in total and per priority. Policies that do not weigh
// tasks leave it 0.
type Entry struct {
	// Task is the queued task.
	Task *sched.Task
	// Cost is what the policy charged for it (PushAs), 0 by Push.
	Cost int64
}

// Queue holds tasks by decreasing priority, oldest first among equal
// priorities. It keeps one FIFO per distinct priority, so that push and
// pop are O(number of distinct priorities queued), O(1) in the usual case
// of a handful of them, and it allocates nothing per task once its
// buffers have grown: a drained FIFO is kept for the next priority that
// needs one. The zero Queue is empty and ready to use.
type Queue struct {
	buckets []*bucket // by decreasing priority, none empty
	n       int
	cost    int64
	spares  []*bucket // drained buckets kept for reuse
}

// bucket is the FIFO of one priority: entries[head:] are live.
type bucket struct {
	prio    int32
	entries []Entry
	head    int
	cost    int64
}

// Len is the number of queued tasks.
func (q *Queue) Len() int { return q.n }

// Cost is the sum of the queued entries' costs.
func (q *Queue) Cost() int64 { return q.cost }

// CostAtLeast is the sum of the costs of the entries of priority prio or
// higher: the work that runs before a task of priority prio pushed now.
func (q *Queue) CostAtLeast(prio int32) int64 {
	var c int64
	for _, b := range q.buckets {
		if b.prio < prio {
			break
		}
		c += b.cost
	}
	return c
}

// Push queues t at its own priority, with no cost.
func (q *Queue) Push(t *sched.Task) { q.PushAs(t, t.Priority, 0) }

// Append queues t at the back whatever its priority: a queue filled only
// with Append is one FIFO, for a policy that ignores priorities.
func (q *Queue) Append(t *sched.Task) { q.PushAs(t, 0, 0) }

// PushAs queues t as if its priority were prio (a FIFO policy passes the
// same prio for every task), charging it cost.
func (q *Queue) PushAs(t *sched.Task, prio int32, cost int64) {
	i := 0
	for i < len(q.buckets) && q.buckets[i].prio > prio {
		i++
	}
	if i == len(q.buckets) || q.buckets[i].prio != prio {
		var b *bucket
		if k := len(q.spares); k > 0 {
			b, q.spares = q.spares[k-1], q.spares[:k-1]
		} else {
			b = &bucket{}
		}
		b.prio = prio
		q.buckets = append(q.buckets, nil)
		copy(q.buckets[i+1:], q.buckets[i:])
		q.buckets[i] = b
	}
	b := q.buckets[i]
	b.entries = append(b.entries, Entry{Task: t, Cost: cost})
	b.cost += cost
	q.n++
	q.cost += cost
}

// Front is the most urgent, oldest task, or nil when q is empty; it stays
// queued.
func (q *Queue) Front() *sched.Task {
	if q.n == 0 {
		return nil
	}
	b := q.buckets[0]
	return b.entries[b.head].Task
}

// PopFront removes the most urgent, oldest entry; ok is false when q is
// empty.
func (q *Queue) PopFront() (e Entry, ok bool) {
	if q.n == 0 {
		return Entry{}, false
	}
	return q.remove(0, 0), true
}

// TakeFor removes the most urgent, oldest task that w can run
// (sched.Task.CanRun), or returns nil. It is TakeFirst with CanRun,
// without the call through a function value: this is the pop of most
// policies, on the hot path.
func (q *Queue) TakeFor(w *sched.Worker) *sched.Task {
	for bi, b := range q.buckets {
		live := b.entries[b.head:]
		for i := range live {
			if live[i].Task.CanRun(w) {
				return q.remove(bi, i).Task
			}
		}
	}
	return nil
}

// TakeFirst removes the most urgent, oldest entry whose task match
// accepts; ok is false when none does.
func (q *Queue) TakeFirst(match func(*sched.Task) bool) (e Entry, ok bool) {
	for bi, b := range q.buckets {
		for i, e := range b.entries[b.head:] {
			if match(e.Task) {
				return q.remove(bi, i), true
			}
		}
	}
	return Entry{}, false
}

// TakeLast removes the least urgent, newest entry whose task match
// accepts: the other end of the queue, where a thief takes from, leaving
// the owner its urgent work. ok is false when none matches.
func (q *Queue) TakeLast(match func(*sched.Task) bool) (e Entry, ok bool) {
	for bi := len(q.buckets) - 1; bi >= 0; bi-- {
		b := q.buckets[bi]
		live := b.entries[b.head:]
		for i := len(live) - 1; i >= 0; i-- {
			if match(live[i].Task) {
				return q.remove(bi, i), true
			}
		}
	}
	return Entry{}, false
}

// Each calls f with the position and entry of every queued task, most
// urgent and oldest first, until f returns false. f must not change q;
// TakeAt removes the entry at a position Each gave.
func (q *Queue) Each(f func(pos int, e Entry) bool) {
	pos := 0
	for _, b := range q.buckets {
		for _, e := range b.entries[b.head:] {
			if !f(pos, e) {
				return
			}
			pos++
		}
	}
}

// TakeAt removes and returns the entry at position pos, in Each's order;
// pos must be in [0, Len()).
func (q *Queue) TakeAt(pos int) Entry {
	for bi, b := range q.buckets {
		if n := len(b.entries) - b.head; pos >= n {
			pos -= n
			continue
		}
		return q.remove(bi, pos)
	}
	panic("schedkit: Queue.TakeAt position out of range")
}

// Drain empties q, appending its tasks to out in Each's order.
func (q *Queue) Drain(out []*sched.Task) []*sched.Task {
	for _, b := range q.buckets {
		for _, e := range b.entries[b.head:] {
			out = append(out, e.Task)
		}
	}
	*q = Queue{}
	return out
}

// remove takes live entry i of bucket bi out of the queue.
func (q *Queue) remove(bi, i int) Entry {
	b := q.buckets[bi]
	if i == 0 && b.head+1 < len(b.entries) && b.head < 64 {
		// The usual case, kept short: the head of a FIFO that stays
		// non-empty and needs no compaction.
		e := b.entries[b.head]
		b.entries[b.head] = Entry{}
		b.head++
		b.cost -= e.Cost
		q.n--
		q.cost -= e.Cost
		return e
	}
	live := b.entries[b.head:]
	n := len(live)
	e := live[i]
	switch {
	case i == 0:
		live[0] = Entry{}
		b.head++
	case i == n-1:
		live[i] = Entry{}
		b.entries = b.entries[:len(b.entries)-1]
	default:
		copy(live[i:], live[i+1:])
		live[n-1] = Entry{}
		b.entries = b.entries[:len(b.entries)-1]
	}
	b.cost -= e.Cost
	q.n--
	q.cost -= e.Cost
	switch {
	case b.head == len(b.entries):
		// Drained: out of the list, kept for the next new priority, so
		// that a chain of tasks alternating priorities allocates nothing.
		q.buckets = append(q.buckets[:bi], q.buckets[bi+1:]...)
		b.entries, b.head, b.cost = b.entries[:0], 0, 0
		q.spares = append(q.spares, b)
	case b.head > 64 && b.head*2 > len(b.entries):
		// Mostly dead space at the front: slide the live entries down so
		// that a long-lived FIFO does not grow without bound.
		m := copy(b.entries, b.entries[b.head:])
		clear(b.entries[m:])
		b.entries, b.head = b.entries[:m], 0
	}
	return e
}
