package lws

import (
	"fmt"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

func TestConformance(t *testing.T) {
	schedtest.Run(t, func() sched.Policy { return New() }, schedtest.HonoursPriorities())
}

func cpuTask(id uint64, releasedBy int32) *sched.Task {
	return &sched.Task{ID: id, ArchMask: driver.ArchBit(driver.CPU), Worker: -1, ReleasedBy: releasedBy}
}

// TestNeighbours: same memory node first, then by ID after the worker's
// own, wrapping round.
func TestNeighbours(t *testing.T) {
	cases := []struct {
		name    string
		workers []sched.Worker
		want    string // neighbours of each worker, by ID
	}{
		{"one node", []sched.Worker{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}},
			"map[0:[1 2 3] 1:[2 3 0] 2:[3 0 1] 3:[0 1 2]]"},
		{"two nodes", []sched.Worker{{ID: 0}, {ID: 1, Node: 1}, {ID: 2}, {ID: 3, Node: 1}},
			"map[0:[2 1 3] 1:[3 2 0] 2:[0 3 1] 3:[1 0 2]]"},
		{"sparse ids", []sched.Worker{{ID: 5}, {ID: 2}, {ID: 9}},
			"map[2:[5 9] 5:[9 2] 9:[2 5]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.workers {
				c.workers[i].Arch = driver.CPU
			}
			p := New()
			if err := p.Init(c.workers); err != nil {
				t.Fatal(err)
			}
			got := map[int][]int{}
			for _, s := range p.workers.Slots() {
				got[s.ID] = []int{}
				for _, n := range s.State.near {
					got[s.ID] = append(got[s.ID], n.ID)
				}
			}
			if fmt.Sprint(got) != c.want {
				t.Fatalf("neighbours %v, want %s", got, c.want)
			}
		})
	}
}

// TestStealNearestBusy: a task stays with the worker that released it; an
// idle worker steals from its nearest neighbour that is busy, never from
// an idle one, and takes the least urgent task there.
func TestStealNearestBusy(t *testing.T) {
	p := New()
	if err := p.Init([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}, {ID: 2, Arch: driver.CPU}}); err != nil {
		t.Fatal(err)
	}
	// Worker 2 released tasks 1-3, worker 1 task 4.
	for id := uint64(1); id <= 3; id++ {
		tk := cpuTask(id, 2)
		tk.Priority = int32(id)
		p.Push(tk)
	}
	p.Push(cpuTask(4, 1))
	// Worker 1 and 2 are idle: worker 0 steals nothing.
	if tk := p.Pop(0); tk != nil {
		t.Fatalf("worker 0 stole task %d from an idle worker", tk.ID)
	}
	// Worker 2 runs its most urgent task; worker 1 stays idle: worker 0
	// steals from worker 2 (further than 1, but busy), the least urgent.
	if tk := p.Pop(2); tk == nil || tk.ID != 3 {
		t.Fatalf("worker 2 popped %v, want its most urgent task 3", tk)
	}
	if tk := p.Pop(0); tk == nil || tk.ID != 1 {
		t.Fatalf("worker 0 stole %v, want task 1, the least urgent of busy worker 2", tk)
	}
	// Worker 1 busy too: it is nearer to 0, so 0 steals from 1.
	p.Push(cpuTask(5, 1))
	if tk := p.Pop(1); tk == nil || tk.ID != 4 {
		t.Fatalf("worker 1 popped %v, want task 4", tk)
	}
	if tk := p.Pop(0); tk == nil || tk.ID != 5 {
		t.Fatalf("worker 0 stole %v, want task 5 from its nearest busy neighbour 1", tk)
	}
	// When worker 2 finishes, it is idle again and keeps task 2.
	p.PostExec(2, 3, 100)
	if tk := p.Pop(0); tk != nil {
		t.Fatalf("worker 0 stole task %d from idle worker 2", tk.ID)
	}
	if tk := p.Pop(2); tk == nil || tk.ID != 2 {
		t.Fatalf("worker 2 popped %v, want task 2", tk)
	}
}

// TestPushPlacement: bound tasks to their worker, released ones to their
// releaser when it can run them, others round robin over capable workers.
func TestPushPlacement(t *testing.T) {
	cpu, cuda := driver.ArchBit(driver.CPU), driver.ArchBit(driver.CUDA)
	workers := []sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}, {ID: 2, Arch: driver.CUDA, Node: 1}}
	cases := []struct {
		name string
		task sched.Task
		want []int // workers whose queue gets it, for successive pushes
	}{
		{"bound", sched.Task{ArchMask: cpu, Worker: 1, ReleasedBy: 0}, []int{1, 1}},
		{"released", sched.Task{ArchMask: cpu | cuda, Worker: -1, ReleasedBy: 2}, []int{2, 2}},
		{"released by one that cannot run it", sched.Task{ArchMask: cpu, Worker: -1, ReleasedBy: 2}, []int{0, 1, 0}},
		{"submitted", sched.Task{ArchMask: cpu | cuda, Worker: -1, ReleasedBy: -1}, []int{0, 1, 2, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			if err := p.Init(workers); err != nil {
				t.Fatal(err)
			}
			for i, want := range c.want {
				tk := c.task
				tk.ID = uint64(i + 1)
				p.Push(&tk)
				if got := p.workers.Get(want).State.q.Len(); got != 1 {
					t.Fatalf("push %d: worker %d holds %d tasks, want it to hold the task", i, want, got)
				}
				if p.Pop(want) == nil {
					t.Fatalf("push %d: worker %d cannot pop it", i, want)
				}
				p.PostExec(want, tk.ID, 1)
			}
		})
	}
}
