package base

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakePlugin is a base.Plugin whose answers the test sets.
type fakePlugin struct {
	info   *Info
	schema *Schema
	err    error
	got    Config
}

func (f *fakePlugin) PluginInfo(context.Context) (*Info, error)     { return f.info, f.err }
func (f *fakePlugin) ConfigSchema(context.Context) (*Schema, error) { return f.schema, f.err }
func (f *fakePlugin) SetConfig(_ context.Context, c Config) error {
	f.got = c
	return f.err
}

// connect serves f through go-plugin's in-memory gRPC harness.
func connect(t *testing.T, f *fakePlugin, name string) (*BasePluginClient, *plugin.GRPCClient) {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"base": &PluginBase{Impl: f, Name: name}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("base")
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*BasePluginClient), client
}

func TestBaseRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := &fakePlugin{
		info: &Info{Kind: KindScheduler, Name: "ws", Version: "1.2.3", APIVersions: []int{1, 2}},
		schema: &Schema{Attrs: []Attr{
			{Name: "steal", Type: AttrBool, Default: "true", Doc: "steal work"},
			{Name: "depth", Type: AttrInt, Required: true},
			{Name: "ratio", Type: AttrFloat},
			{Name: "mode", Type: AttrString, Default: "lifo"},
		}},
	}
	c, _ := connect(t, f, "")
	if c.Label() != "plugin" {
		t.Fatalf("label before PluginInfo %q", c.Label())
	}
	info, err := c.PluginInfo(ctx)
	if err != nil || !reflect.DeepEqual(info, f.info) {
		t.Fatalf("PluginInfo = %+v, %v", info, err)
	}
	if c.Label() != "sched-ws" {
		t.Fatalf("label after PluginInfo %q", c.Label())
	}
	s, err := c.ConfigSchema(ctx)
	if err != nil || !reflect.DeepEqual(s, f.schema) {
		t.Fatalf("ConfigSchema = %+v, %v", s, err)
	}
	cfg := Config{"steal": false, "depth": int64(-3), "ratio": 0.125, "mode": "fifo"}
	if err := c.SetConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.got, cfg) {
		t.Fatalf("plugin got config %#v, want %#v", f.got, cfg)
	}
	if err := c.SetConfig(ctx, nil); err != nil || len(f.got) != 0 {
		t.Fatalf("SetConfig(nil): %v, plugin got %#v", err, f.got)
	}

	// A nil schema is an empty one; a nil info is an error.
	f.schema, f.info = nil, nil
	if s, err := c.ConfigSchema(ctx); err != nil || len(s.Attrs) != 0 {
		t.Fatalf("nil schema: %+v, %v", s, err)
	}
	if _, err := c.PluginInfo(ctx); err == nil || !strings.Contains(err.Error(), "no info") {
		t.Fatalf("nil info: %v", err)
	}
}

func TestBaseErrors(t *testing.T) {
	ctx := context.Background()
	f := &fakePlugin{err: errors.New(`attribute "depth": want int, got string`)}
	c, client := connect(t, f, "sched-ws")
	for name, err := range map[string]error{
		"PluginInfo":   errOf(c.PluginInfo(ctx)),
		"ConfigSchema": errOf(c.ConfigSchema(ctx)),
		"SetConfig":    c.SetConfig(ctx, Config{"depth": "x"}),
	} {
		want := `plugin sched-ws: attribute "depth": want int, got string`
		var re *RemoteError
		if err == nil || err.Error() != want || !errors.As(err, &re) || re.Code != codes.Unknown || re.Plugin != "sched-ws" {
			t.Errorf("%s: error %#v, want %q", name, err, want)
		}
	}

	// Context errors on the plugin side keep their meaning.
	f.err = context.DeadlineExceeded
	if err := c.SetConfig(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline from the plugin: %v", err)
	}
	f.err = context.Canceled
	if err := c.SetConfig(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancellation from the plugin: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.SetConfig(cctx, nil); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "plugin sched-ws: ") {
		t.Errorf("cancelled call: %v", err)
	}

	// A config that cannot be encoded never leaves the core.
	if err := c.SetConfig(ctx, Config{"x": make(chan int)}); err == nil || !strings.HasPrefix(err.Error(), "plugin sched-ws: encode config") {
		t.Errorf("unencodable config: %v", err)
	}

	// A closed connection is a plugin gone.
	client.Close()
	if _, err := c.PluginInfo(ctx); !errors.Is(err, ErrPluginExited) || !strings.HasPrefix(err.Error(), "plugin sched-ws: ") {
		t.Errorf("call on a closed connection: %v", err)
	}
}

func TestStatusError(t *testing.T) {
	if StatusError(nil) != nil {
		t.Fatal("nil")
	}
	for _, c := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{errors.New("boom"), codes.Unknown, "boom"},
		{context.Canceled, codes.Canceled, "context canceled"},
		{errors.Join(errors.New("wait"), context.DeadlineExceeded), codes.DeadlineExceeded, "wait\ncontext deadline exceeded"},
		{status.Error(codes.NotFound, "no such kernel"), codes.NotFound, "no such kernel"},
	} {
		st, _ := status.FromError(StatusError(c.err))
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("StatusError(%v) = %v %q, want %v %q", c.err, st.Code(), st.Message(), c.code, c.msg)
		}
	}
}

func TestSpanProto(t *testing.T) {
	s := Span{Offset: 1<<63 + 1, Size: 42}
	if got := SpanFromProto(SpanToProto(s)); got != s {
		t.Fatalf("round trip %+v", got)
	}
	if got := SpanFromProto(nil); got != (Span{}) {
		t.Fatalf("nil span %+v", got)
	}
}

func TestWatchParent(t *testing.T) {
	exited := make(chan struct{})
	log := hclog.NewNullLogger()
	// The parent is still the one recorded: no exit.
	go watchParent(log, os.Getppid(), time.Millisecond, func() { t.Error("exit called with the parent alive") })
	// A different recorded parent: the core is gone.
	go watchParent(log, os.Getppid()+100000, time.Millisecond, func() { close(exited) })
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog did not notice the parent change")
	}
	time.Sleep(20 * time.Millisecond)
}

func TestPluginLoggerLevel(t *testing.T) {
	t.Setenv(EnvLogLevel, "")
	if l := newPluginLogger(); !l.IsInfo() || l.IsDebug() {
		t.Fatal("default level is not info")
	}
	t.Setenv(EnvLogLevel, "trace")
	if l := newPluginLogger(); !l.IsTrace() {
		t.Fatal("level from the environment ignored")
	}
}

func errOf[T any](_ T, err error) error { return err }
