package sched

import (
	"context"
	"errors"
	"github.com/starpu-go/starpu/pluginapi/internal/fill"
	"reflect"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
)

// recSched records what it is sent and fails with err.
type recSched struct {
	err     error
	init    *InitRequest
	deinits int
}

func (r *recSched) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindScheduler, Name: "rec", APIVersions: []int{base.APIVersion}}, r.err
}
func (r *recSched) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, r.err }
func (r *recSched) SetConfig(context.Context, base.Config) error       { return r.err }
func (r *recSched) Init(_ context.Context, req *InitRequest) error {
	r.init = req
	return r.err
}
func (r *recSched) Deinit(context.Context) error {
	r.deinits++
	return r.err
}

func exercise(t *testing.T, s Scheduler, rec *recSched, remote bool) {
	ctx := context.Background()
	req := &InitRequest{
		Workers: []Worker{{ID: 0, Arch: driver.CPU, Node: 0}, {ID: 7, Arch: driver.CUDA, Node: 2}},
		Rings: RingRefs{
			Events:    base.Span{Offset: 1, Size: 2},
			Decisions: base.Span{Offset: 3, Size: 1 << 50},
			Bell:      5,
			CoreBell:  6,
		},
		QueueDepth:  4,
		SpinIters:   -1,
		WorkerRings: []WorkerRing{{Worker: 7, Ring: base.Span{Offset: 8, Size: 9}, Bell: 10}},
	}
	if err := s.Init(ctx, req); err != nil || !reflect.DeepEqual(rec.init, req) {
		t.Fatalf("Init: %v; scheduler got %+v", err, rec.init)
	}
	if err := s.Deinit(ctx); err != nil || rec.deinits != 1 {
		t.Fatalf("Deinit: %v, %d calls", err, rec.deinits)
	}
	rec.err = errors.New("queue depth 0: must be at least 1")
	want := rec.err.Error()
	if remote {
		want = "plugin sched-rec: " + want
	}
	for name, err := range map[string]error{"Init": s.Init(ctx, req), "Deinit": s.Deinit(ctx)} {
		var re *base.RemoteError
		if err == nil || err.Error() != want || remote != errors.As(err, &re) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
	rec.err = nil
}

func TestSchedInProcess(t *testing.T) {
	rec := &recSched{}
	exercise(t, rec, rec, false)
}

func TestSchedGRPC(t *testing.T) {
	rec := &recSched{}
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"sched": &Plugin{Impl: rec, Name: "sched-rec"}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("sched")
	if err != nil {
		t.Fatal(err)
	}
	s := raw.(*Client)
	exercise(t, s, rec, true)
	if err := s.Init(context.Background(), nil); err != nil || !reflect.DeepEqual(rec.init, &InitRequest{}) {
		t.Fatalf("Init(nil): %v; scheduler got %+v", err, rec.init)
	}
}

// Every field of InitRequest survives the wire, including fields added to
// sched.go later.
func TestSchedEveryField(t *testing.T) {
	rec := &recSched{}
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"sched": &Plugin{Impl: rec}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("sched")
	if err != nil {
		t.Fatal(err)
	}
	var req InitRequest
	fill.Fill(&req)
	if err := raw.(Scheduler).Init(context.Background(), &req); err != nil || !reflect.DeepEqual(*rec.init, req) {
		t.Fatalf("Init:\n got %+v, %v\nwant %+v", rec.init, err, req)
	}
}
