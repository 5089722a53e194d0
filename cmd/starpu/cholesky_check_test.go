package main

import (
	"math"
	"strings"
	"testing"
)

// referenceFactor is the lower Cholesky factor of the n x n test matrix,
// computed in double precision column by column.
func referenceFactor(n int) [][]float64 {
	l := make([][]float64, n)
	for i := range l {
		l[i] = make([]float64, n)
	}
	for j := 0; j < n; j++ {
		d := element(j, j, n)
		for p := 0; p < j; p++ {
			d -= l[j][p] * l[j][p]
		}
		l[j][j] = math.Sqrt(d)
		for i := j + 1; i < n; i++ {
			s := element(i, j, n)
			for p := 0; p < j; p++ {
				s -= l[i][p] * l[j][p]
			}
			l[i][j] = s / l[j][j]
		}
	}
	return l
}

// The check must pass a right factor in either precision and refuse one
// with a tile's update wrong, even where the residual alone passes it.
func TestCheckFactor(t *testing.T) {
	const n, bs = 48, 8
	ref := referenceFactor(n)
	single := func(l [][]float64) [][]float64 {
		out := make([][]float64, n)
		for i := range l {
			out[i] = make([]float64, n)
			for j := range l[i] {
				out[i][j] = float64(float32(l[i][j]))
			}
		}
		return out
	}
	// wrongTile is the factor with tile (3, 1) off by 2e-3 of itself, the
	// size a GEMM applied twice leaves.
	wrongTile := func(l [][]float64) [][]float64 {
		out := single(l)
		for i := 3 * bs; i < 4*bs; i++ {
			for j := bs; j < 2*bs; j++ {
				out[i][j] *= 1 + 2e-3
			}
		}
		return out
	}
	withNaN := func(l [][]float64) [][]float64 {
		out := single(l)
		out[n-1][n/2] = math.NaN()
		return out
	}
	tests := []struct {
		name       string
		factor     [][]float64
		double     bool
		verified   bool
		residualOK bool   // whether the residual alone passes it
		err        string // part of err()'s text
	}{
		{"double", ref, true, true, true, ""},
		{"single", single(ref), false, true, true, ""},
		{"single, a tile wrong", wrongTile(ref), false, false, true, "backward error"},
		{"double, a tile wrong", wrongTile(ref), true, false, false, "residual"},
		{"NaN", withNaN(ref), false, false, false, "residual NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := func(i, j int) float64 { return tt.factor[i][j] }
			var c factorCheck
			if tt.double {
				c = checkFactor[float64](n, bs, at)
			} else {
				c = checkFactor[float32](n, bs, at)
			}
			if c.verified() != tt.verified {
				t.Errorf("verified %v, want %v (%s)", c.verified(), tt.verified, c)
			}
			if ok := c.residual <= c.residualTol; ok != tt.residualOK {
				t.Errorf("residual passes: %v, want %v (%s)", ok, tt.residualOK, c)
			}
			err := c.err()
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("err() = %v, want one naming %q", err, tt.err)
			}
		})
	}
	if (factorCheck{}).verified() {
		t.Error("a run that was not checked reads as verified")
	}
}
