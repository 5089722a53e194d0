package main

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/internal/rttest"
)

// TestRuntimeSpmv registers a BCSR matrix through the runtime with the
// real plugin, splits it with the rows filter, computes each block row
// range's product with a spmv_bcsr_f64 task on a real CPU driver, and
// checks y against the dense product; the matrix comes back intact at
// Unregister. Malformed matrices and filter requests are refused with
// ErrInvalidData and what was wrong.
func TestRuntimeSpmv(t *testing.T) {
	rt := rttest.Start(t, "iface-bcsr")
	rng := rand.New(rand.NewSource(7))
	const rows, cols, r, c, nb = 42, 20, 3, 4, 4 // 14 block rows, 5 block columns
	dense := make([]float64, rows*cols)
	for k := range dense {
		if rng.Intn(3) == 0 { // small integers: the sums are exact
			dense[k] = float64(rng.Intn(9) - 4)
		}
	}
	x := make([]float64, cols)
	for k := range x {
		x[k] = float64(rng.Intn(7) - 3)
	}
	nz, ci, rp, err := bcsr.FromDense(dense, rows, cols, r, c)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]any{{append([]float64(nil), nz...), append([]uint32(nil), ci...), append([]uint32(nil), rp...)}}
	m, parts, err := bcsr.Parts(nz, ci, rp, 0, r, c)
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.RegisterInterface(bcsr.Name, m.Encode(), parts)
	if err != nil {
		t.Fatal(err)
	}
	hx, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := h.Partition(core.PluginFilter(bcsr.RowsFilter, nb))
	if err != nil {
		t.Fatal(err)
	}
	lo1, hi1 := bcsr.RowBlock(rows/r, nb, 1)
	wantShow := bcsr.Meta{NNZ: rp[hi1] - rp[lo1], NRow: uint32(hi1 - lo1), FirstEntry: rp[lo1], R: r, C: c, ElemSize: 8}.String()
	if s, err := blocks[1].Display(); err != nil || s != wantShow {
		t.Fatalf("block 1 is %q, %v; want %q", s, err, wantShow)
	}
	spmv := &core.Codelet{Name: "spmv_bcsr", Kernels: map[driver.Arch]string{driver.CPU: bcsr.SpmvF64}, Modes: []core.Mode{core.R, core.R, core.W}}
	y := make([]float64, rows)
	var ys []*core.Handle
	for i, b := range blocks {
		lo, hi := bcsr.RowBlock(rows/r, nb, i)
		hy, err := core.RegisterVector(rt, y[lo*r:hi*r])
		if err != nil {
			t.Fatal(err)
		}
		ys = append(ys, hy)
		if err := rt.Submit(&core.Task{Codelet: spmv, Handles: []*core.Handle{b, hx, hy}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, hy := range ys {
		if err := hy.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range y {
		var s float64
		for j := range x {
			s += dense[i*cols+j] * x[j]
		}
		if y[i] != s {
			t.Fatalf("y[%d] = %g, want %g", i, y[i], s)
		}
	}
	if err := h.Unpartition(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h    *core.Handle
		f    core.Filter
		want string
	}{
		{h, core.PluginFilter("canonical", 2), `interface bcsr has no filter "canonical" (it has rows)`},
		{h, core.PluginFilter(bcsr.RowsFilter, rows/r+1), "cannot split 14 rows into 15 blocks"},
		{hx, core.PluginFilter(bcsr.RowsFilter, 2), "is a data interface plugin's"},
	} {
		if _, err := c.h.Partition(c.f); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Partition(%v): %v, want ErrInvalidData and %q", c.f, err, c.want)
		}
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := [][]any{{nz, ci, rp}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("matrix changed through partitioning: %v, want %v", got, want)
	}

	// A block column past the matrix registers (BCSR has no column
	// count), but the kernel refuses it instead of reading past x.
	ci[0] = cols / c
	if h, err = rt.RegisterInterface(bcsr.Name, m.Encode(), parts); err != nil {
		t.Fatal(err)
	}
	hy, _ := core.RegisterVector(rt, y)
	err = rt.Submit(&core.Task{Codelet: spmv, Handles: []*core.Handle{h, hx, hy}})
	if err == nil {
		err = hy.Unregister()
	}
	if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "spmv_bcsr_f64: colind[0] = 5, block columns of 4, but x has 20 elements") {
		t.Errorf("task over a bad block column: %v", err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	rp[1], rp[2] = rp[len(rp)-1], 0
	if _, err := rt.RegisterInterface(bcsr.Name, m.Encode(), parts); !errors.Is(err, core.ErrInvalidData) ||
		!strings.Contains(err.Error(), fmt.Sprintf("bcsr: rowptr[2] = 0 < rowptr[1] = %d: rowptr must not decrease", m.NNZ)) {
		t.Errorf("decreasing rowptr: %v", err)
	}
}
