package cu

/*
#include "cushim.h"
*/
import "C"

import "fmt"

// Solver is a cuSOLVER dense handle, bound to the context current when it
// was made; like BLAS, one per worker, not for concurrent use, and every
// routine is asynchronous on the handle's stream.
type Solver struct {
	t *C.sc_solver
	h C.sc_solver_handle
}

func solverCheck(call string, r C.sc_solver_status) error {
	if r == 0 {
		return nil
	}
	return &Error{Lib: LibSolver, Call: call, Code: int(r), Name: SolverStatus(r).String()}
}

func solverArgs(call string, v ...int) error {
	for _, x := range v {
		if x < -1<<31 || x > 1<<31-1 {
			return &Error{Lib: LibSolver, Call: call, Code: 3, Name: SolverStatus(3).String()}
		}
	}
	return nil
}

// NewSolver creates a cuSOLVER dense handle in the current context.
// Without cuSOLVER it returns ErrNotLoaded wrapping the load error.
func NewSolver() (*Solver, error) {
	s := current.Load()
	if s == nil || s.drv == nil {
		return nil, ErrNotLoaded
	}
	if s.solver == nil {
		return nil, fmt.Errorf("%w: %w", ErrNotLoaded, s.libs.Solver.Err)
	}
	h := &Solver{t: s.solver}
	if err := solverCheck("cusolverDnCreate", C.sc_cusolverDnCreate(h.t, &h.h)); err != nil {
		return nil, err
	}
	return h, nil
}

// Destroy releases the handle.
func (s *Solver) Destroy() error {
	err := solverCheck("cusolverDnDestroy", C.sc_cusolverDnDestroy(s.t, s.h))
	s.h = nil
	return err
}

// SetStream makes the handle queue its work on st.
func (s *Solver) SetStream(st Stream) error {
	return solverCheck("cusolverDnSetStream", C.sc_cusolverDnSetStream(s.t, s.h, st.s))
}

// SpotrfBufferSize is the workspace Spotrf needs for an n×n matrix at a
// with leading dimension lda, in float32 elements (not bytes).
func (s *Solver) SpotrfBufferSize(uplo Fill, n int, a DevicePtr, lda int) (int, error) {
	if err := solverArgs("cusolverDnSpotrf_bufferSize", n, lda); err != nil {
		return 0, err
	}
	var lwork C.int
	err := solverCheck("cusolverDnSpotrf_bufferSize", C.sc_cusolverDnSpotrfBufferSize(s.t, s.h, C.int(uplo), C.int(n), C.sc_dptr(a), C.int(lda), &lwork))
	return int(lwork), err
}

// Spotrf factors the symmetric positive definite n×n matrix at a
// (column-major, leading dimension lda) in place as L·Lᵀ (uplo Lower) or
// Uᵀ·U (Upper), using work (lwork float32 elements, from
// SpotrfBufferSize). It writes an int32 to devInfo in device memory: 0 on
// success, i > 0 when the leading minor of order i is not positive
// definite, -i when parameter i was wrong. Read it after the stream has
// passed the call.
func (s *Solver) Spotrf(uplo Fill, n int, a DevicePtr, lda int, work DevicePtr, lwork int, devInfo DevicePtr) error {
	if err := solverArgs("cusolverDnSpotrf", n, lda, lwork); err != nil {
		return err
	}
	return solverCheck("cusolverDnSpotrf", C.sc_cusolverDnSpotrf(s.t, s.h, C.int(uplo), C.int(n), C.sc_dptr(a), C.int(lda), C.sc_dptr(work), C.int(lwork), C.sc_dptr(devInfo)))
}

// DpotrfBufferSize is SpotrfBufferSize for float64 (in float64 elements).
func (s *Solver) DpotrfBufferSize(uplo Fill, n int, a DevicePtr, lda int) (int, error) {
	if err := solverArgs("cusolverDnDpotrf_bufferSize", n, lda); err != nil {
		return 0, err
	}
	var lwork C.int
	err := solverCheck("cusolverDnDpotrf_bufferSize", C.sc_cusolverDnDpotrfBufferSize(s.t, s.h, C.int(uplo), C.int(n), C.sc_dptr(a), C.int(lda), &lwork))
	return int(lwork), err
}

// Dpotrf is Spotrf on float64 (work holds lwork float64 elements).
func (s *Solver) Dpotrf(uplo Fill, n int, a DevicePtr, lda int, work DevicePtr, lwork int, devInfo DevicePtr) error {
	if err := solverArgs("cusolverDnDpotrf", n, lda, lwork); err != nil {
		return err
	}
	return solverCheck("cusolverDnDpotrf", C.sc_cusolverDnDpotrf(s.t, s.h, C.int(uplo), C.int(n), C.sc_dptr(a), C.int(lda), C.sc_dptr(work), C.int(lwork), C.sc_dptr(devInfo)))
}
