package bcsriface

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
)

// randomDense is a rows x cols row-major matrix of small integers in which
// about half the r x c blocks are zero.
func randomDense(rng *rand.Rand, rows, cols, r, c int) []float64 {
	a := make([]float64, rows*cols)
	for br := 0; br < rows/r; br++ {
		for bc := 0; bc < cols/c; bc++ {
			if rng.Intn(2) == 0 {
				continue
			}
			for i := br * r; i < br*r+r; i++ {
				for j := bc * c; j < bc*c+c; j++ {
					a[i*cols+j] = float64(rng.Intn(9) - 4)
				}
			}
		}
	}
	return a
}

func newBCSR(t testing.TB) (iface.Interface, *shm.Arena) {
	a := ifacetest.Arena(t, 1<<24)
	i, err := ifacesdk.New(Spec(), a)
	if err != nil {
		t.Fatal(err)
	}
	return i, a
}

// product is y = A*x over a kernel's view of the BCSR matrix in region r.
func product(t *testing.T, a *shm.Arena, r ifacetest.Region, d *iface.Description, x []float64) []float64 {
	t.Helper()
	l := d.Layout
	l.Interface = kernel.FirstPluginInterface
	m, err := bcsr.View[float64](&kernel.Buffer{Layout: l, Bytes: a.Bytes(base.Span{Offset: r.Span.Offset, Size: l.Len()})})
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float64, int(m.NRow*m.R))
	for br := range int(m.NRow) {
		lo, hi, err := m.Row(br)
		if err != nil {
			t.Fatal(err)
		}
		for k := lo; k < hi; k++ {
			b := m.Block(k)
			for i := range int(m.R) {
				for j := range int(m.C) {
					y[br*int(m.R)+i] += b[i*int(m.C)+j] * x[int(m.ColInd[k]*m.C)+j]
				}
			}
		}
	}
	return y
}

func TestConformance(t *testing.T) {
	i, a := newBCSR(t)
	nz, ci, rp, err := bcsr.FromDense(randomDense(rand.New(rand.NewSource(1)), 12, 10, 3, 2), 12, 10, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	m, parts, err := bcsr.Parts(nz, ci, rp, 0, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	other := m
	other.R, other.C = 2, 3
	ifacetest.Conformance(t, i, a, m.Encode(), parts, other.Encode())
}

// The rows filter's children, filled by their ranges as the core fills
// them, are valid BCSR matrices whose products are the parent's block rows
// of the dense product; gathering the ranges back restores the parent.
func TestRowsFilter(t *testing.T) {
	i, a := newBCSR(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(2))
	const rows, cols, r, c = 33, 12, 3, 4 // 11 block rows
	dense := randomDense(rng, rows, cols, r, c)
	x := make([]float64, cols)
	for k := range x {
		x[k] = float64(rng.Intn(7) - 3)
	}
	want := make([]float64, rows)
	for i := range want {
		for j := range x {
			want[i] += dense[i*cols+j] * x[j]
		}
	}
	nz, ci, rp, _ := bcsr.FromDense(dense, rows, cols, r, c)
	for _, fe := range []uint32{0, 1} {
		frp := make([]uint32, len(rp))
		for k, v := range rp {
			frp[k] = v + fe
		}
		m, parts, _ := bcsr.Parts(nz, ci, frp, fe, r, c)
		pr := ifacetest.Load(t, a, parts)
		pd, err := i.Describe(ctx, m.Encode(), pr.Parts)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 4, 11} {
			kids, err := i.Partition(ctx, bcsr.RowsFilter, m.Encode(), pr.Parts, n)
			if err != nil || len(kids) != n {
				t.Fatalf("firstentry %d, %d blocks: %d children, %v", fe, n, len(kids), err)
			}
			back := ifacetest.Place(t, a, pd.Buffers)
			for k, kid := range kids {
				cr := ifacetest.Place(t, a, kid.Desc.Buffers)
				for _, rg := range kid.Ranges {
					copy(a.Bytes(cr.Parts[rg.ChildPart])[rg.ChildOffset:], a.Bytes(pr.Parts[rg.Part])[rg.Offset:rg.Offset+rg.Len])
				}
				if _, err := i.Describe(ctx, kid.Meta, cr.Parts); err != nil {
					t.Fatalf("child %d of %d: %v", k, n, err)
				}
				cm, _ := bcsr.Decode(kid.Meta)
				lo, hi := bcsr.RowBlock(rows/r, n, k)
				if w := (bcsr.Meta{NNZ: frp[hi] - frp[lo], NRow: uint32(hi - lo), FirstEntry: frp[lo], R: r, C: c, ElemSize: 8}); cm != w {
					t.Fatalf("child %d of %d is %v, want %v", k, n, cm, w)
				}
				for row, v := range product(t, a, cr, &kid.Desc, x) {
					if v != want[lo*r+row] {
						t.Fatalf("child %d of %d: y[%d] = %g, want %g", k, n, lo*r+row, v, want[lo*r+row])
					}
				}
				for _, rg := range kid.Ranges {
					copy(a.Bytes(back.Parts[rg.Part])[rg.Offset:], a.Bytes(cr.Parts[rg.ChildPart])[rg.ChildOffset:rg.ChildOffset+rg.Len])
				}
			}
			for p := range parts {
				if !bytes.Equal(a.Bytes(back.Parts[p]), parts[p]) {
					t.Fatalf("%d blocks: %s differs after gathering back", n, bcsr.PartNames[p])
				}
			}
		}
		if _, err := i.Partition(ctx, bcsr.RowsFilter, m.Encode(), pr.Parts, 12); err == nil || !strings.Contains(err.Error(), "cannot split 11 rows into 12 blocks") {
			t.Fatalf("12 blocks: %v", err)
		}
		// A kernel with write access may have broken rowptr since
		// registration: the filter refuses it rather than copy outside the
		// parts.
		binary.LittleEndian.PutUint32(a.Bytes(pr.Parts[bcsr.PartRowPtr])[4*5:], 1<<30)
		if _, err := i.Partition(ctx, bcsr.RowsFilter, m.Encode(), pr.Parts, 11); err == nil || !strings.Contains(err.Error(), "rowptr[5] = 1073741824 outside") {
			t.Fatalf("bad rowptr: %v", err)
		}
	}
}

func TestFootprintCompareDisplay(t *testing.T) {
	i, _ := newBCSR(t)
	ctx := context.Background()
	ref := bcsr.Meta{NNZ: 10, NRow: 4, R: 2, C: 3, ElemSize: 8}
	moved := ref
	moved.FirstEntry = 7 // a block-row range elsewhere in the same matrix
	describe := func(m bcsr.Meta) *iface.Description {
		d, err := i.Describe(ctx, m.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	db := describe(ref)
	if describe(moved).Footprint != db.Footprint {
		t.Errorf("firstentry changes the footprint")
	}
	if eq, err := i.Compare(ctx, ref.Encode(), moved.Encode()); err != nil || !eq {
		t.Errorf("Compare(ref, moved) = %v, %v", eq, err)
	}
	for _, edit := range []func(m *bcsr.Meta){
		func(m *bcsr.Meta) { m.NNZ++ },
		func(m *bcsr.Meta) { m.NRow++ },
		func(m *bcsr.Meta) { m.R, m.C = m.C, m.R }, // same nzval size, other shape
		func(m *bcsr.Meta) { m.ElemSize = 4 },
	} {
		o := ref
		edit(&o)
		if describe(o).Footprint == db.Footprint {
			t.Errorf("%v has the footprint of %v", o, ref)
		}
		if eq, err := i.Compare(ctx, ref.Encode(), o.Encode()); err != nil || eq {
			t.Errorf("Compare(%v, %v) = %v, %v", ref, o, eq, err)
		}
	}
	if s, err := i.Display(ctx, moved.Encode()); err != nil || s != "bcsr(nrow=4 nnz=10 firstentry=7 r=2 c=3 elemsize=8)" {
		t.Errorf("Display = %q, %v", s, err)
	}
}
