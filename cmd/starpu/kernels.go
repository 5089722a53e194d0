package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// kernelsBench times the single-precision Cholesky's tile kernels as the CPU
// driver runs them (each task's execution, as the runtime measured it)
// against the same OpenBLAS calls made here, in one thread, on the same
// layout and in the same order: what running inside the driver costs a
// kernel (docs/design/hot-path.md, "First touches").
func kernelsBench(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("bench kernels", "[flags]", "Time the tile kernels of a single-precision Cholesky inside the CPU driver\nagainst the same OpenBLAS calls made directly, one thread, same layout and order.\nWith --ncpu 1 the two see the same machine: one kernel at a time.")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	size := fs.Int("size", 4096, "matrix order")
	nblocks := fs.Int("nblocks", 16, "tiles per dimension")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench kernels"
	if err := checkFlags(checkFlag(cmd, "size", *size, 1, maxMatrixOrder), checkFlag(cmd, "nblocks", *nblocks, 1, maxTiles)); err != nil {
		return err
	}
	if *size%*nblocks != 0 {
		return usagef("bench kernels: size (%d) must be a positive multiple of nblocks (%d)", *size, *nblocks)
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	calls, inDriver, err := driverKernels(rt, *size, *nblocks)
	if ferr := rf.finish(rt); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	bare, err := bareKernels(ctx, *size, *nblocks, calls)
	if err != nil {
		return err
	}
	pairs := map[string]any{"size": *size, "nblocks": *nblocks}
	fmt.Fprintf(out, "%-10s %6s  %-32s  %-32s  %s\n", "kernel", "calls", "in the driver: mean p50 p90 max", "direct: mean p50 p90 max", "ratio of means, p50")
	for _, k := range []string{blasarg.PotrfF32, blasarg.TrsmF32, blasarg.SyrkF32, blasarg.SyrkGemmF32, blasarg.GemmF32} {
		d, b := summarise(inDriver[k]), summarise(bare[k])
		if d.n == 0 || b.n == 0 {
			continue
		}
		fmt.Fprintf(out, "%-10s %6d  %-32s  %-32s  %.3f %.3f\n", k, d.n, d, b, d.mean/b.mean, d.p50/b.p50)
		pairs[k+"_ratio"] = math.Round(d.mean/b.mean*1000) / 1000
		pairs[k+"_p50_ratio"] = math.Round(d.p50/b.p50*1000) / 1000
		pairs[k+"_driver_us"] = math.Round(d.mean)
		pairs[k+"_direct_us"] = math.Round(b.mean)
	}
	kv(out, "bench kernels", pairs)
	return nil
}

// kernelCall is one task of the factorisation: its kernel and the tiles
// (row, column) of its handles, in order.
type kernelCall struct {
	kernel string
	tiles  [][2]int
}

// driverKernels runs the factorisation in rt and returns its calls, in
// submission order, and each kernel's execution times in µs.
func driverKernels(rt *core.Runtime, n, nb int) (calls []kernelCall, times map[string][]float64, err error) {
	var tiles choleskyTiles[float32]
	defer func() {
		if cerr := tiles.release(rt); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := tiles.partition(rt, n, nb, false); err != nil {
		return nil, nil, err
	}
	where := map[*core.Handle][2]int{}
	for m := range tiles.handles {
		for k, h := range tiles.handles[m] {
			where[h] = [2]int{m, k}
		}
	}
	cls := choleskyKernels{blasarg.PotrfF32, blasarg.TrsmF32, blasarg.SyrkF32, blasarg.GemmF32, false, false}.codelets()
	var tasks []*core.Task
	if err := cls.walk(tiles.handles, func(cl *core.Codelet, arg []byte, prio int, hs ...*core.Handle) error {
		call := kernelCall{kernel: cl.Name}
		for _, h := range hs {
			call.tiles = append(call.tiles, where[h])
		}
		calls = append(calls, call)
		t := &core.Task{Codelet: cl, Handles: hs, Arg: arg, Priority: prio}
		tasks = append(tasks, t)
		return rt.Submit(t)
	}); err != nil {
		return nil, nil, err
	}
	if err := rt.WaitForAll(); err != nil {
		return nil, nil, err
	}
	times = map[string][]float64{}
	for i, t := range tasks {
		p, err := rt.Profiling(t)
		if err != nil {
			return nil, nil, err
		}
		// The implementation that ran, where the codelet has several:
		// the direct calls make the same.
		if impls := t.Codelet.Impls[core.CPU]; p.Implementation >= 0 && p.Implementation < len(impls) {
			calls[i].kernel = impls[p.Implementation]
		}
		times[calls[i].kernel] = append(times[calls[i].kernel], float64(p.Ended.Sub(p.Started).Nanoseconds())/1e3)
	}
	return calls, times, nil
}

// bareKernels makes calls on a matrix of this process, laid out as the
// runtime's (column major, the tiles cut from one n x n matrix), one at a
// time on one locked thread, and returns each kernel's times in µs.
func bareKernels(ctx context.Context, n, nb int, calls []kernelCall) (map[string][]float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	blas.SetNumThreads(1)
	bs := n / nb
	a := make([]float32, n*n)
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			a[i+j*n] = float32(element(i, j, n))
		}
	}
	tile := func(t [2]int) []float32 { return a[t[0]*bs+t[1]*bs*n:] }
	times := map[string][]float64{}
	for _, c := range calls {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		t0 := time.Now()
		switch c.kernel {
		case blasarg.PotrfF32:
			err = blas.Spotrf(true, bs, tile(c.tiles[0]), n)
		case blasarg.TrsmF32:
			err = blas.Strsm(true, true, true, false, bs, bs, 1, tile(c.tiles[0]), n, tile(c.tiles[1]), n)
		case blasarg.SyrkF32:
			err = blas.Ssyrk(true, false, bs, bs, -1, tile(c.tiles[0]), n, 1, tile(c.tiles[1]), n)
		case blasarg.SyrkGemmF32:
			err = blas.Sgemm(false, true, bs, bs, bs, -1, tile(c.tiles[0]), n, tile(c.tiles[0]), n, 1, tile(c.tiles[1]), n)
		case blasarg.GemmF32:
			err = blas.Sgemm(false, true, bs, bs, bs, -1, tile(c.tiles[0]), n, tile(c.tiles[1]), n, 1, tile(c.tiles[2]), n)
		default:
			err = fmt.Errorf("no direct call for kernel %q", c.kernel)
		}
		d := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("bench kernels: direct %s: %w", c.kernel, err)
		}
		times[c.kernel] = append(times[c.kernel], float64(d.Nanoseconds())/1e3)
	}
	return times, nil
}

// kernelTimes summarises a kernel's times in µs.
type kernelTimes struct {
	n                   int
	mean, p50, p90, max float64
}

func summarise(us []float64) kernelTimes {
	if len(us) == 0 {
		return kernelTimes{}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return kernelTimes{n: len(s), mean: sum / float64(len(s)), p50: s[len(s)/2], p90: s[len(s)*9/10], max: s[len(s)-1]}
}

func (k kernelTimes) String() string {
	return fmt.Sprintf("%.0f %.0f %.0f %.0f us", k.mean, k.p50, k.p90, k.max)
}
