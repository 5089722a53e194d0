package cu

/*
#include "cushim.h"

#cgo noescape sc_cublasSgemm
#cgo nocallback sc_cublasSgemm
#cgo noescape sc_cublasDgemm
#cgo nocallback sc_cublasDgemm
*/
import "C"

import (
	"fmt"
	"math"
)

// Op says whether a BLAS operand is used as is or transposed.
type Op int

// Operations (cublasOperation_t).
const (
	NoTrans   Op = 0 // CUBLAS_OP_N
	Trans     Op = 1 // CUBLAS_OP_T
	ConjTrans Op = 2 // CUBLAS_OP_C
)

// Fill says which triangle of a symmetric or triangular matrix is used.
type Fill int

// Fill modes (cublasFillMode_t).
const (
	Lower Fill = 0 // CUBLAS_FILL_MODE_LOWER
	Upper Fill = 1 // CUBLAS_FILL_MODE_UPPER
)

// Side says on which side a triangular matrix multiplies (trsm).
type Side int

// Sides (cublasSideMode_t).
const (
	Left  Side = 0 // CUBLAS_SIDE_LEFT
	Right Side = 1 // CUBLAS_SIDE_RIGHT
)

// Diag says whether a triangular matrix has a unit diagonal.
type Diag int

// Diagonal types (cublasDiagType_t).
const (
	NonUnit Diag = 0 // CUBLAS_DIAG_NON_UNIT
	Unit    Diag = 1 // CUBLAS_DIAG_UNIT
)

// BLAS is a cuBLAS handle, bound to the context current when it was made.
// A handle is not safe for concurrent use: give each worker its own, bound
// to its stream with SetStream. Every routine is asynchronous: it queues
// work on the handle's stream and returns.
//
// Matrices are column-major, as in cuBLAS and Fortran BLAS: element (i, j)
// of A is at A + (i + j*lda)*size. Scalars alpha and beta are passed by
// value (cuBLAS's host pointer mode, read before the call returns); Sdot
// and Ddot write their result to device memory (device pointer mode) so
// that they do not wait for the GPU. The handle switches modes itself.
type BLAS struct {
	t    *C.sc_blas
	h    C.sc_blas_handle
	mode int
}

func blasCheck(call string, r C.sc_blas_status) error {
	if r == 0 {
		return nil
	}
	return &Error{Lib: LibBLAS, Call: call, Code: int(r), Name: BLASStatus(r).String()}
}

// blasArgs checks that every dimension fits cuBLAS's int.
func blasArgs(call string, v ...int) error {
	for _, x := range v {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return &Error{Lib: LibBLAS, Call: call, Code: 7, Name: BLASStatus(7).String()}
		}
	}
	return nil
}

// NewBLAS creates a cuBLAS handle in the current context (cublasCreate).
// Without cuBLAS it returns ErrNotLoaded wrapping the load error.
func NewBLAS() (*BLAS, error) {
	s := current.Load()
	if s == nil || s.drv == nil {
		return nil, ErrNotLoaded
	}
	if s.blas == nil {
		return nil, fmt.Errorf("%w: %w", ErrNotLoaded, s.libs.BLAS.Err)
	}
	b := &BLAS{t: s.blas}
	if err := blasCheck("cublasCreate_v2", C.sc_cublasCreate(b.t, &b.h)); err != nil {
		return nil, err
	}
	return b, nil
}

// Destroy releases the handle.
func (b *BLAS) Destroy() error {
	err := blasCheck("cublasDestroy_v2", C.sc_cublasDestroy(b.t, b.h))
	b.h = nil
	return err
}

// Version is cuBLAS's version number (cublasGetVersion), 130001 say.
func (b *BLAS) Version() (int, error) {
	var v C.int
	err := blasCheck("cublasGetVersion_v2", C.sc_cublasGetVersion(b.t, b.h, &v))
	return int(v), err
}

// SetStream makes the handle queue its work on s.
func (b *BLAS) SetStream(s Stream) error {
	return blasCheck("cublasSetStream_v2", C.sc_cublasSetStream(b.t, b.h, s.s))
}

func (b *BLAS) pointerMode(mode int) error {
	if b.mode == mode {
		return nil
	}
	if err := blasCheck("cublasSetPointerMode_v2", C.sc_cublasSetPointerMode(b.t, b.h, C.int(mode))); err != nil {
		return err
	}
	b.mode = mode
	return nil
}

func (b *BLAS) host() error   { return b.pointerMode(C.SC_BLAS_POINTER_MODE_HOST) }
func (b *BLAS) device() error { return b.pointerMode(C.SC_BLAS_POINTER_MODE_DEVICE) }

// Sscal scales n float32 elements of x (stride incx): x = alpha*x.
func (b *BLAS) Sscal(n int, alpha float32, x DevicePtr, incx int) error {
	if err := blasArgs("cublasSscal_v2", n, incx); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasSscal_v2", C.sc_cublasSscal(b.t, b.h, C.int(n), C.float(alpha), C.sc_dptr(x), C.int(incx)))
}

// Dscal is Sscal on float64.
func (b *BLAS) Dscal(n int, alpha float64, x DevicePtr, incx int) error {
	if err := blasArgs("cublasDscal_v2", n, incx); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasDscal_v2", C.sc_cublasDscal(b.t, b.h, C.int(n), C.double(alpha), C.sc_dptr(x), C.int(incx)))
}

// Saxpy computes y = alpha*x + y over n float32 elements.
func (b *BLAS) Saxpy(n int, alpha float32, x DevicePtr, incx int, y DevicePtr, incy int) error {
	if err := blasArgs("cublasSaxpy_v2", n, incx, incy); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasSaxpy_v2", C.sc_cublasSaxpy(b.t, b.h, C.int(n), C.float(alpha), C.sc_dptr(x), C.int(incx), C.sc_dptr(y), C.int(incy)))
}

// Daxpy is Saxpy on float64.
func (b *BLAS) Daxpy(n int, alpha float64, x DevicePtr, incx int, y DevicePtr, incy int) error {
	if err := blasArgs("cublasDaxpy_v2", n, incx, incy); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasDaxpy_v2", C.sc_cublasDaxpy(b.t, b.h, C.int(n), C.double(alpha), C.sc_dptr(x), C.int(incx), C.sc_dptr(y), C.int(incy)))
}

// Sdot writes the dot product of n float32 elements of x and y to the
// float32 at result, in device memory (the call does not wait).
func (b *BLAS) Sdot(n int, x DevicePtr, incx int, y DevicePtr, incy int, result DevicePtr) error {
	if err := blasArgs("cublasSdot_v2", n, incx, incy); err != nil {
		return err
	}
	if err := b.device(); err != nil {
		return err
	}
	return blasCheck("cublasSdot_v2", C.sc_cublasSdot(b.t, b.h, C.int(n), C.sc_dptr(x), C.int(incx), C.sc_dptr(y), C.int(incy), C.sc_dptr(result)))
}

// Ddot is Sdot on float64 (result is a float64 in device memory).
func (b *BLAS) Ddot(n int, x DevicePtr, incx int, y DevicePtr, incy int, result DevicePtr) error {
	if err := blasArgs("cublasDdot_v2", n, incx, incy); err != nil {
		return err
	}
	if err := b.device(); err != nil {
		return err
	}
	return blasCheck("cublasDdot_v2", C.sc_cublasDdot(b.t, b.h, C.int(n), C.sc_dptr(x), C.int(incx), C.sc_dptr(y), C.int(incy), C.sc_dptr(result)))
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C with op(A) m×k, op(B) k×n
// and C m×n, column-major with leading dimensions lda, ldb, ldc.
func (b *BLAS) Sgemm(transA, transB Op, m, n, k int, alpha float32, a DevicePtr, lda int, bm DevicePtr, ldb int, beta float32, c DevicePtr, ldc int) error {
	if err := blasArgs("cublasSgemm_v2", m, n, k, lda, ldb, ldc); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasSgemm_v2", C.sc_cublasSgemm(b.t, b.h, C.int(transA), C.int(transB), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.sc_dptr(a), C.int(lda), C.sc_dptr(bm), C.int(ldb), C.float(beta), C.sc_dptr(c), C.int(ldc)))
}

// Dgemm is Sgemm on float64.
func (b *BLAS) Dgemm(transA, transB Op, m, n, k int, alpha float64, a DevicePtr, lda int, bm DevicePtr, ldb int, beta float64, c DevicePtr, ldc int) error {
	if err := blasArgs("cublasDgemm_v2", m, n, k, lda, ldb, ldc); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasDgemm_v2", C.sc_cublasDgemm(b.t, b.h, C.int(transA), C.int(transB), C.int(m), C.int(n), C.int(k),
		C.double(alpha), C.sc_dptr(a), C.int(lda), C.sc_dptr(bm), C.int(ldb), C.double(beta), C.sc_dptr(c), C.int(ldc)))
}

// Ssyrk computes the uplo triangle of C = alpha*op(A)*op(A)ᵀ + beta*C, C
// n×n, op(A) n×k (trans NoTrans: A is n×k; Trans: A is k×n).
func (b *BLAS) Ssyrk(uplo Fill, trans Op, n, k int, alpha float32, a DevicePtr, lda int, beta float32, c DevicePtr, ldc int) error {
	if err := blasArgs("cublasSsyrk_v2", n, k, lda, ldc); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasSsyrk_v2", C.sc_cublasSsyrk(b.t, b.h, C.int(uplo), C.int(trans), C.int(n), C.int(k),
		C.float(alpha), C.sc_dptr(a), C.int(lda), C.float(beta), C.sc_dptr(c), C.int(ldc)))
}

// Dsyrk is Ssyrk on float64.
func (b *BLAS) Dsyrk(uplo Fill, trans Op, n, k int, alpha float64, a DevicePtr, lda int, beta float64, c DevicePtr, ldc int) error {
	if err := blasArgs("cublasDsyrk_v2", n, k, lda, ldc); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasDsyrk_v2", C.sc_cublasDsyrk(b.t, b.h, C.int(uplo), C.int(trans), C.int(n), C.int(k),
		C.double(alpha), C.sc_dptr(a), C.int(lda), C.double(beta), C.sc_dptr(c), C.int(ldc)))
}

// Strsm solves op(A)*X = alpha*B (side Left) or X*op(A) = alpha*B (side
// Right) for X, overwriting B (m×n); A is triangular (uplo, diag), m×m on
// the left or n×n on the right.
func (b *BLAS) Strsm(side Side, uplo Fill, trans Op, diag Diag, m, n int, alpha float32, a DevicePtr, lda int, bm DevicePtr, ldb int) error {
	if err := blasArgs("cublasStrsm_v2", m, n, lda, ldb); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasStrsm_v2", C.sc_cublasStrsm(b.t, b.h, C.int(side), C.int(uplo), C.int(trans), C.int(diag), C.int(m), C.int(n),
		C.float(alpha), C.sc_dptr(a), C.int(lda), C.sc_dptr(bm), C.int(ldb)))
}

// Dtrsm is Strsm on float64.
func (b *BLAS) Dtrsm(side Side, uplo Fill, trans Op, diag Diag, m, n int, alpha float64, a DevicePtr, lda int, bm DevicePtr, ldb int) error {
	if err := blasArgs("cublasDtrsm_v2", m, n, lda, ldb); err != nil {
		return err
	}
	if err := b.host(); err != nil {
		return err
	}
	return blasCheck("cublasDtrsm_v2", C.sc_cublasDtrsm(b.t, b.h, C.int(side), C.int(uplo), C.int(trans), C.int(diag), C.int(m), C.int(n),
		C.double(alpha), C.sc_dptr(a), C.int(lda), C.sc_dptr(bm), C.int(ldb)))
}
