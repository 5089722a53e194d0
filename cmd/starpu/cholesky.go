package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// cholesky factorises a symmetric positive definite matrix in tiles, like
// StarPU's cholesky_implicit: the tasks are submitted in sequential order and
// the runtime finds the parallelism from their data accesses.
func cholesky(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("run cholesky", "[flags]", "Factorise a symmetric positive definite matrix in tiles (StarPU's\ncholesky_implicit) and check the factor by its residual and its backward error;\nwith --mpi, over the ranks of an MPI job (StarPU's mpi_cholesky:\nmpirun -np N starpu run cholesky --mpi).")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	precision := fs.String("precision", "single", "single or double")
	size := fs.Int("size", 4096, "matrix order")
	nblocks := fs.Int("nblocks", 16, "tiles per dimension")
	check := fs.Bool("check", true, "verify the factor: the residual of a solve, and the componentwise backward error on four entries of every tile")
	retryable := fs.Bool("retryable", false, "mark the codelets Retryable: the runtime snapshots each task's read-write tile, so that a task whose driver plugin dies is run again on the restarted driver")
	layout := fs.String("layout", "partition", "partition: one matrix cut into tiles by a filter (StarPU's cholesky_implicit); async: the same through a partition plan submitted with the tasks, gathered back asynchronously; contiguous: each tile allocated apart (cholesky_tile_tag)")
	variants := fs.Bool("variants", false, "give the diagonal update two CPU implementations, SSYRK and a whole GEMM (StarPU's example's), and run the one the performance models find faster here (calibrate them first: STARPU_CALIBRATE=1)")
	parallel := fs.Int("parallel", 0, "the potrf and gemm tasks of the first N panel steps are parallel tasks (FORKJOIN codelets of the parallel potrf and gemm kernels), which a policy that places them (dmda) runs on combined workers")
	var mf choleskyMPIFlags
	mf.register(fs)
	if err := c.parse(args, out); err != nil {
		return err
	}
	if *layout != "partition" && *layout != "async" && *layout != "contiguous" {
		return usagef("cholesky: --layout %q: want partition, async or contiguous", *layout)
	}
	if *precision != "single" && *precision != "double" {
		return usagef("cholesky: --precision %q: want single or double", *precision)
	}
	const cmd = "cholesky"
	if err := checkFlags(checkFlag(cmd, "size", *size, 1, maxMatrixOrder), checkFlag(cmd, "nblocks", *nblocks, 1, maxTiles), checkFlag(cmd, "parallel", *parallel, 0, maxTiles)); err != nil {
		return err
	}
	if *size%*nblocks != 0 {
		return usagef("cholesky: size (%d) must be a positive multiple of nblocks (%d)", *size, *nblocks)
	}
	if mf.wanted() && *variants {
		return usagef("cholesky: --variants is for one node: with --mpi, the diagonal update is SSYRK")
	}
	if mf.wanted() && *parallel > 0 {
		return usagef("cholesky: --parallel is for one node: with --mpi, every task runs on one worker")
	}
	if mf.wanted() {
		return mf.run(ctx, &rf, choleskyMPIArgs{precision: *precision, size: *size, nblocks: *nblocks, check: *check, retryable: *retryable}, out)
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	var res choleskyResult
	switch *precision {
	case "single":
		res, err = runCholesky[float32](rt, *size, *nblocks, *check, *layout, *parallel, choleskyKernels{blasarg.PotrfF32, blasarg.TrsmF32, blasarg.SyrkF32, blasarg.GemmF32, *retryable, *variants})
	case "double":
		res, err = runCholesky[float64](rt, *size, *nblocks, *check, *layout, *parallel, choleskyKernels{blasarg.PotrfF64, blasarg.TrsmF64, blasarg.SyrkF64, blasarg.GemmF64, *retryable, *variants})
	default:
		err = fmt.Errorf("cholesky: --precision %q: want single or double", *precision)
	}
	if ferr := rf.finish(rt); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	n := float64(*size)
	gflops := n * n * n / 3 / res.elapsed.Seconds() / 1e9
	fmt.Fprintf(out, "cholesky: %s precision, %dx%d in %dx%d tiles: %.1f ms, %.2f GFlop/s", *precision, *size, *size, *nblocks, *nblocks, float64(res.elapsed.Microseconds())/1e3, gflops)
	if *check {
		fmt.Fprint(out, res.check)
	}
	fmt.Fprintln(out)
	pairs := map[string]any{"precision": *precision, "layout": *layout, "size": *size, "nblocks": *nblocks, "sched": rt.SchedName(),
		"ms": float64(res.elapsed.Microseconds()) / 1e3, "gflops": gflops}
	res.check.addPairs(pairs)
	for arch, n := range res.perArch {
		pairs[string(arch)+"_tasks"] = n
	}
	if *parallel > 0 {
		pairs["parallel_tasks"], pairs["team_tasks"] = res.parallel, res.teamed
	}
	kv(out, "cholesky", pairs)
	if *check {
		return res.check.err()
	}
	return nil
}

// choleskyKernels names the kernels of one precision; retryable marks the
// codelets Retryable.
type choleskyKernels struct {
	potrf, trsm, syrk, gemm string
	retryable               bool
	// variants lists a second CPU implementation of the diagonal update
	// (--variants).
	variants bool
}

// choleskyCodelets are the codelets of the tiled Cholesky, for one
// precision.
type choleskyCodelets struct {
	potrf, trsm, syrk, gemm *core.Codelet
	// ppotrf and pgemm, FORKJOIN codelets of the parallel kernels, serve
	// the potrf and gemm tasks of the first parSteps panel steps
	// (--parallel): the largest share of the work is there, while each
	// step's potrf holds the rest back.
	ppotrf, pgemm *core.Codelet
	parSteps      int
}

// parallel makes the potrf and gemm tasks of the first steps panel steps
// parallel tasks of the kernels ppotrf and pgemm.
func (cls *choleskyCodelets) parallel(steps int, ppotrf, pgemm string) {
	cls.parSteps = steps
	cls.ppotrf = &core.Codelet{Name: ppotrf, Type: core.ForkJoin, Kernels: map[core.Arch]string{core.CPU: ppotrf}, Modes: []core.Mode{core.RW}, Model: core.HistoryModel, Retryable: cls.potrf.Retryable}
	cls.pgemm = &core.Codelet{Name: pgemm, Type: core.ForkJoin, Kernels: map[core.Arch]string{core.CPU: pgemm}, Modes: []core.Mode{core.R, core.R, core.RW}, Model: core.HistoryModel, Retryable: cls.gemm.Retryable}
}

// codelets builds the codelets of ks's kernels.
func (ks choleskyKernels) codelets() choleskyCodelets {
	// The BLAS 3 kernels also run on OpenCL and CUDA devices (driver-opencl
	// and driver-cuda host them under the same names). The device kernels
	// only queue work, so they are flagged asynchronous: a device keeps a
	// few in flight.
	anywhere := func(k string, modes ...core.Mode) *core.Codelet {
		return &core.Codelet{Name: k, Kernels: map[core.Arch]string{core.CPU: k, core.OpenCL: k, core.CUDA: k}, Modes: modes, Model: core.HistoryModel, Retryable: ks.retryable,
			ImplFlags: map[core.Arch][]core.ImplFlag{core.OpenCL: {core.ImplAsync}, core.CUDA: {core.ImplAsync}}}
	}
	// The factorisation of diagonal tiles runs on CPUs and, through
	// cuSOLVER, on GPUs: driver-cuda lists potrf only when cuSOLVER loaded,
	// so without it the codelet is CPU-only. (driver-opencl has no potrf.)
	// On a GPU the diagonal tile then never travels back to RAM, which
	// StarPU's own example also does with cuSOLVER.
	potrf := &core.Codelet{Name: ks.potrf, Kernels: map[core.Arch]string{core.CPU: ks.potrf, core.CUDA: ks.potrf}, Modes: []core.Mode{core.RW}, Model: core.HistoryModel, Retryable: ks.retryable,
		ImplFlags: map[core.Arch][]core.ImplFlag{core.CUDA: {core.ImplAsync}}}
	trsm := anywhere(ks.trsm, core.R, core.RW)
	syrk := anywhere(ks.syrk, core.R, core.RW)
	// With variants, the diagonal update has two CPU implementations,
	// SYRK and a whole GEMM (StarPU's example's), and the runtime runs the
	// one its models find faster on this machine (the core's choice, or
	// dmda's). Not by default: a model entry keeps its first samples, and
	// one calibrated while pages faulted would choose wrong for good.
	if v := syrkVariant(ks.syrk); ks.variants && v != "" {
		delete(syrk.Kernels, core.CPU)
		syrk.Impls = map[core.Arch][]string{core.CPU: {ks.syrk, v}}
	}
	gemm := anywhere(ks.gemm, core.R, core.R, core.RW)
	return choleskyCodelets{potrf: potrf, trsm: trsm, syrk: syrk, gemm: gemm}
}

// syrkVariant is the GEMM variant of syrk kernel k, "" for none.
func syrkVariant(k string) string {
	switch k {
	case blasarg.SyrkF32:
		return blasarg.SyrkGemmF32
	case blasarg.SyrkF64:
		return blasarg.SyrkGemmF64
	}
	return ""
}

// walk submits the tasks of the factorisation of the lower tiles handles
// (handles[m][k] is tile (m, k)) in sequential order, through submit: the
// single-node run submits them, the MPI run inserts them on every rank.
func (cls choleskyCodelets) walk(handles [][]*core.Handle, submit func(cl *core.Codelet, arg []byte, prio int, hs ...*core.Handle) error) error {
	nb := len(handles)
	trsm, syrk := cls.trsm, cls.syrk
	potrfArg := blasarg.PotrfArg{Lower: true}.Encode()
	trsmArg := blasarg.TrsmArg{Right: true, Lower: true, Trans: true, Alpha: 1}.Encode()
	syrkArg := blasarg.SyrkArg{Lower: true, Alpha: -1, Beta: 1}.Encode()
	gemmArg := blasarg.GemmArg{TransB: true, Alpha: -1, Beta: 1}.Encode()
	for k := 0; k < nb; k++ {
		potrf, gemm := cls.potrf, cls.gemm
		if k < cls.parSteps {
			potrf, gemm = cls.ppotrf, cls.pgemm
		}
		if err := submit(potrf, potrfArg, 2, handles[k][k]); err != nil {
			return err
		}
		for m := k + 1; m < nb; m++ {
			prio := 0
			if m == k+1 {
				prio = 1
			}
			if err := submit(trsm, trsmArg, prio, handles[k][k], handles[m][k]); err != nil {
				return err
			}
		}
		for m := k + 1; m < nb; m++ {
			for j := k + 1; j < m; j++ {
				if err := submit(gemm, gemmArg, 0, handles[m][k], handles[j][k], handles[m][j]); err != nil {
					return err
				}
			}
			prio := 0
			if m == k+1 {
				prio = 1
			}
			if err := submit(syrk, syrkArg, prio, handles[m][k], handles[m][m]); err != nil {
				return err
			}
		}
	}
	return nil
}

type choleskyResult struct {
	perArch map[core.Arch]int64
	elapsed time.Duration
	check   factorCheck

	// parallel counts the parallel tasks (--parallel), teamed those that
	// ran on a combined worker.
	parallel, teamed int
}

// element is the test matrix of StarPU's Cholesky examples: a Hilbert matrix
// plus n on the diagonal, symmetric positive definite and well conditioned.
func element(i, j, n int) float64 {
	v := 1 / float64(i+j+1)
	if i == j {
		v += float64(n)
	}
	return v
}

func runCholesky[T float32 | float64](rt *core.Runtime, n, nb int, check bool, layout string, parSteps int, ks choleskyKernels) (res choleskyResult, err error) {
	bs := n / nb
	cls := ks.codelets()
	if parSteps > 0 {
		var z T
		if any(z) == any(float32(0)) {
			cls.parallel(parSteps, blasarg.ParPotrfF32, blasarg.ParGemmF32)
		} else {
			cls.parallel(parSteps, blasarg.ParPotrfF64, blasarg.ParGemmF64)
		}
	}
	var parTasks []*core.Task
	var tiles choleskyTiles[T]
	defer func() {
		if cerr := tiles.release(rt); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if layout != "contiguous" {
		err = tiles.partition(rt, n, nb, layout == "async")
	} else {
		err = tiles.contiguous(rt, n, nb)
	}
	if err != nil {
		return res, err
	}
	handles := tiles.handles
	start := time.Now()
	if err := cls.walk(handles, func(cl *core.Codelet, arg []byte, prio int, hs ...*core.Handle) error {
		t := &core.Task{Codelet: cl, Handles: hs, Arg: arg, Priority: prio}
		if cl.Type != core.Seq {
			parTasks = append(parTasks, t)
		}
		return rt.Submit(t)
	}); err != nil {
		return res, err
	}
	if tiles.plan != nil {
		// Gathered back with the tasks: nothing waits until WaitForAll.
		if err := tiles.plan.UnpartitionSubmit(); err != nil {
			return res, err
		}
	}
	if err := rt.WaitForAll(); err != nil {
		return res, err
	}
	res.elapsed = time.Since(start)
	res.perArch = tasksPerArch(rt, cls.potrf, cls.trsm, cls.syrk, cls.gemm, cls.ppotrf, cls.pgemm)
	for _, t := range parTasks {
		res.parallel++
		if p, err := rt.Profiling(t); err == nil && p.CombinedSize > 1 {
			res.teamed++
		}
	}
	if !check {
		return res, nil
	}
	held := handles
	if tiles.plan != nil {
		held = [][]*core.Handle{{tiles.whole}}
	}
	for m := range held {
		for _, h := range held[m] {
			if err := h.Acquire(core.R); err != nil {
				return res, err
			}
		}
	}
	res.check = checkFactor[T](n, bs, tiles.at)
	for m := range held {
		for _, h := range held[m] {
			if err := h.Release(); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// factorCheck is how far a Cholesky factor of the test matrix is from
// right, two ways.
//
// The residual is the forward error of a solve with the factor: cheap
// (O(n^2)) and what StarPU's examples print. But the matrix is n on its
// diagonal and at most 1 elsewhere, so a solve hardly depends on the
// trailing updates: in single precision, a factor whose every GEMM ran
// twice (as a task run again without its data restored would) solved to
// 3e-6, well within the residual's tolerance, which rounding needs.
//
// The backward error is componentwise, |L L^T - A|(i,j) / (|L| |L|^T)(i,j),
// the largest over four entries of every tile (two corners of its first
// column, its last diagonal-side corner, one inside). A correct factor
// keeps it at a small multiple of the precision whatever the matrix; an
// update that is wrong, missing or applied twice moves every entry of its
// tile by a part of order 1e-3 at least. It costs O(nb^2 n), less than the
// residual up to 256 tiles a side of 32768.
type factorCheck struct {
	residual, residualTol float64
	backward, backwardTol float64
}

// checkFactor checks the lower factor l (l(i, j), i >= j, reads entry (i, j))
// of the n x n test matrix in tiles of bs, in the precision of T.
func checkFactor[T float32 | float64](n, bs int, l func(i, j int) float64) factorCheck {
	c := factorCheck{residual: residual(n, bs, l), backward: backwardError(n, bs, l),
		residualTol: 1e-10, backwardTol: 1e-12}
	var z T
	if any(z) == any(float32(0)) {
		c.residualTol, c.backwardTol = 1e-3, 1e-5
	}
	return c
}

func (c factorCheck) verified() bool {
	// NaN compares false: a NaN factor is not verified. A run that was not
	// checked has no tolerance.
	return c.residualTol > 0 && c.residual <= c.residualTol && c.backward <= c.backwardTol
}

// String is the check for the result's first line.
func (c factorCheck) String() string {
	return fmt.Sprintf(", residual %.3g (tolerance %.1g), backward error %.3g (tolerance %.1g)",
		c.residual, c.residualTol, c.backward, c.backwardTol)
}

func (c factorCheck) addPairs(pairs map[string]any) {
	pairs["residual"], pairs["backward_error"], pairs["verified"] = c.residual, c.backward, c.verified()
}

// err says which measure failed, if one did.
func (c factorCheck) err() error {
	if !(c.residual <= c.residualTol) {
		return fmt.Errorf("cholesky: residual %.3g exceeds %.1g", c.residual, c.residualTol)
	}
	if !(c.backward <= c.backwardTol) {
		return fmt.Errorf("cholesky: backward error %.3g exceeds %.1g: an update is wrong, missing or applied twice", c.backward, c.backwardTol)
	}
	return nil
}

// backwardError is factorCheck's componentwise backward error.
func backwardError(n, bs int, l func(i, j int) float64) float64 {
	nb := n / bs
	var worst float64
	for m := 0; m < nb; m++ {
		for k := 0; k <= m; k++ {
			for _, at := range [4][2]int{{0, 0}, {bs - 1, 0}, {bs - 1, bs - 1}, {bs / 2, bs / 4}} {
				i, j := m*bs+at[0], k*bs+at[1]
				var s, abs float64
				for p := 0; p <= j; p++ {
					t := l(i, p) * l(j, p)
					s += t
					abs += math.Abs(t)
				}
				e := math.Abs(s-element(i, j, n)) / abs
				if !(e <= worst) {
					worst = e // NaN sticks
				}
			}
		}
	}
	return worst
}

// residual checks L against the original matrix A: with a known x, it forms
// b = A x, solves L L^T z = b, and returns |z - x| / |x| (in double
// precision, O(n^2), so it stays cheap next to the factorisation).
func residual(n, bs int, l func(i, j int) float64) float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = 1 + float64(i%7)/7
	}
	b := make([]float64, n)
	for i := 0; i < n; i++ {
		var s float64
		for j := 0; j < n; j++ {
			s += element(i, j, n) * x[j]
		}
		b[i] = s
	}
	// L y = b (forward), by columns.
	y := append([]float64(nil), b...)
	for j := 0; j < n; j++ {
		y[j] /= l(j, j)
		for i := j + 1; i < n; i++ {
			y[i] -= l(i, j) * y[j]
		}
	}
	// L^T z = y (backward): row i of L^T is column i of L.
	z := y
	for i := n - 1; i >= 0; i-- {
		s := z[i]
		for k := i + 1; k < n; k++ {
			s -= l(k, i) * z[k]
		}
		z[i] = s / l(i, i)
	}
	var num, den float64
	for i := range x {
		num += (z[i] - x[i]) * (z[i] - x[i])
		den += x[i] * x[i]
	}
	return math.Sqrt(num / den)
}

// choleskyTiles holds the lower tiles of the matrix: handles[m][k] is tile
// (m, k), rows m*bs.. and columns k*bs.., for k <= m.
type choleskyTiles[T float32 | float64] struct {
	handles [][]*core.Handle
	at      func(i, j int) float64
	// whole is the matrix when partitioned, plan its partition plan with
	// --layout async; tiles the separate tiles.
	whole  *core.Handle
	plan   *core.Plan
	matrix []T
	tiles  [][][]T
}

// partition registers the whole column-major matrix and cuts it into tiles
// with the MatrixTiles filter, as StarPU's cholesky_implicit does: at once,
// or with async through a plan whose switch is submitted like a task.
func (c *choleskyTiles[T]) partition(rt *core.Runtime, n, nb int, async bool) error {
	m, err := core.Malloc[T](rt, n*n)
	if err != nil {
		return err
	}
	c.matrix = m
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			m[i+j*n] = T(element(i, j, n))
		}
	}
	c.at = func(i, j int) float64 { return float64(m[i+j*n]) }
	if c.whole, err = core.RegisterMatrix(rt, m, n, n, n); err != nil {
		return err
	}
	var children []*core.Handle
	if async {
		if c.plan, err = c.whole.Plan(core.MatrixTiles(nb, nb)); err != nil {
			return err
		}
		if err := c.plan.Submit(); err != nil {
			return err
		}
		children = c.plan.Children()
	} else if children, err = c.whole.Partition(core.MatrixTiles(nb, nb)); err != nil {
		return err
	}
	c.handles = make([][]*core.Handle, nb)
	for r := 0; r < nb; r++ {
		for k := 0; k <= r; k++ {
			c.handles[r] = append(c.handles[r], children[r+k*nb])
		}
	}
	return nil
}

// contiguous allocates each lower tile apart, contiguous in the arena, as
// StarPU's cholesky_tile_tag does.
func (c *choleskyTiles[T]) contiguous(rt *core.Runtime, n, nb int) error {
	bs := n / nb
	c.tiles = make([][][]T, nb)
	c.handles = make([][]*core.Handle, nb)
	for m := 0; m < nb; m++ {
		c.tiles[m] = make([][]T, m+1)
		c.handles[m] = make([]*core.Handle, m+1)
		for k := 0; k <= m; k++ {
			t, err := core.Malloc[T](rt, bs*bs)
			if err != nil {
				return err
			}
			c.tiles[m][k] = t
			for j := 0; j < bs; j++ {
				for i := 0; i < bs; i++ {
					t[i+j*bs] = T(element(m*bs+i, k*bs+j, n))
				}
			}
			if c.handles[m][k], err = core.RegisterMatrix(rt, t, bs, bs, bs); err != nil {
				return err
			}
		}
	}
	c.at = func(i, j int) float64 { return float64(c.tiles[i/bs][j/bs][i%bs+(j%bs)*bs]) }
	return nil
}

// release unregisters the handles and frees the memory.
func (c *choleskyTiles[T]) release(rt *core.Runtime) error {
	var errs []error
	if c.whole != nil {
		if c.whole.Parent() == nil && len(c.whole.Children()) > 0 {
			errs = append(errs, c.whole.Unpartition())
		}
		if c.plan != nil {
			errs = append(errs, c.plan.Clean())
		}
		errs = append(errs, c.whole.Unregister())
	} else {
		for _, row := range c.handles {
			for _, h := range row {
				if h != nil {
					errs = append(errs, h.Unregister())
				}
			}
		}
	}
	if c.matrix != nil {
		errs = append(errs, core.Free(rt, c.matrix))
	}
	for _, row := range c.tiles {
		for _, t := range row {
			if t != nil {
				errs = append(errs, core.Free(rt, t))
			}
		}
	}
	return errors.Join(errs...)
}

// tasksPerArch counts the tasks of the codelets each architecture ran.
func tasksPerArch(rt *core.Runtime, cls ...*core.Codelet) map[core.Arch]int64 {
	out := map[core.Arch]int64{}
	for _, cl := range cls {
		if cl == nil {
			continue // a codelet this run has not (--parallel)
		}
		s, err := rt.CodeletStats(cl)
		if err != nil {
			continue
		}
		for _, w := range s.Workers {
			out[w.Arch] += w.Tasks
		}
	}
	return out
}
