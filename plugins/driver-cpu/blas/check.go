package blas

import (
	"fmt"
	"math"
)

// maxInt is the largest dimension, leading dimension or increment the BLAS
// integer type (32-bit) holds.
const maxInt = math.MaxInt32

// checkDim checks one dimension is non-negative and fits a BLAS int.
func checkDim(fn, name string, v int) error {
	if v < 0 {
		return fmt.Errorf("blas: %s: %s = %d is negative", fn, name, v)
	}
	if v > maxInt {
		return fmt.Errorf("blas: %s: %s = %d exceeds the BLAS int range", fn, name, v)
	}
	return nil
}

// checkMat checks that a column-major rows x cols matrix with leading
// dimension ld fits a slice of length have.
func checkMat(fn, name string, rows, cols, have, ld int) error {
	if err := checkDim(fn, name+" rows", rows); err != nil {
		return err
	}
	if err := checkDim(fn, name+" columns", cols); err != nil {
		return err
	}
	if ld < max(1, rows) || ld > maxInt {
		return fmt.Errorf("blas: %s: ld%s = %d, want >= max(1, %d rows)", fn, name, ld, rows)
	}
	need := 0
	if rows > 0 && cols > 0 {
		need = (cols-1)*ld + rows // no overflow: each factor < 2^31
	}
	if have < need {
		return fmt.Errorf("blas: %s: %s (%dx%d, ld %d) needs %d elements, slice has %d",
			fn, name, rows, cols, ld, need, have)
	}
	return nil
}

func checkGemm(fn string, transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) error {
	for _, d := range []struct {
		name string
		v    int
	}{{"m", m}, {"n", n}, {"k", k}} {
		if err := checkDim(fn, d.name, d.v); err != nil {
			return err
		}
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := checkMat(fn, "A", ar, ac, la, lda); err != nil {
		return err
	}
	if err := checkMat(fn, "B", br, bc, lb, ldb); err != nil {
		return err
	}
	return checkMat(fn, "C", m, n, lc, ldc)
}

func checkSyrk(fn string, trans bool, n, k, la, lda, lc, ldc int) error {
	if err := checkDim(fn, "n", n); err != nil {
		return err
	}
	if err := checkDim(fn, "k", k); err != nil {
		return err
	}
	ar, ac := n, k
	if trans {
		ar, ac = k, n
	}
	if err := checkMat(fn, "A", ar, ac, la, lda); err != nil {
		return err
	}
	return checkMat(fn, "C", n, n, lc, ldc)
}

func checkTrsm(fn string, right bool, m, n, la, lda, lb, ldb int) error {
	if err := checkDim(fn, "m", m); err != nil {
		return err
	}
	if err := checkDim(fn, "n", n); err != nil {
		return err
	}
	an := m
	if right {
		an = n
	}
	if err := checkMat(fn, "A", an, an, la, lda); err != nil {
		return err
	}
	return checkMat(fn, "B", m, n, lb, ldb)
}

func checkSquare(fn, name string, n, have, ld int) error {
	if err := checkDim(fn, "n", n); err != nil {
		return err
	}
	return checkMat(fn, name, n, n, have, ld)
}

// checkVec checks n elements strided by inc fit a slice of length have.
func checkVec(fn, name string, n, have, inc int) error {
	if err := checkDim(fn, "n", n); err != nil {
		return err
	}
	if inc < 1 || inc > maxInt {
		return fmt.Errorf("blas: %s: inc%s = %d, want a positive increment", fn, name, inc)
	}
	need := 0
	if n > 0 {
		need = (n-1)*inc + 1
	}
	if have < need {
		return fmt.Errorf("blas: %s: %s (n %d, inc %d) needs %d elements, slice has %d",
			fn, name, n, inc, need, have)
	}
	return nil
}
