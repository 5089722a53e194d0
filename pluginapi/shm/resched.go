package shm

import (
	"runtime"
	"sync/atomic"
)

// ReschedEvery is how often a Resched passes its goroutine through the Go
// scheduler: well under the 10 ms after which the runtime's sysmon thread
// counts a goroutine that has not been rescheduled as running too long.
const ReschedEvery = 4_000_000 // ns

// Resched keeps a goroutine that never parks in the Go scheduler's view of
// the living.
//
// The runtime's sysmon thread checks every P at intervals of 20 µs to
// 10 ms. A P whose goroutine has kept the same scheduling tick for 10 ms
// and sits in a system call or a cgo call is taken back from it, and each
// time sysmon takes one it starts over at 20 µs. The loops this project
// locks to their threads (the engine, a policy host, a driver's workers)
// never park: they block in futex calls and run kernels in cgo calls, so
// their tick never moves, and past the first 10 ms sysmon takes their P
// at nearly every visit and never slows down. On a machine with as many
// busy workers as cores each visit preempts a kernel: in the 250 ms of a
// Cholesky 4096/32 factorisation on two cores, the sysmon threads of the
// driver, the policy and the application woke 765, 651 and 764 times, and
// 86, 98 and 331 times with this (docs/design/hot-path.md).
//
// runtime.Gosched gives the P a new tick. For a goroutine locked to its
// thread it costs two thread hand-offs (20 to 40 µs on the 2-core
// development machine, BenchmarkGoschedLocked), hence once every
// ReschedEvery at most: under 1% of the loop's time. Rejected: a higher GOMAXPROCS (sysmon takes a P
// whose tick is stale whatever the idle Ps) and the goroutine parking on a
// channel now and then (the same hand-offs, and a second goroutine).
//
// The zero Resched is ready. It is meant for one goroutine; several may
// share one safely (a Bell with several waiters), and then a pass serves
// whichever of them was due to make it.
type Resched struct {
	last atomic.Int64
}

// Tick passes the calling goroutine through the scheduler if ReschedEvery
// has gone by since the last time, and reports whether it did. now is a
// monotonic time in ns on a base of the caller's choosing, the same at
// every call; a now before the last one (completions posted out of the
// order they ended in) is not due.
func (r *Resched) Tick(now int64) bool {
	if now-r.last.Load() < ReschedEvery {
		return false
	}
	r.last.Store(now)
	runtime.Gosched()
	return true
}
