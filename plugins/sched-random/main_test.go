package main

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestPlugin runs the conformance kit on the built sched-random, a real
// plugin process driven through its rings, configured as a user would.
func TestPlugin(t *testing.T) {
	schedtest.RunPlugin(t, schedtest.Build(t, ".", t.TempDir(), "random"), base.Config{"cuda_speed": 4.0, "seed": int64(3)}, schedtest.HonoursPriorities())
}
