package iface

import (
	"math/bits"
	"reflect"
	"testing"

	gproto "google.golang.org/protobuf/proto"

	"github.com/starpu-go/starpu/pluginapi/base"
	bproto "github.com/starpu-go/starpu/pluginapi/base/proto"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
)

// marshal encodes m for a seed corpus.
func marshal(f *testing.F, m gproto.Message) []byte {
	b, err := gproto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// layout is the proto layout of a valid description of parts of sizes.
func layout(sizes ...uint64) *proto.Layout {
	n, _ := RegionLen(sizes)
	return &proto.Layout{ElemSize: 8, Nx: 3, Ld: n}
}

// pspans is the proto spans of parts of the given sizes, placed as the core
// places them from offset 4096.
func pspans(sizes ...uint64) []*bproto.Span {
	offs, _ := PartOffsets(sizes)
	out := make([]*bproto.Span, len(sizes))
	for i, n := range sizes {
		out[i] = &bproto.Span{Offset: 4096 + offs[i], Size: n}
	}
	return out
}

// end is off+n, and whether it did not wrap.
func end(off, n uint64) (uint64, bool) {
	e, carry := bits.Add64(off, n, 0)
	return e, carry == 0
}

// checkRegion fails t unless the parts of d, placed by PartOffsets, lie in
// a region of d.Layout.LD bytes, no larger than MaxRegion.
func checkRegion(t *testing.T, what string, d *Description) {
	t.Helper()
	offs, total := PartOffsets(d.Buffers)
	if total != d.Layout.LD || total > MaxRegion || d.Size > total || d.Layout.Interface != 0 {
		t.Fatalf("%s: accepted %+v: region of %d bytes", what, d, total)
	}
	for i, n := range d.Buffers {
		if e, ok := end(offs[i], n); !ok || e > total || offs[i]%PartAlign != 0 {
			t.Fatalf("%s: part %d at %d of %d bytes in a region of %d", what, i, offs[i], n, total)
		}
	}
}

// FuzzDescribeReply decodes random bytes as a Describe reply, and others as
// the request it answers, and runs them through the client's check: it
// never panics, and an accepted description places its parts inside a
// region of Layout.LD bytes under MaxRegion, leaves Interface to the core,
// and, when the request carried parts, describes exactly those.
func FuzzDescribeReply(f *testing.F) {
	good := &proto.Description{Name: "csr", Buffers: []uint64{24, 12, 16}, Size: 52, Layout: layout(24, 12, 16)}
	f.Add(marshal(f, &proto.DescribeResponse{Description: good}), marshal(f, &proto.DescribeRequest{Parts: pspans(24, 12, 16)}))
	f.Add(marshal(f, &proto.DescribeResponse{Description: good}), marshal(f, &proto.DescribeRequest{}))
	f.Add(marshal(f, &proto.DescribeResponse{Description: good}), marshal(f, &proto.DescribeRequest{Parts: pspans(24, 12)}))
	f.Add(marshal(f, &proto.DescribeResponse{Description: &proto.Description{Buffers: []uint64{1 << 63, 1 << 63}}}), []byte{})
	f.Add(marshal(f, &proto.DescribeResponse{Description: &proto.Description{Buffers: []uint64{8}, Layout: &proto.Layout{Ld: 8, Interface: 2}}}), []byte{})
	f.Add(marshal(f, &proto.DescribeResponse{}), []byte{})
	f.Fuzz(func(t *testing.T, reply, request []byte) {
		var resp proto.DescribeResponse
		var req proto.DescribeRequest
		if gproto.Unmarshal(reply, &resp) != nil || gproto.Unmarshal(request, &req) != nil {
			return
		}
		parts := spansFromProto(req.GetParts())
		d, err := describeReply(&resp, parts)
		if err != nil {
			if d != nil {
				t.Fatalf("rejected with %v, yet returned %+v", err, d)
			}
			return
		}
		checkRegion(t, "description", d)
		if parts != nil {
			if len(parts) != len(d.Buffers) {
				t.Fatalf("accepted %d parts for a description of %d", len(parts), len(d.Buffers))
			}
			for i, p := range parts {
				if p.Size != d.Buffers[i] {
					t.Fatalf("accepted part %d of %d bytes, described as %d", i, p.Size, d.Buffers[i])
				}
			}
		}
		if again := descriptionFromProto(descriptionToProto(d)); !reflect.DeepEqual(again, *d) {
			t.Fatalf("round trip of %+v gave %+v", d, again)
		}
	})
}

// FuzzCopyPlanReply decodes random bytes as a CopyPlan reply: the client's
// check never panics, and every accepted range names a part (Buffer >= 0)
// and ends, without wrapping, within MaxRegion.
func FuzzCopyPlanReply(f *testing.F) {
	f.Add(marshal(f, &proto.CopyPlanResponse{Ranges: []*proto.Range{{Buffer: 0, Len: 24}, {Buffer: 2, Offset: 8, Len: 8}}}))
	f.Add(marshal(f, &proto.CopyPlanResponse{Ranges: []*proto.Range{{Buffer: -1, Len: 1}}}))
	f.Add(marshal(f, &proto.CopyPlanResponse{Ranges: []*proto.Range{{Offset: 1<<64 - 1, Len: 2}}}))
	f.Add(marshal(f, &proto.CopyPlanResponse{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var resp proto.CopyPlanResponse
		if gproto.Unmarshal(b, &resp) != nil {
			return
		}
		plan, err := copyPlanReply(&resp)
		if err != nil {
			if plan != nil {
				t.Fatalf("rejected with %v, yet returned %+v", err, plan)
			}
			return
		}
		if len(plan) != len(resp.GetRanges()) {
			t.Fatalf("%d ranges sent, %d kept", len(resp.GetRanges()), len(plan))
		}
		for i, r := range plan {
			if e, ok := end(r.Offset, r.Len); r.Buffer < 0 || int64(r.Buffer) != resp.GetRanges()[i].GetBuffer() || !ok || e > MaxRegion {
				t.Fatalf("accepted range %d: %+v", i, r)
			}
		}
	})
}

// FuzzPackReply decodes random bytes as a Pack reply into a destination of
// dstSize bytes: the client's check never panics, and an accepted length
// fits in the destination.
func FuzzPackReply(f *testing.F) {
	f.Add(marshal(f, &proto.PackResponse{Len: 52}), uint64(52))
	f.Add(marshal(f, &proto.PackResponse{Len: 53}), uint64(52))
	f.Add(marshal(f, &proto.PackResponse{Len: 1<<64 - 1}), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, dstSize uint64) {
		var resp proto.PackResponse
		if gproto.Unmarshal(b, &resp) != nil {
			return
		}
		n, err := packReply(&resp, base.Span{Offset: 4096, Size: dstSize})
		if err == nil && (n > dstSize || n != resp.GetLen()) {
			t.Fatalf("accepted %d bytes (sent %d) into %d", n, resp.GetLen(), dstSize)
		}
	})
}

// FuzzPartitionReply decodes random bytes as a Partition reply, and others
// as the request it answers, and runs them through the client's check: it
// never panics, and an accepted answer has the nparts children asked for,
// each with a valid description, and every range lies, offsets added as
// the core adds them, inside a part of the parent as sent and a part of
// its child, so that the core's copies stay within both regions.
func FuzzPartitionReply(f *testing.F) {
	child := func(sizes []uint64, ranges ...*proto.PartRange) *proto.Child {
		return &proto.Child{Meta: []byte("m"), Description: &proto.Description{Buffers: sizes, Size: 1, Layout: layout(sizes...)}, Ranges: ranges}
	}
	req := marshal(f, &proto.PartitionRequest{Filter: "rows", Parts: pspans(32, 8), Nparts: 2})
	f.Add(marshal(f, &proto.PartitionResponse{Children: []*proto.Child{
		child([]uint64{16, 4}, &proto.PartRange{Len: 16}, &proto.PartRange{Part: 1, ChildPart: 1, Len: 4}),
		child([]uint64{16, 4}, &proto.PartRange{Offset: 16, Len: 16}, &proto.PartRange{Part: 1, Offset: 4, ChildPart: 1, Len: 4}),
	}}), req)
	f.Add(marshal(f, &proto.PartitionResponse{Children: []*proto.Child{child([]uint64{16})}}), req)
	f.Add(marshal(f, &proto.PartitionResponse{Children: []*proto.Child{
		child([]uint64{16}, &proto.PartRange{Part: 0, Offset: 1<<64 - 1, Len: 2}), child(nil, &proto.PartRange{Part: -1}),
	}}), req)
	f.Add(marshal(f, &proto.PartitionResponse{Children: []*proto.Child{{}, {}}}), req)
	f.Fuzz(func(t *testing.T, reply, request []byte) {
		var resp proto.PartitionResponse
		var req proto.PartitionRequest
		if gproto.Unmarshal(reply, &resp) != nil || gproto.Unmarshal(request, &req) != nil {
			return
		}
		parts := spansFromProto(req.GetParts())
		nparts := int(req.GetNparts())
		kids, err := partitionReply(&resp, parts, nparts)
		if err != nil {
			if kids != nil {
				t.Fatalf("rejected with %v, yet returned %+v", err, kids)
			}
			return
		}
		if len(kids) != nparts {
			t.Fatalf("accepted %d children for %d parts", len(kids), nparts)
		}
		parent := make([]uint64, len(parts))
		for i, p := range parts {
			parent[i] = p.Size
		}
		poffs, _ := PartOffsets(parent)
		for c := range kids {
			k := &kids[c]
			checkRegion(t, "child", &k.Desc)
			coffs, ctotal := PartOffsets(k.Desc.Buffers)
			for i, r := range k.Ranges {
				if r.Part < 0 || r.Part >= len(parent) || r.ChildPart < 0 || r.ChildPart >= len(k.Desc.Buffers) {
					t.Fatalf("child %d range %d: accepted %+v", c, i, r)
				}
				// The core copies child[coffs+ChildOffset:][:Len] from
				// parent[poffs+Offset:]: both inside their parts.
				ps, ok1 := end(r.Offset, r.Len)
				cs, ok2 := end(r.ChildOffset, r.Len)
				if !ok1 || !ok2 || ps > parent[r.Part] || cs > k.Desc.Buffers[r.ChildPart] || coffs[r.ChildPart]+cs > ctotal {
					t.Fatalf("child %d range %d: accepted %+v: parent part of %d bytes at %d, child part of %d bytes",
						c, i, r, parent[r.Part], poffs[r.Part], k.Desc.Buffers[r.ChildPart])
				}
			}
		}
	})
}
