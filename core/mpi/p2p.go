package mpi

// Transfers of handles: detached and waitable sends and receives.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/mpi/internal/mpib"
)

// peer is what this rank knows of another. Guarded by Comm.mu.
type peer struct {
	rank int
	// Data messages completed, and their bytes (the statistics).
	sentMsgs, sentBytes, recvMsgs, recvBytes int64
	// pendRecv counts the receives from this peer not yet completed.
	pendRecv int
	// bye is set once the peer said goodbye (it is in Shutdown, its
	// transfers all complete); byeSent and byeRecvd are the data messages
	// it sent to this rank and received from it, by its count, byeColls
	// the collectives it took part in.
	bye                         bool
	byeSent, byeRecvd, byeColls int64
	// gone, once set, fails every transfer with the peer; dead says the
	// peer's process is gone.
	gone error
	dead bool
}

// xfer is one transfer of a handle between this rank and a peer: the
// handle is acquired (R to send, W to receive: ordered with the tasks like
// any access), its RAM replicate handed to MPI, and released when MPI is
// done with it.
type xfer struct {
	c    *Comm
	send bool
	h    *core.Handle
	// base is h's RAM replicate, taken when the transfer is made: h may
	// be unregistered (Handle.Unregister waits for the transfer) before
	// it is granted.
	base unsafe.Pointer
	peer int
	tag  int
	cb   func(error)
	// detached transfers report their failure to WaitForAll and
	// Shutdown; the others to Request.Wait.
	detached bool
	done     chan struct{}
	err      error
	once     sync.Once

	// Guarded by c.mu: the MPI request once posted, the bytes it moves,
	// whether the handle is held, and why the transfer must fail.
	req    *mpib.Request
	posted bool
	held   bool
	size   int
	reason error
	// postedAt is when MPI got the request: the start of the
	// communication in the trace.
	postedAt time.Time
}

// String says what the transfer is, for errors.
func (x *xfer) String() string {
	if x.send {
		return fmt.Sprintf("send of %s to rank %d (tag %d)", x.h, x.peer, x.tag)
	}
	return fmt.Sprintf("receive of %s from rank %d (tag %d)", x.h, x.peer, x.tag)
}

// Request is a transfer in flight (StarPU's starpu_mpi_req).
type Request struct{ x *xfer }

// Wait waits for the transfer and returns its error (StarPU's
// starpu_mpi_wait).
func (r *Request) Wait() error {
	<-r.x.done
	return r.x.err
}

// Test tells, without blocking, whether the transfer is over, and its
// error if so (StarPU's starpu_mpi_test).
func (r *Request) Test() (bool, error) {
	select {
	case <-r.x.done:
		return true, r.x.err
	default:
		return false, nil
	}
}

// Done is closed when the transfer is over.
func (r *Request) Done() <-chan struct{} { return r.x.done }

// Isend sends h to rank dest with tag (StarPU's starpu_mpi_isend): once
// the tasks submitted before that write h are over, h's RAM replicate
// goes to MPI as it is; tasks submitted after that write h wait for the
// send to complete. The receiving rank posts a matching Irecv (or Recv).
func (c *Comm) Isend(h *core.Handle, dest int, tag int64) (*Request, error) {
	x, err := c.transfer(true, h, dest, tag, false, nil, nil)
	if err != nil {
		return nil, err
	}
	return &Request{x}, nil
}

// Irecv receives h from rank src with tag (StarPU's starpu_mpi_irecv):
// once the tasks submitted before that access h are over, the message
// lands straight in h's RAM replicate; tasks submitted after that access
// h wait for it. The message must have h's size: a different one is an
// error wrapping ErrGraphMismatch.
func (c *Comm) Irecv(h *core.Handle, src int, tag int64) (*Request, error) {
	x, err := c.transfer(false, h, src, tag, false, nil, nil)
	if err != nil {
		return nil, err
	}
	return &Request{x}, nil
}

// IsendDetached is Isend whose completion calls cb with its error instead
// of being waited for (StarPU's starpu_mpi_isend_detached); cb may be nil.
// cb runs on a goroutine of its own once h is released: it must not
// wait for WaitForAll, which waits for it. A failure is also returned by
// the next WaitForAll (or Shutdown).
func (c *Comm) IsendDetached(h *core.Handle, dest int, tag int64, cb func(error)) error {
	_, err := c.transfer(true, h, dest, tag, true, cb, nil)
	return err
}

// IrecvDetached is Irecv whose completion calls cb (StarPU's
// starpu_mpi_irecv_detached); see IsendDetached.
func (c *Comm) IrecvDetached(h *core.Handle, src int, tag int64, cb func(error)) error {
	_, err := c.transfer(false, h, src, tag, true, cb, nil)
	return err
}

// Send is Isend waited for (StarPU's starpu_mpi_send). Do not call it
// from a task callback: the send waits for tasks.
func (c *Comm) Send(h *core.Handle, dest int, tag int64) error {
	r, err := c.Isend(h, dest, tag)
	if err != nil {
		return err
	}
	return r.Wait()
}

// Recv is Irecv waited for (StarPU's starpu_mpi_recv). Do not call it
// from a task callback.
func (c *Comm) Recv(h *core.Handle, src int, tag int64) error {
	r, err := c.Irecv(h, src, tag)
	if err != nil {
		return err
	}
	return r.Wait()
}

// GetDataOnNode brings h's current value to rank node from its owner,
// unless node holds it already (StarPU's starpu_mpi_get_data_on_node),
// and waits for it. At least the owner and node must call it, at the same
// point of the graph; on other ranks it does nothing. REDUX contributions
// to h not yet reduced are reduced first (Redux): the ranks that
// contributed must then call it too.
func (c *Comm) GetDataOnNode(h *core.Handle, node int) error {
	if node < 0 || node >= c.size {
		return fmt.Errorf("mpi: get %s on rank %d: rank out of range (%d ranks)", h, node, c.size)
	}
	d, err := c.lookup(h)
	if err != nil {
		return fmt.Errorf("mpi: get data on rank %d: %w", node, err)
	}
	if c.pending(d) {
		if err := c.reduce(d); err != nil {
			return fmt.Errorf("mpi: get data on rank %d: %w", node, err)
		}
	}
	var r *Request
	switch {
	case d.owner == node:
		return nil
	case c.rank == d.owner:
		if !c.cacheSend(d, node) {
			return nil
		}
		r, err = c.Isend(h, node, d.tag)
	case c.rank == node:
		if !c.cacheRecv(d) {
			return nil
		}
		r, err = c.Irecv(h, d.owner, d.tag)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	return r.Wait()
}

// cacheSend says whether the owner must send d to rank to, and records
// that it did.
func (c *Comm) cacheSend(d *datum, to int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache && d.sent[to] {
		return false
	}
	d.sent[to] = c.cache
	return true
}

// cacheRecv says whether this rank must receive d, and records that it
// did.
func (c *Comm) cacheRecv(d *datum) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache && d.received {
		return false
	}
	d.received = c.cache
	return true
}

// transfer starts a send or receive of h with rank peer. With gate set,
// the MPI request is posted only once the tasks and transfers submitted
// before that write gate are over too (see gated).
func (c *Comm) transfer(send bool, h *core.Handle, peerRank int, tag int64, detached bool, cb func(error), gate *core.Handle) (*xfer, error) {
	what := "isend"
	if !send {
		what = "irecv"
	}
	if h == nil {
		return nil, fmt.Errorf("mpi: %s: nil handle", what)
	}
	if peerRank < 0 || peerRank >= c.size {
		return nil, fmt.Errorf("mpi: %s %s: rank %d out of range (%d ranks)", what, h, peerRank, c.size)
	}
	if tag < 0 || tag > c.TagMax() {
		return nil, fmt.Errorf("mpi: %s %s: tag %d out of range (0 to %d)", what, h, tag, c.TagMax())
	}
	base := h.LocalPointer()
	if base == nil && h.Size() > 0 {
		return nil, fmt.Errorf("mpi: %s %s: %w", what, h, core.ErrUnregistered)
	}
	x := &xfer{c: c, send: send, h: h, base: base, peer: peerRank, tag: int(tag), cb: cb, detached: detached, done: make(chan struct{})}
	c.mu.Lock()
	if err := c.usable(); err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("mpi: %s: %w", x, err)
	}
	if c.failErr != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("mpi: %s: %w", x, c.failErr)
	}
	if err := c.blocked(x); err != nil {
		c.mu.Unlock()
		// A run that needs a rank that is gone cannot finish.
		c.fail(err, true)
		return nil, fmt.Errorf("mpi: %s: %w", x, err)
	}
	c.track(x)
	c.mu.Unlock()
	mode := core.R
	if !send {
		mode = core.W
	}
	acquired := x.acquired
	if gate != nil {
		var err error
		if acquired, err = x.gated(gate); err != nil {
			x.complete(mpib.Status{}, fmt.Errorf("mpi: %s: %w", x, err))
			return nil, err
		}
	} else if h.IsOnNode(0) && h.TryAcquire(mode) == nil {
		// Nothing to wait for: MPI gets the buffer now, without the
		// goroutine AcquireCB's callback runs on (a wake-up of another
		// thread, 100 us and more on busy cores). TryAcquire refuses
		// when anything submitted before conflicts, and from callbacks.
		x.acquired(nil)
		return x, nil
	}
	if err := h.AcquireCB(mode, acquired); err != nil {
		x.complete(mpib.Status{}, fmt.Errorf("mpi: %s: %w", x, err))
		return nil, err
	}
	return x, nil
}

// gated holds x back behind gate: it acquires gate in R, which is granted
// once what was submitted before that writes gate is over, releases it at
// once, and returns the callback for x's own acquisition, which hands x
// to MPI once both are granted. Redux receives a contribution into a
// temporary handle this way, behind the datum: the temporary handle has
// no earlier accesses, and without the gate the receive could be posted
// before a receive of the datum itself from the same rank and tag, and
// match its message.
func (x *xfer) gated(gate *core.Handle) (func(error), error) {
	var (
		mu         sync.Mutex
		left       = 2
		gerr, herr error
	)
	step := func(isGate bool, err error) {
		mu.Lock()
		if isGate {
			gerr = err
		} else {
			herr = err
		}
		left--
		done := left == 0
		mu.Unlock()
		if !done {
			return
		}
		if gerr != nil && herr == nil {
			// x's handle is held but x cannot go on.
			_ = x.h.Release()
			herr = gerr
		}
		x.acquired(herr)
	}
	err := gate.AcquireCB(core.R, func(err error) {
		if err == nil {
			err = gate.Release()
		}
		step(true, err)
	})
	if err != nil {
		return nil, err
	}
	return func(err error) { step(false, err) }, nil
}

// maxReported bounds the transfers watchdogReport names.
const maxReported = 5

// watchdogReport names the transfers in flight, those MPI has the longest
// first, for the runtime's watchdog: a task that waits for data from
// another rank waits for one of them, and a receive that never completes
// often means the ranks registered a handle differently (tag, owner). It
// skips a turn rather than wait for c.mu (the engine goroutine calls it).
func (c *Comm) watchdogReport() string {
	if !c.mu.TryLock() {
		return ""
	}
	type row struct {
		what   string
		posted bool
		at     time.Time
	}
	rows := make([]row, 0, len(c.xfers))
	for x := range c.xfers {
		rows = append(rows, row{x.String(), x.posted, x.postedAt})
	}
	c.mu.Unlock()
	if len(rows) == 0 {
		return ""
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.posted != b.posted {
			return a.posted
		}
		return a.at.Before(b.at) || a.at.Equal(b.at) && a.what < b.what
	})
	var parts []string
	for _, r := range rows[:min(len(rows), maxReported)] {
		if r.posted {
			parts = append(parts, fmt.Sprintf("%s, posted %s ago", r.what, time.Since(r.at).Round(time.Millisecond)))
		} else {
			parts = append(parts, r.what+", waiting for its data")
		}
	}
	if n := len(rows) - maxReported; n > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", n))
	}
	return fmt.Sprintf("MPI rank %d has %d transfers in flight: %s (a receive that never completes: do the ranks register the handle with the same tag and owner?)", c.rank, len(rows), strings.Join(parts, "; "))
}

// track counts x among the transfers in flight; c.mu held.
func (c *Comm) track(x *xfer) {
	if len(c.xfers) == 0 {
		c.idle = make(chan struct{})
	}
	c.xfers[x] = struct{}{}
	if !x.send {
		c.peers[x.peer].pendRecv++
	}
	if !c.hooked[x.h] {
		// Unregister waits for the transfers of h in flight (a detached
		// send holds h until MPI has the data), as StarPU's does.
		if c.hooked == nil {
			c.hooked = map[*core.Handle]bool{}
		}
		c.hooked[x.h] = true
		h := x.h
		h.OnUnregister(func() { c.waitTransfers(h) })
	}
}

// waitTransfers waits until no transfer of h is in flight.
func (c *Comm) waitTransfers(h *core.Handle) {
	c.mu.Lock()
	var xs []*xfer
	for x := range c.xfers {
		if x.h == h {
			xs = append(xs, x)
		}
	}
	delete(c.hooked, h)
	c.mu.Unlock()
	for _, x := range xs {
		<-x.done
	}
}

// blocked says why x cannot happen given what is known of its peer;
// c.mu held. A peer that said goodbye receives nothing more, and sends
// nothing beyond what it counted.
func (c *Comm) blocked(x *xfer) error {
	p := &c.peers[x.peer]
	switch {
	case p.gone != nil:
		return p.gone
	case p.bye && x.send:
		return fmt.Errorf("%w: rank %d has shut down: it receives nothing more", ErrRankGone, x.peer)
	case p.bye && p.recvMsgs+int64(p.pendRecv) >= p.byeSent:
		return fmt.Errorf("%w: rank %d has shut down after sending its %d messages to rank %d, all received or awaited", ErrRankGone, x.peer, p.byeSent, c.rank)
	}
	return nil
}

// acquired runs once the handle is held (or could not be): it hands the
// RAM replicate to MPI.
func (x *xfer) acquired(err error) {
	c := x.c
	if err != nil {
		x.complete(mpib.Status{}, fmt.Errorf("mpi: %s: %w", x, err))
		return
	}
	base, rs := x.base, runs(x.h)
	c.mu.Lock()
	x.held = true
	if x.reason == nil {
		switch {
		case c.failErr != nil:
			x.reason = c.failErr
		case c.peers[x.peer].gone != nil:
			x.reason = c.peers[x.peer].gone
		}
	}
	if x.reason != nil {
		c.mu.Unlock()
		x.complete(mpib.Status{}, x.reason)
		return
	}
	x.size = runsLen(rs)
	var req *mpib.Request
	switch {
	case len(rs) == 0 && x.send:
		req, err = c.mc.Isend(nil, 0, x.peer, x.tag, x.mpiDone)
	case len(rs) == 0:
		req, err = c.mc.Irecv(nil, 0, x.peer, x.tag, x.mpiDone)
	case x.send:
		req, err = c.mc.Isendv(base, rs, x.peer, x.tag, x.mpiDone)
	default:
		req, err = c.mc.Irecvv(base, rs, x.peer, x.tag, x.mpiDone)
	}
	if err == nil {
		x.req, x.posted, x.postedAt = req, true, time.Now()
	}
	c.mu.Unlock()
	if err != nil {
		x.complete(mpib.Status{}, fmt.Errorf("mpi: %s: %w", x, err))
	}
}

// mpiDone is the MPI request's completion, on the progression goroutine.
// A transfer that succeeded and has no callback completes there: the
// release of the handle and the wake-up of its waiter block on nothing,
// and another goroutine would cost a wake-up of another thread per
// message (100 us and more on busy cores). The rest (a callback, which
// may block; a failure) happens on a goroutine of its own.
func (x *xfer) mpiDone(st mpib.Status, err error) {
	if err == nil && x.cb == nil {
		x.complete(st, nil)
		return
	}
	go x.complete(st, err)
}

// complete ends x, once: the statistics, the handle's release, the
// callback, then Wait's channel.
func (x *xfer) complete(st mpib.Status, err error) {
	x.once.Do(func() { x.completeOnce(st, err) })
}

func (x *xfer) completeOnce(st mpib.Status, err error) {
	c := x.c
	c.mu.Lock()
	switch {
	case err != nil && errors.Is(err, mpib.ErrCancelled) && x.reason != nil:
		err = fmt.Errorf("mpi: %s: %w", x, x.reason)
	case err == nil && !x.posted && x.reason != nil:
		err = fmt.Errorf("mpi: %s: %w", x, x.reason)
	case err != nil && !x.send && errors.Is(err, mpib.ErrTruncated):
		err = fmt.Errorf("mpi: %s: %w: the message is larger than the handle's %d bytes (registered with another shape there?): %w", x, ErrGraphMismatch, x.size, err)
	case err != nil && !errors.Is(err, ErrRankGone) && !errors.Is(err, ErrAborted) && !errors.Is(err, ErrRankFailed):
		err = fmt.Errorf("mpi: %s: %w", x, err)
	}
	if err == nil && !x.send && st.Count != x.size {
		err = fmt.Errorf("mpi: %s: %w: %d bytes came, the handle holds %d (registered with another shape there?)", x, ErrGraphMismatch, st.Count, x.size)
	}
	p := &c.peers[x.peer]
	if !x.send {
		p.pendRecv--
	}
	if err == nil {
		if x.send {
			p.sentMsgs++
			p.sentBytes += int64(x.size)
		} else {
			p.recvMsgs++
			p.recvBytes += int64(x.size)
		}
	}
	held, posted, postedAt := x.held, x.posted, x.postedAt
	c.mu.Unlock()
	if posted {
		// Only what reached MPI is a communication; a transfer refused
		// before it is an error, not a message.
		c.rt.TraceComm(core.CommEvent{Send: x.send, Peer: x.peer, Tag: int64(x.tag), Bytes: uint64(x.size),
			Handle: x.h, Start: postedAt, End: time.Now(), Failed: err != nil})
	}
	if err == nil && !x.send {
		x.h.LocalWritten()
	}
	if held {
		if rerr := x.h.Release(); rerr != nil && err == nil {
			err = fmt.Errorf("mpi: %s: release: %w", x, rerr)
		}
	}
	x.err = err
	if x.cb != nil {
		x.cb(err)
	}
	c.mu.Lock()
	delete(c.xfers, x)
	if len(c.xfers) == 0 {
		close(c.idle)
	}
	if err != nil && x.detached {
		// Nobody waits for it: WaitForAll and Shutdown report it.
		c.errs = append(c.errs, err)
	}
	c.mu.Unlock()
	close(x.done)
	if !x.send && err == nil {
		c.checkBye(x.peer)
	}
	if err != nil && errors.Is(err, ErrGraphMismatch) {
		c.fail(fmt.Errorf("on rank %d: %w", c.rank, err), true)
	}
}

// cancelXfers makes the transfers xs fail with err: those not yet handed
// to MPI when they are, the others by cancelling their MPI request. A
// transfer MPI does not let go of within grace (its peer died in the
// middle) is completed anyway, and its handle released.
func (c *Comm) cancelXfers(xs []*xfer, err error, grace time.Duration) {
	if len(xs) == 0 {
		return
	}
	var reqs []*mpib.Request
	c.mu.Lock()
	for _, x := range xs {
		if x.reason == nil {
			x.reason = err
		}
		if x.posted {
			reqs = append(reqs, x.req)
		}
	}
	c.mu.Unlock()
	for _, r := range reqs {
		_ = c.mc.Cancel(r)
	}
	time.AfterFunc(grace, func() {
		for _, x := range xs {
			x.complete(mpib.Status{}, fmt.Errorf("mpi: %s: %w (MPI did not cancel it)", x, err))
		}
	})
}

// abandon is cancelXfers after the run failed.
func (c *Comm) abandon(xs []*xfer, err error) { c.cancelXfers(xs, err, 300*time.Millisecond) }
