package main

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestPlugin runs the conformance kit on the built plugin, across the
// process boundary as the runtime runs it.
func TestPlugin(t *testing.T) {
	schedtest.RunPlugin(t, schedtest.Build(t, ".", t.TempDir(), "eager"), nil)
}
