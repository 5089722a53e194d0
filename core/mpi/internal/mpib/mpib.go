// Package mpib is a small cgo binding over OpenMPI: the calls the
// runtime's MPI layer (package core/mpi) needs and nothing more.
//
// Every MPI call is made by one progression goroutine, locked to its OS
// thread for its whole life: MPI is initialised there (thread level
// SERIALIZED or better is required, so that this thread need not be the
// process's main thread), and other goroutines hand it work through a
// queue and get completions back (a channel per Request, and an optional
// callback run on the progression goroutine). Point-to-point transfers
// work on raw memory given as an address and a length: the runtime's
// buffers live in the shared-memory arena, outside the Go heap, so MPI
// reads and writes them in place. Never give it Go heap memory: the
// collector may move or free it while MPI still uses it.
//
// Collectives (Barrier, Allreduce, Allgather) are the non-blocking MPI-3
// forms, so the progression goroutine keeps completing transfers while
// one is under way; their small buffers are C memory the binding
// allocates.
package mpib

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/shm"
)

// ErrMPI is wrapped by every error an MPI call returned.
var ErrMPI = errors.New("mpi")

// ErrTruncated is wrapped, with ErrMPI, by the error of a receive whose
// message was larger than its buffer (MPI's error class MPI_ERR_TRUNCATE).
var ErrTruncated = errors.New("mpi: message truncated")

// ErrFinalized is returned by calls made after Finalize (or after the
// progression goroutine stopped).
var ErrFinalized = errors.New("mpi: finalized")

// ErrThreadLevel is returned by Init when the MPI library cannot give
// MPI_THREAD_SERIALIZED or better.
var ErrThreadLevel = errors.New("mpi: thread level")

// AnySource and AnyTag are MPI_ANY_SOURCE and MPI_ANY_TAG, for Irecv and
// Iprobe.
const (
	AnySource = -1
	AnyTag    = -1
)

// ThreadLevel is an MPI thread support level.
type ThreadLevel int

// The MPI thread levels, in increasing order.
const (
	ThreadSingle ThreadLevel = iota
	ThreadFunneled
	ThreadSerialized
	ThreadMultiple
)

// String is the level's MPI name.
func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}

// Op is a reduction operation of Allreduce.
type Op int

// The reduction operations.
const (
	Sum Op = iota
	Max
	Min
)

// Options tunes the progression goroutine.
type Options struct {
	// SpinPolls is how many times in a row the progression goroutine
	// tests the requests in flight (or looks for new ones) before it
	// starts sleeping; 0 means 100. Spinning longer lowers latency on a
	// machine with cores to spare and raises it on a busy one: on 2 cores
	// with 2 ranks, 8-byte handle ping-pong took 175 us one way with 50,
	// 460 us with 2000, 670 us with 20000 (docs/design/mpi.md).
	SpinPolls int
	// MaxSleep caps the sleep between two tests once spinning is over
	// (it doubles from 1 µs up to this); 0 means 100 µs. After IdleAfter
	// (0: 50 ms) without a completion, the sleep grows up to IdleSleep
	// (0: 1 ms). A new request wakes the goroutine at once.
	MaxSleep, IdleAfter, IdleSleep time.Duration
}

// Status describes a completed request or a probed message.
type Status struct {
	// Source and Tag are the message's envelope; Count its size in
	// bytes.
	Source, Tag, Count int
	// Cancelled is set when the request was cancelled before it matched.
	Cancelled bool
}

// Request is a non-blocking operation in flight.
type Request struct {
	what      string
	peer      int
	tag       int
	done      chan struct{}
	st        Status
	err       error
	onDone    func(Status, error)
	finish    func() // run on the progression goroutine before done closes
	slot      int    // index in the request table; -1 when not in flight
	cancel    bool   // cancellation asked
	cancelled bool   // MPI_Cancel called
	internal  bool
}

// Done is closed when the request completes.
func (r *Request) Done() <-chan struct{} { return r.done }

// Test reports, without blocking, whether the request completed, and if
// so its status and error (MPI_Test).
func (r *Request) Test() (bool, Status, error) {
	select {
	case <-r.done:
		return true, r.st, r.err
	default:
		return false, Status{}, nil
	}
}

// Wait blocks until the request completes or ctx ends (MPI_Wait); a
// request abandoned by ctx stays in flight.
func (r *Request) Wait(ctx context.Context) (Status, error) {
	select {
	case <-r.done:
		return r.st, r.err
	case <-ctx.Done():
		return Status{}, fmt.Errorf("%s: %w", r, ctx.Err())
	}
}

// String says what the request is: its kind, peer and tag.
func (r *Request) String() string {
	switch r.what {
	case "isend":
		return fmt.Sprintf("isend to rank %d, tag %d", r.peer, r.tag)
	case "irecv":
		if r.peer == AnySource {
			return fmt.Sprintf("irecv from any rank, tag %d", r.tag)
		}
		return fmt.Sprintf("irecv from rank %d, tag %d", r.peer, r.tag)
	}
	return r.what
}

// Testsome returns the indices of the requests of reqs that completed
// (MPI_Testsome); nil entries are skipped.
func Testsome(reqs []*Request) []int {
	var out []int
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if ok, _, _ := r.Test(); ok {
			out = append(out, i)
		}
	}
	return out
}

// Comm is MPI_COMM_WORLD of an initialised MPI, and the progression
// goroutine that makes every call on it. A process has at most one: MPI
// can be initialised once per process.
type Comm struct {
	rank, size, tagUB int
	level             ThreadLevel
	opt               Options

	// mu guards queue and stopped. When sleeping is set, the progression
	// goroutine sleeps (or is about to) in ppoll on the eventfd wakefd,
	// which a submission then writes.
	mu       sync.Mutex
	queue    []func()
	stopped  bool
	sleeping atomic.Bool
	wakefd   int
	// exited is closed when the progression goroutine returns.
	exited chan struct{}
	// aborting is set by Abort before it queues MPI_Abort.
	abortOnce sync.Once

	// Owned by the progression goroutine.
	table     reqTable
	inflight  []*Request
	finalized bool
	// resched passes the progression goroutine through the Go scheduler
	// every few ms: it is locked to its thread and blocks only in cgo and
	// system calls (shm.Resched says what sysmon does otherwise), on
	// a monotonic clock from epoch.
	resched shm.Resched
	epoch   time.Time
}

// Init initialises MPI on a new progression goroutine, with thread level
// MPI_THREAD_SERIALIZED (an error wrapping ErrThreadLevel when the library
// gives less), and returns the world communicator. It must be called once
// per process, by a program started by mpirun (or as a singleton).
func Init(opt Options) (*Comm, error) {
	if opt.SpinPolls <= 0 {
		opt.SpinPolls = 100
	}
	if opt.MaxSleep <= 0 {
		opt.MaxSleep = 100 * time.Microsecond
	}
	if opt.IdleAfter <= 0 {
		opt.IdleAfter = 50 * time.Millisecond
	}
	if opt.IdleSleep <= 0 {
		opt.IdleSleep = time.Millisecond
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("%w: eventfd: %w", ErrMPI, err)
	}
	c := &Comm{opt: opt, wakefd: fd, exited: make(chan struct{})}
	ready := make(chan error, 1)
	go c.run(ready)
	if err := <-ready; err != nil {
		<-c.exited
		return nil, err
	}
	return c, nil
}

// Rank is this process's rank in MPI_COMM_WORLD.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks of MPI_COMM_WORLD.
func (c *Comm) Size() int { return c.size }

// TagUB is the largest tag MPI accepts (MPI_TAG_UB).
func (c *Comm) TagUB() int { return c.tagUB }

// ThreadLevel is the thread level MPI provided.
func (c *Comm) ThreadLevel() ThreadLevel { return c.level }

// submit queues f for the progression goroutine.
func (c *Comm) submit(f func()) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return ErrFinalized
	}
	c.queue = append(c.queue, f)
	c.mu.Unlock()
	if c.sleeping.Load() {
		c.wakeUp()
	}
	return nil
}

// call runs f on the progression goroutine and waits for it.
func (c *Comm) call(f func()) error {
	done := make(chan struct{})
	if err := c.submit(func() { f(); close(done) }); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-c.exited:
		select {
		case <-done:
			return nil
		default:
			return ErrFinalized
		}
	}
}

func (c *Comm) checkPeer(what string, peer int, any bool) error {
	if peer == AnySource && any {
		return nil
	}
	if peer < 0 || peer >= c.size {
		return fmt.Errorf("%w: %s: rank %d out of range (%d ranks)", ErrMPI, what, peer, c.size)
	}
	return nil
}

func (c *Comm) checkTag(what string, tag int, any bool) error {
	if tag == AnyTag && any {
		return nil
	}
	if tag < 0 || tag > c.tagUB {
		return fmt.Errorf("%w: %s: tag %d out of range (0 to MPI_TAG_UB = %d)", ErrMPI, what, tag, c.tagUB)
	}
	return nil
}

// maxCount is the largest message, in bytes: MPI counts are C ints.
const maxCount = 1<<31 - 1

func checkBuf(what string, buf unsafe.Pointer, n int) error {
	if n < 0 || n > maxCount {
		return fmt.Errorf("%w: %s: %d bytes: a message holds 0 to %d bytes", ErrMPI, what, n, maxCount)
	}
	if n > 0 && buf == nil {
		return fmt.Errorf("%w: %s: nil buffer for %d bytes", ErrMPI, what, n)
	}
	return nil
}

// Isend starts sending the n bytes at buf to rank dest with tag
// (MPI_Isend). buf must stay valid and unchanged until the request
// completes, and must not be Go heap memory. done, when not nil, runs on
// the progression goroutine once the request completes, with what Test
// would return: it must be short and must not block (it may start other
// requests).
func (c *Comm) Isend(buf unsafe.Pointer, n, dest, tag int, done func(Status, error)) (*Request, error) {
	if err := c.checkPeer("isend", dest, false); err != nil {
		return nil, err
	}
	if err := c.checkTag("isend", tag, false); err != nil {
		return nil, err
	}
	if err := checkBuf("isend", buf, n); err != nil {
		return nil, err
	}
	r := c.newRequest("isend", dest, tag, done)
	err := c.submit(func() {
		c.start(r, func(q *cRequest) cint { return isend(buf, n, dest, tag, q) })
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Irecv starts receiving at most n bytes from rank src (or AnySource)
// with tag (or AnyTag) into buf (MPI_Irecv); the status's Count says how
// many came. buf must stay valid until the request completes, and must
// not be Go heap memory. done is as for Isend.
func (c *Comm) Irecv(buf unsafe.Pointer, n, src, tag int, done func(Status, error)) (*Request, error) {
	if err := c.checkPeer("irecv", src, true); err != nil {
		return nil, err
	}
	if err := c.checkTag("irecv", tag, true); err != nil {
		return nil, err
	}
	if err := checkBuf("irecv", buf, n); err != nil {
		return nil, err
	}
	r := c.newRequest("irecv", src, tag, done)
	err := c.submit(func() {
		c.start(r, func(q *cRequest) cint { return irecv(buf, n, src, tag, q) })
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Run is a contiguous range of a message in memory: Len bytes at Off
// bytes from the buffer's address.
type Run struct{ Off, Len int }

// checkRuns checks runs and returns their total length.
func checkRuns(what string, buf unsafe.Pointer, runs []Run) (int, error) {
	total := 0
	for i, r := range runs {
		if r.Off < 0 || r.Len < 0 || r.Len > maxCount {
			return 0, fmt.Errorf("%w: %s: run %d (%d bytes at %d) is invalid", ErrMPI, what, i, r.Len, r.Off)
		}
		total += r.Len
	}
	if err := checkBuf(what, buf, total); err != nil {
		return 0, err
	}
	return total, nil
}

// Isendv is Isend of a message made of runs of memory from buf, sent as
// one message of their total length (an hindexed MPI datatype): how a
// strided matrix goes without being packed first.
func (c *Comm) Isendv(buf unsafe.Pointer, runs []Run, dest, tag int, done func(Status, error)) (*Request, error) {
	if len(runs) == 1 {
		return c.Isend(unsafe.Add(buf, runs[0].Off), runs[0].Len, dest, tag, done)
	}
	if err := c.checkPeer("isend", dest, false); err != nil {
		return nil, err
	}
	if err := c.checkTag("isend", tag, false); err != nil {
		return nil, err
	}
	if _, err := checkRuns("isend", buf, runs); err != nil {
		return nil, err
	}
	runs = append([]Run(nil), runs...)
	r := c.newRequest("isend", dest, tag, done)
	err := c.submit(func() {
		c.start(r, func(q *cRequest) cint { return isendv(buf, runs, dest, tag, q) })
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Irecvv is Irecv into runs of memory from buf, filled in order from
// one message; Status.Count is the bytes received.
func (c *Comm) Irecvv(buf unsafe.Pointer, runs []Run, src, tag int, done func(Status, error)) (*Request, error) {
	if len(runs) == 1 {
		return c.Irecv(unsafe.Add(buf, runs[0].Off), runs[0].Len, src, tag, done)
	}
	if err := c.checkPeer("irecv", src, true); err != nil {
		return nil, err
	}
	if err := c.checkTag("irecv", tag, true); err != nil {
		return nil, err
	}
	if _, err := checkRuns("irecv", buf, runs); err != nil {
		return nil, err
	}
	runs = append([]Run(nil), runs...)
	r := c.newRequest("irecv", src, tag, done)
	err := c.submit(func() {
		c.start(r, func(q *cRequest) cint { return irecvv(buf, runs, src, tag, q) })
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Cancel asks MPI to cancel r (MPI_Cancel); r then completes, with
// Status.Cancelled set if the cancellation won. It may be called more
// than once; collectives cannot be cancelled: it leaves them alone.
func (c *Comm) Cancel(r *Request) error {
	return c.submit(func() {
		r.cancel = true
		if r.slot >= 0 {
			c.cancel(r)
		}
	})
}

// Iprobe tells whether a message from src (or AnySource) with tag (or
// AnyTag) can be received, and its envelope (MPI_Iprobe).
func (c *Comm) Iprobe(src, tag int) (bool, Status, error) {
	if err := c.checkPeer("iprobe", src, true); err != nil {
		return false, Status{}, err
	}
	if err := c.checkTag("iprobe", tag, true); err != nil {
		return false, Status{}, err
	}
	var (
		ok  bool
		st  Status
		err error
	)
	if cerr := c.call(func() { ok, st, err = iprobe(src, tag) }); cerr != nil {
		return false, Status{}, cerr
	}
	return ok, st, err
}

// Barrier waits until every rank called Barrier (MPI_Ibarrier, waited
// for), or ctx ends.
func (c *Comm) Barrier(ctx context.Context) error {
	r := c.newRequest("barrier", -1, -1, nil)
	if err := c.submit(func() { c.start(r, ibarrier) }); err != nil {
		return err
	}
	_, err := r.Wait(ctx)
	return err
}

// Allreduce combines vals element-wise over every rank with op and
// returns the result, the same on every rank (MPI_Iallreduce on 64-bit
// integers, waited for); every rank must give as many values. Used for
// termination detection.
func (c *Comm) Allreduce(ctx context.Context, vals []int64, op Op) ([]int64, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	if op < Sum || op > Min {
		return nil, fmt.Errorf("%w: allreduce: unknown op %d", ErrMPI, op)
	}
	out := make([]int64, len(vals))
	r := c.newRequest("allreduce", -1, -1, nil)
	in := append([]int64(nil), vals...)
	if err := c.submit(func() { c.startAllreduce(r, in, out, op) }); err != nil {
		return nil, err
	}
	if _, err := r.Wait(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// Allgather gives every rank the bytes b of every rank, in rank order
// (MPI_Iallgather, waited for); every rank must give as many bytes.
func (c *Comm) Allgather(ctx context.Context, b []byte) ([][]byte, error) {
	if len(b) == 0 || len(b) > maxCount/max(c.size, 1) {
		return nil, fmt.Errorf("%w: allgather of %d bytes", ErrMPI, len(b))
	}
	out := make([]byte, len(b)*c.size)
	r := c.newRequest("allgather", -1, -1, nil)
	in := append([]byte(nil), b...)
	if err := c.submit(func() { c.startAllgather(r, in, out) }); err != nil {
		return nil, err
	}
	if _, err := r.Wait(ctx); err != nil {
		return nil, err
	}
	res := make([][]byte, c.size)
	for i := range res {
		res[i] = out[i*len(b) : (i+1)*len(b)]
	}
	return res, nil
}

// Abort ends every rank of the job with code (MPI_Abort). It does not
// return; if the progression goroutine cannot make the call within a
// second, the process exits with code.
func (c *Comm) Abort(code int) {
	c.abortOnce.Do(func() {
		_ = c.submit(func() { abort(code) })
	})
	select {
	case <-c.exited:
	case <-time.After(time.Second):
	}
	exit(code)
}

// Finalize ends MPI (MPI_Finalize) and stops the progression goroutine.
// Point-to-point requests still in flight are cancelled first and named
// in the error; ctx bounds how long their cancellation is waited for.
// Collectives still in flight (abandoned by their caller: a rank never
// joined) cannot be cancelled: MPI is finalized over them, and they end
// with ErrFinalized.
func (c *Comm) Finalize(ctx context.Context) error {
	var errs []error
	if err := c.call(func() {
		for _, r := range c.inflight {
			if r.collective() {
				errs = append(errs, fmt.Errorf("%w: finalize with a %s never completed", ErrMPI, r))
				continue
			}
			if !r.internal {
				errs = append(errs, fmt.Errorf("%w: finalize with %s still in flight: cancelled", ErrMPI, r))
			}
			c.cancel(r)
		}
	}); err != nil {
		return err
	}
	deadline, hasDeadline := ctx.Deadline()
	fin := make(chan error, 1)
	if err := c.submit(func() {
		// Wait for the cancelled requests, with the deadline.
		for c.p2pInFlight() > 0 && (!hasDeadline || time.Now().Before(deadline)) {
			c.testsome()
		}
		if n := c.p2pInFlight(); n > 0 {
			fin <- fmt.Errorf("%w: finalize: %d requests would not cancel; MPI_Finalize skipped", ErrMPI, n)
			c.stop()
			return
		}
		fin <- finalize()
		c.finalized = true
		c.stop()
	}); err != nil {
		return err
	}
	select {
	case err := <-fin:
		if err != nil {
			errs = append(errs, err)
		}
	case <-c.exited:
		errs = append(errs, ErrFinalized)
	}
	<-c.exited
	return errors.Join(errs...)
}

// p2pInFlight counts the point-to-point requests in flight.
func (c *Comm) p2pInFlight() int {
	n := 0
	for _, r := range c.inflight {
		if !r.collective() {
			n++
		}
	}
	return n
}

func (r *Request) collective() bool { return r.what != "isend" && r.what != "irecv" }

func (c *Comm) newRequest(what string, peer, tag int, done func(Status, error)) *Request {
	return &Request{what: what, peer: peer, tag: tag, done: make(chan struct{}), onDone: done, slot: -1}
}
