// Package sparse holds what the sparse matrix interfaces (CSR, BCSR, COO)
// share, so that each format's package keeps only what is its own:
// compressed rows (the checks of row pointers and column indices, a
// kernel's row lookup and the rows filter CSR and BCSR both have), StarPU's
// chunk split, and the byte views between typed slices, parts and kernel
// buffers. It imports no runtime.
package sparse

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Float is the element types the typed helpers take.
type Float interface{ float32 | float64 }

// The parts of a compressed-row datum (CSR, BCSR), in order.
const (
	PartNZVal = iota
	PartColInd
	PartRowPtr
	NumParts
)

// maxBytes bounds a part's size: far beyond any arena, and safe to add and
// align without overflow.
const maxBytes = 1 << 62

// Compressed is a compressed-row matrix's shape as the shared code needs
// it: CSR's, or BCSR's with each block one entry of BlockLen elements.
type Compressed struct {
	// Format prefixes errors ("csr", "bcsr").
	Format                string
	NNZ, NRow, FirstEntry uint32
	ElemSize              uint32
	// BlockLen is the number of elements an entry holds: 1 for CSR, r*c
	// for BCSR.
	BlockLen uint64
}

// Shape is a compressed-row format's metadata as the shared code takes
// it: its compressed form, and text naming it in errors.
type Shape interface {
	Compressed() Compressed
	fmt.Stringer
}

// EntryBytes is the size of one entry's values in nzval.
func (c Compressed) EntryBytes() uint64 { return uint64(c.ElemSize) * c.BlockLen }

// Check validates the fields: an element size, rowptr values (firstentry
// to firstentry+nnz) and nrow+1 that fit in uint32, and an nzval size that
// fits in memory at all.
func (c Compressed) Check() error {
	switch {
	case c.ElemSize == 0:
		return fmt.Errorf("%s metadata: elemsize is 0", c.Format)
	case c.ElemSize > 1<<16:
		return fmt.Errorf("%s metadata: elemsize %d is beyond 65536 bytes", c.Format, c.ElemSize)
	case uint64(c.FirstEntry)+uint64(c.NNZ) > math.MaxUint32:
		return fmt.Errorf("%s metadata: firstentry %d + nnz %d passes the uint32 range of rowptr", c.Format, c.FirstEntry, c.NNZ)
	case c.NRow == math.MaxUint32:
		return fmt.Errorf("%s metadata: nrow %d leaves no room for rowptr's nrow+1 entries", c.Format, c.NRow)
	}
	if hi, lo := bits.Mul64(uint64(c.NNZ), c.EntryBytes()); hi != 0 || lo > maxBytes {
		return fmt.Errorf("%s metadata: nzval of %d entries of %d bytes passes 2^62 bytes", c.Format, c.NNZ, c.EntryBytes())
	}
	return nil
}

// PartSizes are the byte sizes of nzval, colind and rowptr.
func (c Compressed) PartSizes() []uint64 {
	return []uint64{uint64(c.NNZ) * c.EntryBytes(), uint64(c.NNZ) * 4, (uint64(c.NRow) + 1) * 4}
}

// Validate checks a matrix's parts: their sizes (shape names the matrix
// in that error), rowptr starting at firstentry, never decreasing and
// ending at firstentry+nnz, and, when ncol > 0, every column index below
// ncol (cols names what they count: "columns", "block columns"). Its error
// names the first bad entry.
func (c Compressed) Validate(shape fmt.Stringer, nzval, colind, rowptr []byte, ncol uint32, cols string) error {
	if err := c.Check(); err != nil {
		return err
	}
	if err := CheckSizes(c.Format, shape, PartNames, c.PartSizes(), nzval, colind, rowptr); err != nil {
		return err
	}
	le := binary.LittleEndian
	prev := le.Uint32(rowptr)
	if prev != c.FirstEntry {
		return fmt.Errorf("%s: rowptr[0] = %d, want firstentry %d", c.Format, prev, c.FirstEntry)
	}
	for r := uint32(1); r <= c.NRow; r++ {
		v := le.Uint32(rowptr[4*r:])
		if v < prev {
			return fmt.Errorf("%s: rowptr[%d] = %d < rowptr[%d] = %d: rowptr must not decrease", c.Format, r, v, r-1, prev)
		}
		prev = v
	}
	if end := c.FirstEntry + c.NNZ; prev != end {
		return fmt.Errorf("%s: rowptr[%d] = %d, want firstentry+nnz = %d", c.Format, c.NRow, prev, end)
	}
	if ncol > 0 {
		return CheckIndices(c.Format, "colind", colind, ncol, cols)
	}
	return nil
}

// PartNames name a compressed-row datum's parts in errors.
var PartNames = []string{"nzval", "colind", "rowptr"}

// CheckSizes checks that each part has the size sizes gives, naming the
// part (names) and the datum (shape) otherwise; format prefixes the error.
func CheckSizes(format string, shape fmt.Stringer, names []string, sizes []uint64, parts ...[]byte) error {
	for i, b := range parts {
		if uint64(len(b)) != sizes[i] {
			return fmt.Errorf("%s: %s has %d bytes, %v needs %d", format, names[i], len(b), shape, sizes[i])
		}
	}
	return nil
}

// CheckIndices checks that every little-endian uint32 of idx is below n:
// its error names the entry as name[k] and n as "the n <what>", prefixed by
// format.
func CheckIndices(format, name string, idx []byte, n uint32, what string) error {
	le := binary.LittleEndian
	for k := 0; k+4 <= len(idx); k += 4 {
		if v := le.Uint32(idx[k:]); v >= n {
			return fmt.Errorf("%s: %s[%d] = %d, beyond the %d %s", format, name, k/4, v, n, what)
		}
	}
	return nil
}

// Row returns the entry range [lo, hi) of row r of a compressed-row
// matrix (rowptr offset by firstentry, nnz entries), or an error naming the
// bad rowptr entries, so that a kernel never indexes outside its parts.
func Row(rowptr []uint32, r int, firstentry, nnz uint32) (lo, hi int, err error) {
	a, b := rowptr[r], rowptr[r+1]
	if a < firstentry || b < a || b-firstentry > nnz {
		return 0, 0, fmt.Errorf("rowptr[%d..%d] = %d..%d outside [firstentry %d, firstentry+nnz %d]",
			r, r+1, a, b, firstentry, uint64(firstentry)+uint64(nnz))
	}
	return int(a - firstentry), int(b - firstentry), nil
}

// Chunk is the range [lo, hi) of chunk i of nparts that StarPU's filters
// give n items: n/nparts each, the first n%nparts one more.
func Chunk(n, nparts, i int) (lo, hi int) {
	q, r := n/nparts, n%nparts
	lo = i*q + min(i, r)
	hi = lo + q
	if i < r {
		hi++
	}
	return lo, hi
}

// RowsFilter is the rows filter of a compressed-row format (StarPU's
// starpu_csr_filter_vertical_block and starpu_bcsr_filter_vertical_block):
// child i holds rows Chunk(nrow, nparts, i), its nnz is the rowptr
// difference across them, its firstentry the parent's rowptr at its first
// row, and its rowptr the parent's entries lo..hi unchanged (global, as in
// StarPU). decode parses the parent's metadata into the format's M; child
// encodes a child's from its parent's and its own nnz, nrow and firstentry.
func RowsFilter[M Shape](decode func(meta []byte) (M, error), child func(parent M, nnz, nrow, firstentry uint32) []byte) ifacesdk.Filter {
	return func(meta []byte, parts [][]byte, nparts int) ([]ifacesdk.FilterChild, error) {
		pm, err := decode(meta)
		if err != nil {
			return nil, err
		}
		m := pm.Compressed()
		if uint64(nparts) > uint64(m.NRow) {
			return nil, fmt.Errorf("cannot split %d rows into %d blocks", m.NRow, nparts)
		}
		rowptr := parts[PartRowPtr]
		at := func(r int) (uint32, error) {
			v := binary.LittleEndian.Uint32(rowptr[4*r:])
			if v < m.FirstEntry || v-m.FirstEntry > m.NNZ {
				return 0, fmt.Errorf("rowptr[%d] = %d outside [firstentry %d, firstentry+nnz %d]", r, v, m.FirstEntry, m.FirstEntry+m.NNZ)
			}
			return v, nil
		}
		es := m.EntryBytes()
		children := make([]ifacesdk.FilterChild, nparts)
		for i := range children {
			lo, hi := Chunk(int(m.NRow), nparts, i)
			a, err := at(lo)
			if err != nil {
				return nil, err
			}
			b, err := at(hi)
			if err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("rowptr[%d] = %d < rowptr[%d] = %d: rowptr must not decrease", hi, b, lo, a)
			}
			first, n := uint64(a-m.FirstEntry), uint64(b-a)
			var rs []iface.PartRange
			if n > 0 {
				rs = append(rs,
					iface.PartRange{Part: PartNZVal, Offset: first * es, ChildPart: PartNZVal, Len: n * es},
					iface.PartRange{Part: PartColInd, Offset: first * 4, ChildPart: PartColInd, Len: n * 4})
			}
			rs = append(rs, iface.PartRange{Part: PartRowPtr, Offset: uint64(lo) * 4, ChildPart: PartRowPtr, Len: uint64(hi-lo+1) * 4})
			children[i] = ifacesdk.FilterChild{Meta: child(pm, b-a, uint32(hi-lo), a), Ranges: rs}
		}
		return children, nil
	}
}

// CheckBuffer checks that buf is a plugin interface's buffer whose LDZ
// carries tag in its low 32 bits, with elements of elemSize bytes; what
// names the format in errors ("CSR matrix").
func CheckBuffer(buf *kernel.Buffer, tag, elemSize uint32, what string) error {
	switch {
	case buf.Interface < kernel.FirstPluginInterface || uint32(buf.LDZ) != tag:
		return fmt.Errorf("buffer is a %v, not a %s", buf.Interface, what)
	case buf.ElemSize != elemSize:
		return fmt.Errorf("%s has %d-byte elements, want %d", what, buf.ElemSize, elemSize)
	}
	return nil
}

// Region returns the parts of a plugin interface's buffer whose region
// holds parts of the given sizes (placed by iface.PartOffsets), after
// checking that the layout's region length is theirs, that the bytes cover
// it and that they are 8-byte aligned, as the arena's are. shape names the
// datum in errors.
func Region(buf *kernel.Buffer, sizes []uint64, shape fmt.Stringer) ([][]byte, error) {
	offs, n := iface.PartOffsets(sizes)
	if buf.LD != n || uint64(len(buf.Bytes)) < n {
		return nil, fmt.Errorf("%v needs a region of %d bytes, the buffer has LD %d and %d bytes", shape, n, buf.LD, len(buf.Bytes))
	}
	if len(buf.Bytes) > 0 && uintptr(unsafe.Pointer(&buf.Bytes[0]))%8 != 0 {
		return nil, fmt.Errorf("%v: region is not 8-byte aligned", shape)
	}
	parts := make([][]byte, len(sizes))
	for i, s := range sizes {
		parts[i] = buf.Bytes[offs[i] : offs[i]+s]
	}
	return parts, nil
}

// Arrays is a kernel's view of a compressed-row buffer's parts, over the
// buffer's bytes.
type Arrays[T Float] struct {
	NZVal  []T
	ColInd []uint32
	// RowPtr has NRow+1 entries offset by FirstEntry: Row gives row r's
	// entries.
	RowPtr []uint32
	shape  Compressed
}

// Row returns the index range [lo, hi) in ColInd of row r's entries, or an
// error naming the bad rowptr entries, so that a kernel never indexes
// outside the parts.
func (a *Arrays[T]) Row(r int) (lo, hi int, err error) {
	lo, hi, err = Row(a.RowPtr, r, a.shape.FirstEntry, a.shape.NNZ)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", a.shape.Format, err)
	}
	return lo, hi, nil
}

// ViewCompressed checks that buf is a buffer of a compressed-row format
// (CheckBuffer with tag and what) whose layout holds nnz, nrow and
// firstentry in NX, NY and NZ; shape turns those into the format's
// metadata, checked. It returns the metadata and the parts, without
// reading them.
func ViewCompressed[T Float, M Shape](buf *kernel.Buffer, tag uint32, what string, shape func(nnz, nrow, firstentry uint32) (M, error)) (M, Arrays[T], error) {
	var zero T
	var m M
	if err := CheckBuffer(buf, tag, uint32(unsafe.Sizeof(zero)), what); err != nil {
		return m, Arrays[T]{}, err
	}
	if buf.NX > math.MaxUint32 || buf.NY >= math.MaxUint32 || buf.NZ > math.MaxUint32 {
		return m, Arrays[T]{}, fmt.Errorf("%s layout nnz %d, nrow %d, firstentry %d pass the uint32 range", what, buf.NX, buf.NY, buf.NZ)
	}
	m, err := shape(uint32(buf.NX), uint32(buf.NY), uint32(buf.NZ))
	if err != nil {
		return m, Arrays[T]{}, fmt.Errorf("%s layout: %w", what, err)
	}
	parts, err := Region(buf, m.Compressed().PartSizes(), m)
	if err != nil {
		return m, Arrays[T]{}, err
	}
	return m, Arrays[T]{
		NZVal: AsSlice[T](parts[PartNZVal]), ColInd: AsSlice[uint32](parts[PartColInd]), RowPtr: AsSlice[uint32](parts[PartRowPtr]),
		shape: m.Compressed(),
	}, nil
}

// AsBytes is s's memory as bytes (an empty, non-nil slice when s is empty,
// so that it still counts as a part).
func AsBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// AsSlice is b's memory as T values (b must be aligned for T; trailing
// bytes short of a T are left out).
func AsSlice[T any](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// Footprint hashes shape fields for performance models: the CRC-32 of
// EncodeFields(fields...).
func Footprint(fields ...uint32) uint32 { return crc32.ChecksumIEEE(EncodeFields(fields...)) }

// EncodeFields is the sparse formats' metadata encoding: the fields as
// little-endian uint32s, in order.
func EncodeFields(fields ...uint32) []byte {
	b := make([]byte, 4*len(fields))
	for i, v := range fields {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// DecodeFields reverses EncodeFields for n fields; it reports false when b
// does not have their length.
func DecodeFields(b []byte, n int) ([]uint32, bool) {
	if len(b) != 4*n {
		return nil, false
	}
	f := make([]uint32, n)
	for i := range f {
		f[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return f, true
}
