package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
)

// sgemmBench measures OpenBLAS's own single-precision gemm on the whole
// machine's threads, outside the runtime: the reference the Cholesky figures
// are reported against (a tiled factorisation cannot beat the library's
// largest gemm on the same cores).
func sgemmBench(ctx context.Context, args []string, out io.Writer) error {
	cf := newCmd("bench sgemm", "[flags]", "Time OpenBLAS's own sgemm on the whole machine, outside the runtime: the\nreference the Cholesky figures are reported against.")
	cf.refuse("it calls OpenBLAS directly, without starting the runtime", "config", "plugin-dir", "sched", "ncpu", "trace")
	fs := cf.FlagSet
	size := fs.Int("size", 4096, "matrix order n of the n x n x n product")
	threads := fs.Int("threads", 2, "OpenBLAS threads")
	reps := fs.Int("reps", 3, "products to time (the best counts)")
	if err := cf.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench sgemm"
	if err := checkFlags(checkFlag(cmd, "size", *size, 1, maxMatrixOrder), checkFlag(cmd, "threads", *threads, 1, maxThreads),
		checkFlag(cmd, "reps", *reps, 1, maxIters)); err != nil {
		return err
	}
	n := *size
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = rng.Float32(), rng.Float32()
	}
	blas.SetNumThreads(*threads)
	best := time.Duration(1<<63 - 1)
	for range *reps {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := blas.Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n); err != nil {
			return fmt.Errorf("bench sgemm: %w", err)
		}
		best = min(best, time.Since(t0))
	}
	gflops := 2 * float64(n) * float64(n) * float64(n) / best.Seconds() / 1e9
	fmt.Fprintf(out, "sgemm: %dx%d, %d OpenBLAS threads: %.1f ms, %.2f GFlop/s\n", n, n, *threads, float64(best.Microseconds())/1e3, gflops)
	kv(out, "bench sgemm", map[string]any{"size": n, "threads": *threads, "ms": float64(best.Microseconds()) / 1e3, "gflops": gflops})
	return nil
}
