package prio

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

// TestCentralByPriority: every worker takes the most urgent task it can
// run from the one queue, oldest first among equals.
func TestCentralByPriority(t *testing.T) {
	cpu, cuda := driver.ArchBit(driver.CPU), driver.ArchBit(driver.CUDA)
	type tk struct {
		prio int32
		mask uint32
	}
	cases := []struct {
		name  string
		tasks []tk
		pops  []int  // workers popping, in turn (0: CPU, 1: CUDA)
		want  string // task IDs they get (0: none)
	}{
		{"priority order", []tk{{0, cpu}, {5, cpu}, {2, cpu}}, []int{0, 0, 0, 0}, "[2 3 1 0]"},
		{"FIFO among equals", []tk{{1, cpu | cuda}, {1, cpu | cuda}, {1, cpu | cuda}}, []int{1, 0, 1}, "[1 2 3]"},
		{"skips what a worker cannot run", []tk{{9, cuda}, {3, cpu}, {1, cpu | cuda}}, []int{0, 0, 0, 1}, "[2 3 0 1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			if err := p.Init([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA, Node: 1}}); err != nil {
				t.Fatal(err)
			}
			for i, x := range c.tasks {
				p.Push(&sched.Task{ID: uint64(i + 1), Priority: x.prio, ArchMask: x.mask, Worker: -1, ReleasedBy: -1})
			}
			var got []uint64
			for _, w := range c.pops {
				var id uint64
				if task := p.Pop(w); task != nil {
					id = task.ID
				}
				got = append(got, id)
			}
			if fmt.Sprint(got) != c.want {
				t.Fatalf("popped %v, want %s", got, c.want)
			}
		})
	}
}
