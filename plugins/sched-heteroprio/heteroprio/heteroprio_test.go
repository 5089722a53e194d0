package heteroprio

import (
	"fmt"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

func TestConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		schedtest.Run(t, func() sched.Policy { return New() }, schedtest.HonoursPriorities())
	})
	t.Run("orders", func(t *testing.T) {
		schedtest.Run(t, func() sched.Policy {
			p := New()
			if err := p.SetConfig(base.Config{"cpu_order": "-2,0,2", "cuda_order": "1"}); err != nil {
				t.Fatal(err)
			}
			return p
		})
	})
}

var (
	cpu  = driver.ArchBit(driver.CPU)
	cuda = driver.ArchBit(driver.CUDA)
)

// task is a task of priority prio runnable on mask, with predicted lengths
// on CPU and CUDA (-1: uncalibrated).
func task(id uint64, prio int32, mask uint32, cpuNs, cudaNs int64) *sched.Task {
	return &sched.Task{ID: id, Priority: prio, ArchMask: mask, Worker: -1, ReleasedBy: -1, Length: [3]int64{cpuNs, cudaNs, -1}}
}

// TestOrder: each architecture takes from the buckets in its configured
// order, unlisted priorities after, by decreasing priority.
func TestOrder(t *testing.T) {
	cases := []struct {
		name string
		cfg  base.Config
		want string // priorities popped by the CPU worker, then by the CUDA worker
	}{
		{"default", nil, "cpu [3 2 1 0] cuda [3 2 1 0]"},
		{"cpu reversed", base.Config{"cpu_order": "0,1,2,3"}, "cpu [0 1 2 3] cuda [3 2 1 0]"},
		{"partial orders", base.Config{"cpu_order": "1", "cuda_order": " 0 , 2"}, "cpu [1 3 2 0] cuda [0 2 3 1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := ""
			for _, w := range []sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA, Node: 1}} {
				p := New()
				if err := p.SetConfig(c.cfg); err != nil {
					t.Fatal(err)
				}
				if err := p.Init([]sched.Worker{w}); err != nil {
					t.Fatal(err)
				}
				for i, prio := range []int32{0, 2, 1, 3} {
					p.Push(task(uint64(i+1), prio, cpu|cuda, -1, -1))
				}
				var got []int32
				for tk := p.Pop(w.ID); tk != nil; tk = p.Pop(w.ID) {
					got = append(got, tk.Priority)
				}
				out += fmt.Sprintf("%s %v ", w.Arch, got)
			}
			if out[:len(out)-1] != c.want {
				t.Fatalf("popped %q, want %q", out, c.want)
			}
		})
	}
}

// TestAcceleration: a CPU worker takes a task that CUDA runs f times
// faster only when the bucket holds at least f tasks per CUDA worker.
func TestAcceleration(t *testing.T) {
	cases := []struct {
		name           string
		cudaWorkers    int
		queued         int
		cpuNs, cudaNs  int64
		accel          bool
		wantCPUTakes   bool
		wantCUDAFaster bool
	}{
		{"10x faster, 5 queued, 1 GPU", 1, 5, 1000, 100, true, false, true},
		{"10x faster, 10 queued, 1 GPU", 1, 10, 1000, 100, true, true, true},
		{"10x faster, 10 queued, 2 GPUs", 2, 10, 1000, 100, true, false, true},
		{"10x faster, rule off", 1, 1, 1000, 100, false, true, true},
		{"CPU faster", 1, 1, 100, 1000, true, true, false},
		{"uncalibrated on CUDA", 1, 1, 1000, -1, true, true, false},
		{"uncalibrated on CPU", 1, 1, -1, 100, true, true, false},
		{"no GPU worker", 0, 1, 1000, 100, true, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			if err := p.SetConfig(base.Config{"acceleration": c.accel}); err != nil {
				t.Fatal(err)
			}
			workers := []sched.Worker{{ID: 0, Arch: driver.CPU}}
			for i := 0; i < c.cudaWorkers; i++ {
				workers = append(workers, sched.Worker{ID: 1 + i, Arch: driver.CUDA, Node: 1 + i})
			}
			if err := p.Init(workers); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.queued; i++ {
				p.Push(task(uint64(i+1), 0, cpu|cuda, c.cpuNs, c.cudaNs))
			}
			if got := p.Pop(0) != nil; got != c.wantCPUTakes {
				t.Fatalf("CPU worker took a task: %v, want %v", got, c.wantCPUTakes)
			}
			// Whatever the CPU left, the GPUs take: nothing is stranded.
			for id := 1; id <= c.cudaWorkers; id++ {
				for p.Pop(id) != nil {
				}
			}
			for p.Pop(0) != nil {
			}
			for _, b := range p.buckets {
				if b.q.Len() != 0 {
					t.Fatalf("%d tasks left in bucket %+v", b.q.Len(), b.key)
				}
			}
		})
	}
}

// TestBoundFirst: a worker pops the tasks bound to it before any bucket,
// and a task bound to a removed worker waits for it.
func TestBoundFirst(t *testing.T) {
	p := New()
	if err := p.Init([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}}); err != nil {
		t.Fatal(err)
	}
	p.Push(task(1, 9, cpu, -1, -1))
	bound := task(2, -5, cpu, -1, -1)
	bound.Worker = 1
	p.Push(bound)
	if tk := p.Pop(1); tk == nil || tk.ID != 2 {
		t.Fatalf("worker 1 popped %v, want its bound task 2", tk)
	}
	bound2 := task(3, 0, cpu, -1, -1)
	bound2.Worker = 1
	p.Push(bound2)
	p.RemoveWorkers([]int{1})
	if tk := p.Pop(0); tk == nil || tk.ID != 1 {
		t.Fatalf("worker 0 popped %v, want task 1", tk)
	}
	if tk := p.Pop(0); tk != nil {
		t.Fatalf("worker 0 popped task %d, bound to removed worker 1", tk.ID)
	}
	p.AddWorkers([]sched.Worker{{ID: 1, Arch: driver.CPU}})
	if tk := p.Pop(1); tk == nil || tk.ID != 3 {
		t.Fatalf("worker 1, back, popped %v, want its bound task 3", tk)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		cfg  base.Config
		want string
	}{
		{base.Config{"cpu_order": "1,x"}, `attribute "cpu_order": "1,x": want comma-separated integer priorities`},
		{base.Config{"cuda_order": "1,2,1"}, `attribute "cuda_order": "1,2,1": priority 1 listed twice`},
		{base.Config{"opencl_order": "99999999999"}, `attribute "opencl_order": "99999999999": want comma-separated integer priorities`},
	}
	for _, c := range cases {
		if err := New().SetConfig(c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("SetConfig(%v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}
