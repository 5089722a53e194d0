package driver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// Server serves a Driver as the Driver gRPC service, in the plugin process.
// Errors of the implementation go back with their message intact
// (base.StatusError).
type Server struct {
	proto.UnimplementedDriverServer
	// Impl is the driver served.
	Impl Driver
}

// NewServer returns the Driver service for impl.
func NewServer(impl Driver) *Server { return &Server{Impl: impl} }

// Fingerprint implements proto.DriverServer.
func (s *Server) Fingerprint(ctx context.Context, _ *proto.FingerprintRequest) (*proto.FingerprintResponse, error) {
	fp, err := s.Impl.Fingerprint(ctx)
	if err != nil {
		return nil, base.StatusError(err)
	}
	if fp == nil {
		return nil, status.Error(codes.Internal, "Fingerprint returned no fingerprint")
	}
	return fingerprintToProto(fp), nil
}

// Init implements proto.DriverServer.
func (s *Server) Init(ctx context.Context, req *proto.InitRequest) (*proto.InitResponse, error) {
	if err := s.Impl.Init(ctx, initFromProto(req)); err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.InitResponse{}, nil
}

// Deinit implements proto.DriverServer.
func (s *Server) Deinit(ctx context.Context, _ *proto.DeinitRequest) (*proto.DeinitResponse, error) {
	if err := s.Impl.Deinit(ctx); err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.DeinitResponse{}, nil
}

// LoadKernel implements proto.DriverServer.
func (s *Server) LoadKernel(ctx context.Context, req *proto.LoadKernelRequest) (*proto.LoadKernelResponse, error) {
	idx, err := s.Impl.LoadKernel(ctx, kernelSourceFromProto(req))
	if err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.LoadKernelResponse{Index: int64(idx)}, nil
}
