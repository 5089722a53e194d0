package ws

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

func cpus(n int) []sched.Worker {
	ws := make([]sched.Worker, n)
	for i := range ws {
		ws[i] = sched.Worker{ID: i, Arch: driver.CPU}
	}
	return ws
}

func task(id uint64, prio int32, releasedBy int32) *sched.Task {
	return &sched.Task{ID: id, Priority: prio, ArchMask: driver.ArchBit(driver.CPU), Worker: -1, ReleasedBy: releasedBy}
}

func ids(p *Policy, w int) []uint64 {
	var out []uint64
	for t := p.Pop(w); t != nil; t = p.Pop(w) {
		out = append(out, t.ID)
	}
	return out
}

func TestPolicy(t *testing.T) {
	cases := []struct {
		name    string
		workers int
		steal   bool
		push    []*sched.Task
		pop     int
		want    []uint64
	}{
		{"released task stays on its worker", 2, false, []*sched.Task{task(1, 0, 1), task(2, 0, 1)}, 1, []uint64{1, 2}},
		{"submitted tasks go round robin", 2, false, []*sched.Task{task(1, 0, -1), task(2, 0, -1), task(3, 0, -1)}, 0, []uint64{1, 3}},
		{"priority first, then FIFO", 1, false, []*sched.Task{task(1, 0, -1), task(2, 5, -1), task(3, 0, -1), task(4, 5, -1)}, 0, []uint64{2, 4, 1, 3}},
		{"idle worker steals lowest priority", 2, true, []*sched.Task{task(1, 9, 0), task(2, 0, 0), task(3, 0, 0)}, 1, []uint64{3, 2, 1}},
		{"no stealing when disabled", 2, false, []*sched.Task{task(1, 0, 0)}, 1, nil},
		{"forced worker", 2, true, []*sched.Task{{ID: 7, ArchMask: 1, Worker: 1, ReleasedBy: 0}}, 1, []uint64{7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			p.steal = c.steal
			if err := p.Init(cpus(c.workers)); err != nil {
				t.Fatal(err)
			}
			for _, tk := range c.push {
				p.Push(tk)
			}
			got := ids(p, c.pop)
			if len(got) != len(c.want) {
				t.Fatalf("popped %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("popped %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestArchitectureRespected(t *testing.T) {
	p := New()
	p.Init([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.OpenCL}})
	ocl := &sched.Task{ID: 1, ArchMask: driver.ArchBit(driver.OpenCL), Worker: -1, ReleasedBy: 0}
	p.Push(ocl)
	if tk := p.Pop(0); tk != nil {
		t.Fatalf("CPU worker got OpenCL-only task %d", tk.ID)
	}
	if tk := p.Pop(1); tk == nil || tk.ID != 1 {
		t.Fatalf("OpenCL worker got %v, want task 1", tk)
	}
}

func TestRemoveWorkersRequeues(t *testing.T) {
	p := New()
	p.Init(cpus(2))
	for i := uint64(0); i < 10; i++ {
		p.Push(task(i, 0, 1))
	}
	p.RemoveWorkers([]int{1})
	if got := ids(p, 0); len(got) != 10 {
		t.Fatalf("after removing worker 1, worker 0 got %d tasks, want all 10", len(got))
	}
	if p.Pop(1) != nil {
		t.Fatal("removed worker still gets tasks")
	}
}

// TestManyTasksLinear pushes and pops enough tasks that a quadratic queue
// would show; every task comes out exactly once.
func TestManyTasksLinear(t *testing.T) {
	p := New()
	p.Init(cpus(2))
	const n = 200000
	for i := uint64(0); i < n; i++ {
		p.Push(task(i, int32(i%3), -1))
	}
	seen := make([]bool, n)
	for w := 0; ; w ^= 1 {
		tk := p.Pop(w)
		if tk == nil {
			if tk = p.Pop(w ^ 1); tk == nil {
				break
			}
		}
		if seen[tk.ID] {
			t.Fatalf("task %d popped twice", tk.ID)
		}
		seen[tk.ID] = true
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("task %d never popped", i)
		}
	}
}

func TestConfig(t *testing.T) {
	p := New()
	if err := p.ConfigSchema().Validate(base.Config{"steal": false}); err != nil {
		t.Fatal(err)
	}
	p.SetConfig(base.Config{"steal": false})
	if p.steal {
		t.Fatal("steal = false not applied")
	}
	if err := p.ConfigSchema().Validate(base.Config{"steal": "yes"}); err == nil {
		t.Fatal("string for a bool attribute accepted")
	}
}
