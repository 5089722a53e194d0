package main

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestPlugin runs the conformance kit on the built sched-ws, a real plugin
// process driven through its rings.
func TestPlugin(t *testing.T) {
	schedtest.RunPlugin(t, schedtest.Build(t, ".", t.TempDir(), "ws"), nil, schedtest.HonoursPriorities())
}
