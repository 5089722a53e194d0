package sched

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	bproto "github.com/starpu-go/starpu/pluginapi/base/proto"
	"github.com/starpu-go/starpu/pluginapi/sched/proto"
)

// Plugin is the go-plugin plugin.GRPCPlugin of scheduler plugins, dispensed
// under the name "sched" (base.KindScheduler). In the plugin process it
// serves Impl as the BasePlugin and Scheduler gRPC services; in the core its
// client is a *Client, which implements Scheduler.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the scheduler served, in the plugin process.
	Impl Scheduler
	// Name labels the plugin in the client's errors ("sched-ws"); when
	// empty the client learns it from PluginInfo.
	Name string
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer implements plugin.GRPCPlugin.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	bproto.RegisterBasePluginServer(s, base.NewBasePluginServer(p.Impl))
	proto.RegisterSchedulerServer(s, NewServer(p.Impl))
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c, ctx, p.Name), nil
}
