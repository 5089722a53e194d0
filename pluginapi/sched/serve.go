package sched

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Serve is the whole main() of a scheduler plugin binary (named
// "sched-<name>" in the plugin directory). factory gets the core's
// shared-memory arena, attached from base.ArenaFD, and the plugin's logger,
// whose lines the core logs under the plugin's name. A policy author
// usually calls ServePolicy, which wraps a Policy in a Host. Serve returns
// when the core shuts the plugin down; see base.ServeKind for what happens
// when the binary is run by hand or the core dies.
func Serve(factory func(a *shm.Arena, log hclog.Logger) (Scheduler, error)) {
	base.ServeKind(base.KindScheduler, func(fd uintptr, log hclog.Logger) (plugin.Plugin, error) {
		a, err := shm.Attach(fd)
		if err != nil {
			return nil, err
		}
		s, err := factory(a, log)
		if err != nil {
			a.Close()
			return nil, err
		}
		return &Plugin{Impl: s}, nil
	})
}
