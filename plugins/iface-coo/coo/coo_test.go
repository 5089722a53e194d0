package coo

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{NNZ: 3, NX: 4, NY: 2, ElemSize: 4}
	if got, err := Decode(m.Encode()); err != nil || got != m {
		t.Fatalf("Decode(Encode(%v)) = %v, %v", m, got, err)
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte{1, 2}, "coo metadata of 2 bytes, want 16"},
		{Meta{NNZ: 1, NX: 1, NY: 1}.Encode(), "elemsize 0, want 1 to 65536"},
		{Meta{NNZ: 1, NX: 0, NY: 1, ElemSize: 8}.Encode(), "1 entries in a 1x0 matrix"},
	} {
		if _, err := Decode(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%v) = %v, want %q", c.b, err, c.want)
		}
	}
}

func TestValidateAndParts(t *testing.T) {
	rows, cols, vals := []uint32{0, 1, 1}, []uint32{3, 0, 2}, []float32{1, 2, 3}
	m, parts, err := Parts(rows, cols, vals, 4, 2)
	if err != nil || m != (Meta{NNZ: 3, NX: 4, NY: 2, ElemSize: 4}) {
		t.Fatalf("Parts = %v, %v", m, err)
	}
	if err := Validate(m, parts[0], parts[1], parts[2]); err != nil {
		t.Fatalf("valid matrix: %v", err)
	}
	if _, _, err := Parts(rows, cols[:2], vals, 4, 2); err == nil || !strings.Contains(err.Error(), "3 rows, 2 cols, 3 values") {
		t.Errorf("short cols: %v", err)
	}
	for _, c := range []struct {
		name       string
		rows, cols []uint32
		want       string
	}{
		{"row", []uint32{0, 2, 1}, cols, "coo: rows[1] = 2, beyond the 2 rows"},
		{"col", rows, []uint32{3, 0, 4}, "coo: cols[2] = 4, beyond the 4 columns"},
		{"size", rows[:2], cols, "coo: rows has 8 bytes, coo(2x4 nnz=3 elemsize=4) needs 12"},
	} {
		if err := Validate(m, sparse.AsBytes(c.rows), sparse.AsBytes(c.cols), parts[2]); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestView(t *testing.T) {
	m, parts, _ := Parts([]uint32{0, 1}, []uint32{1, 0}, []float64{5, 6}, 2, 2)
	offs, n := iface.PartOffsets(m.PartSizes())
	words := make([]uint64, (n+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)[:n]
	for i, p := range parts {
		copy(b[offs[i]:], p)
	}
	l := m.Layout()
	l.Interface = kernel.FirstPluginInterface
	buf := &kernel.Buffer{Layout: l, Bytes: b}
	v, err := View[float64](buf)
	if err != nil || v.Meta != m || v.Values[1] != 6 || v.Rows[1] != 1 || v.Cols[0] != 1 {
		t.Fatalf("View = %+v, %v", v, err)
	}
	if _, err := View[float32](buf); err == nil || !strings.Contains(err.Error(), "8-byte elements, want 4") {
		t.Errorf("View[float32]: %v", err)
	}
	buf.LDZ = 0x31525343 // a CSR buffer's tag
	if _, err := View[float64](buf); err == nil || !strings.Contains(err.Error(), "not a COO matrix") {
		t.Errorf("View of a CSR tag: %v", err)
	}
}
