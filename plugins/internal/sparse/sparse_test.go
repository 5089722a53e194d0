package sparse

import (
	"strings"
	"testing"
)

func TestChunk(t *testing.T) {
	for _, c := range []struct {
		n, nparts int
		want      [][2]int
	}{
		{10, 3, [][2]int{{0, 4}, {4, 7}, {7, 10}}},
		{3, 3, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{5, 1, [][2]int{{0, 5}}},
		{0, 2, [][2]int{{0, 0}, {0, 0}}},
	} {
		for i, w := range c.want {
			if lo, hi := Chunk(c.n, c.nparts, i); lo != w[0] || hi != w[1] {
				t.Errorf("Chunk(%d, %d, %d) = %d, %d, want %v", c.n, c.nparts, i, lo, hi, w)
			}
		}
	}
}

func TestRowAndIndices(t *testing.T) {
	rowptr := []uint32{3, 5, 5, 4}
	for _, c := range []struct {
		r      int
		lo, hi int
		want   string
	}{
		{0, 0, 2, ""},
		{1, 2, 2, ""},
		{2, 0, 0, "rowptr[2..3] = 5..4 outside [firstentry 3, firstentry+nnz 5]"},
	} {
		lo, hi, err := Row(rowptr, c.r, 3, 2)
		if c.want == "" && (err != nil || lo != c.lo || hi != c.hi) || c.want != "" && (err == nil || err.Error() != c.want) {
			t.Errorf("Row(%d) = %d, %d, %v; want %d, %d, %q", c.r, lo, hi, err, c.lo, c.hi, c.want)
		}
	}
	if _, _, err := Row([]uint32{2, 3}, 0, 3, 2); err == nil || !strings.Contains(err.Error(), "rowptr[0..1] = 2..3") {
		t.Errorf("rowptr below firstentry: %v", err)
	}
	idx := AsBytes([]uint32{0, 4, 5})
	if err := CheckIndices("coo", "cols", idx, 6, "columns"); err != nil {
		t.Errorf("valid indices: %v", err)
	}
	if err := CheckIndices("coo", "cols", idx, 5, "columns"); err == nil || err.Error() != "coo: cols[2] = 5, beyond the 5 columns" {
		t.Errorf("index 5 of 5: %v", err)
	}
}

func TestFootprint(t *testing.T) {
	// CSR's footprint of nnz 10, nrow 4, elemsize 8 from before this
	// package, so that stored performance models keep their keys.
	if got := Footprint(10, 4, 8); got != 0xd01c081b {
		t.Errorf("Footprint(10, 4, 8) = %#x", got)
	}
	if Footprint(1, 2, 3) == Footprint(1, 2, 4) || Footprint(1, 2) == Footprint(2, 1) {
		t.Errorf("footprints do not tell shapes apart")
	}
}
