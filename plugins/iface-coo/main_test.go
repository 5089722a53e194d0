package main

import (
	"context"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
)

// TestPlugin builds iface-coo and checks it across the process boundary:
// the SDK's methods on a valid matrix, and a malformed one refused by
// Describe with the bad entry named.
func TestPlugin(t *testing.T) {
	a := ifacetest.Arena(t, 1<<24)
	p := ifacetest.Start(t, ifacetest.Build(t, ".", t.TempDir(), coo.Name), a)
	m, parts, err := coo.Parts([]uint32{0, 2, 2, 1}, []uint32{1, 0, 2, 1}, []float64{1, 2, 3, 4}, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	other := m
	other.NX = 4
	ifacetest.Conformance(t, p, a, m.Encode(), parts, other.Encode())

	ctx := context.Background()
	if s, err := p.Display(ctx, m.Encode()); err != nil || s != "coo(3x3 nnz=4 elemsize=8)" {
		t.Errorf("Display = %q, %v", s, err)
	}
	d, err := p.Describe(ctx, m.Encode(), nil)
	if err != nil || d.Layout != m.Layout() || d.Size != 16+16+32 {
		t.Errorf("Describe = %+v, %v", d, err)
	}
	_, bad, _ := coo.Parts([]uint32{0, 2, 3, 1}, []uint32{1, 0, 2, 1}, []float64{1, 2, 3, 4}, 3, 3)
	r := ifacetest.Load(t, a, bad)
	if _, err := p.Describe(ctx, m.Encode(), r.Parts); err == nil || err.Error() != "plugin iface-coo: describe: coo: rows[2] = 3, beyond the 3 rows" {
		t.Errorf("malformed COO: %v", err)
	}
	if _, err := p.Partition(ctx, "rows", m.Encode(), r.Parts, 2); err == nil || !strings.HasSuffix(err.Error(), `interface coo has no filter "rows" (it has entries)`) {
		t.Errorf("Partition rows: %v", err)
	}
	good := ifacetest.Load(t, a, parts)
	kids, err := p.Partition(ctx, coo.EntriesFilter, m.Encode(), good.Parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := iface.CheckChildren(d.Buffers, kids); err != nil {
		t.Fatal(err)
	}
	// Entries 0-1, 2 and 3, each child a 3x3 matrix.
	for i, want := range []uint32{2, 1, 1} {
		if cm, err := coo.Decode(kids[i].Meta); err != nil || cm != (coo.Meta{NNZ: want, NX: 3, NY: 3, ElemSize: 8}) {
			t.Errorf("child %d is %v, %v", i, cm, err)
		}
	}
	if _, err := p.Partition(ctx, coo.EntriesFilter, m.Encode(), good.Parts, 5); err == nil || !strings.HasSuffix(err.Error(), "cannot split 4 entries into 5 parts") {
		t.Errorf("Partition into 5: %v", err)
	}
}
