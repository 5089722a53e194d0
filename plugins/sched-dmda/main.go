// Command sched-dmda is the deque-model-data-aware scheduler plugin
// (STARPU_SCHED=dmda); with the config attribute sorted = true it is dmdas,
// with ready = true dmdar (the runtime's configuration maps those two names
// to this plugin and its attribute).
package main

import (
	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/sched-dmda/dmda"
)

func main() {
	info := base.Info{Name: "dmda", Version: "0.1.0", Description: dmda.Description}
	// Serve rather than ServePolicy: the policy logs its calibration
	// warnings through the plugin's logger.
	sched.Serve(func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
		p := dmda.New()
		p.SetLogger(log)
		return sched.NewHost(a, p, info), nil
	})
}
