package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// vectorScal scales a Go vector by a factor in parts, each part a handle and
// a task, and checks every element after unregistering.
func vectorScal(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("run vector-scal", "[flags]", "Scale a vector by a factor on the workers, one task per part, and check every element.")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	size := fs.Int("size", 1<<20, "number of float32 elements")
	parts := fs.Int("nparts", 8, "number of parts (one task each)")
	factor := fs.Float64("factor", 3.14, "scaling factor")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "vector-scal"
	if err := checkFlags(checkFlag(cmd, "size", *size, 1, maxVectorSize), checkFlag(cmd, "nparts", *parts, 1, maxParts)); err != nil {
		return err
	}
	if *parts > *size {
		return usagef("vector-scal: need 0 < nparts (%d) <= size (%d)", *parts, *size)
	}
	if math.IsNaN(*factor) || math.IsInf(*factor, 0) {
		return usagef("vector-scal: --factor %g is not a finite number", *factor)
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	x := make([]float32, *size)
	for i := range x {
		x[i] = float32(i%1000) + 1
	}
	scal := &core.Codelet{Name: "vector_scal", Kernels: map[core.Arch]string{core.CPU: blasarg.ScalF32, core.OpenCL: blasarg.ScalF32, core.CUDA: blasarg.ScalF32}, Modes: []core.Mode{core.RW}, Model: core.HistoryModel,
		ImplFlags: map[core.Arch][]core.ImplFlag{core.OpenCL: {core.ImplAsync}, core.CUDA: {core.ImplAsync}}}
	arg := blasarg.ScalArg{Alpha: *factor}.Encode()
	start := time.Now()
	var hs []*core.Handle
	for p := 0; p < *parts; p++ {
		lo, hi := p**size / *parts, (p+1)**size / *parts
		h, err := core.RegisterVector(rt, x[lo:hi])
		if err != nil {
			rt.Shutdown()
			return err
		}
		hs = append(hs, h)
		if err := rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{h}, Arg: arg, Name: fmt.Sprintf("scal[%d]", p)}); err != nil {
			rt.Shutdown()
			return err
		}
	}
	werr := rt.WaitForAll()
	perArch := tasksPerArch(rt, scal)
	for _, h := range hs {
		if err := h.Unregister(); err != nil && werr == nil {
			werr = err
		}
	}
	elapsed := time.Since(start)
	if err := rf.finish(rt); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return werr
	}
	bad := 0
	f := float32(*factor)
	for i, v := range x {
		want := (float32(i%1000) + 1) * f
		if math.Abs(float64(v-want)) > 1e-5*math.Abs(float64(want)) {
			bad++
		}
	}
	fmt.Fprintf(out, "vector-scal: %d floats in %d parts scaled by %g in %v; %d wrong elements\n", *size, *parts, *factor, elapsed, bad)
	pairs := map[string]any{"size": *size, "nparts": *parts, "ms": float64(elapsed.Microseconds()) / 1e3,
		"gflops": float64(*size) / elapsed.Seconds() / 1e9, "verified": bad == 0}
	for arch, n := range perArch {
		pairs[string(arch)+"_tasks"] = n
	}
	kv(out, "vector-scal", pairs)
	if bad > 0 {
		return fmt.Errorf("vector-scal: %d elements are wrong", bad)
	}
	return nil
}
