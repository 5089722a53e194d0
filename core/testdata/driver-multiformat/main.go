// Command driver-multiformat is a CPU driver for the core's multiformat
// tests: the standard kernels plus kernels on arrays of points {x, y
// float32} (the CPU layout) and the conversion back from the device layout,
// a struct of arrays of float64 (x[n] then y[n]).
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

type point struct{ X, Y float32 }

// points views buffer i as points, checking its layout.
func points(ctx *kernel.Context, i int) ([]point, error) {
	if i >= len(ctx.Buffers) {
		return nil, fmt.Errorf("%d buffers, want buffer %d", len(ctx.Buffers), i)
	}
	b := &ctx.Buffers[i]
	if b.Interface != kernel.Vector || b.ElemSize != 8 {
		return nil, fmt.Errorf("buffer %d is a %s of %d-byte elements, want the CPU layout (a vector of 8-byte points)", i, b.Interface, b.ElemSize)
	}
	return unsafe.Slice((*point)(unsafe.Pointer(&b.Bytes[0])), b.NX), nil
}

func main() {
	cpudriver.Serve(cpudriver.WithKernels(kernels.Library()...), cpudriver.WithKernels(
		// mf_scale multiplies every point by the float32 in its argument.
		kernel.Kernel{Name: "mf_scale", Func: func(ctx *kernel.Context) error {
			p, err := points(ctx, 0)
			if err != nil {
				return err
			}
			a := math.Float32frombits(binary.LittleEndian.Uint32(ctx.Arg))
			for i := range p {
				p[i].X *= a
				p[i].Y *= a
			}
			return nil
		}},
		// mf_add_one adds (1, 2) to every point (a REDUX contribution).
		kernel.Kernel{Name: "mf_add_one", Func: func(ctx *kernel.Context) error {
			p, err := points(ctx, 0)
			if err != nil {
				return err
			}
			for i := range p {
				p[i].X++
				p[i].Y += 2
			}
			return nil
		}},
		// mf_add adds its second buffer's points to its first's.
		kernel.Kernel{Name: "mf_add", Func: func(ctx *kernel.Context) error {
			dst, err := points(ctx, 0)
			if err != nil {
				return err
			}
			src, err := points(ctx, 1)
			if err != nil {
				return err
			}
			for i := range dst {
				dst[i].X += src[i].X
				dst[i].Y += src[i].Y
			}
			return nil
		}},
		// mf_exit kills the driver, as a crashing conversion would.
		kernel.Kernel{Name: "mf_exit", Func: func(*kernel.Context) error {
			os.Exit(7)
			return nil
		}},
		// mf_soa_to_aos converts the device layout (buffer 0) into the CPU
		// layout (buffer 1).
		kernel.Kernel{Name: "mf_soa_to_aos", Func: func(ctx *kernel.Context) error {
			if len(ctx.Buffers) != 2 {
				return fmt.Errorf("mf_soa_to_aos: %d buffers, want 2", len(ctx.Buffers))
			}
			s := &ctx.Buffers[0]
			if s.Interface != kernel.Vector || s.ElemSize != 16 || s.Mode != kernel.R {
				return fmt.Errorf("mf_soa_to_aos: buffer 0 is a %s of %d-byte elements in mode %v, want the device layout (16 bytes an object) in R", s.Interface, s.ElemSize, s.Mode)
			}
			dst, err := points(ctx, 1)
			if err != nil {
				return err
			}
			if uint64(len(dst)) != s.NX {
				return fmt.Errorf("mf_soa_to_aos: %d objects into %d", s.NX, len(dst))
			}
			soa := unsafe.Slice((*float64)(unsafe.Pointer(&s.Bytes[0])), 2*s.NX)
			n := len(dst)
			for i := range dst {
				dst[i] = point{float32(soa[i]), float32(soa[n+i])}
			}
			return nil
		}},
	))
}
