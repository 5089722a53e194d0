// Package csr is StarPU's CSR (compressed sparse row) data interface as
// applications and kernels see it: the metadata encoding, the checks of a
// matrix's contents, the parts an application registers, and the view a
// kernel takes of a CSR buffer. The interface itself is served by the
// iface-csr plugin (package csriface); this package imports no runtime, so
// drivers and applications both use it.
//
// A CSR matrix has nrow rows and nnz stored entries: nzval holds the values
// (elemsize bytes each), colind the column of each value and rowptr, nrow+1
// entries, where each row's values start. As in StarPU, rowptr values are
// offset by firstentry (rowptr[0] == firstentry, rowptr[nrow] == firstentry +
// nnz), and the values of row r are nzval[rowptr[r]-firstentry :
// rowptr[r+1]-firstentry]. Column indices are 0-based. A row block made by
// the "rows" filter keeps the parent's rowptr values and gets firstentry =
// the parent's rowptr at its first row, so kernels work on blocks unchanged.
package csr

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// Name is the interface's name: the plugin is bin/plugins/iface-csr.
const Name = "csr"

// RowsFilter is the name of the row-block filter (StarPU's
// starpu_csr_filter_vertical_block): children are consecutive blocks of
// rows, split as RowBlock says.
const RowsFilter = "rows"

// The CPU driver's CSR kernels (plugins/driver-cpu/kernels), named here so
// that applications build tasks for them without linking the driver.
//
// SpmvF32 and SpmvF64: y = A*x. Buffers: [CSR A R, vector x_0 R, ...,
// vector x_k-1 R, vector y W], k >= 1, elements of the kernel's type; x is
// the concatenation of the x_i (so x can be a vector split into blocks) and
// has as many elements as A has columns; y has A's nrow elements. A may be
// a row block from the rows filter: y is then the matching block of the
// product. No argument.
const (
	SpmvF32 = "spmv_csr_f32"
	SpmvF64 = "spmv_csr_f64"
)

// MetaSize is the length of the metadata encoding.
const MetaSize = 16

// LayoutTag is stored in a CSR buffer's Layout.LDZ so that a kernel can tell
// a CSR buffer from another plugin interface's ("CSR1" little-endian).
const LayoutTag = 0x31525343

// Part indices: a CSR datum's parts in order.
const (
	PartNZVal  = sparse.PartNZVal
	PartColInd = sparse.PartColInd
	PartRowPtr = sparse.PartRowPtr
	NumParts   = sparse.NumParts
)

// PartNames name the parts in errors.
var PartNames = sparse.PartNames

// Meta is a CSR matrix's shape, StarPU's starpu_csr_interface without the
// pointers.
type Meta struct {
	NNZ, NRow, FirstEntry, ElemSize uint32
}

// Encode returns the metadata as the interface receives it: the four fields
// as little-endian uint32, in order.
func (m Meta) Encode() []byte { return sparse.EncodeFields(m.NNZ, m.NRow, m.FirstEntry, m.ElemSize) }

// Decode parses and checks metadata from Encode.
func Decode(b []byte) (Meta, error) {
	f, ok := sparse.DecodeFields(b, MetaSize/4)
	if !ok {
		return Meta{}, fmt.Errorf("csr metadata of %d bytes, want %d (nnz, nrow, firstentry, elemsize)", len(b), MetaSize)
	}
	m := Meta{NNZ: f[0], NRow: f[1], FirstEntry: f[2], ElemSize: f[3]}
	return m, m.Check()
}

// Check validates the fields on their own: an element size, and rowptr
// values (firstentry to firstentry+nnz) and nrow+1 that fit in uint32.
func (m Meta) Check() error { return m.Compressed().Check() }

// Compressed is m as the compressed-row code CSR shares with BCSR sees it
// (one element an entry).
func (m Meta) Compressed() sparse.Compressed {
	return sparse.Compressed{Format: Name, NNZ: m.NNZ, NRow: m.NRow, FirstEntry: m.FirstEntry, ElemSize: m.ElemSize, BlockLen: 1}
}

// PartSizes are the byte sizes of nzval, colind and rowptr.
func (m Meta) PartSizes() []uint64 { return m.Compressed().PartSizes() }

// Layout is what a kernel learns about the matrix: ElemSize = elemsize,
// NX = nnz, NY = nrow, NZ = firstentry, LD = the region's length, LDZ =
// LayoutTag; Interface is the core's.
func (m Meta) Layout() kernel.Layout {
	_, n := iface.PartOffsets(m.PartSizes())
	return kernel.Layout{
		ElemSize: m.ElemSize, NX: uint64(m.NNZ), NY: uint64(m.NRow), NZ: uint64(m.FirstEntry), LD: n, LDZ: LayoutTag,
	}
}

// String renders the shape as StarPU's display does, for people.
func (m Meta) String() string {
	return fmt.Sprintf("csr(nrow=%d nnz=%d firstentry=%d elemsize=%d)", m.NRow, m.NNZ, m.FirstEntry, m.ElemSize)
}

// Validate checks a matrix's parts against m: their sizes, rowptr starting
// at firstentry, never decreasing and ending at firstentry+nnz, and, when
// ncol > 0, every column index below ncol. Its error names the first bad
// entry.
func Validate(m Meta, nzval, colind, rowptr []byte, ncol uint32) error {
	return m.Compressed().Validate(m, nzval, colind, rowptr, ncol, "columns")
}

// Float is the element types the typed helpers take.
type Float = sparse.Float

// Parts returns the parts an application registers for a matrix and its
// metadata: nnz = len(nzval), nrow = len(rowptr)-1. The parts alias the
// slices (the runtime copies them at registration and back at
// unregistration). It fails when the slices' lengths disagree.
func Parts[T Float](nzval []T, colind, rowptr []uint32, firstentry uint32) (Meta, [][]byte, error) {
	if len(rowptr) == 0 {
		return Meta{}, nil, fmt.Errorf("csr: rowptr is empty; it has nrow+1 entries")
	}
	if len(colind) != len(nzval) {
		return Meta{}, nil, fmt.Errorf("csr: %d values but %d column indices", len(nzval), len(colind))
	}
	if uint64(len(nzval)) > math.MaxUint32 || uint64(len(rowptr)) > math.MaxUint32 {
		return Meta{}, nil, fmt.Errorf("csr: %d values and %d rows pass StarPU's uint32 range", len(nzval), len(rowptr)-1)
	}
	var zero T
	m := Meta{NNZ: uint32(len(nzval)), NRow: uint32(len(rowptr) - 1), FirstEntry: firstentry, ElemSize: uint32(unsafe.Sizeof(zero))}
	return m, [][]byte{sparse.AsBytes(nzval), sparse.AsBytes(colind), sparse.AsBytes(rowptr)}, nil
}

// RowBlock is the rows [lo, hi) of block i of nparts that the rows filter
// gives a matrix of nrow rows: nrow/nparts rows each, the first nrow%nparts
// blocks one more (StarPU's chunk split). Applications use it to split
// vectors the same way.
func RowBlock(nrow, nparts, i int) (lo, hi int) { return sparse.Chunk(nrow, nparts, i) }

// Matrix is a kernel's view of a CSR buffer: slices over the buffer's bytes
// in the arena, written in place. Row r's values are NZVal[lo:hi] and their
// columns ColInd[lo:hi] for lo, hi from Row(r).
type Matrix[T Float] struct {
	Meta
	sparse.Arrays[T]
}

// View checks that buf is a CSR buffer of T elements and returns its parts.
// It does not read the contents: a kernel must still check the rowptr
// entries and column indices it uses (Row does the former).
func View[T Float](buf *kernel.Buffer) (Matrix[T], error) {
	m, a, err := sparse.ViewCompressed[T](buf, LayoutTag, "CSR matrix", func(nnz, nrow, firstentry uint32) (Meta, error) {
		m := Meta{NNZ: nnz, NRow: nrow, FirstEntry: firstentry, ElemSize: buf.ElemSize}
		return m, m.Check()
	})
	if err != nil {
		return Matrix[T]{}, err
	}
	return Matrix[T]{Meta: m, Arrays: a}, nil
}
