// Command sched-crashy is the work-stealing policy that exits when it is
// pushed a task of priority 99: the core's scheduler-crash test.
package main

import (
	"os"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

type crashy struct{ *ws.Policy }

func (c crashy) Push(t *sched.Task) {
	if t.Priority == 99 {
		os.Exit(5)
	}
	c.Policy.Push(t)
}

func main() {
	sched.ServePolicy(base.Info{Name: "crashy", Version: "0.0.1"}, func() sched.Policy { return crashy{ws.New()} })
}
