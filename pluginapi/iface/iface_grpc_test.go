package iface

import (
	"context"
	"errors"
	"github.com/starpu-go/starpu/pluginapi/internal/fill"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"
	gproto "google.golang.org/protobuf/proto"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// recIface records what it is sent and answers what the test sets.
type recIface struct {
	err        error
	desc       *Description
	plan       []Range
	children   []Child
	filter     string
	nparts     int
	meta, a, b []byte
	buffers    []base.Span
	src, dst   base.Span
	packed     uint64
	equal      bool
	display    string
}

func (r *recIface) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindInterface, Name: "rec", APIVersions: []int{base.APIVersion}}, r.err
}
func (r *recIface) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, r.err }
func (r *recIface) SetConfig(context.Context, base.Config) error       { return r.err }
func (r *recIface) Describe(_ context.Context, meta []byte, parts []base.Span) (*Description, error) {
	r.meta, r.buffers = meta, parts
	return r.desc, r.err
}
func (r *recIface) CopyPlan(_ context.Context, meta []byte) ([]Range, error) {
	r.meta = meta
	return r.plan, r.err
}
func (r *recIface) Pack(_ context.Context, meta []byte, buffers []base.Span, dst base.Span) (uint64, error) {
	r.meta, r.buffers, r.dst = meta, buffers, dst
	return r.packed, r.err
}
func (r *recIface) Unpack(_ context.Context, meta []byte, src base.Span, buffers []base.Span) error {
	r.meta, r.src, r.buffers = meta, src, buffers
	return r.err
}
func (r *recIface) Compare(_ context.Context, a, b []byte) (bool, error) {
	r.a, r.b = a, b
	return r.equal, r.err
}
func (r *recIface) Display(_ context.Context, meta []byte) (string, error) {
	r.meta = meta
	return r.display, r.err
}
func (r *recIface) Partition(_ context.Context, filter string, meta []byte, parts []base.Span, nparts int) ([]Child, error) {
	r.filter, r.meta, r.buffers, r.nparts = filter, meta, parts, nparts
	return r.children, r.err
}

func exercise(t *testing.T, i Interface, rec *recIface, remote bool) {
	ctx := context.Background()
	meta := []byte{0, 1, 2, 255}
	rec.desc = &Description{Name: "csr", Buffers: []uint64{8, 1 << 40, 0}, Size: 1<<40 + 8, Footprint: 0xdeadbeef,
		AllocFootprint: 7, Layout: kernel.Layout{ElemSize: 8, NX: 1, NY: 2, NZ: 3, LD: 1<<40 + 512, LDZ: 5}}
	parts := []base.Span{{Offset: 64, Size: 8}, {Offset: 128, Size: 1 << 40}, {Offset: 128 + 1<<40, Size: 0}}
	if d, err := i.Describe(ctx, meta, parts); err != nil || !reflect.DeepEqual(d, rec.desc) || !reflect.DeepEqual(rec.meta, meta) ||
		!reflect.DeepEqual(rec.buffers, parts) {
		t.Fatalf("Describe = %+v, %v; interface got %v %v", d, err, rec.meta, rec.buffers)
	}
	if _, err := i.Describe(ctx, meta, nil); err != nil || rec.buffers != nil {
		t.Fatalf("Describe without parts: %v; interface got %v", err, rec.buffers)
	}
	rec.plan = []Range{{Buffer: 0, Offset: 0, Len: 8}, {Buffer: 2, Offset: 1 << 33, Len: 1}}
	if p, err := i.CopyPlan(ctx, meta); err != nil || !reflect.DeepEqual(p, rec.plan) {
		t.Fatalf("CopyPlan = %+v, %v", p, err)
	}
	bufs := []base.Span{{Offset: 64, Size: 8}, {Offset: 128, Size: 1 << 40}}
	dst := base.Span{Offset: 4096, Size: 100}
	rec.packed = 77
	if n, err := i.Pack(ctx, meta, bufs, dst); err != nil || n != 77 || !reflect.DeepEqual(rec.buffers, bufs) || rec.dst != dst {
		t.Fatalf("Pack = %d, %v; interface got %v -> %v", n, err, rec.buffers, rec.dst)
	}
	if err := i.Unpack(ctx, meta, dst, bufs); err != nil || rec.src != dst || !reflect.DeepEqual(rec.buffers, bufs) {
		t.Fatalf("Unpack: %v; interface got %v -> %v", err, rec.src, rec.buffers)
	}
	for _, eq := range []bool{true, false} {
		rec.equal = eq
		if got, err := i.Compare(ctx, []byte("a"), []byte("bb")); err != nil || got != eq || string(rec.a) != "a" || string(rec.b) != "bb" {
			t.Fatalf("Compare = %v, %v; interface got %q %q", got, err, rec.a, rec.b)
		}
	}
	rec.display = "csr(nnz=3)"
	if s, err := i.Display(ctx, meta); err != nil || s != rec.display {
		t.Fatalf("Display = %q, %v", s, err)
	}
	rec.children = []Child{
		{Meta: []byte{1}, Desc: *rec.desc, Ranges: []PartRange{{Part: 1, Offset: 2, ChildPart: 0, ChildOffset: 3, Len: 5}}},
		{Meta: []byte{2}, Desc: Description{Name: "csr", Buffers: []uint64{0}}},
	}
	if c, err := i.Partition(ctx, "rows", meta, bufs, 2); err != nil || !reflect.DeepEqual(c, rec.children) ||
		rec.filter != "rows" || rec.nparts != 2 || !reflect.DeepEqual(rec.buffers, bufs) {
		t.Fatalf("Partition = %+v, %v; interface got %q %d %v", c, err, rec.filter, rec.nparts, rec.buffers)
	}

	rec.err = errors.New(`bad metadata field "nnz"`)
	want := rec.err.Error()
	if remote {
		want = "plugin iface-rec: " + want
	}
	for name, err := range map[string]error{
		"Describe":  errOf(i.Describe(ctx, meta, nil)),
		"Partition": errOf(i.Partition(ctx, "rows", meta, nil, 2)),
		"CopyPlan":  errOf(i.CopyPlan(ctx, meta)),
		"Pack":      errOf(i.Pack(ctx, meta, bufs, dst)),
		"Unpack":    i.Unpack(ctx, meta, dst, bufs),
		"Compare":   errOf(i.Compare(ctx, meta, meta)),
		"Display":   errOf(i.Display(ctx, meta)),
	} {
		var re *base.RemoteError
		if err == nil || err.Error() != want || remote != errors.As(err, &re) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
	rec.err = nil
}

func TestIfaceInProcess(t *testing.T) {
	rec := &recIface{}
	exercise(t, rec, rec, false)
}

func TestIfaceGRPC(t *testing.T) {
	rec := &recIface{}
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"iface": &Plugin{Impl: rec, Name: "iface-rec"}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("iface")
	if err != nil {
		t.Fatal(err)
	}
	i := raw.(*Client)
	exercise(t, i, rec, true)

	ctx := context.Background()
	rec.desc = nil
	if _, err := i.Describe(ctx, nil, nil); err == nil || !strings.Contains(err.Error(), "no description") {
		t.Fatalf("nil description: %v", err)
	}
	rec.plan = nil
	if p, err := i.CopyPlan(ctx, nil); err != nil || p != nil {
		t.Fatalf("empty plan = %v, %v", p, err)
	}
	rec.packed = 0
	if _, err := i.Pack(ctx, nil, nil, base.Span{}); err != nil || rec.buffers != nil {
		t.Fatalf("Pack with no buffers: %v; interface got %v", err, rec.buffers)
	}
}

func errOf[T any](_ T, err error) error { return err }

// Every field of Description, Child and Range survives the wire, including
// fields added to iface.go later: through the conversions of both sides and
// the wire encoding, and through the client once the values are made valid.
func TestIfaceEveryField(t *testing.T) {
	rec := &recIface{}
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"iface": &Plugin{Impl: rec}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("iface")
	if err != nil {
		t.Fatal(err)
	}
	i := raw.(Interface)
	ctx := context.Background()
	srv := NewServer(rec)

	var d Description
	fill.Fill(&d)
	rec.desc = &d
	var dr proto.DescribeResponse
	dresp, err := srv.Describe(ctx, &proto.DescribeRequest{})
	wireTrip(t, dresp, err, &dr)
	if got := descriptionFromProto(dr.GetDescription()); !reflect.DeepEqual(got, d) {
		t.Fatalf("description conversions:\n got %+v\nwant %+v", got, d)
	}
	validDesc(&d)
	if got, err := i.Describe(ctx, nil, nil); err != nil || !reflect.DeepEqual(*got, d) {
		t.Fatalf("Describe:\n got %+v, %v\nwant %+v", got, err, d)
	}

	var children struct{ C []Child }
	fill.Fill(&children)
	rec.children = children.C
	var pr proto.PartitionResponse
	req := &proto.PartitionRequest{Nparts: int64(len(children.C))}
	presp, err := srv.Partition(ctx, req)
	wireTrip(t, presp, err, &pr)
	if got := childrenFromProto(&pr); !reflect.DeepEqual(got, children.C) {
		t.Fatalf("children conversions:\n got %+v\nwant %+v", got, children.C)
	}
	parent := []base.Span{{Offset: 0, Size: 8}, {Offset: 64, Size: 8}}
	for c := range children.C {
		ch := &children.C[c]
		validDesc(&ch.Desc)
		for k := range ch.Ranges {
			ch.Ranges[k] = PartRange{Part: k % len(parent), Offset: 1, ChildPart: k % len(ch.Desc.Buffers), ChildOffset: 1, Len: 1}
		}
	}
	if got, err := i.Partition(ctx, "f", nil, parent, len(children.C)); err != nil || !reflect.DeepEqual(got, children.C) {
		t.Fatalf("Partition:\n got %+v, %v\nwant %+v", got, err, children.C)
	}

	var plan struct{ R []Range }
	fill.Fill(&plan)
	rec.plan = plan.R
	if got, err := i.CopyPlan(ctx, nil); err != nil || !reflect.DeepEqual(got, plan.R) {
		t.Fatalf("CopyPlan:\n got %+v, %v\nwant %+v", got, err, plan.R)
	}
}

// validDesc makes a filled description pass Description.Check: LD is the
// region's length, Size fits in it, Interface is the core's to set.
func validDesc(d *Description) {
	n, _ := RegionLen(d.Buffers)
	d.Layout.LD, d.Layout.Interface = n, 0
	d.Size = min(d.Size, n)
}

// wireTrip encodes msg, the answer of a server method (which failed with
// err), and decodes it into out, as gRPC does between the processes.
func wireTrip(t *testing.T, msg gproto.Message, err error, out gproto.Message) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	b, err := gproto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gproto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}
