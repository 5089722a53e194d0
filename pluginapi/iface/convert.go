// Converters between the data interface contract's Go types and its
// protobuf messages; the client and server adapters both use them.

package iface

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	bproto "github.com/starpu-go/starpu/pluginapi/base/proto"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// childrenFromProto converts a Partition reply, unchecked.
func childrenFromProto(resp *proto.PartitionResponse) []Child {
	var out []Child
	for _, ch := range resp.GetChildren() {
		child := Child{Meta: ch.GetMeta(), Desc: descriptionFromProto(ch.GetDescription())}
		for _, r := range ch.GetRanges() {
			child.Ranges = append(child.Ranges, PartRange{
				Part: int(r.GetPart()), Offset: r.GetOffset(),
				ChildPart: int(r.GetChildPart()), ChildOffset: r.GetChildOffset(), Len: r.GetLen(),
			})
		}
		out = append(out, child)
	}
	return out
}

// descriptionToProto converts a description for the wire; d must not be
// nil.
func descriptionToProto(d *Description) *proto.Description {
	l := d.Layout
	return &proto.Description{
		Name: d.Name, Buffers: d.Buffers, Size: d.Size, Footprint: d.Footprint, AllocFootprint: d.AllocFootprint,
		Layout: &proto.Layout{Interface: uint32(l.Interface), ElemSize: l.ElemSize, Nx: l.NX, Ny: l.NY, Nz: l.NZ, Ld: l.LD, Ldz: l.LDZ},
	}
}

// descriptionFromProto converts a description from the wire, unchecked; a
// missing description or layout is the zero one.
func descriptionFromProto(d *proto.Description) Description {
	l := d.GetLayout()
	return Description{
		Name: d.GetName(), Buffers: d.GetBuffers(), Size: d.GetSize(), Footprint: d.GetFootprint(), AllocFootprint: d.GetAllocFootprint(),
		Layout: kernel.Layout{
			Interface: kernel.InterfaceID(l.GetInterface()), ElemSize: l.GetElemSize(),
			NX: l.GetNx(), NY: l.GetNy(), NZ: l.GetNz(), LD: l.GetLd(), LDZ: l.GetLdz(),
		},
	}
}

// spansToProto converts spans for the wire; nil stays nil.
func spansToProto(spans []base.Span) []*bproto.Span {
	if spans == nil {
		return nil
	}
	out := make([]*bproto.Span, len(spans))
	for i, s := range spans {
		out[i] = base.SpanToProto(s)
	}
	return out
}

// spansFromProto converts spans from the wire; nil stays nil.
func spansFromProto(spans []*bproto.Span) []base.Span {
	if spans == nil {
		return nil
	}
	out := make([]base.Span, len(spans))
	for i, s := range spans {
		out[i] = base.SpanFromProto(s)
	}
	return out
}
