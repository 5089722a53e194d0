package core

// Coherency, transfers, eviction; design note: docs/design/memory.md.

import (
	"errors"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// The MSI protocol over a handle's replicates, one per memory node. A
// replicate is invalid, shared (a valid copy, others may exist) or owner
// (the only valid copy, modified). Only the engine goroutine reads or writes
// replicate state; the application's goroutines ask it through engine.call.
// With a single memory node (CPU workers only) none of this runs: the RAM
// replicate is always valid.

type repState uint8

const (
	invalid repState = iota
	shared
	owner
)

// replicate is a handle's copy on one memory node.
type replicate struct {
	h         *Handle
	node      int
	state     repState
	allocated bool
	buf       uint64 // device buffer number (device nodes)
	refs      int    // tasks and acquisitions using it now: not evictable
	filling   *xfer  // the transfer or allocation bringing it up to date
	lastUse   uint64
}

// xfer is an allocation or a copy posted to a device worker, or a copy
// waiting for an earlier one (the second hop of a device-to-device copy).
type xfer struct {
	id      uint64
	waiters []dataWaiter
	then    []func(err error)
	// dev is the device node whose memory the transfer uses: tasks waiting
	// for memory there retry after it. to is the destination of a copy
	// between two device nodes (dev is its source), which is treated the
	// same.
	dev, to *memNode
	// drv, when set, is the driver carrying the transfer out instead of
	// dev's: a multiformat conversion running on a CPU worker.
	drv *driverInst
}

// runner is the driver whose death fails x (engine.checkPlugins).
func (x *xfer) runner() *driverInst {
	if x.drv != nil {
		return x.drv
	}
	if x.dev != nil {
		return x.dev.drv
	}
	return nil
}

// dataWaiter is notified when a transfer it waits for completes.
type dataWaiter interface {
	xferDone(e *engine, err error)
}

func (x *xfer) wait(w dataWaiter) { x.waiters = append(x.waiters, w) }

// finishXfer runs when the driver reports x done: state changes first,
// then the tasks waiting for x, which take hold of their data before the
// tasks waiting for memory get a chance to evict it.
func (e *engine) finishXfer(x *xfer, err error) {
	nodes := [2]*memNode{x.dev, x.to}
	for _, nd := range nodes {
		if nd != nil {
			nd.reqs.inflight--
		}
	}
	for _, f := range x.then {
		f(err)
	}
	for _, w := range x.waiters {
		w.xferDone(e, err)
	}
	for _, nd := range nodes {
		if nd != nil {
			if len(nd.memWaiters) > 0 {
				e.wakeMemWaiters(nd)
			}
			e.pumpAfter(nd)
		}
	}
}

func (e *engine) newXfer() *xfer {
	x := &xfer{id: e.rt.nextJob.Add(1)}
	e.xfers[x.id] = x
	return x
}

// nodeLayout is how handle h is laid out on node n: as registered on RAM,
// packed (no gaps between rows) on device nodes.
func (h *Handle) nodeLayout(n int) kernel.Layout {
	if n == 0 || h.iface != nil {
		return h.layout
	}
	if h.mf != nil {
		return h.mf.layoutOn(h.layout, n)
	}
	l := h.layout
	switch l.Interface {
	case kernel.Matrix:
		l.LD = l.NX
	case kernel.Block:
		l.LD = l.NX
		l.LDZ = l.NX * l.NY
	}
	return l
}

func (h *Handle) nodeSize(n int) uint64 {
	if h.iface != nil {
		return h.size
	}
	if a := h.x.allocSize; a != 0 {
		return a
	}
	return h.nodeLayout(n).Len()
}

// copyPlan is the ranges that carry h from RAM to a device node (reversed
// for the way back): one per contiguous run of the data.
func (h *Handle) copyPlan() []wire.CopyRange {
	if h.plan != nil {
		return h.plan
	}
	l, p := h.layout, h.nodeLayout(1)
	es := uint64(l.ElemSize)
	switch {
	case l.Interface == kernel.Matrix && l.LD != l.NX:
		for j := uint64(0); j < l.NY; j++ {
			h.plan = append(h.plan, wire.CopyRange{SrcOffset: j * l.LD * es, DstOffset: j * p.LD * es, Len: l.NX * es})
		}
	case l.Interface == kernel.Block && (l.LD != l.NX || l.LDZ != l.NX*l.NY):
		for k := uint64(0); k < l.NZ; k++ {
			for j := uint64(0); j < l.NY; j++ {
				h.plan = append(h.plan, wire.CopyRange{SrcOffset: (k*l.LDZ + j*l.LD) * es, DstOffset: (k*p.LDZ + j*p.LD) * es, Len: l.NX * es})
			}
		}
	case h.size > 0:
		h.plan = []wire.CopyRange{{Len: h.size}}
	}
	return h.plan
}

// setValid records in the handle's atomic mask which nodes hold a valid
// copy, for readers outside the engine (transfer predictions, queries).
func (h *Handle) publishValid() {
	var m uint64
	for i := range h.reps {
		if h.reps[i].state != invalid && i < 64 {
			m |= 1 << i
		}
	}
	h.validMask.Store(m)
}

// need makes sure h can be accessed in mode m on node n: allocated there,
// and holding the current value unless m is write-only. It returns the
// transfers the caller must wait for (nil when the replicate is ready).
func (e *engine) need(h *Handle, n int, m Mode, w dataWaiter, since uint64) (pending int, err error) {
	r := &h.reps[n]
	r.lastUse = e.tick()
	if r.filling != nil {
		r.filling.wait(w)
		return 1, nil
	}
	if !r.allocated {
		x, err := e.allocate(r, since)
		if err == errWaitMemory {
			nd := e.rt.nodes[n]
			nd.memWaiters = append(nd.memWaiters, w)
			return 1, nil
		}
		if err != nil {
			return 0, err
		}
		if x != nil {
			x.wait(w)
			return 1, nil
		}
	}
	if m&R == 0 || r.state != invalid {
		return 0, nil
	}
	if !h.anyValid() {
		// No valid copy anywhere (invalidated): the contents are
		// undefined, and this replicate becomes the reference.
		r.state = owner
		h.publishValid()
		return 0, nil
	}
	if h.mf != nil {
		h.mf.since[n] = since // for the conversion's staging (data_multiformat.go)
	}
	e.fetch(h, n).wait(w)
	return 1, nil
}

// fetch starts bringing a valid copy of h, which must exist, to node n and
// returns the transfer that does it: from RAM when it is valid, else from
// a device with a peer link to n (one copy), else through RAM.
func (e *engine) fetch(h *Handle, n int) *xfer {
	src := 0
	if h.reps[0].state == invalid {
		src = -1
		for i := range h.reps {
			if h.reps[i].state != invalid && (src < 0 || !e.rt.direct(src, n) && e.rt.direct(i, n)) {
				src = i
			}
		}
	}
	if src != 0 && n != 0 && (h.mf != nil || !e.rt.direct(src, n)) {
		// Device to device without a peer link goes through RAM, and so
		// does multiformat data (a conversion on each side).
		ram := &h.reps[0]
		first := ram.filling
		if first == nil {
			first = e.copyBetween(h, src, 0)
		}
		// Registered by postCopy when the first hop ends.
		second := &xfer{id: e.rt.nextJob.Add(1)}
		h.reps[n].filling = second
		gen := h.x.gen
		first.then = append(first.then, func(err error) {
			if err != nil || h.x.gen != gen {
				// Failed, or written meanwhile: the waiters look again.
				h.reps[n].filling = nil
				e.finishXfer(second, err)
				return
			}
			e.postCopy(h, 0, n, second)
		})
		return second
	}
	return e.copyBetween(h, src, n)
}

// copyBetween posts a copy of h from src to dst (one of them RAM, or a peer
// link between them) on the device worker's ring, the source's for a copy
// between devices.
func (e *engine) copyBetween(h *Handle, src, dst int) *xfer {
	x := e.newXfer()
	e.postCopy(h, src, dst, x)
	return x
}

func (e *engine) postCopy(h *Handle, src, dst int, x *xfer) {
	if h.mf != nil {
		// Multiformat data changes layout on the way (data_multiformat.go).
		e.convert(h, src, dst, x)
		return
	}
	e.xfers[x.id] = x
	h.reps[dst].filling = x
	dev := dst
	if src != 0 {
		// The source's worker: it orders the read with its own later
		// commands on the buffer (a free, a write), which another
		// worker could not.
		dev = src
	}
	nd := e.rt.nodes[dev]
	x.dev = nd
	nd.reqs.inflight++
	if src != 0 && dst != 0 {
		x.to = e.rt.nodes[dst]
		x.to.reqs.inflight++
	}
	if e.rt.trace != nil {
		e.rt.trace.xferPosted(x.id, h, src, dst)
	}
	// A copy that finishes after the handle was written again carries an
	// old value: it leaves the replicate invalid.
	gen := h.x.gen
	c := wire.Copy{ID: x.id, SrcNode: e.localNode(src), DstNode: e.localNode(dst), SrcBuffer: e.bufferOn(h, src), DstBuffer: e.bufferOn(h, dst)}
	plan := h.copyPlan()
	switch {
	case src != 0 && dst != 0:
		c.Ranges = deviceRanges(plan)
	case dst == 0:
		c.Ranges = make([]wire.CopyRange, len(plan))
		for i, r := range plan {
			c.Ranges[i] = wire.CopyRange{SrcOffset: r.DstOffset, DstOffset: r.SrcOffset, Len: r.Len}
		}
	default:
		c.Ranges = plan
	}
	x.then = append(x.then, func(err error) {
		r := &h.reps[dst]
		r.filling = nil
		if err != nil || h.x.gen != gen {
			return
		}
		r.state = shared
		if s := &h.reps[src]; s.state == owner && (src == 0 || dst == 0) {
			// RAM holds the value now. A device owner that copied to a
			// peer stays the owner: RAM still lacks the value, and the
			// owner is the replicate written back before eviction.
			s.state = shared
		}
		h.publishValid()
	})
	e.postCtl(nd.worker, wire.CopyLen(len(c.Ranges)), c.Encode)
}

// deviceRanges are the ranges of a copy between two device nodes, which
// lay a datum out alike: the device side of each RAM-to-device range,
// runs that touch merged into one.
func deviceRanges(plan []wire.CopyRange) []wire.CopyRange {
	var out []wire.CopyRange
	for _, r := range plan {
		if n := len(out); n > 0 && out[n-1].DstOffset+out[n-1].Len == r.DstOffset {
			out[n-1].Len += r.Len
			continue
		}
		out = append(out, wire.CopyRange{SrcOffset: r.DstOffset, DstOffset: r.DstOffset, Len: r.Len})
	}
	return out
}

func (e *engine) localNode(n int) uint32 {
	if n == 0 {
		return 0
	}
	return e.rt.nodes[n].local
}

func (e *engine) bufferOn(h *Handle, n int) uint64 {
	if n == 0 {
		return h.span.Offset
	}
	return h.reps[n].buf
}

// allocate gives r room on its device node: from the node's cache of freed
// allocations of the same size, or a new allocation, evicting other
// replicates when the node is full. Size is the whole test of a cached
// allocation, for plugin interfaces too (not their AllocFootprint): a
// region is untyped bytes, and where a datum's parts lie travels with each
// Exec and Copy (docs/design/memory.md). It returns the allocation to wait for,
// or nil when a cached one was reused.
func (e *engine) allocate(r *replicate, since uint64) (*xfer, error) {
	nd := e.rt.nodes[r.node]
	size := r.h.nodeSize(r.node)
	if c := nd.cache[size]; len(c) > 0 && !r.h.x.dontCache.Load() {
		r.buf = c[len(c)-1]
		nd.cache[size] = c[:len(c)-1]
		r.allocated = true
		nd.reps[r] = struct{}{}
		e.postParts(nd, r)
		return nil, nil
	}
	if nd.used+size > nd.capacity {
		wait, err := e.makeRoom(nd, size, since)
		if err == errWaitMemory {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: cannot allocate %d bytes for %s: %w", nd.name, size, r.h, err)
		}
		if wait != nil {
			return wait, nil
		}
	}
	e.nextBuf++
	r.buf = e.nextBuf
	r.allocated = true
	nd.used += size
	nd.reps[r] = struct{}{}
	x := e.newXfer()
	x.dev = nd
	nd.reqs.inflight++
	r.filling = x
	x.then = append(x.then, func(err error) {
		r.filling = nil
		if err != nil {
			r.allocated = false
			nd.used -= size
			delete(nd.reps, r)
		}
	})
	a := wire.Alloc{ID: x.id, Node: nd.local, Buffer: r.buf, Size: size}
	e.postCtl(nd.worker, wire.AllocSize, a.Encode)
	e.postParts(nd, r)
	return x, nil
}

// postParts tells nd's worker where the parts of a plugin datum lie in
// the buffer r now gives it, so that its kernels get each part as a
// buffer (wire.Parts): after the Alloc, or whenever a cached buffer,
// which may have held another datum, is reused. It travels on the
// dispatch ring before any Exec that uses the buffer (post flushes
// control messages first).
func (e *engine) postParts(nd *memNode, r *replicate) {
	d := r.h.iface
	if d == nil {
		return
	}
	p := wire.Parts{Node: nd.local, Buffer: r.buf, Parts: d.parts}
	e.postCtl(nd.worker, wire.PartsLen(len(p.Parts)), p.Encode)
}

// makeRoom frees memory on nd for size bytes: first the cache, then
// replicates nobody uses, least recently used first, except those touched
// since the given tick (the data of the task being placed). Dirty ones are
// written back to RAM first, and the allocation waits for the write-back.
// When the memory is held by queued and running tasks, the allocation
// waits for them (errWaitMemory); when nothing else holds any, the data
// cannot fit and that is an error.
func (e *engine) makeRoom(nd *memNode, size uint64, since uint64) (*xfer, error) {
	for sz, bufs := range nd.cache {
		for _, b := range bufs {
			e.freeDevice(nd, b, sz)
		}
		delete(nd.cache, sz)
		if nd.used+size <= nd.capacity {
			return nil, nil
		}
	}
	var victims []*replicate
	var reclaimable, pinned uint64
	for r := range nd.reps {
		switch {
		case r.refs > 0 || r.filling != nil || r.h.reps[0].filling != nil:
			// In use, being filled, or being written back.
			pinned += r.h.nodeSize(nd.id)
		case r.lastUse <= since:
			victims = append(victims, r)
			reclaimable += r.h.nodeSize(nd.id)
		}
	}
	if nd.used-reclaimable+size > nd.capacity {
		if pinned > 0 {
			return nil, errWaitMemory
		}
		return nil, fmt.Errorf("%w: the node has %d bytes, the task's other data takes %d", errOutOfMemory, nd.capacity, nd.used-reclaimable)
	}
	sortVictims(victims, nd.id)
	var wait *xfer
	for _, r := range victims {
		if nd.used+size <= nd.capacity {
			break
		}
		if r.state == owner {
			// Write back; the replicate is clean and goes on the next try.
			wait = e.copyBetween(r.h, nd.id, 0)
			continue
		}
		e.evict(r)
	}
	if nd.used+size <= nd.capacity {
		return nil, nil
	}
	if wait == nil {
		return nil, errWaitMemory
	}
	return wait, nil
}

// errWaitMemory says an allocation must wait for tasks to release memory.
var errWaitMemory = errors.New("wait for device memory")

// wakeMemWaiters retries the allocations that waited for memory on nd.
func (e *engine) wakeMemWaiters(nd *memNode) {
	ws := nd.memWaiters
	nd.memWaiters = nil
	for _, w := range ws {
		w.xferDone(e, nil)
	}
}

// errOutOfMemory reports a device too small for a task's data.
var errOutOfMemory = errors.New("out of device memory")

// sortVictims orders eviction candidates on node: by the hints of their
// handles (see evictionClass), then least recently used first.
func sortVictims(rs []*replicate, node int) {
	less := func(a, b *replicate) bool {
		ca, cb := evictionClass(a, node), evictionClass(b, node)
		return ca < cb || ca == cb && a.lastUse < b.lastUse
	}
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && less(rs[j], rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// evict frees a clean replicate's device memory.
func (e *engine) evict(r *replicate) {
	nd := e.rt.nodes[r.node]
	e.freeDevice(nd, r.buf, r.h.nodeSize(r.node))
	delete(nd.reps, r)
	r.allocated, r.state = false, invalid
	r.h.publishValid()
}

// release drops a replicate that its handle no longer needs, keeping the
// allocation in the node's cache unless the handle says not to
// (SetDontCache). A replicate being filled (by a prefetch) is dropped once
// the transfer ends, so that its buffer is not reused under it.
func (e *engine) release(r *replicate) {
	if !r.allocated {
		return
	}
	if x := r.filling; x != nil {
		x.then = append(x.then, func(error) { e.release(r) })
		return
	}
	nd := e.rt.nodes[r.node]
	delete(nd.reps, r)
	size := r.h.nodeSize(r.node)
	if r.h.x.dontCache.Load() {
		e.freeDevice(nd, r.buf, size)
	} else {
		nd.cache[size] = append(nd.cache[size], r.buf)
	}
	r.allocated, r.state = false, invalid
}

// tidy frees the allocations nd keeps for reuse, returning the bytes given
// back to the device.
func (e *engine) tidy(nd *memNode) uint64 {
	var freed uint64
	for size, bufs := range nd.cache {
		for _, b := range bufs {
			e.freeDevice(nd, b, size)
			freed += size
		}
		delete(nd.cache, size)
	}
	return freed
}

func (e *engine) freeDevice(nd *memNode, buf, size uint64) {
	nd.used -= size
	f := wire.Free{Node: nd.local, Buffer: buf}
	e.postCtl(nd.worker, wire.FreeSize, f.Encode)
}

// written records that node n now holds the only valid copy of h.
func (h *Handle) written(n int) {
	h.x.gen++
	for i := range h.reps {
		h.reps[i].state = invalid
	}
	h.reps[n].state = owner
	h.publishValid()
}

func (e *engine) tick() uint64 {
	e.clock++
	return e.clock
}

// prepare makes j's data ready on its worker's node, starting what is
// missing. It returns true when j can be posted now; it then holds
// references on its replicates there until it completes, so that they are
// not evicted under it.
func (e *engine) prepare(j *job, w *workerState) (bool, error) {
	if j.dataHeld {
		return true, nil
	}
	j.waitWorker = w
	since := e.clock
	pending := 0
	hs, modes := j.buffers()
	for i, h := range hs {
		if h.layout.Interface == kernel.Void {
			continue
		}
		m := modes[i]
		if j.sub && j.modes[i]&^Locality == Scratch {
			m = W // room only: a SCRATCH buffer's contents are undefined
		}
		p, err := e.need(h, w.node, m, j, since)
		if err != nil {
			return false, err
		}
		pending += p
	}
	j.pendingXfers = pending
	if pending > 0 {
		return false, nil
	}
	j.dataHeld, j.node = true, w.node
	for _, h := range hs {
		h.reps[w.node].refs++
	}
	return true, nil
}

// xferDone implements dataWaiter: once its transfers are done the job tries
// again, and is posted when everything is in place.
func (j *job) xferDone(e *engine, err error) {
	if err != nil && j.xferErr == nil {
		j.xferErr = err
	}
	j.pendingXfers--
	if j.pendingXfers > 0 {
		return
	}
	w := j.waitWorker
	if j.xferErr != nil {
		e.fail(j, w.id, fmt.Errorf("%w: task %q: data transfer to %s: %w", ErrTaskFailed, j.name(), e.rt.nodes[w.node].name, j.xferErr))
		return
	}
	e.enqueue(w, j)
}

// dropData releases j's references on its replicates, and records what it
// wrote. It returns the write-through copies (SetWTMask) that the task's
// completion waits for, or nil.
func (e *engine) dropData(j *job, ok bool) (wt *opGroup) {
	if !j.dataHeld {
		e.dropScratch(j)
		return nil
	}
	j.dataHeld = false
	hs, modes := j.buffers()
	for i, h := range hs {
		h.reps[j.node].refs--
		if j.sub && j.node != 0 && j.modes[i]&^Locality == Scratch {
			// Never written back: its allocation goes to the node's cache
			// for the next SCRATCH buffer of its size.
			e.release(&h.reps[j.node])
			continue
		}
		if ok && modes[i]&W != 0 {
			h.written(j.node)
			if h.x.wt.Load() != 0 {
				wt = e.writeThrough(h, j.node, wt)
			}
		}
	}
	if nd := e.rt.nodes[j.node]; len(nd.memWaiters) > 0 {
		e.wakeMemWaiters(nd)
	}
	return wt
}

// dropScratch releases the device allocations of the SCRATCH buffers of a
// job that ends without having held its data (its placement failed).
func (e *engine) dropScratch(j *job) {
	if !j.sub {
		return
	}
	x := j.ext.Load()
	if x == nil || x.acc == nil || x.acc.bufs == nil {
		return
	}
	for i, h := range x.acc.bufs {
		if h == nil || j.modes[i]&^Locality != Scratch {
			continue
		}
		for n := 1; n < len(h.reps); n++ {
			e.release(&h.reps[n])
		}
	}
}

// fetchWaiter waits for the transfers that bring a handle to a node for the
// application (acquire, fetch, unregister).
type fetchWaiter struct {
	h       *Handle
	node    int
	mode    Mode
	pending int
	err     error
	done    chan error
}

func (f *fetchWaiter) xferDone(e *engine, err error) {
	if err != nil && f.err == nil {
		f.err = err
	}
	f.pending--
	if f.pending == 0 {
		f.step(e)
	}
}

func (f *fetchWaiter) step(e *engine) {
	if f.err != nil {
		f.done <- f.err
		return
	}
	p, err := e.need(f.h, f.node, f.mode, f, e.clock)
	if err != nil {
		f.done <- err
		return
	}
	if p > 0 {
		f.pending = p
		return
	}
	if f.mode&W != 0 {
		f.h.written(f.node)
	}
	f.done <- nil
}

// fetchTo brings h to node n for mode m on behalf of the application and
// waits for it. Write modes leave node n with the only valid copy.
func (h *Handle) fetchTo(n int, m Mode) error {
	rt := h.rt
	if !rt.multiNode {
		return nil
	}
	f := &fetchWaiter{h: h, node: n, mode: m, done: make(chan error, 1)}
	rt.engine.call(func() { f.step(rt.engine) })
	return <-f.done
}

// dropReplicates frees h's device copies (into the nodes' caches) once the
// data is back in RAM, at unregister.
func (h *Handle) dropReplicates() {
	rt := h.rt
	if !rt.multiNode {
		return
	}
	rt.engine.wait(func() {
		for i := 1; i < len(h.reps); i++ {
			rt.engine.release(&h.reps[i])
		}
	})
}
