// Package iface is the contract for data interfaces served by plugins: an
// interface describes its data, the core moves it. The core runs coherency
// over the buffers an interface says it needs; drivers only copy the ranges of
// its copy plan, so they never learn the format.
package iface

import (
	"context"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Description is what an interface says about one registered datum, given
// its metadata.
type Description struct {
	// Name is the interface's name (for example "csr").
	Name string
	// Buffers are the sizes in bytes of the buffers the datum needs on a
	// memory node.
	Buffers []uint64
	// Size is the number of bytes of data (what a transfer moves).
	Size uint64
	// Footprint hashes the shape, for performance models.
	Footprint uint32
	// Layout is how kernels see the datum: the interface encodes its shape
	// in the layout's fields and its accessor package decodes them. The
	// core sets Layout.Interface to the number it gave the interface.
	Layout kernel.Layout
}

// PartAlign is the alignment of each part in a datum's region.
const PartAlign = 64

// PartOffsets places parts of the given sizes one after another in a
// region, each aligned to PartAlign, and returns their offsets and the
// region's size. The core lays out a plugin datum this way on every node.
func PartOffsets(sizes []uint64) (offsets []uint64, total uint64) {
	offsets = make([]uint64, len(sizes))
	for i, s := range sizes {
		total = (total + PartAlign - 1) &^ (PartAlign - 1)
		offsets[i] = total
		total += s
	}
	return offsets, total
}

// Range is one contiguous range of a copy plan: bytes [Offset, Offset+Len) of
// buffer Buffer, copied to the same place on the other node.
type Range struct {
	Buffer int
	Offset uint64
	Len    uint64
}

// Interface is a data interface plugin. Metadata is the interface's own
// encoding of a datum's shape (for CSR: nnz, nrow, firstentry, elemsize).
type Interface interface {
	base.Plugin
	// Describe validates metadata and describes the datum; invalid metadata
	// is an error naming the first bad field.
	Describe(ctx context.Context, meta []byte) (*Description, error)
	// CopyPlan lists the ranges that carry the datum between two nodes.
	CopyPlan(ctx context.Context, meta []byte) ([]Range, error)
	// Pack writes the datum, read from buffers in the arena, into dst as one
	// contiguous message and returns its length.
	Pack(ctx context.Context, meta []byte, buffers []base.Span, dst base.Span) (uint64, error)
	// Unpack is the reverse of Pack.
	Unpack(ctx context.Context, meta []byte, src base.Span, buffers []base.Span) error
	// Compare reports whether two data have the same shape.
	Compare(ctx context.Context, a, b []byte) (bool, error)
	// Display renders the datum's shape for people.
	Display(ctx context.Context, meta []byte) (string, error)
}
