package mpi

// Control messages between the ranks' MPI layers: goodbye at Shutdown,
// and the failure that stops the run. They travel on the one tag kept
// for them (MPI_TAG_UB), from buffers outside the Go heap.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/core/mpi/internal/mpib"
)

// Control message layout: kind, then for a goodbye the data messages
// the sender sent to the receiver and received from it and the
// collectives it took part in, for a failure its text.
const (
	ctrlSize  = 256
	ctrlBye   = 1
	ctrlFail  = 2
	ctrlText  = 32
	byeStall  = 2 * time.Second
	byeSettle = 100 * time.Millisecond
	failGrace = 300 * time.Millisecond
)

// control is the control channel's state. mem holds slot 0, where control
// messages are received, then per peer a goodbye slot and a failure slot
// to send from. Guarded by Comm.mu, except mem's slots, each owned by the
// one request that uses it.
type control struct {
	mem  []byte
	req  *mpib.Request
	stop bool
	// byes is signalled at each goodbye received.
	byes chan struct{}
	// told is set once this rank told the others of a failure.
	told bool
	// queue holds the control messages received and not yet handled;
	// handling is set while a goroutine handles them.
	queue    []ctrlMsg
	handling bool
}

func (c *Comm) startControl() error {
	mem, err := unix.Mmap(-1, 0, ctrlSize*(1+2*c.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("control buffers: %w", err)
	}
	c.ctl = &control{mem: mem, byes: make(chan struct{}, c.size)}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.postControl()
}

// postControl posts the receive of the next control message; c.mu held.
func (c *Comm) postControl() error {
	if c.ctl.stop {
		return nil
	}
	req, err := c.mc.Irecv(c.slot(0), ctrlSize, mpib.AnySource, c.ctrlTag, c.onControl)
	if err != nil {
		return fmt.Errorf("post control receive: %w", err)
	}
	c.ctl.req = req
	return nil
}

func (c *Comm) slot(i int) unsafe.Pointer { return unsafe.Pointer(&c.ctl.mem[i*ctrlSize]) }

// onControl runs on the progression goroutine when a control message
// came: it copies it, receives the next one, and handles it on a
// goroutine of its own.
func (c *Comm) onControl(st mpib.Status, err error) {
	if err != nil {
		if !errors.Is(err, mpib.ErrCancelled) && !errors.Is(err, mpib.ErrFinalized) {
			c.log.Error("control receive failed", "error", err)
		}
		return
	}
	m := ctrlMsg{from: st.Source, b: append([]byte(nil), c.ctl.mem[:ctrlSize]...)}
	c.mu.Lock()
	perr := c.postControl()
	// Handled in the order they came: a rank's failure before its
	// goodbye.
	c.ctl.queue = append(c.ctl.queue, m)
	if !c.ctl.handling {
		c.ctl.handling = true
		go c.handleControls()
	}
	c.mu.Unlock()
	if perr != nil {
		c.log.Error("control", "error", perr)
	}
}

// ctrlMsg is a control message received.
type ctrlMsg struct {
	from int
	b    []byte
}

// handleControls handles the control messages queued, in order, until
// none is left.
func (c *Comm) handleControls() {
	for {
		c.mu.Lock()
		if len(c.ctl.queue) == 0 {
			c.ctl.handling = false
			c.mu.Unlock()
			return
		}
		m := c.ctl.queue[0]
		c.ctl.queue = c.ctl.queue[1:]
		c.mu.Unlock()
		c.handleControl(m.from, m.b)
	}
}

func (c *Comm) handleControl(from int, msg []byte) {
	switch binary.LittleEndian.Uint64(msg) {
	case ctrlBye:
		c.onBye(from, int64(binary.LittleEndian.Uint64(msg[8:])), int64(binary.LittleEndian.Uint64(msg[16:])), int64(binary.LittleEndian.Uint64(msg[24:])))
	case ctrlFail:
		n := min(int(binary.LittleEndian.Uint16(msg[24:])), ctrlSize-ctrlText)
		c.fail(fmt.Errorf("%w: rank %d failed: %s", ErrRankFailed, from, msg[ctrlText:ctrlText+n]), false)
	default:
		c.log.Error("unknown control message", "from", from)
	}
}

// sendControl sends a control message from slot i to rank to; done, when
// not nil, gets the outcome.
func (c *Comm) sendControl(i, to int, fill func(b []byte), done func(error)) {
	b := c.ctl.mem[i*ctrlSize : (i+1)*ctrlSize]
	clear(b)
	fill(b)
	_, err := c.mc.Isend(c.slot(i), ctrlSize, to, c.ctrlTag, func(_ mpib.Status, err error) {
		if done != nil {
			go done(err)
		}
	})
	if err != nil && done != nil {
		done(err)
	}
}

// tellFailure sends err to every other rank still there, once.
func (c *Comm) tellFailure(err error) {
	c.mu.Lock()
	if c.ctl.told || c.ctl.stop {
		c.mu.Unlock()
		return
	}
	c.ctl.told = true
	var to []int
	for i := range c.peers {
		if i != c.rank && !c.peers[i].dead {
			to = append(to, i)
		}
	}
	c.mu.Unlock()
	text := []byte(err.Error())
	if len(text) > ctrlSize-ctrlText {
		text = text[:ctrlSize-ctrlText]
	}
	for _, r := range to {
		c.sendControl(2+2*r, r, func(b []byte) {
			binary.LittleEndian.PutUint64(b, ctrlFail)
			binary.LittleEndian.PutUint16(b[24:], uint16(len(text)))
			copy(b[ctrlText:], text)
		}, nil)
	}
}

// onBye records rank from's goodbye: it sent sent data messages to this
// rank and received recvd from it, took part in colls collectives, and
// will do no more. Sends to it that are still in flight can never be
// received; receives from it fail once all it sent arrived; a collective
// it did not take part in never completes.
func (c *Comm) onBye(from int, sent, recvd, colls int64) {
	c.mu.Lock()
	p := &c.peers[from]
	p.bye, p.byeSent, p.byeRecvd, p.byeColls = true, sent, recvd, colls
	if c.coll != nil && colls < c.ncoll {
		c.coll(fmt.Errorf("%w: rank %d called Shutdown while rank %d waits for every rank (WaitForAll or Barrier)", ErrGraphMismatch, from, c.rank))
	}
	var sends []*xfer
	for x := range c.xfers {
		if x.send && x.peer == from {
			sends = append(sends, x)
		}
	}
	c.mu.Unlock()
	c.ctl.byes <- struct{}{}
	if len(sends) > 0 {
		// A send the peer received may complete in the same round of MPI
		// progress as its goodbye: look again once that round is over.
		time.AfterFunc(byeSettle, func() { c.checkSends(from) })
	}
	c.checkBye(from)
	if c.pendingFrom(from) > 0 {
		go c.watchStall(from)
	}
}

// checkSends fails the sends to rank r, which said goodbye, that are
// still in flight: r will never receive them.
func (c *Comm) checkSends(r int) {
	var sends []*xfer
	c.mu.Lock()
	for x := range c.xfers {
		if x.send && x.peer == r {
			sends = append(sends, x)
		}
	}
	c.mu.Unlock()
	if len(sends) == 0 {
		return
	}
	err := fmt.Errorf("%w: rank %d shut down without receiving what rank %d sends it", ErrRankGone, r, c.rank)
	c.cancelXfers(sends, err, failGrace)
	c.fail(err, true)
}

// pendingFrom counts the receives from rank r in flight.
func (c *Comm) pendingFrom(r int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers[r].pendRecv
}

// checkBye fails the receives from rank r that can never complete: r
// said goodbye and everything it sent has arrived.
func (c *Comm) checkBye(r int) {
	c.mu.Lock()
	p := &c.peers[r]
	if !p.bye || p.recvMsgs < p.byeSent || p.pendRecv == 0 {
		c.mu.Unlock()
		return
	}
	err := fmt.Errorf("%w: rank %d shut down after sending its %d messages to rank %d: what rank %d waits for from it never comes", ErrRankGone, r, p.byeSent, c.rank, c.rank)
	var xs []*xfer
	for x := range c.xfers {
		if !x.send && x.peer == r {
			xs = append(xs, x)
		}
	}
	c.mu.Unlock()
	c.cancelXfers(xs, err, failGrace)
	c.fail(err, true)
}

// watchStall fails the receives from rank r, which said goodbye, when
// none of them completes for byeStall: what r sent matches none of them
// (the ranks' graphs differ).
func (c *Comm) watchStall(r int) {
	c.mu.Lock()
	last := c.peers[r].recvMsgs
	c.mu.Unlock()
	for {
		select {
		case <-time.After(byeStall):
		case <-c.failed:
			return
		}
		c.mu.Lock()
		p := &c.peers[r]
		now, pend := p.recvMsgs, p.pendRecv
		c.mu.Unlock()
		if pend == 0 {
			return
		}
		if now == last {
			err := fmt.Errorf("%w: rank %d shut down, and %d receives of rank %d from it match nothing it sent", ErrRankGone, r, pend, c.rank)
			var xs []*xfer
			c.mu.Lock()
			for x := range c.xfers {
				if !x.send && x.peer == r {
					xs = append(xs, x)
				}
			}
			c.mu.Unlock()
			c.cancelXfers(xs, err, failGrace)
			c.fail(err, true)
			return
		}
		last = now
	}
}

// sayBye sends every other live rank this rank's goodbye with its
// counts, and waits for the sends.
func (c *Comm) sayBye(deadline time.Time) error {
	c.mu.Lock()
	type bye struct {
		to                 int
		sent, recvd, colls int64
	}
	var byes []bye
	for i, p := range c.peers {
		if i != c.rank && !p.dead {
			byes = append(byes, bye{i, p.sentMsgs, p.recvMsgs, c.ncoll})
		}
	}
	c.mu.Unlock()
	done := make(chan error, len(byes))
	for _, b := range byes {
		c.sendControl(1+2*b.to, b.to, func(m []byte) {
			binary.LittleEndian.PutUint64(m, ctrlBye)
			binary.LittleEndian.PutUint64(m[8:], uint64(b.sent))
			binary.LittleEndian.PutUint64(m[16:], uint64(b.recvd))
			binary.LittleEndian.PutUint64(m[24:], uint64(b.colls))
		}, func(err error) { done <- err })
	}
	var errs []error
	for range byes {
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("goodbye: %w", err))
			}
		case <-time.After(time.Until(deadline)):
			return errors.Join(append(errs, errors.New("goodbye: sends did not complete"))...)
		}
	}
	return errors.Join(errs...)
}

// awaitByes waits until every other rank said goodbye or is known dead,
// and checks their counts against this rank's.
func (c *Comm) awaitByes(deadline time.Time) error {
	for {
		c.mu.Lock()
		var missing []int
		for i, p := range c.peers {
			if i != c.rank && !p.bye && !p.dead {
				missing = append(missing, i)
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			break
		}
		select {
		case <-c.ctl.byes:
		case <-time.After(time.Until(deadline)):
			return fmt.Errorf("%w: ranks %v did not shut down within %v", ErrRankGone, missing, c.opt.ShutdownTimeout)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i, p := range c.peers {
		if i == c.rank || !p.bye {
			continue
		}
		if p.byeSent != p.recvMsgs {
			errs = append(errs, fmt.Errorf("%w: rank %d sent %d data messages to rank %d, %d were received", ErrGraphMismatch, i, p.byeSent, c.rank, p.recvMsgs))
		}
		if p.byeRecvd != p.sentMsgs {
			errs = append(errs, fmt.Errorf("%w: rank %d received %d of the %d data messages rank %d sent it", ErrGraphMismatch, i, p.byeRecvd, p.sentMsgs, c.rank))
		}
	}
	return errors.Join(errs...)
}

// stopControl stops receiving control messages.
func (c *Comm) stopControl() {
	c.mu.Lock()
	c.ctl.stop = true
	req := c.ctl.req
	c.mu.Unlock()
	if req != nil {
		_ = c.mc.Cancel(req)
		select {
		case <-req.Done():
		case <-time.After(time.Second):
		}
	}
}
