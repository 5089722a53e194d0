package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
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

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// mtxAllocBound is what readMTX may allocate for an input of n bytes: a
// fixed part (row pointers up to mtxFreeDim rows, the scanner's buffer)
// and a part proportional to the input.
func mtxAllocBound(n int) uint64 { return 16<<20 + 256*uint64(n) }

// failingReader returns its data, then err.
type failingReader struct {
	data string
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// A hostile file cannot make readMTX allocate from its size line, and every
// inconsistency is an error that names the line.
func TestReadMTXHostile(t *testing.T) {
	const hdr = "%%MatrixMarket matrix coordinate real general\n"
	longLine := hdr + "2 2 1\n1 1 " + strings.Repeat("1", 1<<20+10) + "\n"
	for _, c := range []struct {
		name string
		in   io.Reader
		size int // input bytes, for the allocation bound
		want string
	}{
		// The probe's 60-byte file: 16 GiB of rowptr and 32 GiB of entries
		// asked for by the header alone.
		{"huge header", strings.NewReader(hdr + "4294967294 4294967294 2147483648\n"), 90, "2147483648 entries announced, at most 1073741824"},
		{"many entries announced", strings.NewReader(hdr + "1000 1000 50000000\n1 1 1\n"), 80, "50000000 entries announced, 1 found"},
		{"huge dimensions", strings.NewReader(hdr + "100000000 100000000 1\n1 1 1\n"), 80, "a 100000000x100000000 matrix with 1 entries is not supported"},
		{"dimensions past the limit", strings.NewReader(hdr + "2000000000 1 2000000000\n"), 80, "at most 1073741824"},
		{"dimension beyond int64", strings.NewReader(hdr + "99999999999999999999 1 1\n"), 80, "line 2: want <rows> <cols> <entries>"},
		{"negative entries", strings.NewReader(hdr + "2 2 -1\n"), 60, "line 2: want <rows> <cols> <entries>"},
		{"size line with 4 fields", strings.NewReader(hdr + "2 2 1 7\n1 1 1\n"), 60, "line 2: want <rows> <cols> <entries>"},
		{"line too long", strings.NewReader(longLine), len(longLine), "line 3 is longer than 1048576 bytes: bufio.Scanner: token too long"},
		{"read error", &failingReader{hdr + "2 2 2\n1 1 1\n", errors.New("disk on fire")}, 80, "line 4: disk on fire"},
		{"read error in the header", &failingReader{"", errors.New("disk on fire")}, 0, "line 1: disk on fire"},
		{"more entries than announced", strings.NewReader(hdr + "2 2 1\n1 1 1\n% c\n2 2 1\n"), 80, "line 5: more entries than the 1 announced"},
		{"column outside", strings.NewReader(hdr + "2 2 1\n1 3 1\n"), 60, "line 3: entry (1, 3) outside the 2x2 matrix"},
		{"zero index", strings.NewReader(hdr + "2 2 1\n0 1 1\n"), 60, "line 3: entry (0, 1) outside the 2x2 matrix"},
		{"index beyond int64", strings.NewReader(hdr + "2 2 1\n1 99999999999999999999 1\n"), 80, "must be whole numbers"},
		{"fractional index", strings.NewReader(hdr + "2 2 1\n1.5 1 1\n"), 60, "line 3: entry (1.5, 1): row and column must be whole numbers"},
		{"NaN", strings.NewReader(hdr + "2 2 1\n1 1 NaN\n"), 60, `line 3: value "NaN" is not a finite number`},
		{"infinity", strings.NewReader(hdr + "2 2 1\n1 1 -Inf\n"), 60, `line 3: value "-Inf" is not a finite number`},
		{"overflowing value", strings.NewReader(hdr + "2 2 1\n1 1 1e999\n"), 60, `line 3: value "1e999"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = readMTX(c.in) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if bound := mtxAllocBound(c.size); n > bound {
				t.Errorf("allocated %d bytes for %d bytes of input, bound %d", n, c.size, bound)
			}
		})
	}
	// The limits still let a large but plausible matrix through: 2^21 rows
	// with one entry per 16 rows.
	var b strings.Builder
	b.WriteString(hdr + "2097152 2097152 131072\n")
	for k := 0; k < 131072; k++ {
		b.WriteString(strconv.Itoa(16*k+1) + " " + strconv.Itoa(k+1) + " 1\n")
	}
	m, err := readMTX(strings.NewReader(b.String()))
	if err != nil || m.nrow != 2097152 || m.nnz() != 131072 || m.rowptr[m.nrow] != 131072 {
		t.Fatalf("sparse 2^21 rows: %v", err)
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
		{[]string{"run", "spmv", "--nnz", "1000", "--nblocks", "0"}, "spmv: --nblocks 0 is out of range"},
		{[]string{"run", "spmv", "--nnz", "1000", "--nblocks", "1000"}, "need 0 < nblocks (1000) <= rows (196)"},
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
