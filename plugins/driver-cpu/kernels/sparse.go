package kernels

import (
	"fmt"
	"sync"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// sparseKernels are the kernels over plugin data interfaces: the sparse
// matrix-vector products of CSR, BCSR and COO.
func sparseKernels() []kernel.Kernel {
	return []kernel.Kernel{
		{Name: csr.SpmvF32, Func: spmvKernel[float32](csr.SpmvF32)},
		{Name: csr.SpmvF64, Func: spmvKernel[float64](csr.SpmvF64)},
		{Name: bcsr.SpmvF32, Func: bcsrSpmvKernel[float32](bcsr.SpmvF32)},
		{Name: bcsr.SpmvF64, Func: bcsrSpmvKernel[float64](bcsr.SpmvF64)},
		{Name: coo.SpmvAddF32, Func: cooSpmvAddKernel[float32](coo.SpmvAddF32)},
		{Name: coo.SpmvAddF64, Func: cooSpmvAddKernel[float64](coo.SpmvAddF64)},
	}
}

// sparseProduct is a sparse matrix-vector product kernel over buffers
// [A, x_0, ..., x_k-1, y], k >= 1 (matrix names A's format in the count's
// error): it checks x and y, views A with view and runs product. x is
// buffer 1 when k = 1, else the x_i concatenated into a scratch buffer
// reused across tasks.
func sparseProduct[T float, A any](name, matrix string, view func(*kernel.Buffer) (A, error), product func(a A, x, y []T) error) kernel.Func {
	var scratch sync.Pool
	return func(ctx *kernel.Context) error {
		n := len(ctx.Buffers)
		if n < 3 {
			return fmt.Errorf("%s: got %d buffers, want %s, one or more x vectors and y", name, n, matrix)
		}
		y, err := vector[T](name, ctx, n-1, "y", true)
		if err != nil {
			return err
		}
		var x []T
		if n == 3 {
			if x, err = vector[T](name, ctx, 1, "x", false); err != nil {
				return err
			}
		} else {
			var total int
			blocks := make([][]T, 0, n-2)
			for i := 1; i < n-1; i++ {
				b, err := vector[T](name, ctx, i, fmt.Sprintf("x_%d", i-1), false)
				if err != nil {
					return err
				}
				blocks = append(blocks, b)
				total += len(b)
			}
			buf, _ := scratch.Get().(*[]T)
			if buf == nil || cap(*buf) < total {
				buf = new([]T)
				*buf = make([]T, total)
			}
			defer scratch.Put(buf)
			x = (*buf)[:total]
			off := 0
			for _, b := range blocks {
				off += copy(x[off:], b)
			}
		}
		a, err := view(&ctx.Buffers[0])
		if err != nil {
			return fmt.Errorf("%s: buffer 0 (A): %w", name, err)
		}
		return product(a, x, y)
	}
}

// spmvKernel computes y = A*x for a CSR matrix (or row block) A; see
// csr.SpmvF64 for the buffers. It checks every rowptr entry and column index
// it uses, so a malformed matrix fails the task instead of reading out of
// bounds.
func spmvKernel[T float](name string) kernel.Func {
	return sparseProduct(name, "a CSR matrix", csr.View[T], func(a csr.Matrix[T], x, y []T) error {
		if uint64(len(y)) != uint64(a.NRow) {
			return fmt.Errorf("%s: y has %d elements but A has %d rows", name, len(y), a.NRow)
		}
		// Subslices of equal length let the compiler drop the bounds
		// checks of the inner loop; rowptr and colind are checked
		// explicitly, with errors naming the bad entry.
		fe, nnz := a.FirstEntry, a.NNZ
		colind, nzval := a.ColInd[:nnz], a.NZVal[:nnz]
		prev := a.RowPtr[0]
		if prev < fe || prev-fe > nnz {
			return fmt.Errorf("%s: rowptr[0] = %d outside [firstentry %d, firstentry+nnz %d]", name, prev, fe, fe+nnz)
		}
		for r := range y {
			next := a.RowPtr[r+1]
			if next < prev || next-fe > nnz {
				return fmt.Errorf("%s: rowptr[%d] = %d, rowptr[%d] = %d: want non-decreasing values up to firstentry+nnz %d",
					name, r, prev, r+1, next, fe+nnz)
			}
			lo, hi := int(prev-fe), int(next-fe)
			cs := colind[lo:hi]
			vs := nzval[lo:hi]
			vs = vs[:len(cs)]
			var s T
			for k, c := range cs {
				if int(c) >= len(x) {
					return fmt.Errorf("%s: colind[%d] = %d but x has %d elements", name, lo+k, c, len(x))
				}
				s += vs[k] * x[int(c)]
			}
			y[r] = s
			prev = next
		}
		return nil
	})
}

// bcsrSpmvKernel computes y = A*x for a BCSR matrix (or block-row range)
// A; see bcsr.SpmvF64 for the buffers. It checks every rowptr entry and
// block column it uses, so a malformed matrix fails the task instead of
// reading out of bounds.
func bcsrSpmvKernel[T float](name string) kernel.Func {
	return sparseProduct(name, "a BCSR matrix", bcsr.View[T], func(a bcsr.Matrix[T], x, y []T) error {
		r, c := int(a.R), int(a.C)
		if uint64(len(y)) != uint64(a.NRow)*uint64(a.R) {
			return fmt.Errorf("%s: y has %d elements but A has %d block rows of %d", name, len(y), a.NRow, r)
		}
		for br := range int(a.NRow) {
			lo, hi, err := a.Row(br)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			yb := y[br*r : (br+1)*r]
			clear(yb)
			for k := lo; k < hi; k++ {
				col := int(a.ColInd[k]) * c
				if col+c > len(x) {
					return fmt.Errorf("%s: colind[%d] = %d, block columns of %d, but x has %d elements", name, k, a.ColInd[k], c, len(x))
				}
				xb, blk := x[col:col+c], a.Block(k)
				for i := range yb {
					row := blk[i*c : (i+1)*c]
					row = row[:len(xb)]
					var s T
					for j, v := range row {
						s += v * xb[j]
					}
					yb[i] += s
				}
			}
		}
		return nil
	})
}

// cooSpmvAddKernel computes y += A*x for a COO matrix (or a range of its
// entries) A; see coo.SpmvAddF64 for the buffers. It checks every entry's
// row and column, so a malformed matrix fails the task instead of writing
// out of bounds.
func cooSpmvAddKernel[T float](name string) kernel.Func {
	return sparseProduct(name, "a COO matrix", coo.View[T], func(a coo.Matrix[T], x, y []T) error {
		if uint64(len(x)) != uint64(a.NX) || uint64(len(y)) != uint64(a.NY) {
			return fmt.Errorf("%s: x has %d elements and y %d but A is %dx%d", name, len(x), len(y), a.NY, a.NX)
		}
		nnz := int(a.NNZ)
		rows, cols, vals := a.Rows[:nnz], a.Cols[:nnz], a.Values[:nnz]
		for k, v := range vals {
			r, c := rows[k], cols[k]
			if int(r) >= len(y) || int(c) >= len(x) {
				return fmt.Errorf("%s: entry %d at (%d, %d), outside the %dx%d matrix", name, k, r, c, a.NY, a.NX)
			}
			y[r] += v * x[c]
		}
		return nil
	})
}
