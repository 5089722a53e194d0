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

func localTask(id uint64, releasedBy int32) *sched.Task {
	t := task(id, 0, releasedBy)
	t.Locality = true
	return t
}

// TestLocality: a LOCALITY task stays on its releaser's queue unless that
// queue is overloaded or the thief has been idle for locality_idle_us.
func TestLocality(t *testing.T) {
	var clock int64 = 1
	setup := func(overload int) *Policy {
		p := New()
		p.now = func() int64 { return clock }
		p.localityOverload = overload
		p.localityIdleNs = 1000
		if err := p.Init(cpus(2)); err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := setup(4)
	for i := uint64(1); i <= 3; i++ {
		p.Push(localTask(i, 0))
	}
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("a worker idle for no time stole LOCALITY task %d from a queue of 3", tk.ID)
	}
	clock += 999
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("worker idle for 999 ns (< 1000) stole task %d", tk.ID)
	}
	clock++
	if tk := p.Pop(1); tk == nil || tk.ID != 3 {
		t.Fatalf("worker idle for 1000 ns got %v, want the newest task 3", tk)
	}
	// Worker 1 now runs a task: it is not idle, so it steals no more
	// LOCALITY tasks however long it waits.
	clock += 1e6
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("busy worker stole LOCALITY task %d", tk.ID)
	}
	// A task that is not LOCALITY is stolen at once.
	p.Push(task(9, 0, 0))
	if tk := p.Pop(1); tk == nil || tk.ID != 9 {
		t.Fatalf("plain task: worker 1 got %v, want 9", tk)
	}

	p = setup(2)
	for i := uint64(1); i <= 3; i++ {
		p.Push(localTask(i, 0))
	}
	if tk := p.Pop(1); tk == nil || tk.ID != 3 {
		t.Fatalf("queue of 3 > overload 2: thief got %v, want task 3", tk)
	}
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("queue of 2 = overload: thief got %d", tk.ID)
	}
	if got := ids(p, 0); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("owner popped %v, want [1 2]", got)
	}
}

// TestVictimMostLoaded: the thief picks the longest queue.
func TestVictimMostLoaded(t *testing.T) {
	p := New()
	p.Init(cpus(4))
	p.Push(task(1, 0, 0))
	for i := uint64(10); i < 14; i++ {
		p.Push(task(i, 0, 2))
	}
	p.Push(task(20, 0, 3))
	p.Push(task(21, 0, 3))
	for _, want := range []uint64{13, 12} { // queue 2 has 4, then 3, queue 3 has 2
		if tk := p.Pop(1); tk == nil || tk.ID != want {
			t.Fatalf("thief got %v, want task %d", tk, want)
		}
	}
	// Queues 2 and 3 now tie: the next steals go to either, never to
	// worker 0's shorter queue.
	for i := 0; i < 2; i++ {
		if tk := p.Pop(1); tk == nil || tk.ID == 1 {
			t.Fatalf("steal %d got %v, want a task of queue 2 or 3", i, tk)
		}
	}
}

// TestBoundTasks: a task bound to a worker is never stolen; one bound to a
// missing worker waits for it.
func TestBoundTasks(t *testing.T) {
	p := New()
	p.Init(cpus(2))
	p.Push(&sched.Task{ID: 1, ArchMask: 1, Worker: 0, ReleasedBy: -1})
	p.Push(&sched.Task{ID: 2, ArchMask: 1, Worker: 5, ReleasedBy: -1})
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("worker 1 got task %d, bound elsewhere", tk.ID)
	}
	if got := ids(p, 0); len(got) != 1 || got[0] != 1 {
		t.Fatalf("worker 0 popped %v, want [1]", got)
	}
	p.AddWorkers([]sched.Worker{{ID: 5, Arch: driver.CPU}})
	if got := ids(p, 5); len(got) != 1 || got[0] != 2 {
		t.Fatalf("added worker 5 popped %v, want [2]", got)
	}
}

func TestDeinitDropsTasks(t *testing.T) {
	p := New()
	p.Init(cpus(2))
	p.Push(task(1, 0, 0))
	p.Deinit()
	if tk := p.Pop(0); tk != nil {
		t.Fatalf("Pop after Deinit returned task %d", tk.ID)
	}
}

// BenchmarkPushPop is the policy's cost per task on the chain's path: the
// releasing worker pops what it released, then an idle worker finds
// nothing to steal.
func BenchmarkPushPop(b *testing.B) {
	p := New()
	p.Init(cpus(4))
	tk := task(1, 0, 1)
	for i := 0; i < b.N; i++ {
		p.Push(tk)
		if p.Pop(1) == nil {
			b.Fatal("no task")
		}
		p.Pop(0)
		p.PostExec(1, 1, 100)
	}
}

// TestVictimWithPinnedTasks: a queue whose tasks are partly bound, partly
// kept for locality, still gives up the rest.
func TestVictimWithPinnedTasks(t *testing.T) {
	p := New()
	p.Init(cpus(2))
	bl := &sched.Task{ID: 1, ArchMask: 1, Worker: 0, ReleasedBy: 0, Locality: true} // bound and LOCALITY
	p.Push(bl)
	p.Push(task(2, 0, 0))
	if tk := p.Pop(1); tk == nil || tk.ID != 2 {
		t.Fatalf("thief got %v, want the free task 2", tk)
	}
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("thief got task %d, bound to worker 0", tk.ID)
	}
}
