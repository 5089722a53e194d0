// Package blas is a thin cgo binding over OpenBLAS (CBLAS) and LAPACKE for the
// handful of dense linear-algebra routines the CPU driver's kernels need.
//
// Every matrix is column-major, as BLAS sees it: element (i, j) of a matrix
// with leading dimension ld is at index i + j*ld. The functions take Go slices
// and check their lengths against the dimensions before calling C, returning
// an error rather than letting the library read or write out of bounds. A
// matrix with rows r, columns c and leading dimension ld needs
// (c-1)*ld + r elements (none when r or c is zero) and ld >= max(1, r).
//
// Dimensions and leading dimensions must fit in a 32-bit int (the BLAS
// integer type). Operations on empty operands (a zero output dimension) are
// no-ops. The slices must not overlap unless a routine says otherwise.
package blas

/*
#cgo LDFLAGS: -lopenblas -llapacke
#include <cblas.h>
#include <lapacke.h>

static inline enum CBLAS_TRANSPOSE tr(int t) { return t ? CblasTrans : CblasNoTrans; }
static inline enum CBLAS_UPLO ul(int lower) { return lower ? CblasLower : CblasUpper; }

static void w_sgemm(int ta, int tb, int m, int n, int k, float alpha,
		const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
	cblas_sgemm(CblasColMajor, tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void w_dgemm(int ta, int tb, int m, int n, int k, double alpha,
		const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc) {
	cblas_dgemm(CblasColMajor, tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void w_ssyrk(int lower, int t, int n, int k, float alpha,
		const float *a, int lda, float beta, float *c, int ldc) {
	cblas_ssyrk(CblasColMajor, ul(lower), tr(t), n, k, alpha, a, lda, beta, c, ldc);
}
static void w_dsyrk(int lower, int t, int n, int k, double alpha,
		const double *a, int lda, double beta, double *c, int ldc) {
	cblas_dsyrk(CblasColMajor, ul(lower), tr(t), n, k, alpha, a, lda, beta, c, ldc);
}
static void w_strsm(int right, int lower, int t, int unit, int m, int n, float alpha,
		const float *a, int lda, float *b, int ldb) {
	cblas_strsm(CblasColMajor, right ? CblasRight : CblasLeft, ul(lower), tr(t),
		unit ? CblasUnit : CblasNonUnit, m, n, alpha, a, lda, b, ldb);
}
static void w_dtrsm(int right, int lower, int t, int unit, int m, int n, double alpha,
		const double *a, int lda, double *b, int ldb) {
	cblas_dtrsm(CblasColMajor, right ? CblasRight : CblasLeft, ul(lower), tr(t),
		unit ? CblasUnit : CblasNonUnit, m, n, alpha, a, lda, b, ldb);
}
static int w_spotrf(int lower, int n, float *a, int lda) {
	return (int)LAPACKE_spotrf_work(LAPACK_COL_MAJOR, lower ? 'L' : 'U', n, a, lda);
}
static int w_dpotrf(int lower, int n, double *a, int lda) {
	return (int)LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, lower ? 'L' : 'U', n, a, lda);
}
static void w_sscal(int n, float alpha, float *x, int incx) { cblas_sscal(n, alpha, x, incx); }
static void w_dscal(int n, double alpha, double *x, int incx) { cblas_dscal(n, alpha, x, incx); }
static void w_saxpy(int n, float alpha, const float *x, int incx, float *y, int incy) {
	cblas_saxpy(n, alpha, x, incx, y, incy);
}
static void w_daxpy(int n, double alpha, const double *x, int incx, double *y, int incy) {
	cblas_daxpy(n, alpha, x, incx, y, incy);
}
static float w_sdot(int n, const float *x, int incx, const float *y, int incy) {
	return cblas_sdot(n, x, incx, y, incy);
}
static double w_ddot(int n, const double *x, int incx, const double *y, int incy) {
	return cblas_ddot(n, x, incx, y, incy);
}
static void w_set_threads(int n) { openblas_set_num_threads(n); }
static int w_get_threads(void) { return openblas_get_num_threads(); }
static int w_get_procs(void) { return openblas_get_num_procs(); }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// ps returns a C pointer to x's first element, or nil for an empty slice
// (the library does not dereference it then: the checks guarantee it).
func ps(x []float32) *C.float {
	if len(x) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&x[0]))
}

func pd(x []float64) *C.double {
	if len(x) == 0 {
		return nil
	}
	return (*C.double)(unsafe.Pointer(&x[0]))
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C in single precision, where
// op(X) is X or X^T as transA/transB say, op(A) is m x k, op(B) is k x n and C
// is m x n. A is stored m x k (k x m when transA), B k x n (n x k when
// transB). With k == 0, C is scaled by beta; with m or n zero, nothing is done.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if err := checkGemm("Sgemm", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	C.w_sgemm(b2i(transA), b2i(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		ps(a), C.int(lda), ps(b), C.int(ldb), C.float(beta), ps(c), C.int(ldc))
	return nil
}

// Dgemm is Sgemm in double precision.
func Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if err := checkGemm("Dgemm", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	C.w_dgemm(b2i(transA), b2i(transB), C.int(m), C.int(n), C.int(k), C.double(alpha),
		pd(a), C.int(lda), pd(b), C.int(ldb), C.double(beta), pd(c), C.int(ldc))
	return nil
}

// Ssyrk computes the symmetric rank-k update C = alpha*op(A)*op(A)^T + beta*C
// in single precision, where C is n x n and op(A) is n x k: A itself when
// trans is false (stored n x k), A^T when it is true (stored k x n). Only the
// lower (lower true) or upper triangle of C, diagonal included, is read and
// written; the other one is left untouched.
func Ssyrk(lower, trans bool, n, k int, alpha float32, a []float32, lda int,
	beta float32, c []float32, ldc int) error {
	if err := checkSyrk("Ssyrk", trans, n, k, len(a), lda, len(c), ldc); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.w_ssyrk(b2i(lower), b2i(trans), C.int(n), C.int(k), C.float(alpha),
		ps(a), C.int(lda), C.float(beta), ps(c), C.int(ldc))
	return nil
}

// Dsyrk is Ssyrk in double precision.
func Dsyrk(lower, trans bool, n, k int, alpha float64, a []float64, lda int,
	beta float64, c []float64, ldc int) error {
	if err := checkSyrk("Dsyrk", trans, n, k, len(a), lda, len(c), ldc); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.w_dsyrk(b2i(lower), b2i(trans), C.int(n), C.int(k), C.double(alpha),
		pd(a), C.int(lda), C.double(beta), pd(c), C.int(ldc))
	return nil
}

// Strsm solves a triangular system with many right-hand sides in single
// precision, overwriting the m x n matrix B with the solution X of
// op(A)*X = alpha*B (right false: A is m x m) or X*op(A) = alpha*B (right
// true: A is n x n). A is lower (lower true) or upper triangular, only that
// triangle is read; op(A) is A^T when trans is true; unitDiag says A's
// diagonal is all ones (and is then not read).
func Strsm(right, lower, trans, unitDiag bool, m, n int, alpha float32, a []float32, lda int,
	b []float32, ldb int) error {
	if err := checkTrsm("Strsm", right, m, n, len(a), lda, len(b), ldb); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	C.w_strsm(b2i(right), b2i(lower), b2i(trans), b2i(unitDiag), C.int(m), C.int(n),
		C.float(alpha), ps(a), C.int(lda), ps(b), C.int(ldb))
	return nil
}

// Dtrsm is Strsm in double precision.
func Dtrsm(right, lower, trans, unitDiag bool, m, n int, alpha float64, a []float64, lda int,
	b []float64, ldb int) error {
	if err := checkTrsm("Dtrsm", right, m, n, len(a), lda, len(b), ldb); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	C.w_dtrsm(b2i(right), b2i(lower), b2i(trans), b2i(unitDiag), C.int(m), C.int(n),
		C.double(alpha), pd(a), C.int(lda), pd(b), C.int(ldb))
	return nil
}

// NotPositiveDefiniteError is returned by Spotrf and Dpotrf when the matrix
// is not positive definite: the leading minor of order Column (1-based, as
// LAPACK's info) is not, and the factorization could not be completed.
type NotPositiveDefiniteError struct {
	Column int
}

func (e *NotPositiveDefiniteError) Error() string {
	return fmt.Sprintf("matrix not positive definite at column %d", e.Column)
}

// Spotrf computes the Cholesky factorization of the n x n symmetric positive
// definite matrix A in single precision, in place: A = L*L^T with L lower
// triangular (lower true) or A = U^T*U with U upper triangular. Only the
// chosen triangle is read and overwritten by the factor; the other one is
// left untouched. It returns a *NotPositiveDefiniteError when A is not
// positive definite (A is then partially overwritten).
func Spotrf(lower bool, n int, a []float32, lda int) error {
	if err := checkSquare("Spotrf", "A", n, len(a), lda); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return potrfInfo("Spotrf", int(C.w_spotrf(b2i(lower), C.int(n), ps(a), C.int(lda))))
}

// Dpotrf is Spotrf in double precision.
func Dpotrf(lower bool, n int, a []float64, lda int) error {
	if err := checkSquare("Dpotrf", "A", n, len(a), lda); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return potrfInfo("Dpotrf", int(C.w_dpotrf(b2i(lower), C.int(n), pd(a), C.int(lda))))
}

func potrfInfo(fn string, info int) error {
	switch {
	case info > 0:
		return &NotPositiveDefiniteError{Column: info}
	case info < 0:
		return fmt.Errorf("blas: %s: LAPACK rejected argument %d", fn, -info)
	}
	return nil
}

// Sscal computes x = alpha*x in single precision over the n elements
// x[0], x[incX], ..., x[(n-1)*incX]. incX must be positive.
func Sscal(n int, alpha float32, x []float32, incX int) error {
	if err := checkVec("Sscal", "x", n, len(x), incX); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.w_sscal(C.int(n), C.float(alpha), ps(x), C.int(incX))
	return nil
}

// Dscal is Sscal in double precision.
func Dscal(n int, alpha float64, x []float64, incX int) error {
	if err := checkVec("Dscal", "x", n, len(x), incX); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.w_dscal(C.int(n), C.double(alpha), pd(x), C.int(incX))
	return nil
}

// Saxpy computes y = alpha*x + y in single precision over n strided elements
// of x and y. incX and incY must be positive.
func Saxpy(n int, alpha float32, x []float32, incX int, y []float32, incY int) error {
	if err := checkVec("Saxpy", "x", n, len(x), incX); err != nil {
		return err
	}
	if err := checkVec("Saxpy", "y", n, len(y), incY); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.w_saxpy(C.int(n), C.float(alpha), ps(x), C.int(incX), ps(y), C.int(incY))
	return nil
}

// Daxpy is Saxpy in double precision.
func Daxpy(n int, alpha float64, x []float64, incX int, y []float64, incY int) error {
	if err := checkVec("Daxpy", "x", n, len(x), incX); err != nil {
		return err
	}
	if err := checkVec("Daxpy", "y", n, len(y), incY); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.w_daxpy(C.int(n), C.double(alpha), pd(x), C.int(incX), pd(y), C.int(incY))
	return nil
}

// Sdot returns the dot product of n strided elements of x and y in single
// precision (0 when n is 0). incX and incY must be positive.
func Sdot(n int, x []float32, incX int, y []float32, incY int) (float32, error) {
	if err := checkVec("Sdot", "x", n, len(x), incX); err != nil {
		return 0, err
	}
	if err := checkVec("Sdot", "y", n, len(y), incY); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	return float32(C.w_sdot(C.int(n), ps(x), C.int(incX), ps(y), C.int(incY))), nil
}

// Ddot is Sdot in double precision.
func Ddot(n int, x []float64, incX int, y []float64, incY int) (float64, error) {
	if err := checkVec("Ddot", "x", n, len(x), incX); err != nil {
		return 0, err
	}
	if err := checkVec("Ddot", "y", n, len(y), incY); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	return float64(C.w_ddot(C.int(n), pd(x), C.int(incX), pd(y), C.int(incY))), nil
}

// SetNumThreads sets how many threads OpenBLAS uses for one call
// (openblas_set_num_threads); the setting is process-wide. n < 1 means one
// thread per processor OpenBLAS sees.
func SetNumThreads(n int) {
	if n < 1 {
		n = int(C.w_get_procs())
	}
	if n < 1 {
		n = 1
	}
	C.w_set_threads(C.int(n))
}

// NumThreads reports how many threads OpenBLAS uses for one call
// (openblas_get_num_threads).
func NumThreads() int { return int(C.w_get_threads()) }
