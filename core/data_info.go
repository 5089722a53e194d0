package core

// Handle metadata, pack; design note: docs/design/interfaces.md.

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/starpu-go/starpu/core/internal/trace"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Handle housekeeping: names, user data, hints, registration without a
// home, pointers, packing, sizes, lookup.

// handleExt is what the data-management calls keep per handle.
type handleExt struct {
	label     atomic.Pointer[dataLabel]
	noOOC     atomic.Bool
	important atomic.Bool
	dontCache atomic.Bool
	wt        atomic.Uint64 // write-through mask, bit n for node n

	mu       sync.Mutex
	userData any
	// beforeUnregister run at the start of a blocking unregistration
	// (OnUnregister); guarded by mu.
	beforeUnregister []func()

	// noHome: registered without application memory (RegisterNoHome,
	// RegisterSame); the runtime's RAM replicate is the data.
	noHome bool
	// allocSize, when not 0, is the bytes the runtime allocates for each
	// replicate (RegisterVectorAllocSize, RegisterMatrixAllocSize); set at
	// registration.
	allocSize uint64

	// Engine goroutine only. gen counts the writes to the handle, so that
	// a copy finishing after a newer write is not taken as valid; wontUse
	// is the engine tick of the last WontUse.
	gen     uint64
	wontUse uint64
}

// dataLabel is how traces show a handle.
type dataLabel struct {
	name   string
	coords []int
}

func (h *Handle) setLabel(f func(l *dataLabel)) {
	for {
		old := h.x.label.Load()
		var l dataLabel
		if old != nil {
			l = *old
		}
		f(&l)
		if h.x.label.CompareAndSwap(old, &l) {
			return
		}
	}
}

// SetName names the handle in traces (StarPU's starpu_data_set_name): the
// events of the tasks using it list it under args.buffers.
func (h *Handle) SetName(name string) { h.setLabel(func(l *dataLabel) { l.name = name }) }

// Name returns the name given with SetName, or "".
func (h *Handle) Name() string {
	if l := h.x.label.Load(); l != nil {
		return l.name
	}
	return ""
}

// SetCoordinates gives the handle coordinates shown in traces, such as a
// tile's position in a matrix (StarPU's starpu_data_set_coordinates).
func (h *Handle) SetCoordinates(coords ...int) {
	c := slices.Clone(coords)
	h.setLabel(func(l *dataLabel) { l.coords = c })
}

// Coordinates returns the coordinates given with SetCoordinates, or nil.
func (h *Handle) Coordinates() []int {
	if l := h.x.label.Load(); l != nil {
		return slices.Clone(l.coords)
	}
	return nil
}

// traceBuffers lists j's handles that have a name or coordinates.
func traceBuffers(j *job) []trace.Buffer {
	if j.task == nil {
		return nil
	}
	var out []trace.Buffer
	for i, h := range j.task.Handles {
		if l := h.x.label.Load(); l != nil {
			out = append(out, trace.Buffer{Index: i, Handle: h.String(), Name: l.name, Coords: l.coords})
		}
	}
	return out
}

// SetUserData attaches an arbitrary value to the handle (StarPU's
// starpu_data_set_user_data).
func (h *Handle) SetUserData(v any) {
	h.x.mu.Lock()
	h.x.userData = v
	h.x.mu.Unlock()
}

// UserData returns the value given with SetUserData, or nil.
func (h *Handle) UserData() any {
	h.x.mu.Lock()
	defer h.x.mu.Unlock()
	return h.x.userData
}

// SetOOC says whether the handle may be evicted to disk (StarPU's
// starpu_data_set_ooc_flag); the default is true. It is recorded for when
// the runtime has a disk memory node; until then no data goes to disk.
func (h *Handle) SetOOC(ok bool) { h.x.noOOC.Store(!ok) }

// OOC tells whether the handle may be evicted to disk (see SetOOC).
func (h *Handle) OOC() bool { return !h.x.noOOC.Load() }

// AdviseAsImportant marks the handle as important, or not any more
// (StarPU's starpu_data_advise_as_important): when a device runs out of
// memory its copies are evicted after those of other handles.
func (h *Handle) AdviseAsImportant(important bool) { h.x.important.Store(important) }

// RegisterNoHome registers data without application memory (StarPU's
// registration with home node -1), with layout l of a built-in interface
// (Variable, Vector, Matrix or Block). A matrix's or block's leading
// dimensions are kept when given (LD, LDZ; 0 is packed): the RAM replicate
// is laid out with them, as memory given later with PtrRegister must be.
// Its RAM replicate takes arena space at once but
// memory only on first write: its pages are handed back to the OS and read
// as zeros until written (a read before any write sees zeros); device
// replicates are allocated on first use as for any handle. Unregister frees
// it.
func (rt *Runtime) RegisterNoHome(l kernel.Layout) (*Handle, error) {
	if err := rt.usable(); err != nil {
		return nil, err
	}
	p := kernel.Layout{Interface: l.Interface, ElemSize: l.ElemSize}
	dims := []uint64{}
	switch l.Interface {
	case kernel.Void:
		return rt.RegisterVoid()
	case kernel.Variable:
		p.NX = 1
	case kernel.Vector:
		p.NX = l.NX
		dims = []uint64{l.NX}
	case kernel.Matrix:
		p.NX, p.NY, p.LD = l.NX, l.NY, cmp.Or(l.LD, l.NX)
		if p.LD < p.NX {
			return nil, fmt.Errorf("%w: register matrix without home: leading dimension %d is below nx %d", ErrInvalidData, p.LD, p.NX)
		}
		dims = []uint64{p.LD, l.NY} // bounds the span; LD >= NX
	case kernel.Block:
		p.NX, p.NY, p.NZ, p.LD = l.NX, l.NY, l.NZ, cmp.Or(l.LD, l.NX)
		hi, plane := bits.Mul64(p.LD, l.NY)
		if hi != 0 || l.NX == 0 || l.NY == 0 {
			return nil, fmt.Errorf("%w: register block without home: dimensions %d x %d x %d, ldy %d", ErrInvalidData, l.NX, l.NY, l.NZ, p.LD)
		}
		p.LDZ = cmp.Or(l.LDZ, plane)
		if p.LD < p.NX || p.LDZ < plane {
			return nil, fmt.Errorf("%w: register block without home: leading dimensions %d and %d are below nx %d and ldy*ny %d", ErrInvalidData, p.LD, p.LDZ, p.NX, plane)
		}
		dims = []uint64{p.LDZ, l.NZ} // bound the span
	default:
		return nil, fmt.Errorf("%w: register without home: interface %s is not built in; use RegisterSame on a handle of it", ErrInvalidData, l.Interface)
	}
	if l.ElemSize == 0 {
		return nil, fmt.Errorf("%w: register %s without home: element size 0", ErrInvalidData, l.Interface)
	}
	n := uint64(l.ElemSize)
	for _, d := range dims {
		hi, lo := bits.Mul64(n, d)
		if d == 0 || hi != 0 {
			return nil, fmt.Errorf("%w: register %s without home: dimensions %v of %d-byte elements", ErrInvalidData, l.Interface, dims, l.ElemSize)
		}
		n = lo
	}
	return rt.allocNoHome(rt.newHandle(p, p.Len()))
}

// RegisterSame registers a new handle shaped like h, without application
// memory (StarPU's starpu_data_register_same): its own zeroed storage,
// packed, for built-in interfaces and data interface plugins alike.
func (h *Handle) RegisterSame() (*Handle, error) {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return nil, err
	}
	if h.unregistered.Load() {
		return nil, fmt.Errorf("register same as %s: %w", h, ErrUnregistered)
	}
	if h.mf != nil {
		return h.registerSameMultiformat()
	}
	if d := h.iface; d != nil {
		n := rt.newHandle(h.layout, h.size)
		n.iface = &ifaceData{inst: d.inst, meta: d.meta, desc: d.desc, offsets: d.offsets}
		n.plan = h.plan // fixed at registration for plugin interfaces
		return rt.allocNoHome(n)
	}
	return rt.RegisterNoHome(h.layout)
}

// allocNoHome gives h, registered without home, zeroed RAM storage.
func (rt *Runtime) allocNoHome(h *Handle) (*Handle, error) {
	if h.size > 0 {
		// Its pages take memory only once written (on first write).
		s, err := rt.arena.AllocZeroed(h.size)
		if err != nil {
			return nil, fmt.Errorf("register %s without home: %w", h.Interface(), err)
		}
		h.span, h.owned = s, true
	}
	h.x.noHome = true
	rt.track(h)
	return h, nil
}

// PtrRegister gives data registered without home (RegisterNoHome,
// RegisterSame) the application's memory mem as its copy on memory node
// node, in place of the one the runtime allocated (StarPU's
// starpu_vector_ptr_register and the other *_ptr_register helpers, with
// starpu_data_ptr_register). As in StarPU it must come right after the
// registration, before any access to the handle. mem holds the data as
// RegisterNoHome lays it out (with the layout's leading dimensions, which
// MatrixPtrRegister and BlockPtrRegister check; for a data interface
// plugin, the interface's region) and becomes the value: reads see what it holds.
// The runtime works on it in place and never frees it: once the handle is
// unregistered, mem holds the final value, and the application frees it.
//
// Only RAM can take it, with memory from Malloc (the shared-memory arena,
// which the drivers map). A device node cannot: device memory belongs to
// the drivers, which allocate it for the runtime, and the application has
// no device buffer of its own to give.
func PtrRegister[T Elem](h *Handle, node int, mem []T) error {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return err
	}
	if h.unregistered.Load() {
		return fmt.Errorf("pointer register %s: %w", h, ErrUnregistered)
	}
	if node < 0 || node >= len(rt.nodes) {
		return fmt.Errorf("%w: pointer register %s: memory node %d does not exist (nodes 0 to %d)", ErrInvalidData, h, node, len(rt.nodes)-1)
	}
	if node != 0 {
		return fmt.Errorf("%w: pointer register %s on node %d (%s): device memory is allocated by its driver for the runtime; the application has no device buffer to give", ErrInvalidData, h, node, rt.nodeName(node))
	}
	switch {
	case h.parent != nil:
		return fmt.Errorf("%w: pointer register %s: a partition's child lies in its parent's memory", ErrInvalidData, h)
	case !h.x.noHome:
		return fmt.Errorf("%w: pointer register %s: it has memory in RAM already; register it with RegisterNoHome or RegisterSame", ErrInvalidData, h)
	case h.size == 0:
		return fmt.Errorf("%w: pointer register %s: it has no data", ErrInvalidData, h)
	}
	es := uint64(elemSize[T]())
	if h.iface == nil && es != uint64(h.layout.ElemSize) {
		return fmt.Errorf("%w: pointer register %s: %d-byte elements for data of %d-byte elements", ErrInvalidData, h, es, h.layout.ElemSize)
	}
	p, n := sliceBytes(mem)
	if n < h.size {
		return fmt.Errorf("%w: pointer register %s: %d bytes of memory, the data needs %d", ErrInvalidData, h, n, h.size)
	}
	off, ok := arenaOffset(rt.arena, p)
	if !ok || off+h.size > rt.arena.Size() {
		return fmt.Errorf("%w: pointer register %s: the memory was not allocated with Malloc; the drivers reach only the shared-memory arena", ErrInvalidData, h)
	}
	span := base.Span{Offset: off, Size: h.size}
	planMu.Lock()
	planned := h.nplans > 0 // a plan's children are views of the old memory
	planMu.Unlock()
	// Under handles.mu no other PtrRegister moves a span, and under h.mu no
	// access to h is recorded: one recorded later sees the new span.
	rt.handles.mu.Lock()
	defer rt.handles.mu.Unlock()
	for o := range rt.handles.set {
		if o != h && o.span.Size > 0 && o.span.Offset < off+h.size && off < o.span.Offset+o.span.Size {
			return fmt.Errorf("%w: pointer register %s: the memory holds %s's data", ErrInvalidData, h, o)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastWriter != nil || len(h.readers) > 0 || len(h.held) > 0 || h.acc != nil && h.acc.used || planned {
		return fmt.Errorf("%w: pointer register %s: the handle was accessed already; give the memory right after registering it", ErrInvalidData, h)
	}
	old := h.span
	h.span, h.owned = span, false
	if err := rt.arena.Free(old); err != nil {
		return fmt.Errorf("pointer register %s: free the runtime's copy: %w", h, err)
	}
	return nil
}

// MatrixPtrRegister is PtrRegister for a matrix handle with the memory's
// leading dimension ld (StarPU's starpu_matrix_ptr_register): ld must be
// the one the handle was registered with (RegisterNoHome keeps the layout's
// LD), or the kernels would read the wrong elements; any other is refused,
// saying so.
func MatrixPtrRegister[T Elem](h *Handle, node int, mem []T, ld uint64) error {
	if l := h.layout; h.iface != nil || l.Interface != kernel.Matrix {
		return fmt.Errorf("%w: matrix pointer register %s: it is not a matrix", ErrInvalidData, h)
	} else if ld != l.LD {
		return fmt.Errorf("%w: matrix pointer register %s: memory with leading dimension %d for data registered with %d: register it with LD %d (RegisterNoHome keeps it), or lay the memory out with %d", ErrInvalidData, h, ld, l.LD, ld, l.LD)
	}
	return PtrRegister(h, node, mem)
}

// BlockPtrRegister is PtrRegister for a block handle with the memory's
// leading dimensions ldy and ldz (StarPU's starpu_block_ptr_register), which
// must be those the handle was registered with; others are refused.
func BlockPtrRegister[T Elem](h *Handle, node int, mem []T, ldy, ldz uint64) error {
	if l := h.layout; h.iface != nil || l.Interface != kernel.Block {
		return fmt.Errorf("%w: block pointer register %s: it is not a block", ErrInvalidData, h)
	} else if ldy != l.LD || ldz != l.LDZ {
		return fmt.Errorf("%w: block pointer register %s: memory with leading dimensions %d and %d for data registered with %d and %d: register it with those (RegisterNoHome keeps them), or lay the memory out with %d and %d", ErrInvalidData, h, ldy, ldz, l.LD, l.LDZ, l.LD, l.LDZ)
	}
	return PtrRegister(h, node, mem)
}

// LocalPointer returns the address of the handle's replicate in RAM, in the
// shared-memory arena (StarPU's starpu_data_get_local_ptr); nil for data
// without bytes or an unregistered handle. For data registered from Go
// memory this is the runtime's copy, not the registered memory: access it
// under Acquire.
func (h *Handle) LocalPointer() unsafe.Pointer {
	if h.span.Size == 0 || h.unregistered.Load() {
		return nil
	}
	return unsafe.Pointer(&h.rt.arena.Bytes(h.span)[0])
}

// PointerOn returns where the handle's replicate lies on memory node node
// (StarPU's starpu_data_handle_to_pointer): on RAM its address (as
// LocalPointer); on a device node the driver's number for the buffer, as
// kernels receive it. It is an error when the node has no allocation for
// the handle.
func (h *Handle) PointerOn(node int) (uintptr, error) {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return 0, err
	}
	if h.unregistered.Load() {
		return 0, fmt.Errorf("pointer of %s: %w", h, ErrUnregistered)
	}
	if node < 0 || node >= len(rt.nodes) {
		return 0, fmt.Errorf("%w: pointer of %s: memory node %d does not exist (nodes 0 to %d)", ErrInvalidData, h, node, len(rt.nodes)-1)
	}
	if node == 0 {
		if h.span.Size == 0 {
			return 0, fmt.Errorf("%w: pointer of %s: it has no data", ErrInvalidData, h)
		}
		return uintptr(h.LocalPointer()), nil
	}
	var buf uint64
	var ok bool
	rt.engine.sync(func() {
		r := &h.reps[node]
		ok, buf = r.allocated && r.filling == nil, r.buf
	})
	if !ok {
		return 0, fmt.Errorf("%w: pointer of %s: not allocated on node %d (%s)", ErrInvalidData, h, node, rt.nodeName(node))
	}
	return uintptr(buf), nil
}

// NodeInterface is how a handle's data lies on one memory node: StarPU's
// data interface on a node (starpu_data_get_interface_on_node).
type NodeInterface struct {
	// Layout is the data's shape on the node: as registered in RAM,
	// packed (no gaps between columns) on device nodes; a data interface
	// plugin's region is the same everywhere.
	Layout kernel.Layout
	// Allocated tells whether the node has memory for the data, Valid
	// whether it holds the current value.
	Allocated, Valid bool
	// Pointer, when allocated, is where the data starts, as PointerOn
	// gives it: an address in this process on RAM, the driver's buffer
	// number (what kernels receive) on a device node.
	Pointer uintptr
	// AllocSize is the bytes an allocation of the data takes on the node.
	AllocSize uint64
}

// InterfaceOn returns how the handle's data lies on memory node node
// (StarPU's starpu_data_get_interface_on_node), allocated there or not.
func (h *Handle) InterfaceOn(node int) (NodeInterface, error) {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return NodeInterface{}, err
	}
	if h.unregistered.Load() {
		return NodeInterface{}, fmt.Errorf("interface of %s: %w", h, ErrUnregistered)
	}
	if node < 0 || node >= len(rt.nodes) {
		return NodeInterface{}, fmt.Errorf("%w: interface of %s: memory node %d does not exist (nodes 0 to %d)", ErrInvalidData, h, node, len(rt.nodes)-1)
	}
	ni := NodeInterface{Layout: h.nodeLayout(node), AllocSize: h.nodeSize(node)}
	if node == 0 {
		ni.Allocated = h.span.Size > 0
		ni.Pointer = uintptr(h.LocalPointer())
		if h.span.Size > 0 {
			ni.AllocSize = h.span.Size
		}
	}
	if !rt.multiNode {
		ni.Valid = true
		return ni, nil
	}
	rt.engine.sync(func() {
		r := &h.reps[node]
		ni.Valid = r.state != invalid
		if node > 0 {
			ni.Allocated = r.allocated
			if r.allocated {
				ni.Pointer = uintptr(r.buf)
			}
		}
	})
	return ni, nil
}

// PointerIsInside tells whether p points into the handle's data in this
// process: the memory it was registered from, or its RAM replicate
// (StarPU's starpu_data_pointer_is_inside).
func (h *Handle) PointerIsInside(p unsafe.Pointer) bool {
	if p == nil || h.unregistered.Load() {
		return false
	}
	q := uintptr(p)
	inside := func(b []byte) bool {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return len(b) > 0 && q >= lo && q < lo+uintptr(len(b))
	}
	for _, hp := range h.home {
		if inside(hp.mem) {
			return true
		}
	}
	return h.span.Size > 0 && inside(h.rt.arena.Bytes(h.span))
}

// Lookup returns the registered handle whose data starts at p: the start
// of the Go memory it was registered from (the first part, for a data
// interface plugin), or of the Malloc memory registered in place; nil when
// there is none (StarPU's starpu_data_lookup). It scans the registered
// handles. Children of partitions and data registered without home are not
// found.
func (rt *Runtime) Lookup(p unsafe.Pointer) *Handle {
	if p == nil {
		return nil
	}
	rt.handles.mu.Lock()
	defer rt.handles.mu.Unlock()
	for h := range rt.handles.set {
		if h.parent != nil || h.x.noHome || h.unregistered.Load() {
			continue
		}
		var start unsafe.Pointer
		switch {
		case len(h.home) > 0:
			start = unsafe.Pointer(unsafe.SliceData(h.home[0].mem))
		case h.span.Size > 0:
			start = unsafe.Pointer(&rt.arena.Bytes(h.span)[0])
		}
		if start == p {
			return h
		}
	}
	return nil
}

// Size is the number of bytes of the handle's data, without the gaps
// between rows of strided matrices and blocks (StarPU's
// starpu_data_get_size): what Pack returns.
func (h *Handle) Size() uint64 {
	var n uint64
	for _, r := range h.ramRuns() {
		n += r.Len
	}
	return n
}

// AllocatedSize is the number of bytes the runtime allocates for a
// replicate of the handle (StarPU's starpu_data_get_alloc_size): the
// allocation size given at registration (RegisterVectorAllocSize,
// RegisterMatrixAllocSize), else the bytes of the RAM replicate, gaps
// included.
func (h *Handle) AllocatedSize() uint64 {
	if a := h.x.allocSize; a != 0 {
		return a
	}
	return h.size
}

// SetDontCache says whether the handle's device allocations skip the
// memory nodes' caches of freed allocations (StarPU's dontcache, an
// interface flag there, a per-handle hint here): when the handle drops a
// device copy (Unregister, Invalidate) the memory goes back to the device
// at once instead of being kept for another handle of the same size, and
// its own allocations never take a cached one. The default is false.
func (h *Handle) SetDontCache(on bool) { h.x.dontCache.Store(on) }

// DontCache tells whether the handle skips the allocation caches (see
// SetDontCache).
func (h *Handle) DontCache() bool { return h.x.dontCache.Load() }

// Pack returns a copy of the handle's data as Size bytes, packed (StarPU's
// starpu_data_pack): for plugin interfaces the ranges of the interface's
// copy plan, in order. It waits for the tasks writing the handle, like
// Acquire(R); do not call it while holding the handle in a writing mode.
func (h *Handle) Pack() ([]byte, error) {
	a, err := h.hold("pack", 0, R)
	if err != nil {
		return nil, err
	}
	defer h.unhold(a)
	out := make([]byte, h.Size())
	if len(out) > 0 {
		streamCopy(out, []wire.CopyRange{{Len: uint64(len(out))}}, h.rt.arena.Bytes(h.span), h.ramRuns())
	}
	return out, nil
}

// Unpack replaces the handle's data with b, bytes from Pack of a handle of
// the same shape (StarPU's starpu_data_unpack). It is ordered with the
// tasks like Acquire(W); do not call it while holding the handle.
func (h *Handle) Unpack(b []byte) error {
	if size := h.Size(); uint64(len(b)) != size {
		return fmt.Errorf("%w: unpack %s: %d bytes, the data has %d", ErrInvalidData, h, len(b), size)
	}
	a, err := h.hold("unpack", 0, W)
	if err != nil {
		return err
	}
	if len(b) > 0 {
		streamCopy(h.rt.arena.Bytes(h.span), h.ramRuns(), b, []wire.CopyRange{{Len: uint64(len(b))}})
		h.mu.Lock()
		if h.home != nil {
			h.copyHomeOut() // releasing the hold copies the registered memory in
		}
		h.mu.Unlock()
	}
	h.unhold(a)
	return nil
}

// ramRuns are the contiguous runs of h's data in its RAM replicate, in
// order (their SrcOffset and Len).
func (h *Handle) ramRuns() []wire.CopyRange {
	if h.iface != nil {
		return h.plan
	}
	l := h.layout
	es := uint64(l.ElemSize)
	var runs []wire.CopyRange
	switch {
	case l.Interface == kernel.Matrix && l.LD != l.NX:
		for j := uint64(0); j < l.NY; j++ {
			runs = append(runs, wire.CopyRange{SrcOffset: j * l.LD * es, Len: l.NX * es})
		}
	case l.Interface == kernel.Block && l.LD == l.NX && l.LDZ != l.NX*l.NY:
		for k := uint64(0); k < l.NZ; k++ {
			runs = append(runs, wire.CopyRange{SrcOffset: k * l.LDZ * es, Len: l.NX * l.NY * es})
		}
	case l.Interface == kernel.Block && l.LD != l.NX:
		for k := uint64(0); k < l.NZ; k++ {
			for j := uint64(0); j < l.NY; j++ {
				runs = append(runs, wire.CopyRange{SrcOffset: (k*l.LDZ + j*l.LD) * es, Len: l.NX * es})
			}
		}
	case h.size > 0:
		runs = []wire.CopyRange{{Len: h.size}}
	}
	return runs
}

// streamCopy copies the bytes of src's runs into dst's runs, in order, as
// one stream: the runs need not line up.
func streamCopy(dst []byte, druns []wire.CopyRange, src []byte, sruns []wire.CopyRange) {
	var i, j int
	var di, sj uint64
	for i < len(druns) && j < len(sruns) {
		d, s := druns[i], sruns[j]
		n := min(d.Len-di, s.Len-sj)
		copy(dst[d.SrcOffset+di:][:n], src[s.SrcOffset+sj:][:n])
		di += n
		sj += n
		if di == d.Len {
			i, di = i+1, 0
		}
		if sj == s.Len {
			j, sj = j+1, 0
		}
	}
}

// HomeNode is the memory node of the handle's reference copy (StarPU's
// starpu_data_get_home_node): 0, RAM, for data registered from
// application memory or arena memory, which Unregister brings back there;
// -1 for data with no home (RegisterNoHome, RegisterSame, RegisterVoid),
// which exists only in the runtime's replicates. A partition's children
// have their root's home.
func (h *Handle) HomeNode() int {
	root := h
	for root.parent != nil {
		root = root.parent
	}
	if root.x.noHome || root.layout.Interface == kernel.Void {
		return -1
	}
	return 0
}
