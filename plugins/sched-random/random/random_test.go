package random

import (
	"math"
	"slices"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

func TestConformance(t *testing.T) {
	schedtest.Run(t, func() sched.Policy { return New() }, schedtest.HonoursPriorities())
}

// TestWeightedBySpeed: over many draws each worker gets a share of the
// tasks it can run proportional to its architecture's speed.
func TestWeightedBySpeed(t *testing.T) {
	cpu, cuda := driver.ArchBit(driver.CPU), driver.ArchBit(driver.CUDA)
	workers := []sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}, {ID: 2, Arch: driver.CUDA, Node: 1}}
	cases := []struct {
		name string
		cfg  base.Config
		mask uint32
		want []float64 // expected share per worker
	}{
		{"StarPU's speeds", nil, cpu | cuda, []float64{1 / 15.33, 1 / 15.33, 13.33 / 15.33}},
		{"CPU only", nil, cpu, []float64{0.5, 0.5, 0}},
		{"configured speeds", base.Config{"cuda_speed": int64(2)}, cpu | cuda, []float64{0.25, 0.25, 0.5}},
	}
	const n = 20000
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			cfg := base.Config{"seed": int64(7)}
			for k, v := range c.cfg {
				cfg[k] = v
			}
			if err := p.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			if err := p.Init(workers); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				p.Push(&sched.Task{ID: uint64(i + 1), ArchMask: c.mask, Worker: -1, ReleasedBy: -1})
			}
			for id, want := range c.want {
				got := 0
				for p.Pop(id) != nil {
					got++
				}
				if share := float64(got) / n; math.Abs(share-want) > 0.02 {
					t.Errorf("worker %d got %.3f of the tasks, want %.3f", id, share, want)
				}
			}
		})
	}
}

// TestSeed: the same seed gives the same schedule.
func TestSeed(t *testing.T) {
	draw := func() []int {
		p := New()
		if err := p.SetConfig(base.Config{"seed": int64(42)}); err != nil {
			t.Fatal(err)
		}
		if err := p.Init([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}, {ID: 2, Arch: driver.CPU}}); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			p.Push(&sched.Task{ID: uint64(i), ArchMask: 1, Worker: -1, ReleasedBy: -1})
		}
		where := make([]int, 100)
		for id := range 3 {
			for tk := p.Pop(id); tk != nil; tk = p.Pop(id) {
				where[tk.ID] = id
			}
		}
		return where
	}
	if a, b := draw(), draw(); !slices.Equal(a, b) {
		t.Fatalf("two runs with seed 42 differ:\n%v\n%v", a, b)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		cfg  base.Config
		want string
	}{
		{base.Config{"cpu_speed": 0.0}, `attribute "cpu_speed": 0: want a finite number > 0`},
		{base.Config{"opencl_speed": -1.5}, `attribute "opencl_speed": -1.5: want a finite number > 0`},
		{base.Config{"cuda_speed": "fast"}, `attribute "cuda_speed": want a number, got string`},
		{base.Config{"cpu_speed": math.Inf(1)}, `attribute "cpu_speed": +Inf: want a finite number > 0`},
	}
	for _, c := range cases {
		if err := New().SetConfig(c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("SetConfig(%v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := New().Init([]sched.Worker{{ID: -1}}); err == nil {
		t.Error("Init accepted a negative worker id")
	}
}
