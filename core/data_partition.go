package core

// Partitioning, plans; design note: docs/design/memory.md.

import (
	"fmt"

	"github.com/starpu-go/starpu/core/internal/filter"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Filter splits a handle's data into parts, as StarPU's data filters do.
// Built-in filters cut vectors, matrices and blocks into views of the
// parent's memory (their arithmetic is core/internal/filter);
// PluginFilter asks a data interface plugin.
type Filter struct {
	name   string
	nparts int
	plugin bool
	// cut computes the children's layouts and their byte offsets in the
	// parent's RAM replicate.
	cut filter.Split
}

func (f Filter) String() string { return fmt.Sprintf("%s into %d", f.name, f.nparts) }

// split cuts l with f, its refusals counting as ErrInvalidData.
func (f Filter) split(l kernel.Layout) ([]filter.View, error) {
	views, err := f.cut(l)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	return views, nil
}

// VectorBlocks cuts a vector into nparts contiguous blocks (StarPU's
// starpu_vector_filter_block). With shadow > 0, the vector's first and last
// shadow elements are a border, and each block also covers shadow elements
// of its neighbours on each side (starpu_vector_filter_block_shadow): such
// blocks overlap and should only be read.
func VectorBlocks(nparts, shadow int) Filter {
	return Filter{name: "vector blocks", nparts: nparts, cut: filter.AlongX("VectorBlocks", kernel.Vector, nparts, shadow)}
}

// VectorList cuts a vector into consecutive parts of the given lengths
// (starpu_vector_filter_list); they need not cover the whole vector.
func VectorList(lengths ...int) Filter {
	return Filter{name: "vector list", nparts: len(lengths), cut: filter.VectorList(lengths)}
}

// MatrixBlocks cuts a matrix along x, its contiguous dimension, into nparts
// matrices of about nx/nparts by ny (starpu_matrix_filter_block and its
// shadow variant).
func MatrixBlocks(nparts, shadow int) Filter {
	return Filter{name: "matrix blocks", nparts: nparts, cut: filter.AlongX("MatrixBlocks", kernel.Matrix, nparts, shadow)}
}

// MatrixVerticalBlocks cuts a matrix along y into nparts matrices of nx by
// about ny/nparts (starpu_matrix_filter_vertical_block and its shadow
// variant).
func MatrixVerticalBlocks(nparts, shadow int) Filter {
	return Filter{name: "matrix vertical blocks", nparts: nparts, cut: filter.MatrixVertical(nparts, shadow)}
}

// MatrixTiles cuts a matrix into px by py tiles: tile (i, j), rows block i
// along x and column block j along y, is child i + j*px.
func MatrixTiles(px, py int) Filter {
	return Filter{name: "matrix tiles", nparts: px * py, cut: filter.MatrixTiles(px, py)}
}

// BlockBlocks cuts a block along x, BlockVerticalBlocks along y and
// BlockDepthBlocks along z (starpu_block_filter_block, _vertical_block,
// _depth_block, with their shadow variants).
func BlockBlocks(nparts, shadow int) Filter {
	return Filter{name: "BlockBlocks", nparts: nparts, cut: filter.BlockDim("BlockBlocks", 0, nparts, shadow)}
}

// BlockVerticalBlocks cuts a block along y; see BlockBlocks.
func BlockVerticalBlocks(nparts, shadow int) Filter {
	return Filter{name: "BlockVerticalBlocks", nparts: nparts, cut: filter.BlockDim("BlockVerticalBlocks", 1, nparts, shadow)}
}

// BlockDepthBlocks cuts a block along z; see BlockBlocks.
func BlockDepthBlocks(nparts, shadow int) Filter {
	return Filter{name: "BlockDepthBlocks", nparts: nparts, cut: filter.BlockDim("BlockDepthBlocks", 2, nparts, shadow)}
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
	if f.cut == nil {
		return nil, fmt.Errorf("%w: partition %s: no filter", ErrInvalidData, h)
	}
	if err := h.checkUsable(); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if h.iface != nil {
		return nil, fmt.Errorf("%w: partition %s: filter %s is for built-in interfaces", ErrInvalidData, h, f.name)
	}
	if err := h.noFilter("partition"); err != nil {
		return nil, err
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
		c := h.rt.newHandle(v.Layout, v.Layout.Len())
		c.span = base.Span{Offset: h.span.Offset + v.Offset, Size: v.Layout.Len()}
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
