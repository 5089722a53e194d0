package filter

import (
	"errors"
	"reflect"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

func TestChunk(t *testing.T) {
	for _, tc := range []struct {
		n             uint64
		nparts        int
		starts, sizes []uint64
	}{
		{10, 3, []uint64{0, 4, 7}, []uint64{4, 3, 3}},
		{9, 3, []uint64{0, 3, 6}, []uint64{3, 3, 3}},
		{2, 2, []uint64{0, 1}, []uint64{1, 1}},
		{7, 1, []uint64{0}, []uint64{7}},
	} {
		var starts, sizes []uint64
		for i := 0; i < tc.nparts; i++ {
			s, z := Chunk(tc.n, tc.nparts, i)
			starts, sizes = append(starts, s), append(sizes, z)
		}
		if !reflect.DeepEqual(starts, tc.starts) || !reflect.DeepEqual(sizes, tc.sizes) {
			t.Errorf("Chunk(%d, %d): starts %v sizes %v, want %v %v", tc.n, tc.nparts, starts, sizes, tc.starts, tc.sizes)
		}
	}
}

func TestFilters(t *testing.T) {
	vec := kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 10}
	mat := kernel.Layout{Interface: kernel.Matrix, ElemSize: 8, NX: 5, NY: 4, LD: 6}
	blk := kernel.Layout{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 3, NZ: 4, LD: 2, LDZ: 6}
	with := func(l kernel.Layout, f func(*kernel.Layout)) kernel.Layout { f(&l); return l }
	for _, tc := range []struct {
		name    string
		f       Split
		l       kernel.Layout
		dim     int      // the dimension cut: 0 x, 1 y, 2 z
		nx      []uint64 // the varying dimension of each child
		offsets []uint64
	}{
		{"vector 3 blocks", AlongX("VectorBlocks", kernel.Vector, 3, 0), vec, 0, []uint64{4, 3, 3}, []uint64{0, 16, 28}},
		{"vector shadow", AlongX("VectorBlocks", kernel.Vector, 2, 1), vec, 0, []uint64{6, 6}, []uint64{0, 16}},
		{"vector list", VectorList([]int{2, 5}), vec, 0, []uint64{2, 5}, []uint64{0, 8}},
		{"matrix blocks", AlongX("MatrixBlocks", kernel.Matrix, 2, 0), mat, 0, []uint64{3, 2}, []uint64{0, 24}},
		{"matrix vertical", MatrixVertical(3, 0), mat, 1, []uint64{2, 1, 1}, []uint64{0, 96, 144}},
		{"block depth", BlockDim("BlockDepthBlocks", 2, 2, 0), blk, 2, []uint64{2, 2}, []uint64{0, 48}},
		{"block vertical", BlockDim("BlockVerticalBlocks", 1, 3, 0), blk, 1, []uint64{1, 1, 1}, []uint64{0, 8, 16}},
		{"block x", BlockDim("BlockBlocks", 0, 2, 0), blk, 0, []uint64{1, 1}, []uint64{0, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := tc.f(tc.l)
			if err != nil {
				t.Fatal(err)
			}
			var nx, offs []uint64
			for _, c := range cs {
				nx = append(nx, [3]uint64{c.Layout.NX, c.Layout.NY, c.Layout.NZ}[tc.dim])
				offs = append(offs, c.Offset)
				if c.Layout.LD != tc.l.LD || c.Layout.ElemSize != tc.l.ElemSize {
					t.Errorf("child layout %+v lost the parent's ld or element size", c.Layout)
				}
			}
			if !reflect.DeepEqual(nx, tc.nx) || !reflect.DeepEqual(offs, tc.offsets) {
				t.Fatalf("sizes %v offsets %v, want %v %v", nx, offs, tc.nx, tc.offsets)
			}
		})
	}
	tiles, err := MatrixTiles(2, 2)(mat)
	if err != nil {
		t.Fatal(err)
	}
	want := []View{
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
		f    Split
		l    kernel.Layout
	}{
		{"too many parts", AlongX("VectorBlocks", kernel.Vector, 11, 0), vec},
		{"zero parts", AlongX("VectorBlocks", kernel.Vector, 0, 0), vec},
		{"shadow too wide", AlongX("VectorBlocks", kernel.Vector, 2, 5), vec},
		{"wrong interface", MatrixTiles(2, 2), vec},
		{"list too long", VectorList([]int{6, 6}), vec},
	} {
		if _, err := bad.f(bad.l); !errors.Is(err, ErrBadSplit) {
			t.Errorf("%s: error %v, want ErrBadSplit", bad.name, err)
		}
	}
}
