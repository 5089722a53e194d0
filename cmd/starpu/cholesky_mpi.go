package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// choleskyMPIFlags are run cholesky's flags for a run over the ranks of an
// MPI job (StarPU's mpi_cholesky).
type choleskyMPIFlags struct {
	fs   *flag.FlagSet
	on   bool
	grid string
}

// register adds --mpi and --grid to fs.
func (f *choleskyMPIFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.BoolVar(&f.on, "mpi", false, "run over the ranks of an MPI job (start it with mpirun -np N; without mpirun, one rank): the tiles are distributed 2D block-cyclic over a grid of ranks, the owner of a tile runs the tasks that write it, and rank 0 gathers the factor for the check and prints the result")
	fs.StringVar(&f.grid, "grid", "", "with --mpi, the grid of ranks the tiles are dealt over, `PxQ` (P*Q must be the number of ranks; default: the squarest with P >= Q, as StarPU's mpi_cholesky)")
}

// wanted says whether the command line asked for a run over MPI: --mpi,
// or --grid, which run refuses without --mpi.
func (f *choleskyMPIFlags) wanted() bool { return f.on || f.grid != "" }

// choleskyMPIArgs are run cholesky's other flags, as parsed.
type choleskyMPIArgs struct {
	precision        string
	size, nblocks    int
	check, retryable bool
}

// rankGrid is a P x Q grid of ranks: tile (m, k) belongs to rank
// (m mod P) + (k mod Q) * P, StarPU's mpi_cholesky distribution (its
// dblockx and dblocky are P and Q).
type rankGrid struct{ p, q int }

func (g rankGrid) String() string { return fmt.Sprintf("%dx%d", g.p, g.q) }

// owner is the rank that owns tile (m, k).
func (g rankGrid) owner(m, k int) int { return m%g.p + (k%g.q)*g.p }

// squarestGrid is the grid of n ranks closest to a square, P >= Q.
func squarestGrid(n int) rankGrid {
	for q := int(math.Sqrt(float64(n))); q > 1; q-- {
		if n%q == 0 {
			return rankGrid{n / q, q}
		}
	}
	return rankGrid{n, 1}
}

// parseGrid reads --grid's PxQ.
func parseGrid(s string) (rankGrid, error) {
	ps, qs, ok := strings.Cut(strings.ToLower(s), "x")
	p, perr := strconv.Atoi(ps)
	q, qerr := strconv.Atoi(qs)
	if !ok || perr != nil || qerr != nil || p < 1 || q < 1 {
		return rankGrid{}, usagef("cholesky: --grid %q: want PxQ, two positive numbers of ranks (2x2, 4x1)", s)
	}
	return rankGrid{p, q}, nil
}

// run runs the factorisation over MPI: every rank registers every lower
// tile (its own with data, the others' as placeholders), inserts the same
// graph, and rank 0 prints the result.
func (f *choleskyMPIFlags) run(ctx context.Context, rf *runtimeFlags, a choleskyMPIArgs, out io.Writer) (err error) {
	if !f.on {
		return usagef("cholesky: --grid needs --mpi")
	}
	var refused []string
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "layout" && fl.Value.String() != "contiguous" {
			refused = append(refused, fmt.Sprintf("--layout %s", fl.Value))
		}
	})
	if len(refused) > 0 {
		return usagef("cholesky: %s with --mpi: each rank allocates its tiles apart (--layout contiguous), the only layout over MPI", refused[0])
	}
	var grid rankGrid
	if f.grid != "" {
		if grid, err = parseGrid(f.grid); err != nil {
			return err
		}
	}
	if !mpi.Built() {
		return errors.New("cholesky: --mpi: this starpu was built without MPI (the nompi tag, or no cgo)")
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if ferr := rf.finish(rt); err == nil {
			err = ferr
		}
	}()
	c, err := mpi.Init(ctx, rt, mpi.Options{})
	if err != nil {
		return fmt.Errorf("cholesky: %w", err)
	}
	defer func() {
		if serr := c.Shutdown(); err == nil && serr != nil {
			err = fmt.Errorf("cholesky: %w", serr)
		}
	}()
	if f.grid == "" {
		grid = squarestGrid(c.Size())
	} else if grid.p*grid.q != c.Size() {
		// Every rank finds the same and shuts MPI down cleanly.
		return usagef("cholesky: --grid %s has %d ranks, the job has %d (mpirun -np)", grid, grid.p*grid.q, c.Size())
	}
	var res choleskyMPIResult
	switch a.precision {
	case "single":
		res, err = runCholeskyMPI[float32](c, grid, a, choleskyKernels{blasarg.PotrfF32, blasarg.TrsmF32, blasarg.SyrkF32, blasarg.GemmF32, a.retryable, false})
	default:
		res, err = runCholeskyMPI[float64](c, grid, a, choleskyKernels{blasarg.PotrfF64, blasarg.TrsmF64, blasarg.SyrkF64, blasarg.GemmF64, a.retryable, false})
	}
	if err != nil || c.Rank() != 0 {
		return err
	}
	res.print(out, a, grid, rt.SchedName())
	if a.check {
		return res.check.err()
	}
	return nil
}

// rankFigures are what each rank measured of its share of the run, sent
// to rank 0 for the report; each is an int64 of a vector registered per
// rank.
const (
	figTasks     = iota // tasks this rank ran
	figSentMsgs         // data messages it sent
	figSentBytes        // and their bytes
	figWalkUs           // microseconds its owner-computes walk took
	nFigures
)

// choleskyMPIResult is the outcome of a run, complete on rank 0.
type choleskyMPIResult struct {
	ranks   int
	elapsed time.Duration
	figures [][nFigures]int64 // per rank
	check   factorCheck
}

// print writes the result line, one line per rank, and the kv line.
func (r choleskyMPIResult) print(out io.Writer, a choleskyMPIArgs, g rankGrid, sched string) {
	n := float64(a.size)
	gflops := n * n * n / 3 / r.elapsed.Seconds() / 1e9
	ms := float64(r.elapsed.Microseconds()) / 1e3
	ranks := fmt.Sprintf("%d ranks", r.ranks)
	if r.ranks == 1 {
		ranks = "1 rank"
	}
	fmt.Fprintf(out, "cholesky: %s precision, %dx%d in %dx%d tiles, %s (grid %s): %.1f ms, %.2f GFlop/s", a.precision, a.size, a.size, a.nblocks, a.nblocks, ranks, g, ms, gflops)
	if a.check {
		fmt.Fprint(out, r.check)
	}
	fmt.Fprintln(out)
	pairs := map[string]any{"precision": a.precision, "layout": "contiguous", "size": a.size, "nblocks": a.nblocks, "sched": sched,
		"ranks": r.ranks, "grid": g.String(), "ms": ms, "gflops": gflops}
	r.check.addPairs(pairs)
	var tasks int64
	for rank, f := range r.figures {
		fmt.Fprintf(out, "cholesky: rank %d: %d tasks, sent %d tiles (%.1f MiB), walk %.1f ms\n", rank, f[figTasks], f[figSentMsgs], float64(f[figSentBytes])/(1<<20), float64(f[figWalkUs])/1e3)
		pairs[fmt.Sprintf("rank%d_tasks", rank)] = f[figTasks]
		pairs[fmt.Sprintf("rank%d_sent", rank)] = f[figSentMsgs]
		tasks += f[figTasks]
	}
	pairs["tasks"] = tasks
	kv(out, "cholesky", pairs)
}

// mpiTiles are the lower tiles of the matrix on one rank: handles[m][k]
// for k <= m, the rank's own allocated in the arena and filled, the
// others' registered without home (memory only once a copy lands).
type mpiTiles[T float32 | float64] struct {
	handles [][]*core.Handle
	own     [][]T
}

// register registers every lower tile with its tag m*nb+k and owner.
func (t *mpiTiles[T]) register(c *mpi.Comm, g rankGrid, n, nb int) error {
	rt := c.Runtime()
	bs := n / nb
	var z T
	t.handles = make([][]*core.Handle, nb)
	for m := 0; m < nb; m++ {
		t.handles[m] = make([]*core.Handle, m+1)
		for k := 0; k <= m; k++ {
			owner := g.owner(m, k)
			var h *core.Handle
			if owner == c.Rank() {
				tile, err := core.Malloc[T](rt, bs*bs)
				if err != nil {
					return err
				}
				t.own = append(t.own, tile)
				for j := 0; j < bs; j++ {
					for i := 0; i < bs; i++ {
						tile[i+j*bs] = T(element(m*bs+i, k*bs+j, n))
					}
				}
				if h, err = core.RegisterMatrix(rt, tile, bs, bs, bs); err != nil {
					return err
				}
			} else {
				var err error
				h, err = rt.RegisterNoHome(kernel.Layout{Interface: kernel.Matrix, ElemSize: uint32(unsafe.Sizeof(z)), NX: uint64(bs), NY: uint64(bs)})
				if err != nil {
					return err
				}
			}
			t.handles[m][k] = h
			if err := c.Register(h, int64(m*nb+k), owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// release unregisters the tiles and frees this rank's.
func (t *mpiTiles[T]) release(c *mpi.Comm) error {
	var errs []error
	for _, row := range t.handles {
		for _, h := range row {
			if h != nil {
				errs = append(errs, c.Unregister(h))
			}
		}
	}
	for _, tile := range t.own {
		errs = append(errs, core.Free(c.Runtime(), tile))
	}
	return errors.Join(errs...)
}

// at reads element (i, j) of the factor from the tiles on this rank, under
// acquisition: the tiles are packed, column-major.
func (t *mpiTiles[T]) at(bs int) func(i, j int) float64 {
	ptrs := make([][]*T, len(t.handles))
	for m, row := range t.handles {
		ptrs[m] = make([]*T, len(row))
		for k, h := range row {
			ptrs[m][k] = (*T)(h.LocalPointer())
		}
	}
	return func(i, j int) float64 {
		tile := unsafe.Slice(ptrs[i/bs][j/bs], bs*bs)
		return float64(tile[i%bs+(j%bs)*bs])
	}
}

func runCholeskyMPI[T float32 | float64](c *mpi.Comm, g rankGrid, a choleskyMPIArgs, ks choleskyKernels) (res choleskyMPIResult, err error) {
	rt := c.Runtime()
	n, nb := a.size, a.nblocks
	bs := n / nb
	cls := ks.codelets()
	var tiles mpiTiles[T]
	defer func() {
		if rerr := tiles.release(c); err == nil {
			err = rerr
		}
	}()
	if err := tiles.register(c, g, n, nb); err != nil {
		return res, err
	}
	// Timed as StarPU's mpi_cholesky is: from every rank ready to every
	// rank done (WaitForAll ends with a reduction over the ranks).
	if err := c.Barrier(); err != nil {
		return res, err
	}
	start := time.Now()
	err = cls.walk(tiles.handles, func(cl *core.Codelet, arg []byte, prio int, hs ...*core.Handle) error {
		args := make([]core.InsertArg, 0, len(hs)+2)
		for i, h := range hs {
			args = append(args, core.Data(cl.Modes[i], h))
		}
		_, err := c.Insert(cl, append(args, core.ClArgs(arg), core.Priority(prio))...)
		return err
	})
	walk := time.Since(start)
	if werr := c.WaitForAll(); err == nil {
		err = werr
	}
	if err != nil {
		return res, err
	}
	res.elapsed = time.Since(start)
	res.ranks = c.Size()

	var mine [nFigures]int64
	for _, k := range tasksPerArch(rt, cls.potrf, cls.trsm, cls.syrk, cls.gemm) {
		mine[figTasks] += k
	}
	for _, p := range c.Stats() {
		mine[figSentMsgs] += p.SentMsgs
		mine[figSentBytes] += p.SentBytes
	}
	mine[figWalkUs] = walk.Microseconds()
	if res.figures, err = gatherFigures(c, mine, int64(nb*nb)); err != nil {
		return res, err
	}
	if !a.check {
		return res, nil
	}
	// The factor goes to rank 0, which checks it as the single-node run
	// does.
	for _, row := range tiles.handles {
		for _, h := range row {
			if err := c.GetDataOnNode(h, 0); err != nil {
				return res, err
			}
		}
	}
	if c.Rank() != 0 {
		return res, nil
	}
	for _, row := range tiles.handles {
		for _, h := range row {
			if err := h.Acquire(core.R); err != nil {
				return res, err
			}
		}
	}
	res.check = checkFactor[T](n, bs, tiles.at(bs))
	for _, row := range tiles.handles {
		for _, h := range row {
			if err := h.Release(); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// gatherFigures brings every rank's figures to rank 0, through MPI: one
// vector per rank, owned by it, tagged from tag0. Rank 0 gets them all;
// the others, theirs alone.
func gatherFigures(c *mpi.Comm, mine [nFigures]int64, tag0 int64) (all [][nFigures]int64, err error) {
	rt := c.Runtime()
	all = make([][nFigures]int64, c.Size())
	all[c.Rank()] = mine
	hs := make([]*core.Handle, 0, c.Size())
	defer func() {
		for _, h := range hs {
			if uerr := c.Unregister(h); err == nil {
				err = uerr
			}
		}
	}()
	for r := range all {
		h, err := core.RegisterVector(rt, all[r][:])
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
		if err := c.Register(h, tag0+int64(r), r); err != nil {
			return nil, err
		}
	}
	for _, h := range hs {
		if err := c.GetDataOnNode(h, 0); err != nil {
			return nil, err
		}
	}
	if c.Rank() == 0 {
		for _, h := range hs {
			// Acquire brings the received value to all[r].
			if err := h.Acquire(core.R); err != nil {
				return nil, err
			}
			if err := h.Release(); err != nil {
				return nil, err
			}
		}
	}
	return all, nil
}
