package iface

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
)

// Client implements Interface over a gRPC connection to a data interface
// plugin process, so that the core uses an out-of-process interface exactly
// as an in-process one. Data never crosses the connection: Pack and Unpack
// carry arena spans. Errors from the plugin come back as *base.RemoteError
// with the plugin's message intact, prefixed "plugin iface-<name>: ".
//
// Replies are checked before they are returned, against the contract and
// against the request: a description that fails Description.Check or does
// not match the parts sent, a copy-plan range that overflows, a packed
// length past the destination, children that are not nparts or whose
// ranges leave their parts are errors wrapping base.ErrBadReply that name
// the plugin and the call.
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
	d, err := describeReply(resp, parts)
	if err != nil {
		return nil, c.BadReply("Describe", err)
	}
	return d, nil
}

// describeReply converts and checks a Describe reply: there is a
// description, it passes Description.Check and, when the request carried
// parts, it describes one part per span, of the span's size (what the
// plugin accepted).
func describeReply(resp *proto.DescribeResponse, parts []base.Span) (*Description, error) {
	if resp.GetDescription() == nil {
		return nil, errors.New("no description")
	}
	d := descriptionFromProto(resp.GetDescription())
	if err := d.Check(); err != nil {
		return nil, err
	}
	if parts != nil {
		if err := d.CheckParts(spanSizes(parts)); err != nil {
			return nil, fmt.Errorf("the plugin accepted parts its description does not match: %w", err)
		}
	}
	return &d, nil
}

// CopyPlan implements Interface. The client cannot check the ranges against
// the datum's parts (Description.CheckPlan does, given the description);
// it checks that each names a part (Buffer >= 0) and ends before MaxRegion.
func (c *Client) CopyPlan(ctx context.Context, meta []byte) ([]Range, error) {
	resp, err := c.client.CopyPlan(ctx, &proto.CopyPlanRequest{Meta: meta})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	plan, err := copyPlanReply(resp)
	if err != nil {
		return nil, c.BadReply("CopyPlan", err)
	}
	return plan, nil
}

// copyPlanReply converts and checks a CopyPlan reply (see CopyPlan).
func copyPlanReply(resp *proto.CopyPlanResponse) ([]Range, error) {
	for i, r := range resp.GetRanges() {
		off, n := r.GetOffset(), r.GetLen()
		switch {
		case r.GetBuffer() < 0:
			return nil, fmt.Errorf("range %d names part %d", i, r.GetBuffer())
		case n > MaxRegion || off > MaxRegion-n:
			return nil, fmt.Errorf("range %d: bytes [%d, +%d) end past %d, the largest region", i, off, n, uint64(MaxRegion))
		}
	}
	return copyPlanFromProto(resp), nil
}

// Pack implements Interface. A length past dst is an error wrapping
// base.ErrBadReply.
func (c *Client) Pack(ctx context.Context, meta []byte, parts []base.Span, dst base.Span) (uint64, error) {
	resp, err := c.client.Pack(ctx, &proto.PackRequest{Meta: meta, Parts: spansToProto(parts), Dst: base.SpanToProto(dst)})
	if err != nil {
		return 0, c.Err(ctx, err)
	}
	n, err := packReply(resp, dst)
	if err != nil {
		return 0, c.BadReply("Pack", err)
	}
	return n, nil
}

// packReply converts and checks a Pack reply: the message fits in dst.
func packReply(resp *proto.PackResponse, dst base.Span) (uint64, error) {
	if n := resp.GetLen(); n > dst.Size {
		return 0, fmt.Errorf("packed %d bytes into a destination of %d", n, dst.Size)
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
	kids, err := partitionReply(resp, parts, nparts)
	if err != nil {
		return nil, c.BadReply("Partition", fmt.Errorf("filter %q: %w", filter, err))
	}
	return kids, nil
}

// partitionReply converts and checks a Partition reply: nparts children,
// each with a description, all passing CheckChildren against the parent's
// parts as sent (parts).
func partitionReply(resp *proto.PartitionResponse, parts []base.Span, nparts int) ([]Child, error) {
	if n := len(resp.GetChildren()); n != nparts {
		return nil, fmt.Errorf("%d children, asked for %d", n, nparts)
	}
	for i, ch := range resp.GetChildren() {
		if ch.GetDescription() == nil {
			return nil, fmt.Errorf("child %d has no description", i)
		}
	}
	out := childrenFromProto(resp)
	if err := CheckChildren(spanSizes(parts), out); err != nil {
		return nil, err
	}
	return out, nil
}

// spanSizes is the sizes of spans.
func spanSizes(spans []base.Span) []uint64 {
	out := make([]uint64, len(spans))
	for i, s := range spans {
		out[i] = s.Size
	}
	return out
}
