// Command sched-heteroprio is StarPU's heteroprio scheduler as a plugin
// (STARPU_SCHED=heteroprio).
package main

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-heteroprio/heteroprio"
)

func main() {
	sched.ServePolicy(base.Info{Name: "heteroprio", Version: "0.1.0", Description: heteroprio.Description}, func() sched.Policy { return heteroprio.New() })
}
