package mpib

// The progression goroutine: the one goroutine that calls MPI.

import (
	"errors"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ErrCancelled is the error of a request that Cancel or Finalize
// cancelled before it matched.
var ErrCancelled = errors.New("mpi: request cancelled")

// run is the progression goroutine: it initialises MPI on its locked
// thread, then runs the queued work and tests the requests in flight
// until Finalize stops it. While requests are in flight it spins, then
// sleeps between tests (Options); with none it sleeps until work comes.
// Its sleeps are ppoll on an eventfd that submissions write, with the
// thread's timer slack at 1 ns: Go's own timers would round a sleep of a
// few microseconds up to a millisecond.
func (c *Comm) run(ready chan<- error) {
	defer close(c.exited)
	defer unix.Close(c.wakefd)
	// Never unlocked: the thread MPI was initialised on ends with this
	// goroutine, and no other goroutine ever runs on it.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if err := c.initMPI(); err != nil {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		ready <- err
		return
	}
	ready <- nil
	idle, sleep, lastDone := 0, time.Microsecond, time.Now()
	c.epoch = lastDone
	for pass := 0; !c.quit(); pass++ {
		if pass%16 == 0 {
			c.resched.Tick(int64(time.Since(c.epoch)))
		}
		worked := c.drain()
		if c.quit() {
			break
		}
		if worked || c.testsome() > 0 {
			idle, sleep, lastDone = 0, time.Microsecond, time.Now()
			continue
		}
		// Spin a while first: the next request often follows at once.
		if idle++; idle < c.opt.SpinPolls {
			continue
		}
		if len(c.inflight) == 0 {
			c.sleep(-1)
			idle, sleep = 0, time.Microsecond
			continue
		}
		if c.sleep(sleep) {
			idle, sleep = 0, time.Microsecond
			continue
		}
		limit := c.opt.MaxSleep
		if time.Since(lastDone) > c.opt.IdleAfter {
			limit = c.opt.IdleSleep
		}
		sleep = min(2*sleep, limit)
	}
	// Nothing is queued after stop: fail what was queued before.
	c.drain()
	for _, r := range c.inflight {
		r.slot = -1
		c.complete(r, ErrFinalized)
	}
	c.inflight = nil
	c.table.free()
}

// sleep waits for d (forever when negative) or until a submission wakes
// it; it tells whether one did.
func (c *Comm) sleep(d time.Duration) bool {
	c.sleeping.Store(true)
	defer c.sleeping.Store(false)
	c.mu.Lock()
	queued := len(c.queue) > 0 || c.stopped
	c.mu.Unlock()
	if queued {
		return true
	}
	c.resched.Tick(int64(time.Since(c.epoch)))
	var ts *unix.Timespec
	if d >= 0 {
		t := unix.NsecToTimespec(d.Nanoseconds())
		ts = &t
	}
	fds := []unix.PollFd{{Fd: int32(c.wakefd), Events: unix.POLLIN}}
	n, err := unix.Ppoll(fds, ts, nil)
	if err != nil || n == 0 {
		return false
	}
	var buf [8]byte
	_, _ = unix.Read(c.wakefd, buf[:])
	return true
}

// wakeUp wakes the progression goroutine from sleep.
func (c *Comm) wakeUp() {
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(c.wakefd, one[:])
}

// quit tells whether stop was called.
func (c *Comm) quit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// stop makes the progression goroutine return after the work at hand;
// later submissions fail with ErrFinalized.
func (c *Comm) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// drain runs the queued work; it tells whether there was any.
func (c *Comm) drain() bool {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, f := range q {
		f()
	}
	return len(q) > 0
}

// start makes the MPI call that starts r into a new slot of the request
// table; an error completes r at once.
func (c *Comm) start(r *Request, call func(q *cRequest) cint) {
	if c.finalized {
		c.complete(r, ErrFinalized)
		return
	}
	n := len(c.inflight)
	c.table.grow(n + 1)
	if rc := call(c.table.reqAt(n)); rc != 0 {
		c.complete(r, mpiErrorCode(r.String(), rc))
		return
	}
	r.slot = n
	c.inflight = append(c.inflight, r)
	if r.cancel {
		c.cancel(r)
	}
}

// complete ends r with err: its finish, its callback, then its channel.
func (c *Comm) complete(r *Request, err error) {
	r.err = err
	if r.finish != nil {
		r.finish()
		r.finish = nil
	}
	if r.onDone != nil {
		r.onDone(r.st, err)
	}
	close(r.done)
}

// exit ends the process; Abort's last resort.
func exit(code int) { os.Exit(code) }
