// Package ifacesdk turns a short description of a data format into a data
// interface plugin: a Spec says how metadata maps to parts and to the kernel
// layout, and the SDK supplies the rest of iface.Interface (copy plan,
// pack/unpack, compare, display, footprints, the parts' size checks) with
// defaults a format may override. A plugin's whole main is
//
//	func main() { ifacesdk.Serve(spec) }
package ifacesdk

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Shape is what a format's metadata decodes to.
type Shape struct {
	// Parts are the sizes in bytes of the datum's parts, in the order of
	// Spec.PartNames.
	Parts []uint64
	// Layout is what kernels learn about the datum (ElemSize, NX, NY, NZ,
	// LDZ as the format's accessor package defines them); the SDK sets LD
	// to the region's length and leaves Interface to the core.
	Layout kernel.Layout
	// Size is the number of bytes of data; zero means the sum of Parts.
	Size uint64
}

// Filter splits a datum into exactly nparts children: their metadata and
// the ranges carrying their data out of the parent's parts, which it may
// read (they hold the parent's data, one slice per part). The SDK fills each
// child's description from its metadata.
type Filter func(meta []byte, parts [][]byte, nparts int) ([]FilterChild, error)

// FilterChild is one child a Filter makes.
type FilterChild struct {
	Meta   []byte
	Ranges []iface.PartRange
}

// Spec is a data format. Name and Shape are required; every other func is
// optional and has the default its comment gives.
type Spec struct {
	// Name is the interface's name: the plugin binary is iface-<Name>.
	Name string
	// Version is reported in PluginInfo.
	Version string
	// PartNames name the parts in errors ("nzval", "colind", ...); parts
	// without a name are called "part <i>".
	PartNames []string
	// Shape decodes and validates metadata. Its error should name the first
	// bad field.
	Shape func(meta []byte) (Shape, error)
	// Validate checks a datum's contents at registration, after the SDK has
	// checked there is one part per Shape.Parts entry of the right size. Its
	// error should name the first bad entry. Default: any contents are
	// valid.
	Validate func(meta []byte, parts [][]byte) error
	// Footprint hashes the shape for performance models. Default: CRC-32 of
	// the layout's shape fields (ElemSize, NX, NY, NZ, LDZ).
	Footprint func(meta []byte) uint32
	// Compare reports whether two data have the same shape. Default: their
	// metadata are the same bytes.
	Compare func(a, b []byte) bool
	// Display renders the shape. Default: "<name>(<layout's shape fields>)".
	Display func(meta []byte) string
	// Filters are the format's data filters by name, for Partition.
	// Default: none.
	Filters map[string]Filter
}

// Serve is the whole main() of a plugin built from spec: it serves the
// interface on the core's arena (see iface.Serve).
func Serve(spec Spec) {
	iface.Serve(func(a *shm.Arena, _ hclog.Logger) (iface.Interface, error) {
		return New(spec, a)
	})
}

// New returns spec as an iface.Interface reading and writing arena a: what
// Serve serves, and what tests use in process.
func New(spec Spec, a *shm.Arena) (iface.Interface, error) {
	if spec.Name == "" || spec.Shape == nil {
		return nil, fmt.Errorf("ifacesdk: a spec needs a Name and a Shape (got name %q)", spec.Name)
	}
	if a == nil {
		return nil, fmt.Errorf("ifacesdk: interface %q: no arena", spec.Name)
	}
	return &impl{spec: spec, arena: a}, nil
}

type impl struct {
	spec  Spec
	arena *shm.Arena
}

// PluginInfo implements base.Plugin.
func (p *impl) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindInterface, Name: p.spec.Name, Version: p.spec.Version, APIVersions: []int{base.APIVersion}}, nil
}

// ConfigSchema implements base.Plugin: interfaces take no configuration.
func (p *impl) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }

// SetConfig implements base.Plugin.
func (p *impl) SetConfig(_ context.Context, cfg base.Config) error {
	for k := range cfg {
		return fmt.Errorf("interface %s takes no configuration (got %q)", p.spec.Name, k)
	}
	return nil
}

func (p *impl) partName(i int) string {
	if i < len(p.spec.PartNames) {
		return p.spec.PartNames[i]
	}
	return fmt.Sprintf("part %d", i)
}

// shape decodes meta and completes the layout.
func (p *impl) shape(meta []byte) (Shape, error) {
	s, err := p.spec.Shape(meta)
	if err != nil {
		return Shape{}, err
	}
	n, err := iface.RegionLen(s.Parts)
	if err != nil {
		return Shape{}, err
	}
	s.Layout.LD, s.Layout.Interface = n, 0
	if s.Size == 0 {
		for _, v := range s.Parts {
			s.Size += v
		}
	}
	return s, nil
}

// shapeKey is the layout's shape fields, what the default footprint hashes.
func shapeKey(l kernel.Layout) []uint64 {
	return []uint64{uint64(l.ElemSize), l.NX, l.NY, l.NZ, l.LDZ}
}

func (p *impl) describe(meta []byte) (*iface.Description, error) {
	s, err := p.shape(meta)
	if err != nil {
		return nil, err
	}
	d := &iface.Description{Name: p.spec.Name, Buffers: s.Parts, Size: s.Size, Layout: s.Layout}
	if p.spec.Footprint != nil {
		d.Footprint = p.spec.Footprint(meta)
	} else {
		d.Footprint = hash(shapeKey(s.Layout)...)
	}
	// What an allocation must hold is the parts' sizes.
	d.AllocFootprint = hash(s.Parts...)
	return d, nil
}

func hash(v ...uint64) uint32 {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return crc32.ChecksumIEEE(b)
}

// views checks that spans are one per part of the shape's sizes and returns
// their bytes.
func (p *impl) views(s Shape, spans []base.Span) ([][]byte, error) {
	if len(spans) != len(s.Parts) {
		return nil, fmt.Errorf("got %d parts, the metadata has %d (%s)", len(spans), len(s.Parts), p.names(len(s.Parts)))
	}
	out := make([][]byte, len(spans))
	for i, sp := range spans {
		if sp.Size != s.Parts[i] {
			return nil, fmt.Errorf("%s has %d bytes, the metadata says %d", p.partName(i), sp.Size, s.Parts[i])
		}
		b, err := p.arena.BytesChecked(sp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.partName(i), err)
		}
		out[i] = b
	}
	return out, nil
}

func (p *impl) names(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = p.partName(i)
	}
	return strings.Join(names, ", ")
}

// Describe implements iface.Interface.
func (p *impl) Describe(_ context.Context, meta []byte, parts []base.Span) (*iface.Description, error) {
	d, err := p.describe(meta)
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	if parts == nil {
		return d, nil
	}
	b, err := p.views(Shape{Parts: d.Buffers}, parts)
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	if p.spec.Validate != nil {
		if err := p.spec.Validate(meta, b); err != nil {
			return nil, fmt.Errorf("describe: %w", err)
		}
	}
	return d, nil
}

// CopyPlan implements iface.Interface: one range per non-empty part.
func (p *impl) CopyPlan(_ context.Context, meta []byte) ([]iface.Range, error) {
	s, err := p.shape(meta)
	if err != nil {
		return nil, fmt.Errorf("copy plan: %w", err)
	}
	var plan []iface.Range
	for i, n := range s.Parts {
		if n > 0 {
			plan = append(plan, iface.Range{Buffer: i, Len: n})
		}
	}
	return plan, nil
}

// Pack implements iface.Interface: the message is the parts concatenated.
func (p *impl) Pack(_ context.Context, meta []byte, parts []base.Span, dst base.Span) (uint64, error) {
	s, err := p.shape(meta)
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	src, err := p.views(s, parts)
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	total := sum(s.Parts)
	if dst.Size < total {
		return 0, fmt.Errorf("pack: destination of %d bytes, need %d", dst.Size, total)
	}
	out, err := p.arena.BytesChecked(base.Span{Offset: dst.Offset, Size: total})
	if err != nil {
		return 0, fmt.Errorf("pack: destination: %w", err)
	}
	off := 0
	for _, b := range src {
		off += copy(out[off:], b)
	}
	return total, nil
}

// Unpack implements iface.Interface.
func (p *impl) Unpack(_ context.Context, meta []byte, src base.Span, parts []base.Span) error {
	s, err := p.shape(meta)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	dst, err := p.views(s, parts)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if total := sum(s.Parts); src.Size != total {
		return fmt.Errorf("unpack: message of %d bytes, the metadata needs %d", src.Size, total)
	}
	in, err := p.arena.BytesChecked(src)
	if err != nil {
		return fmt.Errorf("unpack: message: %w", err)
	}
	for _, b := range dst {
		in = in[copy(b, in):]
	}
	return nil
}

func sum(v []uint64) uint64 {
	var t uint64
	for _, x := range v {
		t += x
	}
	return t
}

// Compare implements iface.Interface.
func (p *impl) Compare(_ context.Context, a, b []byte) (bool, error) {
	if _, err := p.shape(a); err != nil {
		return false, fmt.Errorf("compare: first: %w", err)
	}
	if _, err := p.shape(b); err != nil {
		return false, fmt.Errorf("compare: second: %w", err)
	}
	if p.spec.Compare != nil {
		return p.spec.Compare(a, b), nil
	}
	return bytes.Equal(a, b), nil
}

// Display implements iface.Interface.
func (p *impl) Display(_ context.Context, meta []byte) (string, error) {
	s, err := p.shape(meta)
	if err != nil {
		return "", fmt.Errorf("display: %w", err)
	}
	if p.spec.Display != nil {
		return p.spec.Display(meta), nil
	}
	l := s.Layout
	return fmt.Sprintf("%s(elemsize=%d nx=%d ny=%d nz=%d)", p.spec.Name, l.ElemSize, l.NX, l.NY, l.NZ), nil
}

// Partition implements iface.Interface.
func (p *impl) Partition(_ context.Context, filter string, meta []byte, parts []base.Span, nparts int) ([]iface.Child, error) {
	f := p.spec.Filters[filter]
	if f == nil {
		names := make([]string, 0, len(p.spec.Filters))
		for n := range p.spec.Filters {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, fmt.Errorf("partition: interface %s has no filters (asked for %q)", p.spec.Name, filter)
		}
		return nil, fmt.Errorf("partition: interface %s has no filter %q (it has %s)", p.spec.Name, filter, strings.Join(names, ", "))
	}
	if nparts <= 0 {
		return nil, fmt.Errorf("partition: %d parts, want at least 1", nparts)
	}
	s, err := p.shape(meta)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	src, err := p.views(s, parts)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	made, err := f(meta, src, nparts)
	if err != nil {
		return nil, fmt.Errorf("partition %s: %w", filter, err)
	}
	if len(made) != nparts {
		// The core's client refuses such an answer; say so here, where
		// the filter's author sees it.
		return nil, fmt.Errorf("partition %s: the filter made %d children, asked for %d", filter, len(made), nparts)
	}
	children := make([]iface.Child, len(made))
	for i, c := range made {
		d, err := p.describe(c.Meta)
		if err != nil {
			return nil, fmt.Errorf("partition %s: child %d: %w", filter, i, err)
		}
		children[i] = iface.Child{Meta: c.Meta, Desc: *d, Ranges: c.Ranges}
	}
	if err := iface.CheckChildren(s.Parts, children); err != nil {
		return nil, fmt.Errorf("partition %s: %w", filter, err)
	}
	return children, nil
}
