package core_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Acquiring on no node waits for the writers but moves nothing: the
// device keeps the only valid copy and the registered memory keeps its old
// value. AcquireNoNodeLockAll also keeps the device copy from eviction
// (WontUse cannot free it) until released.
func TestAcquireNoNode(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			for _, tc := range []struct {
				node   int
				pinned bool // the device copy survives WontUse while held
			}{{core.AcquireNoNode, false}, {core.AcquireNoNodeLockAll, true}} {
				x := ramp(100)
				h := register(t, rt, x)
				scal(t, rt, scalOnDev, h, 2)
				if err := h.AcquireOnNode(tc.node, core.R); err != nil {
					t.Fatalf("acquire on node %d: %v", tc.node, err)
				}
				if st := status(t, h, devNode); !st.Valid {
					t.Fatalf("node %d: the device copy is not valid once the writer is over: %+v", tc.node, st)
				}
				if st := status(t, h, 0); st.Valid {
					t.Fatalf("node %d: acquiring on no node fetched the data to RAM", tc.node)
				}
				wantValues(t, "registered memory under a hold on no node", x, func(i int) float32 { return float32(i) })
				// A writer cannot start while the hold is on.
				if err := h.TryAcquire(core.RW); !errors.Is(err, core.ErrWouldBlock) {
					t.Fatalf("node %d: TryAcquire(RW) under the hold: %v, want ErrWouldBlock", tc.node, err)
				}
				if err := h.WontUse(); err != nil {
					t.Fatal(err)
				}
				if err := rt.WaitForAll(); err != nil {
					t.Fatal(err)
				}
				if st := status(t, h, devNode); st.Allocated != tc.pinned {
					t.Fatalf("node %d: after WontUse under the hold, device copy allocated = %v, want %v", tc.node, st.Allocated, tc.pinned)
				}
				if err := h.ReleaseOnNode(0); err == nil {
					t.Fatalf("node %d: release on RAM of a hold on no node succeeded", tc.node)
				}
				if err := h.ReleaseOnNode(tc.node); err != nil {
					t.Fatal(err)
				}
				// Released, the copy can go.
				if err := h.WontUse(); err != nil {
					t.Fatal(err)
				}
				if err := rt.WaitForAll(); err != nil {
					t.Fatal(err)
				}
				if st := status(t, h, devNode); st.Allocated {
					t.Fatalf("node %d: the device copy is still allocated after release and WontUse: %+v", tc.node, st)
				}
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
				wantValues(t, "x", x, func(i int) float32 { return 2 * float32(i) })
			}
		})
	}
}

// The callback acquisition on no node runs its callback once the writer
// is over, without bringing the data to RAM.
func TestAcquireNoNodeCB(t *testing.T) {
	rt, scalOnDev := devices[0].start(t, 1<<20)
	x := ramp(10)
	h := register(t, rt, x)
	scal(t, rt, scalOnDev, h, 3)
	done := make(chan error, 1)
	if err := h.AcquireOnNodeCB(core.AcquireNoNodeLockAll, core.R, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := status(t, h, 0); st.Valid {
		t.Fatal("acquiring on no node fetched the data to RAM")
	}
	if err := h.ReleaseOnNode(core.AcquireNoNodeLockAll); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "x", x, func(i int) float32 { return 3 * float32(i) })
}

// TryAcquireOnNode acquires on the device when nothing conflicts, and
// refuses at once, changing nothing, while an acquisition conflicts.
func TestTryAcquireOnNode(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := ramp(50)
			h := register(t, rt, x)
			if err := h.TryAcquireOnNode(7, core.R); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("try acquire on node 7: %v, want ErrInvalidData", err)
			}
			if err := h.Acquire(core.RW); err != nil {
				t.Fatal(err)
			}
			for _, node := range []int{devNode, core.AcquireNoNode} {
				if err := h.TryAcquireOnNode(node, core.R); !errors.Is(err, core.ErrWouldBlock) || !strings.Contains(err.Error(), "an acquisition is pending") {
					t.Fatalf("try acquire on node %d under a RW hold: %v, want ErrWouldBlock", node, err)
				}
			}
			if st := status(t, h, devNode); st.Allocated {
				t.Fatalf("a refused try allocated on the device: %+v", st)
			}
			x[0] = 5
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
			if err := h.TryAcquireOnNode(devNode, core.RW); err != nil {
				t.Fatal(err)
			}
			if st := status(t, h, devNode); !st.Valid || status(t, h, 0).Valid {
				t.Fatalf("after a writing try on the device: device %+v, RAM %+v; want the device alone valid", st, status(t, h, 0))
			}
			if err := h.ReleaseOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnDev, h, 2)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x", x, func(i int) float32 {
				if i == 0 {
					return 10
				}
				return 2 * float32(i)
			})
		})
	}
}

// An allocation size makes every copy take that much memory: two vectors
// that each reserve 600 KiB cannot both stay on a 1 MiB device, while the
// same vectors without it can; the data moves as usual.
func TestRegisterAllocSize(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			for _, tc := range []struct {
				allocSize uint64
				evicted   bool
			}{{0, false}, {600 << 10, true}} {
				xs := [2][]float32{ramp(16), ramp(16)}
				var hs [2]*core.Handle
				for i, x := range xs {
					h, err := core.RegisterVectorAllocSize(rt, x, tc.allocSize)
					if err != nil {
						t.Fatal(err)
					}
					hs[i] = h
					want := tc.allocSize
					if want == 0 {
						want = 64
					}
					if got := h.AllocatedSize(); got != want {
						t.Fatalf("AllocatedSize() = %d, want %d", got, want)
					}
					if got := h.Size(); got != 64 {
						t.Fatalf("Size() = %d, want 64", got)
					}
					scal(t, rt, scalOnDev, h, 2)
					if err := rt.WaitForAll(); err != nil {
						t.Fatal(err)
					}
					ni, err := h.InterfaceOn(devNode)
					if err != nil {
						t.Fatal(err)
					}
					if !ni.Allocated || ni.AllocSize != want {
						t.Fatalf("on the device: %+v, want allocated with %d bytes", ni, want)
					}
				}
				if st := status(t, hs[0], devNode); st.Allocated == tc.evicted {
					t.Fatalf("allocation size %d: first vector allocated on the device = %v, want %v", tc.allocSize, st.Allocated, !tc.evicted)
				}
				for i, h := range hs {
					if err := h.Unregister(); err != nil {
						t.Fatal(err)
					}
					wantValues(t, "x", xs[i], func(i int) float32 { return 2 * float32(i) })
				}
			}
			m := make([]float32, 10*5)
			h, err := core.RegisterMatrixAllocSize(rt, m, 10, 7, 5, 4096)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.AllocatedSize(); got != 4096 {
				t.Fatalf("matrix AllocatedSize() = %d, want 4096", got)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				reg  func() (*core.Handle, error)
			}{
				{"vector", func() (*core.Handle, error) { return core.RegisterVectorAllocSize(rt, ramp(16), 63) }},
				{"matrix", func() (*core.Handle, error) { return core.RegisterMatrixAllocSize(rt, m, 10, 7, 5, 46*4) }},
			} {
				if _, err := tc.reg(); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "less than") {
					t.Errorf("%s with an allocation size below its bytes: %v, want ErrInvalidData", tc.name, err)
				}
			}
		})
	}
}

// The node's cache keeps a freed allocation for reuse until TidyMemory
// gives it back; a handle that does not cache neither leaves its
// allocation there nor takes one from it.
func TestDontCacheAndTidyMemory(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, _ := d.start(t, 1<<20)
			if _, err := rt.TidyMemory(7); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("tidy node 7: %v, want ErrInvalidData", err)
			}
			if n, err := rt.TidyMemory(0); n != 0 || err != nil {
				t.Fatalf("tidy RAM: %d, %v; want 0, nil", n, err)
			}
			onDevice := func(dontCache bool) *core.Handle {
				t.Helper()
				h := register(t, rt, ramp(1000))
				h.SetDontCache(dontCache)
				if h.DontCache() != dontCache {
					t.Fatalf("DontCache() = %v after SetDontCache(%v)", h.DontCache(), dontCache)
				}
				r, err := h.RequestAllocation(devNode)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Wait(); err != nil {
					t.Fatal(err)
				}
				return h
			}
			tidy := func(want uint64) {
				t.Helper()
				n, err := rt.TidyMemory(devNode)
				if err != nil || n != want {
					t.Fatalf("TidyMemory: %d bytes, %v; want %d", n, err, want)
				}
			}
			for _, tc := range []struct {
				dontCache bool
				cached    uint64
			}{{false, 4000}, {true, 0}} {
				h := onDevice(tc.dontCache)
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
				tidy(tc.cached)
				tidy(0)
			}
			// A cached allocation of the right size is left alone by a
			// handle that does not cache.
			h := onDevice(false)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			h = onDevice(true)
			tidy(4000)
			if err := h.Invalidate(); err != nil {
				t.Fatal(err)
			}
			tidy(0)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// InterfaceOn shows the data as registered in RAM and packed on the device,
// allocated and valid as the requests leave it.
func TestInterfaceOn(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, _ := d.start(t, 1<<20)
			const ld, nx, ny = 10, 7, 5
			h, err := core.RegisterMatrix(rt, make([]float32, ld*ny), ld, nx, ny)
			if err != nil {
				t.Fatal(err)
			}
			ram, err := h.InterfaceOn(0)
			if err != nil {
				t.Fatal(err)
			}
			want := core.NodeInterface{Layout: h.Layout(), Allocated: true, Valid: true, Pointer: uintptr(h.LocalPointer()), AllocSize: h.AllocatedSize()}
			if ram != want {
				t.Fatalf("on RAM: %+v, want %+v", ram, want)
			}
			packed := h.Layout()
			packed.LD = nx
			dev := func() core.NodeInterface {
				t.Helper()
				ni, err := h.InterfaceOn(devNode)
				if err != nil {
					t.Fatal(err)
				}
				if ni.Layout != packed || ni.AllocSize != nx*ny*4 {
					t.Fatalf("on the device: layout %+v, %d bytes; want %+v, %d", ni.Layout, ni.AllocSize, packed, nx*ny*4)
				}
				return ni
			}
			if ni := dev(); ni.Allocated || ni.Valid || ni.Pointer != 0 {
				t.Fatalf("on the device before any request: %+v", ni)
			}
			r, err := h.RequestAllocation(devNode)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			p, err := h.PointerOn(devNode)
			if err != nil {
				t.Fatal(err)
			}
			if ni := dev(); !ni.Allocated || ni.Valid || ni.Pointer != p {
				t.Fatalf("on the device after an allocation: %+v, want allocated, not valid, pointer %d", ni, p)
			}
			if err := h.FetchOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			if ni := dev(); !ni.Allocated || !ni.Valid || ni.Pointer != p {
				t.Fatalf("on the device after a fetch: %+v, want allocated and valid at %d", ni, p)
			}
			if _, err := h.InterfaceOn(7); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("interface on node 7: %v, want ErrInvalidData", err)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			if _, err := h.InterfaceOn(0); !errors.Is(err, core.ErrUnregistered) {
				t.Fatalf("interface of an unregistered handle: %v, want ErrUnregistered", err)
			}
		})
	}
}

// Data registered without home takes Malloc memory as its RAM copy: tasks
// on RAM and on the device work on it, and it holds the final value after
// Unregister.
func TestPtrRegister(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			h, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 16})
			if err != nil {
				t.Fatal(err)
			}
			mem, err := core.Malloc[float32](rt, 16)
			if err != nil {
				t.Fatal(err)
			}
			copy(mem, ramp(16))
			if err := core.PtrRegister(h, 0, mem); err != nil {
				t.Fatal(err)
			}
			if h.LocalPointer() != unsafe.Pointer(&mem[0]) {
				t.Fatal("the RAM copy is not the memory given")
			}
			scal(t, rt, scalOnCPU, h, 2)
			scal(t, rt, scalOnDev, h, 3)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "mem", mem, func(i int) float32 { return 6 * float32(i) })
			if err := core.Free(rt, mem); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// PtrRegister refuses, changing nothing, what it cannot honour.
func TestPtrRegisterRefused(t *testing.T) {
	rt, _ := devices[0].start(t, 1<<20)
	noHome := func() *core.Handle {
		t.Helper()
		h, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 16})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	malloc := func(n int) []float32 {
		t.Helper()
		m, err := core.Malloc[float32](rt, n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	inPlace := malloc(32)
	if _, err := core.RegisterVector(rt, inPlace[8:24]); err != nil {
		t.Fatal(err)
	}
	accessed := noHome()
	if err := accessed.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	if err := accessed.Release(); err != nil {
		t.Fatal(err)
	}
	gone := noHome()
	if err := gone.Unregister(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		is   error
		why  string
	}{
		{"device node", func() error { return core.PtrRegister(noHome(), devNode, malloc(16)) }, core.ErrInvalidData, "no device buffer to give"},
		{"no such node", func() error { return core.PtrRegister(noHome(), 7, malloc(16)) }, core.ErrInvalidData, "does not exist"},
		{"Go memory", func() error { return core.PtrRegister(noHome(), 0, make([]float32, 16)) }, core.ErrInvalidData, "not allocated with Malloc"},
		{"too short", func() error { return core.PtrRegister(noHome(), 0, malloc(15)) }, core.ErrInvalidData, "the data needs 64"},
		{"element size", func() error {
			m, err := core.Malloc[float64](rt, 16)
			if err != nil {
				return err
			}
			return core.PtrRegister(noHome(), 0, m)
		}, core.ErrInvalidData, "8-byte elements for data of 4-byte elements"},
		{"has a home", func() error { return core.PtrRegister(register(t, rt, ramp(16)), 0, malloc(16)) }, core.ErrInvalidData, "has memory in RAM already"},
		{"accessed", func() error { return core.PtrRegister(accessed, 0, malloc(16)) }, core.ErrInvalidData, "accessed already"},
		{"another handle's memory", func() error { return core.PtrRegister(noHome(), 0, inPlace[16:]) }, core.ErrInvalidData, "the memory holds"},
		{"unregistered", func() error { return core.PtrRegister(gone, 0, malloc(16)) }, core.ErrUnregistered, ""},
	} {
		if err := tc.call(); !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.is, tc.why)
		}
	}
	// A refused handle is as it was: zeros, in its own memory.
	h := noHome()
	short := malloc(15)
	if err := core.PtrRegister(h, 0, short); err == nil {
		t.Fatal("short memory accepted")
	}
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice((*float32)(h.LocalPointer()), 16)
	if h.LocalPointer() == unsafe.Pointer(&short[0]) || got[3] != 0 {
		t.Fatal("a refused PtrRegister changed the handle")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
}
