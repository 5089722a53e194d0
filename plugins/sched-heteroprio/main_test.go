package main

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestPlugin runs the conformance kit on the built sched-heteroprio, a
// real plugin process driven through its rings, with its defaults and
// with orders of its own per architecture.
func TestPlugin(t *testing.T) {
	path := schedtest.Build(t, ".", t.TempDir(), "heteroprio")
	t.Run("default", func(t *testing.T) { schedtest.RunPlugin(t, path, nil, schedtest.HonoursPriorities()) })
	t.Run("orders", func(t *testing.T) {
		schedtest.RunPlugin(t, path, base.Config{"cuda_order": "2,1", "opencl_order": "-2", "acceleration": false})
	})
}
