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
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
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
	PartNZVal = iota
	PartColInd
	PartRowPtr
	NumParts
)

// PartNames name the parts in errors.
var PartNames = []string{"nzval", "colind", "rowptr"}

// Meta is a CSR matrix's shape, StarPU's starpu_csr_interface without the
// pointers.
type Meta struct {
	NNZ, NRow, FirstEntry, ElemSize uint32
}

// Encode returns the metadata as the interface receives it: the four fields
// as little-endian uint32, in order.
func (m Meta) Encode() []byte {
	b := make([]byte, MetaSize)
	binary.LittleEndian.PutUint32(b[0:], m.NNZ)
	binary.LittleEndian.PutUint32(b[4:], m.NRow)
	binary.LittleEndian.PutUint32(b[8:], m.FirstEntry)
	binary.LittleEndian.PutUint32(b[12:], m.ElemSize)
	return b
}

// Decode parses and checks metadata from Encode.
func Decode(b []byte) (Meta, error) {
	if len(b) != MetaSize {
		return Meta{}, fmt.Errorf("csr metadata of %d bytes, want %d (nnz, nrow, firstentry, elemsize)", len(b), MetaSize)
	}
	m := Meta{
		NNZ:        binary.LittleEndian.Uint32(b[0:]),
		NRow:       binary.LittleEndian.Uint32(b[4:]),
		FirstEntry: binary.LittleEndian.Uint32(b[8:]),
		ElemSize:   binary.LittleEndian.Uint32(b[12:]),
	}
	return m, m.Check()
}

// Check validates the fields on their own: an element size, and rowptr
// values (firstentry to firstentry+nnz) and nrow+1 that fit in uint32.
func (m Meta) Check() error {
	switch {
	case m.ElemSize == 0:
		return fmt.Errorf("csr metadata: elemsize is 0")
	case m.ElemSize > 1<<16:
		return fmt.Errorf("csr metadata: elemsize %d is beyond 65536 bytes", m.ElemSize)
	case uint64(m.FirstEntry)+uint64(m.NNZ) > math.MaxUint32:
		return fmt.Errorf("csr metadata: firstentry %d + nnz %d passes the uint32 range of rowptr", m.FirstEntry, m.NNZ)
	case m.NRow == math.MaxUint32:
		return fmt.Errorf("csr metadata: nrow %d leaves no room for rowptr's nrow+1 entries", m.NRow)
	}
	return nil
}

// PartSizes are the byte sizes of nzval, colind and rowptr.
func (m Meta) PartSizes() []uint64 {
	return []uint64{uint64(m.NNZ) * uint64(m.ElemSize), uint64(m.NNZ) * 4, (uint64(m.NRow) + 1) * 4}
}

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
	if err := m.Check(); err != nil {
		return err
	}
	sizes := m.PartSizes()
	for i, b := range [][]byte{nzval, colind, rowptr} {
		if uint64(len(b)) != sizes[i] {
			return fmt.Errorf("csr: %s has %d bytes, %v needs %d", PartNames[i], len(b), m, sizes[i])
		}
	}
	le := binary.LittleEndian
	prev := le.Uint32(rowptr)
	if prev != m.FirstEntry {
		return fmt.Errorf("csr: rowptr[0] = %d, want firstentry %d", prev, m.FirstEntry)
	}
	for r := uint32(1); r <= m.NRow; r++ {
		v := le.Uint32(rowptr[4*r:])
		if v < prev {
			return fmt.Errorf("csr: rowptr[%d] = %d < rowptr[%d] = %d: rowptr must not decrease", r, v, r-1, prev)
		}
		prev = v
	}
	if end := m.FirstEntry + m.NNZ; prev != end {
		return fmt.Errorf("csr: rowptr[%d] = %d, want firstentry+nnz = %d", m.NRow, prev, end)
	}
	if ncol > 0 {
		for k := uint32(0); k < m.NNZ; k++ {
			if c := le.Uint32(colind[4*k:]); c >= ncol {
				return fmt.Errorf("csr: colind[%d] = %d, beyond the %d columns", k, c, ncol)
			}
		}
	}
	return nil
}

// Float is the element types the typed helpers take.
type Float interface{ float32 | float64 }

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
	return m, [][]byte{asBytes(nzval), asBytes(colind), asBytes(rowptr)}, nil
}

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

func asSlice[T any](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// RowBlock is the rows [lo, hi) of block i of nparts that the rows filter
// gives a matrix of nrow rows: nrow/nparts rows each, the first nrow%nparts
// blocks one more (StarPU's chunk split). Applications use it to split
// vectors the same way.
func RowBlock(nrow, nparts, i int) (lo, hi int) {
	q, r := nrow/nparts, nrow%nparts
	lo = i*q + min(i, r)
	hi = lo + q
	if i < r {
		hi++
	}
	return lo, hi
}

// Matrix is a kernel's view of a CSR buffer: slices over the buffer's bytes
// in the arena, written in place.
type Matrix[T Float] struct {
	Meta
	NZVal  []T
	ColInd []uint32
	// RowPtr has NRow+1 entries offset by FirstEntry: row r's values are
	// NZVal[RowPtr[r]-FirstEntry : RowPtr[r+1]-FirstEntry].
	RowPtr []uint32
}

// View checks that buf is a CSR buffer of T elements and returns its parts.
// It does not read the contents: a kernel must still check the rowptr
// entries and column indices it uses (Row does the former).
func View[T Float](buf *kernel.Buffer) (Matrix[T], error) {
	if buf.Interface < kernel.FirstPluginInterface || buf.LDZ != LayoutTag {
		return Matrix[T]{}, fmt.Errorf("buffer is a %v, not a CSR matrix", buf.Interface)
	}
	var zero T
	es := uint32(unsafe.Sizeof(zero))
	if buf.ElemSize != es {
		return Matrix[T]{}, fmt.Errorf("CSR matrix has %d-byte elements, want %d", buf.ElemSize, es)
	}
	if buf.NX > math.MaxUint32 || buf.NY >= math.MaxUint32 || buf.NZ > math.MaxUint32 {
		return Matrix[T]{}, fmt.Errorf("CSR layout nnz %d, nrow %d, firstentry %d pass the uint32 range", buf.NX, buf.NY, buf.NZ)
	}
	m := Meta{NNZ: uint32(buf.NX), NRow: uint32(buf.NY), FirstEntry: uint32(buf.NZ), ElemSize: buf.ElemSize}
	sizes := m.PartSizes()
	offs, n := iface.PartOffsets(sizes)
	if buf.LD != n || uint64(len(buf.Bytes)) < n {
		return Matrix[T]{}, fmt.Errorf("%v needs a region of %d bytes, the buffer has LD %d and %d bytes", m, n, buf.LD, len(buf.Bytes))
	}
	if len(buf.Bytes) > 0 && uintptr(unsafe.Pointer(&buf.Bytes[0]))%8 != 0 {
		return Matrix[T]{}, fmt.Errorf("CSR region is not 8-byte aligned")
	}
	part := func(i int) []byte { return buf.Bytes[offs[i] : offs[i]+sizes[i]] }
	return Matrix[T]{
		Meta:   m,
		NZVal:  asSlice[T](part(PartNZVal)),
		ColInd: asSlice[uint32](part(PartColInd)),
		RowPtr: asSlice[uint32](part(PartRowPtr)),
	}, nil
}

// Row returns the index range [lo, hi) in NZVal and ColInd of row r's
// values, or an error naming the bad rowptr entry.
func (m *Matrix[T]) Row(r int) (lo, hi int, err error) {
	a, b := m.RowPtr[r], m.RowPtr[r+1]
	if a < m.FirstEntry || b < a || b-m.FirstEntry > m.NNZ {
		return 0, 0, fmt.Errorf("CSR rowptr[%d..%d] = %d..%d outside [firstentry %d, firstentry+nnz %d]",
			r, r+1, a, b, m.FirstEntry, m.FirstEntry+m.NNZ)
	}
	return int(a - m.FirstEntry), int(b - m.FirstEntry), nil
}
