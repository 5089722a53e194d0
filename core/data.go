package core

// Handles, register, unregister; design note: docs/design/access.md.

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/starpu-go/starpu/core/internal/trace"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Elem is an element type a handle can hold.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// handleSet holds the registered handles, for Shutdown and the data
// summaries; mu guards set.
type handleSet struct {
	mu  sync.Mutex
	set map[*Handle]struct{}
}

// Handle is a piece of data registered with the runtime. Its replicate on the
// RAM memory node lives in the shared-memory arena, where drivers read and
// write it in place. Data registered from ordinary Go memory keeps that memory
// as its home: the runtime copies it into the arena at registration and back
// on Acquire and Unregister. Data allocated with Malloc lives in the arena
// already and is never copied.
type Handle struct {
	rt     *Runtime
	id     uint64
	layout kernel.Layout // on the RAM node
	span   base.Span     // the RAM-node replicate
	owned  bool          // span was allocated for this handle
	// size is the bytes of a replicate; for plugin interfaces the region
	// holding the parts, whose copy plan is plan.
	size  uint64
	iface *ifaceData
	plan  []wire.CopyRange
	// mf, for multiformat data, gives its layout on each device node and
	// the conversions to and from it (data_multiformat.go).
	mf *multiformat
	// fp is footprint()'s value with bit 32 set once computed: the shape
	// never changes, and traces and models hash it per task.
	fp atomic.Uint64
	// traceMark is what the trace file holds of the handle (the stream's,
	// under its lock): a submission describes it only when it changed.
	traceMark trace.HandleMark

	// home is the application's memory when it is not in the arena: the
	// parts of the region it backs.
	home []homePart

	// parent is the handle this one was partitioned from; children are
	// this one's parts while it is partitioned.
	parent      *Handle
	children    []*Handle
	partitioned atomic.Bool
	// ofPlan is the asynchronous partition plan this handle is a child of;
	// plans are this handle's own (data_partitionplan.go, under planMu);
	// restrict is what they leave tasks allowed to do with it.
	ofPlan   *Plan
	plans    []*Plan
	nplans   int
	restrict atomic.Uint32

	// reps has one replicate per memory node when there are several (see
	// mem_coherency.go); validMask mirrors which are valid for other goroutines.
	reps      []replicate
	validMask atomic.Uint64

	mu        sync.Mutex
	homeValid bool
	// Sequential consistency: the last writer and the readers since.
	lastWriter *job
	readers    []*job
	held       []*acquisition
	// acc is what accesses beyond ordered R and W need (data_access.go).
	acc *accessState

	unregistered atomic.Bool
	// lost, when set, says which failed task lost the value (data_lost.go).
	lost atomic.Pointer[lostData]

	// x is what the data-management calls of data_info.go and mem_requests.go
	// keep: name, user data, hints, write-through mask.
	x handleExt
}

func (h *Handle) String() string {
	if h.mf != nil {
		return fmt.Sprintf("multiformat handle #%d", h.id)
	}
	return fmt.Sprintf("%s handle #%d", h.layout.Interface, h.id)
}

// Layout returns the handle's shape.
func (h *Handle) Layout() kernel.Layout { return h.layout }

// depend records j's access to h and makes j wait for the conflicting
// accesses before it: readers wait for the last writer, a writer waits for
// the readers since the last writer (or for it, when there are none).
func (h *Handle) depend(j *job, mode Mode) {
	h.mu.Lock()
	if !h.admits(j) {
		h.mu.Unlock()
		return
	}
	if h.acc != nil || mode&^(RW|Locality) != 0 {
		j.npred1 = -1 // not a plain access: never chained
		h.access(j, mode, true)
		return
	}
	before := j.ndeps.Load()
	h.dependPlain(j, mode)
	if j.ndeps.Load() == before {
		j.freeHandles++ // never chained: see task_chain.go
	}
	h.mu.Unlock()
}

// dependPlain is depend for an R, W or RW access to a handle without an
// access state; h.mu held.
func (h *Handle) dependPlain(j *job, mode Mode) {
	if mode&W == 0 {
		h.rt.dependOn(h.lastWriter, j)
		if len(h.readers) >= 64 {
			h.readers = pruneReleased(h.readers)
		}
		h.readers = append(h.readers, j)
	} else {
		if len(h.readers) > 0 {
			for _, r := range h.readers {
				h.rt.dependOn(r, j)
			}
		} else {
			h.rt.dependOn(h.lastWriter, j)
		}
		clear(h.readers)
		h.readers = h.readers[:0]
		h.lastWriter = j
	}
}

func pruneReleased(js []*job) []*job {
	out := js[:0]
	for _, j := range js {
		j.mu.Lock()
		r := j.released
		j.mu.Unlock()
		if !r {
			out = append(out, j)
		}
	}
	clear(js[len(out):])
	return out
}

// homePart is a piece of application memory backing bytes [off,
// off+len(mem)) of a handle's RAM replicate.
type homePart struct {
	off uint64
	mem []byte
}

func (rt *Runtime) register(l kernel.Layout, data unsafe.Pointer, nbytes uint64) (*Handle, error) {
	return rt.registerAlloc(l, data, nbytes, 0)
}

// registerAlloc is register with an allocation size for the replicates the
// runtime allocates (0: the data's size). Memory from the arena is used in
// place, at its own size, as StarPU uses the home node's buffer.
func (rt *Runtime) registerAlloc(l kernel.Layout, data unsafe.Pointer, nbytes, allocSize uint64) (*Handle, error) {
	if err := rt.usable(); err != nil {
		return nil, err
	}
	need := l.Len()
	if nbytes < need {
		return nil, fmt.Errorf("%w: %s needs %d bytes, the buffer has %d", ErrInvalidData, l.Interface, need, nbytes)
	}
	if allocSize != 0 && allocSize < need {
		return nil, fmt.Errorf("%w: %s: allocation size %d is less than the %d bytes of the data", ErrInvalidData, l.Interface, allocSize, need)
	}
	h := rt.newHandle(l, need)
	h.x.allocSize = allocSize
	if data != nil && need > 0 {
		if off, ok := arenaOffset(rt.arena, data); ok {
			h.span = base.Span{Offset: off, Size: need}
		} else {
			s, err := rt.arena.Alloc(max(need, allocSize))
			if err != nil {
				return nil, fmt.Errorf("register %s: %w", l.Interface, err)
			}
			h.span, h.owned = s, true
			h.home = []homePart{{0, unsafe.Slice((*byte)(data), need)}}
			h.copyHomeIn()
		}
	}
	rt.track(h)
	return h, nil
}

func (rt *Runtime) newHandle(l kernel.Layout, size uint64) *Handle {
	h := &Handle{rt: rt, id: rt.nextHandle.Add(1), layout: l, size: size, homeValid: true}
	if rt.multiNode {
		h.reps = make([]replicate, len(rt.nodes))
		for i := range h.reps {
			h.reps[i].h, h.reps[i].node = h, i
		}
		h.reps[0].allocated, h.reps[0].state = true, owner
		h.publishValid()
	}
	if rt.access.noSeqDefault.Load() {
		h.acc = &accessState{noSeq: true}
	}
	return h
}

func (rt *Runtime) track(h *Handle) {
	rt.handles.mu.Lock()
	rt.handles.set[h] = struct{}{}
	rt.handles.mu.Unlock()
}

// copyHomeIn and copyHomeOut move data between the application's memory
// and the RAM replicate.
func (h *Handle) copyHomeIn() {
	b := h.rt.arena.Bytes(h.span)
	for _, p := range h.home {
		copy(b[p.off:], p.mem)
	}
}

func (h *Handle) copyHomeOut() {
	b := h.rt.arena.Bytes(h.span)
	for _, p := range h.home {
		copy(p.mem, b[p.off:])
	}
}

// arenaOffset tells whether p points into the arena's heap, and where.
func arenaOffset(a *shm.Arena, p unsafe.Pointer) (uint64, bool) {
	if p == nil {
		return 0, false
	}
	all := a.Bytes(base.Span{Offset: 0, Size: a.Size()})
	lo := uintptr(unsafe.Pointer(&all[0]))
	q := uintptr(p)
	if q < lo+uintptr(a.ControlSize()) || q >= lo+uintptr(len(all)) {
		return 0, false
	}
	return uint64(q - lo), true
}

func elemSize[T Elem]() uint32 {
	var z T
	return uint32(unsafe.Sizeof(z))
}

func sliceBytes[T Elem](s []T) (unsafe.Pointer, uint64) {
	if len(s) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&s[0]), uint64(len(s)) * uint64(elemSize[T]())
}

// RegisterVoid registers a handle without data, used only to order tasks.
func (rt *Runtime) RegisterVoid() (*Handle, error) {
	return rt.register(kernel.Layout{Interface: kernel.Void}, nil, 0)
}

// RegisterVariable registers one value.
func RegisterVariable[T Elem](rt *Runtime, p *T) (*Handle, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: variable: nil pointer", ErrInvalidData)
	}
	es := elemSize[T]()
	return rt.register(kernel.Layout{Interface: kernel.Variable, ElemSize: es, NX: 1}, unsafe.Pointer(p), uint64(es))
}

// RegisterVector registers a vector.
func RegisterVector[T Elem](rt *Runtime, v []T) (*Handle, error) {
	return RegisterVectorAllocSize(rt, v, 0)
}

// RegisterMatrix registers an nx-by-ny matrix stored with leading dimension
// ld: element (i, j) is m[i+j*ld], so nx is the contiguous dimension (the
// rows of a column-major matrix).
func RegisterMatrix[T Elem](rt *Runtime, m []T, ld, nx, ny int) (*Handle, error) {
	return RegisterMatrixAllocSize(rt, m, ld, nx, ny, 0)
}

// RegisterVectorAllocSize is RegisterVector with the bytes the runtime
// allocates for each copy of the data (in RAM, unless v is Malloc memory
// used in place, and on every device node) instead of the vector's size
// (StarPU's starpu_vector_data_register_allocsize): room for data that a
// kernel lays out differently, or to reserve device memory. Transfers move
// only the vector. allocSize must be at least the vector's bytes; 0 means
// the vector's bytes, as RegisterVector.
func RegisterVectorAllocSize[T Elem](rt *Runtime, v []T, allocSize uint64) (*Handle, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: vector: empty slice", ErrInvalidData)
	}
	p, n := sliceBytes(v)
	return rt.registerAlloc(kernel.Layout{Interface: kernel.Vector, ElemSize: elemSize[T](), NX: uint64(len(v))}, p, n, allocSize)
}

// RegisterMatrixAllocSize is RegisterMatrix with the bytes the runtime
// allocates for each copy of the data, as RegisterVectorAllocSize
// (StarPU's starpu_matrix_data_register_allocsize). allocSize must be at
// least the matrix's bytes, gaps between columns included; 0 means those
// bytes, as RegisterMatrix.
func RegisterMatrixAllocSize[T Elem](rt *Runtime, m []T, ld, nx, ny int, allocSize uint64) (*Handle, error) {
	if nx <= 0 || ny <= 0 {
		return nil, fmt.Errorf("%w: matrix: nx = %d, ny = %d: must be positive", ErrInvalidData, nx, ny)
	}
	if ld < nx {
		return nil, fmt.Errorf("%w: matrix: ld = %d is less than nx = %d", ErrInvalidData, ld, nx)
	}
	p, n := sliceBytes(m)
	return rt.registerAlloc(kernel.Layout{Interface: kernel.Matrix, ElemSize: elemSize[T](), NX: uint64(nx), NY: uint64(ny), LD: uint64(ld)}, p, n, allocSize)
}

// RegisterBlock registers an nx-by-ny-by-nz block: element (i, j, k) is
// b[i+j*ld+k*ldz].
func RegisterBlock[T Elem](rt *Runtime, b []T, ld, ldz, nx, ny, nz int) (*Handle, error) {
	if nx <= 0 || ny <= 0 || nz <= 0 {
		return nil, fmt.Errorf("%w: block: nx = %d, ny = %d, nz = %d: must be positive", ErrInvalidData, nx, ny, nz)
	}
	if ld < nx {
		return nil, fmt.Errorf("%w: block: ld = %d is less than nx = %d", ErrInvalidData, ld, nx)
	}
	if ldz < ld*ny {
		return nil, fmt.Errorf("%w: block: ldz = %d is less than ld*ny = %d", ErrInvalidData, ldz, ld*ny)
	}
	p, n := sliceBytes(b)
	return rt.register(kernel.Layout{Interface: kernel.Block, ElemSize: elemSize[T](), NX: uint64(nx), NY: uint64(ny), NZ: uint64(nz), LD: uint64(ld), LDZ: uint64(ldz)}, p, n)
}

// Malloc allocates n elements in the shared-memory arena. Data registered
// from such memory is used in place by the drivers, with no copy. Release it
// with Free once no registered handle uses it.
func Malloc[T Elem](rt *Runtime, n int) ([]T, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: malloc of %d elements", ErrInvalidData, n)
	}
	es := uint64(elemSize[T]())
	if uint64(n) > rt.arena.Size()/es {
		return nil, fmt.Errorf("%w: malloc of %d elements of %d bytes: more than the %d-byte arena", ErrInvalidData, n, es, rt.arena.Size())
	}
	s, err := rt.arena.Alloc(uint64(n) * es)
	if err != nil {
		return nil, fmt.Errorf("malloc: %w", err)
	}
	b := rt.arena.Bytes(s)
	clear(b)
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), nil
}

// Free releases memory from Malloc.
func Free[T Elem](rt *Runtime, s []T) error {
	p, n := sliceBytes(s)
	off, ok := arenaOffset(rt.arena, p)
	if !ok {
		return fmt.Errorf("%w: free: memory was not allocated with Malloc", ErrInvalidData)
	}
	return rt.arena.Free(base.Span{Offset: off, Size: n})
}

// acquisition is an application's hold on a handle, ordered with the tasks
// like a task accessing it in the same mode.
type acquisition struct {
	mode    Mode
	job     *job
	granted chan struct{}
	// onGrant, when set, runs instead of granting: the job is a partition
	// plan's switch (data_partitionplan.go) or an asynchronous acquisition
	// (acquireThen). node is where the data is held.
	onGrant func()
	node    int
	// pinned are the device nodes whose copies an AcquireNoNodeLockAll
	// hold keeps from eviction (engine goroutine).
	pinned []int
	// closing marks an unregistration's acquisition, the one access a
	// closed handle admits.
	closing bool
}

// check says why the application cannot have the data it was granted:
// the handle was unregistered while the acquisition was being submitted,
// or a failed task lost the value and the mode reads it.
func (a *acquisition) check(h *Handle) error {
	if err := a.job.doomErr(); err != nil {
		return err
	}
	return h.lostFor(a.mode)
}

func (a *acquisition) grant() {
	if a.onGrant != nil {
		a.onGrant()
		return
	}
	close(a.granted)
}

// Acquire gives the application access to the data in mode m, after the
// tasks submitted before that conflict with it; tasks submitted after wait
// for Release. For data registered from Go memory, the registered memory
// holds the current value once Acquire returns.
func (h *Handle) Acquire(m Mode) error {
	if !validAcquireMode(m) {
		return fmt.Errorf("%w: acquire with mode %v", ErrInvalidTask, m)
	}
	if err := h.checkAccess(m); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := h.rt.mayBlock("acquire " + h.String()); err != nil {
		return err
	}
	a := h.acquireAsync(m)
	h.rt.await(a.granted)
	if err := a.check(h); err != nil {
		h.rt.complete(a.job, -1, nil)
		return fmt.Errorf("acquire: %w", err)
	}
	return h.finishAcquire(a)
}

func (h *Handle) acquireAsync(m Mode) *acquisition {
	j := h.rt.newJob()
	a := &acquisition{mode: m, job: j, granted: make(chan struct{})}
	j.acquire = a
	h.depend(j, m)
	if j.ndeps.Add(-1) == 0 {
		h.rt.ready(j, -1)
	}
	return a
}

// Release ends the application's oldest hold on the handle in RAM (see
// ReleaseOnNode). Changes made to Go-registered memory under a writing hold
// become visible to later tasks.
func (h *Handle) Release() error { return h.ReleaseOnNode(0) }

// Unregister waits for the tasks using the handle, writes the current value
// back to the registered Go memory, and frees the runtime's copy. The handle
// cannot be used afterwards. When a failed task lost the value (see Lost),
// the handle is unregistered all the same, the registered memory keeps what
// it had, and the error says so.
func (h *Handle) Unregister() error {
	a, err := h.closeAndWait()
	if err != nil {
		return err
	}
	lost := h.Lost()
	if lost == nil {
		if err := h.fetchTo(0, R); err != nil {
			// The value is still where it was: the handle stays registered.
			h.reopen()
			h.rt.complete(a.job, -1, nil)
			return fmt.Errorf("unregister %s: bring data back to RAM: %w", h, err)
		}
		h.homeOut()
	}
	h.dropReplicates()
	h.rt.complete(a.job, -1, nil)
	if err := h.rt.forget(h); err != nil {
		return err
	}
	if lost != nil {
		return fmt.Errorf("unregister %s: value not written back: %w", h, lost)
	}
	return nil
}

// close marks h unregistered, at the start of an unregistration; unless
// waitHeld, it refuses while the application holds h. Under
// h.mu, where every access is recorded (depend, dependFree): an access
// recorded before the mark is ordered before the unregistration, which
// waits for it; one recorded after sees the mark and fails (job.doom)
// instead of running on memory the unregistration frees.
func (h *Handle) close(waitHeld bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unregistered.Load() {
		return fmt.Errorf("unregister %s: %w", h, ErrUnregistered)
	}
	if len(h.held) > 0 && !waitHeld {
		return fmt.Errorf("unregister %s: still acquired by the application; release it first", h)
	}
	h.unregistered.Store(true)
	return nil
}

// reopen undoes close when an unregistration gives up.
func (h *Handle) reopen() {
	h.mu.Lock()
	h.unregistered.Store(false)
	h.mu.Unlock()
}

// OnUnregister has f run at the start of every blocking unregistration of
// h (Unregister, UnregisterNoCoherency), before it checks that the
// application holds h no more: a communication layer (core/mpi) waits
// there for its transfers of h, which hold it, as StarPU's
// starpu_data_unregister waits for a detached send. f must not unregister
// h nor wait for anything that waits for h's unregistration.
func (h *Handle) OnUnregister(f func()) {
	h.x.mu.Lock()
	h.x.beforeUnregister = append(h.x.beforeUnregister, f)
	h.x.mu.Unlock()
}

// closeAndWait is the start of a blocking unregistration: it checks it
// may, closes h, and waits for the accesses recorded before, ordered and
// unordered; the unregistration ends by completing the acquisition's job.
func (h *Handle) closeAndWait() (*acquisition, error) {
	if err := h.rt.mayBlock("unregister " + h.String()); err != nil {
		return nil, err
	}
	h.x.mu.Lock()
	hooks := h.x.beforeUnregister
	h.x.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	if err := h.checkUnregister(); err != nil {
		return nil, err
	}
	if err := h.close(false); err != nil {
		return nil, err
	}
	h.waitFree()
	a := h.closingAcquire()
	h.rt.await(a.granted)
	return a, nil
}

// closingAcquire is the unregistration's own acquisition of h in RW,
// ordered after every access recorded before close.
func (h *Handle) closingAcquire() *acquisition {
	j := h.rt.newJob()
	a := &acquisition{mode: RW, job: j, granted: make(chan struct{}), closing: true}
	j.acquire = a
	h.depend(j, RW)
	if j.ndeps.Add(-1) == 0 {
		h.rt.ready(j, -1)
	}
	return a
}

// doomed is the error of an access recorded after h was closed: the job
// fails instead of running, or the acquisition returns it.
func (h *Handle) doomed(j *job) {
	err := fmt.Errorf("%s: %w while the access was being submitted", h, ErrUnregistered)
	j.mu.Lock()
	if x := j.x(); x.doom == nil {
		x.doom = err
		if e := h.rt.engine; e != nil {
			e.checks.Add(1) // until terminate releases j
			x.doomChecked = true
		}
	}
	j.mu.Unlock()
}

// doomErr is why j must fail instead of running (doomed), or nil.
func (j *job) doomErr() error {
	if x := j.ext.Load(); x != nil {
		return x.doom
	}
	return nil
}

// admits says whether an access by j may be recorded on h (h.mu held): not
// once h is closed, unless j is the unregistration's own. When it may not,
// j is doomed.
func (h *Handle) admits(j *job) bool {
	if !h.unregistered.Load() || j.acquire != nil && j.acquire.closing {
		return true
	}
	h.doomed(j)
	return false
}

// forget frees the handle's replicate and drops it from the runtime.
func (rt *Runtime) forget(h *Handle) error {
	rt.handles.mu.Lock()
	delete(rt.handles.set, h)
	rt.handles.mu.Unlock()
	h.mu.Lock()
	h.lastWriter, h.readers = nil, nil
	h.mu.Unlock()
	if err := h.dropAccess(); err != nil {
		return fmt.Errorf("unregister %s: %w", h, err)
	}
	if h.owned {
		if err := rt.arena.Free(h.span); err != nil {
			return fmt.Errorf("unregister %s: %w", h, err)
		}
	}
	if h.mf != nil {
		if err := h.mf.free(rt); err != nil {
			return fmt.Errorf("unregister %s: %w", h, err)
		}
	}
	return nil
}

// unregisterAll writes back every handle still registered, at shutdown, so
// that no registered data is lost.
func (rt *Runtime) unregisterAll() error {
	var errs []error
	if err := rt.flushReductions(); err != nil {
		errs = append(errs, err)
	}
	rt.handles.mu.Lock()
	hs := make([]*Handle, 0, len(rt.handles.set))
	for h := range rt.handles.set {
		hs = append(hs, h)
	}
	rt.handles.mu.Unlock()
	// Children first: their data lands in their parents' RAM copies.
	depth := func(h *Handle) int {
		d := 0
		for p := h.parent; p != nil; p = p.parent {
			d++
		}
		return d
	}
	sort.SliceStable(hs, func(i, j int) bool { return depth(hs[i]) > depth(hs[j]) })
	for _, h := range hs {
		lost := h.Lost()
		if lost != nil {
			errs = append(errs, fmt.Errorf("write back %s: value not written back: %w", h, lost))
		} else if err := h.fetchTo(0, R); err != nil {
			errs = append(errs, fmt.Errorf("write back %s: %w", h, err))
		}
		h.dropReplicates()
		h.mu.Lock()
		h.held = nil
		if h.home != nil && !h.homeValid && lost == nil {
			h.copyHomeOut()
			h.homeValid = true
		}
		h.mu.Unlock()
		h.unregistered.Store(true)
		if err := rt.forget(h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
