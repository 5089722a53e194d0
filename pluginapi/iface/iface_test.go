package iface

import (
	"reflect"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

func TestPartOffsets(t *testing.T) {
	for _, c := range []struct {
		sizes, want []uint64
	}{
		{nil, []uint64{0}},
		{[]uint64{10}, []uint64{0, 10}},
		{[]uint64{10, 3, 64, 0, 1}, []uint64{0, 512, 1024, 1536, 1536, 1537}},
		{[]uint64{0, 0}, []uint64{0, 0, 0}},
		{[]uint64{512, 512}, []uint64{0, 512, 1024}},
		{[]uint64{513, 1}, []uint64{0, 1024, 1025}},
	} {
		got, total := PartOffsets(c.sizes)
		if !reflect.DeepEqual(append(got, total), c.want) {
			t.Errorf("PartOffsets(%v) = %v, %d; want %v", c.sizes, got, total, c.want)
		}
		if n, err := RegionLen(c.sizes); err != nil || n != c.want[len(c.sizes)] {
			t.Errorf("RegionLen(%v) = %d, %v; want %d", c.sizes, n, err, c.want[len(c.sizes)])
		}
	}
	for _, sizes := range [][]uint64{{MaxRegion + 1}, {1, MaxRegion}, {^uint64(0)}, {MaxRegion / 2, MaxRegion / 2, 64}} {
		if _, err := RegionLen(sizes); err == nil || !strings.Contains(err.Error(), "past") {
			t.Errorf("RegionLen(%v): error %v, want one about the region's length", sizes, err)
		}
	}
}

func TestDescriptionCheck(t *testing.T) {
	good := Description{Name: "x", Buffers: []uint64{8, 4}, Layout: kernel.Layout{LD: 516}}
	if err := good.Check(); err != nil {
		t.Fatalf("good description: %v", err)
	}
	for _, c := range []struct {
		d    Description
		want string
	}{
		{Description{Name: "x", Buffers: []uint64{8, 4}, Layout: kernel.Layout{LD: 12}}, "layout LD 12 is not the region length 516"},
		{Description{Name: "x", Buffers: []uint64{8}, Layout: kernel.Layout{LD: 8, Interface: kernel.Vector}}, "the core assigns it"},
		{Description{Name: "x", Buffers: []uint64{^uint64(0)}}, "past"},
		{Description{Name: "x", Buffers: []uint64{8}, Size: 9, Layout: kernel.Layout{LD: 8}}, "size 9 is more than the region length 8"},
	} {
		if err := c.d.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want %q", c.d, err, c.want)
		}
	}
}

func TestCheckChildren(t *testing.T) {
	child := func(r PartRange) []Child {
		return []Child{{Desc: Description{Buffers: []uint64{16, 8}, Layout: kernel.Layout{LD: 520}}, Ranges: []PartRange{r}}}
	}
	parent := []uint64{32, 8}
	if err := CheckChildren(parent, child(PartRange{Part: 0, Offset: 16, ChildPart: 0, ChildOffset: 0, Len: 16})); err != nil {
		t.Fatalf("good child: %v", err)
	}
	for _, c := range []struct {
		r    PartRange
		want string
	}{
		{PartRange{Part: 2, Len: 1}, "parent part 2 of 2"},
		{PartRange{Part: -1, Len: 1}, "parent part -1 of 2"},
		{PartRange{ChildPart: 2, Len: 1}, "child part 2 of 2"},
		{PartRange{Part: 0, Offset: 17, Len: 16}, "outside parent part 0 of 32 bytes"},
		{PartRange{Part: 1, Offset: 0, ChildPart: 1, ChildOffset: 4, Len: 8}, "outside child part 1 of 8 bytes"},
		{PartRange{Part: 0, Offset: ^uint64(0), Len: 2}, "outside parent part"},
	} {
		if err := CheckChildren(parent, child(c.r)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("range %+v: error %v, want %q", c.r, err, c.want)
		}
	}
	bad := child(PartRange{})
	bad[0].Desc.Layout.LD = 1
	if err := CheckChildren(parent, bad); err == nil || !strings.Contains(err.Error(), "child 0: ") {
		t.Errorf("bad child description: %v", err)
	}
}
