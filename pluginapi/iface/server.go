package iface

import (
	"context"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface/proto"
)

// Server serves an Interface as the Interface gRPC service, in the plugin
// process. Errors of the implementation go back with their message intact
// (base.StatusError).
type Server struct {
	proto.UnimplementedInterfaceServer
	// Impl is the interface served.
	Impl Interface
}

// NewServer returns the Interface service for impl.
func NewServer(impl Interface) *Server { return &Server{Impl: impl} }

// Describe implements proto.InterfaceServer.
func (s *Server) Describe(ctx context.Context, req *proto.DescribeRequest) (*proto.DescribeResponse, error) {
	d, err := s.Impl.Describe(ctx, req.GetMeta(), spansFromProto(req.GetParts()))
	if err != nil {
		return nil, base.StatusError(err)
	}
	if d == nil {
		return nil, status.Error(codes.Internal, "Describe returned no description")
	}
	return &proto.DescribeResponse{Description: descriptionToProto(d)}, nil
}

// CopyPlan implements proto.InterfaceServer.
func (s *Server) CopyPlan(ctx context.Context, req *proto.CopyPlanRequest) (*proto.CopyPlanResponse, error) {
	plan, err := s.Impl.CopyPlan(ctx, req.GetMeta())
	if err != nil {
		return nil, base.StatusError(err)
	}
	return copyPlanToProto(plan), nil
}

// Pack implements proto.InterfaceServer.
func (s *Server) Pack(ctx context.Context, req *proto.PackRequest) (*proto.PackResponse, error) {
	n, err := s.Impl.Pack(ctx, req.GetMeta(), spansFromProto(req.GetParts()), base.SpanFromProto(req.GetDst()))
	if err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.PackResponse{Len: n}, nil
}

// Unpack implements proto.InterfaceServer.
func (s *Server) Unpack(ctx context.Context, req *proto.UnpackRequest) (*proto.UnpackResponse, error) {
	if err := s.Impl.Unpack(ctx, req.GetMeta(), base.SpanFromProto(req.GetSrc()), spansFromProto(req.GetParts())); err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.UnpackResponse{}, nil
}

// Compare implements proto.InterfaceServer.
func (s *Server) Compare(ctx context.Context, req *proto.CompareRequest) (*proto.CompareResponse, error) {
	eq, err := s.Impl.Compare(ctx, req.GetA(), req.GetB())
	if err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.CompareResponse{Equal: eq}, nil
}

// Display implements proto.InterfaceServer.
func (s *Server) Display(ctx context.Context, req *proto.DisplayRequest) (*proto.DisplayResponse, error) {
	text, err := s.Impl.Display(ctx, req.GetMeta())
	if err != nil {
		return nil, base.StatusError(err)
	}
	return &proto.DisplayResponse{Text: text}, nil
}

// Partition implements proto.InterfaceServer.
func (s *Server) Partition(ctx context.Context, req *proto.PartitionRequest) (*proto.PartitionResponse, error) {
	nparts := req.GetNparts()
	if nparts < 0 || nparts > math.MaxInt32 {
		return nil, status.Errorf(codes.InvalidArgument, "partition: %d parts", nparts)
	}
	children, err := s.Impl.Partition(ctx, req.GetFilter(), req.GetMeta(), spansFromProto(req.GetParts()), int(nparts))
	if err != nil {
		return nil, base.StatusError(err)
	}
	return childrenToProto(children), nil
}
