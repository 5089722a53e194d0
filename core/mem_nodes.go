package core

// Memory nodes; design note: docs/design/memory.md.

import (
	"fmt"
	"slices"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
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
	// peers are the device nodes, with a worker, that a copy from this one
	// reaches in one Copy (driver.MemoryNode.Peers), posted to this node's
	// worker.
	peers []int
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
	for _, n := range rt.nodes[1:] {
		for _, p := range n.drv.fp.Nodes[n.local-1].Peers {
			if g := n.drv.globalNode(p); n.worker != nil && rt.nodes[g].worker != nil {
				n.peers = append(n.peers, g)
			}
		}
	}
	rt.multiNode = len(rt.nodes) > 1
	return nil
}

// direct tells whether data goes from device node src to device node dst
// in one copy (a peer link), rather than through RAM.
func (rt *Runtime) direct(src, dst int) bool {
	return src != 0 && dst != 0 && slices.Contains(rt.nodes[src].peers, dst)
}

// globalNode maps a driver's node number to the runtime's.
func (d *driverInst) globalNode(local int) int {
	if local == 0 {
		return 0
	}
	return d.nodeBase + local - 1
}

// TidyMemory gives back to the device of memory node node the allocations
// the runtime keeps there for reuse (freed copies of unregistered or
// invalidated data, see SetDontCache), and returns how many bytes that
// was (StarPU's starpu_memchunk_tidy). Data copies are left alone: they
// are evicted when memory runs out. RAM keeps no such cache: its
// allocations go back to the arena when freed, so node 0 returns 0.
func (rt *Runtime) TidyMemory(node int) (uint64, error) {
	if err := rt.usable(); err != nil {
		return 0, err
	}
	if err := rt.checkNode(node); err != nil {
		return 0, fmt.Errorf("tidy memory: %w", err)
	}
	if node == 0 {
		return 0, nil
	}
	var freed uint64
	e := rt.engine
	e.sync(func() { freed = e.tidy(rt.nodes[node]) })
	return freed, nil
}

// placeByNodes narrows where j may run to the workers computing on the
// memory node its buffers name (Codelet.Nodes, Task.Nodes). A worker's
// kernels reach only its own node (the CPU driver's the arena, a device
// driver's its device), so a buffer is accessed on the node it names by
// running the task on a worker of that node, which fetches it there; and
// NodeLocal, NodeFast and NodeSlow, the nodes the worker can reach, are
// all its own. When the architectures left say which workers those are,
// they do; otherwise the task is pinned to the node's one worker.
func (rt *Runtime) placeByNodes(t *Task, j *job, name string) error {
	nodes := t.Codelet.Nodes
	if t.Nodes != nil {
		nodes = t.Nodes
	}
	want, first := -1, -1
	for i, n := range nodes {
		switch n {
		case NodeLocal, NodeFast, NodeSlow:
			continue
		case NodeCPU:
			n = 0
		}
		if t.Handles[i].layout.Interface == kernel.Void {
			continue // no data to place
		}
		if want >= 0 && n != want {
			return fmt.Errorf("%w: task %q: buffer %d is asked on memory node %d (%s) and buffer %d on node %d (%s); a worker's kernels reach only its own node", ErrNoWorker, name, first, want, rt.nodeName(want), i, n, rt.nodeName(n))
		}
		want, first = n, i
	}
	if want < 0 {
		return nil
	}
	var on, elsewhere uint32 // architectures with workers on the node, and off it
	var only *workerState
	count := 0
	for _, w := range rt.workers {
		bit := driver.ArchBit(w.drv.fp.Arch)
		switch {
		case j.archMask&bit == 0 || j.implMaskOf(w.driverIdx) == 0:
		case w.node == want:
			on |= bit
			only = w
			count++
		default:
			elsewhere |= bit
		}
	}
	if on == 0 {
		return fmt.Errorf("%w: task %q: buffer %d is asked on memory node %d (%s), where no worker that can run codelet %q computes", ErrNoWorker, name, first, want, rt.nodeName(want), t.Codelet.Name)
	}
	if j.pinned >= 0 {
		if w := rt.workers[j.pinned]; w.node != want {
			return fmt.Errorf("%w: task %q must run on worker %d, on memory node %d (%s), but buffer %d is asked on node %d (%s)", ErrNoWorker, name, w.id, w.node, rt.nodeName(w.node), first, want, rt.nodeName(want))
		}
		return nil
	}
	j.archMask = on
	if on&elsewhere != 0 {
		if count > 1 {
			return fmt.Errorf("%w: task %q: buffer %d is asked on memory node %d (%s), whose workers have the architecture of workers on other nodes: run it with ExecuteOnWorker", ErrNoWorker, name, first, want, rt.nodeName(want))
		}
		j.pinned = int32(only.id)
	}
	return nil
}
