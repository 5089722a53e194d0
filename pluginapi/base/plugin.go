package base

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base/proto"
)

// PluginBase is the go-plugin plugin.GRPCPlugin for the BasePlugin service
// alone: it serves Impl's identity and configuration, and its client is a
// *BasePluginClient. The plugins of each kind (driver.Plugin, sched.Plugin,
// iface.Plugin) serve the same service next to their own.
type PluginBase struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin served, in the plugin process.
	Impl Plugin
	// Name labels the plugin in the client's errors ("driver-cpu"); when
	// empty the client learns it from PluginInfo.
	Name string
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *PluginBase) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	proto.RegisterBasePluginServer(s, NewBasePluginServer(p.Impl))
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *PluginBase) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewBasePluginClient(c, ctx, p.Name, "plugin"), nil
}
