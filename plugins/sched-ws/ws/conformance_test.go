package ws

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

func TestConformance(t *testing.T) {
	schedtest.Run(t, func() sched.Policy { return New() }, schedtest.HonoursPriorities())
}
