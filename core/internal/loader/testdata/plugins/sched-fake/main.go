// Command sched-fake is a test scheduler plugin serving plugintest.Sched.
// Its plugin name is its file name after "sched-".
package main

import (
	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/internal/loader/plugintest"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

func main() {
	name := plugintest.NameFromArgs()
	sched.Serve(func(_ *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
		return plugintest.NewSched(name), nil
	})
}
