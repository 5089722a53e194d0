// Command stencil-mpi is examples/stencil over the ranks of an MPI job:
// the same 1M floats in 8 blocks on a ring, 10 sweeps of a 3-point
// average, then y = 2x + y and the dot product x·y; the blocks are
// distributed over the ranks in contiguous runs, and every rank submits
// the whole graph (StarPU-MPI's model: core/mpi). Run it with
//
//	mpirun -np 4 ./stencil-mpi
//
// Each block's first and last elements are also their own 1-element
// handles, written by the task that computes the block: the sweep of a
// block reads its neighbours' edges, not their blocks, so the halo
// exchange is what Insert sends between the owners, one float each way
// per boundary and sweep. The dot product is a REDUX access: each rank
// accumulates the products of its blocks, and Redux sums the ranks'
// contributions on rank 0, which prints the result.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

const n, nblocks, sweeps = 1 << 20, 8, 10

// smooth writes into out the 3-point average of mid, whose neighbours
// are the last element of the block on its left and the first of the
// block on its right, and copies out's edges into first and last.
// Buffers: [left R, mid R, right R, out W, first W, last W].
func smooth(ctx *kernel.Context) error {
	b := ctx.Buffers
	left, mid, right, out := b[0].Float32s()[0], b[1].Float32s(), b[2].Float32s()[0], b[3].Float32s()
	for i := range mid {
		prev, next := left, right
		if i > 0 {
			prev = mid[i-1]
		}
		if i < len(mid)-1 {
			next = mid[i+1]
		}
		out[i] = (prev + mid[i] + next) / 3
	}
	b[4].Float32s()[0], b[5].Float32s()[0] = out[0], out[len(out)-1]
	return nil
}

// dotInto adds x·y, summed in float64, to its result. Buffers: [x R,
// y R, result (float64) REDUX].
func dotInto(ctx *kernel.Context) error {
	x, y := ctx.Buffers[0].Float32s(), ctx.Buffers[1].Float32s()
	var s float64
	for i := range x {
		s += float64(x[i]) * float64(y[i])
	}
	ctx.Buffers[2].Float64s()[0] += s
	return nil
}

// block is one block of a field on every rank: its values and its two
// edges, registered with MPI.
type block struct{ data, first, last *core.Handle }

// field registers the nblocks blocks of a field of n float32 values with
// MPI, with tags from tag0: rank owner(b) holds block b, filled by init,
// the others placeholders of the same shape.
func field(rt *core.Runtime, c *mpi.Comm, tag0 int64, owner func(int) int, init func(i int) float32) ([]block, error) {
	const bs = n / nblocks
	bl := make([]block, nblocks)
	for b := range bl {
		mine := owner(b) == c.Rank()
		vec := func(size int, fill func(i int) float32) (*core.Handle, error) {
			if !mine {
				return rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: uint64(size)})
			}
			v := make([]float32, size)
			for i := range v {
				v[i] = fill(i)
			}
			return core.RegisterVector(rt, v)
		}
		var hs [3]*core.Handle
		for k, f := range []func(int) float32{
			func(i int) float32 { return init(b*bs + i) },
			func(int) float32 { return init(b * bs) },
			func(int) float32 { return init(b*bs + bs - 1) },
		} {
			size := 1
			if k == 0 {
				size = bs
			}
			h, err := vec(size, f)
			if err != nil {
				return nil, err
			}
			if err := c.Register(h, tag0+int64(3*b+k), owner(b)); err != nil {
				return nil, err
			}
			hs[k] = h
		}
		bl[b] = block{hs[0], hs[1], hs[2]}
	}
	return bl, nil
}

func run() (err error) {
	ctx := context.Background()
	rt, err := core.Init(ctx, core.Options{
		Kernels: append(kernels.Library(), kernel.Kernel{Name: "smooth", Func: smooth}, kernel.Kernel{Name: "dot_into", Func: dotInto}),
	})
	if err != nil {
		return err
	}
	defer rt.Shutdown()
	c, err := mpi.Init(ctx, rt, mpi.Options{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Shutdown()) }()
	np := c.Size()
	// Contiguous runs of blocks: only the blocks at the ends of a run
	// exchange edges with another rank.
	owner := func(b int) int { return b * np / nblocks }
	bx, err := field(rt, c, 0, owner, func(i int) float32 { return float32(i % 100) })
	if err != nil {
		return err
	}
	by, err := field(rt, c, 3*nblocks, owner, func(int) float32 { return 0 })
	if err != nil {
		return err
	}
	var dot float64
	hdot, err := core.RegisterVariable(rt, &dot)
	if err != nil {
		return err
	}
	if err := c.Register(hdot, 6*nblocks, 0); err != nil {
		return err
	}
	if err := hdot.SetReductionMethods(
		&core.Codelet{Name: "add", Kernels: map[core.Arch]string{core.CPU: blasarg.AddF64}, Modes: []core.Mode{core.RW, core.R}},
		&core.Codelet{Name: "zero", Kernels: map[core.Arch]string{core.CPU: blasarg.Zero}, Modes: []core.Mode{core.W}},
	); err != nil {
		return err
	}

	stencil := &core.Codelet{Name: "smooth", Kernels: map[core.Arch]string{core.CPU: "smooth"}, Modes: []core.Mode{core.R, core.R, core.R, core.W, core.W, core.W}}
	axpy := &core.Codelet{Name: "axpy", Kernels: map[core.Arch]string{core.CPU: blasarg.AxpyF32}, Modes: []core.Mode{core.R, core.RW}}
	dotCl := &core.Codelet{Name: "dot", Kernels: map[core.Arch]string{core.CPU: "dot_into"}, Modes: []core.Mode{core.R, core.R, core.Redux}}
	for range sweeps {
		for b := range nblocks {
			left, right := bx[(b+nblocks-1)%nblocks], bx[(b+1)%nblocks]
			// Runs where by[b] lives: the neighbours' edges come from
			// their owners.
			if _, err := c.Insert(stencil, core.Data(core.R, left.last), core.Data(core.R, bx[b].data), core.Data(core.R, right.first),
				core.Data(core.W, by[b].data), core.Data(core.W, by[b].first), core.Data(core.W, by[b].last)); err != nil {
				return err
			}
		}
		bx, by = by, bx
	}
	for b := range nblocks {
		if _, err := c.Insert(axpy, core.Data(core.R, bx[b].data), core.Data(core.RW, by[b].data), core.ClArgs(blasarg.AxpyArg{Alpha: 2}.Encode())); err != nil {
			return err
		}
		// Runs where the block lives, into that rank's contribution.
		if _, err := c.Insert(dotCl, core.Data(core.R, bx[b].data), core.Data(core.R, by[b].data), core.Data(core.Redux, hdot)); err != nil {
			return err
		}
	}
	// The contributions to rank 0, summed there.
	if err := c.Redux(hdot); err != nil {
		return err
	}
	if err := c.WaitForAll(); err != nil {
		return err
	}
	for _, bl := range [][]block{bx, by} {
		for _, b := range bl {
			for _, h := range []*core.Handle{b.data, b.first, b.last} {
				if err := c.Unregister(h); err != nil {
					return err
				}
			}
		}
	}
	// On rank 0, dot's memory then holds the sum.
	if err := c.Unregister(hdot); err != nil {
		return err
	}
	if c.Rank() == 0 {
		fmt.Printf("x·y = %.10g (%d ranks)\n", dot, np)
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		log.SetFlags(0)
		log.Printf("stencil-mpi: %v", err)
		os.Exit(1)
	}
}
