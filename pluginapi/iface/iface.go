// Package iface is the contract for data interfaces served by plugins: an
// interface describes its data, the core moves it. The core runs coherency
// over the buffers an interface says it needs; drivers only copy the ranges of
// its copy plan, so they never learn the format.
package iface

import (
	"context"

	"github.com/starpu-go/starpu/pluginapi/base"
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
