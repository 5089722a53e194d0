package blasarg

import (
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// The shape checks device drivers run on a task of these kernels before
// they queue it: a device library would read or write out of bounds where
// the CPU kernels' own checks (driver-cpu's blas package) catch it. Each
// takes the task's buffers and argument as they come in its Exec.

// Op is the shape of op(M): M's, or its transpose's.
func Op(l kernel.Layout, trans bool) (rows, cols uint64) {
	if trans {
		return l.NY, l.NX
	}
	return l.NX, l.NY
}

// CheckAxpy checks an axpy task: x (buffer 0) holds at least y's (buffer
// 1) elements.
func CheckAxpy(b []wire.BufferDesc, arg []byte) error {
	if _, err := DecodeAxpyArg(arg); err != nil {
		return err
	}
	if b[0].Layout.NX < b[1].Layout.NX {
		return fmt.Errorf("x has %d elements, y %d", b[0].Layout.NX, b[1].Layout.NX)
	}
	return nil
}

// CheckGemm checks a gemm task: op(A) times op(B) gives C's shape.
func CheckGemm(b []wire.BufferDesc, arg []byte) error {
	a, err := DecodeGemmArg(arg)
	if err != nil {
		return err
	}
	am, ak := Op(b[0].Layout, a.TransA)
	bk, bn := Op(b[1].Layout, a.TransB)
	m, n := b[2].Layout.NX, b[2].Layout.NY
	if am != m || bn != n || ak != bk {
		return fmt.Errorf("op(A) is %dx%d, op(B) %dx%d, C %dx%d: shapes do not multiply", am, ak, bk, bn, m, n)
	}
	return nil
}

// CheckSyrk checks a syrk task: C is square of op(A)'s row count.
func CheckSyrk(b []wire.BufferDesc, arg []byte) error {
	a, err := DecodeSyrkArg(arg)
	if err != nil {
		return err
	}
	n, _ := Op(b[0].Layout, a.Trans)
	c := b[1].Layout
	if c.NX != c.NY || c.NX != n {
		return fmt.Errorf("op(A) has %d rows, C is %dx%d: want a square C of that order", n, c.NX, c.NY)
	}
	return nil
}

// CheckTrsm checks a trsm task: A is square of the order B's side needs.
func CheckTrsm(b []wire.BufferDesc, arg []byte) error {
	a, err := DecodeTrsmArg(arg)
	if err != nil {
		return err
	}
	al, bl := b[0].Layout, b[1].Layout
	order := bl.NX // op(A)*X = B: A is m x m
	if a.Right {
		order = bl.NY // X*op(A) = B: A is n x n
	}
	if al.NX != order || al.NY != order {
		return fmt.Errorf("trsm: A is %dx%d, B %dx%d: want A %dx%d", al.NX, al.NY, bl.NX, bl.NY, order, order)
	}
	return nil
}
