// Command sched-prio is StarPU's prio scheduler as a plugin
// (STARPU_SCHED=prio): one central queue by priority.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-prio/prio"
)

func main() {
	sched.ServePolicy(base.Info{Name: "prio", Version: "0.1.0", Description: prio.Description}, func() sched.Policy { return prio.New() })
}
