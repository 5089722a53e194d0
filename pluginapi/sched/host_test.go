package sched

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// pinned runs every task on the worker it names, in push order.
type pinned struct{ queues map[int][]*Task }

func (p *pinned) Init([]Worker) error         { p.queues = map[int][]*Task{}; return nil }
func (p *pinned) AddWorkers([]Worker)         {}
func (p *pinned) RemoveWorkers([]int)         {}
func (p *pinned) Push(t *Task)                { p.queues[int(t.Worker)] = append(p.queues[int(t.Worker)], t) }
func (p *pinned) PostExec(int, uint64, int64) {}
func (p *pinned) Deinit()                     {}
func (p *pinned) Pop(id int) *Task {
	q := p.queues[id]
	if len(q) == 0 {
		return nil
	}
	p.queues[id] = q[1:]
	return q[0]
}

// hostRings is the core's and the workers' side of a Host under test.
type hostRings struct {
	events, decisions *shm.Ring
	bell, coreBell    *shm.Bell
	workerRings       map[int]*shm.Ring
}

func startTestHost(t *testing.T, workers []Worker, ringed map[int]uint64, depth int) (*Host, *hostRings) {
	t.Helper()
	return startHostOf(t, &pinned{}, workers, ringed, depth)
}

// startHostOf starts a Host over policy.
func startHostOf(t *testing.T, policy Policy, workers []Worker, ringed map[int]uint64, depth int) (*Host, *hostRings) {
	t.Helper()
	a, err := shm.Create(16<<20, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ring := func(capacity uint64) (*shm.Ring, base.Span) {
		s, err := a.Carve(shm.RingBytes(capacity), 64)
		if err != nil {
			t.Fatal(err)
		}
		r, err := shm.InitRing(a.Bytes(s))
		if err != nil {
			t.Fatal(err)
		}
		return r, s
	}
	bell := func() (*shm.Bell, uint64) {
		s, err := a.Carve(shm.BellSize, 64)
		if err != nil {
			t.Fatal(err)
		}
		return a.Bell(s.Offset), s.Offset
	}
	hr := &hostRings{workerRings: map[int]*shm.Ring{}}
	req := &InitRequest{Workers: workers, QueueDepth: depth, SpinIters: 10}
	hr.events, req.Rings.Events = ring(1 << 16)
	hr.decisions, req.Rings.Decisions = ring(1 << 16)
	hr.bell, req.Rings.Bell = bell()
	hr.coreBell, req.Rings.CoreBell = bell()
	for id, capacity := range ringed {
		r, s := ring(capacity)
		_, b := bell()
		hr.workerRings[id] = r
		req.WorkerRings = append(req.WorkerRings, WorkerRing{Worker: id, Ring: s, Bell: b})
	}
	h := NewHost(a, policy, base.Info{Name: "pinned"})
	if err := h.Init(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Deinit(t.Context()) })
	return h, hr
}

// execFor is the Exec the core would send with task id.
func execFor(id uint64) []byte {
	e := wire.Exec{ID: id, Kernel: 3, Arg: []byte{byte(id)}, Buffers: []wire.BufferDesc{
		{Offset: 4096 * id, Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: id}}}}
	b := make([]byte, wire.ExecSize(1, 1))
	e.Encode(b)
	return b
}

func (hr *hostRings) push(t *testing.T, id uint64, worker int32, withExec bool) {
	t.Helper()
	p := wire.Push{ID: id, Worker: worker, ReleasedBy: -1, ArchMask: driver.ArchBit(driver.CPU), Length: [wire.NumArch]int64{-1, -1, -1}}
	if withExec {
		p.Flags, p.Exec = wire.PushExec, execFor(id)
	}
	p.Encode(hr.reserveEvent(t, wire.PushLen(0)+len(p.Exec)))
	hr.events.Commit()
	hr.bell.Ring()
}

// drained waits until the host has taken every event sent.
func (hr *hostRings) drained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !hr.events.Drained() {
		if time.Now().After(deadline) {
			t.Fatal("the host stopped reading events")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// reserveEvent reserves n bytes in the events ring, waiting for the host
// to make room.
func (hr *hostRings) reserveEvent(t *testing.T, n int) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b := hr.events.Reserve(n); b != nil {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatal("the host stopped reading events")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// decisions reads n assignments.
func (hr *hostRings) decisionsN(t *testing.T, n int) []wire.Assign {
	t.Helper()
	var out []wire.Assign
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		msg := hr.decisions.Peek()
		if msg == nil {
			if time.Now().After(deadline) {
				t.Fatalf("got %d decisions, want %d", len(out), n)
			}
			time.Sleep(100 * time.Microsecond)
			continue
		}
		var a wire.Assign
		if err := a.Decode(msg); err != nil {
			t.Fatal(err)
		}
		hr.decisions.Release()
		out = append(out, a)
	}
	return out
}

// The host posts a task's Exec to the worker's scheduler ring, byte for
// byte, and flags the Assign; it falls back to a plain Assign when the task
// came without an Exec, the worker has no ring, or the ring has no room.
func TestHostPostsToSchedulerRings(t *testing.T) {
	cpu := func(id int) Worker { return Worker{ID: id, Arch: driver.CPU} }
	// Worker 0 has a ring with room for few Execs; worker 1 has none.
	_, hr := startTestHost(t, []Worker{cpu(0), cpu(1)}, map[int]uint64{0: 4096}, 64)
	cases := []struct {
		id       uint64
		worker   int32
		withExec bool
		posted   bool
	}{
		{1, 0, true, true},
		{2, 0, false, false}, // no Exec sent
		{3, 1, true, false},  // worker without a ring
		{4, 0, true, true},
	}
	for _, c := range cases {
		hr.push(t, c.id, c.worker, c.withExec)
	}
	byID := map[uint64]wire.Assign{}
	for _, a := range hr.decisionsN(t, len(cases)) {
		byID[a.ID] = a
	}
	for _, c := range cases {
		a, ok := byID[c.id]
		if !ok || a.Worker != c.worker || (a.Flags&wire.AssignPosted != 0) != c.posted {
			t.Errorf("decision for task %d = %+v (found %v), want worker %d posted=%v", c.id, a, ok, c.worker, c.posted)
		}
	}
	r := hr.workerRings[0]
	for _, id := range []uint64{1, 4} {
		// The Assign says where the Exec lies: the consumer stands there
		// when it is next.
		if at := byID[id].At; r.Released() != at {
			t.Errorf("task %d: Assign says its Exec is at %d; the consumer is at %d", id, at, r.Released())
		}
		msg := r.Peek()
		if !bytes.Equal(msg, execFor(id)) {
			t.Fatalf("scheduler ring of worker 0: got %x, want the Exec of task %d", msg, id)
		}
		r.Release()
	}
	if !r.Empty() {
		t.Fatal("scheduler ring of worker 0 holds more than the posted tasks")
	}

	// Fill worker 0's ring without draining it: once full, Assigns are
	// plain and the core dispatches.
	const n = 60
	for id := uint64(10); id < 10+n; id++ {
		hr.push(t, id, 0, true)
	}
	posted, plain := 0, 0
	for _, a := range hr.decisionsN(t, n) {
		if a.Flags&wire.AssignPosted != 0 {
			posted++
		} else {
			plain++
		}
	}
	inRing := 0
	for msg := r.Peek(); msg != nil; msg = r.Peek() {
		inRing++
		r.Release()
	}
	if plain == 0 || posted != inRing {
		t.Fatalf("with a full ring: %d posted, %d plain, %d Execs in the ring; want some plain and one Exec per posted", posted, plain, inRing)
	}
}

// choosing is pinned, choosing the implementation impl[t.ID] for each task
// (absent: the core chooses).
type choosing struct {
	pinned
	impl map[uint64]int
}

func (p *choosing) Push(t *Task) {
	if i, ok := p.impl[t.ID]; ok {
		t.SetImpl(i)
	}
	p.pinned.Push(t)
}

// A policy's implementation travels in the Assign (AssignImpl), and a
// posted Exec takes that implementation's kernel; a choice the worker
// cannot run is not posted, so that the core can refuse it.
func TestHostPostsChosenImplementation(t *testing.T) {
	cpu := driver.ArchIndex(driver.CPU)
	two := [wire.NumArch][]wire.Impl{}
	two[cpu] = []wire.Impl{{Length: -1, Kernel: -1}, {Length: 50, Kernel: 7}, {Length: 90, Kernel: 3}}
	cases := []struct {
		id     uint64
		impls  bool // the Push lists two
		choose int  // -1: the core chooses
		posted bool
		kernel uint32 // in the posted Exec (execFor's is 3)
	}{
		{1, true, 1, true, 7},
		{2, true, -1, true, 3},
		{3, true, 0, false, 0}, // not usable
		{4, true, 5, false, 0}, // no such implementation
		{5, false, 0, false, 0},
		{6, true, 2, true, 3},
	}
	pol := &choosing{impl: map[uint64]int{}}
	for _, c := range cases {
		if c.choose >= 0 {
			pol.impl[c.id] = c.choose
		}
	}
	_, hr := startHostOf(t, pol, []Worker{{ID: 0, Arch: driver.CPU}}, map[int]uint64{0: 1 << 14}, 64)
	for _, c := range cases {
		p := wire.Push{ID: c.id, Worker: 0, ReleasedBy: -1, ArchMask: driver.ArchBit(driver.CPU), Length: [wire.NumArch]int64{-1, -1, -1},
			Flags: wire.PushExec, Exec: execFor(c.id)}
		if c.impls {
			p.Flags |= wire.PushImpls
			p.Impls = two
		}
		b := hr.events.Reserve(p.Len())
		if b == nil {
			t.Fatal("events ring full")
		}
		p.Encode(b)
		hr.events.Commit()
	}
	hr.bell.Ring()
	as := hr.decisionsN(t, len(cases))
	r := hr.workerRings[0]
	for i, c := range cases {
		a := as[i]
		wantImpl := c.choose >= 0
		if a.ID != c.id || (a.Flags&wire.AssignPosted != 0) != c.posted || (a.Flags&wire.AssignImpl != 0) != wantImpl ||
			wantImpl && a.Impl != uint32(c.choose) {
			t.Errorf("task %d: decision %+v, want posted=%v and implementation %d", c.id, a, c.posted, c.choose)
		}
		if !c.posted {
			continue
		}
		var e wire.Exec
		if err := e.Decode(r.Peek()); err != nil || e.ID != c.id || e.Kernel != c.kernel {
			t.Errorf("task %d: posted Exec %+v (%v), want kernel %d", c.id, e, err, c.kernel)
		}
		r.Release()
	}
	if !r.Empty() {
		t.Error("scheduler ring holds Execs of tasks that were not posted")
	}
}

// A scheduler ring for a worker the host does not schedule is an error.
func TestHostRejectsRingOfUnknownWorker(t *testing.T) {
	a, err := shm.Create(1<<20, 1<<19)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := NewHost(a, &pinned{}, base.Info{Name: "pinned"})
	err = h.Init(t.Context(), &InitRequest{Workers: []Worker{{ID: 0, Arch: driver.CPU}}, QueueDepth: 1,
		WorkerRings: []WorkerRing{{Worker: 5}}})
	if err == nil {
		h.Deinit(t.Context())
		t.Fatal("Init accepted a scheduler ring for worker 5, which it does not schedule")
	}
}

// SetImpl keeps what the policy chose, so that the core's refusal names it.
func TestSetImpl(t *testing.T) {
	for _, c := range []struct{ set, want int }{
		{-1, -1}, {0, 0}, {7, 7}, {-5, -5}, {1 << 40, 1<<31 - 2}, {-1 << 40, 1<<31 - 2},
	} {
		var tk Task
		if tk.Impl() != -1 {
			t.Fatalf("a new task's Impl is %d, want -1 (the core chooses)", tk.Impl())
		}
		tk.SetImpl(c.set)
		if got := tk.Impl(); got != c.want {
			t.Errorf("SetImpl(%d): Impl() = %d, want %d", c.set, got, c.want)
		}
	}
}

// The host keeps reading events while the core reads no decisions: the
// decisions it has no room for wait, in order, and none is lost. A host
// that waited for room stopped reading events, and a core pushing under
// its context's lock then waited for it forever (host_decisions.go). A
// task is posted to its worker's ring only with its Assign in the
// decisions ring: the Execs posted before the core read any decision are
// those of the first decisions, all flagged posted.
func TestHostNeverWaitsForCore(t *testing.T) {
	const n = 6000 // three times the Assigns the decisions ring holds
	_, hr := startTestHost(t, []Worker{{ID: 0, Arch: driver.CPU}}, map[int]uint64{0: 1 << 21}, n)
	for id := uint64(1); id <= n; id++ {
		hr.push(t, id, 0, true)
	}
	hr.drained(t)
	before, _ := ringOrder(t, hr, 0)
	ds := hr.decisionsN(t, n)
	after, _ := ringOrder(t, hr, 0)
	var posted []uint64
	for i, a := range ds {
		if a.ID != uint64(i+1) || a.Worker != 0 {
			t.Fatalf("decision %d: task %d to worker %d, want task %d to worker 0", i, a.ID, a.Worker, i+1)
		}
		if a.Flags&wire.AssignPosted != 0 {
			posted = append(posted, a.ID)
		}
		if i < len(before) && (a.ID != before[i] || a.Flags&wire.AssignPosted == 0) {
			t.Fatalf("decision %d (task %d, flags %#x): the worker's ring held %v... first", i, a.ID, a.Flags, before[:min(len(before), 4)])
		}
	}
	if got := append(before, after...); !slices.Equal(got, posted) {
		t.Errorf("the worker's ring got %d Execs, %d Assigns said posted", len(got), len(posted))
	}
	if len(before) == 0 || len(posted) == n {
		t.Errorf("%d tasks posted before the core read, %d in all, of %d: want the decisions ring to fill before the end", len(before), len(posted), n)
	}
}
