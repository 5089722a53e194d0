package core_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// laplacian1D is the n x n tridiagonal matrix [-1 2 -1] in CSR.
func laplacian1D(n int) ([]float64, []uint32, []uint32) {
	var nz []float64
	var ci []uint32
	rp := []uint32{0}
	for r := 0; r < n; r++ {
		for c := r - 1; c <= r+1; c++ {
			if c >= 0 && c < n {
				v := -1.0
				if c == r {
					v = 2
				}
				nz, ci = append(nz, v*float64(r+1)), append(ci, uint32(c))
			}
		}
		rp = append(rp, uint32(len(nz)))
	}
	return nz, ci, rp
}

// A CSR matrix from the iface-csr plugin, split by its rows filter: each
// row block's product is computed by a task on a real driver process, the
// blocks are gathered back at Unpartition and the matrix comes back intact
// at Unregister.
func TestPluginPartitionCSR(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	const n, nb = 37, 4
	nz, ci, rp := laplacian1D(n)
	want := [][]any{{append([]float64(nil), nz...), append([]uint32(nil), ci...), append([]uint32(nil), rp...)}}
	m, parts, err := csr.Parts(nz, ci, rp, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.RegisterInterface(csr.Name, m.Encode(), parts)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i%5) - 1
	}
	hx, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := h.Partition(core.PluginFilter(csr.RowsFilter, nb))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != nb || blocks[2].Parent() != h || blocks[2].Interface() != "csr" {
		t.Fatalf("%d blocks, parent %v, interface %q", len(blocks), blocks[2].Parent(), blocks[2].Interface())
	}
	lo1, hi1 := csr.RowBlock(n, nb, 1)
	wantShow := csr.Meta{NNZ: rp[hi1] - rp[lo1], NRow: uint32(hi1 - lo1), FirstEntry: rp[lo1], ElemSize: 8}.String()
	if s, err := blocks[1].Display(); err != nil || s != wantShow {
		t.Fatalf("block 1 is %q, %v; want %q", s, err, wantShow)
	}
	spmv := &core.Codelet{Name: "spmv", Kernels: map[driver.Arch]string{driver.CPU: csr.SpmvF64}, Modes: []core.Mode{core.R, core.R, core.W}}
	y := make([]float64, n)
	for i, b := range blocks {
		lo, hi := csr.RowBlock(n, nb, i)
		hy, err := core.RegisterVector(rt, y[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Submit(&core.Task{Codelet: spmv, Handles: []*core.Handle{b, hx, hy}}); err != nil {
			t.Fatal(err)
		}
		if err := hy.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < n; r++ {
		var s float64
		for k := rp[r]; k < rp[r+1]; k++ {
			s += nz[k] * x[ci[k]]
		}
		if y[r] != s {
			t.Fatalf("y[%d] = %g, want %g", r, y[r], s)
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
		{h, core.PluginFilter("columns", 2), `interface csr has no filter "columns" (it has rows)`},
		{h, core.PluginFilter(csr.RowsFilter, n+1), "cannot split 37 rows into 38 blocks"},
		{h, core.PluginFilter(csr.RowsFilter, 0), "0 parts"},
		{hx, core.PluginFilter(csr.RowsFilter, 2), "is a data interface plugin's"},
		{h, core.VectorBlocks(2, 0), "is for built-in interfaces"},
	} {
		if _, err := c.h.Partition(c.f); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Partition(%v): %v, want ErrInvalidData and %q", c.f, err, c.want)
		}
	}
	// A failed partition leaves the matrix usable.
	if _, err := h.Partition(core.PluginFilter(csr.RowsFilter, 3)); err != nil {
		t.Fatal(err)
	}
	if err := h.Unpartition(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := [][]any{{nz, ci, rp}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("matrix changed through partitioning: %v, want %v", got, want)
	}
}
