package core_test

import (
	"errors"
	"testing"

	"github.com/starpu-go/starpu/core"
)

// Tiles of a partitioned matrix are scaled by tasks on CPU and on a device;
// unpartitioning gathers them back into the registered memory.
func TestPartitionTiles(t *testing.T) {
	// The in-process device scales matrices; driver-opencl's scal takes
	// vectors only (see TestPartitionVectorParts for OpenCL).
	for _, d := range devices[:1] {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			const n, ld = 8, 9
			m := make([]float32, ld*n)
			for i := range m {
				m[i] = 1
			}
			h, err := core.RegisterMatrix(rt, m, ld, n, n)
			if err != nil {
				t.Fatal(err)
			}
			tiles, err := h.Partition(core.MatrixTiles(2, 2))
			if err != nil {
				t.Fatal(err)
			}
			if len(tiles) != 4 || tiles[3].Parent() != h || len(h.Children()) != 4 {
				t.Fatalf("%d tiles, parent %v", len(tiles), tiles[3].Parent())
			}
			// Tile i is scaled by i+2, alternately on the CPU and the device.
			for i, tile := range tiles {
				cl := scalOnCPU
				if i%2 == 1 {
					cl = scalOnDev
				}
				scal(t, rt, cl, tile, float32(i+2))
			}
			task := &core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}}
			if err := rt.Submit(task); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("task on a partitioned handle: %v, want ErrInvalidData", err)
			}
			if err := h.Unregister(); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("unregister of a partitioned handle: %v, want ErrInvalidData", err)
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if err := h.Unpartition(); err != nil {
				t.Fatal(err)
			}
			if err := rt.Wait(scal(t, rt, scalOnDev, h, 10)); err != nil { // the whole matrix, on the device
				t.Fatal(err)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < n; j++ {
				for i := 0; i < ld; i++ {
					want := float32(1)
					if i < n {
						want = float32(10 * (2 + i/4 + 2*(j/4)))
					}
					if got := m[i+j*ld]; got != want {
						t.Fatalf("m[%d,%d] = %v, want %v", i, j, got, want)
					}
				}
			}
		})
	}
}

// Parts of a vector alternate between the CPU and the device, twice, and
// come back together.
func TestPartitionVectorParts(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := make([]float32, 1000)
			for i := range x {
				x[i] = 1
			}
			h, err := core.RegisterVector(rt, x)
			if err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnDev, h, 5) // the parent starts on the device
			parts, err := h.Partition(core.VectorBlocks(3, 0))
			if err != nil {
				t.Fatal(err)
			}
			for round := 0; round < 2; round++ {
				for i, p := range parts {
					cl := scalOnCPU
					if (i+round)%2 == 1 {
						cl = scalOnDev
					}
					scal(t, rt, cl, p, float32(i+2))
				}
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if err := h.Unpartition(); err != nil {
				t.Fatal(err)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			for i, v := range x {
				k := 0 // blocks of 334, 333, 333
				if i >= 667 {
					k = 2
				} else if i >= 334 {
					k = 1
				}
				if want := float32(5 * (k + 2) * (k + 2)); v != want {
					t.Fatalf("x[%d] = %v, want %v", i, v, want)
				}
			}
		})
	}
}

// Shutdown writes back the data of handles still partitioned, children on
// devices included.
func TestPartitionShutdown(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := make([]float32, 100)
			for i := range x {
				x[i] = 1
			}
			h, err := core.RegisterVector(rt, x)
			if err != nil {
				t.Fatal(err)
			}
			parts, err := h.Partition(core.VectorBlocks(4, 0))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				scal(t, rt, scalOnDev, p, 3)
			}
			if err := rt.Shutdown(); err != nil {
				t.Fatal(err)
			}
			for i, v := range x {
				if v != 3 {
					t.Fatalf("x[%d] = %v after shutdown, want 3", i, v)
				}
			}
		})
	}
}

// A built-in filter that does not fit the handle is refused with
// ErrInvalidData, by Partition and by partition plans, and the handle
// stays usable.
func TestPartitionRefused(t *testing.T) {
	rt := startWorkers(t, 1, nil)
	v := make([]float32, 10)
	h, err := core.RegisterVector(rt, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    core.Filter
	}{
		{"too many parts", core.VectorBlocks(11, 0)},
		{"zero parts", core.VectorBlocks(0, 0)},
		{"shadow too wide", core.VectorBlocks(2, 5)},
		{"wrong interface", core.MatrixTiles(2, 2)},
		{"list too long", core.VectorList(6, 6)},
	} {
		if _, err := h.Partition(tc.f); !errors.Is(err, core.ErrInvalidData) {
			t.Errorf("%s: Partition: %v, want ErrInvalidData", tc.name, err)
		}
		if _, err := h.Plan(tc.f); !errors.Is(err, core.ErrInvalidData) {
			t.Errorf("%s: Plan: %v, want ErrInvalidData", tc.name, err)
		}
	}
	if _, err := h.Partition(core.VectorBlocks(2, 0)); err != nil {
		t.Fatalf("a fitting filter after refused ones: %v", err)
	}
}
