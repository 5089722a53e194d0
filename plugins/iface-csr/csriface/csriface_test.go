package csriface

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
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// random returns a random nrow x ncol CSR matrix with rows of 0 to 5
// entries, rowptr offset by fe.
func random(rng *rand.Rand, nrow, ncol int, fe uint32) ([]float64, []uint32, []uint32) {
	var nz []float64
	var ci []uint32
	rp := []uint32{fe}
	for r := 0; r < nrow; r++ {
		for k := rng.Intn(6); k > 0; k-- {
			nz = append(nz, rng.Float64()-0.5)
			ci = append(ci, uint32(rng.Intn(ncol)))
		}
		rp = append(rp, fe+uint32(len(nz)))
	}
	return nz, ci, rp
}

func newCSR(t testing.TB) (iface.Interface, *shm.Arena) {
	a := ifacetest.Arena(t, 1<<26)
	i, err := ifacesdk.New(Spec(), a)
	if err != nil {
		t.Fatal(err)
	}
	return i, a
}

func spmv(m csr.Matrix[float64], x []float64) ([]float64, error) {
	y := make([]float64, m.NRow)
	for r := range y {
		lo, hi, err := m.Row(r)
		if err != nil {
			return nil, err
		}
		for k := lo; k < hi; k++ {
			y[r] += m.NZVal[k] * x[m.ColInd[k]]
		}
	}
	return y, nil
}

func view(t *testing.T, a *shm.Arena, r ifacetest.Region, d *iface.Description) csr.Matrix[float64] {
	t.Helper()
	l := d.Layout
	l.Interface = kernel.FirstPluginInterface
	v, err := csr.View[float64](&kernel.Buffer{Layout: l, Bytes: a.Bytes(base.Span{Offset: r.Span.Offset, Size: l.Len()})})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The rows filter's children, filled by their ranges as the core fills
// them, are valid CSR matrices whose products are the parent's row blocks;
// gathering the ranges back restores the parent.
func TestRowsFilter(t *testing.T) {
	i, a := newCSR(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	for _, fe := range []uint32{0, 1} {
		nz, ci, rp := random(rng, 37, 23, fe)
		m, parts, _ := csr.Parts(nz, ci, rp, fe)
		meta := m.Encode()
		pr := ifacetest.Load(t, a, parts)
		pd, err := i.Describe(ctx, meta, pr.Parts)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, 23)
		for k := range x {
			x[k] = rng.Float64()
		}
		want, err := spmv(view(t, a, pr, pd), x)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 5, 37} {
			kids, err := i.Partition(ctx, csr.RowsFilter, meta, pr.Parts, n)
			if err != nil {
				t.Fatalf("fe %d, %d blocks: %v", fe, n, err)
			}
			if len(kids) != n {
				t.Fatalf("%d children, want %d", len(kids), n)
			}
			var regions []ifacetest.Region
			for c, kid := range kids {
				cr := ifacetest.Place(t, a, kid.Desc.Buffers)
				for _, rg := range kid.Ranges {
					copy(a.Bytes(cr.Parts[rg.ChildPart])[rg.ChildOffset:rg.ChildOffset+rg.Len],
						a.Bytes(pr.Parts[rg.Part])[rg.Offset:rg.Offset+rg.Len])
				}
				regions = append(regions, cr)
				if _, err := i.Describe(ctx, kid.Meta, cr.Parts); err != nil {
					t.Fatalf("child %d of %d: %v", c, n, err)
				}
				cm, _ := csr.Decode(kid.Meta)
				lo, hi := csr.RowBlock(37, n, c)
				if cm.NRow != uint32(hi-lo) || cm.FirstEntry != rp[lo] || cm.NNZ != rp[hi]-rp[lo] {
					t.Fatalf("child %d of %d is %v, want rows %d-%d", c, n, cm, lo, hi)
				}
				got, err := spmv(view(t, a, cr, &kid.Desc), x)
				if err != nil {
					t.Fatal(err)
				}
				for r := range got {
					if got[r] != want[lo+r] {
						t.Fatalf("child %d of %d: y[%d] = %g, want %g", c, n, lo+r, got[r], want[lo+r])
					}
				}
			}
			back := ifacetest.Place(t, a, pd.Buffers)
			for c, kid := range kids {
				for _, rg := range kid.Ranges {
					copy(a.Bytes(back.Parts[rg.Part])[rg.Offset:rg.Offset+rg.Len],
						a.Bytes(regions[c].Parts[rg.ChildPart])[rg.ChildOffset:rg.ChildOffset+rg.Len])
				}
			}
			for p := range parts {
				if !bytes.Equal(a.Bytes(back.Parts[p]), parts[p]) {
					t.Fatalf("%d blocks: %s differs after gathering back", n, csr.PartNames[p])
				}
			}
		}
		if _, err := i.Partition(ctx, csr.RowsFilter, meta, pr.Parts, 38); err == nil || !strings.Contains(err.Error(), "cannot split 37 rows into 38 blocks") {
			t.Fatalf("38 blocks: %v", err)
		}
		// A kernel with write access may have broken rowptr since registration.
		binary.LittleEndian.PutUint32(a.Bytes(pr.Parts[csr.PartRowPtr])[4*10:], 1<<30)
		if _, err := i.Partition(ctx, csr.RowsFilter, meta, pr.Parts, 37); err == nil || !strings.Contains(err.Error(), "rowptr[10] = 1073741824 outside") {
			t.Fatalf("bad rowptr: %v", err)
		}
	}
}

func TestFootprintCompareDisplay(t *testing.T) {
	i, _ := newCSR(t)
	ctx := context.Background()
	a := csr.Meta{NNZ: 10, NRow: 4, FirstEntry: 0, ElemSize: 8}
	b := a
	b.FirstEntry = 7 // a row block elsewhere in the same matrix
	c := a
	c.NNZ = 11
	da, _ := i.Describe(ctx, a.Encode(), nil)
	db, _ := i.Describe(ctx, b.Encode(), nil)
	dc, _ := i.Describe(ctx, c.Encode(), nil)
	if da.Footprint != db.Footprint || da.Footprint == dc.Footprint || da.AllocFootprint != db.AllocFootprint {
		t.Errorf("footprints %x %x %x (alloc %x %x)", da.Footprint, db.Footprint, dc.Footprint, da.AllocFootprint, db.AllocFootprint)
	}
	if eq, err := i.Compare(ctx, a.Encode(), b.Encode()); err != nil || !eq {
		t.Errorf("Compare(a, b) = %v, %v", eq, err)
	}
	if eq, err := i.Compare(ctx, a.Encode(), c.Encode()); err != nil || eq {
		t.Errorf("Compare(a, c) = %v, %v", eq, err)
	}
	if s, err := i.Display(ctx, b.Encode()); err != nil || s != "csr(nrow=4 nnz=10 firstentry=7 elemsize=8)" {
		t.Errorf("Display = %q, %v", s, err)
	}
	want := kernel.Layout{ElemSize: 8, NX: 10, NY: 4, NZ: 7, LD: 2*iface.PartAlign + 20, LDZ: csr.LayoutTag}
	if db.Layout != want || db.Size != 80+40+20 {
		t.Errorf("layout %+v size %d, want %+v size 140", db.Layout, db.Size, want)
	}
}

// FuzzDescribe feeds arbitrary metadata and contents to the registration
// path: Describe never panics, accepts only matrices that hold StarPU's CSR
// invariants, and the rows filter on an accepted matrix never panics and
// gives children the core can copy.
func FuzzDescribe(f *testing.F) {
	rng := rand.New(rand.NewSource(2))
	nz, ci, rp := random(rng, 6, 5, 0)
	m, parts, _ := csr.Parts(nz, ci, rp, 0)
	f.Add(m.Encode(), bytes.Join(parts, nil), uint8(3))
	m1, parts1, _ := csr.Parts([]float32{1, 2}, []uint32{0, 1}, []uint32{1, 2, 3}, 1)
	f.Add(m1.Encode(), bytes.Join(parts1, nil), uint8(2))
	f.Add(csr.Meta{NNZ: 2, NRow: 2, ElemSize: 4}.Encode(), []byte{0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0}, uint8(1))
	f.Add([]byte("short"), []byte{}, uint8(0))
	f.Add(csr.Meta{NNZ: 0xffffffff, NRow: 0xfffffffe, ElemSize: 0xffff}.Encode(), []byte{1}, uint8(255))
	a, err := shm.Create(1<<26, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })
	i, err := ifacesdk.New(Spec(), a)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, meta, data []byte, nparts uint8) {
		ctx := context.Background()
		d, err := i.Describe(ctx, meta, nil)
		if err != nil {
			return
		}
		if err := d.Check(); err != nil {
			t.Fatalf("accepted metadata %x gives a bad description: %v", meta, err)
		}
		if d.Layout.LD > 1<<20 {
			return
		}
		// Parts of the described sizes, filled from data, or of the data's
		// own length to try size mismatches.
		sizes := append([]uint64(nil), d.Buffers...)
		if nparts%7 == 6 {
			sizes[nparts%3] = uint64(len(data))
		}
		r := ifacetest.Place(t, a, sizes)
		for p := range r.Parts {
			b := a.Bytes(r.Parts[p])
			for k := range b {
				if len(data) > 0 {
					b[k] = data[(k+p*7)%len(data)]
				}
			}
		}
		if _, err := i.Describe(ctx, meta, r.Parts); err != nil {
			return
		}
		mm, _ := csr.Decode(meta)
		pb := make([][]byte, len(r.Parts))
		for p := range pb {
			pb[p] = a.Bytes(r.Parts[p])
		}
		if err := csr.Validate(mm, pb[0], pb[1], pb[2], 0); err != nil {
			t.Fatalf("Describe accepted an invalid matrix %v: %v", mm, err)
		}
		kids, err := i.Partition(ctx, csr.RowsFilter, meta, r.Parts, int(nparts))
		if err != nil {
			return
		}
		if err := iface.CheckChildren(d.Buffers, kids); err != nil {
			t.Fatal(err)
		}
	})
}
