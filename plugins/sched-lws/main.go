// Command sched-lws is StarPU's locality work-stealing scheduler as a
// plugin (STARPU_SCHED=lws).
package main

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-lws/lws"
)

func main() {
	sched.ServePolicy(base.Info{Name: "lws", Version: "0.1.0", Description: lws.Description}, func() sched.Policy { return lws.New() })
}
