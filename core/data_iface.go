package core

// Interface plugins; design note: docs/design/interfaces.md.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// ifaceInst is a data interface plugin the runtime started, on the first
// registration that needed it.
type ifaceInst struct {
	name string
	id   kernel.InterfaceID
	// nameHash stands for the interface in performance-model footprints:
	// id is numbered per run, the name is not.
	nameHash uint32
	impl     iface.Interface
	proc     *loader.Plugin
}

// ifaceData is what a handle of a plugin interface keeps: the interface,
// the datum's metadata and how its parts lie in a region.
type ifaceData struct {
	inst    *ifaceInst
	meta    []byte
	desc    *iface.Description
	offsets []uint64
	// gather, for a child of a plugin filter, are the ranges that carry
	// its data back into its parent at Unpartition.
	gather []iface.PartRange
	// noDevice says why the datum cannot have a copy on a device node
	// (its copy plan does not move all its data); empty when it can.
	noDevice string
	// parts is the Parts message a device worker gets for a buffer that
	// holds the datum: each part's place in the region.
	parts []wire.Part
}

// newIfaceData is what a handle of interface in keeps for the datum of
// metadata meta and description desc whose copy plan is plan (ranges of
// its parts): the plan is checked against the parts, turned into ranges
// of the region, and measured against the datum's Size.
func newIfaceData(in *ifaceInst, meta []byte, desc *iface.Description, plan []iface.Range) (*ifaceData, []wire.CopyRange, error) {
	offsets, _ := iface.PartOffsets(desc.Buffers)
	d := &ifaceData{inst: in, meta: meta, desc: desc, offsets: offsets, parts: make([]wire.Part, len(offsets))}
	for i, off := range offsets {
		d.parts[i] = wire.Part{Offset: off, Size: desc.Buffers[i]}
	}
	// Not nil even when empty: copyPlan would take nil for a datum with
	// no plan yet and copy the whole region.
	ranges := make([]wire.CopyRange, 0, len(plan))
	for _, r := range plan {
		if r.Buffer < 0 || r.Buffer >= len(offsets) || r.Offset > desc.Buffers[r.Buffer] || r.Len > desc.Buffers[r.Buffer]-r.Offset {
			return nil, nil, fmt.Errorf("iface-%s: copy plan range %+v lies outside the datum's parts", in.name, r)
		}
		off := offsets[r.Buffer] + r.Offset
		ranges = append(ranges, wire.CopyRange{SrcOffset: off, DstOffset: off, Len: r.Len})
	}
	if moved := coveredBytes(ranges); moved < desc.Size {
		if len(ranges) == 0 {
			d.noDevice = fmt.Sprintf("interface %q gives no copy plan for its %d bytes of data", in.name, desc.Size)
		} else {
			d.noDevice = fmt.Sprintf("the copy plan of interface %q moves %d of its %d bytes of data", in.name, moved, desc.Size)
		}
	}
	return d, ranges, nil
}

// coveredBytes is the number of region bytes the ranges cover, each once.
func coveredBytes(rs []wire.CopyRange) uint64 {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b wire.CopyRange) int { return cmp.Compare(a.SrcOffset, b.SrcOffset) })
	var n, end uint64
	for _, r := range rs {
		start := max(r.SrcOffset, end)
		if e := r.SrcOffset + r.Len; e > start {
			n += e - start
			end = e
		}
	}
	return n
}

// deviceErr says why h cannot be brought to memory node node, or nil: a
// datum of a plugin interface whose copy plan does not move all of it
// stays in RAM, rather than leaving a device copy partly undefined.
func (h *Handle) deviceErr(node int) error {
	if node <= 0 || h.iface == nil || h.iface.noDevice == "" {
		return nil
	}
	return fmt.Errorf("%w: %s cannot be copied to memory node %d (%s): %s", ErrInvalidData, h, node, h.rt.nodeName(node), h.iface.noDevice)
}

// checkDeviceData refuses, at submit, a task that may run on a worker
// computing on a device node with a handle that cannot be copied there
// (deviceErr): it would fail there after it was scheduled, or, held to
// RAM in silence, not run where its codelet says it may.
func (rt *Runtime) checkDeviceData(t *Task, j *job, name string) error {
	if !rt.multiNode {
		return nil
	}
	for i, h := range t.Handles {
		if h.iface == nil || h.iface.noDevice == "" || j.modes[i]&^Locality == Scratch {
			continue // a SCRATCH buffer is never copied
		}
		for _, w := range rt.workers {
			if w.node == 0 || j.archMask&driver.ArchBit(w.drv.fp.Arch) == 0 || j.implMaskOf(w.driverIdx) == 0 || (j.pinned >= 0 && int(j.pinned) != w.id) {
				continue
			}
			return fmt.Errorf("%w: task %q: buffer %d: codelet %q may run on worker %d, which computes on %s, and %s cannot be copied there: %s; keep the task to RAM workers (Task.Where)",
				ErrNoWorker, name, i, t.Codelet.Name, w.id, rt.nodeName(w.node), h, h.iface.noDevice)
		}
	}
	return nil
}

// ifaceTimeout bounds each control-plane call to an interface plugin.
const ifaceTimeout = 20 * time.Second

// ifaceTable holds the data interface plugins started so far (on first
// use); mu guards list, whose index gives each its interface ID.
type ifaceTable struct {
	mu   sync.Mutex
	list []*ifaceInst
}

// ifaceNamed returns the running interface plugin called name, starting it
// from the plugin directory on first use.
func (rt *Runtime) ifaceNamed(name string) (*ifaceInst, error) {
	rt.ifaces.mu.Lock()
	defer rt.ifaces.mu.Unlock()
	for _, in := range rt.ifaces.list {
		if in.name == name {
			if in.proc != nil && in.proc.Exited() {
				return nil, fmt.Errorf("%w: data interface plugin iface-%s (pid %d) exited", ErrPluginCrashed, name, in.proc.Pid())
			}
			return in, nil
		}
	}
	cands, where, err := findPlugins(rt.cfg)
	if err != nil {
		return nil, err
	}
	c, ok := cands["iface-"+name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown data interface %q: no plugin iface-%s %s (available: %v)", ErrInvalidData, name, name, where, available(cands, base.KindInterface))
	}
	ctx, cancel := context.WithTimeout(context.Background(), ifaceTimeout)
	defer cancel()
	p, err := rt.launch(ctx, c)
	if err != nil {
		return nil, err
	}
	impl, err := p.Interface()
	if err != nil {
		p.Kill()
		return nil, err
	}
	if int(kernel.FirstPluginInterface)+len(rt.ifaces.list) > 255 {
		p.Kill()
		return nil, fmt.Errorf("too many data interface plugins")
	}
	in := &ifaceInst{name: name, id: kernel.FirstPluginInterface + kernel.InterfaceID(len(rt.ifaces.list)), nameHash: fnv32(name), impl: impl, proc: p}
	rt.ifaces.list = append(rt.ifaces.list, in)
	return in, nil
}

// ifaceErr names a crashed interface plugin as such.
func (in *ifaceInst) err(op string, err error) error {
	if errors.Is(err, base.ErrPluginExited) || (in.proc != nil && in.proc.Exited()) {
		return fmt.Errorf("%w: data interface plugin iface-%s: %s: %w", ErrPluginCrashed, in.name, op, err)
	}
	return fmt.Errorf("iface-%s: %s: %w", in.name, op, err)
}

// dataErr is the error of a call the plugin refused, which blames the
// data, unless the plugin's reply itself was invalid (base.ErrBadReply).
func (in *ifaceInst) dataErr(what string, err error) error {
	if errors.Is(err, base.ErrBadReply) {
		return fmt.Errorf("iface-%s: %s: %w", in.name, what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidData, what, err)
}

// RegisterInterface registers a datum of the data interface plugin called
// name (bin/plugins/iface-<name>): meta is the interface's encoding of its
// shape, parts the application's memory for each of its parts (for CSR:
// nzval, colind, rowptr). The interface validates the datum; the runtime
// copies the parts into one region of the shared-memory arena, keeps it
// coherent across memory nodes like any handle, and copies it back to
// parts at Acquire and Unregister.
func (rt *Runtime) RegisterInterface(name string, meta []byte, parts [][]byte) (*Handle, error) {
	if err := rt.usable(); err != nil {
		return nil, err
	}
	in, err := rt.ifaceNamed(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ifaceTimeout)
	defer cancel()
	desc, err := in.impl.Describe(ctx, meta, nil)
	if err != nil {
		if e := in.err("describe", err); errors.Is(e, ErrPluginCrashed) {
			return nil, e
		}
		return nil, in.dataErr(name, err)
	}
	if err := desc.Check(); err != nil {
		return nil, in.err("describe", err)
	}
	if len(parts) != len(desc.Buffers) {
		return nil, fmt.Errorf("%w: %s: %d parts given, the interface needs %d", ErrInvalidData, name, len(parts), len(desc.Buffers))
	}
	for i, p := range parts {
		if uint64(len(p)) != desc.Buffers[i] {
			return nil, fmt.Errorf("%w: %s: part %d has %d bytes, the interface needs %d", ErrInvalidData, name, i, len(p), desc.Buffers[i])
		}
	}
	ranges, err := in.impl.CopyPlan(ctx, meta)
	if err != nil {
		return nil, in.err("copy plan", err)
	}
	d, plan, err := newIfaceData(in, append([]byte(nil), meta...), desc, ranges)
	if err != nil {
		return nil, err
	}
	offsets, total := d.offsets, desc.Layout.LD
	l := desc.Layout
	l.Interface = in.id
	h := rt.newHandle(l, total)
	h.iface, h.plan = d, plan
	if total > 0 {
		s, err := rt.arena.Alloc(total)
		if err != nil {
			return nil, fmt.Errorf("register %s: %w", name, err)
		}
		h.span, h.owned = s, true
		for i, p := range parts {
			if len(p) > 0 {
				h.home = append(h.home, homePart{offsets[i], p})
			}
		}
		h.copyHomeIn()
		// The contents are the interface's to check (CSR: rowptr), now
		// that they are in the arena.
		spans := make([]base.Span, len(parts))
		for i := range parts {
			spans[i] = base.Span{Offset: s.Offset + offsets[i], Size: desc.Buffers[i]}
		}
		if _, err := in.impl.Describe(ctx, meta, spans); err != nil {
			rt.arena.Free(s)
			if e := in.err("describe", err); errors.Is(e, ErrPluginCrashed) {
				return nil, e
			}
			return nil, in.dataErr(name, err)
		}
	}
	rt.track(h)
	return h, nil
}

// Interface names a handle's data interface: "vector", "csr",
// "multiformat", ...
func (h *Handle) Interface() string {
	switch {
	case h.iface != nil:
		return h.iface.inst.name
	case h.mf != nil:
		return "multiformat"
	}
	return h.layout.Interface.String()
}

// Display renders the handle's shape for people, through its interface.
func (h *Handle) Display() (string, error) {
	if h.iface == nil {
		l := h.layout
		switch l.Interface {
		case kernel.Variable:
			return fmt.Sprintf("variable(%d bytes)", l.ElemSize), nil
		case kernel.Vector:
			return fmt.Sprintf("vector(%d x %d bytes)", l.NX, l.ElemSize), nil
		case kernel.Matrix:
			return fmt.Sprintf("matrix(%d x %d, ld %d, %d-byte elements)", l.NX, l.NY, l.LD, l.ElemSize), nil
		case kernel.Block:
			return fmt.Sprintf("block(%d x %d x %d, ld %d, ldz %d, %d-byte elements)", l.NX, l.NY, l.NZ, l.LD, l.LDZ, l.ElemSize), nil
		}
		return l.Interface.String(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ifaceTimeout)
	defer cancel()
	s, err := h.iface.inst.impl.Display(ctx, h.iface.meta)
	if err != nil {
		return "", h.iface.inst.err("display", err)
	}
	return s, nil
}
