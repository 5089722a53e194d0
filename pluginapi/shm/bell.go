package shm

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// BellSize is the arena space a Bell takes: Carve(BellSize, 64) gives it
// two cache lines of its own.
const BellSize = 128

// Bell word offsets inside its BellSize bytes.
const (
	bellSeqOff      = 0 // uint32: futex word, bumped by every Ring
	bellSleepersOff = 4 // uint32: number of waiters about to sleep or asleep
	// uint32: number of parties asking for prompt rings. A line of its own:
	// idle workers count themselves in and out while the waiter polls seq.
	bellUrgentOff = 64
)

// Linux futex operations. Not the _PRIVATE variants: the word is in a
// MAP_SHARED mapping and the waiter and the waker are different processes.
const (
	futexWait = 0
	futexWake = 1
)

// Bell is a futex doorbell for cross-process wake-up: the side that makes
// something ready (a message in a ring) rings, the side waiting for it waits.
// A sleeper count lets Ring skip the system call when nobody sleeps, which is
// the common case when the waiter is still spinning.
//
// Why no wake-up is lost: a waiter reads seq, announces itself in sleepers,
// re-checks ready() and only then sleeps on "seq unchanged"; a ringer makes
// its condition true, bumps seq, then reads sleepers. All are sync/atomic
// operations, which the Go memory model makes sequentially consistent (on
// amd64 they are LOCK-prefixed or XCHG instructions, which order across
// processes too). So either the ringer sees the sleeper and wakes it (and if
// the waiter had not gone to sleep yet, the futex sees seq changed and
// returns at once), or the waiter's re-check, which comes after its
// announcement and hence after the ringer's read of sleepers, sees the
// condition true.
//
// Producers may also batch: ring once for several messages, as long as they
// ring for the last before they go idle. Urgent tells them when someone
// cannot wait for the batch.
type Bell struct {
	seq      *atomic.Uint32
	sleepers *atomic.Uint32
	urgent   *atomic.Uint32
	// resched: a waiter about to sleep passes through the Go scheduler
	// now and then, since the loops locked to their threads block only
	// here and in cgo calls; epoch is its clock's base (monotonic).
	resched Resched
	epoch   time.Time
}

// Bell is the doorbell at control-region offset off, obtained from
// Carve(BellSize, 64). It returns nil if off is misaligned or outside the
// arena; BellChecked says why.
func (a *Arena) Bell(off uint64) *Bell {
	b, _ := a.BellChecked(off)
	return b
}

// BellChecked is Bell with an error for a bad offset, for offsets that come
// from another process.
func (a *Arena) BellChecked(off uint64) (*Bell, error) {
	if off%8 != 0 {
		return nil, fmt.Errorf("shm: bell at offset %d: not 8-byte aligned", off)
	}
	mem, err := a.BytesChecked(base.Span{Offset: off, Size: BellSize})
	if err != nil {
		return nil, fmt.Errorf("shm: bell at offset %d: %w", off, err)
	}
	return NewBell(mem)
}

// NewBell is a doorbell over mem, which must be at least BellSize bytes,
// 8-byte aligned and shared by the processes that use it (zeroed the first
// time). Arena.Bell is the usual way to get one.
func NewBell(mem []byte) (*Bell, error) {
	if len(mem) < BellSize {
		return nil, fmt.Errorf("shm: bell needs %d bytes, got %d", BellSize, len(mem))
	}
	if !aligned(mem, 8) {
		return nil, errors.New("shm: bell memory not 8-byte aligned")
	}
	return &Bell{seq: atomicU32(mem, bellSeqOff), sleepers: atomicU32(mem, bellSleepersOff), urgent: atomicU32(mem, bellUrgentOff),
		epoch: time.Now()}, nil
}

// Ring wakes the waiters. Call it after making their condition true (after
// Ring.Commit, say). It makes a system call only if someone sleeps or is
// about to.
func (b *Bell) Ring() {
	b.seq.Add(1)
	if b.sleepers.Load() != 0 {
		futex(b.seq, futexWake, math.MaxInt32, nil)
	}
}

// RingHandoff is Ring for a producer whose thread computes and whose
// waiter's work is short: when the ring woke a sleeper, the producer yields
// its CPU, so that the woken thread may run there now.
//
// On a machine with as many busy threads as cores, the woken thread
// otherwise waits for a CPU until the scheduler preempts one of them,
// which Linux's EEVDF does at the end of the running thread's slice
// (about 1.5 ms on two cores) rather than at once, or preempts a thread in
// the middle of its work, which then finds its caches cold. Yielding at the
// producer's own boundary gives the woken thread the CPU between two of
// the producer's tasks, as a worker that schedules for itself would: a CPU
// worker's ring to the core, whose batch the engine turns into the
// worker's next tasks. When a core is idle, the woken thread runs there
// and the yield returns at once. A waiter still polling is not woken and
// nothing yields.
func (b *Bell) RingHandoff() {
	b.seq.Add(1)
	if b.sleepers.Load() != 0 {
		futex(b.seq, futexWake, math.MaxInt32, nil)
		schedYield()
	}
}

// AddUrgent counts a party in (delta 1) or out (delta -1) of those that
// want every message rung at once: an idle worker that batched completions
// could feed, an application thread blocked on one of them.
func (b *Bell) AddUrgent(delta int32) { b.urgent.Add(uint32(delta)) }

// Urgent reports whether a producer should ring for each message now
// rather than at the end of its batch.
func (b *Bell) Urgent() bool { return b.urgent.Load() != 0 }

// Seq is the number of rings so far, modulo 2^32: a waiter that notes it
// before looking for work can wait for "rung since" with ready comparing it.
func (b *Bell) Seq() uint32 { return b.seq.Load() }

// Wait returns true as soon as ready() is true, and false if timeout
// elapses first (timeout <= 0 waits for ever). It polls ready() spin times
// first, pausing the CPU between polls and yielding it every 4 polls so
// that on a small machine the process it waits for gets to run (a PAUSE
// costs ~140 cycles on recent x86: yielding every 64 polls kept a core from
// the awaited thread for microseconds); then it sleeps on
// the futex until rung, re-checking ready() at each wake-up. ready must only
// read shared state through sync/atomic (Ring.Empty does).
//
// Spinning trades CPU for latency: a round trip between two processes that
// go to sleep at once costs several microseconds of system calls and
// scheduling, one caught while spinning a fraction of one.
func (b *Bell) Wait(ready func() bool, spin int, timeout time.Duration) bool {
	if ready == nil {
		return false
	}
	if poll(ready, spin) {
		return true
	}
	return b.sleep(ready, timeout)
}

// poll is Wait's first phase: it reports whether ready() came true within
// spin polls.
func poll(ready func() bool, spin int) bool {
	for i := 0; i < spin; i++ {
		if ready() {
			return true
		}
		if i&3 == 3 {
			schedYield()
		} else {
			cpuPause()
		}
	}
	return false
}

// sleep is Wait's second phase.
func (b *Bell) sleep(ready func() bool, timeout time.Duration) bool {
	now := time.Now()
	b.resched.Tick(int64(now.Sub(b.epoch)))
	var deadline time.Time
	if timeout > 0 {
		deadline = now.Add(timeout)
	}
	for {
		seq := b.seq.Load()
		b.sleepers.Add(1)
		if ready() {
			b.sleepers.Add(^uint32(0))
			return true
		}
		var ts *unix.Timespec
		if timeout > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				b.sleepers.Add(^uint32(0))
				return false
			}
			t := unix.NsecToTimespec(left.Nanoseconds())
			ts = &t
		}
		// EAGAIN (rung meanwhile), EINTR and ETIMEDOUT all lead to the
		// same re-check.
		futex(b.seq, futexWait, seq, ts)
		b.sleepers.Add(^uint32(0))
		if ready() {
			return true
		}
	}
}

// ShortWait is the mean wait below which a Spinner polls: polling pays when
// the wait is shorter than a few cross-process sleep and wake-up round
// trips.
const ShortWait = 20 * time.Microsecond

// Spinner chooses whether a waiter polls before it sleeps from how long its
// recent waits lasted. Polling only pays when the wait is shorter than a
// sleep and wake-up; a waiter whose events come far apart (a busy machine
// batching them) would instead keep taking the CPU from the threads it
// waits for, as each yield hands the core over and back.
type Spinner struct {
	// Spin is how many polls a waiter makes when its recent waits were
	// short.
	Spin int
	// meanNs averages the recent waits, each counted at most longWait:
	// one stretched by a preemption must not stop the polling of a waiter
	// whose waits are short.
	meanNs float64
}

// Wait is b.Wait with the spin s chooses: s.Spin polls while the waits of
// late were shorter than ShortWait on average, none otherwise. A wait that
// ends while polling reads no clock.
func (s *Spinner) Wait(b *Bell, ready func() bool, timeout time.Duration) bool {
	if ready == nil {
		return false
	}
	spin := s.polls()
	if poll(ready, spin) {
		s.observe(0)
		return true
	}
	if spin > 0 {
		s.observe(longWait) // polling failed: this wait was not short
		return b.sleep(ready, timeout)
	}
	start := time.Now()
	ok := b.sleep(ready, timeout)
	s.observe(float64(time.Since(start)))
	return ok
}

func (s *Spinner) polls() int {
	if s.meanNs > float64(ShortWait) {
		return 0
	}
	return s.Spin
}

// longWait is what one wait counts for at most.
const longWait = 4 * float64(ShortWait)

func (s *Spinner) observe(ns float64) {
	s.meanNs += (min(ns, longWait) - s.meanNs) / 4
}

// futex is the raw system call. Its errors are not reported: every caller
// re-checks its condition whatever happened.
func futex(word *atomic.Uint32, op int, val uint32, ts *unix.Timespec) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), uintptr(op), uintptr(val),
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// schedYield gives the CPU to another runnable thread, possibly of another
// process; x/sys/unix has no wrapper. Raw, as the runtime's own osyield: the
// call does not block, so there is no point handing the P off.
func schedYield() {
	unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
