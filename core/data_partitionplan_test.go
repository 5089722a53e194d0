package core_test

import (
	"errors"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

var axpyOnCPU = &core.Codelet{Name: "axpy_cpu", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AxpyF32}, Modes: []core.Mode{core.R, core.RW}}

func axpy(t *testing.T, rt *core.Runtime, x, y *core.Handle, alpha float32) {
	t.Helper()
	task := &core.Task{Codelet: axpyOnCPU, Handles: []*core.Handle{x, y}, Arg: blasarg.AxpyArg{Alpha: float64(alpha)}.Encode()}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
}

func plan(t *testing.T, h *core.Handle, f core.Filter) *core.Plan {
	t.Helper()
	p, err := h.Plan(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// blockOf is the block of element i when n elements are cut in nparts by
// StarPU's rule (the first n%nparts blocks get one more).
func blockOf(i, n, nparts int) int {
	q, r := n/nparts, n%nparts
	if i < r*(q+1) {
		return i / (q + 1)
	}
	return r + (i-r*(q+1))/q
}

// Work on the whole vector, on the blocks of one plan, on the whole again
// and on the blocks of another plan, alternating the CPU and the device, is
// submitted without any wait and gives what sequential code gives. The
// additions between the scalings make the result depend on the order.
func TestPlanTiledNoWait(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			const n = 1000
			x, y := make([]float32, n), make([]float32, n)
			want := make([]float32, n)
			for i := range x {
				x[i], y[i] = float32(i%7), float32(i%3)
			}
			hx, err := core.RegisterVector(rt, x)
			must(t, err)
			hy, err := core.RegisterVector(rt, y)
			must(t, err)
			a, b := plan(t, hx, core.VectorBlocks(4, 0)), plan(t, hx, core.VectorBlocks(3, 0))
			on := func(k int) *core.Codelet {
				if k%2 == 1 {
					return scalOnDev
				}
				return scalOnCPU
			}

			scal(t, rt, scalOnDev, hx, 2) // the parent's value is on the device
			must(t, a.Submit())
			for i, c := range a.Children() {
				scal(t, rt, on(i), c, float32(i+2))
			}
			must(t, a.UnpartitionSubmit())
			axpy(t, rt, hy, hx, 1)
			must(t, b.Submit())
			for i, c := range b.Children() {
				scal(t, rt, on(i+1), c, float32(i+3))
			}
			must(t, b.UnpartitionSubmit())
			scal(t, rt, scalOnDev, hx, 3)
			must(t, a.Submit())
			for i, c := range a.Children() {
				scal(t, rt, on(i+1), c, float32(i+1))
			}
			must(t, a.Clean()) // active: gathered first
			must(t, b.Clean())
			must(t, hx.Unregister())

			for i := range want {
				v := float32(i%7) * 2 * float32(blockOf(i, n, 4)+2)
				v += float32(i % 3)
				v *= float32(blockOf(i, n, 3) + 3)
				v *= 3 * float32(blockOf(i, n, 4)+1)
				want[i] = v
			}
			for i := range x {
				if x[i] != want[i] {
					t.Fatalf("x[%d] = %v, want %v", i, x[i], want[i])
				}
			}
			if a.State() != core.PlanCleaned {
				t.Errorf("plan a is %s after Clean", a.State())
			}
		})
	}
}

// Clean does not wait, yet forgets the children only after the tasks on
// them and the gathering: a child whose result is only on the device while
// the gathering waits for its sibling keeps it. (Clean's switch once ran at
// once, its accesses refused by the children it had just closed: it dropped
// the first child's device copy, its only valid one, and RAM's stale copy
// was gathered instead.)
func TestPlanCleanBeforeGather(t *testing.T) {
	rt, dev := startWithDevice(t, 1<<20)
	scalOnDev := &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	x := make([]float32, 100)
	for i := range x {
		x[i] = 1
	}
	hx, err := core.RegisterVector(rt, x)
	must(t, err)
	p := plan(t, hx, core.VectorBlocks(2, 0))
	must(t, p.Submit())
	release := dev.holdExecs(1)
	first := scal(t, rt, scalOnDev, p.Children()[0], 3)
	scal(t, rt, scalOnDev, p.Children()[1], 5) // held: the gathering waits
	must(t, p.UnpartitionSubmit())
	must(t, rt.Wait(first)) // its result is on the device only
	must(t, p.Clean())
	release()
	must(t, hx.Unregister())
	for i, v := range x {
		want := float32(3)
		if i >= 50 {
			want = 5
		}
		if v != want {
			t.Fatalf("x[%d] = %v, want %v", i, v, want)
		}
	}
}

// Matrix tiles planned on a matrix with gaps between its columns are
// scaled on the CPU and on the device; the gaps are left alone.
func TestPlanMatrixTiles(t *testing.T) {
	rt, scalOnDev := devices[0].start(t, 1<<20)
	const n, ld = 8, 9
	m := make([]float32, ld*n)
	for i := range m {
		m[i] = 1
	}
	h, err := core.RegisterMatrix(rt, m, ld, n, n)
	must(t, err)
	p := plan(t, h, core.MatrixTiles(2, 2))
	scal(t, rt, scalOnDev, h, 10)
	must(t, p.Submit())
	for i, tile := range p.Children() {
		cl := scalOnCPU
		if i%2 == 1 {
			cl = scalOnDev
		}
		scal(t, rt, cl, tile, float32(i+2))
	}
	must(t, p.UnpartitionSubmit())
	scal(t, rt, scalOnCPU, h, 2)
	must(t, p.Clean())
	must(t, h.Unregister())
	for j := 0; j < n; j++ {
		for i := 0; i < ld; i++ {
			want := float32(1)
			if i < n {
				want = float32(20 * (2 + i/4 + 2*(j/4)))
			}
			if got := m[i+j*ld]; got != want {
				t.Fatalf("m[%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
}

// Read-only partitions: tasks read the parent and the children of two
// plans at once; writes to either are refused until the plan is upgraded
// or unpartitioned; an upgraded plan's children are written and gathered
// back read-only, where the parent and the children can be read again.
func TestPlanReadonly(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			const n = 100
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i)
			}
			hx, err := core.RegisterVector(rt, x)
			must(t, err)
			scal(t, rt, scalOnDev, hx, 2) // x = 2i, on the device
			p, q := plan(t, hx, core.VectorBlocks(2, 0)), plan(t, hx, core.VectorList(10, 30))
			must(t, p.ReadonlySubmit())
			must(t, q.ReadonlySubmit())
			whole := make([]float32, n)
			hw, err := core.RegisterVector(rt, whole)
			must(t, err)
			halves := [2][]float32{make([]float32, 50), make([]float32, 50)}
			var hh [2]*core.Handle
			for i, c := range p.Children() {
				hh[i], err = core.RegisterVector(rt, halves[i])
				must(t, err)
				axpy(t, rt, c, hh[i], 1) // reads a child of p
			}
			list := make([]float32, 30)
			hl, err := core.RegisterVector(rt, list)
			must(t, err)
			axpy(t, rt, q.Children()[1], hl, 1) // reads a child of q
			axpy(t, rt, hx, hw, 1)              // reads the parent

			for _, bad := range []*core.Handle{hx, p.Children()[0], q.Children()[1]} {
				err := rt.Submit(&core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{bad}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()})
				if !errors.Is(err, core.ErrInvalidData) {
					t.Fatalf("writing %s under read-only plans: %v, want ErrInvalidData", bad, err)
				}
			}
			if err := p.ReadwriteUpgradeSubmit(); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("upgrade with another plan active: %v, want ErrInvalidData", err)
			}
			must(t, q.UnpartitionSubmit())
			must(t, p.ReadwriteUpgradeSubmit())
			for i, c := range p.Children() {
				cl := scalOnCPU
				if i == 1 {
					cl = scalOnDev
				}
				scal(t, rt, cl, c, float32(i+3)) // x = 6i, then 8i
			}
			must(t, p.UnpartitionReadonlySubmit())
			axpy(t, rt, hx, hw, 1)                 // parent readable again
			axpy(t, rt, p.Children()[1], hh[1], 1) // and the children
			must(t, p.UnpartitionSubmit())
			scal(t, rt, scalOnCPU, hx, 0.5)
			for _, h := range []*core.Handle{hw, hh[0], hh[1], hl} {
				must(t, h.Unregister())
			}
			must(t, p.Clean())
			must(t, q.Clean())
			must(t, hx.Unregister())
			for i := 0; i < n; i++ {
				k := float32(3 + i/50)
				if want := float32(i) * k; x[i] != want {
					t.Fatalf("x[%d] = %v, want %v", i, x[i], want)
				}
				if want := 2*float32(i) + 2*float32(i)*k; whole[i] != want {
					t.Fatalf("whole[%d] = %v, want %v", i, whole[i], want)
				}
			}
			for i := 0; i < 50; i++ {
				if want := float32(2 * i); halves[0][i] != want {
					t.Fatalf("halves[0][%d] = %v, want %v", i, halves[0][i], want)
				}
				if want := float32(2*(i+50)) + float32(8*(i+50)); halves[1][i] != want {
					t.Fatalf("halves[1][%d] = %v, want %v", i, halves[1][i], want)
				}
			}
			for i := range list {
				if want := float32(2 * (i + 10)); list[i] != want {
					t.Fatalf("list[%d] = %v, want %v", i, list[i], want)
				}
			}
		})
	}
}

// Wrong uses of plans are refused with ErrInvalidData (or ErrUnregistered)
// and change nothing: the data comes out right at the end.
func TestPlanErrors(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	const n = 10
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	hx, err := core.RegisterVector(rt, x)
	must(t, err)
	p, q := plan(t, hx, core.VectorBlocks(2, 0)), plan(t, hx, core.VectorBlocks(5, 0))
	write := func(h *core.Handle) error {
		return rt.Submit(&core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()})
	}
	read := func(h *core.Handle) error {
		y := make([]float32, h.Layout().NX)
		hy, err := core.RegisterVector(rt, y)
		must(t, err)
		return rt.Submit(&core.Task{Codelet: axpyOnCPU, Handles: []*core.Handle{h, hy}, Arg: blasarg.AxpyArg{Alpha: 1}.Encode()})
	}
	child := p.Children()[0]
	var nested *core.Plan
	type step struct {
		name string
		do   func() error
		want error // nil: must succeed
	}
	steps := []step{
		{"write a child of an inactive plan", func() error { return write(child) }, core.ErrInvalidData},
		{"unpartition an inactive plan", p.UnpartitionSubmit, core.ErrInvalidData},
		{"upgrade an inactive plan", p.ReadwriteUpgradeSubmit, core.ErrInvalidData},
		{"unregister a child", child.Unregister, core.ErrInvalidData},
		{"unregister a planned parent", hx.Unregister, core.ErrInvalidData},
		{"plan with a plugin filter", func() error { _, err := hx.Plan(core.PluginFilter("rows", 2)); return err }, core.ErrInvalidData},
		{"plan with too many parts", func() error { _, err := hx.Plan(core.VectorBlocks(11, 0)); return err }, core.ErrInvalidData},
		{"submit p", p.Submit, nil},
		{"submit p again", p.Submit, core.ErrInvalidData},
		{"submit q while p is active", q.Submit, core.ErrInvalidData},
		{"read-only submit q while p is active", q.ReadonlySubmit, core.ErrInvalidData},
		{"write the partitioned parent", func() error { return write(hx) }, core.ErrInvalidData},
		{"read the partitioned parent", func() error { return read(hx) }, core.ErrInvalidData},
		{"acquire the partitioned parent", func() error { return hx.Acquire(core.R) }, core.ErrInvalidData},
		{"write a child", func() error { return write(child) }, nil},
		{"plan a child", func() (err error) { nested, err = child.Plan(core.VectorBlocks(2, 0)); return err }, nil},
		{"submit the child's plan", func() error { return nested.Submit() }, nil},
		{"write the partitioned child", func() error { return write(child) }, core.ErrInvalidData},
		{"write a grandchild", func() error { return write(nested.Children()[1]) }, nil},
		{"unpartition p with a partitioned child", p.UnpartitionSubmit, core.ErrInvalidData},
		{"unpartition the child's plan", func() error { return nested.UnpartitionSubmit() }, nil},
		{"clean the child's plan", func() error { return nested.Clean() }, nil},
		{"partition a child synchronously", func() error { _, err := child.Partition(core.VectorBlocks(5, 0)); return err }, nil},
		{"read-only unpartition of p with a partitioned child", p.UnpartitionReadonlySubmit, core.ErrInvalidData},
		{"unpartition the child synchronously", child.Unpartition, nil},
		{"read-only unpartition of p", p.UnpartitionReadonlySubmit, nil},
		{"write a read-only child", func() error { return write(child) }, core.ErrInvalidData},
		{"write the parent of a read-only plan", func() error { return write(hx) }, core.ErrInvalidData},
		{"read the parent", func() error { return read(hx) }, nil},
		{"submit q while p is read-only", q.Submit, core.ErrInvalidData},
		{"read-only submit q too", q.ReadonlySubmit, nil},
		{"unpartition p", p.UnpartitionSubmit, nil},
		{"unpartition q", q.UnpartitionSubmit, nil},
		{"write the parent again", func() error { return write(hx) }, nil},
		{"clean p", p.Clean, nil},
		{"clean p again", p.Clean, core.ErrInvalidData},
		{"submit a cleaned plan", p.Submit, core.ErrInvalidData},
		{"write a child of a cleaned plan", func() error { return write(child) }, core.ErrUnregistered},
		{"clean q", q.Clean, nil},
		{"unregister the parent", hx.Unregister, nil},
	}
	for _, s := range steps {
		err := s.do()
		switch {
		case s.want == nil && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.want != nil && !errors.Is(err, s.want):
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	must(t, rt.WaitForAll())
	for i, v := range x {
		want := float32(2)
		switch {
		case i == 3 || i == 4: // the grandchild too
			want = 8
		case i < 5:
			want = 4
		}
		if v != want {
			t.Fatalf("x[%d] = %v, want %v", i, v, want)
		}
	}
}

// Shutdown with a plan still active read-write writes the children's data,
// on the device too, back into the parent's memory.
func TestPlanShutdown(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := make([]float32, 100)
			for i := range x {
				x[i] = 1
			}
			h, err := core.RegisterVector(rt, x)
			must(t, err)
			p := plan(t, h, core.VectorBlocks(4, 0))
			must(t, p.Submit())
			for _, c := range p.Children() {
				scal(t, rt, scalOnDev, c, 3)
			}
			must(t, rt.Shutdown())
			for i, v := range x {
				if v != 3 {
					t.Fatalf("x[%d] = %v after shutdown, want 3", i, v)
				}
			}
		})
	}
}
