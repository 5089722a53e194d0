package sched

import (
	"context"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched/proto"
)

// Server serves a Scheduler as the Scheduler gRPC service, in the plugin
// process. Errors of the implementation go back with their message intact
// (base.StatusError).
type Server struct {
	proto.UnimplementedSchedulerServer
	// Impl is the scheduler served.
	Impl Scheduler
}

// NewServer returns the Scheduler service for impl.
func NewServer(impl Scheduler) *Server { return &Server{Impl: impl} }

// Init implements proto.SchedulerServer.
func (s *Server) Init(ctx context.Context, req *proto.InitRequest) (*proto.InitResponse, error) {
	if err := s.Impl.Init(ctx, initFromProto(req)); err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.InitResponse{}, nil
}

// Deinit implements proto.SchedulerServer.
func (s *Server) Deinit(ctx context.Context, _ *proto.DeinitRequest) (*proto.DeinitResponse, error) {
	if err := s.Impl.Deinit(ctx); err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.DeinitResponse{}, nil
}
