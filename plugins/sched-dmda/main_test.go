package main

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched/schedtest"
)

// TestPlugin runs the conformance kit on the built sched-dmda, a real
// plugin process driven through its rings, as dmda and with the settings
// of StarPU's dmdas and dmdar.
func TestPlugin(t *testing.T) {
	path := schedtest.Build(t, ".", t.TempDir(), "dmda")
	cases := []struct {
		name       string
		cfg        base.Config
		priorities bool
	}{
		{"dmda", nil, false},
		{"dmdas", base.Config{"sorted": true}, true},
		{"dmdar", base.Config{"ready": true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var opts []schedtest.Option
			if c.priorities {
				opts = append(opts, schedtest.HonoursPriorities())
			}
			schedtest.RunPlugin(t, path, c.cfg, opts...)
		})
	}
}
