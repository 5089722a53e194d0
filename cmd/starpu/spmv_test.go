package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadMTX(t *testing.T) {
	m, err := readMTX(strings.NewReader(`%%MatrixMarket matrix coordinate real symmetric
% a comment
3 3 4
1 1 4.0
2 1 -1
2 2 4
3 3 2.5
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &csrMatrix{nrow: 3, ncol: 3, rowptr: []uint32{0, 2, 4, 5}, colind: []uint32{0, 1, 0, 1, 2}, val: []float64{4, -1, -1, 4, 2.5}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	p, err := readMTX(strings.NewReader("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n2 3\n1 1\n"))
	if err != nil || !reflect.DeepEqual(p.rowptr, []uint32{0, 1, 2}) || !reflect.DeepEqual(p.colind, []uint32{0, 2}) || p.ncol != 3 {
		t.Fatalf("pattern: %+v, %v", p, err)
	}
	for _, c := range []struct{ in, want string }{
		{"", "mtx: empty file"},
		{"%%MatrixMarket matrix array real general\n", "want %%MatrixMarket matrix coordinate"},
		{"%%MatrixMarket matrix coordinate complex general\n", `field "complex" not supported`},
		{"%%MatrixMarket matrix coordinate real hermitian\n", `symmetry "hermitian" not supported`},
		{"%%MatrixMarket matrix coordinate real general\n", "no size line"},
		{"%%MatrixMarket matrix coordinate real general\n2 x 1\n", "line 2: want <rows> <cols> <entries>"},
		{"%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n", "2x3 symmetric matrix"},
		{"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n", "2 entries announced, 1 found"},
		{"%%MatrixMarket matrix coordinate real general\n2 2 1\n% c\n3 1 1\n", "line 4: entry (3, 1) outside the 2x2 matrix"},
		{"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n", `line 3: value "abc"`},
		{"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n", "line 3: want 3 fields"},
	} {
		if _, err := readMTX(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("readMTX(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestGenerators(t *testing.T) {
	l := laplacian(3)
	if l.nrow != 9 || l.nnz() != 33 || l.rowptr[9] != 33 {
		t.Fatalf("laplacian(3): %d rows, %d entries", l.nrow, l.nnz())
	}
	// The Laplacian of a constant is zero inside the grid.
	x := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1}
	y := make([]float64, 9)
	l.mulVec(x, y)
	if y[4] != 0 || y[0] != 2 {
		t.Fatalf("laplacian(3) * 1 = %v", y)
	}
	b := banded(10, 2, 1)
	if b.nnz() != 10*5-2*(1+2) || b.colind[0] != 0 || b.colind[len(b.colind)-1] != 9 {
		t.Fatalf("banded(10, 2): %d entries", b.nnz())
	}
	if b2 := banded(10, 2, 1); !reflect.DeepEqual(b, b2) {
		t.Fatal("banded is not repeatable")
	}
}
