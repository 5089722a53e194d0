package cudadriver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// deps makes stream s wait for the commands of other streams that a
// command on s reading (or writing) buffer k must follow, and adds their
// flights to w.after. Commands of s itself need no waiting, the stream
// being in order, but still order the completions.
func (w *worker) deps(k key, write bool, s int) {
	a := w.acc[k]
	if a == nil {
		return
	}
	if !a.write.IsNil() {
		w.after = append(w.after, a.writeSeq)
		if a.writeS != s {
			w.waits = append(w.waits, a.write)
		}
	}
	if write {
		for rs, r := range a.read {
			if !r.IsNil() {
				w.after = append(w.after, a.readSeq[rs])
				if rs != s {
					w.waits = append(w.waits, r)
				}
			}
		}
	}
}

// wait makes stream s wait for the events deps gathered.
func (w *worker) wait(s int) error {
	for i, ev := range w.waits {
		if slices.Contains(w.waits[:i], ev) {
			continue
		}
		if err := w.streams[s].WaitEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// record notes that the command of ev on stream s, flight seq, reads (or
// writes) k.
func (w *worker) record(k key, write bool, s int, ev cu.Event, seq uint64) {
	a := w.acc[k]
	if a == nil {
		a = &access{}
		w.acc[k] = a
	}
	if write {
		*a = access{write: ev, writeS: s, writeSeq: seq}
	} else {
		a.read[s], a.readSeq[s] = ev, seq
	}
}

// forget drops ev, which has finished, from k's access record.
func (w *worker) forget(k key, ev cu.Event) {
	a := w.acc[k]
	if a == nil {
		return
	}
	if a.write == ev {
		a.write = cu.Event{}
	}
	for s := range a.read {
		if a.read[s] == ev {
			a.read[s] = cu.Event{}
		}
	}
	if k.node != w.node && len(a.events()) == 0 {
		// RAM and a peer's buffers come and go without this worker's
		// knowledge: their records live only while commands use them.
		delete(w.acc, k)
	}
}

// bufTable is a worker's buffers as its peers see them: the workers that
// copy into its GPU's memory look the destination up here (under mu, the
// owner changing it at each Alloc and Free).
type bufTable struct {
	mu sync.Mutex
	m  map[uint64]devBuf
}

func (t *bufTable) get(buf uint64) (devBuf, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.m[buf]
	return b, ok
}

func (t *bufTable) set(buf uint64, b *devBuf) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b == nil {
		delete(t.m, buf)
	} else {
		t.m[buf] = devBuf{ptr: b.ptr, size: b.size}
	}
}

// alloc creates a device buffer, within the node's memory limit.
func (w *worker) alloc(a *wire.Alloc) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("alloc of %d bytes for buffer %d on node %d (%s): %s", a.Size, a.Buffer, a.Node, w.dev.name, fmt.Sprintf(format, args...))
	}
	if a.Node != w.node {
		return fail("this worker's GPU is node %d", w.node)
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
		p, err := cu.MemAlloc(a.Size)
		if err != nil {
			if errors.Is(err, cu.ErrorOutOfMemory) {
				return fail("out of memory: %d of the node's %d bytes in use, and the GPU has no %d bytes free (%v)", w.used, limit, a.Size, err)
			}
			return fail("%v", err)
		}
		b.ptr = p
	}
	w.bufs[a.Buffer] = b
	w.used += a.Size
	if w.exported != nil {
		w.exported.set(a.Buffer, b)
	}
	return nil
}

// freeBuf frees a device buffer. The core frees a buffer once the commands
// it knows of are answered; one still queued (which the core should not
// leave) is waited for first, as cuMemFree does not wait for it.
func (w *worker) freeBuf(f *wire.Free) error {
	b := w.bufs[f.Buffer]
	if f.Node != w.node || b == nil {
		return fmt.Errorf("free of buffer %d on node %d: no such buffer on this worker's GPU (node %d)", f.Buffer, f.Node, w.node)
	}
	k := key{w.node, f.Buffer}
	var errs []error
	if a := w.acc[k]; a != nil {
		for _, ev := range a.events() {
			errs = append(errs, ev.Synchronize())
		}
	}
	delete(w.bufs, f.Buffer)
	delete(w.acc, k)
	if w.exported != nil {
		w.exported.set(f.Buffer, nil)
	}
	w.used -= b.size
	if b.ptr != 0 {
		errs = append(errs, cu.MemFree(b.ptr))
	}
	return errors.Join(errs...)
}

// setParts records where the parts of the plugin datum a device buffer
// now holds lie: a kernel gets a pointer to each. A part outside the
// buffer leaves it with an error that fails the Execs using it.
func (w *worker) setParts(p *wire.Parts) error {
	b := w.bufs[p.Buffer]
	if p.Node != w.node || b == nil {
		return fmt.Errorf("parts of buffer %d on node %d: no such buffer on this worker's GPU (node %d)", p.Buffer, p.Node, w.node)
	}
	b.hasParts, b.partsErr = true, nil
	b.parts = append(b.parts[:0], p.Parts...)
	for i, r := range p.Parts {
		if r.Offset > b.size || r.Size > b.size-r.Offset {
			b.partsErr = fmt.Errorf("part %d, bytes [%d, +%d), lies outside device buffer %d of %d bytes", i, r.Offset, r.Size, p.Buffer, b.size)
			break
		}
	}
	return nil
}

// side is one end of a copy.
type side struct {
	node uint32
	buf  uint64
	dev  *devBuf // nil for RAM
	// peer is the worker of another GPU the side lies on (a peer copy's
	// destination), nil on RAM and this worker's GPU.
	peer *worker
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
	if p := w.peers[node]; p != nil {
		b, ok := p.exported.get(buf)
		if !ok {
			return side{}, fmt.Errorf("device buffer %d is not allocated on node %d (%s)", buf, node, p.dev.name)
		}
		return side{node: node, buf: buf, dev: &b, peer: p}, nil
	}
	if len(w.peers) > 0 {
		return side{}, fmt.Errorf("node %d is neither RAM (0), this worker's GPU (%d) nor one it has peer access to", node, w.node)
	}
	return side{}, fmt.Errorf("node %d is neither RAM (0) nor this worker's GPU (%d)", node, w.node)
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

// copyStream is the stream of a copy's direction.
func copyStream(src, dst side) int {
	switch {
	case src.dev == nil:
		return h2dS
	case dst.dev == nil:
		return d2hS
	}
	return d2dS
}

// enqueueCopy queues a Copy's ranges on the stream of its direction, after
// the commands that write its source or use its destination. Every range
// is checked before any is queued.
func (w *worker) enqueueCopy(c *wire.Copy, now int64) error {
	what := fmt.Sprintf("copy %d->%d", c.SrcNode, c.DstNode)
	src, err := w.side(c.SrcNode, c.SrcBuffer)
	if err != nil {
		return fmt.Errorf("%s: source: %w", what, err)
	}
	if c.SrcNode != w.node && w.peers[c.SrcNode] != nil {
		// The source's worker orders the read with its own later
		// commands on the buffer (a Free waits for it); this one cannot.
		return fmt.Errorf("%s: a copy between two GPUs goes to the source's worker (node %d), not this one (node %d)", what, c.SrcNode, w.node)
	}
	dst, err := w.side(c.DstNode, c.DstBuffer)
	if err != nil {
		return fmt.Errorf("%s: destination: %w", what, err)
	}
	if src.dev == nil && dst.dev == nil {
		return fmt.Errorf("%s: RAM to RAM is not a device transfer", what)
	}
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
	}
	s := copyStream(src, dst)
	srcKey, dstKey := key{src.node, src.buf}, key{dst.node, dst.buf}
	w.waits, w.after = w.waits[:0], w.after[:0]
	w.deps(srcKey, false, s)
	w.deps(dstKey, true, s)
	if err := w.wait(s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	st := w.streams[s]
	for i, r := range c.Ranges {
		if r.Len == 0 {
			continue
		}
		var err error
		switch s {
		case h2dS:
			host, _ := w.bytes(src, r.SrcOffset, r.Len)
			err = cu.MemcpyHtoDAsyncBytes(dst.dev.ptr.Offset(r.DstOffset), host, st)
		case d2hS:
			host, _ := w.bytes(dst, r.DstOffset, r.Len)
			err = cu.MemcpyDtoHAsyncBytes(host, src.dev.ptr.Offset(r.SrcOffset), st)
		case d2dS:
			if dst.peer != nil {
				err = cu.MemcpyPeerAsync(dst.dev.ptr.Offset(r.DstOffset), dst.peer.dev.ctx, src.dev.ptr.Offset(r.SrcOffset), w.dev.ctx, r.Len, st)
			} else {
				err = cu.MemcpyDtoDAsync(dst.dev.ptr.Offset(r.DstOffset), src.dev.ptr.Offset(r.SrcOffset), r.Len, st)
			}
		}
		if err != nil {
			// Ranges before it are queued: let them finish so that no
			// later command overlaps them.
			return fmt.Errorf("%s: range %d: %w", what, i, errors.Join(err, st.Synchronize()))
		}
	}
	w.uses = append(w.uses[:0], use{srcKey, false}, use{dstKey, true})
	return w.launch(flight{id: c.ID, stream: s, what: what, enqNs: now, info: -1}, w.uses)
}

// wideShape: a plugin interface's shape parameters are 64-bit, since its
// fields may use all 64 bits (BCSR's LDZ holds its block size in the high
// ones, a region may pass 4 GiB), as in the OpenCL driver.
func wideShape(l kernel.Layout) bool { return l.Interface >= kernel.FirstPluginInterface }

// shapeArgs are the unsigned parameters that follow a buffer's device
// pointer in the calling convention (OpenCL's): 32-bit, 64-bit for plugin
// interfaces (wideShape).
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

// Block shapes of the calling convention, by the launch's dimensions.
var blockShapes = [4]cu.Dim3{{X: 1, Y: 1, Z: 1}, {X: 256, Y: 1, Z: 1}, {X: 16, Y: 16, Z: 1}, {X: 8, Y: 8, Z: 4}}

// Grid limits of every GPU since compute capability 3.0.
const (
	maxGridX  = math.MaxInt32
	maxGridYZ = 65535
)

// geometry is the launch of the calling convention: one thread per element
// of the first buffer written (else the first buffer) in 1, 2 or 3
// dimensions (vector, matrix, block), in blocks of fixed shape; a single
// thread for any other buffer or none. empty says a dimension is 0: the
// kernel is not launched.
func geometry(bufs []wire.BufferDesc) (grid, block cu.Dim3, empty bool, err error) {
	var dims []uint64
	if len(bufs) > 0 {
		pick := bufs[0].Layout
		for _, b := range bufs {
			if b.Mode&kernel.W != 0 {
				pick = b.Layout
				break
			}
		}
		switch pick.Interface {
		case kernel.Vector:
			dims = []uint64{pick.NX}
		case kernel.Matrix:
			dims = []uint64{pick.NX, pick.NY}
		case kernel.Block:
			dims = []uint64{pick.NX, pick.NY, pick.NZ}
		}
	}
	block = blockShapes[len(dims)]
	grid = cu.Dim3{X: 1, Y: 1, Z: 1}
	bs := [3]uint32{block.X, block.Y, block.Z}
	var g [3]uint64
	for i, n := range dims {
		if n == 0 {
			return grid, block, true, nil
		}
		g[i] = (n + uint64(bs[i]) - 1) / uint64(bs[i])
	}
	if len(dims) > 0 {
		if g[0] > maxGridX || g[1] > maxGridYZ || g[2] > maxGridYZ {
			return grid, block, false, fmt.Errorf("a grid of %dx%dx%d blocks of %dx%dx%d threads for a shape of %v exceeds the GPU's grid limits", g[0], g[1], g[2], block.X, block.Y, block.Z, dims)
		}
		grid.X = uint32(g[0])
		if len(dims) > 1 {
			grid.Y = uint32(g[1])
		}
		if len(dims) > 2 {
			grid.Z = uint32(g[2])
		}
	}
	return grid, block, false, nil
}

// enqueueExec queues a task's kernel on the kernel stream, after the
// commands its buffers wait for. Everything is checked before anything is
// queued.
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
	w.ptrs = w.ptrs[:0]
	w.uses = w.uses[:0]
	for i, b := range e.Buffers {
		if b.Layout.Interface == kernel.Void {
			w.ptrs = append(w.ptrs, 0)
			continue
		}
		if uint32(b.Node) != w.node {
			return fail("buffer %d is on node %d, not on this worker's GPU (node %d): the core must copy it there first", i, b.Node, w.node)
		}
		db := w.bufs[b.Offset]
		if db == nil {
			return fail("buffer %d: device buffer %d is not allocated", i, b.Offset)
		}
		if need := b.Layout.Len(); need > db.size {
			return fail("buffer %d: its layout spans %d bytes, device buffer %d has %d", i, need, b.Offset, db.size)
		}
		if wideShape(b.Layout) {
			switch {
			case db.partsErr != nil:
				return fail("buffer %d: %v", i, db.partsErr)
			case !db.hasParts:
				return fail("buffer %d holds a plugin interface's datum, but the core never said where its parts lie in device buffer %d (no Parts message)", i, b.Offset)
			}
		}
		w.ptrs = append(w.ptrs, db.ptr)
		w.uses = append(w.uses, use{key{w.node, b.Offset}, b.Mode&kernel.W != 0})
	}
	var grid, block cu.Dim3
	empty := false
	if dk.lib != nil {
		if (dk.lib.name == "potrf" && w.solver == nil) || (dk.lib.name != "potrf" && w.blas == nil) {
			return fail("its library did not load on this worker")
		}
		if err := dk.lib.validate(e.Buffers, e.Arg); err != nil {
			return fail("%v", err)
		}
	} else {
		var err error
		if grid, block, empty, err = geometry(e.Buffers); err != nil {
			return fail("%v", err)
		}
		if err := w.setParams(e); err != nil {
			return fail("%v", err)
		}
	}
	w.waits, w.after = w.waits[:0], w.after[:0]
	for _, u := range w.uses {
		w.deps(u.k, u.write, kernelS)
	}
	if err := w.wait(kernelS); err != nil {
		return fail("%v", err)
	}
	f := flight{id: e.ID, stream: kernelS, what: what, enqNs: now, info: -1, exec: true, sync: w.pipe.Sync(e.Flags)}
	var err error
	switch {
	case dk.lib != nil:
		err = dk.lib.run(w, e.Buffers, w.ptrs, e.Arg, &f)
	case !empty:
		err = cu.LaunchKernel(dk.fn, grid, block, 0, w.streams[kernelS], w.params)
	}
	if err != nil {
		// A library call may have queued part of its work: let it end
		// before the buffers are used again.
		return fail("%v", errors.Join(err, w.streams[kernelS].Synchronize()))
	}
	return w.launch(f, w.uses)
}

// setParams builds the kernel parameters of the calling convention in
// w.params: per buffer its device pointer (a pointer to each part of a
// plugin interface's datum, 0 for an empty one) then its shape as 32-bit
// unsigned integers (64-bit for a plugin interface: wideShape), then the
// task's argument bytes as one parameter passed by value, when there are
// any.
func (w *worker) setParams(e *wire.Exec) error {
	ndims, nwide, nptrs := 0, 0, 0
	for i, b := range e.Buffers {
		shape, err := shapeArgs(b.Layout)
		if err != nil {
			return fmt.Errorf("buffer %d: %w", i, err)
		}
		if wideShape(b.Layout) {
			nwide += len(shape)
			nptrs += len(w.bufs[b.Offset].parts)
			continue
		}
		for _, v := range shape {
			if v > math.MaxUint32 {
				return fmt.Errorf("buffer %d: dimension %d does not fit a 32-bit parameter", i, v)
			}
		}
		ndims += len(shape)
		nptrs++
	}
	// The parameters point into these; sized first so that they do not
	// move while pointers are taken.
	w.ptrVals = slices.Grow(w.ptrVals[:0], nptrs)[:nptrs]
	w.dimVals = slices.Grow(w.dimVals[:0], ndims)[:ndims]
	w.wideVals = slices.Grow(w.wideVals[:0], nwide)[:nwide]
	w.params = w.params[:0]
	d, wd, p := 0, 0, 0
	for i, b := range e.Buffers {
		shape, _ := shapeArgs(b.Layout)
		if wideShape(b.Layout) {
			for _, part := range w.bufs[b.Offset].parts {
				w.ptrVals[p] = 0
				if part.Size > 0 {
					w.ptrVals[p] = w.ptrs[i].Offset(part.Offset)
				}
				w.params = append(w.params, unsafe.Pointer(&w.ptrVals[p]))
				p++
			}
			for _, v := range shape {
				w.wideVals[wd] = v
				w.params = append(w.params, unsafe.Pointer(&w.wideVals[wd]))
				wd++
			}
			continue
		}
		w.ptrVals[p] = w.ptrs[i]
		w.params = append(w.params, unsafe.Pointer(&w.ptrVals[p]))
		p++
		for _, v := range shape {
			w.dimVals[d] = uint32(v)
			w.params = append(w.params, unsafe.Pointer(&w.dimVals[d]))
			d++
		}
	}
	if len(e.Arg) > 0 {
		// The argument is read by cuLaunchKernel before it returns, while
		// the message is still on the ring.
		w.params = append(w.params, unsafe.Pointer(&e.Arg[0]))
	}
	return nil
}

// workspace is potrf's workspace of at least n bytes, grown (doubling) as
// needed. A smaller one may still be used by a potrf queued before: the
// kernel stream passes it before it is freed.
func (w *worker) workspace(n uint64) (cu.DevicePtr, error) {
	if n <= w.workSize {
		return w.work, nil
	}
	if w.work != 0 {
		if err := w.streams[kernelS].Synchronize(); err != nil {
			return 0, err
		}
		if err := cu.MemFree(w.work); err != nil {
			return 0, err
		}
		w.work, w.workSize = 0, 0
	}
	size := max(n, 2*w.workSize)
	p, err := cu.MemAlloc(size)
	if err != nil {
		return 0, fmt.Errorf("potrf workspace of %d bytes: %w", size, err)
	}
	w.work, w.workSize = p, size
	return p, nil
}

// infoSlot is a free devInfo slot for a potrf.
func (w *worker) infoSlot() (int, error) {
	n := len(w.freeInfo)
	if n == 0 {
		return 0, fmt.Errorf("more than %d potrf in flight", infoSlots)
	}
	s := w.freeInfo[n-1]
	w.freeInfo = w.freeInfo[:n-1]
	return s, nil
}

// drain finishes the worker's tasks at Deinit: those in flight and, when
// ring is set, those still on the dispatch ring that the pipeline held
// back (Deinit ends the tasks sent before it). It posts their completions
// while the core still reads them.
func (w *worker) drain(ring bool) {
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
		if ring && w.pipe.MayTake(w.rings.Dispatch.Peek()) {
			continue
		}
		if w.poll() == 0 {
			w.lend()
			w.rings.Bell.Wait(w.woken.Load, 0, 100*time.Millisecond)
			w.woken.Store(false)
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

// close is StarPU's deinit for the worker: it stops the waiters and frees
// what the worker holds. Buffers are only freed once nothing is in flight:
// a command may still use them.
func (w *worker) close() {
	for _, wt := range w.waiters {
		if wt != nil {
			close(wt.ch)
		}
	}
	w.waitWG.Wait()
	var errs []error
	if w.inflight == 0 {
		for id, b := range w.bufs {
			if b.ptr != 0 {
				errs = append(errs, cu.MemFree(b.ptr))
			}
			delete(w.bufs, id)
		}
		w.used = 0
		for _, ev := range append(w.events, w.parked...) {
			errs = append(errs, ev.Destroy())
		}
		w.events, w.parked = nil, nil
		if w.work != 0 {
			errs = append(errs, cu.MemFree(w.work))
			w.work, w.workSize = 0, 0
		}
		if w.devInfo != 0 {
			errs = append(errs, cu.MemFree(w.devInfo))
			w.devInfo = 0
		}
		if w.hostInfo != nil {
			if w.infoPinned {
				errs = append(errs, cu.MemHostUnregister(unsafe.Pointer(&w.hostInfo[0])))
			}
			errs = append(errs, unix.Munmap(w.hostInfo))
			w.hostInfo = nil
		}
	}
	if w.blas != nil {
		errs = append(errs, w.blas.Destroy())
		w.blas = nil
	}
	if w.solver != nil {
		errs = append(errs, w.solver.Destroy())
		w.solver = nil
	}
	for s, st := range w.streams {
		if !st.IsNil() {
			errs = append(errs, st.Destroy())
			w.streams[s] = cu.Stream{}
		}
	}
	w.acc = map[key]*access{}
	errs = append(errs, cu.ClearCurrent())
	if err := errors.Join(errs...); err != nil {
		w.d.log.Warn("worker deinit", "worker", w.rings.Spec.ID, "device", w.dev.name, "error", err)
	}
}
