package kernels

// Parallel kernels (blasarg.ParGemmF32 and the others): kernels of
// FORKJOIN and SPMD codelets. OpenBLAS runs one thread per call here (the
// driver pins it to one: the workers are the parallelism), so a FORKJOIN
// kernel gets its parallelism from goroutines, each calling the
// single-threaded BLAS on its own part of the output, as many as the
// combined worker has members (kernel.Context.CombinedSize): the other
// members' cores are idle while it runs. On one worker they are the
// sequential kernels.

import (
	"errors"
	"math"
	"sync"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
)

// forkJoin runs f(i) for i in [0, parts) on parts goroutines, the calling
// one included, and returns their errors joined.
func forkJoin(parts int, f func(i int) error) error {
	if parts <= 1 {
		return f(0)
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for i := 1; i < parts; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	errs[0] = f(0)
	wg.Wait()
	return errors.Join(errs...)
}

// split is part i of n items cut in parts slices of sizes differing by one
// at most.
func split(n, parts, i int) (lo, hi int) {
	return n * i / parts, n * (i + 1) / parts
}

// parGemmKernel is a FORKJOIN gemm: C's columns cut between the team's
// goroutines.
func parGemmKernel[T float](name string, f func(bool, bool, int, int, int, T, []T, int, []T, int, T, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		g, err := gemmOperands[T](name, ctx)
		if err != nil {
			return err
		}
		parts := min(ctx.CombinedSize(), max(g.n, 1))
		return wrap(name, forkJoin(parts, func(i int) error {
			lo, hi := split(g.n, parts, i)
			if lo == hi {
				return nil
			}
			// Column lo of op(B): column lo of B, or row lo of B^T's B.
			boff := lo * g.b.ld
			if g.arg.TransB {
				boff = lo
			}
			var bd []T
			if len(g.b.d) > 0 {
				bd = g.b.d[boff:]
			}
			return f(g.arg.TransA, g.arg.TransB, g.m, hi-lo, g.k, T(g.arg.Alpha), g.a.d, g.a.ld,
				bd, g.b.ld, T(g.arg.Beta), g.c.d[lo*g.c.ld:], g.c.ld)
		}))
	}
}

// parPotrfBlock bounds the panel width of the parallel factorisation:
// wide enough that the BLAS 3 updates dominate, narrow enough that there
// are several panels to cut the updates of.
const parPotrfBlock = 128

// parPotrfKernel is a FORKJOIN potrf: a blocked right-looking Cholesky
// factorisation (lower; the upper one runs on one goroutine) whose panel
// solve is cut by rows and trailing update by columns between the team's
// goroutines.
func parPotrfKernel[T float](name string,
	potrf func(bool, int, []T, int) error,
	trsm func(bool, bool, bool, bool, int, int, T, []T, int, []T, int) error,
	syrk func(bool, bool, int, int, T, []T, int, T, []T, int) error,
	gemmf func(bool, bool, int, int, int, T, []T, int, []T, int, T, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		arg, a, err := potrfOperands[T](name, ctx)
		if err != nil {
			return err
		}
		n, ld, size := a.rows, a.ld, ctx.CombinedSize()
		if !arg.Lower || size == 1 || n <= parPotrfBlock {
			return wrap(name, potrf(arg.Lower, n, a.d, ld))
		}
		at := func(i, j int) []T { return a.d[i+j*ld:] }
		nb := max(32, min(parPotrfBlock, n/(4*size)))
		for k := 0; k < n; k += nb {
			kb := min(nb, n-k)
			if err := potrf(true, kb, at(k, k), ld); err != nil {
				return wrap(name, shiftColumn(err, k))
			}
			r := n - k - kb
			if r == 0 {
				break
			}
			// L21 = A21 * L11^-T: rows are independent.
			parts := min(size, r)
			if err := forkJoin(parts, func(i int) error {
				lo, hi := split(r, parts, i)
				return trsm(true, true, true, false, hi-lo, kb, 1, at(k, k), ld, at(k+kb+lo, k), ld)
			}); err != nil {
				return wrap(name, err)
			}
			// A22 -= L21 * L21^T on the lower triangle, by columns, each
			// slice a diagonal block (syrk) and what is below it (gemm);
			// the slices narrow to the right, so that each has about the
			// same share of the triangle.
			if err := forkJoin(parts, func(i int) error {
				lo, hi := triangleSlice(r, parts, i)
				if lo == hi {
					return nil
				}
				c0 := k + kb + lo
				if err := syrk(true, false, hi-lo, kb, -1, at(c0, k), ld, 1, at(c0, c0), ld); err != nil {
					return err
				}
				if below := r - hi; below > 0 {
					return gemmf(false, true, below, hi-lo, kb, -1, at(k+kb+hi, k), ld, at(c0, k), ld, 1, at(k+kb+hi, c0), ld)
				}
				return nil
			}); err != nil {
				return wrap(name, err)
			}
		}
		return nil
	}
}

// triangleSlice is slice i of parts of the columns of a lower triangle of
// order n, cut so that each slice holds about as many elements.
func triangleSlice(n, parts, i int) (lo, hi int) {
	at := func(f float64) int { return int(math.Round(float64(n) * (1 - math.Sqrt(1-f)))) }
	return at(float64(i) / float64(parts)), at(float64(i+1) / float64(parts))
}

// shiftColumn makes the column of a not-positive-definite error in the
// diagonal block starting at column k a column of the whole matrix.
func shiftColumn(err error, k int) error {
	var npd *blas.NotPositiveDefiniteError
	if errors.As(err, &npd) {
		return &blas.NotPositiveDefiniteError{Column: npd.Column + k}
	}
	return err
}
