package sched

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Configurable is implemented by policies that take configuration from the
// config file's plugin block.
type Configurable interface {
	ConfigSchema() *base.Schema
	SetConfig(cfg base.Config) error
}

// Host runs a Policy over the shared-memory rings: it is the Scheduler a
// policy author gets for free, used in process by the core's tests and behind
// gRPC in a plugin process.
type Host struct {
	info   base.Info
	arena  *shm.Arena
	policy Policy

	mu      sync.Mutex // guards the session fields against concurrent Init/Deinit
	running bool
	stop    atomic.Bool
	done    chan struct{}
	loopErr error

	events, decisions  *shm.Ring
	bell, coreBell     *shm.Bell
	spinner            shm.Spinner
	minDepth, maxDepth int
	queuedWorkNs       float64
	inflight           []int
	meanNs             []float64 // moving average of task durations, per worker
	workers            []Worker
	// models are the codelets' model names by codelet number, as the
	// first Push of each said (wire.PushName), for Task.Model.
	models []string
	// rings are the workers' scheduler rings by worker ID, nil where a
	// worker has none.
	rings []*workerRing
	// backlog holds the decisions the decisions ring had no room for, in
	// order, and inRing says the decision last reserved is in the ring
	// (host_decisions.go).
	backlog [][]byte
	inRing  bool
	// wantRoom says a decision found the ring full since the last offer:
	// the loop polls for room (host_decisions.go).
	wantRoom bool
	// chain is the chained tasks' state (host_chain.go), nil when none
	// are chained; answered counts the chained tasks declined since the
	// core's bell last rang (the core waits for those answers).
	chain    *chainHost
	answered int
	// combined are the combined workers of Init, active those whose
	// members are all among workers, teamTasks the workers each task
	// handed to a combined worker counts on (host_parallel.go).
	combined, active []Worker
	teamTasks        map[uint64][]int
}

// workerRing is the host's side of a worker's scheduler ring.
type workerRing struct {
	ring     *shm.Ring
	bell     *shm.Bell
	mustRing bool // posted to since the bell last rang
	// arch is the worker's driver.ArchIndex: which of a task's Impls hold
	// the kernels its Execs take.
	arch int
}

// NewHost wraps policy; info names the plugin (Kind is set to sched).
func NewHost(a *shm.Arena, policy Policy, info base.Info) *Host {
	info.Kind = base.KindScheduler
	if len(info.APIVersions) == 0 {
		info.APIVersions = []int{base.APIVersion}
	}
	return &Host{info: info, arena: a, policy: policy}
}

// ServePolicy is the whole main() of a scheduler plugin: it serves newPolicy
// behind the Scheduler contract.
func ServePolicy(info base.Info, newPolicy func() Policy) {
	Serve(func(a *shm.Arena, _ hclog.Logger) (Scheduler, error) {
		return NewHost(a, newPolicy(), info), nil
	})
}

// PluginInfo implements base.Plugin.
func (h *Host) PluginInfo(context.Context) (*base.Info, error) {
	info := h.info
	return &info, nil
}

// ConfigSchema implements base.Plugin.
func (h *Host) ConfigSchema(context.Context) (*base.Schema, error) {
	if c, ok := h.policy.(Configurable); ok {
		return c.ConfigSchema(), nil
	}
	return &base.Schema{}, nil
}

// SetConfig implements base.Plugin.
func (h *Host) SetConfig(ctx context.Context, cfg base.Config) error {
	s, _ := h.ConfigSchema(ctx)
	if err := s.Validate(cfg); err != nil {
		return fmt.Errorf("sched-%s config: %w", h.info.Name, err)
	}
	if c, ok := h.policy.(Configurable); ok {
		return c.SetConfig(cfg)
	}
	return nil
}

// Init implements Scheduler: it opens the rings, calls the policy's Init and
// starts the event loop.
func (h *Host) Init(_ context.Context, req *InitRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		return errors.New("scheduler already initialised")
	}
	if h.arena == nil {
		return errors.New("scheduler has no shared-memory arena")
	}
	if req.QueueDepth < 1 {
		return fmt.Errorf("queue depth %d: must be at least 1", req.QueueDepth)
	}
	var err error
	if h.events, err = openRing(h.arena, req.Rings.Events); err != nil {
		return fmt.Errorf("events ring: %w", err)
	}
	if h.decisions, err = openRing(h.arena, req.Rings.Decisions); err != nil {
		return fmt.Errorf("decisions ring: %w", err)
	}
	h.bell = h.arena.Bell(req.Rings.Bell)
	h.coreBell = h.arena.Bell(req.Rings.CoreBell)
	h.spinner = shm.Spinner{Spin: req.SpinIters}
	h.minDepth, h.maxDepth = req.QueueDepth, max(req.QueueDepth, req.MaxQueueDepth)
	h.queuedWorkNs = float64(req.QueuedWork.Nanoseconds())
	maxID := -1
	for _, w := range req.Workers {
		if w.ID < 0 {
			return fmt.Errorf("worker id %d: must not be negative", w.ID)
		}
		maxID = max(maxID, w.ID)
	}
	h.inflight = make([]int, maxID+1)
	h.meanNs = make([]float64, maxID+1)
	h.workers = append([]Worker(nil), req.Workers...)
	if err := h.initCombined(req.Combined); err != nil {
		return err
	}
	h.rings = nil
	for _, wr := range req.WorkerRings {
		if wr.Worker < 0 || wr.Worker > maxID {
			return fmt.Errorf("scheduler ring of worker %d: no such worker", wr.Worker)
		}
		r, err := openRing(h.arena, wr.Ring)
		if err != nil {
			return fmt.Errorf("scheduler ring of worker %d: %w", wr.Worker, err)
		}
		if h.rings == nil {
			h.rings = make([]*workerRing, maxID+1)
		}
		arch := -1
		if i := workerIndex(h.workers, wr.Worker); i >= 0 {
			arch = driver.ArchIndex(h.workers[i].Arch)
		}
		h.rings[wr.Worker] = &workerRing{ring: r, bell: h.arena.Bell(wr.Bell), arch: arch}
	}
	if err := h.policy.Init(h.workers); err != nil {
		return fmt.Errorf("policy init: %w", err)
	}
	h.updateCombined(true)
	h.chain = nil
	if h.rings != nil {
		h.chain = newChainHost(h.policy, maxID+1)
	}
	h.stop.Store(false)
	h.done = make(chan struct{})
	h.running = true
	go h.loop()
	return nil
}

// Deinit implements Scheduler.
func (h *Host) Deinit(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return nil
	}
	h.stop.Store(true)
	h.bell.Ring()
	<-h.done
	h.running = false
	h.policy.Deinit()
	return h.loopErr
}

func openRing(a *shm.Arena, s base.Span) (*shm.Ring, error) {
	mem, err := a.BytesChecked(s)
	if err != nil {
		return nil, err
	}
	return shm.OpenRing(mem)
}

// loop is the policy's thread: drain events into the hooks, then offer every
// worker with room in its queue a task.
func (h *Host) loop() {
	runtime.LockOSThread()
	defer close(h.done)
	ready := func() bool { return !h.events.Empty() || h.stop.Load() }
	for !h.stop.Load() {
		// With decisions waiting for room in the ring, poll it every
		// 50 µs: the core reads it without telling the host.
		timeout := 100 * time.Millisecond
		if len(h.backlog) > 0 || h.wantRoom {
			timeout = 50 * time.Microsecond
		}
		woken := h.spinner.Wait(h.bell, ready, timeout)
		flushed := len(h.backlog) > 0 && h.flush()
		if !woken && !flushed && !h.wantRoom {
			continue
		}
		// Offer again, as after an event: the chained tasks held for
		// want of room (postChained) may find it now.
		h.wantRoom = false
		if err := h.drain(); err != nil {
			h.loopErr = err
			return
		}
		assigned := h.offer()
		// Posted tasks need no core: their echo waits until the core
		// wakes for their completion. Declined ones do, and flushed
		// decisions.
		if assigned > 0 || h.answered > 0 || flushed {
			h.answered = 0
			h.coreBell.Ring()
		}
		for _, wr := range h.rings {
			if wr != nil && wr.mustRing {
				wr.mustRing = false
				wr.bell.Ring()
			}
		}
	}
}

func (h *Host) drain() error {
	for msg := h.events.Peek(); msg != nil; msg = h.events.Peek() {
		switch wire.Type(msg) {
		case wire.TypePush:
			var p wire.Push
			if err := p.Decode(msg); err != nil {
				return err
			}
			t := &Task{ID: p.ID, Priority: p.Priority, ArchMask: p.ArchMask,
				Worker: p.Worker, ReleasedBy: p.ReleasedBy, Codelet: p.Codelet,
				Locality: p.Flags&wire.PushLocality != 0, Length: p.Length}
			t.Model = h.modelName(p.Codelet, &p)
			if len(p.Transfer) > 0 {
				t.Transfer = append([]int64(nil), p.Transfer...)
			}
			if p.Flags&wire.PushImpls != 0 {
				t.Impls = copyImpls(&p.Impls)
			}
			if p.Flags&wire.PushParallel != 0 {
				t.Parallel = &Parallel{Sizes: append([]SizeLength(nil), p.Parallel...)}
			}
			if len(p.Exec) > 0 && h.rings != nil {
				t.exec = append([]byte(nil), p.Exec...)
			}
			if p.Flags&wire.PushAfter != 0 {
				pred, ok := wire.ExecAfterOf(p.Exec)
				if !ok || t.exec == nil {
					return fmt.Errorf("events ring: task %d pushed to run after another without an Exec flagged ExecAfter", p.ID)
				}
				t.after = pred
				h.pushAfter(t)
				break
			}
			if h.chain != nil {
				h.chain.pushed(t.ID)
			}
			h.policy.Push(t)
		case wire.TypeDone:
			var d wire.Done
			if err := d.Decode(msg); err != nil {
				return err
			}
			// A combined worker's task gives its members' slots back
			// (host_parallel.go); any other its worker's.
			team := len(h.teamTasks) > 0 && h.teamDone(&d)
			if w := int(d.Worker); !team && w >= 0 && w < len(h.inflight) && h.inflight[w] > 0 {
				h.inflight[w]--
				h.observe(w, d.DurationNs)
				if h.chain != nil {
					h.chainDone(w, d.ID)
				}
			}
			h.policy.PostExec(int(d.Worker), d.ID, d.DurationNs)
		case wire.TypeWorkers:
			if err := h.changeWorkers(msg); err != nil {
				return err
			}
		default:
			return fmt.Errorf("events ring: unknown message type %d", wire.Type(msg))
		}
		h.events.Release()
	}
	return nil
}

// changeWorkers applies a Workers message: the policy's AddWorkers or
// RemoveWorkers, then the host's own list of workers it offers tasks to,
// then the echo on the decisions ring. The echo follows every Assign made
// before the change, so once the core reads it no later Assign names a
// removed worker. Tasks already assigned to a removed worker still complete
// (their Done returns the slot); the policy must place again the tasks it
// had queued for it.
func (h *Host) changeWorkers(msg []byte) error {
	var m wire.Workers
	if err := m.Decode(msg); err != nil {
		return fmt.Errorf("events ring: %w", err)
	}
	switch m.Op {
	case wire.WorkersAdd:
		var add []Worker
		for _, r := range m.Workers {
			if r.ID < 0 {
				return fmt.Errorf("events ring: add worker %d: negative id", r.ID)
			}
			if workerIndex(h.workers, int(r.ID)) >= 0 {
				continue
			}
			w := Worker{ID: int(r.ID), Arch: archOfBit(r.Arch), Node: int(r.Node)}
			for len(h.inflight) <= w.ID {
				h.inflight = append(h.inflight, 0)
				if h.chain != nil {
					h.chain.grow(w.ID)
				}
				h.meanNs = append(h.meanNs, 0)
			}
			add = append(add, w)
		}
		if len(add) > 0 {
			h.workers = append(h.workers, add...)
			h.policy.AddWorkers(add)
		}
	case wire.WorkersRemove:
		var ids []int
		for _, r := range m.Workers {
			if i := workerIndex(h.workers, int(r.ID)); i >= 0 {
				h.workers = append(h.workers[:i], h.workers[i+1:]...)
				ids = append(ids, int(r.ID))
			}
		}
		if len(ids) > 0 {
			h.policy.RemoveWorkers(ids)
			if h.chain != nil {
				for _, id := range ids {
					h.dropWorker(id)
				}
			}
		}
	default:
		return fmt.Errorf("events ring: workers message with unknown operation %d", m.Op)
	}
	h.updateCombined(false)
	ack := wire.Workers{Op: m.Op, Seq: m.Seq}
	ack.Encode(h.reserve(wire.WorkersLen(0)))
	h.commit()
	h.coreBell.Ring()
	return nil
}

func workerIndex(ws []Worker, id int) int {
	for i := range ws {
		if ws[i].ID == id {
			return i
		}
	}
	return -1
}

// archOfBit is the architecture whose driver.ArchBit is bit.
func archOfBit(bit uint32) driver.Arch {
	for _, a := range []driver.Arch{driver.CPU, driver.CUDA, driver.OpenCL} {
		if driver.ArchBit(a) == bit {
			return a
		}
	}
	return ""
}

// observe folds a task duration into the worker's moving average.
func (h *Host) observe(w int, ns int64) {
	const weight = 0.125
	d := float64(max(ns, 1))
	if h.meanNs[w] == 0 {
		h.meanNs[w] = d
	} else {
		h.meanNs[w] += weight * (d - h.meanNs[w])
	}
}

// depth is how many tasks worker w may hold: enough for QueuedWork of its
// recent tasks, within [QueueDepth, MaxQueueDepth].
func (h *Host) depth(w int) int {
	if h.maxDepth == h.minDepth || h.meanNs[w] == 0 {
		return h.minDepth
	}
	n := int(h.queuedWorkNs/h.meanNs[w]) + 1
	return min(max(n, h.minDepth), h.maxDepth)
}

// offer hands every worker with room in its queue the tasks the policy pops
// for it, and returns how many went to the core as plain Assigns.
func (h *Host) offer() int {
	assigned := 0
	for {
		progress := false
		for i := range h.workers {
			id := h.workers[i].ID
			if h.inflight[id] >= h.depth(id) {
				continue
			}
			if h.chain != nil && id < len(h.chain.held) && len(h.chain.held[id]) > 0 {
				n := h.inflight[id]
				if h.offerHeld(id) || h.inflight[id] == n {
					continue // the policy's tasks wait behind the chain
				}
				progress = true
				continue
			}
			t := h.policy.Pop(id)
			if t == nil {
				continue
			}
			if t.Combined() >= 0 {
				h.assignTeam(id, t)
				assigned++
				progress = true
				if h.chain != nil {
					h.placed(t.ID, id, false)
				}
				continue
			}
			posted := h.assign(id, t)
			if !posted {
				assigned++
			}
			h.inflight[id]++
			progress = true
			if h.chain != nil {
				h.placed(t.ID, id, posted)
			}
		}
		if !progress {
			return assigned
		}
	}
}

// maxNamed bounds the codelet numbers whose names the host keeps: a
// runtime numbers its codelets from 0, and a garbage number must not grow
// the table.
const maxNamed = 1 << 16

// modelName is the model name of codelet c, learnt from p when it carries
// one (wire.PushName); "" when the core never said.
func (h *Host) modelName(c uint32, p *wire.Push) string {
	if c >= maxNamed {
		return ""
	}
	if p.Flags&wire.PushName != 0 {
		if int(c) >= len(h.models) {
			h.models = append(h.models, make([]string, int(c)+1-len(h.models))...)
		}
		h.models[c] = string(p.Name)
	}
	if int(c) < len(h.models) {
		return h.models[c]
	}
	return ""
}

// copyImpls copies a Push's implementations, whose storage the next
// message reuses.
func copyImpls(src *[wire.NumArch][]wire.Impl) *[wire.NumArch][]wire.Impl {
	n := 0
	for _, is := range src {
		n += len(is)
	}
	dst := new([wire.NumArch][]wire.Impl)
	buf := make([]wire.Impl, 0, n)
	for a, is := range src {
		if len(is) > 0 {
			start := len(buf)
			buf = append(buf, is...)
			dst[a] = buf[start:len(buf):len(buf)]
		}
	}
	return dst
}

// assign sends the decision to run t on worker id, with the implementation
// the policy chose, if it did. When the core sent t's Exec and the worker
// has a scheduler ring with room, the host posts the Exec there itself,
// with the chosen implementation's kernel, and the Assign, flagged
// AssignPosted, only tells the core where t runs; it goes first, so the
// core knows before t completes. A chosen implementation the worker cannot
// run is not posted: the plain Assign lets the core refuse it.
func (h *Host) assign(id int, t *Task) (posted bool) {
	var slot []byte
	var wr *workerRing
	impl, kernel := t.Impl(), int32(-1)
	if len(t.exec) > 0 && id < len(h.rings) && h.rings[id] != nil {
		wr = h.rings[id]
		if impl >= 0 && wr.arch >= 0 && t.Impls != nil && impl < len(t.Impls[wr.arch]) {
			kernel = t.Impls[wr.arch][impl].Kernel
		}
		if impl < 0 || kernel >= 0 {
			slot = wr.ring.Reserve(len(t.exec))
		}
	}
	return h.decide(id, t, wr, slot, kernel)
}

// decide writes the Assign of t to worker id, flagged AssignPosted when
// slot, reserved in wr, takes t's Exec (with its kernel index set to
// kernel unless -1), and reports whether it did. The Assign goes first, so
// the core knows where t runs before it completes: with no room for it in
// the decisions ring at once (host_decisions.go), t is not posted, and the
// core posts its Exec on the Assign.
func (h *Host) decide(id int, t *Task, wr *workerRing, slot []byte, kernel int32) (posted bool) {
	var b []byte
	if slot != nil {
		b = h.reserveRing(wire.AssignSize)
	}
	if b == nil {
		// Not posted: a slot reserved in wr is given up, never committed.
		h.announce(id, t, h.reserve(wire.AssignSize), nil)
		return false
	}
	h.announce(id, t, b, wr)
	h.post(t, wr, slot, kernel)
	return true
}

// announce writes the Assign of t to worker id into b, reserved for it,
// and commits it. When posted names the ring whose reserved slot takes t's
// Exec, the Assign is flagged AssignPosted and says where the slot lies.
func (h *Host) announce(id int, t *Task, b []byte, posted *workerRing) {
	a := wire.Assign{Worker: int32(id), ID: t.ID}
	if posted != nil {
		a.Flags = wire.AssignPosted
		a.At = posted.ring.ReservedAt()
	}
	if impl := t.Impl(); impl != -1 {
		a.Flags |= wire.AssignImpl
		a.Impl = uint32(impl)
	}
	a.Encode(b)
	h.commit()
}

// post copies t's Exec into slot, reserved in wr, with its kernel index
// set to kernel unless -1, and commits it: after its Assign (announce).
func (h *Host) post(t *Task, wr *workerRing, slot []byte, kernel int32) {
	copy(slot, t.exec)
	if kernel >= 0 {
		wire.SetExecKernel(slot, uint32(kernel))
	}
	wr.ring.Commit()
	wr.mustRing = true
	t.exec = nil
}
