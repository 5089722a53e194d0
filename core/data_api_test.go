package core_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// devNode is the device's memory node in the device tests: RAM is 0.
const devNode = 1

func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	return x
}

func register(t *testing.T, rt *core.Runtime, x []float32) *core.Handle {
	t.Helper()
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func wantValues(t *testing.T, what string, x []float32, f func(i int) float32) {
	t.Helper()
	for i, v := range x {
		if v != f(i) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, v, f(i))
		}
	}
}

func status(t *testing.T, h *core.Handle, node int) core.DataStatus {
	t.Helper()
	st, err := h.QueryStatus(node)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// AcquireOnNode brings the data to the device and keeps it there, valid,
// until ReleaseOnNode on the same node; a writing acquisition leaves the
// device with the only valid copy, which later tasks and Unregister find.
func TestAcquireOnNode(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := ramp(100)
			h := register(t, rt, x)
			if err := h.AcquireOnNode(7, core.R); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("acquire on node 7: %v, want ErrInvalidData", err)
			}
			scal(t, rt, scalOnDev, h, 2)
			if err := h.AcquireOnNode(devNode, core.R); err != nil {
				t.Fatal(err)
			}
			if st := status(t, h, devNode); !st.Allocated || !st.Valid {
				t.Fatalf("device status %+v under a read acquisition, want allocated and valid", st)
			}
			if err := h.ReleaseOnNode(0); err == nil {
				t.Fatal("release on RAM of an acquisition on the device succeeded")
			}
			if err := h.ReleaseOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			if err := h.ReleaseOnNode(devNode); err == nil {
				t.Fatal("second release succeeded")
			}
			if err := h.AcquireOnNode(devNode, core.RW); err != nil {
				t.Fatal(err)
			}
			if h.IsOnNode(0) || !h.IsOnNode(devNode) {
				t.Fatalf("after a writing acquisition on the device: on RAM %v, on device %v; want only the device", h.IsOnNode(0), h.IsOnNode(devNode))
			}
			if err := h.ReleaseOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnCPU, h, 3)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x", x, func(i int) float32 { return float32(6 * i) })
		})
	}
}

// An allocation needing the memory that an acquisition on the device pins
// waits for ReleaseOnNode, then evicts the released data. (The engine takes
// the allocation request before the release: it runs calls in order.)
func TestAcquireOnNodePinsMemory(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			big := register(t, rt, make([]float32, 1<<18)) // the whole device
			if err := big.AcquireOnNode(devNode, core.R); err != nil {
				t.Fatal(err)
			}
			x := ramp(4)
			h := register(t, rt, x)
			r, err := h.RequestAllocation(devNode)
			if err != nil {
				t.Fatal(err)
			}
			if err := big.ReleaseOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			if st := status(t, big, devNode); st.Allocated {
				t.Fatalf("released data after an allocation needed its room: %+v, want evicted", st)
			}
			scal(t, rt, scalOnDev, h, 2)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x", x, func(i int) float32 { return float32(2 * i) })
		})
	}
}

// AcquireCB returns at once; its callback runs after the tasks before it,
// with the data in place, and releases it.
func TestAcquireCB(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := ramp(100)
			h := register(t, rt, x)
			scal(t, rt, scalOnDev, h, 2)
			got := make(chan []float32, 1)
			if err := h.AcquireCB(core.R, func(err error) {
				if err != nil {
					t.Error(err)
				}
				got <- slices.Clone(x)
				if err := h.Release(); err != nil {
					t.Error(err)
				}
			}); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x in the callback", <-got, func(i int) float32 { return float32(2 * i) })

			onDev := make(chan bool, 1)
			if err := h.AcquireOnNodeCB(devNode, core.RW, func(err error) {
				if err != nil {
					t.Error(err)
				}
				onDev <- h.IsOnNode(devNode) && !h.IsOnNode(0)
				if err := h.ReleaseOnNode(devNode); err != nil {
					t.Error(err)
				}
			}); err != nil {
				t.Fatal(err)
			}
			if !<-onDev {
				t.Fatal("in the callback of a writing acquisition on the device, the device is not the only valid node")
			}
			if err := h.AcquireCB(core.R, nil); !errors.Is(err, core.ErrInvalidTask) {
				t.Fatalf("nil callback: %v, want ErrInvalidTask", err)
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Blocking calls from callbacks fail with ErrDeadlock: from a task's
// callback run by the engine, from a synchronisation task's callback run by
// the submitting goroutine, and from an acquisition's callback.
func TestAcquireFromCallbackDeadlock(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h := register(t, rt, ramp(10))
	other := register(t, rt, ramp(10))
	errs := make(chan error, 1)
	task := &core.Task{Codelet: scalF32, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(),
		Callback: func(*core.Task) { errs <- other.Acquire(core.R) }}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, core.ErrDeadlock) {
		t.Fatalf("acquire from a task callback: %v, want ErrDeadlock", err)
	}
	sync := &core.Task{Callback: func(*core.Task) { errs <- other.FetchOnNode(0) }}
	if err := rt.Submit(sync); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, core.ErrDeadlock) {
		t.Fatalf("fetch from a synchronisation task's callback: %v, want ErrDeadlock", err)
	}
	if err := h.AcquireCB(core.R, func(error) {
		errs <- other.AcquireOnNode(0, core.RW)
		h.Release()
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, core.ErrDeadlock) {
		t.Fatalf("acquire from an acquisition callback: %v, want ErrDeadlock", err)
	}
	// The same calls from an ordinary goroutine work.
	if err := other.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(); err != nil {
		t.Fatal(err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
}

// Allocation requests, fetches, prefetches and idle prefetches put the
// data on the device; a prefetch that needs eviction is dropped; the
// device pointer exists once allocated.
func TestDataRequests(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, _ := d.start(t, 1<<20)
			x := ramp(1000)
			h := register(t, rt, x)
			if _, err := h.PointerOn(devNode); err == nil {
				t.Fatal("device pointer of data never allocated there")
			}
			r, err := h.RequestAllocation(devNode)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			if st := status(t, h, devNode); !st.Allocated || st.Valid || st.Requested {
				t.Fatalf("after an allocation request: %+v, want allocated only", st)
			}
			if _, err := h.PointerOn(devNode); err != nil {
				t.Fatal(err)
			}
			if err := h.FetchOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			if !h.IsOnNode(devNode) || !h.IsOnNode(0) {
				t.Fatal("after a fetch, the data is not on the device and RAM")
			}
			requests := []struct {
				name string
				do   func() (*core.DataRequest, error)
			}{
				{"fetch async", func() (*core.DataRequest, error) { return h.FetchOnNodeAsync(devNode) }},
				{"prefetch", func() (*core.DataRequest, error) { return h.PrefetchOnNode(devNode, 5) }},
				{"idle prefetch", func() (*core.DataRequest, error) { return h.IdlePrefetchOnNode(devNode, 0) }},
			}
			for _, req := range requests {
				// A CPU task writes the RAM copy: the request is ordered
				// after it and brings the new value.
				scal(t, rt, scalOnCPU, h, 2)
				r, err := req.do()
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Wait(); err != nil {
					t.Fatalf("%s: %v", req.name, err)
				}
				if !h.IsOnNode(devNode) {
					t.Fatalf("%s: the data is not on the device", req.name)
				}
			}
			if _, err := h.PrefetchOnNode(devNode, core.MaxPriority+1); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("priority out of range: %v, want ErrInvalidData", err)
			}
			if _, err := h.FetchOnNodeAsync(-1); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("node -1: %v, want ErrInvalidData", err)
			}

			// Fill the device with a held handle: a prefetch is dropped,
			// an allocation request evicts once the hold is over.
			big := register(t, rt, make([]float32, 1<<18))
			if err := big.AcquireOnNode(devNode, core.R); err != nil {
				t.Fatal(err)
			}
			small := register(t, rt, ramp(4))
			r, err = small.PrefetchOnNode(devNode, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err == nil || !strings.Contains(err.Error(), "dropped") {
				t.Fatalf("prefetch to a full device: %v, want dropped", err)
			}
			if small.IsOnNode(devNode) {
				t.Fatal("a dropped prefetch left the data on the device")
			}
			if err := big.ReleaseOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			if err := small.FetchOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			if st := status(t, big, devNode); st.Allocated {
				t.Fatalf("big after a fetch needing its room: %+v, want evicted", st)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x", x, func(i int) float32 { return float32(8 * i) })
		})
	}
}

// Without devices every request is satisfied by RAM at once.
func TestDataRequestsRAMOnly(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h := register(t, rt, ramp(10))
	r, err := h.PrefetchOnNode(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := h.FetchOnNode(0); err != nil {
		t.Fatal(err)
	}
	if st := status(t, h, 0); !st.Allocated || !st.Valid || st.Requested {
		t.Fatalf("RAM status %+v", st)
	}
	if !h.IsOnNode(0) || h.IsOnNode(1) {
		t.Fatal("IsOnNode: want RAM only")
	}
	if _, err := h.RequestAllocation(1); !errors.Is(err, core.ErrInvalidData) {
		t.Fatalf("allocation on node 1 without devices: %v, want ErrInvalidData", err)
	}
}

// WontUse writes the device's value back to RAM and frees the device copy
// once the tasks before it are over.
func TestWontUse(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := ramp(1000)
			h := register(t, rt, x)
			scal(t, rt, scalOnDev, h, 2)
			scal(t, rt, scalOnDev, h, 2)
			if err := h.WontUse(); err != nil {
				t.Fatal(err)
			}
			// A writing acquisition waits for WontUse and moves no data:
			// RAM holds the device's value only if it was written back.
			if err := h.Acquire(core.W); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x", x, func(i int) float32 { return float32(4 * i) })
			if st := status(t, h, devNode); st.Allocated {
				t.Fatalf("device status after WontUse: %+v, want freed", st)
			}
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
			// On a partitioned handle it is a hint for the children,
			// never an error.
			parts, err := h.Partition(core.VectorBlocks(2, 0))
			if err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnDev, parts[1], 2)
			if err := h.WontUse(); err != nil {
				t.Fatalf("WontUse on a partitioned handle: %v", err)
			}
			if err := parts[1].Acquire(core.W); err != nil {
				t.Fatal(err)
			}
			if st := status(t, parts[1], devNode); st.Allocated {
				t.Fatalf("child's device status after WontUse on the parent: %+v, want freed", st)
			}
			if err := parts[1].Release(); err != nil {
				t.Fatal(err)
			}
			if err := h.Unpartition(); err != nil {
				t.Fatal(err)
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			if err := h.WontUse(); !errors.Is(err, core.ErrUnregistered) {
				t.Fatalf("WontUse after Unregister: %v, want ErrUnregistered", err)
			}
		})
	}
}

// With RAM in its write-through mask, a task writing on the device leaves
// RAM valid when it completes: memory from Malloc, registered in place,
// holds the result without an acquisition.
func TestWriteThroughToRAM(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x, err := core.Malloc[float32](rt, 1000)
			if err != nil {
				t.Fatal(err)
			}
			copy(x, ramp(1000))
			h := register(t, rt, x)
			if err := h.SetWTMask(1 << 5); !errors.Is(err, core.ErrInvalidData) {
				t.Fatalf("mask with node 5: %v, want ErrInvalidData", err)
			}
			if err := h.SetWTMask(1 << 0); err != nil {
				t.Fatal(err)
			}
			// Every bit set is StarPU's "every node": RAM and the device.
			if err := h.SetWTMask(^uint64(0)); err != nil {
				t.Fatalf("mask with every bit set: %v", err)
			}
			if want := uint64(1 | 1<<devNode); h.WTMask() != want {
				t.Fatalf("WTMask after ^0 = %#x, want %#x", h.WTMask(), want)
			}
			if err := h.SetWTMask(1 << 0); err != nil {
				t.Fatal(err)
			}
			if h.WTMask() != 1 {
				t.Fatalf("WTMask = %#x", h.WTMask())
			}
			task := scal(t, rt, scalOnDev, h, 3)
			if err := rt.Wait(task); err != nil {
				t.Fatal(err)
			}
			if !h.IsOnNode(0) || !h.IsOnNode(devNode) {
				t.Fatalf("after a device write: on RAM %v, on device %v; want both", h.IsOnNode(0), h.IsOnNode(devNode))
			}
			wantValues(t, "x", x, func(i int) float32 { return float32(3 * i) })
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// UnregisterNoCoherency drops the runtime's copies without writing back;
// UnregisterSubmit returns at once and writes back after the tasks.
func TestUnregisterVariants(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x, err := core.Malloc[float32](rt, 100)
			if err != nil {
				t.Fatal(err)
			}
			copy(x, ramp(100))
			h := register(t, rt, x)
			scal(t, rt, scalOnDev, h, 2) // the device holds the only valid copy
			if err := h.UnregisterNoCoherency(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x after unregister without coherency", x, func(i int) float32 { return float32(i) })
			if err := h.Acquire(core.R); !errors.Is(err, core.ErrUnregistered) {
				t.Fatalf("acquire after unregister: %v, want ErrUnregistered", err)
			}

			y := ramp(1000)
			hy := register(t, rt, y)
			for i := 0; i < 3; i++ {
				cl := scalOnCPU
				if i%2 == 1 {
					cl = scalOnDev
				}
				scal(t, rt, cl, hy, 2)
			}
			if err := hy.UnregisterSubmit(); err != nil {
				t.Fatal(err)
			}
			if err := rt.Submit(&core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{hy}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}); !errors.Is(err, core.ErrUnregistered) {
				t.Fatalf("submit after UnregisterSubmit: %v, want ErrUnregistered", err)
			}
			if err := hy.UnregisterSubmit(); !errors.Is(err, core.ErrUnregistered) {
				t.Fatalf("second UnregisterSubmit: %v, want ErrUnregistered", err)
			}
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "y after UnregisterSubmit", y, func(i int) float32 { return float32(8 * i) })
		})
	}
}

// Invalidate drops every copy; the next writer starts afresh.
// InvalidateSubmit does the same in the tasks' order.
func TestInvalidate(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x := ramp(100)
			h := register(t, rt, x)
			scal(t, rt, scalOnDev, h, 2)
			if err := h.Invalidate(); err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{0, devNode} {
				if st := status(t, h, n); st.Valid || h.IsOnNode(n) {
					t.Fatalf("node %d after Invalidate: %+v, want invalid", n, st)
				}
			}
			if st := status(t, h, devNode); st.Allocated {
				t.Fatalf("device after Invalidate: %+v, want its allocation dropped", st)
			}
			if err := h.Acquire(core.W); err != nil {
				t.Fatal(err)
			}
			for i := range x {
				x[i] = 1
			}
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnDev, h, 5)
			if err := h.InvalidateSubmit(); err != nil {
				t.Fatal(err)
			}
			// A writer submitted after waits for the invalidation.
			if err := h.Acquire(core.W); err != nil {
				t.Fatal(err)
			}
			if st := status(t, h, devNode); st.Allocated {
				t.Fatalf("device after InvalidateSubmit: %+v, want its allocation dropped", st)
			}
			for i := range x {
				x[i] = 7
			}
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnDev, h, 2)
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "x", x, func(int) float32 { return 14 })
		})
	}
}

// When the device is full, the copies of a handle advised as important are
// evicted after the others, least recently used first.
func TestAdviseAsImportant(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			const size = 1 << 18 // 1 MiB of float32
			rt, _ := d.start(t, 3*size*4)
			hs := make([]*core.Handle, 4)
			for k := range hs {
				hs[k] = register(t, rt, make([]float32, size))
			}
			for _, h := range hs[:3] { // fills the device; hs[0] least recently used
				if err := h.AcquireOnNode(devNode, core.R); err != nil {
					t.Fatal(err)
				}
				if err := h.ReleaseOnNode(devNode); err != nil {
					t.Fatal(err)
				}
			}
			hs[0].AdviseAsImportant(true)
			if err := hs[3].FetchOnNode(devNode); err != nil {
				t.Fatal(err)
			}
			want := []bool{true, false, true, true}
			for k, h := range hs {
				if st := status(t, h, devNode); st.Allocated != want[k] {
					t.Errorf("handle %d on the device: %+v, want allocated %v", k, st, want[k])
				}
			}
		})
	}
}

// Names and coordinates are kept and shown in the trace events of the
// tasks using the handle; user data and the out-of-core flag are kept.
func TestHandleLabels(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir), Trace: true})
	h := register(t, rt, ramp(10))
	plain := register(t, rt, ramp(10))
	h.SetName("A")
	h.SetCoordinates(2, 3)
	if h.Name() != "A" || !reflect.DeepEqual(h.Coordinates(), []int{2, 3}) {
		t.Fatalf("name %q, coordinates %v", h.Name(), h.Coordinates())
	}
	type tile struct{ i, j int }
	if h.UserData() != nil {
		t.Fatal("user data before any was set")
	}
	h.SetUserData(tile{2, 3})
	if h.UserData() != (tile{2, 3}) {
		t.Fatalf("user data %v", h.UserData())
	}
	if !h.OOC() {
		t.Fatal("out-of-core flag is off by default")
	}
	h.SetOOC(false)
	if h.OOC() {
		t.Fatal("out-of-core flag still on")
	}
	for _, hh := range []*core.Handle{h, plain} {
		if err := rt.Wait(scal(t, rt, scalOnCPU, hh, 2)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := rt.WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var labelled []any
	tasks := 0
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		tasks++
		if b, ok := e.Args["buffers"]; ok {
			labelled = append(labelled, b)
		}
	}
	want := []any{[]any{map[string]any{"index": 0.0, "handle": h.String(), "name": "A", "coordinates": []any{2.0, 3.0}}}}
	if tasks != 2 || !reflect.DeepEqual(labelled, want) {
		t.Fatalf("%d task events, buffers args %v; want 2 events, %v", tasks, labelled, want)
	}
}

// CopyFrom copies after the tasks writing the source and before those
// reading the destination; the layouts must match in shape.
func TestCopyFrom(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			x, y := ramp(100), make([]float32, 100)
			hx, hy := register(t, rt, x), register(t, rt, y)
			scal(t, rt, scalOnDev, hx, 2)
			if err := hy.CopyFrom(hx); err != nil {
				t.Fatal(err)
			}
			if err := hy.Acquire(core.R); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "y", y, func(i int) float32 { return float32(2 * i) })
			hy.Release()

			scal(t, rt, scalOnCPU, hx, 3)
			done := make(chan error, 1)
			if err := hy.CopyFromAsync(hx, func(err error) { done <- err }); err != nil {
				t.Fatal(err)
			}
			scal(t, rt, scalOnDev, hy, 5) // after the copy
			scal(t, rt, scalOnDev, hx, 0) // after the copy read x
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := hy.Acquire(core.R); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "y", y, func(i int) float32 { return float32(30 * i) })
			hy.Release()

			// Matrices of one shape, different leading dimensions.
			const nx, ny = 7, 5
			a, b := ramp(10*ny), make([]float32, nx*ny)
			ha, err := core.RegisterMatrix(rt, a, 10, nx, ny)
			if err != nil {
				t.Fatal(err)
			}
			hb, err := core.RegisterMatrix(rt, b, nx, nx, ny)
			if err != nil {
				t.Fatal(err)
			}
			if err := hb.CopyFrom(ha); err != nil {
				t.Fatal(err)
			}
			if err := hb.Unregister(); err != nil {
				t.Fatal(err)
			}
			wantValues(t, "b", b, func(k int) float32 { return float32(k%nx + k/nx*10) })

			short := register(t, rt, make([]float32, 99))
			for _, c := range []struct {
				name     string
				dst, src *core.Handle
			}{{"shorter", short, hx}, {"matrix into vector", hy, ha}, {"itself", hx, hx}} {
				if err := c.dst.CopyFrom(c.src); !errors.Is(err, core.ErrInvalidData) {
					t.Errorf("copy %s: %v, want ErrInvalidData", c.name, err)
				}
			}
		})
	}
}

// A handle registered without home is zero until written, packed, and
// freed at Unregister; RegisterSame makes one shaped like another handle,
// plugin interfaces included.
func TestRegisterNoHomeAndSame(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 3, NY: 4})
	if err != nil {
		t.Fatal(err)
	}
	if l := h.Layout(); l.LD != 3 || h.Size() != 48 || h.AllocatedSize() != 48 {
		t.Fatalf("layout %+v, size %d, allocated %d; want packed, 48 bytes", l, h.Size(), h.AllocatedSize())
	}
	b, err := h.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, make([]byte, 48)) {
		t.Fatalf("never written: %v, want zeros", b)
	}
	src, err := core.RegisterMatrix(rt, ramp(12), 3, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CopyFrom(src); err != nil {
		t.Fatal(err)
	}
	scal(t, rt, scalOnCPU, h, 2)
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice((*float32)(h.LocalPointer()), 12)
	wantValues(t, "h", got, func(i int) float32 { return float32(2 * i) })
	h.Release()
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []kernel.Layout{
		{Interface: kernel.Vector, ElemSize: 4},
		{Interface: kernel.Vector, NX: 3},
		{Interface: kernel.Block, ElemSize: 8, NX: 1 << 40, NY: 1 << 40, NZ: 1 << 40},
		{Interface: kernel.FirstPluginInterface, ElemSize: 4, NX: 3},
	} {
		if _, err := rt.RegisterNoHome(l); !errors.Is(err, core.ErrInvalidData) {
			t.Errorf("register without home %+v: %v, want ErrInvalidData", l, err)
		}
	}

	same, err := src.RegisterSame()
	if err != nil {
		t.Fatal(err)
	}
	if same.Layout() != src.Layout() {
		t.Fatalf("RegisterSame layout %+v, want %+v", same.Layout(), src.Layout())
	}
	if b, _ := same.Pack(); !bytes.Equal(b, make([]byte, 48)) {
		t.Fatalf("RegisterSame data %v, want zeros", b)
	}

	hc := registerCSR(t, rt)
	sc, err := hc.RegisterSame()
	if err != nil {
		t.Fatal(err)
	}
	if sc.Interface() != "csr" || sc.Size() != hc.Size() {
		t.Fatalf("RegisterSame of CSR: %s of %d bytes, want csr of %d", sc.Interface(), sc.Size(), hc.Size())
	}
	if err := sc.CopyFrom(hc); err != nil {
		t.Fatal(err)
	}
	pc, _ := hc.Pack()
	ps, _ := sc.Pack()
	if !bytes.Equal(pc, ps) {
		t.Fatal("CSR copy differs from its source")
	}
}

func registerCSR(t *testing.T, rt *core.Runtime) *core.Handle {
	t.Helper()
	nz, ci, rp := laplacian1D(9)
	m, parts, err := csr.Parts(nz, ci, rp, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.RegisterInterface(csr.Name, m.Encode(), parts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Pack gives the data without gaps; Unpack puts it back, leaving the gaps
// of a strided matrix alone; plugin interfaces pack by their copy plan.
func TestPackUnpack(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	const ld, nx, ny = 10, 7, 5
	m := ramp(ld * ny)
	h, err := core.RegisterMatrix(rt, m, ld, nx, ny)
	if err != nil {
		t.Fatal(err)
	}
	if h.Size() != nx*ny*4 || h.AllocatedSize() != ((ny-1)*ld+nx)*4 {
		t.Fatalf("size %d, allocated %d", h.Size(), h.AllocatedSize())
	}
	b, err := h.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(b)) != h.Size() {
		t.Fatalf("packed %d bytes, size %d", len(b), h.Size())
	}
	for k := 0; k < nx*ny; k++ {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		if want := float32(k%nx + k/nx*ld); v != want {
			t.Fatalf("packed element %d = %v, want %v", k, v, want)
		}
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(-v))
	}
	if err := h.Unpack(b); err != nil {
		t.Fatal(err)
	}
	if err := h.Unpack(b[4:]); !errors.Is(err, core.ErrInvalidData) {
		t.Fatalf("unpack of a short buffer: %v, want ErrInvalidData", err)
	}
	scal(t, rt, scalOnCPU, h, 2)
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "m", m, func(k int) float32 {
		if k%ld < nx {
			return float32(-2 * k)
		}
		return float32(k)
	})

	hc := registerCSR(t, rt)
	pc, err := hc.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(pc)) != hc.Size() || hc.Size() == 0 {
		t.Fatalf("CSR packed %d bytes, size %d", len(pc), hc.Size())
	}
	sc, err := hc.RegisterSame()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Unpack(pc); err != nil {
		t.Fatal(err)
	}
	if ps, _ := sc.Pack(); !bytes.Equal(pc, ps) {
		t.Fatal("CSR unpacked into a handle of the same shape packs differently")
	}
}

// Pointers: the RAM replicate, the registered memory, and lookup by the
// registered pointer.
func TestHandlePointers(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	x := ramp(10)
	h := register(t, rt, x)
	p := h.LocalPointer()
	if p == nil || p == unsafe.Pointer(&x[0]) {
		t.Fatalf("local pointer %p: want the RAM replicate, not the registered memory %p", p, &x[0])
	}
	if on, err := h.PointerOn(0); err != nil || on != uintptr(p) {
		t.Fatalf("pointer on RAM %#x, %v; want %p", on, err, p)
	}
	other := ramp(3)
	for _, c := range []struct {
		p    unsafe.Pointer
		want bool
	}{{unsafe.Pointer(&x[9]), true}, {p, true}, {unsafe.Add(p, 39), true}, {unsafe.Add(p, 40), false}, {unsafe.Pointer(&other[0]), false}, {nil, false}} {
		if got := h.PointerIsInside(c.p); got != c.want {
			t.Errorf("PointerIsInside(%p) = %v, want %v", c.p, got, c.want)
		}
	}
	m, err := core.Malloc[float32](rt, 8)
	if err != nil {
		t.Fatal(err)
	}
	hm := register(t, rt, m)
	if hm.LocalPointer() != unsafe.Pointer(&m[0]) {
		t.Fatal("Malloc memory registered in place: local pointer is not the memory")
	}
	for _, c := range []struct {
		p    unsafe.Pointer
		want *core.Handle
	}{{unsafe.Pointer(&x[0]), h}, {unsafe.Pointer(&m[0]), hm}, {unsafe.Pointer(&x[1]), nil}, {p, nil}} {
		if got := rt.Lookup(c.p); got != c.want {
			t.Errorf("Lookup(%p) = %v, want %v", c.p, got, c.want)
		}
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if rt.Lookup(unsafe.Pointer(&x[0])) != nil || h.LocalPointer() != nil {
		t.Fatal("an unregistered handle is still found")
	}
}

// Performance models key a plugin interface's data by the interface's own
// footprint (CSR: its dimensions and non-zeros), not by the layout fields
// it uses for other things: two CSR matrices of one shape that differ only
// in firstentry share a model entry.
func TestPluginInterfaceFootprint(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.ModelDir = t.TempDir()
	rt := start(t, core.Options{Config: cfg})
	reg := func(first uint32) *core.Handle {
		nz, ci, rp := laplacian1D(9)
		for i := range rp {
			rp[i] += first
		}
		m, parts, err := csr.Parts(nz, ci, rp, first)
		if err != nil {
			t.Fatal(err)
		}
		h, err := rt.RegisterInterface(csr.Name, m.Encode(), parts)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := reg(0), reg(1)
	cl := &core.Codelet{Name: "csr_touch", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, Modes: []core.Mode{core.R}, Model: core.HistoryModel}
	run := func(h *core.Handle) *core.Task {
		task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		if err := rt.Wait(task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	for i := 0; i < 40; i++ { // calibrated, with room for outliers left out
		run(a)
	}
	p, err := rt.Profiling(run(b))
	if err != nil {
		t.Fatal(err)
	}
	if p.Predicted <= 0 {
		t.Fatalf("a CSR matrix of the calibrated shape with another firstentry predicted %v, want the calibrated mean", p.Predicted)
	}
}

// devWrite changes h's copy on the in-process device in place, as a kernel
// of the application's would under a hold on the device.
func devWrite(t *testing.T, dev *memDevice, h *core.Handle, f func(i int, v float32) float32) {
	t.Helper()
	p, err := h.PointerOn(devNode)
	if err != nil {
		t.Fatal(err)
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	b := dev.bufs[uint64(p)]
	for i := 0; i < len(b)/4; i++ {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f(i, v)))
	}
}

// What the application writes under a hold on the device reaches its own
// memory: at Acquire in RAM and at Unregister. (The Go memory was taken
// for up to date, as no task had written since: the write was lost.)
func TestDeviceHoldWriteReachesHome(t *testing.T) {
	rt, dev := startWithDevice(t, 1<<20)
	x := ramp(8)
	h := register(t, rt, x)
	must(t, h.AcquireOnNode(devNode, core.RW))
	devWrite(t, dev, h, func(i int, v float32) float32 { return v + 100 })
	must(t, h.ReleaseOnNode(devNode))
	must(t, h.Acquire(core.R))
	got := slices.Clone(x)
	must(t, h.Release())
	must(t, h.Unregister())
	for i := range x {
		if got[i] != float32(i+100) || x[i] != float32(i+100) {
			t.Fatalf("x[%d] = %v under Acquire(R), %v after Unregister; want %v", i, got[i], x[i], i+100)
		}
	}
}

// A fetch to the device that copies the RAM copy while the application
// holds it for writing leaves no valid stale copy behind: at release the
// held copy is the only valid one, as after a task's write. (The fetch's
// first copy was dropped when the hold was granted; it copied again from
// the held RAM copy, the device was left valid with the old value, and
// the next device task worked on it.)
func TestFetchDuringWriteHold(t *testing.T) {
	rt, dev := startWithDevice(t, 1<<20)
	scalOnDev := &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	x := make([]float32, 8)
	h := register(t, rt, x)
	must(t, h.FetchOnNode(devNode)) // allocated on the device
	must(t, h.Acquire(core.RW))
	for i := range x {
		x[i] = 1
	}
	must(t, h.Release()) // RAM alone is valid: 1
	release := dev.holdExecs(0)
	scal(t, rt, scalOnDev, register(t, rt, make([]float32, 8)), 2) // holds the device's ring
	for dev.waiting.Load() == 0 {
		runtime.Gosched()
	}
	r, err := h.FetchOnNodeAsync(devNode) // its copy waits behind the held Exec
	must(t, err)
	must(t, h.Acquire(core.RW))
	for i := range x {
		x[i] = 2
	}
	release() // the first copy lands, stale; the fetch copies again
	must(t, r.Wait())
	must(t, h.Release())
	if st := status(t, h, devNode); st.Valid {
		t.Errorf("the device copy is valid after a writing hold in RAM: %+v", st)
	}
	scal(t, rt, scalOnDev, h, 1)
	must(t, h.Unregister())
	for i, v := range x {
		if v != 2 {
			t.Fatalf("x[%d] = %v, want 2 (the value written under the hold)", i, v)
		}
	}
}

// devRead is h's copy on the in-process device.
func devRead(t *testing.T, dev *memDevice, h *core.Handle) []float32 {
	t.Helper()
	var out []float32
	devWrite(t, dev, h, func(_ int, v float32) float32 {
		out = append(out, v)
		return v
	})
	return out
}

// A fetch to the device racing a copy into the handle leaves no valid
// stale copy: the copy ends as a write. (The copy's write was recorded
// before it wrote RAM; the fetch's retried transfer read RAM meanwhile
// and left the device valid with the value from before, in about one
// round in twelve.) Timing decides whether a round races; 200 rounds
// always had some.
func TestFetchDuringCopy(t *testing.T) {
	rt, dev := startWithDevice(t, 1<<20)
	const n = 200
	x, src := make([]float32, n), make([]float32, n)
	h, hs := register(t, rt, x), register(t, rt, src)
	stale := 0
	for round := 1; round <= 200; round++ {
		must(t, h.Acquire(core.W)) // h in RAM alone: -round
		for i := range x {
			x[i] = float32(-round)
		}
		must(t, h.Release())
		must(t, hs.Acquire(core.W))
		for i := range src {
			src[i] = float32(round)
		}
		must(t, hs.Release())
		r, err := h.FetchOnNodeAsync(devNode)
		must(t, err)
		must(t, h.CopyFromAsync(hs, nil))
		must(t, rt.WaitForAll())
		must(t, r.Wait())
		if !h.IsOnNode(devNode) {
			continue
		}
		must(t, h.AcquireOnNode(devNode, core.R))
		got := devRead(t, dev, h)
		must(t, h.ReleaseOnNode(devNode))
		if got[0] != float32(round) || got[n-1] != float32(round) {
			if stale++; stale <= 3 {
				t.Errorf("round %d: the device copy is valid with %v..%v, want %d", round, got[0], got[n-1], round)
			}
		}
	}
	if stale > 0 {
		t.Fatalf("%d of 200 rounds left a stale valid device copy", stale)
	}
}

// BenchmarkAcquireReleaseRW is a writing hold in RAM and its release on a
// runtime with a device, the handle valid in RAM alone.
func BenchmarkAcquireReleaseRW(b *testing.B) {
	rt, _ := startWithDevice(b, 1<<20)
	x := make([]float32, 256)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := h.Acquire(core.RW); err != nil {
			b.Fatal(err)
		}
		x[0]++
		if err := h.Release(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := h.Unregister(); err != nil {
		b.Fatal(err)
	}
}

// A matrix or block registered without home keeps its leading dimensions,
// and memory given with MatrixPtrRegister must have them: a port of
// starpu_matrix_ptr_register(..., ld, ...) reads the right elements, or is
// told why not (the ld was dropped, and column 1 read back as padding).
func TestNoHomeLeadingDimension(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 2, NY: 3, LD: 4})
	if err != nil {
		t.Fatal(err)
	}
	if l := h.Layout(); l.LD != 4 || h.AllocatedSize() != 40 {
		t.Fatalf("layout %+v, allocated %d; want ld 4, 40 bytes", l, h.AllocatedSize())
	}
	mem, err := core.Malloc[float32](rt, 10)
	if err != nil {
		t.Fatal(err)
	}
	for k := range mem {
		mem[k] = -1 // padding
	}
	for j := range 3 {
		for i := range 2 {
			mem[j*4+i] = float32(10*j + i)
		}
	}
	if err := core.MatrixPtrRegister(h, 0, mem, 2); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "leading dimension 2 for data registered with 4") {
		t.Fatalf("memory with another ld: %v, want it refused naming both", err)
	}
	if err := core.MatrixPtrRegister(h, 0, mem, 4); err != nil {
		t.Fatal(err)
	}
	packed := make([]float32, 6)
	dst, err := core.RegisterMatrix(rt, packed, 2, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.CopyFrom(h); err != nil {
		t.Fatal(err)
	}
	if err := dst.Unregister(); err != nil {
		t.Fatal(err)
	}
	if want := []float32{0, 1, 10, 11, 20, 21}; !slices.Equal(packed, want) {
		t.Fatalf("read back %v, want %v", packed, want)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []kernel.Layout{
		{Interface: kernel.Matrix, ElemSize: 4, NX: 3, NY: 2, LD: 2},
		{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 2, NZ: 2, LD: 1},
		{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 2, NZ: 2, LD: 3, LDZ: 5},
	} {
		if _, err := rt.RegisterNoHome(l); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "below") {
			t.Errorf("register without home %+v: %v, want a leading dimension refused", l, err)
		}
	}
	b, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 2, NZ: 2, LD: 3, LDZ: 8})
	if err != nil {
		t.Fatal(err)
	}
	if l := b.Layout(); l.LD != 3 || l.LDZ != 8 {
		t.Fatalf("block layout %+v, want ldy 3, ldz 8", l)
	}
	bm, _ := core.Malloc[float32](rt, 16)
	if err := core.BlockPtrRegister(b, 0, bm, 3, 6); !errors.Is(err, core.ErrInvalidData) {
		t.Fatalf("block memory with another ldz: %v, want it refused", err)
	}
	if err := core.BlockPtrRegister(b, 0, bm, 3, 8); err != nil {
		t.Fatal(err)
	}
	if err := b.Unregister(); err != nil {
		t.Fatal(err)
	}
}
