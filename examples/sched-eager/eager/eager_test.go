package eager

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestConformance runs the SDK's conformance kit: the one test every policy
// needs. Eager is a FIFO, so it does not claim schedtest.HonoursPriorities.
func TestConformance(t *testing.T) {
	schedtest.Run(t, func() sched.Policy { return New() })
}
