// Package iface is the contract for data interfaces served by plugins: an
// interface describes its data, the core moves it. The core runs coherency
// over the parts an interface says a datum has; drivers only copy the ranges
// of its copy plan, so they never learn the format.
//
// On every memory node a datum of a plugin interface lives in ONE region
// holding its parts one after another, placed by PartOffsets. The
// core allocates regions and copies ranges; a CPU kernel receives the
// region's base and the interface's kernel.Layout, from which the
// interface's accessor package finds the parts again, and a device kernel
// receives each part as a buffer (wire.Parts; see
// docs/design/interfaces.md).
package iface

import (
	"context"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// PartAlign is the alignment of every part inside a datum's region. It is
// the largest base-address alignment OpenCL devices ask of a sub-buffer
// (CL_DEVICE_MEM_BASE_ADDR_ALIGN: 4096 bits on NVIDIA's, 1024 on pocl's),
// so that a device driver can give a kernel each part as a buffer of its
// own; it is also a multiple of the cache line, so parts never share one,
// and every element type is aligned. A datum pays at most PartAlign-1
// bytes of padding per part after the first.
const PartAlign = 512

// MaxRegion bounds a region's length, so that offset arithmetic on sizes an
// interface sends never overflows.
const MaxRegion = 1 << 56

// PartOffsets places parts of the given sizes in one region: part i starts at
// offsets[i], a multiple of PartAlign, after part i-1 ends; total is the
// region's length (the end of the last part). The core, the interfaces and
// their accessor packages all use it, so they agree on where parts are.
// Sizes whose region would pass MaxRegion are the caller's error;
// Description.Check rejects them first.
func PartOffsets(sizes []uint64) (offsets []uint64, total uint64) {
	offsets = make([]uint64, len(sizes))
	for i, s := range sizes {
		offsets[i] = alignUp(total)
		total = offsets[i] + s
	}
	return offsets, total
}

// RegionLen is the length of the region holding parts of the given sizes,
// PartOffsets' total, computed without allocating; it fails when the region
// would pass MaxRegion.
func RegionLen(sizes []uint64) (uint64, error) {
	var end uint64
	for i, s := range sizes {
		start := alignUp(end)
		if s > MaxRegion || start > MaxRegion-s {
			return 0, fmt.Errorf("part %d of %d bytes takes the region past %d bytes", i, s, uint64(MaxRegion))
		}
		end = start + s
	}
	return end, nil
}

func alignUp(v uint64) uint64 { return (v + PartAlign - 1) &^ (PartAlign - 1) }

// Description is what an interface says about one registered datum, given
// its metadata.
type Description struct {
	// Name is the interface's name (for example "csr").
	Name string
	// Buffers are the sizes in bytes of the datum's parts, in order; on
	// each memory node they live in one region, placed by PartOffsets.
	Buffers []uint64
	// Size is the number of bytes of data (what a transfer moves), at most
	// the region's length.
	Size uint64
	// Footprint hashes the shape, for performance models.
	Footprint uint32
	// AllocFootprint hashes what an allocation for the datum must hold
	// (StarPU's alloc_footprint): two data with equal AllocFootprint can
	// reuse each other's regions.
	AllocFootprint uint32
	// Layout is what kernels learn about the datum: the interface encodes
	// its shape in ElemSize, NX, NY, NZ and LDZ as its accessor package
	// documents, and sets LD to the region's length (PartOffsets' total
	// over Buffers), which is the Len of a plugin interface's layout.
	// Interface is left zero: the core sets it to the ID it assigned the
	// interface.
	Layout kernel.Layout
}

// Check verifies what a plugin said about a datum before the core relies on
// it: the region fits under MaxRegion, Layout.LD is the region's length,
// Size is no more than the region holds and Layout.Interface is left to the
// core.
func (d *Description) Check() error {
	n, err := RegionLen(d.Buffers)
	if err != nil {
		return fmt.Errorf("interface %q: %w", d.Name, err)
	}
	if d.Layout.LD != n {
		return fmt.Errorf("interface %q: layout LD %d is not the region length %d of parts %v", d.Name, d.Layout.LD, n, d.Buffers)
	}
	if d.Size > n {
		return fmt.Errorf("interface %q: size %d is more than the region length %d of parts %v", d.Name, d.Size, n, d.Buffers)
	}
	if d.Layout.Interface != 0 {
		return fmt.Errorf("interface %q: layout names interface %v; the core assigns it", d.Name, d.Layout.Interface)
	}
	return nil
}

// CheckPlan verifies a copy plan (CopyPlan's answer for the datum d
// describes) before the core copies by it: every range names one of d's
// parts and lies inside it, without the sum of its offset and length
// wrapping around.
func (d *Description) CheckPlan(plan []Range) error {
	for i, r := range plan {
		switch {
		case r.Buffer < 0 || r.Buffer >= len(d.Buffers):
			return fmt.Errorf("interface %q: copy plan range %d: part %d of %d", d.Name, i, r.Buffer, len(d.Buffers))
		case r.Offset > d.Buffers[r.Buffer] || r.Len > d.Buffers[r.Buffer]-r.Offset:
			return fmt.Errorf("interface %q: copy plan range %d: bytes [%d, +%d) outside part %d of %d bytes",
				d.Name, i, r.Offset, r.Len, r.Buffer, d.Buffers[r.Buffer])
		}
	}
	return nil
}

// CheckParts verifies that an application gave one part per Buffers entry,
// of the described size: the core registers a datum only then.
func (d *Description) CheckParts(sizes []uint64) error {
	if len(sizes) != len(d.Buffers) {
		return fmt.Errorf("interface %q: got %d parts, the metadata describes %d", d.Name, len(sizes), len(d.Buffers))
	}
	for i, n := range sizes {
		if n != d.Buffers[i] {
			return fmt.Errorf("interface %q: part %d has %d bytes, the metadata says %d", d.Name, i, n, d.Buffers[i])
		}
	}
	return nil
}

// Range is one contiguous range of a copy plan: bytes [Offset, Offset+Len) of
// part Buffer, copied to the same place on the other node.
type Range struct {
	Buffer int
	Offset uint64
	Len    uint64
}

// PartRange carries Len bytes of a partitioned datum between its parent and
// one child: from offset Offset of the parent's part Part to offset
// ChildOffset of the child's part ChildPart.
type PartRange struct {
	Part        int
	Offset      uint64
	ChildPart   int
	ChildOffset uint64
	Len         uint64
}

// Child is one piece of a partitioned datum: its metadata, its description
// (as Describe would give it) and the ranges that fill its parts from the
// parent's. Ranges of different children may overlap in the parent where a
// filter gives each child a copy of shared bytes (CSR's rows filter gives
// neighbouring row blocks the rowptr entry between them); gathering back
// writes those bytes once per child, in child order.
type Child struct {
	Meta   []byte
	Desc   Description
	Ranges []PartRange
}

// CheckChildren verifies a Partition answer against the parent's part sizes
// before the core copies anything: every child's description passes Check
// and every range lies inside a parent part and a child part.
func CheckChildren(parent []uint64, children []Child) error {
	for c := range children {
		ch := &children[c]
		if err := ch.Desc.Check(); err != nil {
			return fmt.Errorf("child %d: %w", c, err)
		}
		for i, r := range ch.Ranges {
			switch {
			case r.Part < 0 || r.Part >= len(parent):
				return fmt.Errorf("child %d range %d: parent part %d of %d", c, i, r.Part, len(parent))
			case r.ChildPart < 0 || r.ChildPart >= len(ch.Desc.Buffers):
				return fmt.Errorf("child %d range %d: child part %d of %d", c, i, r.ChildPart, len(ch.Desc.Buffers))
			case r.Offset > parent[r.Part] || r.Len > parent[r.Part]-r.Offset:
				return fmt.Errorf("child %d range %d: bytes [%d, +%d) outside parent part %d of %d bytes",
					c, i, r.Offset, r.Len, r.Part, parent[r.Part])
			case r.ChildOffset > ch.Desc.Buffers[r.ChildPart] || r.Len > ch.Desc.Buffers[r.ChildPart]-r.ChildOffset:
				return fmt.Errorf("child %d range %d: bytes [%d, +%d) outside child part %d of %d bytes",
					c, i, r.ChildOffset, r.Len, r.ChildPart, ch.Desc.Buffers[r.ChildPart])
			}
		}
	}
	return nil
}

// Interface is a data interface plugin. Metadata is the interface's own
// encoding of a datum's shape (for CSR: nnz, nrow, firstentry, elemsize).
// Where a method takes parts, they are the arena spans of the datum's parts
// on the RAM node, in order, each of the size Describe gave.
type Interface interface {
	base.Plugin
	// Describe validates metadata and describes the datum; invalid metadata
	// is an error naming the first bad field. With parts (at registration:
	// the application's data, already copied into the arena) it also checks
	// that there is one span per part of the described size and that the
	// contents are well formed, naming the first bad entry. With nil parts
	// it checks the metadata alone.
	Describe(ctx context.Context, meta []byte, parts []base.Span) (*Description, error)
	// CopyPlan lists the ranges that carry the datum between two nodes.
	CopyPlan(ctx context.Context, meta []byte) ([]Range, error)
	// Pack writes the datum, read from its parts in the arena, into dst as
	// one contiguous message and returns its length.
	Pack(ctx context.Context, meta []byte, parts []base.Span, dst base.Span) (uint64, error)
	// Unpack is the reverse of Pack.
	Unpack(ctx context.Context, meta []byte, src base.Span, parts []base.Span) error
	// Compare reports whether two data have the same shape.
	Compare(ctx context.Context, a, b []byte) (bool, error)
	// Display renders the datum's shape for people.
	Display(ctx context.Context, meta []byte) (string, error)
	// Partition splits a datum into nparts children with the named filter
	// (StarPU's data filters), reading the parent's parts where the split
	// depends on contents (CSR's rows filter reads rowptr). An unknown
	// filter is an error naming the ones the interface has.
	Partition(ctx context.Context, filter string, meta []byte, parts []base.Span, nparts int) ([]Child, error)
}
