package kernels

import (
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Zero is the "zero" kernel: it clears the elements of its one buffer, and
// only them (the gaps of a strided matrix or block belong to other data).
func Zero(ctx *kernel.Context) error {
	const name = "zero"
	if err := count(name, ctx, 1); err != nil {
		return err
	}
	b := &ctx.Buffers[0]
	if b.Mode&kernel.W == 0 {
		return fmt.Errorf("%s: buffer 0 is accessed %v but the kernel writes it", name, b.Mode)
	}
	if need := b.Len(); uint64(len(b.Bytes)) < need {
		return fmt.Errorf("%s: buffer 0 has %d bytes, its layout needs %d", name, len(b.Bytes), need)
	}
	es := uint64(b.ElemSize)
	switch b.Interface {
	case kernel.Variable, kernel.Vector:
		clear(b.Bytes[:b.Len()])
	case kernel.Matrix:
		for j := uint64(0); j < b.NY; j++ {
			clear(b.Bytes[j*b.LD*es : (j*b.LD+b.NX)*es])
		}
	case kernel.Block:
		for k := uint64(0); k < b.NZ; k++ {
			for j := uint64(0); j < b.NY; j++ {
				off := (k*b.LDZ + j*b.LD) * es
				clear(b.Bytes[off : off+b.NX*es])
			}
		}
	default:
		return fmt.Errorf("%s: buffer 0 is a %v; want a variable, vector, matrix or block", name, b.Interface)
	}
	return nil
}

// addKernel is dst += src over two variables, vectors or matrices of the
// same shape.
func addKernel[T float](name string) kernel.Func {
	return func(ctx *kernel.Context) error {
		if err := count(name, ctx, 2); err != nil {
			return err
		}
		iface := ctx.Buffers[0].Interface
		switch iface {
		case kernel.Variable, kernel.Vector, kernel.Matrix:
		default:
			return fmt.Errorf("%s: buffer 0 (dst) is a %v; want a variable, vector or matrix", name, iface)
		}
		dst, err := buffer[T](name, ctx, 0, "dst", iface, true)
		if err != nil {
			return err
		}
		src, err := buffer[T](name, ctx, 1, "src", iface, false)
		if err != nil {
			return err
		}
		rows, cols := dst.NX, uint64(1)
		dld, sld := dst.NX, src.NX
		if iface == kernel.Matrix {
			cols, dld, sld = dst.NY, dst.LD, src.LD
		}
		if src.NX != dst.NX || (iface == kernel.Matrix && src.NY != dst.NY) {
			return fmt.Errorf("%s: dst is %dx%d but src is %dx%d", name, dst.NX, max(dst.NY, 1), src.NX, max(src.NY, 1))
		}
		if iface == kernel.Variable {
			rows = 1
		}
		if rows == 0 || cols == 0 {
			return nil
		}
		d := elems[T](dst, dst.Len()/uint64(dst.ElemSize))
		s := elems[T](src, src.Len()/uint64(src.ElemSize))
		for j := uint64(0); j < cols; j++ {
			dc, sc := d[j*dld:j*dld+rows], s[j*sld:j*sld+rows]
			for i := range dc {
				dc[i] += sc[i]
			}
		}
		return nil
	}
}
