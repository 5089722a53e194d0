package main

import (
	"bytes"
	"testing"
)

// FuzzReadMTX: readMTX never panics, never allocates beyond mtxAllocBound
// of its input, and what it accepts is a consistent CSR matrix.
func FuzzReadMTX(f *testing.F) {
	for _, s := range []string{
		"%%MatrixMarket matrix coordinate real symmetric\n% a comment\n3 3 4\n1 1 4.0\n2 1 -1\n2 2 4\n3 3 2.5\n",
		"%%MatrixMarket matrix coordinate pattern general\n2 3 2\n2 3\n1 1\n",
		"%%MatrixMarket matrix coordinate integer general\n4 3 5\n1 1 2\n1 3 -1\n2 2 3\n4 1 1\n4 3 5\n",
		"%%MatrixMarket matrix coordinate real general\n4294967294 4294967294 2147483648\n",
		"%%MatrixMarket matrix coordinate real general\n1000 1000 50000000\n1 1 1\n",
		"%%MatrixMarket matrix coordinate real general\n100000000 100000000 1\n1 1 1\n",
		"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 1\n",
		"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 NaN\n",
		"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 3 1\n",
		"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			m   *csrMatrix
			err error
		)
		n := allocated(func() { m, err = readMTX(bytes.NewReader(data)) })
		if bound := mtxAllocBound(len(data)); n > bound {
			t.Fatalf("allocated %d bytes for %d bytes of input, bound %d", n, len(data), bound)
		}
		if err != nil {
			return
		}
		if m.nrow <= 0 || m.ncol <= 0 || len(m.rowptr) != m.nrow+1 || m.rowptr[0] != 0 ||
			int(m.rowptr[m.nrow]) != m.nnz() || len(m.colind) != m.nnz() {
			t.Fatalf("inconsistent matrix: %dx%d, %d rowptr entries ending at %d, %d values, %d columns",
				m.nrow, m.ncol, len(m.rowptr), m.rowptr[len(m.rowptr)-1], m.nnz(), len(m.colind))
		}
		for r := 0; r < m.nrow; r++ {
			if m.rowptr[r] > m.rowptr[r+1] {
				t.Fatalf("rowptr decreases at row %d", r)
			}
		}
		for k, c := range m.colind {
			if int(c) >= m.ncol {
				t.Fatalf("colind[%d] = %d beyond %d columns", k, c, m.ncol)
			}
		}
		x, y := make([]float64, m.ncol), make([]float64, m.nrow)
		m.mulVec(x, y)
	})
}
