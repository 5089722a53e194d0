// Converters between the driver contract's Go types and its protobuf
// messages; the client and server adapters both use them.

package driver

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// fingerprintFromProto converts a Fingerprint reply, unchecked.
func fingerprintFromProto(resp *proto.FingerprintResponse) *Fingerprint {
	fp := &Fingerprint{Arch: Arch(resp.GetArch()), Kernels: resp.GetKernels(), Note: resp.GetNote(), SchedRing: resp.GetSchedRing()}
	for _, u := range resp.GetUnits() {
		fp.Units = append(fp.Units, Unit{Name: u.GetName(), Node: int(u.GetNode())})
	}
	for _, n := range resp.GetNodes() {
		fp.Nodes = append(fp.Nodes, MemoryNode{Name: n.GetName(), Bytes: n.GetBytes()})
	}
	return fp
}

// initToProto converts an Init request for the wire; a nil request is an
// empty one.
func initToProto(req *InitRequest) *proto.InitRequest {
	out := &proto.InitRequest{}
	if req == nil {
		return out
	}
	out.SpinIters = int64(req.SpinIters)
	for _, w := range req.Workers {
		out.Workers = append(out.Workers, &proto.WorkerSpec{
			Id:         int64(w.ID),
			Unit:       int64(w.Unit),
			Dispatch:   base.SpanToProto(w.Dispatch),
			Completion: base.SpanToProto(w.Completion),
			Bell:       w.Bell,
			CoreBell:   w.CoreBell,
			SchedRing:  base.SpanToProto(w.SchedRing),
		})
	}
	return out
}

// initFromProto converts an Init request from the wire; missing fields are
// zero.
func initFromProto(req *proto.InitRequest) *InitRequest {
	out := &InitRequest{SpinIters: int(req.GetSpinIters())}
	for _, w := range req.GetWorkers() {
		out.Workers = append(out.Workers, WorkerSpec{
			ID:         int(w.GetId()),
			Unit:       int(w.GetUnit()),
			Dispatch:   base.SpanFromProto(w.GetDispatch()),
			Completion: base.SpanFromProto(w.GetCompletion()),
			Bell:       w.GetBell(),
			CoreBell:   w.GetCoreBell(),
			SchedRing:  base.SpanFromProto(w.GetSchedRing()),
		})
	}
	return out
}
