package schedkit

import (
	"fmt"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// ids lists the IDs of slots.
func ids[S any](slots []*Slot[S]) []int {
	out := []int{}
	for _, s := range slots {
		out = append(out, s.ID)
	}
	return out
}

func TestTableAddRemove(t *testing.T) {
	cpu := func(id int) sched.Worker { return sched.Worker{ID: id, Arch: driver.CPU} }
	gpu := func(id int) sched.Worker { return sched.Worker{ID: id, Arch: driver.CUDA, Node: 1} }
	type step struct {
		add    []sched.Worker
		remove []int
		// want: what Add or Remove returned, then Slots, then the
		// counts of CPU and CUDA workers
		want string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"add in order", []step{
			{add: []sched.Worker{cpu(2), gpu(0), cpu(5)}, want: "[2 0 5] [2 0 5] 2 1"},
		}},
		{"known and negative IDs skipped", []step{
			{add: []sched.Worker{cpu(1), cpu(1), {ID: -3, Arch: driver.CPU}}, want: "[1] [1] 1 0"},
			{add: []sched.Worker{cpu(1), gpu(4)}, want: "[4] [1 4] 1 1"},
		}},
		{"remove keeps the order of the rest", []step{
			{add: []sched.Worker{cpu(0), cpu(1), gpu(2), cpu(3)}, want: "[0 1 2 3] [0 1 2 3] 3 1"},
			{remove: []int{1, 9, 2, 1}, want: "[1 2] [0 3] 2 0"},
		}},
		{"a removed worker comes back last", []step{
			{add: []sched.Worker{cpu(0), cpu(1)}, want: "[0 1] [0 1] 2 0"},
			{remove: []int{0}, want: "[0] [1] 1 0"},
			{add: []sched.Worker{cpu(0)}, want: "[0] [1 0] 2 0"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tb Table[int]
			for i, st := range c.steps {
				var got []*Slot[int]
				if st.add != nil {
					got = tb.Add(st.add)
				} else {
					got = tb.Remove(st.remove)
				}
				s := fmt.Sprint(ids(got), ids(tb.Slots()), tb.CountArch(driver.ArchIndex(driver.CPU)), tb.CountArch(driver.ArchIndex(driver.CUDA)))
				if s != st.want {
					t.Fatalf("step %d: %s, want %s", i, s, st.want)
				}
				if tb.Len() != len(tb.Slots()) {
					t.Fatalf("step %d: Len %d, %d slots", i, tb.Len(), len(tb.Slots()))
				}
				for _, sl := range tb.Slots() {
					if tb.Get(sl.ID) != sl {
						t.Fatalf("step %d: Get(%d) is not its slot", i, sl.ID)
					}
				}
			}
		})
	}
}

func TestSlotCanRun(t *testing.T) {
	var tb Table[struct{}]
	tb.Add([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA, Node: 1}, {ID: 2, Arch: "fpga"}})
	cpu, cuda := driver.ArchBit(driver.CPU), driver.ArchBit(driver.CUDA)
	cases := []struct {
		name string
		task sched.Task
		want string // CanRun of workers 0, 1, 2
	}{
		{"CPU", sched.Task{ArchMask: cpu, Worker: -1}, "true false false"},
		{"both", sched.Task{ArchMask: cpu | cuda, Worker: -1}, "true true false"},
		{"bound", sched.Task{ArchMask: cpu | cuda, Worker: 1}, "false true false"},
		{"bound to an unknown arch", sched.Task{Worker: 2}, "false false true"},
		{"none", sched.Task{Worker: -1}, "false false false"},
	}
	for _, c := range cases {
		var got []bool
		for id := range 3 {
			s := tb.Get(id)
			if s.CanRun(&c.task) != c.task.CanRun(&s.Worker) {
				t.Errorf("%s: worker %d: Slot.CanRun disagrees with Task.CanRun", c.name, id)
			}
			got = append(got, s.CanRun(&c.task))
		}
		if s := fmt.Sprint(got[0], got[1], got[2]); s != c.want {
			t.Errorf("%s: %s, want %s", c.name, s, c.want)
		}
	}
}

func TestSlotPredictions(t *testing.T) {
	var tb Table[struct{}]
	tb.Add([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA, Node: 2}, {ID: 2, Arch: "fpga", Node: 5}})
	tk := &sched.Task{Length: [3]int64{100, 7, -1}, Transfer: []int64{0, 11, 22}}
	cases := []struct {
		id               int
		length, transfer int64
	}{{0, 100, 0}, {1, 7, 22}, {2, -1, 0}}
	for _, c := range cases {
		s := tb.Get(c.id)
		if l, tr := s.Length(tk), s.Transfer(tk); l != c.length || tr != c.transfer {
			t.Errorf("worker %d: Length %d, Transfer %d; want %d, %d", c.id, l, tr, c.length, c.transfer)
		}
	}
}

// TestTableNext: round robin over the workers that can run the task,
// wrapping round; nil when none can.
func TestTableNext(t *testing.T) {
	var tb Table[struct{}]
	tb.Add([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA}, {ID: 2, Arch: driver.CPU}})
	cpu, cuda := driver.ArchBit(driver.CPU), driver.ArchBit(driver.CUDA)
	cases := []struct {
		mask uint32
		want int // -1: nil
	}{{cpu, 0}, {cpu, 2}, {cpu | cuda, 0}, {cpu | cuda, 1}, {cuda, 1}, {driver.ArchBit(driver.OpenCL), -1}, {cpu, 2}}
	for i, c := range cases {
		s := tb.Next(&sched.Task{ArchMask: c.mask, Worker: -1})
		got := -1
		if s != nil {
			got = s.ID
		}
		if got != c.want {
			t.Fatalf("placement %d (mask %#x): worker %d, want %d", i, c.mask, got, c.want)
		}
	}
	if r1, r2 := tb.Rotate(), tb.Rotate(); r2 != r1+1 {
		t.Fatalf("Rotate gave %d then %d", r1, r2)
	}
	var empty Table[struct{}]
	if s := empty.Next(&sched.Task{ArchMask: cpu, Worker: -1}); s != nil {
		t.Fatalf("an empty table placed a task on worker %d", s.ID)
	}
}

func TestTableParkAndIdle(t *testing.T) {
	var tb Table[struct{}]
	tb.Add([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}})
	tb.Park(&sched.Task{ID: 1})
	tb.Park(&sched.Task{ID: 2})
	if tb.Parked() != 2 {
		t.Fatalf("Parked %d, want 2", tb.Parked())
	}
	if p := tb.Unpark(); len(p) != 2 || p[0].ID != 1 || tb.Parked() != 0 {
		t.Fatalf("Unpark gave %v, %d left", p, tb.Parked())
	}
	steps := []struct {
		do   string
		id   int
		want string // Running of 0 and 1, then the idle workers
	}{
		{"start", 0, "1 0 [1]"},
		{"start", 0, "2 0 [1]"},
		{"start", 1, "2 1 []"},
		{"finish", 0, "1 1 []"},
		{"finish", 1, "1 0 [1]"},
		{"finish", 1, "1 0 [1]"}, // a PostExec of a previous instance's task
		{"start", 7, "1 0 [1]"},  // no such worker
		{"finish", 0, "0 0 [0 1]"},
	}
	for i, st := range steps {
		if st.do == "start" {
			tb.Started(st.id)
		} else {
			tb.Finished(st.id)
		}
		got := fmt.Sprint(tb.Get(0).Running(), tb.Get(1).Running(), ids(tb.Idle(nil)))
		if got != st.want {
			t.Fatalf("step %d (%s %d): %s, want %s", i, st.do, st.id, got, st.want)
		}
		if tb.Get(0).Idle() != (tb.Get(0).Running() == 0) {
			t.Fatalf("step %d: Idle disagrees with Running", i)
		}
	}
	tb.Reset()
	if tb.Len() != 0 || tb.Get(0) != nil {
		t.Fatal("Reset kept workers")
	}
}

func TestCheckWorkers(t *testing.T) {
	cases := []struct {
		workers []sched.Worker
		want    string
	}{
		{nil, "<nil>"},
		{[]sched.Worker{{ID: 0}, {ID: 3}}, "<nil>"},
		{[]sched.Worker{{ID: 0}, {ID: -2}}, "worker id -2: must not be negative"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(CheckWorkers(c.workers)); got != c.want {
			t.Errorf("CheckWorkers(%v) = %s, want %s", c.workers, got, c.want)
		}
	}
}

// TestTableHome: the bound worker, else the releasing worker when it can
// run the task, else round robin; parked when no worker fits.
func TestTableHome(t *testing.T) {
	var tb Table[struct{}]
	tb.Add([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}, {ID: 2, Arch: driver.OpenCL}})
	cpu, ocl := driver.ArchBit(driver.CPU), driver.ArchBit(driver.OpenCL)
	for _, c := range []struct {
		name    string
		task    sched.Task
		want    int // -1: parked
		nParked int
	}{
		{"bound", sched.Task{ArchMask: cpu, Worker: 1, ReleasedBy: 0}, 1, 0},
		{"bound to a worker not in the table", sched.Task{ArchMask: cpu, Worker: 9, ReleasedBy: 0}, -1, 1},
		{"released by a capable worker", sched.Task{ArchMask: cpu, Worker: -1, ReleasedBy: 1}, 1, 1},
		{"released by a worker that cannot run it", sched.Task{ArchMask: ocl, Worker: -1, ReleasedBy: 0}, 2, 1},
		{"released by no worker", sched.Task{ArchMask: cpu, Worker: -1, ReleasedBy: -1}, 0, 1},
		{"no worker can run it", sched.Task{ArchMask: driver.ArchBit(driver.CUDA), Worker: -1, ReleasedBy: -1}, -1, 2},
	} {
		s := tb.Home(&c.task)
		got := -1
		if s != nil {
			got = s.ID
		}
		if got != c.want || tb.Parked() != c.nParked {
			t.Errorf("%s: worker %d with %d parked, want %d with %d", c.name, got, tb.Parked(), c.want, c.nParked)
		}
	}
}
