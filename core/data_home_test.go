package core_test

import (
	"context"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

func TestHomeNode(t *testing.T) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	v, err := core.RegisterVector(rt, make([]float64, 8))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := v.Partition(core.VectorBlocks(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	noHome, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 16})
	if err != nil {
		t.Fatal(err)
	}
	same, err := v.RegisterSame()
	if err != nil {
		t.Fatal(err)
	}
	void, err := rt.RegisterVoid()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    *core.Handle
		want int
	}{
		{"vector", v, 0}, {"its child", parts[1], 0}, {"no home", noHome, -1}, {"register same", same, -1}, {"void", void, -1},
	} {
		if got := tc.h.HomeNode(); got != tc.want {
			t.Errorf("%s: HomeNode() = %d, want %d", tc.name, got, tc.want)
		}
	}
}
