package bcsr

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// example is the matrix of starpu_bcsr_data_register's documentation:
//
//	[0 1  0  0]
//	[2 3  0  0]
//	[4 5  8  9]
//	[6 7 10 11]
var example = []float64{0, 1, 0, 0, 2, 3, 0, 0, 4, 5, 8, 9, 6, 7, 10, 11}

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{NNZ: 3, NRow: 2, FirstEntry: 1, R: 2, C: 3, ElemSize: 8}
	if got, err := Decode(m.Encode()); err != nil || got != m {
		t.Fatalf("Decode(Encode(%v)) = %v, %v", m, got, err)
	}
	for _, c := range []struct {
		m    Meta
		want string
	}{
		{Meta{NNZ: 1, NRow: 1, R: 0, C: 2, ElemSize: 8}, "bcsr metadata: blocks of 0 x 2, want r and c from 1 to 65535"},
		{Meta{NNZ: 1, NRow: 1, R: 2, C: 1 << 16, ElemSize: 8}, "blocks of 2 x 65536"},
		{Meta{NNZ: 1, NRow: 1, R: 1, C: 1}, "bcsr metadata: elemsize is 0"},
		{Meta{NNZ: 1 << 31, FirstEntry: 1 << 31, NRow: 1, R: 1, C: 1, ElemSize: 4}, "firstentry 2147483648 + nnz 2147483648 passes the uint32 range"},
		{Meta{NRow: 1<<32 - 1, R: 1, C: 1, ElemSize: 4}, "no room for rowptr"},
		{Meta{NNZ: 1 << 31, NRow: 1, R: MaxBlockDim, C: MaxBlockDim, ElemSize: 1 << 16}, "nzval of 2147483648 entries of 281466386841600 bytes passes 2^62 bytes"},
	} {
		if _, err := Decode(c.m.Encode()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%v) = %v, want %q", c.m, err, c.want)
		}
	}
	if _, err := Decode(make([]byte, 16)); err == nil || err.Error() != "bcsr metadata of 16 bytes, want 24 (nnz, nrow, firstentry, r, c, elemsize)" {
		t.Errorf("short metadata: %v", err)
	}
}

func TestFromDense(t *testing.T) {
	nz, ci, rp, err := FromDense(example, 4, 4, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	// StarPU's own encoding of the example.
	if !reflect.DeepEqual(nz, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) ||
		!reflect.DeepEqual(ci, []uint32{0, 0, 1}) || !reflect.DeepEqual(rp, []uint32{0, 1, 3}) {
		t.Fatalf("FromDense = %v %v %v", nz, ci, rp)
	}
	// 1 x 4 blocks: one per row, the first row's too.
	if _, ci, rp, _ := FromDense(example, 4, 4, 1, 4); !reflect.DeepEqual(ci, []uint32{0, 0, 0, 0}) || !reflect.DeepEqual(rp, []uint32{0, 1, 2, 3, 4}) {
		t.Fatalf("1 x 4 blocks: %v %v", ci, rp)
	}
	for _, c := range []struct {
		rows, cols int
		r, c       uint32
		want       string
	}{
		{4, 4, 3, 2, "bcsr: blocks of 3 x 2 do not divide a 4 x 4 matrix"},
		{4, 4, 2, 3, "bcsr: blocks of 2 x 3 do not divide a 4 x 4 matrix"},
		{4, 4, 0, 2, "bcsr: blocks of 0 x 2, want r and c from 1 to 65535"},
		{4, 3, 2, 2, "bcsr: 16 values for a 4 x 3 matrix"},
	} {
		if _, _, _, err := FromDense(example, c.rows, c.cols, c.r, c.c); err == nil || err.Error() != c.want {
			t.Errorf("FromDense(%dx%d, %dx%d blocks) = %v, want %q", c.rows, c.cols, c.r, c.c, err, c.want)
		}
	}
}

func TestValidateAndParts(t *testing.T) {
	nz, ci, rp, _ := FromDense(example, 4, 4, 2, 2)
	m, parts, err := Parts(nz, ci, rp, 0, 2, 2)
	if err != nil || m != (Meta{NNZ: 3, NRow: 2, R: 2, C: 2, ElemSize: 8}) {
		t.Fatalf("Parts = %v, %v", m, err)
	}
	if err := Validate(m, parts[0], parts[1], parts[2], 2); err != nil {
		t.Fatalf("valid matrix: %v", err)
	}
	for _, c := range []struct {
		name           string
		colind, rowptr []uint32
		nbcol          uint32
		want           string
	}{
		{"decreasing", ci, []uint32{0, 4, 3}, 0, "bcsr: rowptr[2] = 3 < rowptr[1] = 4: rowptr must not decrease"},
		{"start", ci, []uint32{1, 1, 3}, 0, "bcsr: rowptr[0] = 1, want firstentry 0"},
		{"end", ci, []uint32{0, 1, 2}, 0, "bcsr: rowptr[2] = 2, want firstentry+nnz = 3"},
		{"column", []uint32{0, 0, 2}, rp, 2, "bcsr: colind[2] = 2, beyond the 2 block columns"},
		{"size", ci, rp[:2], 0, "bcsr: rowptr has 8 bytes, bcsr(nrow=2 nnz=3 firstentry=0 r=2 c=2 elemsize=8) needs 12"},
	} {
		if err := Validate(m, parts[0], sparse.AsBytes(c.colind), sparse.AsBytes(c.rowptr), c.nbcol); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := Validate(Meta{NNZ: 3, NRow: 2, R: 2, ElemSize: 8}, parts[0], parts[1], parts[2], 0); err == nil || !strings.Contains(err.Error(), "blocks of 2 x 0") {
		t.Errorf("c = 0: %v", err)
	}
	for _, c := range []struct {
		name string
		nz   []float64
		rp   []uint32
		r    uint32
		want string
	}{
		{"values", nz[:11], rp, 2, "bcsr: 11 values for 3 blocks of 2 x 2, want 12"},
		{"rowptr", nz, nil, 2, "bcsr: rowptr is empty; it has nrow+1 entries"},
		{"block size", nil, rp, 0, "bcsr metadata: blocks of 0 x 2"},
	} {
		if _, _, err := Parts(c.nz, ci, c.rp, 0, c.r, 2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parts %s: %v, want %q", c.name, err, c.want)
		}
	}
}

// region lays parts out as the core does, in 8-byte aligned memory.
func region(m Meta, parts [][]byte) []byte {
	offs, n := iface.PartOffsets(m.PartSizes())
	words := make([]uint64, (n+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)[:n]
	for i, p := range parts {
		copy(b[offs[i]:], p)
	}
	return b
}

func TestView(t *testing.T) {
	nz, ci, rp, _ := FromDense(example, 4, 4, 2, 2)
	m, parts, _ := Parts(nz, ci, rp, 0, 2, 2)
	l := m.Layout()
	l.Interface = kernel.FirstPluginInterface + 2
	if l.Len() != 2*iface.PartAlign+12 || l.LDZ != LayoutTag|2<<32|2<<48 {
		t.Fatalf("layout %+v, Len %d", l, l.Len())
	}
	buf := &kernel.Buffer{Layout: l, Mode: kernel.R, Bytes: region(m, parts)}
	v, err := View[float64](buf)
	if err != nil {
		t.Fatal(err)
	}
	if v.Meta != m || !reflect.DeepEqual(v.NZVal, nz) || !reflect.DeepEqual(v.ColInd, ci) || !reflect.DeepEqual(v.RowPtr, rp) {
		t.Fatalf("view %+v", v)
	}
	// Element (3, 2) of the example, 10, is (1, 0) of block row 1's second
	// block.
	if lo, hi, err := v.Row(1); err != nil || lo != 1 || hi != 3 || v.ColInd[2] != 1 || v.Block(2)[1*2+0] != 10 {
		t.Fatalf("Row(1) = %d, %d, %v; block 2 %v", lo, hi, err, v.Block(2))
	}
	v.RowPtr[1] = 9
	if _, _, err := v.Row(0); err == nil || err.Error() != "bcsr: rowptr[0..1] = 0..9 outside [firstentry 0, firstentry+nnz 3]" {
		t.Fatalf("Row with a bad rowptr: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(b *kernel.Buffer)
		want string
	}{
		{"f32", func(b *kernel.Buffer) {}, "BCSR matrix has 8-byte elements, want 4"},
		{"vector", func(b *kernel.Buffer) { b.Interface = kernel.Vector }, "buffer is a vector, not a BCSR matrix"},
		{"csr", func(b *kernel.Buffer) { b.LDZ = 0x31525343 }, "not a BCSR matrix"},
		{"block size", func(b *kernel.Buffer) { b.LDZ = LayoutTag | 2<<32 }, "BCSR matrix layout: bcsr metadata: blocks of 2 x 0"},
		// 3 blocks of 8 x 16 take more than one part's alignment.
		{"other block size", func(b *kernel.Buffer) { b.LDZ = LayoutTag | 8<<32 | 16<<48 },
			fmt.Sprintf("needs a region of %d bytes, the buffer has LD %d", 3*8*16*8+iface.PartAlign+12, l.Len())},
		{"short", func(b *kernel.Buffer) { b.Bytes = b.Bytes[:100] }, fmt.Sprintf("needs a region of %d bytes, the buffer has LD %[1]d and 100 bytes", l.Len())},
		{"unaligned", func(b *kernel.Buffer) { b.Bytes = b.Bytes[4 : 4+l.Len()] }, "region is not 8-byte aligned"},
	} {
		b := *buf
		c.edit(&b)
		var err error
		if c.name == "f32" {
			_, err = View[float32](&b)
		} else {
			_, err = View[float64](&b)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
