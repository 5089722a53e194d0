// Package filter is the arithmetic of the built-in data filters: how a
// vector, matrix or block layout is cut into child layouts, each a view of
// the parent's memory at a byte offset. It knows layouts only; the core
// (core/data_partition.go) wraps each split in a core.Filter and turns its
// errors into core.ErrInvalidData. StarPU's rules are kept: n elements in
// p parts give the first n%p parts one more element, and a shadow of s
// elements makes each part overlap its neighbours by s on both sides.
package filter

import (
	"errors"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// ErrBadSplit is what every split refuses with: a layout of another
// interface, a part count or shadow that does not fit, a list too long.
var ErrBadSplit = errors.New("filter does not fit")

// View is one child of a split: its layout and the byte offset of its
// first element in the parent's RAM replicate.
type View struct {
	Layout kernel.Layout
	Offset uint64
}

// Split cuts a parent layout into child views.
type Split func(l kernel.Layout) ([]View, error)

// Chunk is StarPU's rule for n elements in nparts parts: part i starts at
// start and holds size elements, the first n%nparts parts one more.
func Chunk(n uint64, nparts, i int) (start, size uint64) {
	q, r := n/uint64(nparts), n%uint64(nparts)
	ui := uint64(i)
	start = ui*q + min(ui, r)
	size = q
	if ui < r {
		size++
	}
	return start, size
}

// SplitDim cuts one dimension of n elements (shadow of them on each side
// belong to the border) into nparts, each extended by shadow elements on
// both sides: the returned starts and sizes are in the parent's coordinates.
// what names the filter in errors.
func SplitDim(what string, n uint64, nparts, shadow int) (starts, sizes []uint64, err error) {
	if nparts <= 0 {
		return nil, nil, fmt.Errorf("%w: %s: %d parts", ErrBadSplit, what, nparts)
	}
	if shadow < 0 || 2*uint64(shadow) >= n {
		return nil, nil, fmt.Errorf("%w: %s: shadow %d does not fit in %d elements", ErrBadSplit, what, shadow, n)
	}
	inner := n - 2*uint64(shadow)
	if uint64(nparts) > inner {
		return nil, nil, fmt.Errorf("%w: %s: %d parts of %d elements", ErrBadSplit, what, nparts, inner)
	}
	starts, sizes = make([]uint64, nparts), make([]uint64, nparts)
	for i := range starts {
		s, z := Chunk(inner, nparts, i)
		starts[i], sizes[i] = s, z+2*uint64(shadow)
	}
	return starts, sizes, nil
}

func wantIface(l kernel.Layout, id kernel.InterfaceID, filter string) error {
	if l.Interface != id {
		return fmt.Errorf("%w: filter %s applies to a %s, not a %s", ErrBadSplit, filter, id, l.Interface)
	}
	return nil
}

// AlongX cuts a layout of interface id (a vector or a matrix) along x, its
// contiguous dimension, into nparts with the given shadow; filter names the
// caller's filter in errors.
func AlongX(filter string, id kernel.InterfaceID, nparts, shadow int) Split {
	return func(l kernel.Layout) ([]View, error) {
		if err := wantIface(l, id, filter); err != nil {
			return nil, err
		}
		starts, sizes, err := SplitDim(filter, l.NX, nparts, shadow)
		if err != nil {
			return nil, err
		}
		out := make([]View, nparts)
		for i := range out {
			c := l
			c.NX = sizes[i]
			out[i] = View{c, starts[i] * uint64(l.ElemSize)}
		}
		return out, nil
	}
}

// VectorList cuts a vector into consecutive parts of the given lengths;
// they need not cover the whole vector.
func VectorList(lengths []int) Split {
	return func(l kernel.Layout) ([]View, error) {
		if err := wantIface(l, kernel.Vector, "VectorList"); err != nil {
			return nil, err
		}
		var off uint64
		out := make([]View, len(lengths))
		for i, n := range lengths {
			if n <= 0 || off+uint64(n) > l.NX {
				return nil, fmt.Errorf("%w: VectorList: part %d of %d elements does not fit in %d", ErrBadSplit, i, n, l.NX)
			}
			c := l
			c.NX = uint64(n)
			out[i] = View{c, off * uint64(l.ElemSize)}
			off += uint64(n)
		}
		return out, nil
	}
}

// MatrixVertical cuts a matrix along y into nparts matrices of nx by about
// ny/nparts.
func MatrixVertical(nparts, shadow int) Split {
	return func(l kernel.Layout) ([]View, error) {
		if err := wantIface(l, kernel.Matrix, "MatrixVerticalBlocks"); err != nil {
			return nil, err
		}
		starts, sizes, err := SplitDim("MatrixVerticalBlocks", l.NY, nparts, shadow)
		if err != nil {
			return nil, err
		}
		out := make([]View, nparts)
		for i := range out {
			c := l
			c.NY = sizes[i]
			out[i] = View{c, starts[i] * l.LD * uint64(l.ElemSize)}
		}
		return out, nil
	}
}

// MatrixTiles cuts a matrix into px by py tiles: tile (i, j), rows block i
// along x and column block j along y, is child i + j*px.
func MatrixTiles(px, py int) Split {
	return func(l kernel.Layout) ([]View, error) {
		if err := wantIface(l, kernel.Matrix, "MatrixTiles"); err != nil {
			return nil, err
		}
		xs, xn, err := SplitDim("MatrixTiles", l.NX, px, 0)
		if err != nil {
			return nil, err
		}
		ys, yn, err := SplitDim("MatrixTiles", l.NY, py, 0)
		if err != nil {
			return nil, err
		}
		out := make([]View, 0, px*py)
		for j := 0; j < py; j++ {
			for i := 0; i < px; i++ {
				c := l
				c.NX, c.NY = xn[i], yn[j]
				out = append(out, View{c, (xs[i] + ys[j]*l.LD) * uint64(l.ElemSize)})
			}
		}
		return out, nil
	}
}

// BlockDim cuts a block along dimension dim (0 x, 1 y, 2 z) into nparts
// with the given shadow; name names the caller's filter in errors.
func BlockDim(name string, dim, nparts, shadow int) Split {
	return func(l kernel.Layout) ([]View, error) {
		if err := wantIface(l, kernel.Block, name); err != nil {
			return nil, err
		}
		n, stride := l.NX, uint64(1)
		switch dim {
		case 1:
			n, stride = l.NY, l.LD
		case 2:
			n, stride = l.NZ, l.LDZ
		}
		starts, sizes, err := SplitDim(name, n, nparts, shadow)
		if err != nil {
			return nil, err
		}
		out := make([]View, nparts)
		for i := range out {
			c := l
			switch dim {
			case 0:
				c.NX = sizes[i]
			case 1:
				c.NY = sizes[i]
			case 2:
				c.NZ = sizes[i]
			}
			out[i] = View{c, starts[i] * stride * uint64(l.ElemSize)}
		}
		return out, nil
	}
}
