package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
)

// example is the matrix of starpu_bcsr_data_register's documentation.
var example = []float64{0, 1, 0, 0, 2, 3, 0, 0, 4, 5, 8, 9, 6, 7, 10, 11}

// TestPlugin builds iface-bcsr and checks it across the process boundary:
// the conformance kit, Describe, Display, the rows filter, and malformed
// matrices refused by Describe (as RegisterInterface calls it) with the
// first bad entry named.
func TestPlugin(t *testing.T) {
	a := ifacetest.Arena(t, 1<<24)
	p := ifacetest.Start(t, ifacetest.Build(t, ".", t.TempDir(), bcsr.Name), a)
	ctx := context.Background()
	if info, err := p.PluginInfo(ctx); err != nil || info.Kind != base.KindInterface || info.Name != "bcsr" {
		t.Fatalf("PluginInfo = %+v, %v", info, err)
	}
	nz, ci, rp, err := bcsr.FromDense(example, 4, 4, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	m, parts, err := bcsr.Parts(nz, ci, rp, 0, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	other := m
	other.R = 1
	ifacetest.Conformance(t, p, a, m.Encode(), parts, other.Encode())

	d, err := p.Describe(ctx, m.Encode(), nil)
	if err != nil || d.Name != "bcsr" || d.Layout != m.Layout() || d.Size != 12*8+3*4+3*4 {
		t.Fatalf("Describe = %+v, %v", d, err)
	}
	if s, err := p.Display(ctx, m.Encode()); err != nil || s != "bcsr(nrow=2 nnz=3 firstentry=0 r=2 c=2 elemsize=8)" {
		t.Errorf("Display = %q, %v", s, err)
	}
	r := ifacetest.Load(t, a, parts)
	kids, err := p.Partition(ctx, bcsr.RowsFilter, m.Encode(), r.Parts, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := iface.CheckChildren(d.Buffers, kids); err != nil {
		t.Fatal(err)
	}
	if cm, _ := bcsr.Decode(kids[1].Meta); cm != (bcsr.Meta{NNZ: 2, NRow: 1, FirstEntry: 1, R: 2, C: 2, ElemSize: 8}) {
		t.Errorf("block row 1 is %v", cm)
	}

	for _, c := range []struct {
		name   string
		rowptr []uint32
		meta   func(m bcsr.Meta) bcsr.Meta
		want   string
	}{
		{name: "decreasing", rowptr: []uint32{0, 4, 3}, want: "describe: bcsr: rowptr[2] = 3 < rowptr[1] = 4: rowptr must not decrease"},
		{name: "end", rowptr: []uint32{0, 1, 2}, want: "describe: bcsr: rowptr[2] = 2, want firstentry+nnz = 3"},
		{name: "sizes", rowptr: []uint32{0, 3}, want: "describe: rowptr has 8 bytes, the metadata says 12"},
		{name: "block size", meta: func(m bcsr.Meta) bcsr.Meta { m.C = 0; return m }, want: "describe: bcsr metadata: blocks of 2 x 0, want r and c from 1 to 65535"},
		{name: "values", meta: func(m bcsr.Meta) bcsr.Meta { m.R = 3; return m }, want: "describe: nzval has 96 bytes, the metadata says 144"},
	} {
		rp2, mm := rp, m
		if c.rowptr != nil {
			rp2 = c.rowptr
		}
		if c.meta != nil {
			mm = c.meta(m)
		}
		_, bad, _ := bcsr.Parts(nz, ci, rp2, 0, 2, 2)
		_, err := p.Describe(ctx, mm.Encode(), ifacetest.Load(t, a, bad).Parts)
		var re *base.RemoteError
		if err == nil || !errors.As(err, &re) || err.Error() != "plugin iface-bcsr: "+c.want {
			t.Errorf("%s: %v, want %q", c.name, err, "plugin iface-bcsr: "+c.want)
		}
	}
	if _, err := p.Partition(ctx, "canonical", m.Encode(), r.Parts, 3); err == nil || !strings.HasSuffix(err.Error(), `interface bcsr has no filter "canonical" (it has rows)`) {
		t.Errorf("unknown filter: %v", err)
	}
}
