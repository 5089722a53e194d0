package sched

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched/proto"
)

// Client implements Scheduler over a gRPC connection to a scheduler plugin
// process, so that the core drives an out-of-process policy exactly as an
// in-process Host. Errors from the plugin come back as *base.RemoteError
// with the plugin's message intact, prefixed "plugin sched-<name>: ".
type Client struct {
	*base.BasePluginClient
	client proto.SchedulerClient
}

var _ Scheduler = (*Client)(nil)

// NewClient returns a Scheduler for the plugin at the other end of conn.
// doneCtx is cancelled when the plugin process exits (may be nil); name
// labels the plugin in errors ("sched-ws"), or is learnt from PluginInfo
// when empty.
func NewClient(conn grpc.ClientConnInterface, doneCtx context.Context, name string) *Client {
	return &Client{
		BasePluginClient: base.NewBasePluginClient(conn, doneCtx, name, string(base.KindScheduler)),
		client:           proto.NewSchedulerClient(conn),
	}
}

// Init implements Scheduler.
func (c *Client) Init(ctx context.Context, req *InitRequest) error {
	_, err := c.client.Init(ctx, initToProto(req))
	return c.Err(ctx, err)
}

// Deinit implements Scheduler.
func (c *Client) Deinit(ctx context.Context) error {
	_, err := c.client.Deinit(ctx, &proto.DeinitRequest{})
	return c.Err(ctx, err)
}

func initToProto(req *InitRequest) *proto.InitRequest {
	out := &proto.InitRequest{Rings: &proto.RingRefs{}}
	if req == nil {
		return out
	}
	for _, w := range req.Workers {
		out.Workers = append(out.Workers, &proto.Worker{Id: int64(w.ID), Arch: string(w.Arch), Node: int64(w.Node)})
	}
	out.Rings = &proto.RingRefs{
		Events:    base.SpanToProto(req.Rings.Events),
		Decisions: base.SpanToProto(req.Rings.Decisions),
		Bell:      req.Rings.Bell,
		CoreBell:  req.Rings.CoreBell,
	}
	out.QueueDepth = int64(req.QueueDepth)
	out.SpinIters = int64(req.SpinIters)
	out.MaxQueueDepth = int64(req.MaxQueueDepth)
	out.QueuedWorkNs = req.QueuedWork.Nanoseconds()
	for _, r := range req.WorkerRings {
		out.WorkerRings = append(out.WorkerRings, &proto.WorkerRing{Worker: int64(r.Worker), Ring: base.SpanToProto(r.Ring), Bell: r.Bell})
	}
	return out
}

func initFromProto(req *proto.InitRequest) *InitRequest {
	out := &InitRequest{
		Rings: RingRefs{
			Events:    base.SpanFromProto(req.GetRings().GetEvents()),
			Decisions: base.SpanFromProto(req.GetRings().GetDecisions()),
			Bell:      req.GetRings().GetBell(),
			CoreBell:  req.GetRings().GetCoreBell(),
		},
		QueueDepth:    int(req.GetQueueDepth()),
		SpinIters:     int(req.GetSpinIters()),
		MaxQueueDepth: int(req.GetMaxQueueDepth()),
		QueuedWork:    time.Duration(req.GetQueuedWorkNs()),
	}
	for _, w := range req.GetWorkers() {
		out.Workers = append(out.Workers, Worker{ID: int(w.GetId()), Arch: driver.Arch(w.GetArch()), Node: int(w.GetNode())})
	}
	for _, r := range req.GetWorkerRings() {
		out.WorkerRings = append(out.WorkerRings, WorkerRing{Worker: int(r.GetWorker()), Ring: base.SpanFromProto(r.GetRing()), Bell: r.GetBell()})
	}
	return out
}
