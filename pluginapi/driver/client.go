package driver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// Client implements Driver over a gRPC connection to a driver plugin
// process, so that the core drives an out-of-process driver exactly as an
// in-process one. Errors from the plugin come back as *base.RemoteError with
// the plugin's message intact, prefixed "plugin driver-<name>: ".
//
// Replies are checked before they are returned: a fingerprint that fails
// Fingerprint.Check, or a kernel index out of range, is an error wrapping
// base.ErrBadReply that names the plugin and the call.
type Client struct {
	*base.BasePluginClient
	client proto.DriverClient
	// builtins is the number of kernels in the last fingerprint the
	// plugin sent: LoadKernel's indices come after them.
	builtins atomic.Int64
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
	fp, err := fingerprintReply(resp)
	if err != nil {
		return nil, c.BadReply("Fingerprint", err)
	}
	c.builtins.Store(int64(len(fp.Kernels)))
	return fp, nil
}

// fingerprintReply converts a Fingerprint reply and checks it
// (Fingerprint.Check).
func fingerprintReply(resp *proto.FingerprintResponse) (*Fingerprint, error) {
	if resp == nil {
		return nil, errors.New("no fingerprint")
	}
	fp := fingerprintFromProto(resp)
	if err := fp.Check(); err != nil {
		return nil, err
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

// LoadKernel implements Driver. An index below the number of kernels of
// the plugin's last fingerprint (it would name a built-in kernel) or above
// math.MaxInt32 (Exec messages carry 32 bits) is an error wrapping
// base.ErrBadReply.
func (c *Client) LoadKernel(ctx context.Context, k KernelSource) (int, error) {
	resp, err := c.client.LoadKernel(ctx, kernelSourceToProto(k))
	if err != nil {
		return 0, c.Err(ctx, err)
	}
	idx, err := loadKernelReply(resp, c.builtins.Load())
	if err != nil {
		return 0, c.BadReply("LoadKernel", fmt.Errorf("kernel %q: %w", k.Name, err))
	}
	return idx, nil
}

// loadKernelReply converts and checks a LoadKernel reply: the index lies in
// [builtins, math.MaxInt32], builtins being the kernels the driver's
// fingerprint listed.
func loadKernelReply(resp *proto.LoadKernelResponse, builtins int64) (int, error) {
	if resp == nil {
		return 0, errors.New("no index")
	}
	idx := resp.GetIndex()
	switch {
	case idx < 0:
		return 0, fmt.Errorf("negative index %d", idx)
	case idx < builtins:
		return 0, fmt.Errorf("index %d names one of the %d built-in kernels of the fingerprint", idx, builtins)
	case idx > math.MaxInt32:
		return 0, fmt.Errorf("index %d is past %d", idx, math.MaxInt32)
	}
	return int(idx), nil
}
