package iface

import (
	"reflect"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// TestDescriptionConvert: a Description survives descriptionToProto then
// descriptionFromProto unchanged.
func TestDescriptionConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Description
	}{
		{"zero", Description{}},
		{"empty buffers", Description{Name: "void", Buffers: []uint64{}}},
		{"vector", Description{
			Name: "vector", Buffers: []uint64{4096}, Size: 4096, Footprint: 0xdeadbeef, AllocFootprint: 42,
			Layout: kernel.Layout{ElemSize: 4, NX: 1024, LD: 4096},
		}},
		{"every field", Description{
			Name: "csr", Buffers: []uint64{32, 40, 80}, Size: 152, Footprint: 1, AllocFootprint: 2,
			Layout: kernel.Layout{Interface: kernel.InterfaceID(9), ElemSize: 8, NX: 3, NY: 4, NZ: 5, LD: 152, LDZ: 7},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := descriptionFromProto(descriptionToProto(&tc.in)); !reflect.DeepEqual(got, tc.in) {
				t.Errorf("round trip gave %+v, want %+v", got, tc.in)
			}
		})
	}
}

// TestCopyPlanConvert: a copy plan survives copyPlanToProto then
// copyPlanFromProto unchanged, but for an empty plan, which comes back nil.
func TestCopyPlanConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Range
	}{
		{"nil", nil},
		{"empty", []Range{}},
		{"zero range", []Range{{}}},
		{"ranges", []Range{{Buffer: 0, Offset: 0, Len: 64}, {Buffer: 2, Offset: 128, Len: 1 << 40}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.in
			if len(want) == 0 {
				want = nil
			}
			if got := copyPlanFromProto(copyPlanToProto(tc.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip gave %+v, want %+v", got, want)
			}
		})
	}
}

// TestChildrenConvert: the children of a partition survive childrenToProto
// then childrenFromProto unchanged, but for an empty list, which comes back
// nil.
func TestChildrenConvert(t *testing.T) {
	vec := func(n uint64) Description {
		return Description{Name: "vector", Buffers: []uint64{n}, Size: n, Layout: kernel.Layout{ElemSize: 1, NX: n, LD: n}}
	}
	for _, tc := range []struct {
		name string
		in   []Child
	}{
		{"nil", nil},
		{"empty", []Child{}},
		{"zero child", []Child{{}}},
		{"two halves", []Child{
			{Meta: []byte{1}, Desc: vec(32), Ranges: []PartRange{{Part: 0, Offset: 0, ChildPart: 0, ChildOffset: 0, Len: 32}}},
			{Meta: []byte{2}, Desc: vec(32), Ranges: []PartRange{{Part: 0, Offset: 32, ChildPart: 0, ChildOffset: 0, Len: 32}}},
		}},
		{"several ranges", []Child{
			{Meta: []byte("rows 0-9"), Desc: Description{Name: "csr", Buffers: []uint64{44, 80}, Size: 124}, Ranges: []PartRange{
				{Part: 0, Offset: 0, ChildPart: 0, ChildOffset: 0, Len: 44},
				{Part: 1, Offset: 8, ChildPart: 1, ChildOffset: 0, Len: 80},
			}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.in
			if len(want) == 0 {
				want = nil
			}
			if got := childrenFromProto(childrenToProto(tc.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip gave %+v, want %+v", got, want)
			}
		})
	}
}

// TestSpansConvert: spans survive spansToProto then spansFromProto
// unchanged, nil and empty lists included.
func TestSpansConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []base.Span
	}{
		{"nil", nil},
		{"empty", []base.Span{}},
		{"zero span", []base.Span{{}}},
		{"spans", []base.Span{{Offset: 0, Size: 64}, {Offset: 4096, Size: 1 << 30}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := spansFromProto(spansToProto(tc.in)); !reflect.DeepEqual(got, tc.in) {
				t.Errorf("round trip gave %#v, want %#v", got, tc.in)
			}
		})
	}
}
