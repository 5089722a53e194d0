// Package kernels is the CPU driver's kernel library: BLAS and LAPACK kernels
// over package blas (OpenBLAS), plus the empty kernel and the zero and add
// kernels of sum reductions. Their names and
// argument encodings are in package blasarg, which applications import.
//
// Every kernel checks its buffers before touching them: their count, data
// interface, element size (4 for the _f32 kernels, 8 for _f64), that the
// bytes cover the layout, that the shapes agree, and that the buffers it
// writes were granted write access; it fails the task with an error naming
// the kernel otherwise. Matrices are column-major as BLAS sees them: NX rows
// (the contiguous dimension), NY columns, leading dimension LD >= NX.
package kernels

import (
	"fmt"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// Library returns every kernel of the package, under its blasarg name (the
// sparse ones under their csr name).
func Library() []kernel.Kernel {
	return append(sparseKernels(), []kernel.Kernel{
		{Name: blasarg.Empty, Func: Empty},
		{Name: blasarg.ScalF32, Func: scalKernel(blasarg.ScalF32, blas.Sscal)},
		{Name: blasarg.ScalF64, Func: scalKernel(blasarg.ScalF64, blas.Dscal)},
		{Name: blasarg.AxpyF32, Func: axpyKernel(blasarg.AxpyF32, blas.Saxpy)},
		{Name: blasarg.AxpyF64, Func: axpyKernel(blasarg.AxpyF64, blas.Daxpy)},
		{Name: blasarg.DotF32, Func: dotKernel(blasarg.DotF32, blas.Sdot)},
		{Name: blasarg.DotF64, Func: dotKernel(blasarg.DotF64, blas.Ddot)},
		{Name: blasarg.GemmF32, Func: gemmKernel(blasarg.GemmF32, blas.Sgemm)},
		{Name: blasarg.GemmF64, Func: gemmKernel(blasarg.GemmF64, blas.Dgemm)},
		{Name: blasarg.SyrkF32, Func: syrkKernel(blasarg.SyrkF32, blas.Ssyrk)},
		{Name: blasarg.SyrkF64, Func: syrkKernel(blasarg.SyrkF64, blas.Dsyrk)},
		{Name: blasarg.SyrkGemmF32, Func: syrkKernel(blasarg.SyrkGemmF32, syrkByGemm(blas.Sgemm))},
		{Name: blasarg.SyrkGemmF64, Func: syrkKernel(blasarg.SyrkGemmF64, syrkByGemm(blas.Dgemm))},
		{Name: blasarg.TrsmF32, Func: trsmKernel(blasarg.TrsmF32, blas.Strsm)},
		{Name: blasarg.TrsmF64, Func: trsmKernel(blasarg.TrsmF64, blas.Dtrsm)},
		{Name: blasarg.PotrfF32, Func: potrfKernel(blasarg.PotrfF32, blas.Spotrf)},
		{Name: blasarg.PotrfF64, Func: potrfKernel(blasarg.PotrfF64, blas.Dpotrf)},
		{Name: blasarg.Zero, Func: Zero},
		{Name: blasarg.AddF32, Func: addKernel[float32](blasarg.AddF32)},
		{Name: blasarg.AddF64, Func: addKernel[float64](blasarg.AddF64)},
		{Name: blasarg.ParGemmF32, Func: parGemmKernel(blasarg.ParGemmF32, blas.Sgemm)},
		{Name: blasarg.ParGemmF64, Func: parGemmKernel(blasarg.ParGemmF64, blas.Dgemm)},
		{Name: blasarg.ParPotrfF32, Func: parPotrfKernel(blasarg.ParPotrfF32, blas.Spotrf, blas.Strsm, blas.Ssyrk, blas.Sgemm)},
		{Name: blasarg.ParPotrfF64, Func: parPotrfKernel(blasarg.ParPotrfF64, blas.Dpotrf, blas.Dtrsm, blas.Dsyrk, blas.Dgemm)},
		{Name: blasarg.SpmdScalF32, Func: scalKernel(blasarg.SpmdScalF32, blas.Sscal)},
		{Name: blasarg.SpmdScalF64, Func: scalKernel(blasarg.SpmdScalF64, blas.Dscal)},
	}...)
}

// Empty is the "empty" kernel: it accepts any buffers and argument and does
// nothing, to measure the runtime's per-task overhead.
func Empty(*kernel.Context) error { return nil }

type float interface{ float32 | float64 }

// maxDim is the largest dimension or leading dimension the BLAS integer type
// (32-bit) holds.
const maxDim = 1<<31 - 1

// scalKernel scales a vector, or a matrix column by column. It is also
// the SPMD scal: rank r of CombinedSize scales its slice of the vector, or
// its columns of the matrix (on one worker, rank 0 of 1: all of it).
func scalKernel[T float](name string, f func(int, T, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		if err := count(name, ctx, 1); err != nil {
			return err
		}
		arg, err := blasarg.DecodeScalArg(ctx.Arg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		size, rank := ctx.CombinedSize(), ctx.CombinedRank()
		if len(ctx.Buffers) == 1 && ctx.Buffers[0].Interface == kernel.Matrix {
			// A matrix (a tile of a bigger one, say) is scaled column by column.
			m, err := matrix[T](name, ctx, 0, "x", true)
			if err != nil {
				return err
			}
			lo, hi := split(m.cols, size, rank)
			for j := lo; j < hi; j++ {
				if err := f(m.rows, T(arg.Alpha), m.d[j*m.ld:j*m.ld+m.rows], 1); err != nil {
					return wrap(name, err)
				}
			}
			return nil
		}
		x, err := vector[T](name, ctx, 0, "x", true)
		if err != nil {
			return err
		}
		lo, hi := split(len(x), size, rank)
		return wrap(name, f(hi-lo, T(arg.Alpha), x[lo:hi], 1))
	}
}

func axpyKernel[T float](name string, f func(int, T, []T, int, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		if err := count(name, ctx, 2); err != nil {
			return err
		}
		arg, err := blasarg.DecodeAxpyArg(ctx.Arg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		x, err := vector[T](name, ctx, 0, "x", false)
		if err != nil {
			return err
		}
		y, err := vector[T](name, ctx, 1, "y", true)
		if err != nil {
			return err
		}
		if len(x) != len(y) {
			return fmt.Errorf("%s: x has %d elements but y has %d", name, len(x), len(y))
		}
		return wrap(name, f(len(x), T(arg.Alpha), x, 1, y, 1))
	}
}

func dotKernel[T float](name string, f func(int, []T, int, []T, int) (T, error)) kernel.Func {
	return func(ctx *kernel.Context) error {
		if err := count(name, ctx, 3); err != nil {
			return err
		}
		x, err := vector[T](name, ctx, 0, "x", false)
		if err != nil {
			return err
		}
		y, err := vector[T](name, ctx, 1, "y", false)
		if err != nil {
			return err
		}
		r, err := variable[T](name, ctx, 2, "result")
		if err != nil {
			return err
		}
		if len(x) != len(y) {
			return fmt.Errorf("%s: x has %d elements but y has %d", name, len(x), len(y))
		}
		d, err := f(len(x), x, 1, y, 1)
		if err != nil {
			return wrap(name, err)
		}
		*r = d
		return nil
	}
}

func gemmKernel[T float](name string, f func(bool, bool, int, int, int, T, []T, int, []T, int, T, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		g, err := gemmOperands[T](name, ctx)
		if err != nil {
			return err
		}
		return wrap(name, f(g.arg.TransA, g.arg.TransB, g.m, g.n, g.k, T(g.arg.Alpha), g.a.d, g.a.ld,
			g.b.d, g.b.ld, T(g.arg.Beta), g.c.d, g.c.ld))
	}
}

// gemm is a gemm kernel's checked operands: C (m x n) = Alpha*op(A)*op(B)
// + Beta*C, op(A) m x k.
type gemm[T float] struct {
	arg     blasarg.GemmArg
	a, b, c mat[T]
	m, n, k int
}

// gemmOperands decodes and checks a gemm kernel's argument and buffers.
func gemmOperands[T float](name string, ctx *kernel.Context) (g gemm[T], err error) {
	if err := count(name, ctx, 3); err != nil {
		return g, err
	}
	if g.arg, err = blasarg.DecodeGemmArg(ctx.Arg); err != nil {
		return g, fmt.Errorf("%s: %w", name, err)
	}
	if g.a, err = matrix[T](name, ctx, 0, "A", false); err != nil {
		return g, err
	}
	if g.b, err = matrix[T](name, ctx, 1, "B", false); err != nil {
		return g, err
	}
	if g.c, err = matrix[T](name, ctx, 2, "C", true); err != nil {
		return g, err
	}
	g.m, g.n = g.c.rows, g.c.cols
	ar, k := g.a.op(g.arg.TransA)
	br, bc := g.b.op(g.arg.TransB)
	g.k = k
	switch {
	case ar != g.m:
		return g, fmt.Errorf("%s: op(A) is %dx%d but C is %dx%d: op(A) must have C's %d rows",
			name, ar, k, g.m, g.n, g.m)
	case bc != g.n:
		return g, fmt.Errorf("%s: op(B) is %dx%d but C is %dx%d: op(B) must have C's %d columns",
			name, br, bc, g.m, g.n, g.n)
	case br != k:
		return g, fmt.Errorf("%s: op(A) is %dx%d but op(B) is %dx%d: inner dimensions differ",
			name, ar, k, br, bc)
	}
	return g, nil
}

func syrkKernel[T float](name string, f func(bool, bool, int, int, T, []T, int, T, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		if err := count(name, ctx, 2); err != nil {
			return err
		}
		arg, err := blasarg.DecodeSyrkArg(ctx.Arg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		a, err := matrix[T](name, ctx, 0, "A", false)
		if err != nil {
			return err
		}
		c, err := matrix[T](name, ctx, 1, "C", true)
		if err != nil {
			return err
		}
		if c.rows != c.cols {
			return fmt.Errorf("%s: C is %dx%d, want a square matrix", name, c.rows, c.cols)
		}
		n := c.rows
		ar, k := a.op(arg.Trans)
		if ar != n {
			return fmt.Errorf("%s: op(A) is %dx%d but C is %dx%d: op(A) must have C's %d rows",
				name, ar, k, n, n, n)
		}
		return wrap(name, f(arg.Lower, arg.Trans, n, k, T(arg.Alpha), a.d, a.ld, T(arg.Beta), c.d, c.ld))
	}
}

// syrkByGemm is a SYRK made of a GEMM: op(A)*op(A)^T on the whole of C,
// which includes the triangle SYRK writes. lower is ignored: both are
// written.
func syrkByGemm[T float](gemm func(bool, bool, int, int, int, T, []T, int, []T, int, T, []T, int) error) func(bool, bool, int, int, T, []T, int, T, []T, int) error {
	return func(_, trans bool, n, k int, alpha T, a []T, lda int, beta T, c []T, ldc int) error {
		return gemm(trans, !trans, n, n, k, alpha, a, lda, a, lda, beta, c, ldc)
	}
}

func trsmKernel[T float](name string, f func(bool, bool, bool, bool, int, int, T, []T, int, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		if err := count(name, ctx, 2); err != nil {
			return err
		}
		arg, err := blasarg.DecodeTrsmArg(ctx.Arg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		a, err := matrix[T](name, ctx, 0, "A", false)
		if err != nil {
			return err
		}
		b, err := matrix[T](name, ctx, 1, "B", true)
		if err != nil {
			return err
		}
		if a.rows != a.cols {
			return fmt.Errorf("%s: A is %dx%d, want a square matrix", name, a.rows, a.cols)
		}
		m, n := b.rows, b.cols
		if arg.Right && a.rows != n {
			return fmt.Errorf("%s: A is %dx%d but B is %dx%d: solving on the right, A must be %dx%d",
				name, a.rows, a.cols, m, n, n, n)
		}
		if !arg.Right && a.rows != m {
			return fmt.Errorf("%s: A is %dx%d but B is %dx%d: solving on the left, A must be %dx%d",
				name, a.rows, a.cols, m, n, m, m)
		}
		return wrap(name, f(arg.Right, arg.Lower, arg.Trans, arg.UnitDiag, m, n, T(arg.Alpha),
			a.d, a.ld, b.d, b.ld))
	}
}

func potrfKernel[T float](name string, f func(bool, int, []T, int) error) kernel.Func {
	return func(ctx *kernel.Context) error {
		arg, a, err := potrfOperands[T](name, ctx)
		if err != nil {
			return err
		}
		return wrap(name, f(arg.Lower, a.rows, a.d, a.ld))
	}
}

// potrfOperands decodes and checks a potrf kernel's argument and its
// square matrix.
func potrfOperands[T float](name string, ctx *kernel.Context) (arg blasarg.PotrfArg, a mat[T], err error) {
	if err = count(name, ctx, 1); err != nil {
		return arg, a, err
	}
	if arg, err = blasarg.DecodePotrfArg(ctx.Arg); err != nil {
		return arg, a, fmt.Errorf("%s: %w", name, err)
	}
	if a, err = matrix[T](name, ctx, 0, "A", true); err != nil {
		return arg, a, err
	}
	if a.rows != a.cols {
		return arg, a, fmt.Errorf("%s: A is %dx%d, want a square matrix", name, a.rows, a.cols)
	}
	return arg, a, nil
}

// wrap prefixes a blas error with the kernel's name (errors.As still finds a
// *blas.NotPositiveDefiniteError through it).
func wrap(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func count(name string, ctx *kernel.Context, n int) error {
	if len(ctx.Buffers) != n {
		return fmt.Errorf("%s: got %d buffers, want %d", name, len(ctx.Buffers), n)
	}
	return nil
}

// buffer checks buffer i's interface, element size, access mode (written
// ones need W) and that its bytes cover the layout and are aligned for T.
func buffer[T float](name string, ctx *kernel.Context, i int, role string, iface kernel.InterfaceID, writes bool) (*kernel.Buffer, error) {
	b := &ctx.Buffers[i]
	if b.Interface != iface {
		return nil, fmt.Errorf("%s: buffer %d (%s) is a %v, want a %v", name, i, role, b.Interface, iface)
	}
	var zero T
	es := uint32(unsafe.Sizeof(zero))
	if b.ElemSize != es {
		return nil, fmt.Errorf("%s: buffer %d (%s) has %d-byte elements, want %d", name, i, role, b.ElemSize, es)
	}
	if writes && b.Mode&kernel.W == 0 {
		return nil, fmt.Errorf("%s: buffer %d (%s) is accessed %v but the kernel writes it", name, i, role, b.Mode)
	}
	if b.NX > maxDim || b.NY > maxDim || b.LD > maxDim {
		return nil, fmt.Errorf("%s: buffer %d (%s) is %dx%d with LD %d, beyond the BLAS int range",
			name, i, role, b.NX, b.NY, b.LD)
	}
	if b.Interface == kernel.Matrix && b.NX > 0 && b.NY > 0 && b.LD < b.NX {
		return nil, fmt.Errorf("%s: buffer %d (%s) has LD %d < NX %d", name, i, role, b.LD, b.NX)
	}
	if need := b.Len(); uint64(len(b.Bytes)) < need {
		return nil, fmt.Errorf("%s: buffer %d (%s) has %d bytes, its layout needs %d", name, i, role, len(b.Bytes), need)
	}
	if len(b.Bytes) > 0 && uintptr(unsafe.Pointer(&b.Bytes[0]))%uintptr(es) != 0 {
		return nil, fmt.Errorf("%s: buffer %d (%s) is not aligned to its %d-byte elements", name, i, role, es)
	}
	return b, nil
}

// elems views the first n elements of b as T (b is checked to hold them).
func elems[T float](b *kernel.Buffer, n uint64) []T {
	if n == 0 {
		return nil
	}
	var v []T
	switch p := any(&v).(type) {
	case *[]float32:
		*p = b.Float32s()
	case *[]float64:
		*p = b.Float64s()
	}
	return v[:n]
}

func vector[T float](name string, ctx *kernel.Context, i int, role string, writes bool) ([]T, error) {
	b, err := buffer[T](name, ctx, i, role, kernel.Vector, writes)
	if err != nil {
		return nil, err
	}
	return elems[T](b, b.NX), nil
}

func variable[T float](name string, ctx *kernel.Context, i int, role string) (*T, error) {
	b, err := buffer[T](name, ctx, i, role, kernel.Variable, true)
	if err != nil {
		return nil, err
	}
	return &elems[T](b, 1)[0], nil
}

// mat is a column-major matrix buffer, ready for blas.
type mat[T float] struct {
	rows, cols, ld int
	d              []T
}

// op is the shape of op(m): m's or its transpose's.
func (m mat[T]) op(trans bool) (rows, cols int) {
	if trans {
		return m.cols, m.rows
	}
	return m.rows, m.cols
}

func matrix[T float](name string, ctx *kernel.Context, i int, role string, writes bool) (mat[T], error) {
	b, err := buffer[T](name, ctx, i, role, kernel.Matrix, writes)
	if err != nil {
		return mat[T]{}, err
	}
	m := mat[T]{rows: int(b.NX), cols: int(b.NY), ld: int(b.LD)}
	if m.rows == 0 || m.cols == 0 {
		// Empty: no element is read, LD only has to satisfy BLAS.
		m.ld = max(1, m.rows)
		return m, nil
	}
	m.d = elems[T](b, b.Len()/uint64(b.ElemSize))
	return m, nil
}
