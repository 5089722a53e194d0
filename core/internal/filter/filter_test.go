package core

import (
	"errors"
	"reflect"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

func TestFilters(t *testing.T) {
	vec := kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 10}
	mat := kernel.Layout{Interface: kernel.Matrix, ElemSize: 8, NX: 5, NY: 4, LD: 6}
	blk := kernel.Layout{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 3, NZ: 4, LD: 2, LDZ: 6}
	with := func(l kernel.Layout, f func(*kernel.Layout)) kernel.Layout { f(&l); return l }
	for _, tc := range []struct {
		name    string
		f       Filter
		l       kernel.Layout
		nx      []uint64 // the varying dimension of each child
		offsets []uint64
	}{
		{"vector 3 blocks", VectorBlocks(3, 0), vec, []uint64{4, 3, 3}, []uint64{0, 16, 28}},
		{"vector shadow", VectorBlocks(2, 1), vec, []uint64{6, 6}, []uint64{0, 16}},
		{"vector list", VectorList(2, 5), vec, []uint64{2, 5}, []uint64{0, 8}},
		{"matrix blocks", MatrixBlocks(2, 0), mat, []uint64{3, 2}, []uint64{0, 24}},
		{"matrix vertical", MatrixVerticalBlocks(3, 0), mat, []uint64{2, 1, 1}, []uint64{0, 96, 144}},
		{"block depth", BlockDepthBlocks(2, 0), blk, []uint64{2, 2}, []uint64{0, 48}},
		{"block vertical", BlockVerticalBlocks(3, 0), blk, []uint64{1, 1, 1}, []uint64{0, 8, 16}},
		{"block x", BlockBlocks(2, 0), blk, []uint64{1, 1}, []uint64{0, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := tc.f.split(tc.l)
			if err != nil {
				t.Fatal(err)
			}
			var nx, offs []uint64
			for _, c := range cs {
				switch {
				case tc.f.name == "matrix vertical blocks":
					nx = append(nx, c.layout.NY)
				case tc.f.name == "BlockDepthBlocks":
					nx = append(nx, c.layout.NZ)
				case tc.f.name == "BlockVerticalBlocks":
					nx = append(nx, c.layout.NY)
				default:
					nx = append(nx, c.layout.NX)
				}
				offs = append(offs, c.offset)
				if c.layout.LD != tc.l.LD || c.layout.ElemSize != tc.l.ElemSize {
					t.Errorf("child layout %+v lost the parent's ld or element size", c.layout)
				}
			}
			if !reflect.DeepEqual(nx, tc.nx) || !reflect.DeepEqual(offs, tc.offsets) {
				t.Fatalf("sizes %v offsets %v, want %v %v", nx, offs, tc.nx, tc.offsets)
			}
		})
	}
	tiles, err := MatrixTiles(2, 2).split(mat)
	if err != nil {
		t.Fatal(err)
	}
	want := []childView{
		{with(mat, func(l *kernel.Layout) { l.NX, l.NY = 3, 2 }), 0},
		{with(mat, func(l *kernel.Layout) { l.NX, l.NY = 2, 2 }), 24},
		{with(mat, func(l *kernel.Layout) { l.NX, l.NY = 3, 2 }), 96},
		{with(mat, func(l *kernel.Layout) { l.NX, l.NY = 2, 2 }), 120},
	}
	if !reflect.DeepEqual(tiles, want) {
		t.Fatalf("tiles %+v, want %+v", tiles, want)
	}
	for _, bad := range []struct {
		name string
		f    Filter
		l    kernel.Layout
	}{
		{"too many parts", VectorBlocks(11, 0), vec},
		{"zero parts", VectorBlocks(0, 0), vec},
		{"shadow too wide", VectorBlocks(2, 5), vec},
		{"wrong interface", MatrixTiles(2, 2), vec},
		{"list too long", VectorList(6, 6), vec},
	} {
		if _, err := bad.f.split(bad.l); !errors.Is(err, ErrInvalidData) {
			t.Errorf("%s: error %v, want ErrInvalidData", bad.name, err)
		}
	}
}
