// Command sched-random is StarPU's random scheduler as a plugin
// (STARPU_SCHED=random): each task to a random worker weighted by speed.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-random/random"
)

func main() {
	sched.ServePolicy(base.Info{Name: "random", Version: "0.1.0", Description: random.Description}, func() sched.Policy { return random.New() })
}
