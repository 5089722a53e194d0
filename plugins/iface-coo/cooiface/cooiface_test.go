package cooiface

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
)

// TestConformance runs the conformance kit on Spec in process; the
// plugin's main_test.go runs it across the process boundary.
func TestConformance(t *testing.T) {
	a := ifacetest.Arena(t, 1<<24)
	i, err := ifacesdk.New(Spec(), a)
	if err != nil {
		t.Fatal(err)
	}
	m, parts, err := coo.Parts([]uint32{0, 2, 2, 1}, []uint32{1, 0, 2, 1}, []float64{1, 2, 3, 4}, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	other := m
	other.NX = 4
	ifacetest.Conformance(t, i, a, m.Encode(), parts, other.Encode())
}
