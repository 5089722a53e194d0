package sched

import (
	"context"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched/proto"
)

// Client implements Scheduler over a gRPC connection to a scheduler plugin
// process, so that the core drives an out-of-process policy exactly as an
// in-process Host. Errors from the plugin come back as *base.RemoteError
// with the plugin's message intact, prefixed "plugin sched-<name>: ".
type Client struct {
	*base.BasePluginClient
	client proto.SchedulerClient
}

var _ Scheduler = (*Client)(nil)

// NewClient returns a Scheduler for the plugin at the other end of conn.
// doneCtx is cancelled when the plugin process exits (may be nil); name
// labels the plugin in errors ("sched-ws"), or is learnt from PluginInfo
// when empty.
func NewClient(conn grpc.ClientConnInterface, doneCtx context.Context, name string) *Client {
	return &Client{
		BasePluginClient: base.NewBasePluginClient(conn, doneCtx, name, string(base.KindScheduler)),
		client:           proto.NewSchedulerClient(conn),
	}
}

// Init implements Scheduler.
func (c *Client) Init(ctx context.Context, req *InitRequest) error {
	_, err := c.client.Init(ctx, initToProto(req))
	return c.Err(ctx, err)
}

// Deinit implements Scheduler.
func (c *Client) Deinit(ctx context.Context) error {
	_, err := c.client.Deinit(ctx, &proto.DeinitRequest{})
	return c.Err(ctx, err)
}
