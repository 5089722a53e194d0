package main

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
	"github.com/starpu-go/starpu/plugins/internal/rttest"
)

// TestRuntimeSpmv registers an unordered COO matrix (with a repeated
// position, which COO sums) through the runtime with the real plugin,
// splits it with the entries filter and lets one spmv_add_coo_f64 task per
// child add its part of A*x into y in Redux mode, on a real CPU driver; y
// is checked against the dense product. After Unpartition one task over
// the whole matrix adds A*x again, in RW mode. Bad entries and filter
// requests are refused with what was wrong.
func TestRuntimeSpmv(t *testing.T) {
	rt := rttest.Start(t, "iface-coo")
	rng := rand.New(rand.NewSource(5))
	const ny, nx, nnz, nparts = 23, 17, 120, 5
	rows, cols, vals := make([]uint32, nnz), make([]uint32, nnz), make([]float64, nnz)
	dense := make([]float64, ny*nx)
	for k := range vals {
		rows[k], cols[k], vals[k] = uint32(rng.Intn(ny)), uint32(rng.Intn(nx)), float64(rng.Intn(9)-4)
		if k == nnz-1 {
			rows[k], cols[k] = rows[0], cols[0]
		}
		dense[int(rows[k])*nx+int(cols[k])] += vals[k]
	}
	x := make([]float64, nx)
	for k := range x {
		x[k] = float64(rng.Intn(7) - 3) // small integers: the sums are exact
	}
	want := make([]float64, ny)
	for i := range want {
		for j := range x {
			want[i] += dense[i*nx+j] * x[j]
		}
	}
	m, parts, err := coo.Parts(rows, cols, vals, nx, ny)
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.RegisterInterface(coo.Name, m.Encode(), parts)
	if err != nil {
		t.Fatal(err)
	}
	hx, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float64, ny)
	hy, err := core.RegisterVector(rt, y)
	if err != nil {
		t.Fatal(err)
	}
	add := &core.Codelet{Name: "add", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF64}, Modes: []core.Mode{core.RW, core.R}}
	zero := &core.Codelet{Name: "zero", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.W}}
	if err := hy.SetReductionMethods(add, zero); err != nil {
		t.Fatal(err)
	}
	children, err := h.Partition(core.PluginFilter(coo.EntriesFilter, nparts))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := children[4].Display(); err != nil || s != "coo(23x17 nnz=24 elemsize=8)" {
		t.Fatalf("child 4 is %q, %v", s, err)
	}
	contribute := &core.Codelet{Name: "spmv_add_coo", Kernels: map[driver.Arch]string{driver.CPU: coo.SpmvAddF64}, Modes: []core.Mode{core.R, core.R, core.Redux}}
	for _, c := range children {
		if err := rt.Submit(&core.Task{Codelet: contribute, Handles: []*core.Handle{c, hx, hy}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Unpartition(); err != nil {
		t.Fatal(err)
	}
	whole := &core.Codelet{Name: "spmv_add_coo", Kernels: map[driver.Arch]string{driver.CPU: coo.SpmvAddF64}, Modes: []core.Mode{core.R, core.R, core.RW}}
	if err := rt.Submit(&core.Task{Codelet: whole, Handles: []*core.Handle{h, hx, hy}}); err != nil {
		t.Fatal(err)
	}
	if err := hy.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if y[i] != 2*want[i] {
			t.Fatalf("y[%d] = %g, want twice %g", i, y[i], want[i])
		}
	}
	for _, c := range []struct {
		f    core.Filter
		want string
	}{
		{core.PluginFilter("rows", 2), `interface coo has no filter "rows" (it has entries)`},
		{core.PluginFilter(coo.EntriesFilter, nnz+1), "cannot split 120 entries into 121 parts"},
	} {
		if _, err := h.Partition(c.f); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Partition(%v): %v, want ErrInvalidData and %q", c.f, err, c.want)
		}
	}
	// x of the wrong length fails the task with the shapes named.
	short, _ := core.RegisterVector(rt, x[:nx-1])
	hy, _ = core.RegisterVector(rt, y)
	err = rt.Submit(&core.Task{Codelet: whole, Handles: []*core.Handle{h, short, hy}})
	if err == nil {
		err = hy.Unregister()
	}
	if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "spmv_add_coo_f64: x has 16 elements and y 23 but A is 23x17") {
		t.Errorf("short x: %v", err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	cols[3] = nx
	if _, err := rt.RegisterInterface(coo.Name, m.Encode(), parts); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "coo: cols[3] = 17, beyond the 17 columns") {
		t.Errorf("column out of range: %v", err)
	}
}
