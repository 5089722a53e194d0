// Package coo is StarPU's COO (coordinate) sparse matrix data interface as
// applications and kernels see it: metadata, contents checks, the parts an
// application registers and a kernel's view of a COO buffer. The interface
// itself is served by the iface-coo plugin (package cooiface); this package
// imports no runtime.
//
// A COO matrix is NY rows by NX columns (StarPU's nx and ny axes) with NNZ
// stored entries: entry k is Values[k] at row Rows[k], column Cols[k], both
// 0-based. Its parts are rows, cols (uint32 each) and values, in that order.
//
// The "entries" filter splits the entries into consecutive ranges: each
// child is a matrix of the parent's size holding some of its entries, so
// that tasks over the children add their products into one y (see
// SpmvAddF64).
package coo

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// Name is the interface's name: the plugin is bin/plugins/iface-coo.
const Name = "coo"

// EntriesFilter is the name of the entry-range filter: child i of n holds
// the entries Chunk(nnz, n, i) of its parent, in a matrix of the parent's
// size. (StarPU 1.3 has no COO filter; this one needs no order of the
// entries.)
const EntriesFilter = "entries"

// The CPU driver's COO kernels (plugins/driver-cpu/kernels).
//
// SpmvAddF32 and SpmvAddF64: y += A*x. Buffers: [COO A R, vector x_0 R,
// ..., vector x_k-1 R, vector y RW or Redux], k >= 1, elements of the
// kernel's type; x is the concatenation of the x_i and has A's nx elements,
// y has A's ny. Adding lets the children of the entries filter each add
// their part of the product: with y in Redux mode (its reduction methods
// the add and zero kernels) they run in parallel. No argument.
const (
	SpmvAddF32 = "spmv_add_coo_f32"
	SpmvAddF64 = "spmv_add_coo_f64"
)

// MetaSize is the length of the metadata encoding.
const MetaSize = 16

// LayoutTag is stored in a COO buffer's Layout.LDZ ("COO1" little-endian).
const LayoutTag = 0x314f4f43

// Part indices, in order.
const (
	PartRows = iota
	PartCols
	PartValues
	NumParts
)

// PartNames name the parts in errors.
var PartNames = []string{"rows", "cols", "values"}

// Meta is a COO matrix's shape (StarPU's starpu_coo_interface without the
// pointers).
type Meta struct {
	NNZ, NX, NY, ElemSize uint32
}

// Encode returns the four fields as little-endian uint32, in order.
func (m Meta) Encode() []byte { return sparse.EncodeFields(m.NNZ, m.NX, m.NY, m.ElemSize) }

// Decode parses and checks metadata from Encode.
func Decode(b []byte) (Meta, error) {
	f, ok := sparse.DecodeFields(b, MetaSize/4)
	if !ok {
		return Meta{}, fmt.Errorf("coo metadata of %d bytes, want %d (nnz, nx, ny, elemsize)", len(b), MetaSize)
	}
	m := Meta{NNZ: f[0], NX: f[1], NY: f[2], ElemSize: f[3]}
	switch {
	case m.ElemSize == 0 || m.ElemSize > 1<<16:
		return Meta{}, fmt.Errorf("coo metadata: elemsize %d, want 1 to 65536", m.ElemSize)
	case m.NNZ > 0 && (m.NX == 0 || m.NY == 0):
		return Meta{}, fmt.Errorf("coo metadata: %d entries in a %dx%d matrix", m.NNZ, m.NY, m.NX)
	}
	return m, nil
}

// PartSizes are the byte sizes of rows, cols and values.
func (m Meta) PartSizes() []uint64 {
	n := uint64(m.NNZ)
	return []uint64{4 * n, 4 * n, n * uint64(m.ElemSize)}
}

// Layout is what a kernel learns: ElemSize = elemsize, NX = nnz, NY = nx,
// NZ = ny, LD = the region's length, LDZ = LayoutTag.
func (m Meta) Layout() kernel.Layout {
	_, n := iface.PartOffsets(m.PartSizes())
	return kernel.Layout{ElemSize: m.ElemSize, NX: uint64(m.NNZ), NY: uint64(m.NX), NZ: uint64(m.NY), LD: n, LDZ: LayoutTag}
}

// String renders the shape for people.
func (m Meta) String() string {
	return fmt.Sprintf("coo(%dx%d nnz=%d elemsize=%d)", m.NY, m.NX, m.NNZ, m.ElemSize)
}

// Validate checks the parts' sizes and that every entry is inside the
// matrix, naming the first bad one.
func Validate(m Meta, rows, cols, values []byte) error {
	if err := sparse.CheckSizes(Name, m, PartNames, m.PartSizes(), rows, cols, values); err != nil {
		return err
	}
	if err := sparse.CheckIndices(Name, "rows", rows, m.NY, "rows"); err != nil {
		return err
	}
	return sparse.CheckIndices(Name, "cols", cols, m.NX, "columns")
}

// Parts returns the metadata and parts an application registers for an
// ny x nx matrix; they alias the slices.
func Parts[T sparse.Float](rows, cols []uint32, values []T, nx, ny uint32) (Meta, [][]byte, error) {
	if len(rows) != len(values) || len(cols) != len(values) {
		return Meta{}, nil, fmt.Errorf("coo: %d rows, %d cols, %d values: want one of each per entry", len(rows), len(cols), len(values))
	}
	if uint64(len(values)) > math.MaxUint32 {
		return Meta{}, nil, fmt.Errorf("coo: %d entries pass the uint32 range", len(values))
	}
	var zero T
	m := Meta{NNZ: uint32(len(values)), NX: nx, NY: ny, ElemSize: uint32(unsafe.Sizeof(zero))}
	return m, [][]byte{sparse.AsBytes(rows), sparse.AsBytes(cols), sparse.AsBytes(values)}, nil
}

// Matrix is a kernel's view of a COO buffer, over the arena.
type Matrix[T sparse.Float] struct {
	Meta
	Rows, Cols []uint32
	Values     []T
}

// View checks that buf is a COO buffer of T elements and returns its parts.
func View[T sparse.Float](buf *kernel.Buffer) (Matrix[T], error) {
	var zero T
	if err := sparse.CheckBuffer(buf, LayoutTag, uint32(unsafe.Sizeof(zero)), "COO matrix"); err != nil {
		return Matrix[T]{}, err
	}
	if buf.NX > math.MaxUint32 || buf.NY > math.MaxUint32 || buf.NZ > math.MaxUint32 {
		return Matrix[T]{}, fmt.Errorf("COO layout %dx%d nnz %d passes the uint32 range", buf.NZ, buf.NY, buf.NX)
	}
	m := Meta{NNZ: uint32(buf.NX), NX: uint32(buf.NY), NY: uint32(buf.NZ), ElemSize: buf.ElemSize}
	parts, err := sparse.Region(buf, m.PartSizes(), m)
	if err != nil {
		return Matrix[T]{}, err
	}
	return Matrix[T]{Meta: m, Rows: sparse.AsSlice[uint32](parts[PartRows]), Cols: sparse.AsSlice[uint32](parts[PartCols]), Values: sparse.AsSlice[T](parts[PartValues])}, nil
}

// Chunk is the entries [lo, hi) of child i of n that the entries filter
// gives a matrix of nnz entries: nnz/n each, the first nnz%n one more.
func Chunk(nnz, n, i int) (lo, hi int) { return sparse.Chunk(nnz, n, i) }
