package core

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// TestFootprint pins the task footprints, which stored performance models
// key their entries on (a change would orphan every calibration), and
// checks that a handle's own footprint is that of a task of it alone.
func TestFootprint(t *testing.T) {
	vec := &Handle{layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 1000}, size: 4000}
	mat := &Handle{layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 8, NX: 10, NY: 20, LD: 10}, size: 1600}
	// Not in the footprint: where the rows start (LD, LDZ).
	matLD := &Handle{layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 8, NX: 10, NY: 20, LD: 16}, size: 2560}
	blk := &Handle{layout: kernel.Layout{Interface: kernel.Block, ElemSize: 8, NX: 2, NY: 3, NZ: 4, LD: 2, LDZ: 6}, size: 192}
	csr := &Handle{iface: &ifaceData{inst: &ifaceInst{nameHash: fnv32("csr")}, desc: &iface.Description{Footprint: 0xdeadbeef, Size: 4242}}, size: 5000}
	for _, tc := range []struct {
		name string
		hs   []*Handle
		fp   uint32
		size uint64
	}{
		{"no handle", nil, 0x811c9dc5, 0},
		{"vector", []*Handle{vec}, 0xf013e0c6, 4000},
		{"matrix", []*Handle{mat}, 0x35549be0, 1600},
		{"matrix, other leading dimension", []*Handle{matLD}, 0x35549be0, 2560},
		{"block", []*Handle{blk}, 0xecd2d70c, 192},
		{"plugin interface", []*Handle{csr}, 0x4c0691b, 4242},
		{"vector, matrix", []*Handle{vec, mat}, 0x22985c03, 5600},
		{"matrix, vector", []*Handle{mat, vec}, 0x69f627f3, 5600},
		{"plugin, vector, block", []*Handle{csr, vec, blk}, 0x3fa4842d, 8434},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp, size := footprint(&Task{Handles: tc.hs})
			if fp != tc.fp || size != tc.size {
				t.Errorf("footprint %#x, size %d; want %#x, %d", fp, size, tc.fp, tc.size)
			}
			if len(tc.hs) == 1 && tc.hs[0].footprint() != fp {
				t.Errorf("the handle's footprint %#x, a task of it alone %#x: want them equal", tc.hs[0].footprint(), fp)
			}
		})
	}
}
