package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
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

func TestRunSpmv(t *testing.T) {
	dir := t.TempDir()
	mtx := filepath.Join(dir, "a.mtx")
	if err := os.WriteFile(mtx, []byte("%%MatrixMarket matrix coordinate real general\n4 3 5\n1 1 2\n1 3 -1\n2 2 3\n4 1 1.5\n4 3 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "spmv", "--nnz", "20000", "--nblocks", "3", "--iters", "2"},
		{"run", "spmv", "--matrix", "banded", "--nnz", "9000", "--nblocks", "5", "--iters", "2"},
		{"run", "spmv", "--mtx", mtx, "--nblocks", "2", "--iters", "1"},
	} {
		kv := lastLine(t, args...)
		if kv["verified"] != "true" || kv["max_err"] != "0" {
			t.Errorf("%v: %v", args, kv)
		}
		for _, k := range []string{"ms", "gflops", "seq_ms", "seq_gflops", "speedup", "nnz"} {
			if _, err := strconv.ParseFloat(kv[k], 64); err != nil {
				t.Errorf("%v: %s = %q", args, k, kv[k])
			}
		}
	}
	if kv := lastLine(t, "run", "spmv", "--mtx", mtx, "--nblocks", "2", "--iters", "1"); kv["nnz"] != "5" || kv["nrow"] != "4" {
		t.Errorf("mtx matrix: %v", kv)
	}
}

func TestRunSpmvErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.mtx")
	os.WriteFile(bad, []byte("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "spmv", "--nnz", "1000", "--nblocks", "0"}, "need 0 < nblocks (0) <= rows"},
		{[]string{"run", "spmv", "--matrix", "dense"}, `unknown --matrix "dense"`},
		{[]string{"run", "spmv", "--mtx", bad}, "line 3: entry (3, 1) outside the 2x2 matrix"},
		{[]string{"run", "spmv", "--mtx", bad + ".missing"}, "no such file"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(c.args, "--plugin-dir", pluginDir, "--ncpu", "1"), &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
