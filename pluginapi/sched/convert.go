// Converters between the scheduler contract's Go types and its protobuf
// messages; the client and server adapters both use them.

package sched

import (
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched/proto"
)

// initToProto converts an Init request for the wire; a nil request is an
// empty one, with empty ring references.
func initToProto(req *InitRequest) *proto.InitRequest {
	out := &proto.InitRequest{Rings: &proto.RingRefs{}}
	if req == nil {
		return out
	}
	for _, w := range req.Workers {
		out.Workers = append(out.Workers, workerToProto(w))
	}
	for _, w := range req.Combined {
		out.Combined = append(out.Combined, workerToProto(w))
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

// initFromProto converts an Init request from the wire; missing fields,
// ring spans included, are zero.
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
		out.Workers = append(out.Workers, workerFromProto(w))
	}
	for _, w := range req.GetCombined() {
		out.Combined = append(out.Combined, workerFromProto(w))
	}
	for _, r := range req.GetWorkerRings() {
		out.WorkerRings = append(out.WorkerRings, WorkerRing{Worker: int(r.GetWorker()), Ring: base.SpanFromProto(r.GetRing()), Bell: r.GetBell()})
	}
	return out
}

func workerToProto(w Worker) *proto.Worker {
	p := &proto.Worker{Id: int64(w.ID), Arch: string(w.Arch), Node: int64(w.Node)}
	for _, m := range w.Members {
		p.Members = append(p.Members, int64(m))
	}
	return p
}

func workerFromProto(p *proto.Worker) Worker {
	w := Worker{ID: int(p.GetId()), Arch: driver.Arch(p.GetArch()), Node: int(p.GetNode())}
	for _, m := range p.GetMembers() {
		w.Members = append(w.Members, int(m))
	}
	return w
}
