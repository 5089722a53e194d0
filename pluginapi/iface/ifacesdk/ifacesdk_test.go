package ifacesdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// pair is a toy format: meta is "n,es"; part "keys" holds n values of es
// bytes, part "idx" n bytes each below n. Its filter "halves" splits idx.
func pair() Spec {
	parse := func(meta []byte) (n, es uint64, err error) {
		if _, err := fmt.Sscanf(string(meta), "%d,%d", &n, &es); err != nil {
			return 0, 0, fmt.Errorf("bad pair metadata %q", meta)
		}
		return n, es, nil
	}
	return Spec{
		Name:      "pair",
		PartNames: []string{"keys", "idx"},
		Shape: func(meta []byte) (Shape, error) {
			n, es, err := parse(meta)
			return Shape{Parts: []uint64{n * es, n}, Layout: kernel.Layout{ElemSize: uint32(es), NX: n}}, err
		},
		Validate: func(meta []byte, parts [][]byte) error {
			for i, v := range parts[1] {
				if int(v) >= len(parts[1]) {
					return fmt.Errorf("idx[%d] = %d out of range", i, v)
				}
			}
			return nil
		},
		Filters: map[string]Filter{
			"halves": func(meta []byte, parts [][]byte, nparts int) ([]FilterChild, error) {
				n, _, _ := parse(meta)
				h := n / 2
				return []FilterChild{
					{Meta: []byte(fmt.Sprintf("%d,1", h)), Ranges: []iface.PartRange{{Part: 1, ChildPart: 1, Len: h}}},
					{Meta: []byte(fmt.Sprintf("%d,1", n-h)), Ranges: []iface.PartRange{{Part: 1, Offset: h, ChildPart: 1, Len: n - h}}},
				}, nil
			},
			"broken": func([]byte, [][]byte, int) ([]FilterChild, error) {
				return []FilterChild{{Meta: []byte("1,1"), Ranges: []iface.PartRange{{Part: 1, Offset: 3, ChildPart: 1, Len: 2}}}}, nil
			},
		},
	}
}

func newPair(t *testing.T) (iface.Interface, *ifacetest.Region, func([][]byte) ifacetest.Region) {
	a := ifacetest.Arena(t, 1<<24)
	i, err := New(pair(), a)
	if err != nil {
		t.Fatal(err)
	}
	load := func(p [][]byte) ifacetest.Region { return ifacetest.Load(t, a, p) }
	r := load([][]byte{[]byte("aabbccdd"), {3, 2, 1, 0}})
	return i, &r, load
}

func TestNewNeedsSpec(t *testing.T) {
	a := ifacetest.Arena(t, 1<<20)
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{Spec{Shape: pair().Shape}, "needs a Name and a Shape"},
		{Spec{Name: "x"}, "needs a Name and a Shape"},
	} {
		if _, err := New(c.s, a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.s, err, c.want)
		}
	}
	if _, err := New(pair(), nil); err == nil || !strings.Contains(err.Error(), "no arena") {
		t.Errorf("New without arena: %v", err)
	}
}

func TestConformanceInProcess(t *testing.T) {
	a := ifacetest.Arena(t, 1<<24)
	i, err := New(pair(), a)
	if err != nil {
		t.Fatal(err)
	}
	ifacetest.Conformance(t, i, a, []byte("4,2"), [][]byte{[]byte("aabbccdd"), {3, 2, 1, 0}}, []byte("4,1"))
}

func TestDescribe(t *testing.T) {
	i, r, load := newPair(t)
	ctx := context.Background()
	d, err := i.Describe(ctx, []byte("4,2"), r.Parts)
	if err != nil {
		t.Fatal(err)
	}
	want := iface.Description{Name: "pair", Buffers: []uint64{8, 4}, Size: 12, Layout: kernel.Layout{ElemSize: 2, NX: 4, LD: 516}}
	want.Footprint, want.AllocFootprint = d.Footprint, d.AllocFootprint
	if !reflect.DeepEqual(*d, want) || d.Footprint == 0 || d.AllocFootprint == 0 {
		t.Fatalf("Describe = %+v, want %+v with footprints", d, want)
	}
	d3, _ := i.Describe(ctx, []byte("4,3"), nil)
	if d3.Footprint == d.Footprint || d3.AllocFootprint == d.AllocFootprint {
		t.Errorf("shapes 4,2 and 4,3 share footprints %x/%x", d.Footprint, d.AllocFootprint)
	}
	bad := load([][]byte{[]byte("aabbccdd"), {3, 2, 9, 0}})
	for _, c := range []struct {
		meta  string
		parts []base.Span
		want  string
	}{
		{"x", nil, `describe: bad pair metadata "x"`},
		{"4,2", r.Parts[:1], "describe: got 1 parts, the metadata has 2 (keys, idx)"},
		{"4,2", []base.Span{r.Parts[0], {Offset: r.Parts[1].Offset, Size: 3}}, "describe: idx has 3 bytes, the metadata says 4"},
		{"4,2", []base.Span{r.Parts[0], {Offset: 1 << 40, Size: 4}}, "describe: idx: shm: span"},
		{"4,2", bad.Parts, "describe: idx[2] = 9 out of range"},
	} {
		if _, err := i.Describe(ctx, []byte(c.meta), c.parts); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Describe(%s, %v) = %v, want %q", c.meta, c.parts, err, c.want)
		}
	}
}

func TestCopyPlanPackUnpack(t *testing.T) {
	i, r, _ := newPair(t)
	ctx := context.Background()
	plan, err := i.CopyPlan(ctx, []byte("4,2"))
	if want := []iface.Range{{Buffer: 0, Len: 8}, {Buffer: 1, Len: 4}}; err != nil || !reflect.DeepEqual(plan, want) {
		t.Fatalf("CopyPlan = %v, %v; want %v", plan, err, want)
	}
	// An empty part needs no range.
	if plan, err := i.CopyPlan(ctx, []byte("0,2")); err != nil || plan != nil {
		t.Fatalf("CopyPlan of an empty datum = %v, %v", plan, err)
	}
	msg := base.Span{Offset: r.Span.Offset + 128, Size: 12}
	if _, err := i.Pack(ctx, []byte("4,2"), r.Parts, base.Span{Offset: msg.Offset, Size: 11}); err == nil ||
		err.Error() != "pack: destination of 11 bytes, need 12" {
		t.Errorf("Pack into 11 bytes: %v", err)
	}
	if err := i.Unpack(ctx, []byte("4,2"), base.Span{Offset: msg.Offset, Size: 13}, r.Parts); err == nil ||
		err.Error() != "unpack: message of 13 bytes, the metadata needs 12" {
		t.Errorf("Unpack of 13 bytes: %v", err)
	}
	if _, err := i.Pack(ctx, []byte("4,2"), r.Parts[1:], msg); err == nil || !strings.Contains(err.Error(), "got 1 parts") {
		t.Errorf("Pack with one part: %v", err)
	}
}

func TestCompareDisplayConfig(t *testing.T) {
	i, _, _ := newPair(t)
	ctx := context.Background()
	for _, c := range []struct {
		a, b string
		eq   bool
		err  string
	}{
		{"4,2", "4,2", true, ""},
		{"4,2", "4,3", false, ""},
		{"x", "4,2", false, "compare: first: "},
		{"4,2", "x", false, "compare: second: "},
	} {
		eq, err := i.Compare(ctx, []byte(c.a), []byte(c.b))
		if eq != c.eq || (c.err == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("Compare(%s, %s) = %v, %v; want %v, %q", c.a, c.b, eq, err, c.eq, c.err)
		}
	}
	if s, err := i.Display(ctx, []byte("4,2")); err != nil || s != "pair(elemsize=2 nx=4 ny=0 nz=0)" {
		t.Errorf("Display = %q, %v", s, err)
	}
	if _, err := i.Display(ctx, []byte("?")); err == nil || !strings.HasPrefix(err.Error(), "display: ") {
		t.Errorf("Display of bad metadata: %v", err)
	}
	if info, err := i.PluginInfo(ctx); err != nil || info.Name != "pair" || info.Kind != base.KindInterface {
		t.Errorf("PluginInfo = %+v, %v", info, err)
	}
	if err := i.SetConfig(ctx, base.Config{"x": "1"}); err == nil || !strings.Contains(err.Error(), "no configuration") {
		t.Errorf("SetConfig: %v", err)
	}
}

func TestPartition(t *testing.T) {
	i, r, _ := newPair(t)
	ctx := context.Background()
	kids, err := i.Partition(ctx, "halves", []byte("4,2"), r.Parts, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 2 || string(kids[1].Meta) != "2,1" || !reflect.DeepEqual(kids[1].Desc.Buffers, []uint64{2, 2}) ||
		kids[1].Ranges[0] != (iface.PartRange{Part: 1, Offset: 2, ChildPart: 1, Len: 2}) {
		t.Fatalf("children %+v", kids)
	}
	for _, c := range []struct {
		filter string
		n      int
		want   string
	}{
		{"thirds", 3, `partition: interface pair has no filter "thirds" (it has broken, halves)`},
		{"halves", 0, "partition: 0 parts, want at least 1"},
		{"broken", 1, "partition broken: child 0 range 0: bytes [3, +2) outside parent part 1 of 4 bytes"},
		{"halves", 3, "partition halves: the filter made 2 children, asked for 3"},
	} {
		if _, err := i.Partition(ctx, c.filter, []byte("4,2"), r.Parts, c.n); err == nil || err.Error() != c.want {
			t.Errorf("Partition(%s, %d) = %v, want %q", c.filter, c.n, err, c.want)
		}
	}
	noFilters := pair()
	noFilters.Filters = nil
	a := ifacetest.Arena(t, 1<<20)
	j, _ := New(noFilters, a)
	if _, err := j.Partition(ctx, "rows", []byte("4,2"), r.Parts, 2); err == nil || !strings.Contains(err.Error(), "has no filters") {
		t.Errorf("Partition without filters: %v", err)
	}
}

// A plugin process that dies inside a call gives the caller an error saying
// so, promptly, and later calls fail the same way.
func TestCrashingPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	a := ifacetest.Arena(t, 1<<20)
	p := ifacetest.Start(t, ifacetest.Build(t, "./testdata/iface-crashy", t.TempDir(), "crashy"), a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := p.Describe(ctx, nil, nil); err != nil {
		t.Fatalf("Describe before the crash: %v", err)
	}
	start := time.Now()
	_, err := p.Display(ctx, nil)
	if !errors.Is(err, base.ErrPluginExited) || !strings.Contains(err.Error(), "iface-crashy") {
		t.Fatalf("Display on a crashing plugin: %v; want plugin iface-crashy: %v", err, base.ErrPluginExited)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the crash took %v to report", d)
	}
	if _, err := p.Describe(ctx, nil, nil); !errors.Is(err, base.ErrPluginExited) {
		t.Fatalf("Describe after the crash: %v", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("exited")) {
		t.Fatalf("error %q does not say the plugin exited", err)
	}
}
