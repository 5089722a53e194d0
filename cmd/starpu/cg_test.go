package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestRunCG(t *testing.T) {
	kv := lastLine(t, "run", "cg", "--nnz", "5000", "--nblocks", "3", "--tol", "1e-10")
	if kv["verified"] != "true" {
		t.Fatalf("cg: %v", kv)
	}
	res, err := strconv.ParseFloat(kv["residual"], 64)
	if err != nil || res > 1e-9 {
		t.Errorf("residual %q", kv["residual"])
	}
	if it, err := strconv.Atoi(kv["iters"]); err != nil || it < 10 || it > 1000 {
		t.Errorf("iters %q", kv["iters"])
	}
	if e, err := strconv.ParseFloat(kv["max_err"], 64); err != nil || e > 1e-6 {
		t.Errorf("max_err %q: x is not the vector of ones", kv["max_err"])
	}
}

func TestRunCGErrors(t *testing.T) {
	rect := filepath.Join(t.TempDir(), "rect.mtx")
	os.WriteFile(rect, []byte("%%MatrixMarket matrix coordinate real general\n2 3 1\n1 1 1\n"), 0o644)
	indef := filepath.Join(t.TempDir(), "indef.mtx")
	os.WriteFile(indef, []byte("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 -1\n2 2 -2\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "cg", "--mtx", rect}, "need a square matrix (got 2x3)"},
		{[]string{"run", "cg", "--nnz", "1000", "--tol", "0"}, "cg: --tol 0 is out of range (want 0 < tol < 1)"},
		{[]string{"run", "cg", "--nnz", "1000", "--nblocks", "1000"}, "0 < nblocks (1000) <= rows"},
		{[]string{"run", "cg", "--mtx", indef, "--nblocks", "2"}, "the matrix is not positive definite"},
		{[]string{"run", "cg", "--nnz", "1000", "--maxiter", "2"}, "residual"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(c.args, "--plugin-dir", pluginDir, "--ncpu", "1"), &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
