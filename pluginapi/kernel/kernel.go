// Package kernel is what a kernel author imports: the view of a task's buffers
// and argument inside a driver, and the signature of a CPU kernel.
//
// A buffer is described by its data interface (vector, matrix, ...) and lives
// in the shared-memory arena; the views below are slices over that mapping, so
// a kernel reads and writes the data in place, with no copy.
package kernel

import (
	"fmt"
	"unsafe"
)

// InterfaceID names a built-in data interface layout on the wire.
type InterfaceID uint8

// The built-in data interfaces. Plugin interfaces (CSR, ...) use IDs from
// FirstPluginInterface up; their layout's LD is the length in bytes of the
// region holding the datum's parts, the other fields are theirs to define
// (see package iface).
const (
	Void InterfaceID = iota
	Variable
	Vector
	Matrix
	Block
	FirstPluginInterface InterfaceID = 64
)

func (id InterfaceID) String() string {
	switch id {
	case Void:
		return "void"
	case Variable:
		return "variable"
	case Vector:
		return "vector"
	case Matrix:
		return "matrix"
	case Block:
		return "block"
	}
	return fmt.Sprintf("iface#%d", id)
}

// Mode is a buffer's access mode, as in StarPU.
type Mode uint8

// Access modes.
const (
	R  Mode = 1 << 0
	W  Mode = 1 << 1
	RW      = R | W
	// Scratch, Redux and Commute are the core's access modes beyond R and
	// W, with StarPU's bit values (STARPU_SCRATCH, STARPU_REDUX,
	// STARPU_COMMUTE). Drivers never see them: a SCRATCH or REDUX buffer
	// reaches the kernel as RW, a COMMUTE one as its W or RW part.
	Scratch Mode = 1 << 2
	Redux   Mode = 1 << 3
	Commute Mode = 1 << 4
	// Locality is a hint or'ed into a mode (StarPU's STARPU_LOCALITY): the
	// scheduler should keep the task where the data is. Drivers never see
	// it.
	Locality Mode = 1 << 7
)

func (m Mode) String() string {
	switch m {
	case R:
		return "R"
	case W:
		return "W"
	case RW:
		return "RW"
	case Scratch:
		return "SCRATCH"
	case Redux:
		return "REDUX"
	case W | Commute:
		return "W|COMMUTE"
	case RW | Commute:
		return "RW|COMMUTE"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Layout is the shape of one buffer: the metadata of its data interface. For a
// matrix, element (i, j) with i < NX and j < NY is at (i + j*LD)*ElemSize; NX
// is the contiguous dimension (rows of a column-major matrix, as BLAS sees it).
// For a block, element (i, j, k) is at (i + j*LD + k*LDZ)*ElemSize.
type Layout struct {
	Interface  InterfaceID
	ElemSize   uint32
	NX, NY, NZ uint64
	LD, LDZ    uint64
}

// Len is the number of bytes the layout spans from its first element to one
// past its last, the size of the buffer that holds it.
func (l Layout) Len() uint64 {
	switch l.Interface {
	case Void:
		return 0
	case Variable:
		return uint64(l.ElemSize)
	case Vector:
		return l.NX * uint64(l.ElemSize)
	case Matrix:
		if l.NX == 0 || l.NY == 0 {
			return 0
		}
		return ((l.NY-1)*l.LD + l.NX) * uint64(l.ElemSize)
	case Block:
		if l.NX == 0 || l.NY == 0 || l.NZ == 0 {
			return 0
		}
		return ((l.NZ-1)*l.LDZ + (l.NY-1)*l.LD + l.NX) * uint64(l.ElemSize)
	}
	if l.Interface >= FirstPluginInterface {
		return l.LD
	}
	return l.NX * uint64(l.ElemSize)
}

// Elems is the number of elements the layout holds.
func (l Layout) Elems() uint64 {
	switch l.Interface {
	case Void:
		return 0
	case Variable:
		return 1
	case Matrix:
		return l.NX * l.NY
	case Block:
		return l.NX * l.NY * l.NZ
	}
	return l.NX
}

// Buffer is one of a task's buffers as a kernel sees it.
type Buffer struct {
	Layout
	Mode Mode
	// Bytes spans the buffer in the arena mapping (Layout.Len bytes).
	Bytes []byte
}

// Float32s views the buffer as float32 elements (Layout.Len/4 of them,
// including the gaps of a strided matrix).
func (b *Buffer) Float32s() []float32 { return view[float32](b.Bytes) }

// Float64s views the buffer as float64 elements.
func (b *Buffer) Float64s() []float64 { return view[float64](b.Bytes) }

// Int32s views the buffer as int32 elements.
func (b *Buffer) Int32s() []int32 { return view[int32](b.Bytes) }

// Int64s views the buffer as int64 elements.
func (b *Buffer) Int64s() []int64 { return view[int64](b.Bytes) }

func view[T any](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// Context is what a kernel receives: its buffers, the task's argument blob, and
// where it runs.
type Context struct {
	Buffers []Buffer
	Arg     []byte
	Worker  int
	TaskID  uint64
	// Team is the combined worker running a parallel task (an SPMD or
	// FORKJOIN codelet's); zero when the task runs on one worker, as a
	// parallel task may too. Read it through CombinedSize, CombinedRank
	// and CombinedWorker.
	Team Team
}

// Team is a combined worker as the kernel of a parallel task sees it.
type Team struct {
	// Combined is the combined worker's ID, Rank the kernel's place in
	// Members (0 is the master), and Members the workers running the
	// task, the master first; Members is empty on one worker.
	Combined int
	Rank     int
	Members  []int
}

// CombinedSize is the number of workers running the task (StarPU's
// starpu_combined_worker_get_size): for an SPMD codelet, the copies of the
// kernel running at once, each with its own CombinedRank, which share the
// work between them; for a FORKJOIN codelet, the goroutines the one kernel
// call may keep busy, the other members' cores being left to it while it
// runs. 1 when the task runs on one worker.
func (c *Context) CombinedSize() int { return max(len(c.Team.Members), 1) }

// CombinedRank is the kernel's rank in the combined worker, 0 to
// CombinedSize()-1 (StarPU's starpu_combined_worker_get_rank): which part
// of an SPMD task's work is its own. A FORKJOIN kernel runs on the master,
// rank 0.
func (c *Context) CombinedRank() int { return c.Team.Rank }

// CombinedWorker is the ID of the combined worker running the task
// (StarPU's starpu_combined_worker_get_id), or -1 when it runs on one
// worker.
func (c *Context) CombinedWorker() int {
	if len(c.Team.Members) == 0 {
		return -1
	}
	return c.Team.Combined
}

// Func is a CPU kernel. It returns an error to fail the task; the message
// reaches the application through the task's wait.
type Func func(ctx *Context) error

// Kernel is a named kernel a driver hosts.
type Kernel struct {
	Name string
	Func Func
}
