package core

// Interface plugins; design note: docs/design/interfaces.md.

import (
	"context"
	"errors"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
)

// PluginFilter is the data filter called name of a handle's data interface
// plugin (CSR's "rows"), cutting it into nparts children. Unlike the
// built-in filters' views, each child gets its own region, filled from the
// parent's by the ranges the plugin gives, and copied back at Unpartition:
// a plugin datum's kernel layout encodes its parts packed one after another,
// which a piece of the parent's region is not (docs/design/interfaces.md).
func PluginFilter(name string, nparts int) Filter {
	return Filter{name: name, nparts: nparts, plugin: true}
}

// partitionPlugin is Partition with a PluginFilter.
func (h *Handle) partitionPlugin(f Filter) (children []*Handle, err error) {
	if h.iface == nil {
		return nil, fmt.Errorf("%w: partition %s: filter %s is a data interface plugin's, %s is built in", ErrInvalidData, h, f.name, h)
	}
	if err := h.checkUsable(); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if f.nparts <= 0 {
		return nil, fmt.Errorf("%w: partition %s: %d parts", ErrInvalidData, h, f.nparts)
	}
	// Hold h like a writer while it is partitioned; the plugin reads its
	// parts in RAM.
	if err := h.Acquire(RW); err != nil {
		return nil, fmt.Errorf("partition %s: %w", h, err)
	}
	defer func() {
		if err != nil {
			for _, c := range children {
				if c != nil {
					h.rt.forget(c)
				}
			}
			h.Release()
		}
	}()
	h.dropReplicates()
	d := h.iface
	in := d.inst
	spans := make([]base.Span, len(d.offsets))
	for i := range spans {
		spans[i] = base.Span{Offset: h.span.Offset + d.offsets[i], Size: d.desc.Buffers[i]}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ifaceTimeout)
	defer cancel()
	kids, err := in.impl.Partition(ctx, f.name, d.meta, spans, f.nparts)
	if err != nil {
		if e := in.err("partition", err); errors.Is(e, ErrPluginCrashed) {
			return nil, e
		}
		return nil, in.dataErr("partition "+h.String(), err)
	}
	if err := iface.CheckChildren(d.desc.Buffers, kids); err != nil {
		return nil, in.err("partition", err)
	}
	parent := h.rt.arena.Bytes(h.span)
	children = make([]*Handle, len(kids))
	for i := range kids {
		k := &kids[i]
		plan, err := in.impl.CopyPlan(ctx, k.Meta)
		if err != nil {
			return children, in.err("copy plan", err)
		}
		cd, cplan, err := newIfaceData(in, k.Meta, &k.Desc, plan)
		if err != nil {
			return children, fmt.Errorf("child %d: %w", i, err)
		}
		cd.gather = k.Ranges
		offs, total := cd.offsets, k.Desc.Layout.LD
		l := k.Desc.Layout
		l.Interface = in.id
		c := h.rt.newHandle(l, total)
		c.parent = h
		c.inheritConsistency(h)
		c.iface, c.plan = cd, cplan
		if total > 0 {
			s, err := h.rt.arena.Alloc(total)
			if err != nil {
				return children, fmt.Errorf("partition %s: child %d: %w", h, i, err)
			}
			c.span, c.owned = s, true
			b := h.rt.arena.Bytes(s)
			for _, r := range k.Ranges {
				copy(b[offs[r.ChildPart]+r.ChildOffset:][:r.Len], parent[d.offsets[r.Part]+r.Offset:])
			}
		}
		children[i] = c
		h.rt.track(c)
	}
	h.mu.Lock()
	h.children = children
	h.mu.Unlock()
	h.partitioned.Store(true)
	return children, nil
}

// gatherPlugin copies child c of a plugin filter back into h's region,
// once c's data is in RAM.
func (h *Handle) gatherPlugin(c *Handle) error {
	if err := c.Acquire(R); err != nil {
		return fmt.Errorf("unpartition %s: child %s: %w", h, c, err)
	}
	parent, child := h.rt.arena.Bytes(h.span), h.rt.arena.Bytes(c.span)
	for _, r := range c.iface.gather {
		copy(parent[h.iface.offsets[r.Part]+r.Offset:][:r.Len], child[c.iface.offsets[r.ChildPart]+r.ChildOffset:])
	}
	return c.Release()
}
