package core

import (
	"bytes"
	"context"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// PluginPack packs h, held in RAM for reading, with its interface
// plugin's own Pack: the tests compare it with Handle.Pack, which packs by
// the copy plan without calling the plugin.
func (h *Handle) PluginPack() ([]byte, error) {
	d := h.iface
	if d == nil {
		return nil, fmt.Errorf("%s is not of a data interface plugin", h)
	}
	a, err := h.hold("plugin pack", 0, R)
	if err != nil {
		return nil, err
	}
	defer h.unhold(a)
	dst, err := h.rt.arena.Alloc(max(h.size, 1))
	if err != nil {
		return nil, err
	}
	defer h.rt.arena.Free(dst)
	spans := make([]base.Span, len(d.offsets))
	for i := range spans {
		spans[i] = base.Span{Offset: h.span.Offset + d.offsets[i], Size: d.desc.Buffers[i]}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ifaceTimeout)
	defer cancel()
	n, err := d.inst.impl.Pack(ctx, d.meta, spans, dst)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(h.rt.arena.Bytes(dst)[:n]), nil
}

// PluginSize is the Size h's interface plugin described.
func (h *Handle) PluginSize() uint64 { return h.iface.desc.Size }
