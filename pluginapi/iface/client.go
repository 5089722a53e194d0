package iface

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	bproto "github.com/starpu-go/starpu/pluginapi/base/proto"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Client implements Interface over a gRPC connection to a data interface
// plugin process, so that the core uses an out-of-process interface exactly
// as an in-process one. Data never crosses the connection: Pack and Unpack
// carry arena spans. Errors from the plugin come back as *base.RemoteError
// with the plugin's message intact, prefixed "plugin iface-<name>: ".
type Client struct {
	*base.BasePluginClient
	client proto.InterfaceClient
}

var _ Interface = (*Client)(nil)

// NewClient returns an Interface for the plugin at the other end of conn.
// doneCtx is cancelled when the plugin process exits (may be nil); name
// labels the plugin in errors ("iface-csr"), or is learnt from PluginInfo
// when empty.
func NewClient(conn grpc.ClientConnInterface, doneCtx context.Context, name string) *Client {
	return &Client{
		BasePluginClient: base.NewBasePluginClient(conn, doneCtx, name, string(base.KindInterface)),
		client:           proto.NewInterfaceClient(conn),
	}
}

// Describe implements Interface.
func (c *Client) Describe(ctx context.Context, meta []byte, parts []base.Span) (*Description, error) {
	resp, err := c.client.Describe(ctx, &proto.DescribeRequest{Meta: meta, Parts: spansToProto(parts)})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	if resp.GetDescription() == nil {
		return nil, c.Err(ctx, fmt.Errorf("describe: the plugin sent no description"))
	}
	d := descriptionFromProto(resp.GetDescription())
	return &d, nil
}

// CopyPlan implements Interface.
func (c *Client) CopyPlan(ctx context.Context, meta []byte) ([]Range, error) {
	resp, err := c.client.CopyPlan(ctx, &proto.CopyPlanRequest{Meta: meta})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	var out []Range
	for _, r := range resp.GetRanges() {
		out = append(out, Range{Buffer: int(r.GetBuffer()), Offset: r.GetOffset(), Len: r.GetLen()})
	}
	return out, nil
}

// Pack implements Interface.
func (c *Client) Pack(ctx context.Context, meta []byte, parts []base.Span, dst base.Span) (uint64, error) {
	resp, err := c.client.Pack(ctx, &proto.PackRequest{Meta: meta, Parts: spansToProto(parts), Dst: base.SpanToProto(dst)})
	if err != nil {
		return 0, c.Err(ctx, err)
	}
	return resp.GetLen(), nil
}

// Unpack implements Interface.
func (c *Client) Unpack(ctx context.Context, meta []byte, src base.Span, parts []base.Span) error {
	_, err := c.client.Unpack(ctx, &proto.UnpackRequest{Meta: meta, Src: base.SpanToProto(src), Parts: spansToProto(parts)})
	return c.Err(ctx, err)
}

// Compare implements Interface.
func (c *Client) Compare(ctx context.Context, a, b []byte) (bool, error) {
	resp, err := c.client.Compare(ctx, &proto.CompareRequest{A: a, B: b})
	if err != nil {
		return false, c.Err(ctx, err)
	}
	return resp.GetEqual(), nil
}

// Display implements Interface.
func (c *Client) Display(ctx context.Context, meta []byte) (string, error) {
	resp, err := c.client.Display(ctx, &proto.DisplayRequest{Meta: meta})
	if err != nil {
		return "", c.Err(ctx, err)
	}
	return resp.GetText(), nil
}

// Partition implements Interface.
func (c *Client) Partition(ctx context.Context, filter string, meta []byte, parts []base.Span, nparts int) ([]Child, error) {
	resp, err := c.client.Partition(ctx, &proto.PartitionRequest{Filter: filter, Meta: meta, Parts: spansToProto(parts), Nparts: int64(nparts)})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
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
	return out, nil
}

func descriptionToProto(d *Description) *proto.Description {
	l := d.Layout
	return &proto.Description{
		Name: d.Name, Buffers: d.Buffers, Size: d.Size, Footprint: d.Footprint, AllocFootprint: d.AllocFootprint,
		Layout: &proto.Layout{Interface: uint32(l.Interface), ElemSize: l.ElemSize, Nx: l.NX, Ny: l.NY, Nz: l.NZ, Ld: l.LD, Ldz: l.LDZ},
	}
}

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
