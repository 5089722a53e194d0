package iface

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// garbageEnv, when set, makes the test binary serve garbageIface as an
// interface plugin process instead of running the tests:
// TestGarbagePluginProcess starts it so, as the core starts a plugin.
const garbageEnv = "STARPU_IFACE_TEST_GARBAGE_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(garbageEnv) != "" {
		Serve(func(*shm.Arena, hclog.Logger) (Interface, error) { return garbageIface{}, nil })
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// garbageIface is an interface plugin that answers nonsense, of the kind
// its request's metadata (or filter) names, where the contract allows the
// client to tell; Display and Compare answer properly.
type garbageIface struct{}

func (garbageIface) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindInterface, Name: "garbage", APIVersions: []int{base.APIVersion}}, nil
}

func (garbageIface) ConfigSchema(context.Context) (*base.Schema, error) {
	return &base.Schema{Attrs: []base.Attr{{Name: "depth", Type: "integer"}}}, nil
}

func (garbageIface) SetConfig(context.Context, base.Config) error { return nil }

func (garbageIface) Describe(_ context.Context, meta []byte, _ []base.Span) (*Description, error) {
	d := &Description{Name: "garbage", Buffers: []uint64{8, 4}, Size: 12, Layout: kernel.Layout{LD: 516}}
	switch string(meta) {
	case "ld":
		d.Layout.LD = 12 // the parts' sum, not the region's length
	case "interface":
		d.Layout.Interface = kernel.Vector
	case "huge":
		d.Buffers, d.Layout.LD = []uint64{1 << 63, 1 << 63}, 0
	}
	return d, nil
}

func (garbageIface) CopyPlan(_ context.Context, meta []byte) ([]Range, error) {
	switch string(meta) {
	case "wrap":
		return []Range{{Buffer: 0, Offset: 1<<64 - 4, Len: 8}}, nil
	case "negative":
		return []Range{{Buffer: -1, Len: 8}}, nil
	}
	return []Range{{Buffer: 0, Len: 8}, {Buffer: 1, Len: 4}}, nil
}

func (garbageIface) Pack(_ context.Context, _ []byte, _ []base.Span, dst base.Span) (uint64, error) {
	return dst.Size + 1, nil
}

func (garbageIface) Unpack(context.Context, []byte, base.Span, []base.Span) error { return nil }

func (garbageIface) Compare(_ context.Context, a, b []byte) (bool, error) {
	return string(a) == string(b), nil
}

func (garbageIface) Display(context.Context, []byte) (string, error) { return "garbage(ok)", nil }

func (garbageIface) Partition(_ context.Context, filter string, _ []byte, _ []base.Span, nparts int) ([]Child, error) {
	child := Child{Meta: []byte("c"), Desc: Description{Name: "garbage", Buffers: []uint64{4}, Layout: kernel.Layout{LD: 4}}}
	switch filter {
	case "extra":
		out := make([]Child, nparts+1)
		for i := range out {
			out[i] = child
		}
		return out, nil
	case "outside":
		child.Ranges = []PartRange{{Part: 0, Offset: 6, ChildPart: 0, Len: 4}} // bytes 6..9 of an 8-byte part
		return []Child{child}, nil
	}
	child.Ranges = []PartRange{{Part: 0, Offset: 4, ChildPart: 0, Len: 4}}
	return []Child{child}, nil
}

// startGarbage starts this test binary as the garbageIface plugin process,
// as the core starts a plugin (go-plugin handshake, the arena on file
// descriptor 3), and returns the client adapter and the go-plugin client.
func startGarbage(t *testing.T) (Interface, *plugin.Client) {
	t.Helper()
	a, err := shm.Create(1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), garbageEnv+"=1")
	cmd.ExtraFiles = []*os.File{a.File()} // fd 3 == base.ArenaFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{base.APIVersion: {string(base.KindInterface): &Plugin{Name: "iface-garbage"}}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "garbage", Level: hclog.Warn, Output: os.Stderr}),
		StartTimeout:     20 * time.Second,
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start the garbage plugin: %v", err)
	}
	raw, err := rpc.Dispense(string(base.KindInterface))
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	return raw.(Interface), client
}

// TestGarbagePluginProcess talks to a real plugin process that answers
// nonsense: every nonsensical reply is an error naming the plugin, the call
// and what is wrong, wrapping base.ErrBadReply; nothing panics or hangs;
// the plugin process and the connection stay usable for the next call.
func TestGarbagePluginProcess(t *testing.T) {
	i, client := startGarbage(t)
	parts := []base.Span{{Offset: 0, Size: 8}, {Offset: 64, Size: 4}}
	for _, c := range []struct {
		name string
		call func(ctx context.Context) error
		want string
	}{
		{"schema with an unknown type", func(ctx context.Context) error { return errOf(i.ConfigSchema(ctx)) },
			`plugin iface-garbage: ConfigSchema: invalid reply: attribute "depth" has type "integer", not one of string, int, float, bool`},
		{"LD of the parts' sum", func(ctx context.Context) error { return errOf(i.Describe(ctx, []byte("ld"), nil)) },
			`plugin iface-garbage: Describe: invalid reply: interface "garbage": layout LD 12 is not the region length 516 of parts [8 4]`},
		{"interface ID set", func(ctx context.Context) error { return errOf(i.Describe(ctx, []byte("interface"), nil)) },
			`plugin iface-garbage: Describe: invalid reply: interface "garbage": layout names interface vector; the core assigns it`},
		{"parts that overflow", func(ctx context.Context) error { return errOf(i.Describe(ctx, []byte("huge"), nil)) },
			`plugin iface-garbage: Describe: invalid reply: interface "garbage": part 0 of 9223372036854775808 bytes takes the region past 72057594037927936 bytes`},
		{"parts it cannot have checked", func(ctx context.Context) error { return errOf(i.Describe(ctx, nil, parts[:1])) },
			`plugin iface-garbage: Describe: invalid reply: the plugin accepted parts its description does not match: interface "garbage": got 1 parts, the metadata describes 2`},
		{"copy range that wraps", func(ctx context.Context) error { return errOf(i.CopyPlan(ctx, []byte("wrap"))) },
			"plugin iface-garbage: CopyPlan: invalid reply: range 0: bytes [18446744073709551612, +8) end past 72057594037927936, the largest region"},
		{"copy range of part -1", func(ctx context.Context) error { return errOf(i.CopyPlan(ctx, []byte("negative"))) },
			"plugin iface-garbage: CopyPlan: invalid reply: range 0 names part -1"},
		{"packed past the destination", func(ctx context.Context) error {
			return errOf(i.Pack(ctx, nil, parts, base.Span{Offset: 4096, Size: 12}))
		}, "plugin iface-garbage: Pack: invalid reply: packed 13 bytes into a destination of 12"},
		{"a child too many", func(ctx context.Context) error { return errOf(i.Partition(ctx, "extra", nil, parts, 2)) },
			`plugin iface-garbage: Partition: invalid reply: filter "extra": 3 children, asked for 2`},
		{"range outside the parent", func(ctx context.Context) error { return errOf(i.Partition(ctx, "outside", nil, parts, 1)) },
			`plugin iface-garbage: Partition: invalid reply: filter "outside": child 0 range 0: bytes [6, +4) outside parent part 0 of 8 bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.call(ctx)
			var re *base.RemoteError
			if err == nil || err.Error() != c.want || !errors.Is(err, base.ErrBadReply) || errors.As(err, &re) ||
				errors.Is(err, base.ErrPluginExited) {
				t.Fatalf("error %v,\nwant %q wrapping base.ErrBadReply", err, c.want)
			}
		})
	}

	// The same process still answers, and its sound answers pass.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if client.Exited() {
		t.Fatal("the plugin process exited")
	}
	if s, err := i.Display(ctx, nil); err != nil || s != "garbage(ok)" {
		t.Fatalf("Display = %q, %v", s, err)
	}
	if d, err := i.Describe(ctx, nil, parts); err != nil || d.Layout.LD != 516 {
		t.Fatalf("sound Describe = %+v, %v", d, err)
	}
	if kids, err := i.Partition(ctx, "rows", nil, parts, 1); err != nil || len(kids) != 1 {
		t.Fatalf("sound Partition = %+v, %v", kids, err)
	}
}
