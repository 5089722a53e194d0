package driver

// A worker's rings, from the driver's side.
//
// Every driver runs the same protocol with the core for each worker: take
// messages off the dispatch ring (and the scheduler's ring, for drivers
// that have one), post a completion for each Exec, Copy and Alloc, ring the
// core's bell when it should look, and sleep on the worker's own bell when
// there is nothing to do. Rings is that protocol once, so that a driver
// author writes only what runs a message. The rules it keeps are the ones
// the core relies on:
//
//   - A completion's error text is cut to wire.MaxErrLen, so that any error
//     fits the ring. (A CPU kernel's error longer than a ring message once
//     stopped its worker for good, and the task's Wait never returned.)
//   - The core hears of completions in batches while a worker is busy, and
//     of each one while somebody waits (CoreBell.Urgent) and of the last
//     before the worker goes idle (Completed for drivers that finish tasks
//     one at a time; Flush for drivers that post what finished in bursts).
//   - A worker that runs its tasks on its own thread gives that thread's
//     CPU to the core when its ring wakes it (Completed), so that on a
//     machine whose cores all run kernels the core runs between two of the
//     worker's tasks rather than in the middle of another's.
//   - A worker that goes idle says so on the core's bell (Idle), so that
//     the other workers ring for each completion: one of them may release
//     its next task.
//   - A completion says when the worker slept on its bell since the
//     previous one (Idle notes it, Post writes it), so that traces show
//     the worker's sleeping state without a message per wake-up.
//
// Rejected: a whole worker loop with a callback per message. The CPU
// driver runs each task to its end on the worker's thread, while the
// OpenCL and CUDA drivers enqueue commands and post completions when the
// device reports them; one loop would fit neither without options that
// make it harder to read than the loop itself.

import (
	"errors"
	"fmt"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Rings is a worker's side of its shared-memory rings and doorbells. It
// belongs to the worker's goroutine: none of its methods may be called
// from two goroutines at once, except Bell.Ring, which wakes the worker.
type Rings struct {
	// Spec is the worker's specification, as the core sent it.
	Spec WorkerSpec
	// Dispatch carries the core's messages; Sched the scheduler's Exec
	// messages (nil when the worker has no scheduler ring); Completion
	// carries the worker's answers.
	Dispatch, Sched, Completion *shm.Ring
	// Bell wakes the worker; CoreBell wakes the core.
	Bell, CoreBell *shm.Bell

	spin   int
	rungAt uint64 // released() when CoreBell last rang for Completed
	posted bool   // a completion was posted since CoreBell last rang
	// sleptFrom and sleptTo bound the sleeps since the last completion
	// posted: the first's start, the last's end; 0 when none.
	sleptFrom, sleptTo int64
	// resched passes the worker through the Go scheduler every few ms
	// of completions (shm.Resched: kernels are cgo calls).
	resched shm.Resched
}

// OpenRings opens the rings and bells spec names in arena a, checking that
// each lies in it. spin is InitRequest.SpinIters: how many polls Idle makes
// before it sleeps.
func OpenRings(a *shm.Arena, spec WorkerSpec, spin int) (*Rings, error) {
	r := &Rings{Spec: spec, spin: spin}
	var err error
	if r.Dispatch, err = openRing(a, spec.Dispatch); err != nil {
		return nil, fmt.Errorf("dispatch ring: %w", err)
	}
	if r.Completion, err = openRing(a, spec.Completion); err != nil {
		return nil, fmt.Errorf("completion ring: %w", err)
	}
	if spec.SchedRing.Size > 0 {
		if r.Sched, err = openRing(a, spec.SchedRing); err != nil {
			return nil, fmt.Errorf("scheduler ring: %w", err)
		}
	}
	if r.Bell, err = a.BellChecked(spec.Bell); err != nil {
		return nil, fmt.Errorf("doorbell: %w", err)
	}
	if r.CoreBell, err = a.BellChecked(spec.CoreBell); err != nil {
		return nil, fmt.Errorf("core doorbell: %w", err)
	}
	// The core tells a task its worker started from one queued behind
	// others by what the worker peeked (core.Task.Status).
	r.Dispatch.PublishPeeks()
	if r.Sched != nil {
		r.Sched.PublishPeeks()
	}
	r.rungAt = r.released()
	return r, nil
}

func openRing(a *shm.Arena, s base.Span) (*shm.Ring, error) {
	mem, err := a.BytesChecked(s)
	if err != nil {
		return nil, err
	}
	return shm.OpenRing(mem)
}

// HasWork reports whether a message waits on the dispatch or scheduler
// ring. It reads only atomics, so it may serve as a Bell.Wait condition.
func (r *Rings) HasWork() bool {
	return !r.Dispatch.Empty() || (r.Sched != nil && !r.Sched.Empty())
}

// Idle sleeps on the worker's bell until ready() (which should include
// HasWork and the driver's stop flag) or timeout, and reports whether
// ready came true. While the worker has no message waiting it counts
// itself urgent on the core's bell: the other workers then ring for each
// completion rather than in batches, since one may release its next task.
// When it slept on the futex (it polled ready spin times in vain), the
// next completion posted says so (wire.Completion.SleepStartNs).
func (r *Rings) Idle(ready func() bool, timeout time.Duration) bool {
	idle := !r.HasWork()
	if idle {
		r.CoreBell.AddUrgent(1)
	}
	// Bell.Wait polls ready spin times, then checks it once more before
	// each sleep on the futex: the first check past the polls that finds
	// nothing is the start of the sleep. The clock is read before that
	// check, so that the sleep's start is a time the rings were seen empty
	// at or after (a worker preempted between the two would otherwise
	// report a sleep starting after work it had not seen had come).
	// Counting costs the polls an increment; the clock is read only
	// around a sleep.
	polls := 0
	var asleep int64
	ok := r.Bell.Wait(func() bool {
		first := false
		if polls++; polls > r.spin && asleep == 0 {
			asleep, first = wire.Now(), true
		}
		if ready() {
			if first {
				asleep = 0 // it did not sleep
			}
			return true
		}
		return false
	}, r.spin, timeout)
	if asleep != 0 {
		if r.sleptTo == 0 {
			r.sleptFrom = asleep
		}
		r.sleptTo = wire.Now()
	}
	if idle {
		r.CoreBell.AddUrgent(-1)
	}
	return ok
}

// Post writes a completion, failed with err's text (cut to wire.MaxErrLen)
// when err is not nil, with the worker's sleeps since the previous one
// (merged with those c gives, if any). It waits for room while alive()
// (nil: for ever); the core reads completions as long as it runs. It does
// not ring: see Completed and Flush.
func (r *Rings) Post(c *wire.Completion, err error, alive func() bool) error {
	if err != nil {
		c.SetErr(err)
	} else if len(c.Err) > wire.MaxErrLen {
		c.SetErr(errors.New(string(c.Err)))
	}
	if r.sleptTo != 0 {
		if c.SleepEndNs == 0 {
			c.SleepStartNs, c.SleepEndNs = r.sleptFrom, r.sleptTo
		} else {
			c.SleepStartNs, c.SleepEndNs = min(c.SleepStartNs, r.sleptFrom), max(c.SleepEndNs, r.sleptTo)
		}
	}
	b, rerr := r.Completion.ReserveWait(wire.CompletionLen(len(c.Err)), alive)
	if rerr != nil {
		return fmt.Errorf("completion ring: %w", rerr)
	}
	c.Encode(b)
	r.Completion.Commit()
	r.posted = true
	// A worker running kernel after kernel never sleeps on its bell,
	// where the other passes through the Go scheduler happen.
	if c.EndNs > 0 {
		r.resched.Tick(c.EndNs)
	}
	r.sleptFrom, r.sleptTo = 0, 0
	return nil
}

// Completed applies the batching rule after a task taken off a ring has
// been posted and released, for drivers that run tasks one at a time.
//
// Each wake-up of the core costs a busy CPU a preemption, and on a machine
// with as many workers as cores nothing else gives the core and the policy
// a CPU. So a worker rings once the tasks it ran since it last rang take as
// many ring bytes as the tasks it has left: the core learns of completions
// in a few batches, each while half the queue remains to refill it. That
// rings for the last queued task, before the worker goes idle, and for each
// task while the core's bell is urgent (an idle worker, a blocked
// application thread). The worker's thread then hands its CPU to the core
// if the ring woke it (shm.Bell.RingHandoff): the engine, and the policy
// it wakes in turn, run between two of the worker's tasks instead of
// waiting for a CPU until a kernel is preempted.
func (r *Rings) Completed() {
	if ran := r.released() - r.rungAt; ran >= r.backlog() || r.CoreBell.Urgent() {
		r.CoreBell.RingHandoff()
		r.rungAt += ran
		r.posted = false
	}
}

// Flush rings the core's bell if a completion was posted since it last
// rang: the rule for drivers that post what their device finished in
// bursts (once per pass of their loop, which then sleeps or goes on).
func (r *Rings) Flush() {
	if r.posted {
		r.posted = false
		r.rungAt = r.released()
		r.CoreBell.Ring()
	}
}

// backlog is how many bytes of messages wait on the worker's rings.
func (r *Rings) backlog() uint64 {
	n := r.Dispatch.Backlog()
	if r.Sched != nil {
		n += r.Sched.Backlog()
	}
	return n
}

// released is how many bytes of messages the worker has taken off its
// rings.
func (r *Rings) released() uint64 {
	n := r.Dispatch.Released()
	if r.Sched != nil {
		n += r.Sched.Released()
	}
	return n
}
