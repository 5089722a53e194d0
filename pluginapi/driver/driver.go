// Package driver is the contract between the core and a device driver plugin,
// after StarPU's driver operations: the core owns one worker per device unit,
// and the driver runs StarPU's cycle for each (init, run_once while running,
// deinit), taking tasks from and returning completions to shared-memory rings.
// The control plane (fingerprint, init, deinit, device memory) goes over gRPC
// when the driver is out of process; the same Go interface is implemented in
// process, so the core cannot tell the two apart.
package driver

import (
	"context"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// Arch is a worker architecture: the key under which a codelet names its
// implementations.
type Arch string

// The architectures the runtime knows.
const (
	CPU    Arch = "cpu"
	CUDA   Arch = "cuda"
	OpenCL Arch = "opencl"
)

// ArchBit is the bit of an architecture in a task's architecture mask.
func ArchBit(a Arch) uint32 {
	switch a {
	case CPU:
		return 1
	case CUDA:
		return 2
	case OpenCL:
		return 4
	}
	return 0
}

// ArchIndex numbers the architectures densely (CPU 0, CUDA 1, OpenCL 2), for
// per-architecture tables such as predicted task lengths; -1 for an unknown
// architecture.
func ArchIndex(a Arch) int {
	switch a {
	case CPU:
		return 0
	case CUDA:
		return 1
	case OpenCL:
		return 2
	}
	return -1
}

// Unit is one device unit a driver can run a worker on (a CPU core, a GPU).
type Unit struct {
	Name string
	// Node is the memory node the unit computes on: 0 is the shared-memory RAM
	// node; the driver's own memory nodes are numbered from 1, in the order
	// of Fingerprint.Nodes. The core maps them to runtime-wide node numbers;
	// messages to the driver always use the driver's numbering.
	Node int
}

// MemoryNode is a memory node a driver owns besides RAM.
type MemoryNode struct {
	Name string
	// Bytes is the memory the core may use on the node: the device's, or
	// less when the user limits it (STARPU_LIMIT_OPENCL_MEM and the like).
	// The core keeps its allocations under it, evicting replicates when full.
	Bytes uint64
	// Peers are the driver's other nodes (numbered as Units' Node, from 1)
	// that a Copy can reach straight from this node, device to device
	// (CUDA's peer access). The core sends such a copy to the worker of
	// this node, the source, which orders the read with its own later
	// commands on the buffer; data going to a node not listed goes
	// through RAM, as two copies.
	Peers []int
}

// Fingerprint is what a driver found on the machine and what it can run.
type Fingerprint struct {
	Arch  Arch
	Units []Unit
	Nodes []MemoryNode
	// Kernels lists the kernels the driver hosts, by name. A task's kernel is
	// sent to the driver as an index into this list, extended by LoadKernel.
	Kernels []string
	// Note says why the driver found no unit, when Units is empty ("no
	// OpenCL platform", "CPU devices need STARPU_OPENCL_ON_CPUS=1").
	Note string
	// SchedRing says the driver's workers on the RAM node read a second
	// dispatch ring, WorkerSpec.SchedRing, which the scheduler writes.
	SchedRing bool
	// Parallel says the driver's workers run parallel tasks together
	// (wire.ExecSPMD, wire.ExecForkJoin; Teams does the meeting): the core
	// then forms combined workers from its workers on the RAM node. A
	// driver without it runs every task on one worker.
	Parallel bool
}

// MaxNodes bounds the memory nodes one driver may report besides RAM. The
// core keeps state per memory node for every datum, so a fingerprint with
// more (a machine has a handful of devices, 16 GPUs on the largest nodes) is
// refused rather than paid for at every registration.
const MaxNodes = 64

// Check verifies what a driver said about itself before the core relies on
// it: the architecture is one the runtime knows (CPU, CUDA, OpenCL: a
// driver of another could run no task), there are at most MaxNodes memory
// nodes, and every unit computes on RAM (0) or on one of the driver's own
// nodes (1 to len(Nodes)), never on a node number that would land on
// another driver's memory; a node's peers are likewise the driver's other
// nodes.
func (fp *Fingerprint) Check() error {
	if ArchIndex(fp.Arch) < 0 {
		return fmt.Errorf("architecture %q is not one of %s, %s, %s", fp.Arch, CPU, CUDA, OpenCL)
	}
	if len(fp.Nodes) > MaxNodes {
		return fmt.Errorf("%d memory nodes, more than %d", len(fp.Nodes), MaxNodes)
	}
	for i, u := range fp.Units {
		if u.Node < 0 || u.Node > len(fp.Nodes) {
			return fmt.Errorf("unit %d (%q) is on memory node %d; the driver reports RAM (0) and %d nodes of its own",
				i, u.Name, u.Node, len(fp.Nodes))
		}
	}
	for i, n := range fp.Nodes {
		for _, p := range n.Peers {
			if p < 1 || p > len(fp.Nodes) || p == i+1 {
				return fmt.Errorf("memory node %d (%q) names node %d as a peer; peers are the driver's other nodes, 1 to %d", i+1, n.Name, p, len(fp.Nodes))
			}
		}
	}
	return nil
}

// KernelSource is a kernel given as source by a codelet, for drivers that
// compile at run time (OpenCL C, PTX).
type KernelSource struct {
	// Name is the kernel function in Source.
	Name   string
	Source string
}

// WorkerSpec tells a driver how to run one worker.
type WorkerSpec struct {
	// ID is the worker's runtime-wide number.
	ID int
	// Unit is the index of the device unit in the driver's fingerprint.
	Unit int
	// Dispatch carries tasks from the core to the worker; Completion carries
	// their completions back.
	Dispatch, Completion base.Span
	// Bell is the doorbell the worker sleeps on; CoreBell the one it rings
	// after posting completions. A worker may ring once for several
	// completions while it has tasks queued, but must ring for a completion
	// when no task is left on its rings, and for each while CoreBell is
	// Urgent. The core still reads completions not rung for, within a
	// millisecond, but what they release waits as long.
	Bell, CoreBell uint64
	// SchedRing, when its Size is not 0, carries Exec messages the
	// scheduler posts straight to the worker, for tasks whose buffers are
	// all in RAM: one ring crossing less per dependency. The worker reads
	// it besides Dispatch, in any order with it, and rings Bell is how it
	// is woken for both. A worker releases an Exec from SchedRing only
	// after committing its Completion: when the scheduler dies, the core
	// waits for the ring to drain and then knows which tasks ran. Given
	// only to workers of a driver whose Fingerprint sets SchedRing.
	SchedRing base.Span
}

// InitRequest starts a driver's workers.
type InitRequest struct {
	Workers []WorkerSpec
	// SpinIters is how many polls a worker makes on an empty ring before it
	// sleeps on its doorbell.
	SpinIters int
}

// Driver is what the core needs from a device driver.
type Driver interface {
	base.Plugin
	// Fingerprint reports the units, memory nodes and kernels of the driver.
	Fingerprint(ctx context.Context) (*Fingerprint, error)
	// Init runs StarPU's init for each worker and then loops run_once on each
	// until Deinit: a worker takes task messages from its dispatch ring,
	// executes them and posts completions.
	Init(ctx context.Context, req *InitRequest) error
	// Deinit stops the workers after the tasks they hold and runs deinit.
	Deinit(ctx context.Context) error
	// LoadKernel compiles a kernel given as source, once per device (the
	// driver caches by source), and returns its index for Exec messages:
	// after the fingerprint's Kernels, and at most math.MaxInt32. A
	// compilation failure is an error carrying the build log; a driver that
	// hosts only compiled-in kernels returns an error saying so.
	LoadKernel(ctx context.Context, k KernelSource) (int, error)
}
