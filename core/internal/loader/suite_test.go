package loader

import (
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/core/internal/loader/plugintest"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// The same suite runs against each fake in process, through go-plugin's
// in-memory gRPC harness, and in a real plugin process started by Launch.

// harness serves p through go-plugin's in-memory gRPC test connection and
// returns the dispensed client.
func harness(t *testing.T, kind string, p plugin.Plugin) any {
	t.Helper()
	// Closing the client shuts the server down too (stopping both races
	// inside go-plugin).
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{kind: p})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestDriverSuite(t *testing.T) {
	t.Run("in-process", func(t *testing.T) {
		a := newArena(t)
		plugintest.DriverSuite(t, plugintest.NewDriver("fake", a), plugintest.Target{Name: "fake", Arena: a})
	})
	t.Run("grpc-harness", func(t *testing.T) {
		a := newArena(t)
		// No Name: the client learns it from PluginInfo, the suite's first call.
		d := harness(t, "driver", &driver.Plugin{Impl: plugintest.NewDriver("fake", a)}).(driver.Driver)
		plugintest.DriverSuite(t, d, plugintest.Target{Name: "fake", Remote: true, Arena: a})
	})
	t.Run("process", func(t *testing.T) {
		p, a, _ := launch(t, candidate(t, "driver-fake", ""))
		d, err := p.Driver()
		if err != nil {
			t.Fatal(err)
		}
		plugintest.DriverSuite(t, d, plugintest.Target{Name: "fake", Remote: true, Arena: a})
	})
}

func TestSchedSuite(t *testing.T) {
	t.Run("in-process", func(t *testing.T) {
		plugintest.SchedSuite(t, plugintest.NewSched("fake"), plugintest.Target{Name: "fake"})
	})
	t.Run("grpc-harness", func(t *testing.T) {
		s := harness(t, "sched", &sched.Plugin{Impl: plugintest.NewSched("fake"), Name: "sched-fake"}).(sched.Scheduler)
		plugintest.SchedSuite(t, s, plugintest.Target{Name: "fake", Remote: true})
	})
	t.Run("process", func(t *testing.T) {
		p, _, _ := launch(t, candidate(t, "sched-fake", ""))
		s, err := p.Scheduler()
		if err != nil {
			t.Fatal(err)
		}
		plugintest.SchedSuite(t, s, plugintest.Target{Name: "fake", Remote: true})
	})
}

func TestIfaceSuite(t *testing.T) {
	t.Run("in-process", func(t *testing.T) {
		a := newArena(t)
		plugintest.IfaceSuite(t, plugintest.NewIface("fake", a), plugintest.Target{Name: "fake", Arena: a})
	})
	t.Run("grpc-harness", func(t *testing.T) {
		a := newArena(t)
		i := harness(t, "iface", &iface.Plugin{Impl: plugintest.NewIface("fake", a), Name: "iface-fake"}).(iface.Interface)
		plugintest.IfaceSuite(t, i, plugintest.Target{Name: "fake", Remote: true, Arena: a})
	})
	t.Run("process", func(t *testing.T) {
		p, a, _ := launch(t, candidate(t, "iface-fake", ""))
		i, err := p.Interface()
		if err != nil {
			t.Fatal(err)
		}
		plugintest.IfaceSuite(t, i, plugintest.Target{Name: "fake", Remote: true, Arena: a})
	})
}
