package core

// Memory nodes; design note: docs/design/memory.md.

import (
	"fmt"
)

// memNode is a memory node: RAM (node 0, the shared-memory arena) or a
// device memory node owned by a driver. The engine goroutine owns the
// allocation state of device nodes.
type memNode struct {
	id   int
	name string // "RAM", "opencl_0", ...
	// drv and local name the driver that owns the node and its number for
	// the node; worker is the worker whose dispatch ring carries the node's
	// allocations and transfers.
	drv    *driverInst
	local  uint32
	worker *workerState

	capacity uint64
	used     uint64 // bytes allocated on the device, cached ones included
	// cache holds freed allocations by size, for reuse before allocating:
	// tiled algorithms allocate the same sizes over and over.
	cache map[uint64][]uint64
	// reps are the replicates allocated on the node, for eviction.
	reps map[*replicate]struct{}
	// memWaiters wait for tasks to release memory on the node.
	memWaiters []dataWaiter
	// reqs are the application's prefetches to the node (mem_requests.go).
	reqs nodeRequests
}

// setupNodes numbers the memory nodes: RAM first, then each driver's nodes
// in driver order, and records which worker serves each device node.
func (rt *Runtime) setupNodes() error {
	rt.nodes = []*memNode{{id: 0, name: "RAM"}}
	for _, d := range rt.drivers {
		d.nodeBase = len(rt.nodes)
		for i, n := range d.fp.Nodes {
			rt.nodes = append(rt.nodes, &memNode{
				id:       len(rt.nodes),
				name:     fmt.Sprintf("%s_%d", d.fp.Arch, i),
				drv:      d,
				local:    uint32(i + 1),
				capacity: n.Bytes,
				cache:    map[uint64][]uint64{},
				reps:     map[*replicate]struct{}{},
			})
		}
	}
	for _, w := range rt.workers {
		w.node = w.drv.globalNode(w.drv.fp.Units[w.spec.Unit].Node)
		if w.node < 0 || w.node >= len(rt.nodes) {
			return fmt.Errorf("driver-%s: unit %d is on memory node %d, which the driver does not report", w.drv.name, w.spec.Unit, w.drv.fp.Units[w.spec.Unit].Node)
		}
		if n := rt.nodes[w.node]; w.node != 0 && n.worker == nil {
			n.worker = w
		}
	}
	// Device nodes without a worker cannot be reached: drop them from the
	// data layer's view by giving them no capacity.
	for _, n := range rt.nodes[1:] {
		if n.worker == nil {
			n.capacity = 0
		}
	}
	rt.multiNode = len(rt.nodes) > 1
	return nil
}

// globalNode maps a driver's node number to the runtime's.
func (d *driverInst) globalNode(local int) int {
	if local == 0 {
		return 0
	}
	return d.nodeBase + local - 1
}
