package dmda

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestConformance runs the kit on dmda (FIFO queues: priorities are not
// its promise) and dmdas (priority-sorted queues).
func TestConformance(t *testing.T) {
	t.Run("dmda", func(t *testing.T) {
		schedtest.Run(t, func() sched.Policy { return New() })
	})
	t.Run("dmdas", func(t *testing.T) {
		schedtest.Run(t, func() sched.Policy {
			p := New()
			if err := p.SetConfig(map[string]any{"sorted": true}); err != nil {
				t.Fatal(err)
			}
			return p
		}, schedtest.HonoursPriorities())
	})
}
