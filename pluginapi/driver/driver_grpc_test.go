package driver

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
	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// recDriver records what it is sent and answers what the test sets.
type recDriver struct {
	fp      *Fingerprint
	err     error
	init    *InitRequest
	loaded  KernelSource
	deinits int
}

func (r *recDriver) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "rec", APIVersions: []int{base.APIVersion}}, r.err
}
func (r *recDriver) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, r.err }
func (r *recDriver) SetConfig(context.Context, base.Config) error       { return r.err }
func (r *recDriver) Fingerprint(context.Context) (*Fingerprint, error)  { return r.fp, r.err }
func (r *recDriver) Init(_ context.Context, req *InitRequest) error {
	r.init = req
	return r.err
}
func (r *recDriver) Deinit(context.Context) error {
	r.deinits++
	return r.err
}
func (r *recDriver) LoadKernel(_ context.Context, k KernelSource) (int, error) {
	r.loaded = k
	return len(k.Source), r.err
}

func harness(t *testing.T, impl Driver, name string) Driver {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"driver": &Plugin{Impl: impl, Name: name}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("driver")
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*Client)
}

// exercise runs every method of d, which is rec in process or behind gRPC.
func exercise(t *testing.T, d Driver, rec *recDriver, remote bool) {
	ctx := context.Background()
	for _, fp := range []*Fingerprint{
		{Arch: CUDA, Units: []Unit{{"gpu0", 1}, {"gpu1", 2}}, Nodes: []MemoryNode{{Name: "m0", Bytes: 1 << 40, Peers: []int{2}}, {Name: "m1", Bytes: 1}}, Kernels: []string{"a", "b"}},
		{Arch: CPU, SchedRing: true},
	} {
		rec.fp = fp
		got, err := d.Fingerprint(ctx)
		if err != nil || !reflect.DeepEqual(got, fp) {
			t.Fatalf("Fingerprint = %+v, %v; want %+v", got, err, fp)
		}
	}
	req := &InitRequest{SpinIters: -5, Workers: []WorkerSpec{
		{ID: 1, Unit: 2, Dispatch: base.Span{Offset: 3, Size: 4}, Completion: base.Span{Offset: 5, Size: 6}, Bell: 7, CoreBell: 8,
			SchedRing: base.Span{Offset: 9, Size: 10}},
		{ID: -1},
	}}
	if err := d.Init(ctx, req); err != nil || !reflect.DeepEqual(rec.init, req) {
		t.Fatalf("Init: %v; driver got %+v", err, rec.init)
	}
	if err := d.Deinit(ctx); err != nil || rec.deinits != 1 {
		t.Fatalf("Deinit: %v, %d calls", err, rec.deinits)
	}
	ks := KernelSource{Name: "scal", Source: "kernel void scal(global float *x) {}"}
	if idx, err := d.LoadKernel(ctx, ks); err != nil || idx != len(ks.Source) || rec.loaded != ks {
		t.Fatalf("LoadKernel = %d, %v; driver got %+v", idx, err, rec.loaded)
	}

	rec.err = errors.New("cuda: out of memory")
	want := "cuda: out of memory"
	if remote {
		want = "plugin driver-rec: " + want
	}
	for name, err := range map[string]error{
		"Fingerprint": errOf(d.Fingerprint(ctx)),
		"Init":        d.Init(ctx, req),
		"Deinit":      d.Deinit(ctx),
		"LoadKernel":  errOf(d.LoadKernel(ctx, ks)),
		"PluginInfo":  errOf(d.PluginInfo(ctx)),
		"SetConfig":   d.SetConfig(ctx, nil),
	} {
		var re *base.RemoteError
		if err == nil || err.Error() != want || remote != errors.As(err, &re) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
	rec.err = nil
}

func TestDriverInProcess(t *testing.T) {
	rec := &recDriver{}
	exercise(t, rec, rec, false)
}

func TestDriverGRPC(t *testing.T) {
	rec := &recDriver{}
	d := harness(t, rec, "driver-rec")
	exercise(t, d, rec, true)

	// Requests the core leaves nil arrive as zero values; a nil fingerprint
	// is an error.
	ctx := context.Background()
	if err := d.Init(ctx, nil); err != nil || !reflect.DeepEqual(rec.init, &InitRequest{}) {
		t.Fatalf("Init(nil): %v; driver got %+v", err, rec.init)
	}
	rec.fp = nil
	if _, err := d.Fingerprint(ctx); err == nil || !strings.Contains(err.Error(), "no fingerprint") {
		t.Fatalf("nil fingerprint: %v", err)
	}
}

func TestDriverLabelLearnt(t *testing.T) {
	rec := &recDriver{err: errors.New("boom")}
	d := harness(t, rec, "")
	if err := d.Deinit(context.Background()); err == nil || err.Error() != "plugin driver: boom" {
		t.Fatalf("before PluginInfo: %v", err)
	}
	rec.err = nil
	if _, err := d.PluginInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.err = errors.New("boom")
	if err := d.Deinit(context.Background()); err == nil || err.Error() != "plugin driver-rec: boom" {
		t.Fatalf("after PluginInfo: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

// Every field of every message survives the wire, including fields added to
// driver.go later.
func TestDriverEveryField(t *testing.T) {
	rec := &recDriver{}
	d := harness(t, rec, "driver-rec")
	ctx := context.Background()
	var fp Fingerprint
	fill.Fill(&fp)
	rec.fp = &fp
	// The conversions, through the wire encoding, keep every field...
	resp, err := NewServer(rec).Fingerprint(ctx, &proto.FingerprintRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := gproto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var back proto.FingerprintResponse
	if err := gproto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := fingerprintFromProto(&back); !reflect.DeepEqual(*got, fp) {
		t.Fatalf("fingerprint conversions:\n got %+v\nwant %+v", got, fp)
	}
	// ...and the client returns them once the fingerprint is made valid:
	// a known architecture, units on the driver's nodes, peers among them.
	fp.Arch = OpenCL
	for i := range fp.Units {
		fp.Units[i].Node = i + 1
	}
	for i := range fp.Nodes {
		fp.Nodes[i].Peers = []int{len(fp.Nodes) - i}
	}
	if got, err := d.Fingerprint(ctx); err != nil || !reflect.DeepEqual(*got, fp) {
		t.Fatalf("Fingerprint:\n got %+v, %v\nwant %+v", got, err, fp)
	}
	var init InitRequest
	fill.Fill(&init)
	if err := d.Init(ctx, &init); err != nil || !reflect.DeepEqual(*rec.init, init) {
		t.Fatalf("Init:\n got %+v, %v\nwant %+v", rec.init, err, init)
	}
	var ks KernelSource
	fill.Fill(&ks)
	if _, err := d.LoadKernel(ctx, ks); err != nil || rec.loaded != ks {
		t.Fatalf("LoadKernel:\n got %+v, %v\nwant %+v", rec.loaded, err, ks)
	}
}
