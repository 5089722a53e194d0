package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// spmvRun multiplies a sparse matrix by a vector on the workers: the matrix
// is registered through the iface-csr plugin and split into row blocks by
// its rows filter, y into the matching vector blocks, one task per block.
// It repeats the product, checks y against the plain Go loop and reports
// both times.
func spmvRun(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("run spmv", "[flags]", "Multiply a sparse matrix (generated, or read with --mtx) by a vector in CSR row\nblocks, one task each, and check it against a plain Go loop.")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	kind := fs.String("matrix", "laplacian", "generated matrix: laplacian (2-D 5-point) or banded (random, 9 diagonals)")
	nnz := fs.Int("nnz", 1_000_000, "about how many nonzeros the generated matrix has")
	mtx := fs.String("mtx", "", "read the matrix from the Matrix Market coordinate `FILE` instead of generating one")
	nblocks := fs.Int("nblocks", 8, "row blocks, one task each")
	iters := fs.Int("iters", 10, "products timed")
	if err := c.parse(args, out); err != nil {
		return err
	}
	for _, gen := range []string{"matrix", "nnz"} {
		if *mtx != "" && c.given(gen) {
			return usagef("run spmv: --%s means nothing with --mtx: the file gives the matrix", gen)
		}
	}
	const cmd = "spmv"
	if err := checkFlags(checkFlag(cmd, "nblocks", *nblocks, 1, maxParts), checkFlag(cmd, "iters", *iters, 1, maxIters)); err != nil {
		return err
	}
	m, err := sparseInput(*kind, *nnz, *mtx)
	if err != nil {
		return fmt.Errorf("spmv: %w", err)
	}
	if *nblocks > m.nrow {
		return fmt.Errorf("spmv: need 0 < nblocks (%d) <= rows (%d)", *nblocks, m.nrow)
	}
	x := make([]float64, m.ncol)
	for i := range x {
		x[i] = 1 + float64(i%17)/16
	}
	y := make([]float64, m.nrow)

	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	elapsed, perArch, err := spmvOnRuntime(rt, m, x, y, *nblocks, *iters)
	if ferr := rf.finish(rt); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("spmv: %w", err)
	}

	ref := make([]float64, m.nrow)
	start := time.Now()
	for i := 0; i < *iters; i++ {
		m.mulVec(x, ref)
	}
	seq := time.Since(start) / time.Duration(*iters)
	maxErr := 0.0
	for i := range y {
		maxErr = math.Max(maxErr, math.Abs(y[i]-ref[i])/math.Max(1, math.Abs(ref[i])))
	}
	verified := maxErr <= 1e-12
	flops := 2 * float64(m.nnz())
	fmt.Fprintf(out, "spmv: %dx%d matrix, %d nonzeros, %d row blocks: %v a product on the runtime, %v in a plain Go loop\n",
		m.nrow, m.ncol, m.nnz(), *nblocks, elapsed, seq)
	pairs := map[string]any{"nrow": m.nrow, "nnz": m.nnz(), "nblocks": *nblocks, "iters": *iters,
		"ms": ms(elapsed), "gflops": flops / elapsed.Seconds() / 1e9,
		"seq_ms": ms(seq), "seq_gflops": flops / seq.Seconds() / 1e9, "speedup": seq.Seconds() / elapsed.Seconds(),
		"max_err": maxErr, "verified": verified}
	for arch, n := range perArch {
		pairs[string(arch)+"_tasks"] = n
	}
	kv(out, "spmv", pairs)
	if !verified {
		return fmt.Errorf("spmv: y differs from the plain loop's by %.3g (relative)", maxErr)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// maxGeneratedNNZ bounds --nnz: a nonzero is 12 bytes (value and column),
// in the Go matrix and again in the arena, so 2^28 of them are about 6 GiB.
const maxGeneratedNNZ = 1 << 28

// sparseInput reads --mtx or generates the --matrix kind with about nnz
// nonzeros.
func sparseInput(kind string, nnz int, mtx string) (*csrMatrix, error) {
	if mtx != "" {
		f, err := os.Open(mtx)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		m, err := readMTX(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mtx, err)
		}
		return m, nil
	}
	if nnz < 5 || nnz > maxGeneratedNNZ {
		return nil, usagef("--nnz %d is out of range (5 to %d)", nnz, maxGeneratedNNZ)
	}
	switch kind {
	case "laplacian":
		return laplacian(max(1, int(math.Round(math.Sqrt(float64(nnz)/5))))), nil
	case "banded":
		return banded(max(1, nnz/9), 4, 1), nil
	}
	return nil, usagef("unknown --matrix %q (laplacian, banded)", kind)
}

// spmvOnRuntime computes y = A*x iters times and returns the time of one
// product (the first, which moves the data in, is not timed) and the
// tasks each architecture ran. The blocks run on OpenCL devices too, when
// the runtime has them (driver-opencl hosts csr.SpmvF64; pocl's CPU
// device with STARPU_OPENCL_ON_CPUS=1).
func spmvOnRuntime(rt *core.Runtime, m *csrMatrix, x, y []float64, nblocks, iters int) (per time.Duration, perArch map[core.Arch]int64, err error) {
	meta, parts, err := csr.Parts(m.val, m.colind, m.rowptr, 0)
	if err != nil {
		return 0, nil, err
	}
	var hs []*core.Handle
	defer func() {
		for i := len(hs) - 1; i >= 0; i-- {
			if uerr := hs[i].Unregister(); uerr != nil && err == nil {
				err = uerr
			}
		}
	}()
	ha, err := rt.RegisterInterface(csr.Name, meta.Encode(), parts)
	if err != nil {
		return 0, nil, err
	}
	hs = append(hs, ha)
	hx, err := core.RegisterVector(rt, x)
	if err != nil {
		return 0, nil, err
	}
	hs = append(hs, hx)
	blocks, err := ha.Partition(core.PluginFilter(csr.RowsFilter, nblocks))
	if err != nil {
		return 0, nil, err
	}
	defer func() {
		if uerr := ha.Unpartition(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	hy := make([]*core.Handle, nblocks)
	for i := range hy {
		lo, hi := csr.RowBlock(m.nrow, nblocks, i)
		if hy[i], err = core.RegisterVector(rt, y[lo:hi]); err != nil {
			return 0, nil, err
		}
		hs = append(hs, hy[i])
	}
	cl := &core.Codelet{Name: "spmv", Kernels: map[core.Arch]string{core.CPU: csr.SpmvF64, core.OpenCL: csr.SpmvF64}, Modes: []core.Mode{core.R, core.R, core.W}}
	round := func() error {
		for i := range hy {
			if err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{blocks[i], hx, hy[i]}, Name: fmt.Sprintf("spmv[%d]", i)}); err != nil {
				return err
			}
		}
		return rt.WaitForAll()
	}
	if err := round(); err != nil {
		return 0, nil, err
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := round(); err != nil {
			return 0, nil, err
		}
	}
	return time.Since(start) / time.Duration(iters), tasksPerArch(rt, cl), nil
}

// csrMatrix is a float64 sparse matrix in CSR form with 0-based rowptr, as
// the sparse workloads build, read and check it.
type csrMatrix struct {
	nrow, ncol int
	rowptr     []uint32
	colind     []uint32
	val        []float64
}

func (m *csrMatrix) nnz() int { return len(m.val) }

// mulVec is the plain single-threaded y = A*x the workloads compare with.
func (m *csrMatrix) mulVec(x, y []float64) {
	for r := 0; r < m.nrow; r++ {
		var s float64
		for k := m.rowptr[r]; k < m.rowptr[r+1]; k++ {
			s += m.val[k] * x[m.colind[k]]
		}
		y[r] = s
	}
}

// laplacian is the 2-D 5-point Laplacian on a k x k grid (symmetric
// positive definite; nnz about 5k^2).
func laplacian(k int) *csrMatrix {
	n := k * k
	m := &csrMatrix{nrow: n, ncol: n, rowptr: make([]uint32, 1, n+1)}
	m.colind = make([]uint32, 0, 5*n)
	m.val = make([]float64, 0, 5*n)
	add := func(i, j int, v float64) {
		if i >= 0 && i < k && j >= 0 && j < k {
			m.colind = append(m.colind, uint32(i*k+j))
			m.val = append(m.val, v)
		}
	}
	for i := 0; i < k; i++ {
		for j := 0; j < k; j++ {
			add(i-1, j, -1)
			add(i, j-1, -1)
			add(i, j, 4)
			add(i, j+1, -1)
			add(i+1, j, -1)
			m.rowptr = append(m.rowptr, uint32(len(m.val)))
		}
	}
	return m
}

// banded is an n x n matrix with the 2*half+1 diagonals around the main one
// filled with random values (seeded, so runs repeat).
func banded(n, half int, seed int64) *csrMatrix {
	rng := rand.New(rand.NewSource(seed))
	m := &csrMatrix{nrow: n, ncol: n, rowptr: make([]uint32, 1, n+1)}
	for r := 0; r < n; r++ {
		for c := max(0, r-half); c <= min(n-1, r+half); c++ {
			m.colind = append(m.colind, uint32(c))
			m.val = append(m.val, rng.Float64()-0.5)
		}
		m.rowptr = append(m.rowptr, uint32(len(m.val)))
	}
	return m
}

// Limits of readMTX. Nothing is allocated from the size line alone beyond
// what the input can hold: the entries grow as they are read, and the row
// pointers (4 bytes a row), like the x and y vectors run spmv allocates
// (8 bytes a row or column), are sized by dimensions that are bounded by
// the entries the file really holds.
const (
	// maxMTXEntries bounds the entries of the file; a symmetric file's
	// mirrored entries at most double them, within CSR's uint32 rowptr.
	maxMTXEntries = 1 << 30
	// maxMTXDim bounds rows and columns: indices, rowptr and the vectors
	// stay far from the int and uint32 ranges.
	maxMTXDim = 1 << 30
	// mtxFreeDim is the dimension always accepted; beyond it a matrix may
	// have at most mtxDimPerEntry rows (and columns) per entry announced, so
	// that a few bytes of header cannot ask for gigabytes of empty rows.
	mtxFreeDim     = 1 << 20
	mtxDimPerEntry = 16
	// mtxMaxLine is the longest line accepted.
	mtxMaxLine = 1 << 20
	// mtxMinEntryLine is the length of the shortest entry line ("1 1\n"): a
	// file of known size holds at most size/mtxMinEntryLine entries.
	mtxMinEntryLine = 4
	// mtxPrealloc is how many entries are reserved up front when the
	// input's size is unknown.
	mtxPrealloc = 1 << 12
)

// mtxDimLimit is the largest number of rows or columns accepted for a
// matrix announcing ne entries.
func mtxDimLimit(ne int64) int64 {
	return min(maxMTXDim, max(mtxFreeDim, mtxDimPerEntry*ne))
}

// readMTX reads a Matrix Market coordinate file (real, integer or pattern;
// general or symmetric, whose lower triangle is mirrored) into CSR, rows
// in order and each row's entries in file order. The file must hold exactly
// the entries its size line announces, with indices inside its dimensions
// and finite values. Errors name the line, read errors included.
func readMTX(r io.Reader) (*csrMatrix, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, mtxMaxLine)
	line := 0
	// scanErr is the scanner's error, at the line it could not read.
	scanErr := func() error {
		err := sc.Err()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, bufio.ErrTooLong):
			return fmt.Errorf("mtx: line %d is longer than %d bytes: %w", line+1, mtxMaxLine, err)
		}
		return fmt.Errorf("mtx: line %d: %w", line+1, err)
	}
	// next returns the next line that is neither blank nor a comment; at
	// the end of the input, io.EOF.
	next := func() (string, error) {
		for sc.Scan() {
			line++
			t := strings.TrimSpace(sc.Text())
			if t != "" && !strings.HasPrefix(t, "%") {
				return t, nil
			}
		}
		if err := scanErr(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	if !sc.Scan() {
		if err := scanErr(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("mtx: empty file")
	}
	line++
	h := strings.Fields(strings.ToLower(sc.Text()))
	if len(h) != 5 || h[0] != "%%matrixmarket" || h[1] != "matrix" || h[2] != "coordinate" {
		return nil, fmt.Errorf("mtx: line 1: want %%%%MatrixMarket matrix coordinate <field> <symmetry>, got %q", sc.Text())
	}
	field, sym := h[3], h[4]
	switch field {
	case "real", "integer", "pattern":
	default:
		return nil, fmt.Errorf("mtx: line 1: field %q not supported (real, integer, pattern)", field)
	}
	switch sym {
	case "general", "symmetric":
	default:
		return nil, fmt.Errorf("mtx: line 1: symmetry %q not supported (general, symmetric)", sym)
	}
	t, err := next()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("mtx: no size line")
	} else if err != nil {
		return nil, err
	}
	var size [3]int64
	f := strings.Fields(t)
	if len(f) != len(size) {
		return nil, fmt.Errorf("mtx: line %d: want <rows> <cols> <entries>, got %q", line, t)
	}
	for i := range size {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 || v == 0 && i < 2 {
			return nil, fmt.Errorf("mtx: line %d: want <rows> <cols> <entries>, got %q", line, t)
		}
		size[i] = v
	}
	nr64, nc64, ne64 := size[0], size[1], size[2]
	if sym == "symmetric" && nr64 != nc64 {
		return nil, fmt.Errorf("mtx: line %d: a %dx%d %s matrix with %d entries is not supported", line, nr64, nc64, sym, ne64)
	}
	if ne64 > maxMTXEntries {
		return nil, fmt.Errorf("mtx: line %d: %d entries announced, at most %d supported", line, ne64, maxMTXEntries)
	}
	if lim := mtxDimLimit(ne64); nr64 > lim || nc64 > lim {
		return nil, fmt.Errorf("mtx: line %d: a %dx%d matrix with %d entries is not supported: rows and columns are limited to %d, or %d per entry up to %d",
			line, nr64, nc64, ne64, mtxFreeDim, mtxDimPerEntry, maxMTXDim)
	}
	// Within the limits above, these fit in int and uint32 everywhere.
	nr, nc, ne := int(nr64), int(nc64), int(ne64)
	type entry struct {
		r, c uint32
		v    float64
	}
	entries := make([]entry, 0, min(ne, mtxEntryHint(r)))
	want := 3
	if field == "pattern" {
		want = 2
	}
	for k := 0; k < ne; k++ {
		t, err := next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("mtx: %d entries announced, %d found", ne, k)
		} else if err != nil {
			return nil, err
		}
		f := strings.Fields(t)
		if len(f) != want {
			return nil, fmt.Errorf("mtx: line %d: want %d fields, got %q", line, want, t)
		}
		i, err1 := strconv.ParseInt(f[0], 10, 64)
		j, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mtx: line %d: entry (%s, %s): row and column must be whole numbers", line, f[0], f[1])
		}
		if i < 1 || i > nr64 || j < 1 || j > nc64 {
			return nil, fmt.Errorf("mtx: line %d: entry (%s, %s) outside the %dx%d matrix", line, f[0], f[1], nr, nc)
		}
		v := 1.0
		if field != "pattern" {
			var err error
			if v, err = strconv.ParseFloat(f[2], 64); err != nil {
				return nil, fmt.Errorf("mtx: line %d: value %q: %w", line, f[2], err)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("mtx: line %d: value %q is not a finite number", line, f[2])
			}
		}
		entries = append(entries, entry{uint32(i - 1), uint32(j - 1), v})
		if sym == "symmetric" && i != j {
			entries = append(entries, entry{uint32(j - 1), uint32(i - 1), v})
		}
	}
	if _, err := next(); err == nil {
		return nil, fmt.Errorf("mtx: line %d: more entries than the %d announced", line, ne)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	m := &csrMatrix{nrow: nr, ncol: nc, rowptr: make([]uint32, nr+1),
		colind: make([]uint32, len(entries)), val: make([]float64, len(entries))}
	for _, e := range entries {
		m.rowptr[e.r+1]++
	}
	for r := 0; r < nr; r++ {
		m.rowptr[r+1] += m.rowptr[r]
	}
	fill := append([]uint32(nil), m.rowptr[:nr]...)
	for _, e := range entries {
		m.colind[fill[e.r]], m.val[fill[e.r]] = e.c, e.v
		fill[e.r]++
	}
	return m, nil
}

// mtxEntryHint is how many entries to reserve for reading r: as many as its
// remaining bytes can hold when it tells its size (a file, a bytes.Reader),
// else mtxPrealloc. It never trusts the file's own size line.
func mtxEntryHint(r io.Reader) int {
	var n int64 = -1
	switch v := r.(type) {
	case interface{ Len() int }:
		n = int64(v.Len())
	case interface{ Stat() (os.FileInfo, error) }:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			n = fi.Size()
		}
	}
	if n < 0 {
		return mtxPrealloc
	}
	return int(min(n/mtxMinEntryLine+1, maxMTXEntries))
}
