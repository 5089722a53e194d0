package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// chaining is pinned, agreeing to chain except the tasks in refuse.
type chaining struct {
	pinned
	refuse map[uint64]bool
}

func (p *chaining) Chain(t *Task, _ int) bool { return !p.refuse[t.ID] }

// pushAfter sends task id, chained behind pred.
func (hr *hostRings) pushAfter(t *testing.T, id, pred uint64) {
	t.Helper()
	exec := execFor(id)
	wire.SetExecAfter(exec, pred)
	p := wire.Push{ID: id, Worker: -1, ReleasedBy: -1, ArchMask: driver.ArchBit(driver.CPU), Length: [wire.NumArch]int64{-1, -1, -1},
		Flags: wire.PushExec | wire.PushAfter, Exec: exec}
	p.Encode(hr.reserveEvent(t, wire.PushLen(0)+len(p.Exec)))
	hr.events.Commit()
	hr.bell.Ring()
}

func (hr *hostRings) done(t *testing.T, w int32, id uint64) {
	t.Helper()
	b := hr.events.Reserve(wire.DoneSize)
	d := wire.Done{Worker: w, ID: id, DurationNs: 1}
	d.Encode(b)
	hr.events.Commit()
	hr.bell.Ring()
}

// ringOrder reads the ids of the Execs in a worker's ring, and which are
// flagged ExecAfter.
func ringOrder(t *testing.T, hr *hostRings, w int) (ids []uint64, after []bool) {
	t.Helper()
	r := hr.workerRings[w]
	for msg := r.Peek(); msg != nil; msg = r.Peek() {
		var e wire.Exec
		if err := e.Decode(msg); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
		after = append(after, e.Flags&wire.ExecAfter != 0)
		r.Release()
	}
	return ids, after
}

// The host queues a chained task behind its predecessor when that one ends
// its worker's queue, waits for a predecessor still in the policy, and
// declines the rest: an unknown predecessor, a second successor, a task
// the policy refuses, and those chained behind a declined one.
func TestHostChains(t *testing.T) {
	cpu := func(id int) Worker { return Worker{ID: id, Arch: driver.CPU} }
	pol := &chaining{refuse: map[uint64]bool{30: true}}
	_, hr := startHostOf(t, pol, []Worker{cpu(0), cpu(1)}, map[int]uint64{0: 1 << 16, 1: 1 << 16}, 64)
	hr.push(t, 1, 0, true)
	hr.pushAfter(t, 2, 1)  // behind 1, in the policy when it arrives
	hr.pushAfter(t, 3, 2)  // behind 2, itself waiting
	hr.pushAfter(t, 4, 1)  // a second successor of 1: declined
	hr.pushAfter(t, 5, 99) // unknown predecessor: declined
	hr.push(t, 20, 1, true)
	hr.pushAfter(t, 30, 20) // refused by the policy: declined
	hr.pushAfter(t, 31, 30) // behind a declined task: declined
	want := map[uint64]struct {
		worker int32
		flags  uint32
	}{
		1: {0, wire.AssignPosted}, 2: {0, wire.AssignPosted}, 3: {0, wire.AssignPosted},
		4: {-1, wire.AssignDeclined}, 5: {-1, wire.AssignDeclined},
		20: {1, wire.AssignPosted}, 30: {-1, wire.AssignDeclined}, 31: {-1, wire.AssignDeclined},
	}
	for _, a := range hr.decisionsN(t, len(want)) {
		w, ok := want[a.ID]
		if !ok || a.Worker != w.worker || a.Flags != w.flags {
			t.Errorf("task %d: worker %d flags %d, want %+v", a.ID, a.Worker, a.Flags, w)
		}
	}
	ids, after := ringOrder(t, hr, 0)
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 2 || ids[2] != 3 || after[0] || !after[1] || !after[2] {
		t.Errorf("worker 0's ring: tasks %v, chained %v; want 1, 2, 3 with 2 and 3 chained", ids, after)
	}
}

// Chained tasks wait for room in their worker's queue, and go ahead of the
// policy's own tasks for that worker.
func TestHostChainsWithinDepth(t *testing.T) {
	cpu := func(id int) Worker { return Worker{ID: id, Arch: driver.CPU} }
	_, hr := startHostOf(t, &chaining{}, []Worker{cpu(0)}, map[int]uint64{0: 1 << 16}, 2)
	hr.push(t, 1, 0, true)
	for id := uint64(2); id <= 5; id++ {
		hr.pushAfter(t, id, id-1)
	}
	hr.push(t, 9, 0, true) // the policy's: after the chain
	if got := hr.decisionsN(t, 2); got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("with a queue depth of 2: decisions %+v, want tasks 1 and 2", got)
	}
	var order []uint64
	for _, ids := range [][]uint64{{1, 2}, {3, 4}} {
		for _, id := range ids {
			hr.done(t, 0, id)
		}
		for _, a := range hr.decisionsN(t, 2) {
			order = append(order, a.ID)
		}
	}
	if order[0] != 3 || order[1] != 4 || order[2] != 5 || order[3] != 9 {
		t.Errorf("decisions after room was made: %v, want 3 4 5 9", order)
	}
}

// A Push flagged PushAfter whose Exec names no predecessor is a broken
// core: the host stops with an error saying so.
func TestHostChainWithoutPredecessor(t *testing.T) {
	h, hr := startHostOf(t, &chaining{}, []Worker{{ID: 0, Arch: driver.CPU}}, map[int]uint64{0: 1 << 16}, 4)
	p := wire.Push{ID: 7, Worker: -1, ReleasedBy: -1, ArchMask: driver.ArchBit(driver.CPU), Length: [wire.NumArch]int64{-1, -1, -1},
		Flags: wire.PushExec | wire.PushAfter, Exec: execFor(7)}
	b := hr.events.Reserve(wire.PushLen(0) + len(p.Exec))
	p.Encode(b)
	hr.events.Commit()
	hr.bell.Ring()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the host goes on after a chained Push without ExecAfter")
	}
	if err := h.Deinit(t.Context()); err == nil || !strings.Contains(err.Error(), "without an Exec flagged ExecAfter") {
		t.Fatalf("Deinit: %v, want the chained Push named", err)
	}
}

// A chained task the decisions ring has no room to announce is held, and
// posted once the core makes room, though the core, waiting for it, sends
// no event: the host polls the ring (host_decisions.go).
func TestHostChainWaitsForRoom(t *testing.T) {
	const fit = 2048 // Assigns in the decisions ring: 64 KiB of 32-byte records
	_, hr := startHostOf(t, &chaining{}, []Worker{{ID: 0, Arch: driver.CPU}}, map[int]uint64{0: 1 << 16}, 4)
	hr.push(t, 1, 0, true) // posted to worker 0's ring: the chain's head
	if a := hr.decisionsN(t, 1)[0]; a.ID != 1 || a.Flags&wire.AssignPosted == 0 {
		t.Fatalf("decision %+v, want task 1 posted", a)
	}
	// Declined as they are read, in order: the ring is full, none waits.
	for id := uint64(2); id < 2+fit; id++ {
		hr.pushAfter(t, id, 1e9)
	}
	hr.pushAfter(t, 2+fit, 1)
	hr.drained(t) // the last one held: no room to announce it
	for i, a := range hr.decisionsN(t, fit) {
		if a.ID != uint64(2+i) || a.Flags&wire.AssignDeclined == 0 {
			t.Fatalf("decision %d: %+v, want task %d declined", i, a, 2+i)
		}
	}
	if a := hr.decisionsN(t, 1)[0]; a.ID != 2+fit || a.Worker != 0 || a.Flags&wire.AssignPosted == 0 {
		t.Fatalf("decision %+v, want task %d posted to worker 0", a, 2+fit)
	}
	if ids, after := ringOrder(t, hr, 0); len(ids) != 2 || ids[0] != 1 || ids[1] != 2+fit || !after[1] {
		t.Errorf("worker 0's ring: %v (after %v), want [1 %d], the second flagged ExecAfter", ids, after, 2+fit)
	}
}
