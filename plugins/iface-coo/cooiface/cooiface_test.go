package cooiface

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
)

// TestConformance runs the conformance kit on Spec in process; the
// plugin's main_test.go runs it across the process boundary.
func TestConformance(t *testing.T) {
	a := ifacetest.Arena(t, 1<<24)
	i, err := ifacesdk.New(Spec(), a)
	if err != nil {
		t.Fatal(err)
	}
	m, parts, err := coo.Parts([]uint32{0, 2, 2, 1}, []uint32{1, 0, 2, 1}, []float64{1, 2, 3, 4}, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	other := m
	other.NX = 4
	ifacetest.Conformance(t, i, a, m.Encode(), parts, other.Encode())
}

// The entries filter's children, filled by their ranges as the core fills
// them, are valid matrices of the parent's size holding consecutive runs
// of its entries; gathering the ranges back restores the parent.
func TestEntriesFilter(t *testing.T) {
	a := ifacetest.Arena(t, 1<<24)
	i, err := ifacesdk.New(Spec(), a)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rows := []uint32{4, 0, 2, 2, 1, 3, 0}
	cols := []uint32{1, 0, 2, 1, 4, 4, 3}
	vals := []float32{1, 2, 3, 4, 5, 6, 7}
	m, parts, err := coo.Parts(rows, cols, vals, 5, 5)
	if err != nil {
		t.Fatal(err)
	}
	pr := ifacetest.Load(t, a, parts)
	for _, c := range []struct {
		nparts int
		nnz    []int
	}{
		{1, []int{7}},
		{3, []int{3, 2, 2}},
		{7, []int{1, 1, 1, 1, 1, 1, 1}},
	} {
		kids, err := i.Partition(ctx, coo.EntriesFilter, m.Encode(), pr.Parts, c.nparts)
		if err != nil {
			t.Fatalf("%d parts: %v", c.nparts, err)
		}
		back := ifacetest.Place(t, a, m.PartSizes())
		first := 0
		for k, kid := range kids {
			cr := ifacetest.Place(t, a, kid.Desc.Buffers)
			for _, rg := range kid.Ranges {
				copy(a.Bytes(cr.Parts[rg.ChildPart])[rg.ChildOffset:], a.Bytes(pr.Parts[rg.Part])[rg.Offset:rg.Offset+rg.Len])
			}
			if _, err := i.Describe(ctx, kid.Meta, cr.Parts); err != nil {
				t.Fatalf("%d parts, child %d: %v", c.nparts, k, err)
			}
			n := c.nnz[k]
			want, wparts, _ := coo.Parts(rows[first:first+n], cols[first:first+n], vals[first:first+n], 5, 5)
			if cm, _ := coo.Decode(kid.Meta); cm != want {
				t.Fatalf("%d parts, child %d is %v, want %v", c.nparts, k, cm, want)
			}
			for p := range wparts {
				if !bytes.Equal(a.Bytes(cr.Parts[p]), wparts[p]) {
					t.Fatalf("%d parts, child %d: %s differs", c.nparts, k, coo.PartNames[p])
				}
			}
			first += n
			for _, rg := range kid.Ranges {
				copy(a.Bytes(back.Parts[rg.Part])[rg.Offset:], a.Bytes(cr.Parts[rg.ChildPart])[rg.ChildOffset:rg.ChildOffset+rg.Len])
			}
		}
		for p := range parts {
			if !bytes.Equal(a.Bytes(back.Parts[p]), parts[p]) {
				t.Fatalf("%d parts: %s differs after gathering back", c.nparts, coo.PartNames[p])
			}
		}
	}
	if _, err := i.Partition(ctx, coo.EntriesFilter, m.Encode(), pr.Parts, 8); err == nil || !strings.Contains(err.Error(), "cannot split 7 entries into 8 parts") {
		t.Fatalf("8 parts: %v", err)
	}
}
