package core

// Prefetch and data requests; design note: docs/design/memory.md.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// The application's data requests (allocations, fetches, prefetches),
// coherency hints (won't use, write-through, invalidation), and the
// operations that end or copy a handle's data, over the coherency engine
// of mem_coherency.go.

// reqKind says when the engine issues a data request.
type reqKind uint8

const (
	// reqNow: at once, like a task's transfers; may evict and wait for
	// memory.
	reqNow reqKind = iota
	// reqPrefetch: queued per node by priority, at most maxPrefetches in
	// flight; dropped rather than evicting other data.
	reqPrefetch
	// reqIdle: as reqPrefetch, and only when the node has no transfer in
	// flight and no prefetch queued.
	reqIdle
)

// maxPrefetches is how many prefetches a node has in flight at most, so
// that a later one of higher priority overtakes those queued.
const maxPrefetches = 2

// errNoRoom drops a prefetch that does not fit beside the node's data.
var errNoRoom = errors.New("prefetch dropped: the node has no room without evicting other data")

// dataReq is a request for h on node, on the engine side: bring the
// current value (mode with R) or only allocate (W alone).
type dataReq struct {
	h    *Handle
	node int
	mode Mode
	kind reqKind
	prio int
	// write makes node the owner (a writing acquisition); hold takes a
	// reference on the replicate, released by unhold.
	write, hold bool
	// issued: a prefetch counted in its node's issued.
	issued  bool
	pending int
	err     error
	// finish runs once, on the engine goroutine, with the outcome.
	finish func(error)
}

// step makes progress on q: it asks need for the replicate and finishes
// once nothing is left to wait for.
func (q *dataReq) step(e *engine) {
	if q.err != nil {
		q.done(e, q.err)
		return
	}
	h := q.h
	if h.unregistered.Load() {
		q.done(e, ErrUnregistered)
		return
	}
	if q.kind != reqNow && !e.fits(h, q.node) {
		q.done(e, errNoRoom)
		return
	}
	p, err := e.need(h, q.node, q.mode, q, e.clock)
	if err != nil {
		q.done(e, err)
		return
	}
	if p > 0 {
		q.pending = p
		return
	}
	if q.write {
		h.written(q.node)
	}
	if q.hold {
		h.reps[q.node].refs++
	}
	q.done(e, nil)
}

// xferDone implements dataWaiter.
func (q *dataReq) xferDone(e *engine, err error) {
	if err != nil && q.err == nil {
		q.err = err
	}
	q.pending--
	if q.pending == 0 {
		q.step(e)
	}
}

func (q *dataReq) done(e *engine, err error) {
	q.finish(err)
	if q.issued {
		q.issued = false
		nd := e.rt.nodes[q.node]
		nd.reqs.issued--
		e.pump(nd)
	}
}

// fits tells whether h can be on node without evicting anything.
func (e *engine) fits(h *Handle, node int) bool {
	r := &h.reps[node]
	if node == 0 || r.allocated || r.filling != nil {
		return true
	}
	nd := e.rt.nodes[node]
	size := h.nodeSize(node)
	return len(nd.cache[size]) > 0 || nd.used+size <= nd.capacity
}

// nodeRequests are a memory node's queued prefetches and what decides when
// to issue them. Engine goroutine only.
type nodeRequests struct {
	prefetch, idle []*dataReq // by priority, highest first, then arrival
	issued         int        // prefetches issued and not done
	inflight       int        // allocations and copies in flight on the node's worker
	pumping        bool
}

func (n *nodeRequests) add(q *dataReq) {
	list := &n.prefetch
	if q.kind == reqIdle {
		list = &n.idle
	}
	i := sort.Search(len(*list), func(i int) bool { return (*list)[i].prio < q.prio })
	*list = slices.Insert(*list, i, q)
}

// next is the request to issue now, if any: prefetches while fewer than
// maxPrefetches are in flight; idle prefetches when the node is idle and
// nothing else is queued or in flight.
func (n *nodeRequests) next(idle bool) *dataReq {
	var q *dataReq
	switch {
	case len(n.prefetch) > 0 && n.issued < maxPrefetches:
		q, n.prefetch = n.prefetch[0], n.prefetch[1:]
	case len(n.idle) > 0 && len(n.prefetch) == 0 && n.issued == 0 && idle:
		q, n.idle = n.idle[0], n.idle[1:]
	}
	return q
}

func (n *nodeRequests) queued() bool { return len(n.prefetch)+len(n.idle) > 0 }

func (n *nodeRequests) queuedFor(h *Handle) bool {
	for _, list := range [2][]*dataReq{n.prefetch, n.idle} {
		for _, q := range list {
			if q.h == h {
				return true
			}
		}
	}
	return false
}

// pump issues nd's queued requests that may go now.
func (e *engine) pump(nd *memNode) {
	if nd.reqs.pumping {
		return // the loop below picks up what a finished request allows
	}
	nd.reqs.pumping = true
	for {
		q := nd.reqs.next(e.idle(nd))
		if q == nil {
			break
		}
		q.issued = true
		nd.reqs.issued++
		q.step(e)
	}
	nd.reqs.pumping = false
}

// pumpAfter gives the requests queued for nd, and for RAM (whose transfers
// run on the device nodes' workers), a chance once a transfer on nd ends.
func (e *engine) pumpAfter(nd *memNode) {
	if nd.reqs.queued() {
		e.pump(nd)
	}
	if ram := e.rt.nodes[0]; ram.reqs.queued() {
		e.pump(ram)
	}
}

// idle tells whether no transfer is in flight to or from nd.
func (e *engine) idle(nd *memNode) bool {
	if nd.id != 0 {
		return nd.reqs.inflight == 0
	}
	for _, n := range e.rt.nodes[1:] {
		if n.reqs.inflight > 0 {
			return false
		}
	}
	return true
}

func (e *engine) submitReq(q *dataReq) {
	if q.kind == reqNow {
		q.step(e)
		return
	}
	nd := e.rt.nodes[q.node]
	nd.reqs.add(q)
	e.pump(nd)
}

// opGroup counts the engine operations something waits for. Engine
// goroutine only.
type opGroup struct {
	pending int
	done    func()
}

func newOpGroup() *opGroup { return &opGroup{pending: 1} } // the 1 is seal's

func (g *opGroup) add() { g.pending++ }

func (g *opGroup) one() {
	g.pending--
	if g.pending == 0 {
		g.done()
	}
}

// seal says that nothing more is added: done runs once all are over,
// possibly now.
func (g *opGroup) seal(done func()) {
	g.done = done
	g.one()
}

// writeThrough brings the nodes of h's write-through mask up to date after
// a write on node n, adding the copies to g (created when nil and there is
// something to copy).
func (e *engine) writeThrough(h *Handle, n int, g *opGroup) *opGroup {
	mask := h.x.wt.Load()
	for m := range e.rt.nodes {
		if m == n || m >= 64 || mask&(1<<m) == 0 {
			continue
		}
		if g == nil {
			g = newOpGroup()
		}
		g.add()
		q := &dataReq{h: h, node: m, mode: R, finish: func(err error) {
			if err != nil {
				e.rt.log.Error("write-through failed; the node stays invalid", "handle", h.String(), "node", e.rt.nodeName(m), "error", err)
			}
			g.one()
		}}
		q.step(e)
	}
	return g
}

// writtenSync records a write made on node n off the engine goroutine, as
// a task's completion does: a data request may have copied the replicate
// while it was being written (a fetch tries again when the write's
// fetchTo drops its copy), so node n alone is valid. It then writes
// through and waits for the copies.
func (h *Handle) writtenSync(n int) {
	rt := h.rt
	if !rt.multiNode {
		return
	}
	done := make(chan struct{})
	e := rt.engine
	e.call(func() {
		h.written(n)
		g := e.writeThrough(h, n, nil)
		if g == nil {
			close(done)
			return
		}
		g.seal(func() { close(done) })
	})
	<-done
}

// anyValid tells whether some node holds a valid copy of h.
func (h *Handle) anyValid() bool {
	for i := range h.reps {
		if h.reps[i].state != invalid {
			return true
		}
	}
	return false
}

// evictionClass orders the eviction of r from node: data the application
// won't use first, then the rest, then data advised as important, then
// data written through to node.
func evictionClass(r *replicate, node int) int {
	x := &r.h.x
	switch {
	case node < 64 && x.wt.Load()&(1<<node) != 0:
		return 3
	case x.important.Load():
		return 2
	case x.wontUse != 0 && r.lastUse <= x.wontUse:
		return 0
	}
	return 1
}

// DataRequest is an asynchronous data request the application made: a
// fetch, a prefetch or an allocation. WaitForAll waits for it too.
type DataRequest struct {
	rt   *Runtime
	done chan struct{}
	err  error
}

// Done is closed once the request is over.
func (r *DataRequest) Done() <-chan struct{} { return r.done }

// Wait blocks until the request is over and returns its error: why the
// data could not be brought, or that a prefetch was dropped for lack of
// room. Waiting from a callback for a request not yet over is ErrDeadlock.
func (r *DataRequest) Wait() error {
	select {
	case <-r.done:
		return r.err
	default:
	}
	if err := r.rt.mayBlock("wait for a data request"); err != nil {
		return err
	}
	<-r.done
	return r.err
}

func (r *DataRequest) complete(err error) {
	r.err = err
	close(r.done)
	r.rt.endAsync(nil)
}

// request starts a data request for h on node. An ordered one waits, like
// a reader, for the tasks submitted before that write h.
func (h *Handle) request(op string, node int, mode Mode, kind reqKind, prio int, ordered bool) (*DataRequest, error) {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return nil, err
	}
	if err := h.checkAccess(R); err != nil { // requests change no value
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := rt.checkNode(node); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, h, err)
	}
	if err := h.deviceErr(node); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if prio < MinPriority || prio > MaxPriority {
		return nil, fmt.Errorf("%w: %s %s: priority %d is outside [MinPriority, MaxPriority]", ErrInvalidData, op, h, prio)
	}
	r := &DataRequest{rt: rt, done: make(chan struct{})}
	rt.beginAsync()
	issue := func() {
		if !rt.multiNode {
			r.complete(nil) // RAM always holds the data
			return
		}
		q := &dataReq{h: h, node: node, mode: mode, kind: kind, prio: prio, finish: func(err error) {
			if err != nil {
				err = fmt.Errorf("%s %s to %s: %w", op, h, rt.nodeName(node), err)
			}
			r.complete(err)
		}}
		e := rt.engine
		e.call(func() { e.submitReq(q) })
	}
	if !ordered {
		issue()
		return r, nil
	}
	h.acquireThen(R, func(a *acquisition) {
		// Issued before later tasks can be dispatched: the engine runs
		// calls before decisions. A later writer may still complete
		// before the copy lands; the copy is then dropped (see postCopy).
		issue()
		rt.complete(a.job, -1, nil)
	})
	return r, nil
}

// RequestAllocation makes room for the handle on memory node node without
// bringing its value (StarPU's starpu_data_request_allocation), evicting
// other data if needed. It does not wait for earlier tasks.
func (h *Handle) RequestAllocation(node int) (*DataRequest, error) {
	return h.request("request allocation of", node, W, reqNow, 0, false)
}

// FetchOnNode brings a valid copy of the handle to memory node node and
// waits for it (StarPU's starpu_data_fetch_on_node, synchronous): after the
// tasks submitted before that write the handle, as soon as possible.
func (h *Handle) FetchOnNode(node int) error {
	if err := h.rt.mayBlock("fetch " + h.String()); err != nil {
		return err
	}
	r, err := h.FetchOnNodeAsync(node)
	if err != nil {
		return err
	}
	return r.Wait()
}

// FetchOnNodeAsync is FetchOnNode returning at once (StarPU's
// starpu_data_fetch_on_node, asynchronous): the fetch waits for the tasks
// submitted before that write the handle.
func (h *Handle) FetchOnNodeAsync(node int) (*DataRequest, error) {
	return h.request("fetch", node, R, reqNow, 0, true)
}

// PrefetchOnNode asks for a valid copy of the handle on memory node node
// when there is room for it (StarPU's starpu_data_prefetch_on_node_prio):
// after the tasks submitted before that write the handle, behind the
// node's other prefetches of higher priority. A prefetch never evicts
// data: one that does not fit is dropped (Wait says so).
func (h *Handle) PrefetchOnNode(node, prio int) (*DataRequest, error) {
	return h.request("prefetch", node, R, reqPrefetch, prio, true)
}

// IdlePrefetchOnNode is PrefetchOnNode done only when the node has no
// transfer in flight and no other prefetch waiting (StarPU's
// starpu_data_idle_prefetch_on_node_prio); prio orders the idle prefetches
// among themselves.
func (h *Handle) IdlePrefetchOnNode(node, prio int) (*DataRequest, error) {
	return h.request("idle prefetch", node, R, reqIdle, prio, true)
}

// IsOnNode tells whether memory node node holds a valid copy of the handle
// now (StarPU's starpu_data_is_on_node).
func (h *Handle) IsOnNode(node int) bool {
	rt := h.rt
	if node < 0 || node >= len(rt.nodes) || h.unregistered.Load() {
		return false
	}
	if !rt.multiNode {
		return node == 0
	}
	return node < 64 && h.validMask.Load()&(1<<node) != 0
}

// DataStatus is the state of a handle's replicate on a memory node.
type DataStatus struct {
	// Allocated: the node has memory for the handle.
	Allocated bool
	// Valid: the node holds the handle's current value.
	Valid bool
	// Requested: an allocation or transfer to the node is in flight, or a
	// prefetch is queued.
	Requested bool
}

// QueryStatus returns the state of the handle's replicate on memory node
// node (StarPU's starpu_data_query_status).
func (h *Handle) QueryStatus(node int) (DataStatus, error) {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return DataStatus{}, err
	}
	if h.unregistered.Load() {
		return DataStatus{}, fmt.Errorf("query status of %s: %w", h, ErrUnregistered)
	}
	if node < 0 || node >= len(rt.nodes) {
		return DataStatus{}, fmt.Errorf("%w: query status of %s: memory node %d does not exist (nodes 0 to %d)", ErrInvalidData, h, node, len(rt.nodes)-1)
	}
	if !rt.multiNode {
		return DataStatus{Allocated: true, Valid: true}, nil
	}
	var st DataStatus
	rt.engine.sync(func() {
		r := &h.reps[node]
		st = DataStatus{Allocated: r.allocated, Valid: r.state != invalid,
			Requested: r.filling != nil || rt.nodes[node].reqs.queuedFor(h)}
	})
	return st, nil
}

// WontUse tells the runtime that the handle will not be used soon (StarPU's
// starpu_data_wont_use): once the tasks submitted before are over, its
// device copies are written back to RAM if they hold the only valid value,
// and freed; those in use then are the first evicted when memory runs out.
// It returns at once. On a handle partitioned read-write (by Partition or
// an active plan), whose value lives in its children, it applies to the
// children, as StarPU takes it: a hint, never an error.
func (h *Handle) WontUse() error {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return err
	}
	if h.unregistered.Load() {
		return fmt.Errorf("won't use: %s: %w", h, ErrUnregistered)
	}
	if kids := h.partitionChildren(); kids != nil {
		for _, c := range kids {
			if err := c.WontUse(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := h.checkAccess(R); err != nil {
		return fmt.Errorf("won't use: %w", err)
	}
	if !rt.multiNode {
		return nil
	}
	rt.beginAsync()
	h.acquireThen(R, func(a *acquisition) {
		e := rt.engine
		e.call(func() {
			e.wontUse(h).seal(func() {
				rt.complete(a.job, -1, nil)
				rt.endAsync(nil)
			})
		})
	})
	return nil
}

// wontUse evicts h's idle device copies, writing back the dirty ones
// first, and marks the others as the first to evict.
func (e *engine) wontUse(h *Handle) *opGroup {
	h.x.wontUse = e.tick()
	g := newOpGroup()
	for i := 1; i < len(h.reps); i++ {
		r := &h.reps[i]
		if !r.allocated || r.refs > 0 || r.filling != nil {
			continue
		}
		if r.state != owner {
			e.evict(r)
			continue
		}
		if h.reps[0].filling != nil {
			continue // already being written back
		}
		g.add()
		x := e.copyBetween(h, i, 0)
		x.then = append(x.then, func(err error) {
			if err == nil && r.allocated && r.refs == 0 && r.filling == nil && r.state != owner {
				e.evict(r)
			}
			g.one()
		})
	}
	return g
}

// SetWTMask sets the handle's write-through mask (StarPU's
// starpu_data_set_wt_mask), bit n for memory node n: after every write on a
// node, by a task or a writing acquisition, the nodes of the mask get a copy
// too, before the task counts as completed; those copies are evicted last.
// With bit 0 set, RAM stays up to date with tasks that write on a device.
// It applies to the handle's current children too. ^uint64(0), StarPU's
// idiom, means every node data can be brought to; any other mask naming a
// node that does not exist or cannot be reached (no worker serves it) is
// refused, rather than silently doing less than it says.
func (h *Handle) SetWTMask(mask uint64) error {
	rt := h.rt
	if mask == ^uint64(0) {
		mask = 0
		for n := range min(len(rt.nodes), 64) {
			if rt.checkNode(n) == nil && h.deviceErr(n) == nil {
				mask |= 1 << n
			}
		}
	}
	for n := 0; n < 64; n++ {
		if mask&(1<<n) == 0 {
			continue
		}
		if err := rt.checkNode(n); err != nil {
			return fmt.Errorf("write-through mask %#x of %s: %w", mask, h, err)
		}
		if err := h.deviceErr(n); err != nil {
			return fmt.Errorf("write-through mask %#x: %w", mask, err)
		}
	}
	h.x.wt.Store(mask)
	for _, c := range h.Children() {
		if err := c.SetWTMask(mask); err != nil {
			return err
		}
	}
	return nil
}

// WTMask returns the handle's write-through mask.
func (h *Handle) WTMask() uint64 { return h.x.wt.Load() }

// Invalidate waits for the tasks submitted on the handle and drops every
// replicate's value (StarPU's starpu_data_invalidate): the contents are
// undefined until the next write, which should come first. Device
// allocations go back to their node's cache; the registered memory is left
// as it is.
func (h *Handle) Invalidate() error {
	if err := h.checkInvalidate(); err != nil {
		return err
	}
	if err := h.rt.mayBlock("invalidate " + h.String()); err != nil {
		return err
	}
	a := h.acquireAsync(W)
	h.rt.await(a.granted)
	if h.rt.multiNode {
		e := h.rt.engine
		e.sync(func() { e.invalidate(h) })
	}
	h.rt.complete(a.job, -1, nil)
	return nil
}

// InvalidateSubmit is Invalidate returning at once (StarPU's
// starpu_data_invalidate_submit): the invalidation is ordered like a write
// after the tasks submitted before, and the tasks submitted after wait for
// it.
func (h *Handle) InvalidateSubmit() error {
	if err := h.checkInvalidate(); err != nil {
		return err
	}
	rt := h.rt
	rt.beginAsync()
	h.acquireThen(W, func(a *acquisition) {
		if !rt.multiNode {
			rt.complete(a.job, -1, nil)
			rt.endAsync(nil)
			return
		}
		e := rt.engine
		e.call(func() {
			e.invalidate(h)
			rt.complete(a.job, -1, nil)
			rt.endAsync(nil)
		})
	})
	return nil
}

func (h *Handle) checkInvalidate() error {
	if err := h.rt.usable(); err != nil {
		return err
	}
	if err := h.checkUsable(); err != nil {
		return fmt.Errorf("invalidate: %w", err)
	}
	return nil
}

// invalidate marks every replicate of h invalid and returns the idle device
// allocations to their nodes' caches.
func (e *engine) invalidate(h *Handle) {
	h.x.gen++ // copies in flight carry the old value
	for i := range h.reps {
		r := &h.reps[i]
		if i > 0 && r.allocated && r.refs == 0 && r.filling == nil {
			e.release(r)
			continue
		}
		r.state = invalid
	}
	h.publishValid()
}

// UnregisterNoCoherency is Unregister without writing the value back to
// the registered memory (StarPU's starpu_data_unregister_no_coherency): it
// waits for the tasks on the handle, then drops every replicate.
func (h *Handle) UnregisterNoCoherency() error {
	a, err := h.closeAndWait()
	if err != nil {
		return err
	}
	// A write-only fetch moves nothing; it waits for a copy still landing
	// in the RAM replicate, which is freed next.
	err = h.fetchTo(0, W)
	h.dropReplicates()
	h.mu.Lock()
	h.homeValid = true // the registered memory keeps what it had
	h.mu.Unlock()
	h.rt.complete(a.job, -1, nil)
	if ferr := h.rt.forget(h); ferr != nil {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("unregister %s: %w", h, err)
	}
	return nil
}

// UnregisterSubmit unregisters the handle once the tasks submitted on it
// are over, and returns at once (StarPU's starpu_data_unregister_submit):
// the value is then written back to the registered memory and the
// runtime's copies are freed. The handle cannot be used after the call.
// WaitForAll waits for it, and returns its error if the write-back failed.
func (h *Handle) UnregisterSubmit() error {
	if err := h.rt.usable(); err != nil {
		return err
	}
	if h.partitioned.Load() {
		return fmt.Errorf("%w: unregister %s: it is partitioned; Unpartition it first", ErrInvalidData, h)
	}
	if err := h.checkPlans(); err != nil {
		return fmt.Errorf("unregister: %w", err)
	}
	if err := h.close(true); err != nil {
		return err
	}
	rt := h.rt
	rt.beginAsync()
	h.afterFree(func() {
		j := rt.newJob()
		a := &acquisition{mode: RW, job: j, closing: true}
		a.onGrant = func() { go h.finishUnregister(a) }
		j.acquire = a
		h.depend(j, RW)
		if j.ndeps.Add(-1) == 0 {
			rt.ready(j, -1)
		}
	})
	return nil
}

func (h *Handle) finishUnregister(a *acquisition) {
	rt := h.rt
	var err error
	if lost := h.Lost(); lost != nil {
		err = fmt.Errorf("unregister %s: value not written back: %w", h, lost)
	} else if err = h.fetchTo(0, R); err != nil {
		err = fmt.Errorf("unregister %s: bring data back to RAM: %w", h, err)
	} else {
		h.homeOut()
	}
	h.dropReplicates()
	rt.complete(a.job, -1, nil)
	if ferr := rt.forget(h); ferr != nil && err == nil {
		err = ferr
	}
	rt.endAsync(err)
}

// checkUnregister checks what Unregister checks.
func (h *Handle) checkUnregister() error {
	if h.unregistered.Load() {
		return fmt.Errorf("unregister %s: %w", h, ErrUnregistered)
	}
	if h.partitioned.Load() {
		return fmt.Errorf("%w: unregister %s: it is partitioned; Unpartition it first", ErrInvalidData, h)
	}
	if err := h.checkPlans(); err != nil {
		return fmt.Errorf("unregister: %w", err)
	}
	h.mu.Lock()
	held := len(h.held)
	h.mu.Unlock()
	if held > 0 {
		return fmt.Errorf("unregister %s: still acquired by the application; release it first", h)
	}
	return nil
}

// CopyFrom copies src's data into h and waits (StarPU's starpu_data_cpy,
// synchronous). The copy is ordered with the tasks like a task reading src
// and writing h. Both must have the same shape (interface, element size,
// dimensions; leading dimensions may differ), or, for a data interface
// plugin, the same metadata. The copy is made in RAM.
func (h *Handle) CopyFrom(src *Handle) error {
	if err := h.rt.mayBlock("copy into " + h.String()); err != nil {
		return err
	}
	j, err := h.submitCopy(src, nil)
	if err != nil {
		return err
	}
	return h.rt.wait(j)
}

// CopyFromAsync is CopyFrom returning at once (StarPU's starpu_data_cpy,
// asynchronous): later tasks on either handle are ordered after the copy,
// WaitForAll waits for it, and done, when not nil, runs with its outcome
// once it is over.
func (h *Handle) CopyFromAsync(src *Handle, done func(error)) error {
	_, err := h.submitCopy(src, done)
	return err
}

func (h *Handle) submitCopy(src *Handle, done func(error)) (*job, error) {
	rt := h.rt
	if err := rt.usable(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("%w: copy into %s: nil source", ErrInvalidData, h)
	}
	if src.rt != rt {
		return nil, fmt.Errorf("%w: copy %s into %s: the handles belong to different runtimes", ErrInvalidData, src, h)
	}
	if src == h {
		return nil, fmt.Errorf("%w: copy %s onto itself", ErrInvalidData, h)
	}
	if err := src.checkAccess(R); err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	if err := h.checkAccess(W); err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	if err := sameShape(h, src); err != nil {
		return nil, err
	}
	j := rt.newJob()
	a := &acquisition{mode: W, job: j}
	a.onGrant = func() { go h.runCopy(src, j, done) }
	j.acquire = a
	rt.waits.pending.Add(1)
	src.depend(j, R)
	h.depend(j, W)
	if j.ndeps.Add(-1) == 0 {
		rt.ready(j, -1)
	}
	return j, nil
}

// runCopy copies src into h in RAM once the copy's turn has come.
func (h *Handle) runCopy(src *Handle, j *job, done func(error)) {
	rt := h.rt
	// A copy refused by a handle closed meanwhile is not ordered after
	// that handle's earlier accesses: it must not touch the data.
	err := j.doomErr()
	if err == nil {
		err = src.Lost()
	}
	if err == nil {
		err = src.fetchTo(0, R)
	}
	if err == nil {
		err = h.fetchTo(0, W)
	}
	if err == nil && h.span.Size > 0 {
		streamCopy(rt.arena.Bytes(h.span), h.ramRuns(), rt.arena.Bytes(src.span), src.ramRuns())
		h.mu.Lock()
		if h.home != nil {
			h.homeValid = false
		}
		h.mu.Unlock()
		h.writtenSync(0)
	}
	if err == nil {
		h.clearLost() // written anew
	} else {
		err = fmt.Errorf("copy %s into %s: %w", src, h, err)
	}
	rt.complete(j, -1, err)
	if done != nil {
		rt.callback(func() { done(err) })
	}
	rt.finish(j)
}

// sameShape says why src cannot be copied into dst, if it cannot.
func sameShape(dst, src *Handle) error {
	if dst.iface != nil || src.iface != nil {
		if dst.iface == nil || src.iface == nil || dst.iface.inst != src.iface.inst || !bytes.Equal(dst.iface.meta, src.iface.meta) {
			return fmt.Errorf("%w: copy %s into %s: the data have different layouts (%s into %s)", ErrInvalidData, src, dst, src.Interface(), dst.Interface())
		}
		return nil
	}
	a, b := dst.layout, src.layout
	if a.Interface != b.Interface || a.ElemSize != b.ElemSize || a.NX != b.NX || a.NY != b.NY || a.NZ != b.NZ {
		return fmt.Errorf("%w: copy %s into %s: the data have different layouts (%s into %s)", ErrInvalidData, src, dst, shape(b), shape(a))
	}
	return nil
}

func shape(l kernel.Layout) string {
	return fmt.Sprintf("%s %dx%dx%d of %d-byte elements", l.Interface, l.NX, l.NY, l.NZ, l.ElemSize)
}
