package driver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// Client implements Driver over a gRPC connection to a driver plugin
// process, so that the core drives an out-of-process driver exactly as an
// in-process one. Errors from the plugin come back as *base.RemoteError with
// the plugin's message intact, prefixed "plugin driver-<name>: ".
type Client struct {
	*base.BasePluginClient
	client proto.DriverClient
}

var _ Driver = (*Client)(nil)

// NewClient returns a Driver for the plugin at the other end of conn.
// doneCtx is cancelled when the plugin process exits (may be nil); name
// labels the plugin in errors ("driver-cpu"), or is learnt from PluginInfo
// when empty.
func NewClient(conn grpc.ClientConnInterface, doneCtx context.Context, name string) *Client {
	return &Client{
		BasePluginClient: base.NewBasePluginClient(conn, doneCtx, name, string(base.KindDriver)),
		client:           proto.NewDriverClient(conn),
	}
}

// Fingerprint implements Driver.
func (c *Client) Fingerprint(ctx context.Context) (*Fingerprint, error) {
	resp, err := c.client.Fingerprint(ctx, &proto.FingerprintRequest{})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	fp := &Fingerprint{Arch: Arch(resp.GetArch()), Kernels: resp.GetKernels(), Note: resp.GetNote(), SchedRing: resp.GetSchedRing()}
	for _, u := range resp.GetUnits() {
		fp.Units = append(fp.Units, Unit{Name: u.GetName(), Node: int(u.GetNode())})
	}
	for _, n := range resp.GetNodes() {
		fp.Nodes = append(fp.Nodes, MemoryNode{Name: n.GetName(), Bytes: n.GetBytes()})
	}
	return fp, nil
}

// Init implements Driver.
func (c *Client) Init(ctx context.Context, req *InitRequest) error {
	_, err := c.client.Init(ctx, initToProto(req))
	return c.Err(ctx, err)
}

// Deinit implements Driver.
func (c *Client) Deinit(ctx context.Context) error {
	_, err := c.client.Deinit(ctx, &proto.DeinitRequest{})
	return c.Err(ctx, err)
}

// LoadKernel implements Driver.
func (c *Client) LoadKernel(ctx context.Context, k KernelSource) (int, error) {
	resp, err := c.client.LoadKernel(ctx, &proto.LoadKernelRequest{Name: k.Name, Source: k.Source})
	if err != nil {
		return 0, c.Err(ctx, err)
	}
	return int(resp.GetIndex()), nil
}

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
