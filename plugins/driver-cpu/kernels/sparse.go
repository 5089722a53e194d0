package kernels

import (
	"fmt"
	"sync"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// sparseKernels are the kernels over plugin data interfaces: CSR's sparse
// matrix-vector product.
func sparseKernels() []kernel.Kernel {
	return []kernel.Kernel{
		{Name: csr.SpmvF32, Func: spmvKernel[float32](csr.SpmvF32)},
		{Name: csr.SpmvF64, Func: spmvKernel[float64](csr.SpmvF64)},
	}
}

// spmvKernel computes y = A*x for a CSR matrix (or row block) A; see
// csr.SpmvF64 for the buffers. It checks every rowptr entry and column index
// it uses, so a malformed matrix fails the task instead of reading out of
// bounds.
func spmvKernel[T float](name string) kernel.Func {
	// scratch holds the concatenation of x when it comes in several blocks.
	var scratch sync.Pool
	return func(ctx *kernel.Context) error {
		n := len(ctx.Buffers)
		if n < 3 {
			return fmt.Errorf("%s: got %d buffers, want a CSR matrix, one or more x vectors and y", name, n)
		}
		a, err := csr.View[T](&ctx.Buffers[0])
		if err != nil {
			return fmt.Errorf("%s: buffer 0 (A): %w", name, err)
		}
		y, err := vector[T](name, ctx, n-1, "y", true)
		if err != nil {
			return err
		}
		if uint64(len(y)) != uint64(a.NRow) {
			return fmt.Errorf("%s: y has %d elements but A has %d rows", name, len(y), a.NRow)
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
	}
}
