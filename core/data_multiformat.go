package core

// Multiformat data; design note: docs/design/memory.md.

import (
	"fmt"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// MultiformatOps describes data laid out one way in RAM and another on each
// kind of device (StarPU's starpu_multiformat_data_interface_ops): an
// array of structs for CPU kernels, a struct of arrays for OpenCL or CUDA
// ones, say. Kernels see the layout of the node they run on as a vector of
// the registered number of objects, each of that architecture's element
// size; the runtime converts when a copy moves between RAM and a device.
//
// A conversion codelet takes two buffers: the source layout (R), then the
// destination layout (W), each a vector of that layout's element size;
// its Modes are nil or {R, W}. As in StarPU, the conversion to a device's
// layout runs on that device's worker (CPUToOpenCL needs an OpenCL kernel,
// CPUToCUDA a CUDA one) and the conversion back runs on a CPU worker
// (OpenCLToCPU and CUDAToCPU need CPU kernels).
//
// An architecture's three fields go together. Every device architecture the
// runtime has workers for needs its layout: registration refuses the data
// otherwise, as it refuses element sizes that do not fit.
type MultiformatOps struct {
	// CPUElemSize is the bytes of one object in RAM, the layout of CPU
	// kernels, Acquire, Unregister, Pack and MPI messages. It must be the
	// size of the registered slice's element type; 0 means that size.
	CPUElemSize int
	// OpenCLElemSize is the bytes of one object in the OpenCL layout;
	// CPUToOpenCL converts the RAM layout into it on an OpenCL worker,
	// OpenCLToCPU converts it back on a CPU worker.
	OpenCLElemSize           int
	CPUToOpenCL, OpenCLToCPU *Codelet
	// CUDAElemSize, CPUToCUDA and CUDAToCPU are the same for CUDA devices.
	CUDAElemSize         int
	CPUToCUDA, CUDAToCPU *Codelet
}

// mfFormat is one device architecture's layout of a multiformat handle.
type mfFormat struct {
	arch     driver.Arch
	elemSize uint64
	// toDev and toCPU are the conversion codelets, resolved when the
	// runtime has workers of arch.
	toDev, toCPU         *Codelet
	toDevInfo, toCPUInfo *codeletInfo
}

// multiformat is a handle's multiformat state. The handle's own layout is
// its RAM one; byNode gives the device layouts. Only the engine goroutine
// uses the fields below byNode.
type multiformat struct {
	n      uint64
	byNode []*mfFormat // nil for RAM and for nodes no worker computes on
	// stage carries the RAM layout to a device for the conversion there:
	// a handle never registered, whose RAM replicate is the handle's own
	// and whose device replicates live for one conversion.
	stage *Handle
	// stageKey is the value stage's RAM replicate was last marked valid
	// for: the handle's write generation and conversions into RAM.
	stageKey [2]uint64
	staged   bool
	fills    uint64
	// back receives a device layout in RAM for the conversion there; one
	// at a time, since only one copy into RAM runs per handle.
	back     base.Span
	backBusy bool
	// since is, per node, the tick of the placement that asked for a
	// conversion there: the staging allocation evicts nothing it uses.
	since []uint64
	// next is where the search for a CPU worker to convert on starts.
	next int
}

// RegisterMultiformat registers objs, an array of structs in RAM, as
// multiformat data (StarPU's starpu_multiformat_data_register): tasks on a
// device see it in that architecture's layout, converted by ops's codelets
// when it moves there and back. objs is the data's home, as for
// RegisterVector: Acquire and Unregister bring the value back into it, in
// its own layout. T must hold no pointers, slices, strings or maps (its
// bytes travel to other processes).
//
// Multiformat data cannot be partitioned (StarPU has no multiformat
// filter); its reduction methods (REDUX) must run on CPU workers only, as
// its per-worker contributions are in the RAM layout.
func RegisterMultiformat[T any](rt *Runtime, objs []T, ops MultiformatOps) (*Handle, error) {
	if err := rt.usable(); err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%w: multiformat: empty slice", ErrInvalidData)
	}
	typ := reflect.TypeFor[T]()
	if err := plainType(typ); err != nil {
		return nil, fmt.Errorf("%w: multiformat: element type %v: %w", ErrInvalidData, typ, err)
	}
	es := uint64(typ.Size())
	switch {
	case es == 0 || es > 1<<31:
		return nil, fmt.Errorf("%w: multiformat: element type %v has %d bytes", ErrInvalidData, typ, es)
	case ops.CPUElemSize != 0 && uint64(ops.CPUElemSize) != es:
		return nil, fmt.Errorf("%w: multiformat: CPUElemSize = %d, but the element type %v has %d bytes", ErrInvalidData, ops.CPUElemSize, typ, es)
	}
	n := uint64(len(objs))
	mf, err := rt.newMultiformat(n, es, ops)
	if err != nil {
		return nil, err
	}
	l := kernel.Layout{Interface: kernel.Vector, ElemSize: uint32(es), NX: n}
	h, err := rt.registerAlloc(l, unsafe.Pointer(&objs[0]), n*es, 0)
	if err != nil {
		_ = mf.free(rt)
		return nil, fmt.Errorf("multiformat: %w", err)
	}
	mf.attach(h)
	return h, nil
}

// plainType says why values of t cannot be copied between processes as
// bytes, if they cannot.
func plainType(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Array:
		return plainType(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if err := plainType(f.Type); err != nil {
				return fmt.Errorf("field %s: %w", f.Name, err)
			}
		}
		return nil
	}
	return fmt.Errorf("a %v is a reference, meaningless in another process; use numbers, arrays and structs of them", t.Kind())
}

// newMultiformat checks ops for n objects of cpuES bytes against the
// runtime's workers and resolves the conversion codelets they need.
func (rt *Runtime) newMultiformat(n, cpuES uint64, ops MultiformatOps) (*multiformat, error) {
	devs := []struct {
		arch         driver.Arch
		es           int
		toDev, toCPU *Codelet
	}{
		{driver.OpenCL, ops.OpenCLElemSize, ops.CPUToOpenCL, ops.OpenCLToCPU},
		{driver.CUDA, ops.CUDAElemSize, ops.CPUToCUDA, ops.CUDAToCPU},
	}
	formats := map[driver.Arch]*mfFormat{}
	for _, d := range devs {
		if d.es == 0 && d.toDev == nil && d.toCPU == nil {
			continue
		}
		esF, toF, backF := mfFields(d.arch)
		switch {
		case d.es <= 0 || d.es > 1<<31:
			return nil, fmt.Errorf("%w: multiformat: %s = %d: the %s layout needs a positive element size", ErrInvalidData, esF, d.es, d.arch)
		case d.toDev == nil:
			return nil, fmt.Errorf("%w: multiformat: %s is nil: %s is given, and the %s layout needs the conversion from the CPU layout", ErrInvalidData, toF, esF, d.arch)
		case d.toCPU == nil:
			return nil, fmt.Errorf("%w: multiformat: %s is nil: %s is given, and the %s layout needs the conversion back to the CPU layout", ErrInvalidData, backF, esF, d.arch)
		}
		if hi, _ := bits.Mul64(n, uint64(d.es)); hi != 0 {
			return nil, fmt.Errorf("%w: multiformat: %d objects of %d bytes (%s)", ErrInvalidData, n, d.es, esF)
		}
		formats[d.arch] = &mfFormat{arch: d.arch, elemSize: uint64(d.es), toDev: d.toDev, toCPU: d.toCPU}
	}
	if hi, _ := bits.Mul64(n, cpuES); hi != 0 {
		return nil, fmt.Errorf("%w: multiformat: %d objects of %d bytes", ErrInvalidData, n, cpuES)
	}
	mf := &multiformat{n: n, byNode: make([]*mfFormat, len(rt.nodes)), since: make([]uint64, len(rt.nodes))}
	var back uint64
	for d, drv := range rt.drivers {
		arch := drv.fp.Arch
		for _, w := range drv.workers {
			if w.node == 0 {
				if arch != driver.CPU {
					return nil, fmt.Errorf("%w: multiformat: driver-%s's %s workers compute in RAM, where the data has the CPU layout", ErrInvalidData, drv.name, arch)
				}
				continue
			}
			f := formats[arch]
			if f == nil {
				esF, toF, backF := mfFields(arch)
				return nil, fmt.Errorf("%w: multiformat: the runtime has %s workers (%s), and the data has no %s layout: give %s, %s and %s", ErrNoWorker, arch, rt.nodes[w.node].name, arch, esF, toF, backF)
			}
			if err := rt.resolveConversions(f, d); err != nil {
				return nil, err
			}
			mf.byNode[w.node] = f
			back = max(back, n*f.elemSize)
		}
	}
	if back > 0 {
		s, err := rt.arena.Alloc(back)
		if err != nil {
			return nil, fmt.Errorf("multiformat: room for the device layouts in RAM: %w", err)
		}
		mf.back = s
	}
	return mf, nil
}

// mfFields names MultiformatOps's fields for architecture a.
func mfFields(a driver.Arch) (elemSize, to, back string) {
	switch a {
	case driver.OpenCL:
		return "OpenCLElemSize", "CPUToOpenCL", "OpenCLToCPU"
	case driver.CUDA:
		return "CUDAElemSize", "CPUToCUDA", "CUDAToCPU"
	}
	return "(no field for " + string(a) + ")", "(none)", "(none)"
}

// resolveConversions resolves f's codelets for driver d's workers: the
// conversion to f's layout must run there, the one back on a CPU worker.
func (rt *Runtime) resolveConversions(f *mfFormat, d int) error {
	_, to, back := mfFields(f.arch)
	if f.toDevInfo == nil {
		info, err := rt.resolveConversion(f.toDev, to)
		if err != nil {
			return err
		}
		f.toDevInfo = info
	}
	if f.toDevInfo.implMask[d] == 0 {
		return fmt.Errorf("%w: multiformat: %s codelet %q has no kernel driver-%s hosts: the conversion to the %s layout runs on %s workers (wants %s)", ErrNoWorker, to, f.toDev.Name, rt.drivers[d].name, f.arch, f.arch, describeKernels(f.toDev))
	}
	if f.toCPUInfo == nil {
		info, err := rt.resolveConversion(f.toCPU, back)
		if err != nil {
			return err
		}
		ok := false
		for _, w := range rt.workers {
			ok = ok || w.node == 0 && info.implMask[w.driverIdx] != 0
		}
		if !ok {
			return fmt.Errorf("%w: multiformat: %s codelet %q has no kernel a CPU worker hosts: the conversion back to the CPU layout runs on CPU workers (wants %s; %s)", ErrNoWorker, back, f.toCPU.Name, describeKernels(f.toCPU), rt.describeDrivers())
		}
		f.toCPUInfo = info
	}
	return nil
}

// resolveConversion resolves a conversion codelet, named field in the
// errors, and checks its buffers.
func (rt *Runtime) resolveConversion(cl *Codelet, field string) (*codeletInfo, error) {
	if n := cl.nbuffers(); n != 0 && (n != 2 || cl.Modes[0]&^Locality != R || cl.Modes[1]&^Locality != W) {
		return nil, fmt.Errorf("%w: multiformat: %s codelet %q: a conversion takes two buffers, the source layout (R) and the destination (W); its Modes are nil or {R, W}", ErrInvalidTask, field, cl.Name)
	}
	info, err := rt.resolve(cl)
	if err != nil {
		return nil, fmt.Errorf("multiformat: %s codelet: %w", field, err)
	}
	if info.nowhere {
		return nil, fmt.Errorf("%w: multiformat: %s codelet %q runs nowhere", ErrInvalidTask, field, cl.Name)
	}
	return info, nil
}

// attach makes mf h's multiformat state; h is not shared yet.
func (mf *multiformat) attach(h *Handle) {
	h.mf = mf
	if !h.rt.multiNode {
		return
	}
	// The stage is a plain vector of the RAM layout, over h's RAM replicate.
	mf.stage = h.rt.newHandle(h.layout, h.size)
	mf.stage.span = h.span
}

// free gives back mf's RAM for device layouts.
func (mf *multiformat) free(rt *Runtime) error {
	if mf.back.Size == 0 {
		return nil
	}
	s := mf.back
	mf.back = base.Span{}
	return rt.arena.Free(s)
}

// layoutOn is the layout on node n of data whose RAM layout is l.
func (mf *multiformat) layoutOn(l kernel.Layout, n int) kernel.Layout {
	if f := mf.byNode[n]; f != nil {
		l.ElemSize = uint32(f.elemSize)
	}
	return l
}

// registerSameMultiformat is RegisterSame for multiformat data: a new
// multiformat handle with the same layouts and conversions, zeroed.
func (h *Handle) registerSameMultiformat() (*Handle, error) {
	rt, old := h.rt, h.mf
	mf := &multiformat{n: old.n, byNode: old.byNode, since: make([]uint64, len(old.since))}
	if old.back.Size > 0 {
		s, err := rt.arena.Alloc(old.back.Size)
		if err != nil {
			return nil, fmt.Errorf("register same as %s: room for the device layouts in RAM: %w", h, err)
		}
		mf.back = s
	}
	n, err := rt.allocNoHome(rt.newHandle(h.layout, h.size))
	if err != nil {
		_ = mf.free(rt)
		return nil, err
	}
	mf.attach(n)
	return n, nil
}

// noFilter refuses to cut multiformat data, for op (partition, plan).
func (h *Handle) noFilter(op string) error {
	if h.mf == nil {
		return nil
	}
	return fmt.Errorf("%w: %s %s: multiformat data cannot be partitioned (StarPU has no multiformat filter either): a part would need layouts and conversions of its own", ErrInvalidData, op, h)
}

// checkReduction refuses reduction methods of multiformat data that may
// run on a device: the per-worker contributions are in the RAM layout, and
// a reduction on a device would mix them with the device layout.
func (h *Handle) checkReduction(redux *Codelet, ri *codeletInfo, init *Codelet, ii *codeletInfo) error {
	if h.mf == nil {
		return nil
	}
	cpu := driver.ArchBit(driver.CPU)
	for _, c := range []struct {
		what string
		cl   *Codelet
		info *codeletInfo
	}{{"reduction", redux, ri}, {"init", init, ii}} {
		if c.info.archMask&^cpu != 0 {
			return fmt.Errorf("%w: reduction methods of %s: %s codelet %q runs on %s; for multiformat data both must run on CPU workers only (set Where to WhereCPU), since contributions are in the CPU layout", ErrInvalidTask, h, c.what, c.cl.Name, describeWhere(c.info.archMask))
		}
	}
	return nil
}

// The engine's side: conversions in place of copies (postCopy). Each step
// is a transfer of its own in e.xfers, so that a driver's death fails it
// (checkPlugins); the copy's own transfer x, which the caller waits for,
// ends with the last step.

// convert is postCopy for multiformat data: it brings h's replicate on
// dst up to date from src (one of them RAM), in dst's layout, and ends x.
// The bookkeeping is postCopy's.
func (e *engine) convert(h *Handle, src, dst int, x *xfer) {
	// No completion carries x's ID (copyBetween registered it): its last
	// step ends it, and a driver's death fails that step.
	delete(e.xfers, x.id)
	h.reps[dst].filling = x
	dev := max(src, dst)
	nd := e.rt.nodes[dev]
	x.dev = nd
	nd.reqs.inflight++
	gen := h.x.gen
	x.then = append(x.then, func(err error) {
		r := &h.reps[dst]
		r.filling = nil
		if err != nil || h.x.gen != gen {
			return
		}
		r.state = shared
		if s := &h.reps[src]; s.state == owner {
			s.state = shared
		}
		h.publishValid()
	})
	f := h.mf.byNode[dev]
	if f == nil {
		// x's waiters are added when this returns: end it in a later round.
		err := fmt.Errorf("%w: %s has no layout for %s: no worker computes there", ErrNoWorker, h, e.rt.nodes[dev].name)
		e.call(func() { e.finishXfer(x, err) })
		return
	}
	if dst == 0 {
		e.convertToCPU(h, src, f, x)
		return
	}
	c := &mfToDevice{h: h, n: dst, f: f, x: x, since: h.mf.since[dst]}
	c.step(e)
}

// mfToDevice converts h's RAM value into node n's layout: the RAM layout
// is copied to a staging replicate there, and f's conversion kernel runs
// on the node's worker from it into h's replicate.
type mfToDevice struct {
	h       *Handle
	n       int
	f       *mfFormat
	x       *xfer
	since   uint64
	pending int
	err     error
}

func (c *mfToDevice) step(e *engine) {
	h, mf := c.h, c.h.mf
	st := mf.stage
	if key := [2]uint64{h.x.gen, mf.fills}; !mf.staged || mf.stageKey != key {
		// h's RAM value changed since the stage last carried it.
		st.span = h.span
		st.written(0)
		mf.staged, mf.stageKey = true, key
	}
	// The stage's room must not wait for h's own replicate, which only
	// this conversion frees: counted as in use rather than as held by a
	// task (makeRoom), a stage that cannot fit beside it is an error, not
	// a wait for itself. h's replicate was touched by the placement, so it
	// is no victim either.
	r := &h.reps[c.n]
	r.filling = nil
	p, err := e.need(st, c.n, R, c, c.since)
	r.filling = c.x
	if err != nil {
		c.end(e, err)
		return
	}
	if p > 0 {
		c.pending = p
		return
	}
	c.run(e)
}

// xferDone implements dataWaiter for the staging transfers.
func (c *mfToDevice) xferDone(e *engine, err error) {
	if err != nil && c.err == nil {
		c.err = err
	}
	c.pending--
	if c.pending > 0 {
		return
	}
	if c.err != nil {
		c.end(e, c.err)
		return
	}
	c.step(e)
}

// run posts the conversion kernel once the stage is on the node.
func (c *mfToDevice) run(e *engine) {
	h, st, n := c.h, c.h.mf.stage, c.n
	nd := e.rt.nodes[n]
	w := nd.worker
	if w.drv.dead.Load() {
		c.end(e, fmt.Errorf("%w: driver-%s is gone: no conversion to its layout", ErrPluginCrashed, w.drv.name))
		return
	}
	st.reps[n].refs++
	y := e.newXfer()
	y.dev = nd
	nd.reqs.inflight++
	y.then = append(y.then, func(err error) {
		st.reps[n].refs--
		c.end(e, err)
	})
	loc := uint8(nd.local)
	e.postConversion(w, y, c.f.toDevInfo, []wire.BufferDesc{
		{Node: loc, Offset: st.reps[n].buf, Mode: R, Layout: st.layout},
		{Node: loc, Offset: h.reps[n].buf, Mode: W, Layout: h.nodeLayout(n)},
	})
}

// end ends the conversion, giving the stage's room on the node back (to
// the node's cache, for the next one).
func (c *mfToDevice) end(e *engine, err error) {
	if r := &c.h.mf.stage.reps[c.n]; r.refs == 0 {
		e.release(r)
	}
	if err == nil {
		e.finishXfer(c.x, nil)
		return
	}
	_, to, _ := mfFields(c.f.arch)
	err = fmt.Errorf("%s to %s (%s): %w", to, e.rt.nodes[c.n].name, c.h, err)
	// A failure may come before x's waiters are added (from convert): x
	// ends in a later round.
	e.call(func() { e.finishXfer(c.x, err) })
}

// convertToCPU brings node n's value of h into RAM: its layout is copied
// into mf.back, and f's conversion back runs on a CPU worker from there
// into h's RAM replicate.
func (e *engine) convertToCPU(h *Handle, n int, f *mfFormat, x *xfer) {
	mf := h.mf
	_, _, name := mfFields(f.arch)
	fail := func(err error) {
		mf.backBusy = false
		e.finishXfer(x, fmt.Errorf("%s from %s (%s): %w", name, e.rt.nodes[n].name, h, err))
	}
	if mf.backBusy {
		// Copies into RAM wait for the one in flight (reps[0].filling).
		err := fmt.Errorf("%s: a second conversion into RAM while one runs", h)
		e.call(func() { e.finishXfer(x, err) })
		return
	}
	mf.backBusy = true
	nd := e.rt.nodes[n]
	y := e.newXfer()
	y.dev = nd
	nd.reqs.inflight++
	if e.rt.trace != nil {
		e.rt.trace.xferPosted(y.id, h, n, 0)
	}
	y.then = append(y.then, func(err error) {
		if err != nil {
			fail(err)
			return
		}
		e.runToCPU(h, n, f, x, fail)
	})
	c := wire.Copy{ID: y.id, SrcNode: nd.local, DstNode: 0, SrcBuffer: h.reps[n].buf, DstBuffer: mf.back.Offset,
		Ranges: []wire.CopyRange{{Len: mf.n * f.elemSize}}}
	e.postCtl(nd.worker, wire.CopyLen(1), c.Encode)
}

// runToCPU posts f's conversion back on a live CPU worker that hosts it.
func (e *engine) runToCPU(h *Handle, n int, f *mfFormat, x *xfer, fail func(error)) {
	mf := h.mf
	ws := e.rt.workers
	var w *workerState
	for i := range ws {
		c := ws[(mf.next+i)%len(ws)]
		if c.node == 0 && !c.drv.dead.Load() && f.toCPUInfo.implMask[c.driverIdx] != 0 {
			w = c
			mf.next = (c.id + 1) % len(ws)
			break
		}
	}
	if w == nil {
		fail(fmt.Errorf("%w: no live CPU worker hosts codelet %q", ErrPluginCrashed, f.toCPU.Name))
		return
	}
	ram := e.rt.nodes[0]
	y := e.newXfer()
	y.dev, y.drv = ram, w.drv
	ram.reqs.inflight++
	y.then = append(y.then, func(err error) {
		mf.fills++
		if err != nil {
			fail(err)
			return
		}
		mf.backBusy = false
		e.finishXfer(x, nil)
	})
	dl := kernel.Layout{Interface: kernel.Vector, ElemSize: uint32(f.elemSize), NX: mf.n}
	e.postConversion(w, y, f.toCPUInfo, []wire.BufferDesc{
		{Offset: mf.back.Offset, Mode: R, Layout: dl},
		{Offset: h.span.Offset, Mode: W, Layout: h.layout},
	})
}

// postConversion posts a conversion codelet's kernel (info) for w's
// driver on bufs, as transfer y.
func (e *engine) postConversion(w *workerState, y *xfer, info *codeletInfo, bufs []wire.BufferDesc) {
	d := w.driverIdx
	i := bits.TrailingZeros8(info.implMask[d])
	k, flags := info.impls[d][i], info.execFlags(d, int8(i))
	e.postCtl(w, wire.ExecSize(len(bufs), 0), func(b []byte) {
		wire.PutExecHeader(b, y.id, uint32(k), flags, len(bufs), 0)
		p := b[wire.ExecHeaderSize:]
		for i := range bufs {
			wire.EncodeBuffer(p, &bufs[i])
			p = p[wire.BufferDescSize:]
		}
	})
}
