// Command sched-dmda is the deque-model-data-aware scheduler plugin
// (STARPU_SCHED=dmda); with the config attribute sorted = true it is dmdas.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-dmda/dmda"
)

func main() {
	sched.ServePolicy(base.Info{Name: "dmda", Version: "0.1.0"}, func() sched.Policy { return dmda.New() })
}
