package iface

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// desc is a valid description of parts of the given sizes.
func desc(sizes ...uint64) Description {
	n, _ := RegionLen(sizes)
	return Description{Name: "t", Buffers: sizes, Layout: kernel.Layout{LD: n}}
}

// An interface plugin that answers nonsense gets an error naming it, the
// call and what is wrong, wrapping base.ErrBadReply, never a value the core
// would copy by.
func TestBadReplies(t *testing.T) {
	ctx := context.Background()
	parts := []base.Span{{Offset: 0, Size: 8}, {Offset: 64, Size: 4}}
	dst := base.Span{Offset: 4096, Size: 12}
	with := func(f func(d *Description)) *Description {
		d := desc(8, 4)
		f(&d)
		return &d
	}
	for _, c := range []struct {
		name string
		rec  recIface
		call func(i Interface) error
		want string
	}{
		{"LD not the region length", recIface{desc: with(func(d *Description) { d.Layout.LD = 12 })},
			func(i Interface) error { return errOf(i.Describe(ctx, nil, nil)) },
			`plugin iface-rec: Describe: invalid reply: interface "t": layout LD 12 is not the region length 516 of parts [8 4]`},
		{"interface ID set", recIface{desc: with(func(d *Description) { d.Layout.Interface = kernel.Matrix })},
			func(i Interface) error { return errOf(i.Describe(ctx, nil, nil)) },
			`plugin iface-rec: Describe: invalid reply: interface "t": layout names interface matrix; the core assigns it`},
		{"size past the region", recIface{desc: with(func(d *Description) { d.Size = 517 })},
			func(i Interface) error { return errOf(i.Describe(ctx, nil, nil)) },
			`plugin iface-rec: Describe: invalid reply: interface "t": size 517 is more than the region length 516 of parts [8 4]`},
		{"region past MaxRegion", recIface{desc: &Description{Name: "t", Buffers: []uint64{MaxRegion, 1}}},
			func(i Interface) error { return errOf(i.Describe(ctx, nil, nil)) },
			`plugin iface-rec: Describe: invalid reply: interface "t": part 1 of 1 bytes takes the region past 72057594037927936 bytes`},
		{"parts accepted, not described", recIface{desc: with(func(d *Description) {})},
			func(i Interface) error { return errOf(i.Describe(ctx, nil, parts[:1])) },
			`plugin iface-rec: Describe: invalid reply: the plugin accepted parts its description does not match: interface "t": got 1 parts, the metadata describes 2`},
		{"part size accepted, not described", recIface{desc: with(func(d *Description) {})},
			func(i Interface) error {
				return errOf(i.Describe(ctx, nil, []base.Span{parts[0], {Offset: 64, Size: 5}}))
			},
			`plugin iface-rec: Describe: invalid reply: the plugin accepted parts its description does not match: interface "t": part 1 has 5 bytes, the metadata says 4`},
		{"copy plan, negative part", recIface{plan: []Range{{Buffer: 0, Len: 8}, {Buffer: -1, Len: 4}}},
			func(i Interface) error { return errOf(i.CopyPlan(ctx, nil)) },
			"plugin iface-rec: CopyPlan: invalid reply: range 1 names part -1"},
		{"copy plan, offset wraps", recIface{plan: []Range{{Buffer: 0, Offset: 1<<64 - 1, Len: 2}}},
			func(i Interface) error { return errOf(i.CopyPlan(ctx, nil)) },
			"plugin iface-rec: CopyPlan: invalid reply: range 0: bytes [18446744073709551615, +2) end past 72057594037927936, the largest region"},
		{"copy plan, huge length", recIface{plan: []Range{{Buffer: 0, Len: MaxRegion + 1}}},
			func(i Interface) error { return errOf(i.CopyPlan(ctx, nil)) },
			"plugin iface-rec: CopyPlan: invalid reply: range 0: bytes [0, +72057594037927937) end past 72057594037927936, the largest region"},
		{"packed past the destination", recIface{packed: 13},
			func(i Interface) error { return errOf(i.Pack(ctx, nil, parts, dst)) },
			"plugin iface-rec: Pack: invalid reply: packed 13 bytes into a destination of 12"},
		{"fewer children", recIface{children: []Child{{Desc: desc(8)}}},
			func(i Interface) error { return errOf(i.Partition(ctx, "rows", nil, parts, 2)) },
			`plugin iface-rec: Partition: invalid reply: filter "rows": 1 children, asked for 2`},
		{"child range past its part", recIface{children: []Child{{Desc: desc(8), Ranges: []PartRange{{Part: 0, ChildPart: 0, ChildOffset: 4, Len: 5}}}}},
			func(i Interface) error { return errOf(i.Partition(ctx, "rows", nil, parts, 1)) },
			`plugin iface-rec: Partition: invalid reply: filter "rows": child 0 range 0: bytes [4, +5) outside child part 0 of 8 bytes`},
		{"child range from a part not sent", recIface{children: []Child{{Desc: desc(8), Ranges: []PartRange{{Part: 2, Len: 1}}}}},
			func(i Interface) error { return errOf(i.Partition(ctx, "rows", nil, parts, 1)) },
			`plugin iface-rec: Partition: invalid reply: filter "rows": child 0 range 0: parent part 2 of 2`},
		{"child range past the parent's part", recIface{children: []Child{{Desc: desc(8), Ranges: []PartRange{{Part: 1, Offset: 1, Len: 4}}}}},
			func(i Interface) error { return errOf(i.Partition(ctx, "rows", nil, parts, 1)) },
			`plugin iface-rec: Partition: invalid reply: filter "rows": child 0 range 0: bytes [1, +4) outside parent part 1 of 4 bytes`},
		{"child description", recIface{children: []Child{{Desc: Description{Name: "t", Buffers: []uint64{8}, Layout: kernel.Layout{LD: 7}}}}},
			func(i Interface) error { return errOf(i.Partition(ctx, "rows", nil, parts, 1)) },
			`plugin iface-rec: Partition: invalid reply: filter "rows": child 0: interface "t": layout LD 7 is not the region length 8 of parts [8]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := c.rec
			client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"iface": &Plugin{Impl: &rec, Name: "iface-rec"}})
			t.Cleanup(func() { client.Close() })
			raw, err := client.Dispense("iface")
			if err != nil {
				t.Fatal(err)
			}
			err = c.call(raw.(Interface))
			var re *base.RemoteError
			if err == nil || err.Error() != c.want || !errors.Is(err, base.ErrBadReply) || errors.As(err, &re) {
				t.Fatalf("error %v,\nwant %q wrapping base.ErrBadReply", err, c.want)
			}
		})
	}
}

// Replies the gRPC server never sends, but a plugin in another language
// might: a child without a description, no reply at all.
func TestMissingMessages(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no describe reply", errOf(describeReply(nil, nil)), "no description"},
		{"child without description", errOf(partitionReply(&proto.PartitionResponse{Children: []*proto.Child{{}}}, nil, 1)),
			"child 0 has no description"},
		{"no partition reply", errOf(partitionReply(nil, nil, 1)), "0 children, asked for 1"},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, c.err, c.want)
		}
	}
	if n, err := packReply(nil, base.Span{}); n != 0 || err != nil {
		t.Errorf("no pack reply: %d, %v", n, err)
	}
	if p, err := copyPlanReply(nil); p != nil || err != nil {
		t.Errorf("no copy plan reply: %v, %v", p, err)
	}
}

func TestCheckPlan(t *testing.T) {
	d := desc(16, 8)
	for _, c := range []struct {
		plan []Range
		want string // "" when valid
	}{
		{nil, ""},
		{[]Range{{Buffer: 0, Len: 16}, {Buffer: 1, Offset: 4, Len: 4}, {Buffer: 1, Offset: 8}}, ""},
		{[]Range{{Buffer: 2, Len: 1}}, "copy plan range 0: part 2 of 2"},
		{[]Range{{Buffer: -1}}, "copy plan range 0: part -1 of 2"},
		{[]Range{{Buffer: 0, Len: 16}, {Buffer: 1, Offset: 5, Len: 4}}, "copy plan range 1: bytes [5, +4) outside part 1 of 8 bytes"},
		{[]Range{{Buffer: 0, Offset: 1<<64 - 1, Len: 2}}, "outside part 0 of 16 bytes"},
		{[]Range{{Buffer: 0, Offset: 17}}, "bytes [17, +0) outside part 0"},
	} {
		err := d.CheckPlan(c.plan)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckPlan(%+v) = %v, want %q", c.plan, err, c.want)
		}
	}
}
