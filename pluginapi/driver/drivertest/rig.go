package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Option changes how Start sets up a rig.
type Option func(*options)

type options struct {
	workers            int
	allUnits           bool
	env                []string
	config             base.Config
	arena, control     uint64
	dispatch, complete uint64
	spin               int
	timeout, ringWait  time.Duration
	noInit             bool
}

// firstWorkerID is the runtime-wide ID of worker 0: not 0, so that a
// driver that confuses a worker's ID with its unit shows.
const firstWorkerID = 100

// Workers sets how many workers the rig runs, worker i on unit i (default
// 1). Start fails the test if the driver reports fewer units.
func Workers(n int) Option { return func(o *options) { o.workers = n } }

// AllUnits runs one worker on every unit the driver reports.
func AllUnits() Option { return func(o *options) { o.allUnits = true } }

// Env sets environment variables ("KEY=value") for the driver: in the
// test's process for an in-process driver, in the child's environment for
// a plugin process.
func Env(kv ...string) Option { return func(o *options) { o.env = append(o.env, kv...) } }

// Config is given to the driver's SetConfig before its fingerprint is
// taken, as the runtime gives a plugin its config block.
func Config(cfg base.Config) Option { return func(o *options) { o.config = cfg } }

// ArenaSize sets the arena's size and its control region's (default 512
// MiB and 16 MiB; the memory is sparse, so only what is touched costs).
func ArenaSize(size, control uint64) Option {
	return func(o *options) { o.arena, o.control = size, control }
}

// RingSizes sets the capacity in bytes of each worker's dispatch (and
// scheduler) ring and of its completion ring (default 128 KiB and 64 KiB).
func RingSizes(dispatch, completion uint64) Option {
	return func(o *options) { o.dispatch, o.complete = dispatch, completion }
}

// SpinIters is InitRequest.SpinIters (default 100).
func SpinIters(n int) Option { return func(o *options) { o.spin = n } }

// Timeout bounds each wait of the rig: for completions, for room on a full
// ring, for a gRPC call, for Deinit (default 30 s).
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// RingWait bounds how long WaitRung waits for a ring of the core's bell
// (default 2 s).
func RingWait(d time.Duration) Option { return func(o *options) { o.ringWait = d } }

// NoInit leaves the driver fingerprinted and the rings carved, but not
// initialised: the test may post messages before it calls Init.
func NoInit() Option { return func(o *options) { o.noInit = true } }

// Rig is the core's side of one driver: the arena, the workers' rings and
// doorbells, and the completions received so far. It belongs to the test's
// goroutine.
type Rig struct {
	T      testing.TB
	Arena  *shm.Arena
	Driver driver.Driver
	// FP is the driver's fingerprint, taken at Start and again when
	// Kernel does not find a name (kernels loaded since).
	FP *driver.Fingerprint
	// CoreBell is the core's doorbell, one for all the workers as the
	// core has it.
	CoreBell *shm.Bell
	// Workers are the workers of the current Init, worker i on unit i.
	Workers []*Worker
	// Timeout and RingWait are the Timeout and RingWait options.
	Timeout, RingWait time.Duration
	// Quiet makes Send leave the worker's bell alone, for tests that queue
	// messages while the worker sleeps and wake it otherwise (the bell
	// rung by hand, Deinit, the worker's own timeout).
	Quiet bool

	opts        options
	coreBellOff uint64
	running     bool // Init succeeded and no Deinit since
	stuck       bool // Deinit never returned: the arena stays mapped
	carved      bool // Workers' rings are fresh: no Init used them yet
	nextID      uint64
	nextBuf     uint64
	// rings are the completion rings of every Init, so that completions
	// posted on the rings of a driver since stopped are still read.
	rings []*Worker
	seq   uint32 // CoreBell.Seq() before the last poll
	got   map[uint64]wire.Completion
	sent  map[uint64]*Worker
	order []uint64
}

// Worker is one worker of the rig: its spec and the core's side of its
// rings. It embeds the rig, so a single-worker test can call everything on
// it.
type Worker struct {
	*Rig
	// Index is the worker's place in Rig.Workers, also its unit.
	Index int
	Spec  driver.WorkerSpec
	// Node is the memory node of the worker's unit, in the driver's
	// numbering (0: RAM).
	Node int
	// Dispatch and Sched (nil without a scheduler ring) carry messages to
	// the worker; Completion brings its completions.
	Dispatch, Sched, Completion *shm.Ring
	// Bell wakes the worker.
	Bell *shm.Bell
}

// Start creates an arena, starts the driver on it, configures and
// fingerprints it, carves each worker's rings and doorbells (a scheduler
// ring too for workers on RAM when the fingerprint sets SchedRing), and
// initialises the workers unless NoInit is given. The driver is
// deinitialised when the test ends, reading completions meanwhile as the
// core does.
func Start(t testing.TB, start Starter, opts ...Option) *Rig {
	t.Helper()
	o := options{workers: 1, arena: 512 << 20, control: 16 << 20, dispatch: 1 << 17, complete: 1 << 16,
		spin: 100, timeout: 30 * time.Second, ringWait: 2 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	a, err := shm.Create(o.arena, o.control)
	if err != nil {
		t.Fatalf("create arena: %v", err)
	}
	var r *Rig
	t.Cleanup(func() {
		if !r.stuck {
			a.Close()
		}
	})
	r = &Rig{T: t, Arena: a, opts: o, Timeout: o.timeout, RingWait: o.ringWait, nextBuf: 1 << 32,
		got: map[uint64]wire.Completion{}, sent: map[uint64]*Worker{}}
	r.Driver = start(t, a, o.env)
	if o.config != nil {
		if err := r.Driver.SetConfig(r.Ctx(), o.config); err != nil {
			t.Fatalf("SetConfig(%v): %v", o.config, err)
		}
	}
	r.FP = r.fingerprint()
	n := o.workers
	if o.allUnits {
		n = len(r.FP.Units)
	}
	if len(r.FP.Units) < n || n == 0 {
		t.Fatalf("the driver reports %d units, the rig needs %d (note: %q)", len(r.FP.Units), max(n, 1), r.FP.Note)
	}
	r.CoreBell, r.coreBellOff = CarveBell(t, a)
	r.carve(n)
	// Registered after the arena's Close (and, for a plugin, after the
	// process's Kill): cleanups run last first, so Deinit comes before
	// both.
	t.Cleanup(func() {
		if r.running {
			if err := r.Deinit(); err != nil {
				t.Errorf("Deinit at the end of the test: %v", err)
			}
		}
	})
	if !o.noInit {
		r.Init()
	}
	return r
}

// Ctx is a context for a call to the driver, cancelled after the rig's
// Timeout or at the end of the test.
func (r *Rig) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	r.T.Cleanup(cancel)
	return ctx
}

func (r *Rig) fingerprint() *driver.Fingerprint {
	r.T.Helper()
	fp, err := r.Driver.Fingerprint(r.Ctx())
	if err != nil {
		r.T.Fatalf("Fingerprint: %v", err)
	}
	if err := fp.Check(); err != nil {
		r.T.Fatalf("Fingerprint: %v", err)
	}
	return fp
}

// carve makes n workers with fresh rings and doorbells.
func (r *Rig) carve(n int) {
	t := r.T
	t.Helper()
	r.Workers = nil
	for i := 0; i < n; i++ {
		w := &Worker{Rig: r, Index: i, Node: r.FP.Units[i].Node}
		w.Spec = driver.WorkerSpec{ID: firstWorkerID + i, Unit: i, CoreBell: r.coreBellOff}
		w.Dispatch, w.Spec.Dispatch = CarveRing(t, r.Arena, r.opts.dispatch)
		w.Completion, w.Spec.Completion = CarveRing(t, r.Arena, r.opts.complete)
		w.Bell, w.Spec.Bell = CarveBell(t, r.Arena)
		if r.FP.SchedRing && w.Node == 0 {
			w.Sched, w.Spec.SchedRing = CarveRing(t, r.Arena, r.opts.dispatch)
		}
		r.Workers = append(r.Workers, w)
		r.rings = append(r.rings, w)
	}
	r.carved = true
}

// CarveRing carves a ring of the given capacity from arena a's control
// region and formats it, for tests that build a WorkerSpec by hand.
func CarveRing(t testing.TB, a *shm.Arena, capacity uint64) (*shm.Ring, base.Span) {
	t.Helper()
	s, err := a.Carve(shm.RingBytes(capacity), 64)
	if err != nil {
		t.Fatalf("carve a ring of %d bytes: %v", capacity, err)
	}
	ring, err := shm.InitRing(a.Bytes(s))
	if err != nil {
		t.Fatalf("format a ring: %v", err)
	}
	return ring, s
}

// CarveBell carves a doorbell from arena a's control region and returns
// it with its offset, for tests that build a WorkerSpec by hand.
func CarveBell(t testing.TB, a *shm.Arena) (*shm.Bell, uint64) {
	t.Helper()
	s, err := a.Carve(shm.BellSize, 64)
	if err != nil {
		t.Fatalf("carve a doorbell: %v", err)
	}
	return a.Bell(s.Offset), s.Offset
}

// Init starts the workers. After a Deinit it carves fresh rings first (the
// old ones may hold messages the driver never took), as many workers as
// before, in new Workers: take them again from W or Workers, since the old
// ones post on rings nobody reads. Completions left on the old rings are
// still read.
func (r *Rig) Init() {
	r.T.Helper()
	if r.running {
		r.T.Fatal("Init: the driver is running; Deinit it first")
	}
	if !r.carved {
		r.carve(len(r.Workers))
	}
	req := &driver.InitRequest{SpinIters: r.opts.spin}
	for _, w := range r.Workers {
		req.Workers = append(req.Workers, w.Spec)
	}
	r.carved = false
	if err := r.Driver.Init(r.Ctx(), req); err != nil {
		r.T.Fatalf("Init with %d workers: %v", len(req.Workers), err)
	}
	r.running = true
}

// Deinit stops the driver as the core does: it calls Driver.Deinit and
// keeps reading completions until it returns, failing the test if it does
// not return within the rig's Timeout, or if what it read was wrong once
// it has returned. It returns Deinit's error.
func (r *Rig) Deinit() error {
	r.T.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Driver.Deinit(context.Background()) }()
	timeout := time.NewTimer(r.Timeout)
	defer timeout.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var bad error
	read := func() {
		if err := r.read(); err != nil && bad == nil {
			bad = err
		}
	}
	for {
		select {
		case err := <-done:
			r.running = false
			read()
			if bad != nil {
				r.T.Fatal(bad)
			}
			return err
		case <-timeout.C:
			// The driver's workers may still use the arena: leave it
			// mapped rather than crash the test binary, and do not call
			// Deinit again at cleanup.
			r.stuck, r.running = true, false
			r.T.Fatalf("Deinit did not return within %v", r.Timeout)
		case <-tick.C:
			read()
		}
	}
}

// W is worker i.
func (r *Rig) W(i int) *Worker {
	r.T.Helper()
	if i < 0 || i >= len(r.Workers) {
		r.T.Fatalf("worker %d: the rig has %d", i, len(r.Workers))
	}
	return r.Workers[i]
}

// ID returns a fresh message ID.
func (r *Rig) ID() uint64 { r.nextID++; return r.nextID }

// Buffer returns a fresh device buffer number, far from the small numbers
// tests pick by hand.
func (r *Rig) Buffer() uint64 { r.nextBuf++; return r.nextBuf }

// Send posts a message of n bytes, written by enc, on the worker's
// dispatch ring and rings its bell (unless Quiet). While the ring is full it reads
// completions (the worker may be waiting for room to post one), failing
// the test after the rig's Timeout.
func (w *Worker) Send(n int, enc func([]byte)) {
	w.T.Helper()
	w.send(w.Dispatch, "dispatch", n, enc)
}

// SendSched is Send on the worker's scheduler ring, which the test fails
// without.
func (w *Worker) SendSched(n int, enc func([]byte)) {
	w.T.Helper()
	if w.Sched == nil {
		w.T.Fatalf("worker %d has no scheduler ring (fingerprint SchedRing %v, node %d)", w.Index, w.FP.SchedRing, w.Node)
	}
	w.send(w.Sched, "scheduler", n, enc)
}

func (w *Worker) send(ring *shm.Ring, name string, n int, enc func([]byte)) {
	w.T.Helper()
	if n > shm.MaxMessage(ring) {
		w.T.Fatalf("worker %d: a %d-byte message does not fit the %s ring (at most %d)", w.Index, n, name, shm.MaxMessage(ring))
	}
	deadline := time.Now().Add(w.Timeout)
	for {
		if b := ring.Reserve(n); b != nil {
			enc(b)
			ring.Commit()
			if !w.Quiet {
				w.Bell.Ring()
			}
			return
		}
		w.poll()
		if time.Now().After(deadline) {
			w.T.Fatalf("worker %d: %s ring full for %v: the worker stopped taking messages", w.Index, name, w.Timeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// Alloc asks the worker to allocate size bytes as buffer buf on its node,
// and returns the message's ID.
func (w *Worker) Alloc(buf, size uint64) uint64 {
	w.T.Helper()
	m := wire.Alloc{ID: w.ID(), Node: uint32(w.Node), Buffer: buf, Size: size}
	w.sent[m.ID] = w
	w.Send(wire.AllocSize, m.Encode)
	return m.ID
}

// Free releases buffer buf on the worker's node (no completion).
func (w *Worker) Free(buf uint64) {
	w.T.Helper()
	m := wire.Free{Node: uint32(w.Node), Buffer: buf}
	w.Send(wire.FreeSize, m.Encode)
}

// Copy moves ranges between buffers of two nodes (0: RAM, where a buffer
// is an arena offset) and returns the message's ID.
func (w *Worker) Copy(srcNode, dstNode uint32, src, dst uint64, ranges ...wire.CopyRange) uint64 {
	w.T.Helper()
	m := wire.Copy{ID: w.ID(), SrcNode: srcNode, DstNode: dstNode, SrcBuffer: src, DstBuffer: dst, Ranges: ranges}
	w.sent[m.ID] = w
	w.Send(wire.CopyLen(len(ranges)), m.Encode)
	return m.ID
}

// Up copies the RAM span s to the start of buffer buf on the worker's
// node.
func (w *Worker) Up(s base.Span, buf uint64) uint64 {
	w.T.Helper()
	return w.Copy(0, uint32(w.Node), s.Offset, buf, wire.CopyRange{Len: s.Size})
}

// Down copies the start of buffer buf on the worker's node to the RAM
// span s.
func (w *Worker) Down(buf uint64, s base.Span) uint64 {
	w.T.Helper()
	return w.Copy(uint32(w.Node), 0, buf, s.Offset, wire.CopyRange{Len: s.Size})
}

// Exec posts a task of kernel k (an index in the fingerprint's list) on the
// dispatch ring and returns its ID.
func (w *Worker) Exec(k int, arg []byte, bufs ...wire.BufferDesc) uint64 {
	w.T.Helper()
	return w.Run(Task{Kernel: k, Arg: arg, Buffers: bufs}, false)
}

// ExecSched is Exec on the scheduler ring.
func (w *Worker) ExecSched(k int, arg []byte, bufs ...wire.BufferDesc) uint64 {
	w.T.Helper()
	return w.Run(Task{Kernel: k, Arg: arg, Buffers: bufs}, true)
}

// Run posts task on the dispatch ring, or on the scheduler ring when
// sched is true, and returns its ID.
func (w *Worker) Run(task Task, sched bool) uint64 {
	w.T.Helper()
	e := wire.Exec{ID: w.ID(), Kernel: uint32(task.Kernel), Flags: task.Flags, Buffers: task.Buffers, Arg: task.Arg}
	w.sent[e.ID] = w
	if sched {
		w.SendSched(wire.ExecSize(len(e.Buffers), len(e.Arg)), e.Encode)
	} else {
		w.Send(wire.ExecSize(len(e.Buffers), len(e.Arg)), e.Encode)
	}
	return e.ID
}

// RunTeam posts task as a parallel task (flags: wire.ExecSPMD or
// wire.ExecForkJoin) of combined worker combined, whose members are the
// given workers, the master first: the same Exec on each member's dispatch
// ring, as the core posts it. Only the master's completion is expected; a
// completion on another member's ring fails the test.
func (r *Rig) RunTeam(task Task, flags uint32, combined int, members ...*Worker) uint64 {
	r.T.Helper()
	e := wire.Exec{ID: r.ID(), Kernel: uint32(task.Kernel), Flags: task.Flags | flags, Buffers: task.Buffers, Arg: task.Arg, Combined: int32(combined)}
	for _, m := range members {
		e.Members = append(e.Members, int32(m.Spec.ID))
	}
	r.sent[e.ID] = members[0]
	for _, m := range members {
		m.Send(e.Len(), e.Encode)
	}
	return e.ID
}

// poll reads every completion waiting, failing the test on a broken
// message, a second completion for an ID, or a completion on another
// worker's ring than the message went to.
func (r *Rig) poll() {
	r.T.Helper()
	if err := r.read(); err != nil {
		r.T.Fatal(err)
	}
}

// read is poll returning what is wrong instead of failing the test: while
// Deinit runs, the rig must keep reading and must not end the test, whose
// cleanups would unmap the arena under the driver's workers.
func (r *Rig) read() error {
	r.seq = r.CoreBell.Seq()
	for _, w := range r.rings {
		for msg := w.Completion.Peek(); msg != nil; msg = w.Completion.Peek() {
			var c wire.Completion
			if err := c.Decode(msg); err != nil {
				return fmt.Errorf("worker %d: completion ring: %w", w.Index, err)
			}
			c.Err = bytes.Clone(c.Err)
			w.Completion.Release()
			if s, e := c.SleepStartNs, c.SleepEndNs; (s == 0) != (e == 0) || e < s || e > wire.Now() {
				return fmt.Errorf("worker %d: completion for message %d reports a sleep from %d to %d ns: want both 0 (no sleep) or a start before its end, on wire.Now's clock", w.Index, c.ID, s, e)
			}
			if prev, dup := r.got[c.ID]; dup {
				return fmt.Errorf("worker %d: a second completion for message %d (first: %s; second: %s)", w.Index, c.ID, describe(prev), describe(c))
			}
			if to, ok := r.sent[c.ID]; ok && to != w {
				return fmt.Errorf("completion for message %d on worker %d's ring; it was sent to worker %d", c.ID, w.Index, to.Index)
			}
			r.got[c.ID] = c
			r.order = append(r.order, c.ID)
		}
		if err := w.Completion.Err(); err != nil {
			return fmt.Errorf("worker %d: completion ring: %w", w.Index, err)
		}
	}
	return nil
}

func describe(c wire.Completion) string {
	if c.Failed {
		return fmt.Sprintf("failed: %q", c.Err)
	}
	return "succeeded"
}

// posted reports whether a completion waits on any ring.
func (r *Rig) posted() bool {
	for _, w := range r.rings {
		if !w.Completion.Empty() {
			return true
		}
	}
	return false
}

func (r *Rig) missing(ids []uint64) (n int, first uint64) {
	for _, id := range ids {
		if _, ok := r.got[id]; !ok {
			if n == 0 {
				first = id
			}
			n++
		}
	}
	return n, first
}

// Wait reads completions until every id has one, failing the test after
// the rig's Timeout. It reads the rings when the core's bell rings and
// also every few milliseconds, as the core reads completions not rung for
// (WaitRung is the strict one).
func (r *Rig) Wait(ids ...uint64) {
	r.T.Helper()
	deadline := time.Now().Add(r.Timeout)
	for {
		r.poll()
		n, first := r.missing(ids)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.T.Fatalf("%d of %d completions missing after %v (message %d among them)", n, len(ids), r.Timeout, first)
		}
		seq := r.seq
		r.CoreBell.Wait(func() bool { return r.CoreBell.Seq() != seq || r.posted() }, 100, 5*time.Millisecond)
	}
}

// WaitRung is Wait that reads the completion rings only when the core's
// bell has rung since it last read them, sleeping on the bell at once (no
// spin) as an idle core does: a driver that posts a completion and leaves
// the core asleep fails the test after RingWait, instead of passing on the
// rig's polls.
func (r *Rig) WaitRung(ids ...uint64) {
	r.T.Helper()
	deadline := time.Now().Add(r.Timeout)
	for {
		n, first := r.missing(ids)
		if n == 0 {
			return
		}
		seq := r.seq
		if !r.CoreBell.Wait(func() bool { return r.CoreBell.Seq() != seq }, 0, r.RingWait) {
			r.poll()
			if m, _ := r.missing(ids); m < n {
				r.T.Fatalf("%d of %d completions (message %d among them) were posted but the core's bell did not ring for them within %v", n-m, len(ids), first, r.RingWait)
			}
			r.T.Fatalf("%d of %d completions missing (message %d among them), and no ring of the core's bell for %v", n, len(ids), first, r.RingWait)
		}
		r.poll()
		if time.Now().After(deadline) {
			n, first := r.missing(ids)
			r.T.Fatalf("%d of %d completions missing after %v (message %d among them)", n, len(ids), r.Timeout, first)
		}
	}
}

// OK waits for ids and fails the test if any failed.
func (r *Rig) OK(ids ...uint64) {
	r.T.Helper()
	r.Wait(ids...)
	for _, id := range ids {
		if c := r.got[id]; c.Failed {
			r.T.Fatalf("message %d failed: %s", id, c.Err)
		}
	}
}

// Failed waits for id and returns its error text, failing the test if it
// succeeded or failed without a message.
func (r *Rig) Failed(id uint64) string {
	r.T.Helper()
	r.Wait(id)
	c := r.got[id]
	if !c.Failed {
		r.T.Fatalf("message %d succeeded, want a failure", id)
	}
	if len(c.Err) == 0 {
		r.T.Fatalf("message %d failed without saying why", id)
	}
	return string(c.Err)
}

// Got waits for id and returns its completion.
func (r *Rig) Got(id uint64) wire.Completion {
	r.T.Helper()
	r.Wait(id)
	return r.got[id]
}

// Received returns the IDs of every completion read so far, in arrival
// order (across workers, as the rig read them).
func (r *Rig) Received() []uint64 { return slices.Clone(r.order) }

// Before reports whether a's completion was read before b's (false if
// neither was).
func (r *Rig) Before(a, b uint64) bool {
	for _, id := range r.order {
		switch id {
		case a:
			return true
		case b:
			return false
		}
	}
	return false
}

// Has reports whether the driver lists the named kernel.
func (r *Rig) Has(name string) bool { return slices.Contains(r.FP.Kernels, name) }

// Kernel is the index of the named kernel in the fingerprint; when it is
// not there the rig takes the fingerprint again (LoadKernel extends the
// list) before failing the test.
func (r *Rig) Kernel(name string) int {
	r.T.Helper()
	if i := slices.Index(r.FP.Kernels, name); i >= 0 {
		return i
	}
	r.FP = r.fingerprint()
	if i := slices.Index(r.FP.Kernels, name); i >= 0 {
		return i
	}
	r.T.Fatalf("kernel %s not in the fingerprint's %v", name, r.FP.Kernels)
	return -1
}

// RAM allocates n bytes of the arena's heap, the RAM node.
func (r *Rig) RAM(n uint64) base.Span {
	r.T.Helper()
	s, err := r.Arena.Alloc(n)
	if err != nil {
		r.T.Fatalf("RAM(%d): %v", n, err)
	}
	return s
}

// Bytes is the arena memory of span s.
func (r *Rig) Bytes(s base.Span) []byte {
	r.T.Helper()
	b, err := r.Arena.BytesChecked(s)
	if err != nil {
		r.T.Fatal(err)
	}
	return b
}

// F32 views span s as float32s.
func (r *Rig) F32(s base.Span) []float32 { return view[float32](r.Bytes(s)) }

// F64 views span s as float64s.
func (r *Rig) F64(s base.Span) []float64 { return view[float64](r.Bytes(s)) }

func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// Vec describes a vector of n elements of elem bytes at buffer buf of a
// memory node (on RAM, buf is an arena offset).
func Vec(node uint8, buf, n uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return wire.BufferDesc{Node: node, Offset: buf, Mode: m, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: elem, NX: n}}
}

// Mat describes a column-major nx by ny matrix of elem-byte elements with
// leading dimension ld at buffer buf of a memory node.
func Mat(node uint8, buf, nx, ny, ld uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return wire.BufferDesc{Node: node, Offset: buf, Mode: m, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: elem, NX: nx, NY: ny, LD: ld}}
}
