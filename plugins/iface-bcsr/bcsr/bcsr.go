// Package bcsr is StarPU's BCSR (block compressed sparse row) data interface
// as applications and kernels see it: the metadata encoding, the checks of a
// matrix's contents, the parts an application registers, and the view a
// kernel takes of a BCSR buffer. The interface itself is served by the
// iface-bcsr plugin (package bcsriface); this package imports no runtime.
//
// A BCSR matrix is CSR over dense r x c blocks: it has nrow block rows
// (nrow*r rows) and nnz stored blocks. nzval holds the blocks one after the
// other, each r*c elements of elemsize bytes, row-major (element (i, j) of
// block k at nzval[k*r*c + i*c + j], as in StarPU's example); colind holds
// each block's block column (0-based: its columns are colind[k]*c to
// colind[k]*c + c-1); rowptr, nrow+1 entries offset by firstentry, says
// where each block row's blocks start, as CSR's does for values. A block
// row range made by the "rows" filter keeps the parent's rowptr values and
// gets firstentry = the parent's rowptr at its first block row, so kernels
// work on it unchanged.
package bcsr

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// Name is the interface's name: the plugin is bin/plugins/iface-bcsr.
const Name = "bcsr"

// RowsFilter is the name of the block-row filter (StarPU's
// starpu_bcsr_filter_vertical_block): children are consecutive ranges of
// block rows, split as RowBlock says.
const RowsFilter = "rows"

// The CPU driver's BCSR kernels (plugins/driver-cpu/kernels).
//
// SpmvF32 and SpmvF64: y = A*x. Buffers: [BCSR A R, vector x_0 R, ...,
// vector x_k-1 R, vector y W], k >= 1, elements of the kernel's type; x is
// the concatenation of the x_i and holds every column a block of A covers;
// y has A's nrow*r elements. A may be a block-row range from the rows
// filter: y is then the matching part of the product. No argument.
const (
	SpmvF32 = "spmv_bcsr_f32"
	SpmvF64 = "spmv_bcsr_f64"
)

// MetaSize is the length of the metadata encoding.
const MetaSize = 24

// LayoutTag is stored in the low 32 bits of a BCSR buffer's Layout.LDZ so
// that a kernel can tell a BCSR buffer from another plugin interface's
// ("BCS1" little-endian).
const LayoutTag = 0x31534342

// MaxBlockDim is the largest r and c: the layout keeps each in 16 bits.
const MaxBlockDim = 1<<16 - 1

// Part indices: a BCSR datum's parts in order, CSR's.
const (
	PartNZVal  = sparse.PartNZVal
	PartColInd = sparse.PartColInd
	PartRowPtr = sparse.PartRowPtr
	NumParts   = sparse.NumParts
)

// PartNames name the parts in errors.
var PartNames = sparse.PartNames

// Meta is a BCSR matrix's shape, StarPU's starpu_bcsr_interface without
// the pointers.
type Meta struct {
	NNZ, NRow, FirstEntry, R, C, ElemSize uint32
}

// Encode returns the metadata as the interface receives it: nnz, nrow,
// firstentry, r, c and elemsize as little-endian uint32, in order.
func (m Meta) Encode() []byte {
	return sparse.EncodeFields(m.NNZ, m.NRow, m.FirstEntry, m.R, m.C, m.ElemSize)
}

// Decode parses and checks metadata from Encode.
func Decode(b []byte) (Meta, error) {
	f, ok := sparse.DecodeFields(b, MetaSize/4)
	if !ok {
		return Meta{}, fmt.Errorf("bcsr metadata of %d bytes, want %d (nnz, nrow, firstentry, r, c, elemsize)", len(b), MetaSize)
	}
	m := Meta{NNZ: f[0], NRow: f[1], FirstEntry: f[2], R: f[3], C: f[4], ElemSize: f[5]}
	return m, m.Check()
}

// Check validates the fields on their own: block sizes of 1 to
// MaxBlockDim, then what CSR's metadata needs (sparse.Compressed.Check).
func (m Meta) Check() error {
	if m.R == 0 || m.C == 0 || m.R > MaxBlockDim || m.C > MaxBlockDim {
		return fmt.Errorf("bcsr metadata: blocks of %d x %d, want r and c from 1 to %d", m.R, m.C, MaxBlockDim)
	}
	return m.Compressed().Check()
}

// Compressed is m as the compressed-row code BCSR shares with CSR sees
// it: a block is one entry of r*c elements.
func (m Meta) Compressed() sparse.Compressed {
	return sparse.Compressed{Format: Name, NNZ: m.NNZ, NRow: m.NRow, FirstEntry: m.FirstEntry, ElemSize: m.ElemSize, BlockLen: uint64(m.R) * uint64(m.C)}
}

// PartSizes are the byte sizes of nzval, colind and rowptr.
func (m Meta) PartSizes() []uint64 { return m.Compressed().PartSizes() }

// Layout is what a kernel learns about the matrix: ElemSize = elemsize,
// NX = nnz, NY = nrow, NZ = firstentry, LD = the region's length, LDZ =
// LayoutTag | r<<32 | c<<48; Interface is the core's.
func (m Meta) Layout() kernel.Layout {
	_, n := iface.PartOffsets(m.PartSizes())
	return kernel.Layout{
		ElemSize: m.ElemSize, NX: uint64(m.NNZ), NY: uint64(m.NRow), NZ: uint64(m.FirstEntry), LD: n,
		LDZ: LayoutTag | uint64(m.R)<<32 | uint64(m.C)<<48,
	}
}

// String renders the shape as StarPU's display does, for people.
func (m Meta) String() string {
	return fmt.Sprintf("bcsr(nrow=%d nnz=%d firstentry=%d r=%d c=%d elemsize=%d)", m.NRow, m.NNZ, m.FirstEntry, m.R, m.C, m.ElemSize)
}

// Validate checks a matrix's parts against m: their sizes, rowptr starting
// at firstentry, never decreasing and ending at firstentry+nnz, and, when
// nbcol > 0, every block column index below nbcol. Its error names the
// first bad entry.
func Validate(m Meta, nzval, colind, rowptr []byte, nbcol uint32) error {
	if err := m.Check(); err != nil {
		return err
	}
	return m.Compressed().Validate(m, nzval, colind, rowptr, nbcol, "block columns")
}

// Float is the element types the typed helpers take.
type Float = sparse.Float

// Parts returns the parts an application registers for a matrix of r x c
// blocks and its metadata: nnz = len(colind), nrow = len(rowptr)-1, and
// nzval must hold nnz*r*c values. The parts alias the slices (the runtime
// copies them at registration and back at unregistration). It fails when
// the slices' lengths disagree.
func Parts[T Float](nzval []T, colind, rowptr []uint32, firstentry, r, c uint32) (Meta, [][]byte, error) {
	if len(rowptr) == 0 {
		return Meta{}, nil, fmt.Errorf("bcsr: rowptr is empty; it has nrow+1 entries")
	}
	if uint64(len(colind)) > math.MaxUint32 || uint64(len(rowptr)) > math.MaxUint32 {
		return Meta{}, nil, fmt.Errorf("bcsr: %d blocks and %d block rows pass StarPU's uint32 range", len(colind), len(rowptr)-1)
	}
	if want := uint64(len(colind)) * uint64(r) * uint64(c); uint64(len(nzval)) != want {
		return Meta{}, nil, fmt.Errorf("bcsr: %d values for %d blocks of %d x %d, want %d", len(nzval), len(colind), r, c, want)
	}
	var zero T
	m := Meta{NNZ: uint32(len(colind)), NRow: uint32(len(rowptr) - 1), FirstEntry: firstentry, R: r, C: c, ElemSize: uint32(unsafe.Sizeof(zero))}
	if err := m.Check(); err != nil {
		return Meta{}, nil, err
	}
	return m, [][]byte{sparse.AsBytes(nzval), sparse.AsBytes(colind), sparse.AsBytes(rowptr)}, nil
}

// FromDense returns the BCSR form of a dense nrows x ncols matrix (a,
// row-major) in r x c blocks, for Parts: a block is stored when any of its
// elements is non-zero, blocks in row order, rowptr from 0. r must divide
// nrows and c ncols.
func FromDense[T Float](a []T, nrows, ncols int, r, c uint32) (nzval []T, colind, rowptr []uint32, err error) {
	switch {
	case nrows < 0 || ncols < 0 || len(a) != nrows*ncols:
		return nil, nil, nil, fmt.Errorf("bcsr: %d values for a %d x %d matrix", len(a), nrows, ncols)
	case r == 0 || c == 0 || r > MaxBlockDim || c > MaxBlockDim:
		return nil, nil, nil, fmt.Errorf("bcsr: blocks of %d x %d, want r and c from 1 to %d", r, c, MaxBlockDim)
	case nrows%int(r) != 0 || ncols%int(c) != 0:
		return nil, nil, nil, fmt.Errorf("bcsr: blocks of %d x %d do not divide a %d x %d matrix", r, c, nrows, ncols)
	case uint64(nrows/int(r))*uint64(ncols/int(c)) >= math.MaxUint32:
		return nil, nil, nil, fmt.Errorf("bcsr: a %d x %d matrix of %d x %d blocks passes StarPU's uint32 range", nrows, ncols, r, c)
	}
	ri, ci := int(r), int(c)
	rowptr = []uint32{0}
	for br := 0; br < nrows/ri; br++ {
		for bc := 0; bc < ncols/ci; bc++ {
			start := len(nzval)
			for i := 0; i < ri; i++ {
				row := (br*ri + i) * ncols
				nzval = append(nzval, a[row+bc*ci:row+bc*ci+ci]...)
			}
			stored := false
			for _, v := range nzval[start:] {
				stored = stored || v != 0
			}
			if !stored {
				nzval = nzval[:start]
				continue
			}
			colind = append(colind, uint32(bc))
		}
		rowptr = append(rowptr, uint32(len(colind)))
	}
	return nzval, colind, rowptr, nil
}

// RowBlock is the block rows [lo, hi) of child i of nparts that the rows
// filter gives a matrix of nrow block rows: nrow/nparts each, the first
// nrow%nparts one more (StarPU's chunk split). Its rows are lo*r to hi*r:
// applications split vectors the same way.
func RowBlock(nrow, nparts, i int) (lo, hi int) { return sparse.Chunk(nrow, nparts, i) }

// Matrix is a kernel's view of a BCSR buffer: slices over the buffer's
// bytes in the arena, written in place. Block row b's blocks are k = lo to
// hi-1 for lo, hi from Row(b): block k is Block(k), R*C row-major
// elements of NZVal, at block column ColInd[k].
type Matrix[T Float] struct {
	Meta
	sparse.Arrays[T]
}

// View checks that buf is a BCSR buffer of T elements and returns its
// parts. It does not read the contents: a kernel must still check the
// rowptr entries (Row does) and block columns it uses.
func View[T Float](buf *kernel.Buffer) (Matrix[T], error) {
	m, a, err := sparse.ViewCompressed[T](buf, LayoutTag, "BCSR matrix", func(nnz, nrow, firstentry uint32) (Meta, error) {
		m := Meta{
			NNZ: nnz, NRow: nrow, FirstEntry: firstentry,
			R: uint32(buf.LDZ >> 32 & 0xffff), C: uint32(buf.LDZ >> 48), ElemSize: buf.ElemSize,
		}
		return m, m.Check()
	})
	if err != nil {
		return Matrix[T]{}, err
	}
	return Matrix[T]{Meta: m, Arrays: a}, nil
}

// Block returns block k's R*C elements, row-major.
func (m *Matrix[T]) Block(k int) []T {
	n := int(m.R) * int(m.C)
	return m.NZVal[k*n : (k+1)*n]
}
