package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// cgRun solves A x = b by the conjugate gradient method on the workers, A a
// symmetric positive definite sparse matrix registered through iface-csr
// and split by its rows filter, the vectors split into matching blocks.
// Each iteration is one SpMV task per block (reading every block of p) and
// per-block tasks for the dot products (partial dots, summed here), the
// axpy updates and p = r + beta p (scal then axpy). b = A*1, so the answer
// is known; the residual is checked with a plain Go product at the end.
func cgRun(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("run cg", "[flags]", "Solve A x = b by the conjugate gradient method on the workers, A a sparse\nsymmetric positive definite matrix (a 2-D Laplacian, or read with --mtx).")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	nnz := fs.Int("nnz", 250_000, "about how many nonzeros the 2-D Laplacian has")
	mtx := fs.String("mtx", "", "read a symmetric positive definite matrix from the Matrix Market `FILE` instead")
	nblocks := fs.Int("nblocks", 8, "row blocks")
	maxIter := fs.Int("maxiter", 1000, "iteration limit")
	tol := fs.Float64("tol", 1e-8, "stop when ||r|| <= tol*||b||")
	if err := c.parse(args, out); err != nil {
		return err
	}
	if *mtx != "" && c.given("nnz") {
		return usagef("run cg: --nnz means nothing with --mtx: the file gives the matrix")
	}
	const cmd = "cg"
	if err := checkFlags(checkFlag(cmd, "nblocks", *nblocks, 1, maxCGBlocks), checkFlag(cmd, "maxiter", *maxIter, 1, maxIters)); err != nil {
		return err
	}
	if !(*tol > 0 && *tol < 1) {
		return usagef("cg: --tol %g is out of range (want 0 < tol < 1)", *tol)
	}
	m, err := sparseInput("laplacian", *nnz, *mtx)
	if err != nil {
		return fmt.Errorf("cg: %w", err)
	}
	if m.nrow != m.ncol || *nblocks > m.nrow {
		return fmt.Errorf("cg: need a square matrix (got %dx%d) and 0 < nblocks (%d) <= rows", m.nrow, m.ncol, *nblocks)
	}
	ones := make([]float64, m.nrow)
	for i := range ones {
		ones[i] = 1
	}
	b := make([]float64, m.nrow)
	m.mulVec(ones, b)

	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	x := make([]float64, m.nrow)
	start := time.Now()
	iters, err := cgOnRuntime(rt, m, b, x, *nblocks, *maxIter, *tol)
	elapsed := time.Since(start)
	if ferr := rf.finish(rt); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("cg: %w", err)
	}
	ax := make([]float64, m.nrow)
	m.mulVec(x, ax)
	var rn, bn, en float64
	for i := range b {
		rn += (b[i] - ax[i]) * (b[i] - ax[i])
		bn += b[i] * b[i]
		en = math.Max(en, math.Abs(x[i]-1))
	}
	residual := math.Sqrt(rn / bn)
	verified := residual <= 10**tol
	fmt.Fprintf(out, "cg: %dx%d matrix, %d nonzeros, %d blocks: %d iterations in %v, residual %.3g, max error %.3g\n",
		m.nrow, m.ncol, m.nnz(), *nblocks, iters, elapsed, residual, en)
	kv(out, "cg", map[string]any{"n": m.nrow, "nnz": m.nnz(), "nblocks": *nblocks, "iters": iters,
		"ms": ms(elapsed), "ms_per_iter": ms(elapsed) / float64(max(1, iters)), "residual": residual, "max_err": en, "verified": verified})
	if !verified {
		return fmt.Errorf("cg: residual %.3g after %d iterations exceeds %g", residual, iters, 10**tol)
	}
	return nil
}

// cgOnRuntime runs CG from x = 0 and returns the iterations done; x holds
// the solution after it returns.
func cgOnRuntime(rt *core.Runtime, m *csrMatrix, b, x []float64, nb, maxIter int, tol float64) (iters int, err error) {
	meta, parts, err := csr.Parts(m.val, m.colind, m.rowptr, 0)
	if err != nil {
		return 0, err
	}
	n := m.nrow
	r := append([]float64(nil), b...) // r = b - A*0
	p := append([]float64(nil), b...)
	q := make([]float64, n)
	partial := make([]float64, nb) // one dot product partial per block

	var hs []*core.Handle
	defer func() {
		for i := len(hs) - 1; i >= 0; i-- {
			if uerr := hs[i].Unregister(); uerr != nil && err == nil {
				err = uerr
			}
		}
	}()
	reg := func(h *core.Handle, err error) (*core.Handle, error) {
		if err == nil {
			hs = append(hs, h)
		}
		return h, err
	}
	ha, err := reg(rt.RegisterInterface(csr.Name, meta.Encode(), parts))
	if err != nil {
		return 0, err
	}
	blocksA, err := ha.Partition(core.PluginFilter(csr.RowsFilter, nb))
	if err != nil {
		return 0, err
	}
	defer func() {
		if uerr := ha.Unpartition(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	xb, rb, pb, qb, db := make([]*core.Handle, nb), make([]*core.Handle, nb), make([]*core.Handle, nb), make([]*core.Handle, nb), make([]*core.Handle, nb)
	for i := 0; i < nb; i++ {
		lo, hi := csr.RowBlock(n, nb, i)
		for _, v := range []struct {
			h **core.Handle
			s []float64
		}{{&xb[i], x[lo:hi]}, {&rb[i], r[lo:hi]}, {&pb[i], p[lo:hi]}, {&qb[i], q[lo:hi]}} {
			if *v.h, err = reg(core.RegisterVector(rt, v.s)); err != nil {
				return 0, err
			}
		}
		if db[i], err = reg(core.RegisterVariable(rt, &partial[i])); err != nil {
			return 0, err
		}
	}
	cpu := func(name, k string, modes ...core.Mode) *core.Codelet {
		return &core.Codelet{Name: name, Kernels: map[core.Arch]string{core.CPU: k}, Modes: modes}
	}
	spmvModes := []core.Mode{core.R}
	for range pb {
		spmvModes = append(spmvModes, core.R)
	}
	spmvModes = append(spmvModes, core.W)
	spmv := &core.Codelet{Name: "spmv", Kernels: map[core.Arch]string{core.CPU: csr.SpmvF64}, NBuffers: core.VariableBuffers}
	dot := cpu("dot", blasarg.DotF64, core.R, core.R, core.W)
	axpy := cpu("axpy", blasarg.AxpyF64, core.R, core.RW)
	scal := cpu("scal", blasarg.ScalF64, core.RW)
	submit := func(cl *core.Codelet, arg []byte, handles ...*core.Handle) error {
		t := &core.Task{Codelet: cl, Handles: handles, Arg: arg}
		if cl == spmv {
			t.Modes = spmvModes
		}
		return rt.Submit(t)
	}
	// reduce waits for the per-block partial dot products and sums them.
	reduce := func() (float64, error) {
		var s float64
		for i, h := range db {
			if err := h.Acquire(core.R); err != nil {
				return 0, err
			}
			s += partial[i]
			if err := h.Release(); err != nil {
				return 0, err
			}
		}
		return s, nil
	}
	var bn2 float64
	for _, v := range b {
		bn2 += v * v
	}
	rr := bn2
	for iters < maxIter && rr > tol*tol*bn2 {
		for i := 0; i < nb; i++ {
			bufs := append([]*core.Handle{blocksA[i]}, pb...)
			if err := submit(spmv, nil, append(bufs, qb[i])...); err != nil {
				return iters, err
			}
			if err := submit(dot, nil, pb[i], qb[i], db[i]); err != nil {
				return iters, err
			}
		}
		pq, err := reduce()
		if err != nil {
			return iters, err
		}
		if !(pq > 0) {
			return iters, fmt.Errorf("iteration %d: p.Ap = %g: the matrix is not positive definite", iters, pq)
		}
		alpha := rr / pq
		for i := 0; i < nb; i++ {
			if err := submit(axpy, blasarg.AxpyArg{Alpha: alpha}.Encode(), pb[i], xb[i]); err != nil {
				return iters, err
			}
			if err := submit(axpy, blasarg.AxpyArg{Alpha: -alpha}.Encode(), qb[i], rb[i]); err != nil {
				return iters, err
			}
			if err := submit(dot, nil, rb[i], rb[i], db[i]); err != nil {
				return iters, err
			}
		}
		rrNew, err := reduce()
		if err != nil {
			return iters, err
		}
		beta := rrNew / rr
		rr = rrNew
		iters++
		if rr <= tol*tol*bn2 {
			break
		}
		for i := 0; i < nb; i++ {
			if err := submit(scal, blasarg.ScalArg{Alpha: beta}.Encode(), pb[i]); err != nil {
				return iters, err
			}
			if err := submit(axpy, blasarg.AxpyArg{Alpha: 1}.Encode(), rb[i], pb[i]); err != nil {
				return iters, err
			}
		}
	}
	return iters, rt.WaitForAll()
}
