package sched

// Parallel tasks, the policy's side (docs/design/scheduling.md, "Parallel
// tasks").
//
// A combined worker is a team of workers of one driver that run a parallel
// task together. The core lists them in InitRequest.Combined, numbered
// after the workers; the host gives a ParallelPolicy those whose members
// it schedules. Such a policy hands a parallel task to a combined worker
// by returning it from the Pop of one of its members with SetCombined: the
// host then sends the core one Assign naming the combined worker (never
// posting the task to a scheduler ring: the core posts it to every
// member, in the same order on each), counts the task in every member's
// queue, and hands the policy the task's PostExec under the combined
// worker's ID. Every other policy runs parallel tasks on one worker each,
// as StarPU runs them on a basic worker: the kernel then sees a combined
// worker of size 1.
//
// Rejected: Pop for combined workers (the host would have to decide when
// a combined worker has room, which depends on what the policy means to
// run on its members first); combined workers in Init's list (every
// policy would have to skip them).

import (
	"math"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// SizeLength is a combined worker size and a parallel task's predicted
// length in ns on a combined worker of that size, -1 while uncalibrated.
type SizeLength = wire.SizeLength

// Parallel is what the core says of a parallel task: the combined worker
// sizes it may run on (at most its codelet's MaxParallelism, among those
// the machine has), increasing, each with the task's predicted length
// there.
type Parallel struct {
	Sizes []SizeLength
}

// ParallelPolicy is implemented by a policy that places parallel tasks on
// combined workers (StarPU's pheft and peager). The host calls
// SetCombinedWorkers once after Init and again whenever a change of
// workers changes which combined workers have all their members among the
// policy's workers: the policy may hand tasks to those only, and must
// place again the tasks it meant for one that is gone.
type ParallelPolicy interface {
	SetCombinedWorkers(combined []Worker)
}

// LengthOnSize is t's predicted length on a combined worker of size
// workers, -1 while uncalibrated; ok is false when t may not run on one
// (a sequential task, or a size t's codelet does not allow).
func (t *Task) LengthOnSize(size int) (ns int64, ok bool) {
	if t.Parallel == nil {
		return -1, false
	}
	for _, s := range t.Parallel.Sizes {
		if int(s.Size) == size {
			return s.Length, true
		}
	}
	return -1, false
}

// CanRunCombined reports whether t may run on combined worker c: a
// parallel task bound to no worker, of c's architecture, that may run on
// c's size.
func (t *Task) CanRunCombined(c *Worker) bool {
	if t.Worker >= 0 || t.ArchMask&driver.ArchBit(c.Arch) == 0 {
		return false
	}
	_, ok := t.LengthOnSize(len(c.Members))
	return ok
}

// SetCombined runs t on combined worker id (an ID of InitRequest.Combined)
// instead of on the worker whose Pop returns it, which should be one of
// its members; -1 (the default) undoes it. The core fails a task handed
// to a combined worker it may not run on, saying why.
func (t *Task) SetCombined(id int) {
	if id < -1 || id >= math.MaxInt32 {
		id = math.MaxInt32 - 1 // no such combined worker: refused
	}
	t.combined = int32(id + 1)
}

// Combined is the combined worker SetCombined chose, or -1.
func (t *Task) Combined() int { return int(t.combined) - 1 }
