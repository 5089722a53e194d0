// Command stencil is a blocked 1D stencil with its own kernel plus two BLAS
// calls, the program docs/first-application.md builds: 1M floats in 8
// blocks, 10 sweeps of a 3-point average (each block reads its neighbours,
// on a ring), then y = 2x + y and the dot product x·y, block by block.
// c/stencil.c is the same program in StarPU's C.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

const n, nblocks, sweeps = 1 << 20, 8, 10

// smooth writes into out the 3-point average of mid, whose neighbour
// blocks are left and right.
func smooth(ctx *kernel.Context) error {
	left, mid, right, out := ctx.Buffers[0].Float32s(), ctx.Buffers[1].Float32s(), ctx.Buffers[2].Float32s(), ctx.Buffers[3].Float32s()
	for i := range mid {
		prev, next := left[len(left)-1], right[0]
		if i > 0 {
			prev = mid[i-1]
		}
		if i < len(mid)-1 {
			next = mid[i+1]
		}
		out[i] = (prev + mid[i] + next) / 3
	}
	return nil
}

// must stops the program on an error: this one has nothing to recover.
func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

func main() {
	rt := must(core.Init(context.Background(), core.Options{
		Kernels: append(kernels.Library(), kernel.Kernel{Name: "smooth", Func: smooth}),
	}))
	defer rt.Shutdown()
	x, y, dots := make([]float32, n), make([]float32, n), make([]float32, nblocks)
	for i := range x {
		x[i] = float32(i % 100)
	}
	bx := must(must(core.RegisterVector(rt, x)).Partition(core.VectorBlocks(nblocks, 0)))
	by := must(must(core.RegisterVector(rt, y)).Partition(core.VectorBlocks(nblocks, 0)))

	stencil := &core.Codelet{Name: "smooth", Kernels: map[core.Arch]string{core.CPU: "smooth"}, Modes: []core.Mode{core.R, core.R, core.R, core.W}}
	axpy := &core.Codelet{Name: "axpy", Kernels: map[core.Arch]string{core.CPU: blasarg.AxpyF32}, Modes: []core.Mode{core.R, core.RW}}
	dot := &core.Codelet{Name: "dot", Kernels: map[core.Arch]string{core.CPU: blasarg.DotF32}, Modes: []core.Mode{core.R, core.R, core.W}}
	for s := 0; s < sweeps; s++ {
		for b := range nblocks {
			left, right := bx[(b+nblocks-1)%nblocks], bx[(b+1)%nblocks]
			must(rt.Insert(stencil, core.Data(core.R, left), core.Data(core.R, bx[b]), core.Data(core.R, right), core.Data(core.W, by[b])))
		}
		bx, by = by, bx
	}
	hdots := make([]*core.Handle, nblocks)
	for b := range nblocks {
		must(rt.Insert(axpy, core.Data(core.R, bx[b]), core.Data(core.RW, by[b]), core.ClArgs(blasarg.AxpyArg{Alpha: 2}.Encode())))
		hdots[b] = must(core.RegisterVariable(rt, &dots[b]))
		must(rt.Insert(dot, core.Data(core.R, bx[b]), core.Data(core.R, by[b]), core.Data(core.W, hdots[b])))
	}
	var sum float64
	for b, h := range hdots {
		if err := h.Unregister(); err != nil { // waits for the dot, brings it home
			log.Fatal(err)
		}
		sum += float64(dots[b])
	}
	fmt.Printf("x·y = %.6g\n", sum)
}
