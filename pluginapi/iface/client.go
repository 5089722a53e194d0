package iface

import (
	"context"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	bproto "github.com/starpu-go/starpu/pluginapi/base/proto"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
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
func (c *Client) Describe(ctx context.Context, meta []byte) (*Description, error) {
	resp, err := c.client.Describe(ctx, &proto.DescribeRequest{Meta: meta})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	return &Description{
		Name:      resp.GetName(),
		Buffers:   resp.GetBuffers(),
		Size:      resp.GetSize(),
		Footprint: resp.GetFootprint(),
	}, nil
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
func (c *Client) Pack(ctx context.Context, meta []byte, buffers []base.Span, dst base.Span) (uint64, error) {
	resp, err := c.client.Pack(ctx, &proto.PackRequest{Meta: meta, Buffers: spansToProto(buffers), Dst: base.SpanToProto(dst)})
	if err != nil {
		return 0, c.Err(ctx, err)
	}
	return resp.GetLen(), nil
}

// Unpack implements Interface.
func (c *Client) Unpack(ctx context.Context, meta []byte, src base.Span, buffers []base.Span) error {
	_, err := c.client.Unpack(ctx, &proto.UnpackRequest{Meta: meta, Src: base.SpanToProto(src), Buffers: spansToProto(buffers)})
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
