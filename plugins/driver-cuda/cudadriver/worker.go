package cudadriver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// Streams of a worker: kernels, and one per copy direction, so that a
// copy overlaps kernels and copies the other way (a GPU has a copy engine
// per direction).
const (
	kernelS = iota
	h2dS
	d2hS
	d2dS
	nstreams
)

var streamNames = [nstreams]string{"kernel", "host-to-device", "device-to-host", "device-to-device"}

const (
	// takeBatch is how many dispatch messages a worker queues before it
	// looks for finished commands, so that a long batch is answered early.
	takeBatch = 16
	// spinFor is how long a worker with commands in flight polls their
	// events before it hands them to its waiters and sleeps: about the
	// cost of a wake-up from a blocking-sync event, so that short kernels
	// are seen at polling latency and long ones cost no core.
	spinFor = 50 * time.Microsecond
	// idleWait bounds a sleep on the bell (a missed ring costs this much).
	idleWait = 200 * time.Millisecond
	// drainTimeout bounds how long a stopping worker waits for its commands.
	drainTimeout = time.Minute
	// infoSlots is how many potrf devInfo words a worker has: more than
	// the tasks it may have in flight (maxPipeline).
	infoSlots = 1024
	// eventFlags: events only mark completion (no timing, cheaper), and a
	// waiter synchronizing on one sleeps instead of spinning.
	eventFlags = cu.EventDisableTiming | cu.EventBlockingSync
)

// key names a buffer a command uses: a device buffer (node = the worker's
// node, buf = the core's buffer number) or a RAM buffer (node 0, buf = its
// arena offset).
type key struct {
	node uint32
	buf  uint64
}

// access is the last commands on a buffer that a new command may have to
// wait for: the last writer, and the last reader on each stream since it
// (a stream is in order, so its last reader stands for the earlier ones).
// Each is an event and the sequence number of its flight.
type access struct {
	write    cu.Event
	writeS   int
	writeSeq uint64
	read     [nstreams]cu.Event
	readSeq  [nstreams]uint64
}

func (a *access) events() []cu.Event {
	var evs []cu.Event
	if !a.write.IsNil() {
		evs = append(evs, a.write)
	}
	for _, r := range a.read {
		if !r.IsNil() {
			evs = append(evs, r)
		}
	}
	return evs
}

// devBuf is a buffer the core allocated on the worker's GPU; ptr is 0 for
// a zero-byte buffer. When it holds a plugin interface's datum, parts
// says where its parts lie (wire.Parts), or partsErr why they cannot be
// used.
type devBuf struct {
	ptr      cu.DevicePtr
	size     uint64
	hasParts bool
	parts    []wire.Part
	partsErr error
}

// flight is a command queued on a stream and not yet retired: the event
// recorded behind it, and what the completion needs.
type flight struct {
	id     uint64
	seq    uint64
	ev     cu.Event
	stream int
	what   string // "kernel scal_f32", "copy 0->1", for error messages
	enqNs  int64
	// exec is a task's flight (it counts against the pipeline); sync one
	// whose implementation is not flagged asynchronous (the worker takes
	// no other task until it ends).
	exec, sync bool
	keys       []key
	// after are the flights (by seq) this one depends on: its completion
	// is posted after theirs.
	after []uint64
	// info is the devInfo slot of a potrf, -1 for other commands.
	info int
	// Set when the event has reported.
	done  bool
	err   error
	endNs int64
}

// waiter sleeps in the driver on one event at a time for the worker
// (cuEventSynchronize on a blocking-sync event) and rings its bell when
// the event completes. busy is set by the worker when it hands an event
// over and cleared by the waiter when done with it.
type waiter struct {
	ch   chan cu.Event
	busy atomic.Bool
	ev   cu.Event // the event handed over; the worker's
}

// worker runs StarPU's driver cycle for one GPU: it turns dispatch
// messages into commands on its streams without waiting for them, and
// posts each completion once the event behind the command reports.
type worker struct {
	d     *Driver
	dev   *device
	rings *driver.Rings
	node  uint32
	// pipe is the pipeline rule (EnvPipeline).
	pipe driver.Pipeline
	// noSpin: the core asked for no polling (InitRequest.SpinIters 0).
	noSpin bool

	streams [nstreams]cu.Stream
	blas    *cu.BLAS
	solver  *cu.Solver
	// work is potrf's workspace, grown as needed; devInfo holds a potrf
	// status word per slot, copied behind each potrf to hostInfo (pinned,
	// mmapped: Go does not manage it) and read when the flight retires.
	work       cu.DevicePtr
	workSize   uint64
	devInfo    cu.DevicePtr
	hostInfo   []byte
	infoPinned bool
	freeInfo   []int

	// peers are the workers of the GPUs this one copies to directly, by
	// node; exported, when another worker copies to this one, is the
	// table of its buffers they read. Both are set before the worker
	// starts.
	peers    map[uint32]*worker
	exported *bufTable

	waiters [nstreams]*waiter
	waitWG  sync.WaitGroup
	// woken is set by a waiter whose event completed.
	woken atomic.Bool
	// parked are retired flights' events still held by a busy waiter.
	parked []cu.Event

	// The rest belongs to the worker's goroutine.
	events   []cu.Event // idle events, for reuse
	slots    []flight
	free     []int
	inflight int
	seq      uint64
	live     map[uint64]int // slot of each flight not yet retired, by seq
	queued   [nstreams][]int
	ready    []int // slots reported done, not yet retired
	lastEnd  [nstreams]int64
	after    []uint64
	waits    []cu.Event
	bufs     map[uint64]*devBuf
	used     uint64
	acc      map[key]*access
	ptrs     []cu.DevicePtr
	uses     []use
	params   []unsafe.Pointer
	ptrVals  []cu.DevicePtr
	dimVals  []uint32
	wideVals []uint64
	exec     wire.Exec
	cpy      wire.Copy
	partsMsg wire.Parts
}

func newWorker(d *Driver, dev *device, r *driver.Rings, pipeline, spinIters int) *worker {
	return &worker{d: d, dev: dev, rings: r, node: uint32(dev.index + 1), pipe: driver.NewPipeline(pipeline), noSpin: spinIters == 0,
		bufs: map[uint64]*devBuf{}, acc: map[key]*access{}, live: map[uint64]int{}}
}

// run is StarPU's driver cycle on the worker's locked thread: init (its
// outcome sent on started), run_once while running, deinit.
func (d *Driver) run(w *worker, started chan<- error) {
	defer d.wg.Done()
	// A context is current per OS thread: the worker keeps to one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := w.init(); err != nil {
		w.close()
		d.drained.Done()
		started <- err
		return
	}
	started <- nil
	ready := func() bool { return w.woken.Load() || d.stop.Load() || w.pipe.MayTake(w.rings.Dispatch.Peek()) }
	for !d.stop.Load() {
		if w.inflight > 0 {
			if !w.spin(ready) {
				// Long work: the waiters sleep in the driver on it and
				// ring the bell.
				w.lend()
				w.rings.Idle(ready, idleWait)
			}
		} else if !w.rings.Idle(ready, idleWait) {
			continue
		}
		w.woken.Store(false)
		if err := w.runOnce(); err != nil {
			d.log.Error("worker stopped", "worker", w.rings.Spec.ID, "device", w.dev.name, "error", err)
			w.drain(false)
			d.drained.Done()
			d.drained.Wait()
			w.close()
			return
		}
	}
	w.drain(true)
	d.drained.Done()
	d.drained.Wait()
	w.close()
}

// init is StarPU's init for the worker: the context current on its
// thread, the streams, the library handles bound to the kernel stream,
// the waiters.
func (w *worker) init() error {
	if err := w.dev.ctx.SetCurrent(); err != nil {
		return err
	}
	for _, p := range w.peers {
		if err := cu.EnablePeerAccess(p.dev.ctx); err != nil {
			// Peer copies still work, staged through the host by CUDA.
			w.d.log.Warn("peer access not enabled", "worker", w.rings.Spec.ID, "device", w.dev.name, "peer", p.dev.name, "error", err)
		}
	}
	for s := range w.streams {
		st, err := cu.StreamCreate(cu.StreamNonBlocking)
		if err != nil {
			return fmt.Errorf("%s stream: %w", streamNames[s], err)
		}
		w.streams[s] = st
	}
	if w.d.found.blas {
		b, err := cu.NewBLAS()
		if err != nil {
			return err
		}
		w.blas = b
		if err := b.SetStream(w.streams[kernelS]); err != nil {
			return err
		}
	}
	if w.d.found.solver {
		s, err := cu.NewSolver()
		if err != nil {
			return err
		}
		w.solver = s
		if err := s.SetStream(w.streams[kernelS]); err != nil {
			return err
		}
		if w.devInfo, err = cu.MemAlloc(infoSlots * 4); err != nil {
			return fmt.Errorf("potrf status words: %w", err)
		}
		if w.hostInfo, err = unix.Mmap(-1, 0, infoSlots*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
			return fmt.Errorf("potrf status words: %w", err)
		}
		if err := cu.MemHostRegisterBytes(w.hostInfo, cu.HostRegisterPortable); err != nil {
			// Pageable, the copy of a status word is staged: still right.
			w.d.log.Warn("potrf status words not pinned", "worker", w.rings.Spec.ID, "error", err)
		} else {
			w.infoPinned = true
		}
		for i := infoSlots - 1; i >= 0; i-- {
			w.freeInfo = append(w.freeInfo, i)
		}
	}
	for s := range w.waiters {
		wt := &waiter{ch: make(chan cu.Event, 1)}
		w.waiters[s] = wt
		w.waitWG.Add(1)
		go w.waitLoop(wt)
	}
	return nil
}

// waitLoop is a waiter's loop, on its own locked thread with the device's
// context current.
func (w *worker) waitLoop(wt *waiter) {
	defer w.waitWG.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := w.dev.ctx.SetCurrent(); err != nil {
		w.d.log.Warn("waiter without context", "worker", w.rings.Spec.ID, "error", err)
	}
	for ev := range wt.ch {
		// An error is the command's, which the worker's query reports.
		_ = ev.Synchronize()
		wt.busy.Store(false)
		w.woken.Store(true)
		w.rings.Bell.Ring()
	}
	_ = cu.ClearCurrent()
}

// spin polls the streams' events and ready for up to spinFor (none when
// the core asked for no spinning), and reports whether there is work.
func (w *worker) spin(ready func() bool) bool {
	if w.poll() > 0 || ready() {
		return true
	}
	if w.noSpin {
		return false
	}
	deadline := wire.Now() + int64(spinFor)
	for wire.Now() < deadline {
		if w.poll() > 0 || ready() {
			return true
		}
	}
	return false
}

// lend hands the oldest unfinished command of each stream to the
// stream's waiter, unless it is busy with one already.
func (w *worker) lend() {
	w.unpark()
	for s, q := range w.queued {
		wt := w.waiters[s]
		if len(q) == 0 || wt.busy.Load() {
			continue
		}
		wt.ev = w.slots[q[0]].ev
		wt.busy.Store(true)
		wt.ch <- wt.ev
	}
}

// unpark returns to the pool the events waiters are done with.
func (w *worker) unpark() {
	kept := w.parked[:0]
	for _, ev := range w.parked {
		held := false
		for _, wt := range w.waiters {
			held = held || (wt.busy.Load() && wt.ev == ev)
		}
		if held {
			kept = append(kept, ev)
		} else {
			w.events = append(w.events, ev)
		}
	}
	w.parked = kept
}

// runOnce retires finished commands and queues every message the worker
// may take from the dispatch ring.
func (w *worker) runOnce() error {
	w.poll()
	if err := w.retire(); err != nil {
		return err
	}
	n := 0
	for msg := w.rings.Dispatch.Peek(); w.pipe.MayTake(msg); msg = w.rings.Dispatch.Peek() {
		if err := w.handle(msg); err != nil {
			return err
		}
		w.rings.Dispatch.Release()
		if n++; n%takeBatch == 0 {
			w.poll()
			if err := w.retire(); err != nil {
				return err
			}
		}
	}
	if err := w.rings.Dispatch.Err(); err != nil {
		return fmt.Errorf("dispatch ring: %w", err)
	}
	w.poll()
	if err := w.retire(); err != nil {
		return err
	}
	w.rings.Flush()
	return nil
}

// handle queues one dispatch message. A message the GPU cannot carry out
// is answered by a failed completion; only a broken ring is an error.
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
		if err := w.partsMsg.Decode(msg); err != nil {
			return err
		}
		if err := w.setParts(&w.partsMsg); err != nil {
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

// poll queries the event of the oldest unfinished command of each stream,
// and of the next ones while they report done (a stream finishes in
// order), and returns how many reported.
func (w *worker) poll() int {
	n := 0
	for s := range w.queued {
		q := w.queued[s]
		for len(q) > 0 {
			f := &w.slots[q[0]]
			done, err := f.ev.Query()
			if !done && err == nil {
				break
			}
			f.done, f.err, f.endNs = true, err, wire.Now()
			w.ready = append(w.ready, q[0])
			q = q[1:]
			n++
		}
		if len(q) == 0 {
			q = w.queued[s][:0]
		}
		w.queued[s] = q
	}
	return n
}

// retire posts the completions of the commands that reported, each after
// those of the commands it depended on: streams finish independently,
// completions go out in an order consistent with the data.
func (w *worker) retire() error {
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
	// A command starts when the one before it on its stream ends, or when
	// it was queued if the stream was idle then.
	c := wire.Completion{ID: f.id, StartNs: max(f.enqNs, w.lastEnd[f.stream]), EndNs: f.endNs}
	w.lastEnd[f.stream] = f.endNs
	err := f.err
	if err != nil {
		err = fmt.Errorf("%s: %w", f.what, err)
	} else if f.info >= 0 {
		err = potrfStatus(f.what, int32(binary.LittleEndian.Uint32(w.hostInfo[f.info*4:])))
	}
	if f.info >= 0 {
		w.freeInfo = append(w.freeInfo, f.info)
	}
	for _, k := range f.keys {
		w.forget(k, f.ev)
	}
	w.release(f.ev, f.stream)
	delete(w.live, f.seq)
	if f.exec {
		w.pipe.Ended(f.sync)
	}
	*f = flight{keys: f.keys[:0], after: f.after[:0]}
	w.free = append(w.free, slot)
	w.inflight--
	return w.post(c, err)
}

// potrfStatus is the error a potrf's devInfo word stands for.
func potrfStatus(what string, info int32) error {
	switch {
	case info > 0:
		return fmt.Errorf("%s: matrix not positive definite: the leading minor of order %d is not (cuSOLVER devInfo %d)", what, info, info)
	case info < 0:
		return fmt.Errorf("%s: cuSOLVER rejected argument %d", what, -info)
	}
	return nil
}

// event is an idle event, from the pool or new.
func (w *worker) event() (cu.Event, error) {
	if n := len(w.events); n > 0 {
		ev := w.events[n-1]
		w.events = w.events[:n-1]
		return ev, nil
	}
	return cu.EventCreate(eventFlags)
}

// release returns a finished command's event to the pool, or parks it
// while the stream's waiter still synchronizes on it.
func (w *worker) release(ev cu.Event, s int) {
	if wt := w.waiters[s]; wt.busy.Load() && wt.ev == ev {
		w.parked = append(w.parked, ev)
		return
	}
	w.events = append(w.events, ev)
}

// use is a buffer a command reads or writes.
type use struct {
	k     key
	write bool
}

// launch records an event behind the command just queued on f's stream,
// notes the buffers it uses, and tracks it until the event reports.
func (w *worker) launch(f flight, uses []use) error {
	ev, err := w.event()
	if err == nil {
		if err = ev.Record(w.streams[f.stream]); err != nil {
			w.events = append(w.events, ev)
		}
	}
	if err != nil {
		// Nothing to watch the command by: wait for it here.
		serr := w.streams[f.stream].Synchronize()
		if f.info >= 0 {
			w.freeInfo = append(w.freeInfo, f.info)
		}
		return w.post(wire.Completion{ID: f.id, StartNs: f.enqNs, EndNs: wire.Now()}, fmt.Errorf("%s: %w", f.what, errors.Join(err, serr)))
	}
	var slot int
	if n := len(w.free); n > 0 {
		slot, w.free = w.free[n-1], w.free[:n-1]
	} else {
		slot = len(w.slots)
		w.slots = append(w.slots, flight{})
	}
	f.ev = ev
	f.keys = w.slots[slot].keys[:0]
	for _, u := range uses {
		f.keys = append(f.keys, u.k)
	}
	f.after = append(w.slots[slot].after[:0], w.after...)
	w.seq++
	f.seq = w.seq
	for _, u := range uses {
		w.record(u.k, u.write, f.stream, ev, f.seq)
	}
	w.slots[slot] = f
	w.live[f.seq] = slot
	w.queued[f.stream] = append(w.queued[f.stream], slot)
	w.inflight++
	if f.exec {
		w.pipe.Started(f.sync)
	}
	return nil
}
