// Converters between the driver contract's Go types and its protobuf
// messages; the client and server adapters both use them.

package driver

import (
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// fingerprintToProto converts a fingerprint for the wire; fp must not be
// nil.
func fingerprintToProto(fp *Fingerprint) *proto.FingerprintResponse {
	resp := &proto.FingerprintResponse{Arch: string(fp.Arch), Kernels: fp.Kernels, Note: fp.Note, SchedRing: fp.SchedRing, Parallel: fp.Parallel}
	for _, u := range fp.Units {
		resp.Units = append(resp.Units, &proto.Unit{Name: u.Name, Node: int64(u.Node)})
	}
	for _, n := range fp.Nodes {
		pn := &proto.MemoryNode{Name: n.Name, Bytes: n.Bytes}
		for _, p := range n.Peers {
			pn.Peers = append(pn.Peers, int64(p))
		}
		resp.Nodes = append(resp.Nodes, pn)
	}
	return resp
}

// fingerprintFromProto converts a Fingerprint reply, unchecked
// (fingerprintReply checks it); a nil reply is the zero fingerprint.
func fingerprintFromProto(resp *proto.FingerprintResponse) *Fingerprint {
	fp := &Fingerprint{Arch: Arch(resp.GetArch()), Kernels: resp.GetKernels(), Note: resp.GetNote(), SchedRing: resp.GetSchedRing(), Parallel: resp.GetParallel()}
	for _, u := range resp.GetUnits() {
		fp.Units = append(fp.Units, Unit{Name: u.GetName(), Node: int(u.GetNode())})
	}
	for _, n := range resp.GetNodes() {
		mn := MemoryNode{Name: n.GetName(), Bytes: n.GetBytes()}
		for _, p := range n.GetPeers() {
			mn.Peers = append(mn.Peers, int(p))
		}
		fp.Nodes = append(fp.Nodes, mn)
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

// kernelSourceToProto converts a kernel's source into a LoadKernel request.
func kernelSourceToProto(k KernelSource) *proto.LoadKernelRequest {
	return &proto.LoadKernelRequest{Name: k.Name, Source: k.Source}
}

// kernelSourceFromProto converts a LoadKernel request into the kernel's
// source; missing fields are empty.
func kernelSourceFromProto(req *proto.LoadKernelRequest) KernelSource {
	return KernelSource{Name: req.GetName(), Source: req.GetSource()}
}
