package schedkit

import (
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Slot is one worker of a Table: what the policy was told of it, what the
// table derives from that, and the policy's own state for it (S: its
// queue, its expected load).
type Slot[S any] struct {
	sched.Worker
	// Bit is driver.ArchBit(Arch) and ArchIndex driver.ArchIndex(Arch),
	// computed once: a decision tests them for every worker.
	Bit       uint32
	ArchIndex int
	// State is the policy's own state of the worker, zero when the worker
	// is added.
	State S

	running int
}

// CanRun reports whether the worker can run t: t.CanRun(&s.Worker),
// without looking the architecture up.
func (s *Slot[S]) CanRun(t *sched.Task) bool {
	if t.Worker >= 0 {
		return int(t.Worker) == s.ID
	}
	return t.ArchMask&s.Bit != 0
}

// Length is t's predicted length on the worker's architecture
// (t.LengthOn), -1 when uncalibrated.
func (s *Slot[S]) Length(t *sched.Task) int64 {
	if s.ArchIndex < 0 {
		return -1
	}
	return t.Length[s.ArchIndex]
}

// Transfer is the predicted time to bring t's data to the worker's memory
// node (t.TransferTo), 0 when unknown.
func (s *Slot[S]) Transfer(t *sched.Task) int64 { return t.TransferTo(&s.Worker) }

// Running is the number of tasks handed to the worker and not finished,
// as counted by Table.Started and Table.Finished.
func (s *Slot[S]) Running() int { return s.running }

// Idle reports whether the worker runs nothing (as Running counts).
func (s *Slot[S]) Idle() bool { return s.running == 0 }

// Table is a policy's set of workers: it follows Init, AddWorkers and
// RemoveWorkers, finds workers by ID and in the order they came, counts
// them per architecture, places tasks round robin, keeps the tasks no
// worker can run until one comes (Park), and counts what each worker runs
// for the policies that care whether it is idle (Started, Finished).
// The zero Table is empty and ready to use.
type Table[S any] struct {
	byID   []*Slot[S] // by worker ID, nil where there is none
	slots  []*Slot[S] // in the order of Init and AddWorkers
	next   int        // round-robin cursor over slots
	parked []*sched.Task
	nArch  [wire.NumArch]int
}

// CheckWorkers checks the workers a policy's Init is given: a negative
// worker ID is an error, which Init returns.
func CheckWorkers(workers []sched.Worker) error {
	for _, w := range workers {
		if w.ID < 0 {
			return fmt.Errorf("worker id %d: must not be negative", w.ID)
		}
	}
	return nil
}

// Add adds the workers the table does not have yet and returns their new
// slots; a worker it has and a negative ID are skipped. A worker that was
// removed comes back as new, with a zero State. The tasks parked so far
// stay parked: the policy takes them with Unpark and places them again.
func (tb *Table[S]) Add(workers []sched.Worker) []*Slot[S] {
	var added []*Slot[S]
	for _, w := range workers {
		if w.ID < 0 || tb.Get(w.ID) != nil {
			continue
		}
		for w.ID >= len(tb.byID) {
			tb.byID = append(tb.byID, nil)
		}
		s := &Slot[S]{Worker: w, Bit: driver.ArchBit(w.Arch), ArchIndex: driver.ArchIndex(w.Arch)}
		tb.byID[w.ID] = s
		tb.slots = append(tb.slots, s)
		if s.ArchIndex >= 0 {
			tb.nArch[s.ArchIndex]++
		}
		added = append(added, s)
	}
	return added
}

// Remove removes the workers with the given IDs and returns their slots,
// whose State still holds what the policy queued for them: the policy
// places those tasks again. Unknown IDs are skipped.
func (tb *Table[S]) Remove(ids []int) []*Slot[S] {
	var removed []*Slot[S]
	for _, id := range ids {
		s := tb.Get(id)
		if s == nil {
			continue
		}
		tb.byID[id] = nil
		for i, o := range tb.slots {
			if o == s {
				tb.slots = append(tb.slots[:i], tb.slots[i+1:]...)
				break
			}
		}
		if s.ArchIndex >= 0 {
			tb.nArch[s.ArchIndex]--
		}
		removed = append(removed, s)
	}
	return removed
}

// Get is worker id's slot, or nil when the table has no such worker.
func (tb *Table[S]) Get(id int) *Slot[S] {
	if id < 0 || id >= len(tb.byID) {
		return nil
	}
	return tb.byID[id]
}

// Slots are the workers in the order they were added. The slice is the
// table's: read it, do not keep it across Add or Remove.
func (tb *Table[S]) Slots() []*Slot[S] { return tb.slots }

// Len is the number of workers.
func (tb *Table[S]) Len() int { return len(tb.slots) }

// CountArch is the number of workers of the architecture with
// driver.ArchIndex i.
func (tb *Table[S]) CountArch(i int) int {
	if i < 0 || i >= len(tb.nArch) {
		return 0
	}
	return tb.nArch[i]
}

// Next places t round robin: the next worker after the cursor that can
// run t, moving the cursor past it; nil when no worker can run t.
func (tb *Table[S]) Next(t *sched.Task) *Slot[S] {
	n := len(tb.slots)
	for range n {
		s := tb.slots[tb.next%n]
		tb.next++
		if s.CanRun(t) {
			return s
		}
	}
	return nil
}

// Home is where a policy with a queue per worker puts t: the worker it is
// bound to, else the worker that released it when that one can run it
// (its data is likely there), else the next worker round robin that can.
// When there is none (its bound worker is not in the table, or no worker
// can run it now) Home parks t and returns nil.
func (tb *Table[S]) Home(t *sched.Task) *Slot[S] {
	var s *Slot[S]
	if t.Worker >= 0 {
		s = tb.Get(int(t.Worker))
	} else if r := tb.Get(int(t.ReleasedBy)); r != nil && r.CanRun(t) {
		s = r
	} else {
		s = tb.Next(t)
	}
	if s == nil {
		tb.Park(t)
	}
	return s
}

// Rotate moves the round-robin cursor by one and returns it, for a scan
// over Slots that should start at a different worker each time (position
// (Rotate()+k) % Len() for k in [0, Len())), so that equal choices
// spread.
func (tb *Table[S]) Rotate() int {
	tb.next++
	return tb.next
}

// Park keeps t, which no worker can run now (bound to a removed worker,
// or of an architecture no worker has), until Unpark.
func (tb *Table[S]) Park(t *sched.Task) { tb.parked = append(tb.parked, t) }

// Unpark returns the parked tasks and forgets them: after Add, the policy
// pushes them again, and parks again those still without a worker.
func (tb *Table[S]) Unpark() []*sched.Task {
	p := tb.parked
	tb.parked = nil
	return p
}

// Parked is the number of parked tasks.
func (tb *Table[S]) Parked() int { return len(tb.parked) }

// Started counts a task handed to worker id (the policy's Pop returned
// it); Finished uncounts one (its PostExec). Finished never takes the
// count below zero: a PostExec may name a task of a previous instance of
// the policy.
func (tb *Table[S]) Started(id int) {
	if s := tb.Get(id); s != nil {
		s.running++
	}
}

// Finished uncounts a task of worker id; see Started.
func (tb *Table[S]) Finished(id int) {
	if s := tb.Get(id); s != nil && s.running > 0 {
		s.running--
	}
}

// Idle appends to out the workers that run nothing (Slot.Idle), in the
// order of Slots, and returns it.
func (tb *Table[S]) Idle(out []*Slot[S]) []*Slot[S] {
	for _, s := range tb.slots {
		if s.running == 0 {
			out = append(out, s)
		}
	}
	return out
}

// Reset forgets every worker and parked task, at the policy's Deinit.
func (tb *Table[S]) Reset() { *tb = Table[S]{} }
