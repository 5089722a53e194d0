// Converters between the data interface contract's Go types and its
// protobuf messages; the client and server adapters both use them.

package iface

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	bproto "github.com/starpu-go/starpu/pluginapi/base/proto"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// copyPlanToProto converts a copy plan into a CopyPlan reply.
func copyPlanToProto(plan []Range) *proto.CopyPlanResponse {
	resp := &proto.CopyPlanResponse{}
	for _, r := range plan {
		resp.Ranges = append(resp.Ranges, &proto.Range{Buffer: int64(r.Buffer), Offset: r.Offset, Len: r.Len})
	}
	return resp
}

// copyPlanFromProto converts a CopyPlan reply, unchecked (copyPlanReply
// checks it); a reply without ranges is a nil plan.
func copyPlanFromProto(resp *proto.CopyPlanResponse) []Range {
	var out []Range
	for _, r := range resp.GetRanges() {
		out = append(out, Range{Buffer: int(r.GetBuffer()), Offset: r.GetOffset(), Len: r.GetLen()})
	}
	return out
}

// childrenToProto converts the children of a partitioned datum into a
// Partition reply.
func childrenToProto(children []Child) *proto.PartitionResponse {
	resp := &proto.PartitionResponse{}
	for i := range children {
		ch := &children[i]
		pc := &proto.Child{Meta: ch.Meta, Description: descriptionToProto(&ch.Desc)}
		for _, r := range ch.Ranges {
			pc.Ranges = append(pc.Ranges, &proto.PartRange{
				Part: int64(r.Part), Offset: r.Offset, ChildPart: int64(r.ChildPart), ChildOffset: r.ChildOffset, Len: r.Len,
			})
		}
		resp.Children = append(resp.Children, pc)
	}
	return resp
}

// childrenFromProto converts a Partition reply, unchecked (partitionReply
// checks it); a reply without children is nil.
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
