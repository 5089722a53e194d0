package schedkit

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

func TestChooseImpl(t *testing.T) {
	usable := func(ns int64) sched.Impl { return sched.Impl{Length: ns, Kernel: 1} }
	refused := sched.Impl{Length: 5, Kernel: -1}
	cases := []struct {
		name  string
		impls []sched.Impl
		k     uint
		impl  int
		ns    int64
		cal   bool
	}{
		{"none", nil, 0, -1, -1, true},
		{"none usable", []sched.Impl{refused}, 0, -1, -1, true},
		{"fastest", []sched.Impl{usable(90), usable(20), usable(50)}, 0, 1, 20, true},
		{"fastest, ties to the first", []sched.Impl{usable(20), usable(20)}, 3, 0, 20, true},
		{"a refused one is never chosen, however fast", []sched.Impl{usable(90), refused}, 0, 0, 90, true},
		{"uncalibrated first", []sched.Impl{usable(1), usable(-1)}, 0, 1, -1, false},
		{"uncalibrated in turn: 0th", []sched.Impl{usable(-1), usable(7), usable(-1)}, 0, 0, -1, false},
		{"uncalibrated in turn: 1st", []sched.Impl{usable(-1), usable(7), usable(-1)}, 1, 2, -1, false},
		{"uncalibrated in turn: wraps", []sched.Impl{usable(-1), usable(7), usable(-1)}, 2, 0, -1, false},
		{"an uncalibrated refused one is not measured", []sched.Impl{{Length: -1, Kernel: -1}, usable(4)}, 0, 1, 4, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			impl, ns, cal := ChooseImpl(c.impls, c.k)
			if impl != c.impl || ns != c.ns || cal != c.cal {
				t.Errorf("ChooseImpl = %d, %d, %v; want %d, %d, %v", impl, ns, cal, c.impl, c.ns, c.cal)
			}
		})
	}
}

func TestSlotImpls(t *testing.T) {
	var tb Table[int]
	tb.Add([]sched.Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA, Node: 1}, {ID: 2, Arch: "fpga"}})
	tk := &sched.Task{}
	if got := tb.Get(1).Impls(tk); got != nil {
		t.Errorf("no list: %v, want nil", got)
	}
	tk.Impls = &[wire.NumArch][]sched.Impl{}
	tk.Impls[driver.ArchIndex(driver.CUDA)] = []wire.Impl{{Length: 3, Kernel: 0}, {Length: 1, Kernel: 1}}
	if got := tb.Get(0).Impls(tk); got != nil {
		t.Errorf("CPU worker: %v, want nil (the core chooses)", got)
	}
	if got := tb.Get(1).Impls(tk); len(got) != 2 || got[1].Length != 1 {
		t.Errorf("CUDA worker: %v", got)
	}
	if got := tb.Get(2).Impls(tk); got != nil {
		t.Errorf("worker of an unknown architecture: %v", got)
	}
}
