package cldriver

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
)

// flushEvery is how many dispatch messages a worker enqueues before it
// flushes its queues, so that the device starts on a long batch early.
const flushEvery = 16

// drainTimeout bounds how long a stopping worker waits for its commands.
const drainTimeout = time.Minute

// key names a buffer a command uses: a device buffer (node = the worker's
// node, buf = the core's buffer number) or a RAM buffer (node 0, buf = its
// arena offset).
type key struct {
	node uint32
	buf  uint64
}

// access is the last commands on a buffer that a new command may have to
// wait for: the last writer, and the last reader on each queue since it
// (a queue is in order, so its last reader stands for the earlier ones).
// Each is an event and the sequence number of its flight.
type access struct {
	write    cl.Event
	writeQ   int
	writeSeq uint64
	read     [nqueues]cl.Event
	readSeq  [nqueues]uint64
}

func (a *access) empty() bool {
	for _, r := range a.read {
		if !r.IsNil() {
			return false
		}
	}
	return a.write.IsNil()
}

// devBuf is a buffer the core allocated on the worker's device. mem is nil
// for a zero-byte buffer. When it holds a plugin interface's datum, parts
// says where its parts lie (wire.Parts) and subs are their sub-buffers
// (nil for an empty part), or partsErr why they could not be made.
type devBuf struct {
	mem      cl.Mem
	size     uint64
	hasParts bool
	subs     []cl.Mem
	partsErr error
}

// dropParts releases b's sub-buffers and forgets its parts. OpenCL keeps
// a sub-buffer alive while enqueued commands use it.
func (b *devBuf) dropParts() {
	for _, m := range b.subs {
		if !m.IsNil() {
			m.Release()
		}
	}
	b.subs, b.hasParts, b.partsErr = nil, false, nil
}

// flight is a command enqueued and not yet retired: its event, and what the
// completion needs.
type flight struct {
	id     uint64
	seq    uint64
	ev     cl.Event
	what   string // "kernel scal_f32", "copy 0->1", for error messages
	call   string // the OpenCL call that enqueued ev
	enqNs  int64
	kernel bool // take the duration from the event's profiling times
	// exec is a task's flight (it counts against the pipeline); sync one
	// whose implementation is not flagged asynchronous (the worker takes
	// no other task until it ends).
	exec, sync bool
	keys       []key
	// after are the flights (by seq) this one depends on: its completion
	// is posted after theirs.
	after []uint64
	// Set when the event has reported.
	done   bool
	status int32
	endNs  int64
}

// doneRec is a finished command, as the event callback reports it: the
// flight's seq (never reused, so that a late report cannot hit another
// flight) and the command's final status.
type doneRec struct {
	seq    uint64
	status int32
	ns     int64
}

// worker runs StarPU's driver cycle for one OpenCL device: it turns dispatch
// messages into commands on the device's queues without waiting for them,
// and posts each completion when OpenCL reports the command finished.
type worker struct {
	d     *Driver
	dev   *device
	rings *driver.Rings
	node  uint32
	sink  *cl.Sink
	// pipe is the pipeline rule (EnvPipeline).
	pipe driver.Pipeline

	// Filled by the event callback on OpenCL's threads.
	doneMu  sync.Mutex
	done    []doneRec
	pending atomic.Bool

	// The rest belongs to the worker's goroutine.
	slots    []flight
	free     []int
	inflight int
	seq      uint64
	live     map[uint64]int // slot of each flight not yet retired, by seq
	ready    []int          // slots reported done, not yet retired
	after    []uint64
	bufs     map[uint64]*devBuf
	used     uint64
	acc      map[key]*access
	dirty    [nqueues]bool
	drained  []doneRec
	wait     []cl.Event
	mems     []cl.Mem
	keys     []key
	exec     wire.Exec
	cpy      wire.Copy
	parts    wire.Parts
	// nmem is how many cl_mem arguments each buffer of the Exec being
	// enqueued takes (one, or a plugin datum's parts), in mems.
	nmem []int
}

func (d *Driver) newWorker(spec driver.WorkerSpec, dev *device, spin int) (*worker, error) {
	r, err := driver.OpenRings(d.arena, spec, spin)
	if err != nil {
		return nil, err
	}
	w := &worker{d: d, dev: dev, rings: r, node: uint32(dev.index + 1),
		bufs: map[uint64]*devBuf{}, acc: map[key]*access{}, live: map[uint64]int{}}
	if w.sink, err = cl.NewSink(w.onDone); err != nil {
		return nil, err
	}
	return w, nil
}

// onDone runs on an OpenCL thread when a command finishes: it queues the
// news and wakes the worker.
func (w *worker) onDone(seq uint64, status int32) {
	r := doneRec{seq: seq, status: status, ns: wire.Now()}
	w.doneMu.Lock()
	w.done = append(w.done, r)
	w.doneMu.Unlock()
	w.pending.Store(true)
	w.rings.Bell.Ring()
}

// run is StarPU's driver cycle: init (done by Init), run_once while
// running, deinit.
func (d *Driver) run(w *worker) {
	defer d.wg.Done()
	// OpenCL is called from one thread per worker, as StarPU does.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ready := func() bool { return w.pending.Load() || d.stop.Load() || w.pipe.MayTake(w.rings.Dispatch.Peek()) }
	for !d.stop.Load() {
		if !w.rings.Idle(ready, 200*time.Millisecond) {
			if w.inflight > 0 {
				w.poll()
			}
			continue
		}
		if err := w.runOnce(); err != nil {
			d.log.Error("worker stopped", "worker", w.rings.Spec.ID, "device", w.dev.name, "error", err)
			w.drain(false)
			w.close()
			return
		}
	}
	w.drain(true)
	w.close()
}

// runOnce retires finished commands and enqueues every message waiting on
// the dispatch ring.
func (w *worker) runOnce() error {
	if err := w.retire(); err != nil {
		return err
	}
	n := 0
	for msg := w.rings.Dispatch.Peek(); w.pipe.MayTake(msg); msg = w.rings.Dispatch.Peek() {
		if err := w.handle(msg); err != nil {
			return err
		}
		w.rings.Dispatch.Release()
		if n++; n%flushEvery == 0 {
			// A long batch: start the device and answer what finished.
			w.flush()
			if err := w.retire(); err != nil {
				return err
			}
		}
	}
	if err := w.rings.Dispatch.Err(); err != nil {
		return fmt.Errorf("dispatch ring: %w", err)
	}
	w.flush()
	if err := w.retire(); err != nil {
		return err
	}
	w.rings.Flush()
	return nil
}

// handle enqueues one dispatch message. A message the device cannot carry
// out is answered by a failed completion; only a broken ring is an error.
func (w *worker) handle(msg []byte) error {
	now := wire.Now()
	switch t := wire.Type(msg); t {
	case wire.TypeAlloc:
		var a wire.Alloc
		if err := a.Decode(msg); err != nil {
			return err
		}
		return w.post(wire.Completion{ID: a.ID, StartNs: now, EndNs: wire.Now()}, w.alloc(&a))
	case wire.TypeFree:
		var f wire.Free
		if err := f.Decode(msg); err != nil {
			return err
		}
		if err := w.freeBuf(&f); err != nil {
			w.d.log.Warn("free", "worker", w.rings.Spec.ID, "error", err)
		}
		return nil
	case wire.TypeCopy:
		if err := w.cpy.Decode(msg); err != nil {
			return err
		}
		if err := w.enqueueCopy(&w.cpy, now); err != nil {
			return w.post(wire.Completion{ID: w.cpy.ID, StartNs: now, EndNs: wire.Now()}, err)
		}
		return nil
	case wire.TypeParts:
		if err := w.parts.Decode(msg); err != nil {
			return err
		}
		if err := w.setParts(&w.parts); err != nil {
			// No task can use the buffer, which a failed Alloc left out.
			w.d.log.Warn("parts", "worker", w.rings.Spec.ID, "error", err)
		}
		return nil
	case wire.TypeExec:
		if err := w.exec.Decode(msg); err != nil {
			return err
		}
		if err := w.enqueueExec(&w.exec, now); err != nil {
			return w.post(wire.Completion{ID: w.exec.ID, StartNs: now, EndNs: wire.Now()}, err)
		}
		return nil
	default:
		return fmt.Errorf("dispatch ring: unexpected message type %d", t)
	}
}

// post writes a completion, failed with err's text when err is not nil.
func (w *worker) post(c wire.Completion, err error) error {
	return w.rings.Post(&c, err, func() bool { return !w.d.stop.Load() })
}

// flush submits what was enqueued since the last flush.
func (w *worker) flush() {
	for q := range w.dirty {
		if w.dirty[q] {
			w.dirty[q] = false
			if err := w.dev.q[q].Flush(); err != nil {
				w.d.log.Warn("flush", "worker", w.rings.Spec.ID, "error", err)
			}
		}
	}
}

// retire posts the completions of the commands OpenCL reported finished,
// each after those of the commands it depended on: callbacks may arrive in
// any order, completions go out in an order consistent with the data.
func (w *worker) retire() error {
	if w.pending.Load() {
		w.doneMu.Lock()
		w.pending.Store(false)
		w.drained, w.done = w.done, w.drained[:0]
		w.doneMu.Unlock()
		for _, r := range w.drained {
			slot, ok := w.live[r.seq]
			if !ok || w.slots[slot].done {
				continue // reported twice (callback after a poll)
			}
			f := &w.slots[slot]
			f.done, f.status, f.endNs = true, r.status, r.ns
			w.ready = append(w.ready, slot)
		}
	}
	for progress := true; progress && len(w.ready) > 0; {
		progress = false
		kept := w.ready[:0]
		for _, slot := range w.ready {
			if w.blocked(&w.slots[slot]) {
				kept = append(kept, slot)
				continue
			}
			if err := w.finish(slot); err != nil {
				return err
			}
			progress = true
		}
		w.ready = kept
	}
	return nil
}

// blocked reports whether a flight depends on one not yet retired.
func (w *worker) blocked(f *flight) bool {
	for _, a := range f.after {
		if _, ok := w.live[a]; ok {
			return true
		}
	}
	return false
}

// finish retires a flight whose event reported: it posts the completion and
// frees the slot.
func (w *worker) finish(slot int) error {
	f := &w.slots[slot]
	c := wire.Completion{ID: f.id, StartNs: f.enqNs, EndNs: f.endNs}
	var err error
	if f.status < 0 {
		err = fmt.Errorf("%s: %w", f.what, &cl.Error{Call: f.call, Code: f.status})
	} else if f.kernel {
		// The kernel ran for end-start on the device; it ended when the
		// callback came or a little before.
		if s, e, perr := f.ev.ProfilingTimes(); perr == nil && e >= s {
			c.StartNs = max(c.StartNs, f.endNs-int64(e-s))
		}
	}
	for _, k := range f.keys {
		w.forget(k, f.ev)
	}
	f.ev.Release()
	delete(w.live, f.seq)
	if f.exec {
		w.pipe.Ended(f.sync)
	}
	*f = flight{keys: f.keys[:0], after: f.after[:0]}
	w.free = append(w.free, slot)
	w.inflight--
	return w.post(c, err)
}

// poll asks OpenCL for the status of the commands in flight, for those
// that failed without calling back (pocl does not call back for a user
// event set to an error); the run loop calls it when it has waited a while
// with commands in flight.
func (w *worker) poll() {
	for seq, slot := range w.live {
		if f := &w.slots[slot]; !f.done {
			if st, err := f.ev.Status(); err == nil && st < 0 {
				w.onDone(seq, st)
			}
		}
	}
}

// launch tracks an enqueued command until its event reports.
func (w *worker) launch(f flight) error {
	var slot int
	if n := len(w.free); n > 0 {
		slot, w.free = w.free[n-1], w.free[:n-1]
	} else {
		slot = len(w.slots)
		w.slots = append(w.slots, flight{})
	}
	f.keys = append(w.slots[slot].keys[:0], f.keys...)
	f.after = append(w.slots[slot].after[:0], w.after...)
	w.seq++
	f.seq = w.seq
	w.slots[slot] = f
	w.live[f.seq] = slot
	w.inflight++
	if f.exec {
		w.pipe.Started(f.sync)
	}
	if err := f.ev.OnComplete(w.sink, f.seq); err != nil {
		// No callback: wait for the command here rather than lose it.
		w.d.log.Warn("event callback refused; waiting for the command", "worker", w.rings.Spec.ID, "error", err)
		status := cl.Complete
		if werr := f.ev.Wait(); werr != nil {
			if s, serr := f.ev.Status(); serr == nil && s < 0 {
				status = s
			} else {
				status = cl.OutOfResources
			}
		}
		w.onDone(f.seq, status)
	}
	return nil
}

// deps adds to w.wait the events a command on queue q that reads (or
// writes) buffer k must wait for, and to w.after their flights. Events of
// q itself need no waiting, the queue being in order, but still order the
// completions.
func (w *worker) deps(k key, write bool, q int) {
	a := w.acc[k]
	if a == nil {
		return
	}
	if !a.write.IsNil() {
		w.after = append(w.after, a.writeSeq)
		if a.writeQ != q {
			w.wait = append(w.wait, a.write)
		}
	}
	if write {
		for rq, r := range a.read {
			if !r.IsNil() {
				w.after = append(w.after, a.readSeq[rq])
				if rq != q {
					w.wait = append(w.wait, r)
				}
			}
		}
	}
}

// record notes that the command of ev on queue q, the next flight to
// launch, reads (or writes) k.
func (w *worker) record(k key, write bool, q int, ev cl.Event) {
	a := w.acc[k]
	if a == nil {
		a = &access{}
		w.acc[k] = a
	}
	seq := w.seq + 1
	if write {
		*a = access{write: ev, writeQ: q, writeSeq: seq}
	} else {
		a.read[q], a.readSeq[q] = ev, seq
	}
}

// forget drops ev, which has finished, from k's access record.
func (w *worker) forget(k key, ev cl.Event) {
	a := w.acc[k]
	if a == nil {
		return
	}
	if a.write == ev {
		a.write = cl.Event{}
	}
	for q := range a.read {
		if a.read[q] == ev {
			a.read[q] = cl.Event{}
		}
	}
	if k.node == 0 && a.empty() {
		delete(w.acc, k)
	}
}

// alloc creates a device buffer, within the node's memory limit.
func (w *worker) alloc(a *wire.Alloc) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("alloc of %d bytes for buffer %d on node %d (%s): %s", a.Size, a.Buffer, a.Node, w.dev.name, fmt.Sprintf(format, args...))
	}
	if a.Node != w.node {
		return fail("this worker's device is node %d", w.node)
	}
	if _, ok := w.bufs[a.Buffer]; ok {
		return fail("buffer %d is allocated already", a.Buffer)
	}
	limit := w.dev.unit.limit
	if a.Size > limit-w.used {
		return fail("out of memory: %d of the node's %d bytes in use", w.used, limit)
	}
	b := &devBuf{size: a.Size}
	if a.Size > 0 {
		m, err := w.dev.ctx.CreateBuffer(a.Size)
		if err != nil {
			var ce *cl.Error
			if errors.As(err, &ce) && ce.Code == cl.InvalidBufferSize {
				return fail("%v (the device's largest buffer is %d bytes)", err, w.dev.unit.info.MaxAllocSize)
			}
			return fail("%v", err)
		}
		b.mem = m
	}
	w.bufs[a.Buffer] = b
	w.used += a.Size
	return nil
}

// freeBuf releases a device buffer; OpenCL frees it once the commands
// using it are done.
func (w *worker) freeBuf(f *wire.Free) error {
	b := w.bufs[f.Buffer]
	if f.Node != w.node || b == nil {
		return fmt.Errorf("free of buffer %d on node %d: no such buffer on this worker's device (node %d)", f.Buffer, f.Node, w.node)
	}
	delete(w.bufs, f.Buffer)
	delete(w.acc, key{w.node, f.Buffer})
	w.used -= b.size
	b.dropParts()
	if !b.mem.IsNil() {
		return b.mem.Release()
	}
	return nil
}

// setParts records where the parts of the plugin datum a device buffer
// now holds lie, and makes a sub-buffer of each non-empty one for the
// kernels. A part that does not fit the buffer, or whose offset is not a
// multiple of the device's base-address alignment (iface.PartAlign is),
// leaves the buffer with an error that fails the Execs using it.
func (w *worker) setParts(p *wire.Parts) error {
	b := w.bufs[p.Buffer]
	if p.Node != w.node || b == nil {
		return fmt.Errorf("parts of buffer %d on node %d: no such buffer on this worker's device (node %d)", p.Buffer, p.Node, w.node)
	}
	b.dropParts()
	b.hasParts = true
	align := w.dev.unit.info.BaseAlign
	subs := make([]cl.Mem, len(p.Parts))
	for i, r := range p.Parts {
		var err error
		switch {
		case r.Offset > b.size || r.Size > b.size-r.Offset:
			err = fmt.Errorf("part %d, bytes [%d, +%d), lies outside device buffer %d of %d bytes", i, r.Offset, r.Size, p.Buffer, b.size)
		case r.Size == 0:
			continue // a NULL argument
		case align > 0 && r.Offset%align != 0:
			err = fmt.Errorf("part %d starts at byte %d of its buffer, not a multiple of %s's %d-byte base address alignment, which a sub-buffer needs", i, r.Offset, w.dev.name, align)
		default:
			subs[i], err = b.mem.SubBuffer(r.Offset, r.Size)
			if err != nil {
				err = fmt.Errorf("part %d, bytes [%d, +%d): %w", i, r.Offset, r.Size, err)
			}
		}
		if err != nil {
			b.subs = subs
			b.dropParts()
			b.hasParts, b.partsErr = true, err
			return nil
		}
	}
	b.subs = subs
	return nil
}

// side is one end of a copy.
type side struct {
	node uint32
	buf  uint64
	dev  *devBuf // nil for RAM
}

func (w *worker) side(node uint32, buf uint64) (side, error) {
	switch node {
	case 0:
		return side{node: 0, buf: buf}, nil
	case w.node:
		b := w.bufs[buf]
		if b == nil {
			return side{}, fmt.Errorf("device buffer %d is not allocated", buf)
		}
		return side{node: node, buf: buf, dev: b}, nil
	}
	return side{}, fmt.Errorf("node %d is neither RAM (0) nor this worker's device (%d)", node, w.node)
}

// bytes checks that a range lies in the side's buffer and returns the arena
// bytes of a RAM side.
func (w *worker) bytes(s side, off, n uint64) ([]byte, error) {
	if s.dev != nil {
		if off > s.dev.size || n > s.dev.size-off {
			return nil, fmt.Errorf("range [%d, +%d) outside device buffer %d of %d bytes", off, n, s.buf, s.dev.size)
		}
		return nil, nil
	}
	if off > math.MaxUint64-s.buf {
		return nil, fmt.Errorf("range offset %d overflows from arena offset %d", off, s.buf)
	}
	return w.d.arena.BytesChecked(base.Span{Offset: s.buf + off, Size: n})
}

// enqueueCopy enqueues a Copy's ranges on the transfer queue, after the
// commands that write its source or use its destination.
func (w *worker) enqueueCopy(c *wire.Copy, now int64) error {
	what := fmt.Sprintf("copy %d->%d", c.SrcNode, c.DstNode)
	src, err := w.side(c.SrcNode, c.SrcBuffer)
	if err != nil {
		return fmt.Errorf("%s: source: %w", what, err)
	}
	dst, err := w.side(c.DstNode, c.DstBuffer)
	if err != nil {
		return fmt.Errorf("%s: destination: %w", what, err)
	}
	if src.dev == nil && dst.dev == nil {
		return fmt.Errorf("%s: RAM to RAM is not a device transfer", what)
	}
	// Check every range before enqueueing any.
	last := -1
	for i, r := range c.Ranges {
		if r.Len == 0 {
			continue
		}
		if _, err := w.bytes(src, r.SrcOffset, r.Len); err != nil {
			return fmt.Errorf("%s: range %d: source: %w", what, i, err)
		}
		if _, err := w.bytes(dst, r.DstOffset, r.Len); err != nil {
			return fmt.Errorf("%s: range %d: destination: %w", what, i, err)
		}
		last = i
	}
	srcKey, dstKey := key{src.node, src.buf}, key{dst.node, dst.buf}
	w.wait, w.after = w.wait[:0], w.after[:0]
	w.deps(srcKey, false, xferQ)
	w.deps(dstKey, true, xferQ)
	q := w.dev.q[xferQ]
	var ev cl.Event
	call := "clEnqueueMarkerWithWaitList"
	if last < 0 {
		ev, err = q.EnqueueMarker(w.wait)
	} else {
		wait := w.wait
		for i, r := range c.Ranges[:last+1] {
			if r.Len == 0 {
				continue
			}
			want := i == last
			var e cl.Event
			switch {
			case dst.dev == nil:
				call = "clEnqueueReadBuffer"
				host, _ := w.bytes(dst, r.DstOffset, r.Len)
				e, err = q.EnqueueRead(src.dev.mem, false, r.SrcOffset, host, wait, want)
			case src.dev == nil:
				call = "clEnqueueWriteBuffer"
				host, _ := w.bytes(src, r.SrcOffset, r.Len)
				e, err = q.EnqueueWrite(dst.dev.mem, false, r.DstOffset, host, wait, want)
			default:
				call = "clEnqueueCopyBuffer"
				e, err = q.EnqueueCopy(src.dev.mem, dst.dev.mem, r.SrcOffset, r.DstOffset, r.Len, wait, want)
			}
			if err != nil {
				// Ranges before it are queued: let them finish so that
				// no later command overlaps them.
				q.Finish()
				return fmt.Errorf("%s: range %d: %w", what, i, err)
			}
			// The queue is in order: the first range's waits cover all.
			wait = nil
			ev = e
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	w.dirty[xferQ] = true
	w.record(srcKey, false, xferQ, ev)
	w.record(dstKey, true, xferQ, ev)
	return w.launch(flight{id: c.ID, ev: ev, what: what, call: call, enqNs: now, keys: []key{srcKey, dstKey}})
}

// shapeArgs are the arguments that follow a buffer's cl_mem (a plugin
// datum's parts) in the calling convention: uint, ulong for plugin
// interfaces (wideShape), whose fields are theirs to fill.
func shapeArgs(l kernel.Layout) ([]uint64, error) {
	switch {
	case l.Interface == kernel.Void || l.Interface == kernel.Variable:
		return nil, nil
	case l.Interface == kernel.Vector:
		return []uint64{l.NX}, nil
	case l.Interface == kernel.Matrix:
		return []uint64{l.NX, l.NY, l.LD}, nil
	case l.Interface == kernel.Block, l.Interface >= kernel.FirstPluginInterface:
		return []uint64{l.NX, l.NY, l.NZ, l.LD, l.LDZ}, nil
	}
	return nil, fmt.Errorf("unknown data interface %d", l.Interface)
}

// wideShape: a plugin interface's shape arguments are ulong, since its
// fields may use all 64 bits (BCSR's LDZ holds its block size in the high
// ones, a region may pass 4 GiB).
func wideShape(l kernel.Layout) bool { return l.Interface >= kernel.FirstPluginInterface }

// defaultRange is the NDRange of the calling convention: the shape of the
// first buffer written (else the first buffer).
func defaultRange(bufs []wire.BufferDesc) []uint64 {
	if len(bufs) == 0 {
		return []uint64{1}
	}
	pick := bufs[0].Layout
	for _, b := range bufs {
		if b.Mode&kernel.W != 0 {
			pick = b.Layout
			break
		}
	}
	switch pick.Interface {
	case kernel.Vector:
		return []uint64{pick.NX}
	case kernel.Matrix:
		return []uint64{pick.NX, pick.NY}
	case kernel.Block:
		return []uint64{pick.NX, pick.NY, pick.NZ}
	}
	return []uint64{1}
}

// enqueueExec sets a kernel's arguments by the calling convention and
// enqueues it on the kernel queue, after the commands its buffers wait for.
func (w *worker) enqueueExec(e *wire.Exec, now int64) error {
	ks := *w.dev.kernels.Load()
	if int(e.Kernel) >= len(ks) || ks[e.Kernel] == nil {
		return fmt.Errorf("kernel index %d out of range (%d kernels on %s)", e.Kernel, len(ks), w.dev.name)
	}
	dk := ks[e.Kernel]
	what := "kernel " + dk.name
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", what, fmt.Sprintf(format, args...))
	}
	w.mems, w.nmem = w.mems[:0], w.nmem[:0]
	nargs := 0
	for i, b := range e.Buffers {
		shape, err := shapeArgs(b.Layout)
		if err != nil {
			return fail("buffer %d: %v", i, err)
		}
		nargs += len(shape)
		if b.Layout.Interface == kernel.Void {
			w.mems, w.nmem = append(w.mems, cl.Mem{}), append(w.nmem, 1)
			nargs++
			continue
		}
		if uint32(b.Node) != w.node {
			return fail("buffer %d is on node %d, not on this worker's device (node %d): the core must copy it there first", i, b.Node, w.node)
		}
		db := w.bufs[b.Offset]
		if db == nil {
			return fail("buffer %d: device buffer %d is not allocated", i, b.Offset)
		}
		if need := b.Layout.Len(); need > db.size {
			return fail("buffer %d: its layout spans %d bytes, device buffer %d has %d", i, need, b.Offset, db.size)
		}
		if !wideShape(b.Layout) {
			w.mems, w.nmem = append(w.mems, db.mem), append(w.nmem, 1)
			nargs++
			continue
		}
		// A plugin interface's datum: one argument per part.
		switch {
		case db.partsErr != nil:
			return fail("buffer %d: %v", i, db.partsErr)
		case !db.hasParts:
			return fail("buffer %d holds a plugin interface's datum, but the core never said where its parts lie in device buffer %d (no Parts message)", i, b.Offset)
		}
		w.mems, w.nmem = append(w.mems, db.subs...), append(w.nmem, len(db.subs))
		nargs += len(db.subs)
	}
	switch {
	case dk.lib != nil:
		if err := dk.lib.validate(e.Buffers, e.Arg); err != nil {
			return fail("%v", err)
		}
		nargs += dk.lib.nargs
	case len(e.Arg) > 0:
		nargs++
	}
	if nargs != dk.nargs {
		return fail("the function takes %d arguments; the calling convention gives %d for %d buffers and a %d-byte argument", dk.nargs, nargs, len(e.Buffers), len(e.Arg))
	}
	arg, m := 0, 0
	for i, b := range e.Buffers {
		for range w.nmem[i] {
			if err := dk.k.SetArgMem(arg, w.mems[m]); err != nil {
				return fail("argument %d (buffer %d): %v", arg, i, err)
			}
			arg++
			m++
		}
		shape, _ := shapeArgs(b.Layout)
		wide := wideShape(b.Layout)
		for _, v := range shape {
			var err error
			switch {
			case wide:
				err = dk.k.SetArgUint64(arg, v)
			case v > math.MaxUint32:
				return fail("buffer %d: dimension %d does not fit a uint argument", i, v)
			default:
				err = dk.k.SetArgUint32(arg, uint32(v))
			}
			if err != nil {
				return fail("argument %d (buffer %d shape): %v", arg, i, err)
			}
			arg++
		}
	}
	global, local := defaultRange(e.Buffers), []uint64(nil)
	switch {
	case dk.lib != nil:
		if err := dk.lib.setArgs(dk.k, arg, e.Arg, dk.lib.prec); err != nil {
			return fail("scalar arguments: %v", err)
		}
		if dk.lib.ndrange != nil {
			global, local = dk.lib.ndrange(e.Buffers, e.Arg)
		}
	case len(e.Arg) > 0:
		if err := dk.k.SetArgBytes(arg, e.Arg); err != nil {
			return fail("argument %d (the task's %d-byte argument): %v", arg, len(e.Arg), err)
		}
	}
	w.wait, w.after = w.wait[:0], w.after[:0]
	w.keys = w.keys[:0]
	for _, b := range e.Buffers {
		if b.Layout.Interface == kernel.Void {
			continue
		}
		k := key{w.node, b.Offset}
		w.deps(k, b.Mode&kernel.W != 0, kernelQ)
		w.keys = append(w.keys, k)
	}
	empty := false
	for _, g := range global {
		empty = empty || g == 0
	}
	q := w.dev.q[kernelQ]
	var ev cl.Event
	var err error
	call := "clEnqueueNDRangeKernel"
	if empty {
		// Nothing to run, but the completion must still come after the
		// commands the buffers wait for.
		call = "clEnqueueMarkerWithWaitList"
		ev, err = q.EnqueueMarker(w.wait)
	} else {
		ev, err = q.EnqueueNDRange(dk.k, global, local, w.wait, true)
	}
	if err != nil {
		return fail("%v", err)
	}
	w.dirty[kernelQ] = true
	for _, b := range e.Buffers {
		if b.Layout.Interface != kernel.Void {
			w.record(key{w.node, b.Offset}, b.Mode&kernel.W != 0, kernelQ, ev)
		}
	}
	sync := w.pipe.Sync(e.Flags)
	return w.launch(flight{id: e.ID, ev: ev, what: what, call: call, enqNs: now, kernel: !empty, keys: w.keys, exec: true, sync: sync})
}

// drain finishes the worker's tasks at Deinit: those in flight and, when
// ring is set, those still on the dispatch ring that the pipeline held
// back (Deinit ends the tasks sent before it). It posts their completions
// while the core still reads them.
func (w *worker) drain(ring bool) {
	w.flush()
	deadline := time.Now().Add(drainTimeout)
	for {
		if ring {
			if err := w.runOnce(); err != nil {
				w.d.log.Error("worker stopped while draining", "worker", w.rings.Spec.ID, "device", w.dev.name, "error", err)
				ring = false
			}
		}
		if w.inflight == 0 && (!ring || w.rings.Dispatch.Peek() == nil) {
			break
		}
		if time.Now().After(deadline) {
			w.d.log.Error("commands still running at deinit", "worker", w.rings.Spec.ID, "device", w.dev.name, "commands", w.inflight)
			return
		}
		// With nothing in flight the tasks left on the ring can be taken
		// at once; otherwise wait for a command to report.
		if w.inflight > 0 && !w.rings.Bell.Wait(w.pending.Load, 0, 100*time.Millisecond) {
			w.poll()
		}
		if err := w.retire(); err != nil {
			// The core is not reading completions any more: finish
			// retiring without taking more.
			ring = false
		}
	}
	w.rings.Flush()
}

// close frees the worker's buffers and its event sink. Buffers are only
// freed once nothing is in flight: a command may still use them.
func (w *worker) close() {
	if w.inflight == 0 {
		if w.sink != nil {
			w.sink.Close()
		}
		for id, b := range w.bufs {
			b.dropParts()
			if !b.mem.IsNil() {
				b.mem.Release()
			}
			delete(w.bufs, id)
		}
	}
	w.acc = map[key]*access{}
}
