package core

import (
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Filter splits a handle's data into parts, as StarPU's data filters do.
// Built-in filters cut vectors, matrices and blocks into views of the
// parent's memory; PluginFilter asks a data interface plugin.
type Filter struct {
	name   string
	nparts int
	plugin bool
	// split computes the children's layouts and their byte offsets in the
	// parent's RAM replicate.
	split func(l kernel.Layout) ([]childView, error)
}

func (f Filter) String() string { return fmt.Sprintf("%s into %d", f.name, f.nparts) }

type childView struct {
	layout kernel.Layout
	offset uint64
}

// chunk is StarPU's rule for n elements in nparts parts: the first n%nparts
// parts get one more element.
func chunk(n uint64, nparts, i int) (start, size uint64) {
	q, r := n/uint64(nparts), n%uint64(nparts)
	ui := uint64(i)
	start = ui*q + min(ui, r)
	size = q
	if ui < r {
		size++
	}
	return start, size
}

// splitDim cuts one dimension of n elements (shadow of them on each side
// belong to the border) into nparts, each extended by shadow elements on
// both sides: the returned starts and sizes are in the parent's coordinates.
func splitDim(what string, n uint64, nparts, shadow int) ([]uint64, []uint64, error) {
	if nparts <= 0 {
		return nil, nil, fmt.Errorf("%w: %s: %d parts", ErrInvalidData, what, nparts)
	}
	if shadow < 0 || 2*uint64(shadow) >= n {
		return nil, nil, fmt.Errorf("%w: %s: shadow %d does not fit in %d elements", ErrInvalidData, what, shadow, n)
	}
	inner := n - 2*uint64(shadow)
	if uint64(nparts) > inner {
		return nil, nil, fmt.Errorf("%w: %s: %d parts of %d elements", ErrInvalidData, what, nparts, inner)
	}
	starts, sizes := make([]uint64, nparts), make([]uint64, nparts)
	for i := range starts {
		s, z := chunk(inner, nparts, i)
		starts[i], sizes[i] = s, z+2*uint64(shadow)
	}
	return starts, sizes, nil
}

func wantIface(l kernel.Layout, id kernel.InterfaceID, filter string) error {
	if l.Interface != id {
		return fmt.Errorf("%w: filter %s applies to a %s, not a %s", ErrInvalidData, filter, id, l.Interface)
	}
	return nil
}

// VectorBlocks cuts a vector into nparts contiguous blocks (StarPU's
// starpu_vector_filter_block). With shadow > 0, the vector's first and last
// shadow elements are a border, and each block also covers shadow elements
// of its neighbours on each side (starpu_vector_filter_block_shadow): such
// blocks overlap and should only be read.
func VectorBlocks(nparts, shadow int) Filter {
	return alongX("VectorBlocks", "vector blocks", kernel.Vector, nparts, shadow)
}

// alongX cuts a vector or a matrix along its contiguous dimension.
func alongX(filter, name string, id kernel.InterfaceID, nparts, shadow int) Filter {
	return Filter{name: name, nparts: nparts, split: func(l kernel.Layout) ([]childView, error) {
		if err := wantIface(l, id, filter); err != nil {
			return nil, err
		}
		starts, sizes, err := splitDim(filter, l.NX, nparts, shadow)
		if err != nil {
			return nil, err
		}
		out := make([]childView, nparts)
		for i := range out {
			c := l
			c.NX = sizes[i]
			out[i] = childView{c, starts[i] * uint64(l.ElemSize)}
		}
		return out, nil
	}}
}

// VectorList cuts a vector into consecutive parts of the given lengths
// (starpu_vector_filter_list); they need not cover the whole vector.
func VectorList(lengths ...int) Filter {
	return Filter{name: "vector list", nparts: len(lengths), split: func(l kernel.Layout) ([]childView, error) {
		if err := wantIface(l, kernel.Vector, "VectorList"); err != nil {
			return nil, err
		}
		var off uint64
		out := make([]childView, len(lengths))
		for i, n := range lengths {
			if n <= 0 || off+uint64(n) > l.NX {
				return nil, fmt.Errorf("%w: VectorList: part %d of %d elements does not fit in %d", ErrInvalidData, i, n, l.NX)
			}
			c := l
			c.NX = uint64(n)
			out[i] = childView{c, off * uint64(l.ElemSize)}
			off += uint64(n)
		}
		return out, nil
	}}
}

// MatrixBlocks cuts a matrix along x, its contiguous dimension, into nparts
// matrices of about nx/nparts by ny (starpu_matrix_filter_block and its
// shadow variant).
func MatrixBlocks(nparts, shadow int) Filter {
	return alongX("MatrixBlocks", "matrix blocks", kernel.Matrix, nparts, shadow)
}

// MatrixVerticalBlocks cuts a matrix along y into nparts matrices of nx by
// about ny/nparts (starpu_matrix_filter_vertical_block and its shadow
// variant).
func MatrixVerticalBlocks(nparts, shadow int) Filter {
	return Filter{name: "matrix vertical blocks", nparts: nparts, split: func(l kernel.Layout) ([]childView, error) {
		if err := wantIface(l, kernel.Matrix, "MatrixVerticalBlocks"); err != nil {
			return nil, err
		}
		starts, sizes, err := splitDim("MatrixVerticalBlocks", l.NY, nparts, shadow)
		if err != nil {
			return nil, err
		}
		out := make([]childView, nparts)
		for i := range out {
			c := l
			c.NY = sizes[i]
			out[i] = childView{c, starts[i] * l.LD * uint64(l.ElemSize)}
		}
		return out, nil
	}}
}

// MatrixTiles cuts a matrix into px by py tiles: tile (i, j), rows block i
// along x and column block j along y, is child i + j*px.
func MatrixTiles(px, py int) Filter {
	return Filter{name: "matrix tiles", nparts: px * py, split: func(l kernel.Layout) ([]childView, error) {
		if err := wantIface(l, kernel.Matrix, "MatrixTiles"); err != nil {
			return nil, err
		}
		xs, xn, err := splitDim("MatrixTiles", l.NX, px, 0)
		if err != nil {
			return nil, err
		}
		ys, yn, err := splitDim("MatrixTiles", l.NY, py, 0)
		if err != nil {
			return nil, err
		}
		out := make([]childView, 0, px*py)
		for j := 0; j < py; j++ {
			for i := 0; i < px; i++ {
				c := l
				c.NX, c.NY = xn[i], yn[j]
				out = append(out, childView{c, (xs[i] + ys[j]*l.LD) * uint64(l.ElemSize)})
			}
		}
		return out, nil
	}}
}

// BlockBlocks cuts a block along x, BlockVerticalBlocks along y and
// BlockDepthBlocks along z (starpu_block_filter_block, _vertical_block,
// _depth_block, with their shadow variants).
func BlockBlocks(nparts, shadow int) Filter { return blockFilter("BlockBlocks", 0, nparts, shadow) }

// BlockVerticalBlocks cuts a block along y; see BlockBlocks.
func BlockVerticalBlocks(nparts, shadow int) Filter {
	return blockFilter("BlockVerticalBlocks", 1, nparts, shadow)
}

// BlockDepthBlocks cuts a block along z; see BlockBlocks.
func BlockDepthBlocks(nparts, shadow int) Filter {
	return blockFilter("BlockDepthBlocks", 2, nparts, shadow)
}

func blockFilter(name string, dim, nparts, shadow int) Filter {
	return Filter{name: name, nparts: nparts, split: func(l kernel.Layout) ([]childView, error) {
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
		starts, sizes, err := splitDim(name, n, nparts, shadow)
		if err != nil {
			return nil, err
		}
		out := make([]childView, nparts)
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
			out[i] = childView{c, starts[i] * stride * uint64(l.ElemSize)}
		}
		return out, nil
	}}
}

// Partition splits h into children with f, like starpu_data_partition: it
// waits for the tasks submitted on h, brings h's data to RAM, and returns
// the children, handles in their own right. h itself cannot be used by
// tasks until Unpartition. Children of the built-in interfaces are views of
// h's memory.
func (h *Handle) Partition(f Filter) ([]*Handle, error) {
	if f.plugin {
		return h.partitionPlugin(f)
	}
	if f.split == nil {
		return nil, fmt.Errorf("%w: partition %s: no filter", ErrInvalidData, h)
	}
	if err := h.checkUsable(); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if h.iface != nil {
		return nil, fmt.Errorf("%w: partition %s: filter %s is for built-in interfaces", ErrInvalidData, h, f.name)
	}
	views, err := f.split(h.layout)
	if err != nil {
		return nil, fmt.Errorf("partition %s: %w", h, err)
	}
	if h.span.Size == 0 && h.layout.Len() > 0 {
		return nil, fmt.Errorf("%w: partition %s: no data registered", ErrInvalidData, h)
	}
	// Hold h like a writer while it is partitioned: the children start from
	// its current value, in RAM.
	if err := h.Acquire(RW); err != nil {
		return nil, fmt.Errorf("partition %s: %w", h, err)
	}
	h.dropReplicates()
	h.mu.Lock()
	h.homeValid = h.home == nil // the children write into h's RAM copy
	h.mu.Unlock()
	children := make([]*Handle, len(views))
	for i, v := range views {
		c := h.rt.newHandle(v.layout, v.layout.Len())
		c.span = base.Span{Offset: h.span.Offset + v.offset, Size: v.layout.Len()}
		c.parent = h
		c.home = nil
		c.inheritConsistency(h)
		children[i] = c
		h.rt.track(c)
	}
	h.mu.Lock()
	h.children = children
	h.mu.Unlock()
	h.partitioned.Store(true)
	return children, nil
}

// Unpartition gathers h's children back into h, like
// starpu_data_unpartition: it waits for the tasks on every child, brings the
// children's data to RAM, unregisters them and makes h usable again.
func (h *Handle) Unpartition() error {
	h.mu.Lock()
	children := h.children
	h.mu.Unlock()
	if !h.partitioned.Load() {
		return fmt.Errorf("%w: unpartition %s: not partitioned", ErrInvalidData, h)
	}
	for _, c := range children {
		if c.partitioned.Load() {
			if err := c.Unpartition(); err != nil {
				return err
			}
		}
		if h.iface != nil {
			if err := h.gatherPlugin(c); err != nil {
				return err
			}
		}
		if err := c.Unregister(); err != nil {
			return fmt.Errorf("unpartition %s: child %s: %w", h, c, err)
		}
	}
	h.mu.Lock()
	h.children = nil
	if h.home != nil {
		h.copyHomeOut()
	}
	h.homeValid = true
	h.mu.Unlock()
	h.partitioned.Store(false)
	return h.Release()
}

// Children returns the handles h is partitioned into by Partition, or nil;
// a plan's children are Plan.Children.
func (h *Handle) Children() []*Handle {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Handle(nil), h.children...)
}

// Parent returns the handle h was partitioned from (by Partition or a
// Plan), or nil.
func (h *Handle) Parent() *Handle { return h.parent }

// checkUsable says why tasks cannot write h, if they cannot.
func (h *Handle) checkUsable() error { return h.checkAccess(RW) }

// checkAccess says why tasks cannot access h in mode m, if they cannot:
// it is unregistered, partitioned, or its partition plans forbid it.
func (h *Handle) checkAccess(m Mode) error {
	if h.unregistered.Load() {
		return fmt.Errorf("%s: %w", h, ErrUnregistered)
	}
	if h.partitioned.Load() {
		return fmt.Errorf("%w: %s is partitioned: use its children until Unpartition", ErrInvalidData, h)
	}
	switch h.restrict.Load() {
	case restrictNone:
		return nil
	case restrictWrite:
		if m&(W|Redux) == 0 { // REDUX contributions end up written
			return nil
		}
	}
	return h.restrictErr(m)
}
