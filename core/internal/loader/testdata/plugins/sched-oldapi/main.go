// Command sched-oldapi is a scheduler plugin built against another plugin
// API version than the core's: it answers go-plugin's handshake with
// version base.APIVersion+1, as a plugin from another release would.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/core/internal/loader/plugintest"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

func main() {
	hs := base.Handshake
	hs.ProtocolVersion = base.APIVersion + 1
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: hs,
		VersionedPlugins: map[int]plugin.PluginSet{
			int(hs.ProtocolVersion): {string(base.KindScheduler): &sched.Plugin{Impl: plugintest.NewSched("oldapi")}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
