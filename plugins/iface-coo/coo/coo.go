// Package coo is StarPU's COO (coordinate) sparse matrix data interface as
// applications and kernels see it: metadata, contents checks, the parts an
// application registers and a kernel's view of a COO buffer. The interface
// itself is served by the iface-coo plugin (package cooiface); this package
// imports no runtime.
//
// A COO matrix is NY rows by NX columns (StarPU's nx and ny axes) with NNZ
// stored entries: entry k is Values[k] at row Rows[k], column Cols[k], both
// 0-based. Its parts are rows, cols (uint32 each) and values, in that order.
package coo

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Name is the interface's name: the plugin is bin/plugins/iface-coo.
const Name = "coo"

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
func (m Meta) Encode() []byte {
	b := make([]byte, MetaSize)
	for i, v := range []uint32{m.NNZ, m.NX, m.NY, m.ElemSize} {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// Decode parses and checks metadata from Encode.
func Decode(b []byte) (Meta, error) {
	if len(b) != MetaSize {
		return Meta{}, fmt.Errorf("coo metadata of %d bytes, want %d (nnz, nx, ny, elemsize)", len(b), MetaSize)
	}
	le := binary.LittleEndian
	m := Meta{NNZ: le.Uint32(b[0:]), NX: le.Uint32(b[4:]), NY: le.Uint32(b[8:]), ElemSize: le.Uint32(b[12:])}
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
	sizes := m.PartSizes()
	for i, b := range [][]byte{rows, cols, values} {
		if uint64(len(b)) != sizes[i] {
			return fmt.Errorf("coo: %s has %d bytes, %v needs %d", PartNames[i], len(b), m, sizes[i])
		}
	}
	le := binary.LittleEndian
	for k := uint32(0); k < m.NNZ; k++ {
		if r := le.Uint32(rows[4*k:]); r >= m.NY {
			return fmt.Errorf("coo: rows[%d] = %d, beyond the %d rows", k, r, m.NY)
		}
		if c := le.Uint32(cols[4*k:]); c >= m.NX {
			return fmt.Errorf("coo: cols[%d] = %d, beyond the %d columns", k, c, m.NX)
		}
	}
	return nil
}

// Parts returns the metadata and parts an application registers for an
// ny x nx matrix; they alias the slices.
func Parts[T float32 | float64](rows, cols []uint32, values []T, nx, ny uint32) (Meta, [][]byte, error) {
	if len(rows) != len(values) || len(cols) != len(values) {
		return Meta{}, nil, fmt.Errorf("coo: %d rows, %d cols, %d values: want one of each per entry", len(rows), len(cols), len(values))
	}
	if uint64(len(values)) > math.MaxUint32 {
		return Meta{}, nil, fmt.Errorf("coo: %d entries pass the uint32 range", len(values))
	}
	var zero T
	m := Meta{NNZ: uint32(len(values)), NX: nx, NY: ny, ElemSize: uint32(unsafe.Sizeof(zero))}
	return m, [][]byte{asBytes(rows), asBytes(cols), asBytes(values)}, nil
}

// Matrix is a kernel's view of a COO buffer, over the arena.
type Matrix[T float32 | float64] struct {
	Meta
	Rows, Cols []uint32
	Values     []T
}

// View checks that buf is a COO buffer of T elements and returns its parts.
func View[T float32 | float64](buf *kernel.Buffer) (Matrix[T], error) {
	var zero T
	switch {
	case buf.Interface < kernel.FirstPluginInterface || buf.LDZ != LayoutTag:
		return Matrix[T]{}, fmt.Errorf("buffer is a %v, not a COO matrix", buf.Interface)
	case buf.ElemSize != uint32(unsafe.Sizeof(zero)):
		return Matrix[T]{}, fmt.Errorf("COO matrix has %d-byte elements, want %d", buf.ElemSize, unsafe.Sizeof(zero))
	case buf.NX > math.MaxUint32 || buf.NY > math.MaxUint32 || buf.NZ > math.MaxUint32:
		return Matrix[T]{}, fmt.Errorf("COO layout %dx%d nnz %d passes the uint32 range", buf.NZ, buf.NY, buf.NX)
	}
	m := Meta{NNZ: uint32(buf.NX), NX: uint32(buf.NY), NY: uint32(buf.NZ), ElemSize: buf.ElemSize}
	sizes := m.PartSizes()
	offs, n := iface.PartOffsets(sizes)
	if buf.LD != n || uint64(len(buf.Bytes)) < n {
		return Matrix[T]{}, fmt.Errorf("%v needs a region of %d bytes, the buffer has LD %d and %d bytes", m, n, buf.LD, len(buf.Bytes))
	}
	if len(buf.Bytes) > 0 && uintptr(unsafe.Pointer(&buf.Bytes[0]))%8 != 0 {
		return Matrix[T]{}, fmt.Errorf("COO region is not 8-byte aligned")
	}
	part := func(i int) []byte { return buf.Bytes[offs[i] : offs[i]+sizes[i]] }
	return Matrix[T]{Meta: m, Rows: asSlice[uint32](part(PartRows)), Cols: asSlice[uint32](part(PartCols)), Values: asSlice[T](part(PartValues))}, nil
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
	if len(b) < int(unsafe.Sizeof(zero)) {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(zero)))
}
