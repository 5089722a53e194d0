// Command sched-ws is the work-stealing scheduler plugin.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

func main() {
	sched.ServePolicy(base.Info{Name: "ws", Version: "0.1.0", Description: ws.Description}, func() sched.Policy { return ws.New() })
}
