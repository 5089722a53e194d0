package csr

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// sample is the 3x4 matrix
//
//	[1 0 2 0]
//	[0 0 0 0]
//	[0 3 0 4]
func sample() ([]float64, []uint32, []uint32) {
	return []float64{1, 2, 3, 4}, []uint32{0, 2, 1, 3}, []uint32{0, 2, 2, 4}
}

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{NNZ: 4, NRow: 3, FirstEntry: 1, ElemSize: 8}
	got, err := Decode(m.Encode())
	if err != nil || got != m {
		t.Fatalf("Decode(Encode(%v)) = %v, %v", m, got, err)
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{nil, "csr metadata of 0 bytes, want 16"},
		{Meta{NNZ: 1, NRow: 1}.Encode(), "elemsize is 0"},
		{Meta{NNZ: 1, NRow: 1, ElemSize: 1 << 20}.Encode(), "elemsize 1048576 is beyond"},
		{Meta{NNZ: 1 << 31, FirstEntry: 1 << 31, NRow: 1, ElemSize: 4}.Encode(), "passes the uint32 range"},
		{Meta{NRow: 1<<32 - 1, ElemSize: 4}.Encode(), "no room for rowptr"},
	} {
		if _, err := Decode(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%v) = %v, want %q", c.b, err, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	nz, ci, rp := sample()
	m, parts, err := Parts(nz, ci, rp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m != (Meta{NNZ: 4, NRow: 3, FirstEntry: 0, ElemSize: 8}) {
		t.Fatalf("Parts meta = %v", m)
	}
	if err := Validate(m, parts[0], parts[1], parts[2], 4); err != nil {
		t.Fatalf("valid matrix: %v", err)
	}
	// The same matrix indexed from 1 (Fortran style).
	rp1 := []uint32{1, 3, 3, 5}
	m1, p1, _ := Parts(nz, ci, rp1, 1)
	if err := Validate(m1, p1[0], p1[1], p1[2], 4); err != nil {
		t.Fatalf("1-based matrix: %v", err)
	}
	for _, c := range []struct {
		name   string
		m      Meta
		colind []uint32
		rowptr []uint32
		ncol   uint32
		want   string
	}{
		{"rowptr decreases", m, ci, []uint32{0, 3, 2, 4}, 0, "rowptr[2] = 2 < rowptr[1] = 3: rowptr must not decrease"},
		{"rowptr start", m, ci, []uint32{1, 2, 2, 4}, 0, "rowptr[0] = 1, want firstentry 0"},
		{"rowptr end", m, ci, []uint32{0, 2, 2, 3}, 0, "rowptr[3] = 3, want firstentry+nnz = 4"},
		{"firstentry", m1, ci, rp, 0, "rowptr[0] = 0, want firstentry 1"},
		{"colind", m, []uint32{0, 2, 4, 3}, rp, 4, "colind[2] = 4, beyond the 4 columns"},
		{"colind unchecked", m, []uint32{0, 2, 4, 3}, rp, 0, ""},
		{"rowptr short", m, ci, []uint32{0, 2, 4}, 0, "rowptr has 12 bytes, csr(nrow=3 nnz=4 firstentry=0 elemsize=8) needs 16"},
		{"colind short", m, ci[:3], rp, 0, "colind has 12 bytes"},
		{"elemsize", Meta{NNZ: 4, NRow: 3, ElemSize: 4}, ci, rp, 0, "nzval has 32 bytes"},
	} {
		err := Validate(c.m, parts[0], sparse.AsBytes(c.colind), sparse.AsBytes(c.rowptr), c.ncol)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

func TestPartsErrors(t *testing.T) {
	nz, ci, rp := sample()
	if _, _, err := Parts(nz, ci[:3], rp, 0); err == nil || !strings.Contains(err.Error(), "4 values but 3 column indices") {
		t.Errorf("short colind: %v", err)
	}
	if _, _, err := Parts(nz, ci, nil, 0); err == nil || !strings.Contains(err.Error(), "rowptr is empty") {
		t.Errorf("no rowptr: %v", err)
	}
	m, parts, err := Parts([]float32{}, nil, []uint32{0}, 0)
	if err != nil || m != (Meta{NRow: 0, ElemSize: 4}) || len(parts) != 3 || Validate(m, parts[0], parts[1], parts[2], 0) != nil {
		t.Errorf("empty matrix: %v %v %v", m, parts, err)
	}
}

func TestRowBlock(t *testing.T) {
	for _, c := range []struct{ nrow, nparts int }{{10, 3}, {3, 3}, {7, 1}, {100, 7}, {5, 5}} {
		next := 0
		for i := 0; i < c.nparts; i++ {
			lo, hi := RowBlock(c.nrow, c.nparts, i)
			if lo != next || hi < lo || hi-lo > c.nrow/c.nparts+1 || hi-lo < c.nrow/c.nparts {
				t.Fatalf("RowBlock(%d, %d, %d) = %d, %d", c.nrow, c.nparts, i, lo, hi)
			}
			next = hi
		}
		if next != c.nrow {
			t.Fatalf("RowBlock(%d, %d, *) covers %d rows", c.nrow, c.nparts, next)
		}
	}
	if lo, hi := RowBlock(10, 3, 0); lo != 0 || hi != 4 {
		t.Errorf("RowBlock(10, 3, 0) = %d, %d; want StarPU's 0, 4", lo, hi)
	}
}

// region lays parts out as the core does, in an 8-aligned buffer.
func region(parts [][]byte) []byte {
	sizes := make([]uint64, len(parts))
	for i, p := range parts {
		sizes[i] = uint64(len(p))
	}
	offs, n := iface.PartOffsets(sizes)
	words := make([]uint64, (n+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)[:n]
	for i, p := range parts {
		copy(b[offs[i]:], p)
	}
	return b
}

func TestView(t *testing.T) {
	nz, ci, rp := sample()
	m, parts, _ := Parts(nz, ci, rp, 0)
	l := m.Layout()
	l.Interface = kernel.FirstPluginInterface + 3
	if l.Len() != 2*iface.PartAlign+16 {
		t.Fatalf("layout Len %d, want the region's %d bytes", l.Len(), 2*iface.PartAlign+16)
	}
	buf := &kernel.Buffer{Layout: l, Mode: kernel.R, Bytes: region(parts)}
	v, err := View[float64](buf)
	if err != nil {
		t.Fatal(err)
	}
	if v.Meta != m || len(v.NZVal) != 4 || v.NZVal[3] != 4 || v.ColInd[2] != 1 || len(v.RowPtr) != 4 || v.RowPtr[3] != 4 {
		t.Fatalf("view %+v", v)
	}
	if lo, hi, err := v.Row(2); err != nil || lo != 2 || hi != 4 {
		t.Fatalf("Row(2) = %d, %d, %v", lo, hi, err)
	}
	v.RowPtr[1] = 9
	if _, _, err := v.Row(1); err == nil || !strings.Contains(err.Error(), "rowptr[1..2] = 9..2") {
		t.Fatalf("Row with a bad rowptr: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(b *kernel.Buffer)
		want string
	}{
		{"f32", func(b *kernel.Buffer) {}, "8-byte elements, want 4"},
		{"vector", func(b *kernel.Buffer) { b.Interface = kernel.Vector }, "buffer is a vector, not a CSR matrix"},
		{"tag", func(b *kernel.Buffer) { b.LDZ = 0 }, "not a CSR matrix"},
		{"short", func(b *kernel.Buffer) { b.Bytes = b.Bytes[:100] }, fmt.Sprintf("needs a region of %d bytes, the buffer has LD %[1]d and 100 bytes", l.Len())},
		{"ld", func(b *kernel.Buffer) { b.LD = 10 }, "the buffer has LD 10"},
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
