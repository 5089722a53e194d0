package core

import "testing"

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"scal_f32", "scal_f32", 0},
		{"scal_f23", "scal_f32", 2}, // a swap is two edits
		{"gemm_f3", "gemm_f32", 1},
		{"potrf_f32", "potrf_f64", 2},
		{"kitten", "sitting", 3},
	} {
		if got := editDistance(c.a, c.b); got != c.want || editDistance(c.b, c.a) != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d both ways", c.a, c.b, got, c.want)
		}
	}
}
