package schedkit

import (
	"fmt"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// op is one step of a queue scenario.
type op struct {
	do   string // push, pushAs, append, pop, takeFor, takeFirst, takeLast, takeAt, drain
	id   uint64 // push: the task
	prio int32  // push: its priority; pushAs: the priority it is queued at
	arch uint32 // push: its ArchMask (default CPU)
	cost int64  // pushAs: its cost
	w    driver.Arch
	pos  int
	want string // what the step returns, fmt'ed ("" for push steps)
}

func TestQueue(t *testing.T) {
	cpu, cuda := driver.ArchBit(driver.CPU), driver.ArchBit(driver.CUDA)
	odd := func(t *sched.Task) bool { return t.ID%2 == 1 }
	cases := []struct {
		name     string
		ops      []op
		match    func(*sched.Task) bool
		wantLen  int
		wantCost int64
	}{
		{name: "FIFO within a priority", ops: []op{
			{do: "push", id: 1}, {do: "push", id: 2}, {do: "push", id: 3},
			{do: "pop", want: "1"}, {do: "pop", want: "2"}, {do: "pop", want: "3"}, {do: "pop", want: "none"},
		}},
		{name: "priority first", ops: []op{
			{do: "push", id: 1, prio: 0}, {do: "push", id: 2, prio: 5}, {do: "push", id: 3, prio: -1}, {do: "push", id: 4, prio: 5},
			{do: "pop", want: "2"}, {do: "pop", want: "4"}, {do: "pop", want: "1"}, {do: "pop", want: "3"},
		}},
		{name: "append ignores priority", ops: []op{
			{do: "append", id: 1, prio: 0}, {do: "append", id: 2, prio: 9}, {do: "append", id: 3, prio: -9},
			{do: "pop", want: "1"}, {do: "pop", want: "2"}, {do: "pop", want: "3"},
		}},
		{name: "takeFor skips what the worker cannot run", ops: []op{
			{do: "push", id: 1, prio: 3, arch: cuda}, {do: "push", id: 2, prio: 1, arch: cpu}, {do: "push", id: 3, prio: 2, arch: cpu | cuda},
			{do: "takeFor", w: driver.CPU, want: "3"}, {do: "takeFor", w: driver.CPU, want: "2"}, {do: "takeFor", w: driver.CPU, want: "none"},
			{do: "takeFor", w: driver.CUDA, want: "1"},
		}},
		{name: "takeFirst and takeLast", match: odd, ops: []op{
			{do: "push", id: 1, prio: 0}, {do: "push", id: 2, prio: 2}, {do: "push", id: 3, prio: 2},
			{do: "push", id: 4, prio: 0}, {do: "push", id: 5, prio: 0}, {do: "push", id: 7, prio: -1},
			{do: "takeLast", want: "7"}, {do: "takeLast", want: "5"}, {do: "takeFirst", want: "3"}, {do: "takeFirst", want: "1"},
			{do: "takeFirst", want: "none"}, {do: "pop", want: "2"},
		}, wantLen: 1},
		{name: "costs by priority", ops: []op{
			{do: "pushAs", id: 1, prio: 0, cost: 10}, {do: "pushAs", id: 2, prio: 1, cost: 100}, {do: "pushAs", id: 3, prio: 2, cost: 1000},
			{do: "costAtLeast", prio: 1, want: "1100"}, {do: "costAtLeast", prio: 3, want: "0"}, {do: "costAtLeast", prio: -5, want: "1110"},
			{do: "pop", want: "3/1000"}, {do: "costAtLeast", prio: 0, want: "110"},
		}, wantLen: 2, wantCost: 110},
		{name: "takeAt in Each's order", ops: []op{
			{do: "push", id: 1, prio: 0}, {do: "push", id: 2, prio: 1}, {do: "push", id: 3, prio: 0}, {do: "push", id: 4, prio: 1},
			{do: "each", want: "[2 4 1 3]"}, {do: "takeAt", pos: 2, want: "1"}, {do: "takeAt", pos: 1, want: "4"}, {do: "each", want: "[2 3]"},
		}, wantLen: 2},
		{name: "front peeks", ops: []op{
			{do: "front", want: "none"}, {do: "push", id: 1, prio: 0}, {do: "push", id: 2, prio: 4}, {do: "front", want: "2"},
		}, wantLen: 2},
		{name: "drain empties", ops: []op{
			{do: "pushAs", id: 1, prio: 0, cost: 5}, {do: "pushAs", id: 2, prio: 3, cost: 5}, {do: "drain", want: "[2 1]"}, {do: "pop", want: "none"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var q Queue
			for i, o := range c.ops {
				got := ""
				entry := func(e Entry, ok bool) string {
					switch {
					case !ok:
						return "none"
					case e.Cost != 0:
						return fmt.Sprintf("%d/%d", e.Task.ID, e.Cost)
					}
					return fmt.Sprint(e.Task.ID)
				}
				task := func(tk *sched.Task) string {
					if tk == nil {
						return "none"
					}
					return fmt.Sprint(tk.ID)
				}
				arch := o.arch
				if arch == 0 {
					arch = cpu
				}
				tk := &sched.Task{ID: o.id, Priority: o.prio, ArchMask: arch, Worker: -1}
				switch o.do {
				case "push":
					q.Push(tk)
				case "pushAs":
					q.PushAs(tk, o.prio, o.cost)
				case "append":
					q.Append(tk)
				case "pop":
					got = entry(q.PopFront())
				case "front":
					got = task(q.Front())
				case "takeFor":
					got = task(q.TakeFor(&sched.Worker{Arch: o.w}))
				case "takeFirst":
					got = entry(q.TakeFirst(c.match))
				case "takeLast":
					got = entry(q.TakeLast(c.match))
				case "takeAt":
					got = entry(q.TakeAt(o.pos), true)
				case "costAtLeast":
					got = fmt.Sprint(q.CostAtLeast(o.prio))
				case "each":
					var ids []uint64
					q.Each(func(pos int, e Entry) bool {
						if pos != len(ids) {
							t.Fatalf("Each gave position %d for entry %d", pos, len(ids))
						}
						ids = append(ids, e.Task.ID)
						return true
					})
					got = fmt.Sprint(ids)
				case "drain":
					var ids []uint64
					for _, tk := range q.Drain(nil) {
						ids = append(ids, tk.ID)
					}
					got = fmt.Sprint(ids)
				default:
					t.Fatalf("unknown op %q", o.do)
				}
				if got != o.want {
					t.Fatalf("step %d (%s): got %s, want %s", i, o.do, got, o.want)
				}
			}
			if q.Len() != c.wantLen || q.Cost() != c.wantCost {
				t.Fatalf("end: Len %d, Cost %d; want %d, %d", q.Len(), q.Cost(), c.wantLen, c.wantCost)
			}
		})
	}
}

// TestQueueEachStops: Each stops when f returns false.
func TestQueueEachStops(t *testing.T) {
	var q Queue
	for id := range uint64(5) {
		q.Push(&sched.Task{ID: id})
	}
	n := 0
	q.Each(func(int, Entry) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("Each called f %d times after it returned false at 2", n)
	}
}

// TestQueueLong: a long-lived FIFO, pushed and popped in turn with a
// backlog, keeps its memory bounded and its order (the front is compacted
// now and then).
func TestQueueLong(t *testing.T) {
	var q Queue
	next, want := uint64(0), uint64(0)
	// CUDA tasks: TakeFor for a CPU scans them all and takes none.
	cuda := driver.ArchBit(driver.CUDA)
	for range 100 {
		q.Push(&sched.Task{ID: next, ArchMask: cuda, Worker: -1})
		next++
	}
	for range 100_000 {
		q.Push(&sched.Task{ID: next, ArchMask: cuda, Worker: -1})
		next++
		if tk := q.TakeFor(&sched.Worker{Arch: driver.CPU}); tk != nil {
			t.Fatalf("TakeFor gave task %d, which no CPU can run", tk.ID)
		}
		e, ok := q.PopFront()
		if !ok || e.Task.ID != want {
			t.Fatalf("popped %v, want task %d", e.Task, want)
		}
		want++
	}
	if b := q.buckets[0]; cap(b.entries) > 1024 {
		t.Fatalf("a FIFO of 100 tasks holds %d slots", cap(b.entries))
	}
}

// TestQueueNoAllocation: pushing and popping alternating priorities
// allocates nothing once warm (a drained bucket is reused).
func TestQueueNoAllocation(t *testing.T) {
	var q Queue
	tasks := []*sched.Task{{ID: 1, Priority: 1, ArchMask: 1}, {ID: 2, Priority: 7, ArchMask: 1}}
	w := &sched.Worker{Arch: driver.CPU}
	step := func() {
		for _, tk := range tasks {
			q.Push(tk)
			if q.TakeFor(w) == nil {
				t.Fatal("lost a task")
			}
		}
	}
	step()
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per push and pop", n)
	}
}

// BenchmarkPushTake is the queue's hot path: one push and one pop.
func BenchmarkPushTake(b *testing.B) {
	var q Queue
	tk := &sched.Task{ID: 1, ArchMask: 1}
	w := &sched.Worker{Arch: driver.CPU}
	for b.Loop() {
		q.Push(tk)
		q.TakeFor(w)
	}
}
