package base

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/starpu-go/starpu/pluginapi/base/proto"
)

// BasePluginServer serves a Plugin as the BasePlugin gRPC service, in the
// plugin process. The server adapter of every kind registers it next to the
// kind's own service.
type BasePluginServer struct {
	proto.UnimplementedBasePluginServer
	// Impl is the plugin being served.
	Impl Plugin
}

// NewBasePluginServer returns the BasePlugin service for impl.
func NewBasePluginServer(impl Plugin) *BasePluginServer {
	return &BasePluginServer{Impl: impl}
}

// StatusError turns an error of a plugin implementation into the gRPC
// status the server returns, keeping its message intact: the client makes
// it a *RemoteError with the same message. Context cancellation and
// deadlines keep their gRPC codes; an error that already is a gRPC status
// is returned as is; anything else is codes.Unknown.
func StatusError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

// PluginInfo implements proto.BasePluginServer.
func (s *BasePluginServer) PluginInfo(ctx context.Context, _ *proto.PluginInfoRequest) (*proto.PluginInfoResponse, error) {
	info, err := s.Impl.PluginInfo(ctx)
	if err != nil {
		return nil, StatusError(err)
	}
	if info == nil {
		return nil, status.Error(codes.Internal, "PluginInfo returned no info")
	}
	return pluginInfoToProto(info), nil
}

// ConfigSchema implements proto.BasePluginServer. A nil schema is sent as an
// empty one.
func (s *BasePluginServer) ConfigSchema(ctx context.Context, _ *proto.ConfigSchemaRequest) (*proto.ConfigSchemaResponse, error) {
	schema, err := s.Impl.ConfigSchema(ctx)
	if err != nil {
		return nil, StatusError(err)
	}
	return configSchemaToProto(schema), nil
}

// SetConfig implements proto.BasePluginServer.
func (s *BasePluginServer) SetConfig(ctx context.Context, req *proto.SetConfigRequest) (*proto.SetConfigResponse, error) {
	cfg, err := UnmarshalConfig(req.GetConfigJson())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.Impl.SetConfig(ctx, cfg); err != nil {
		return nil, StatusError(err)
	}
	return &proto.SetConfigResponse{}, nil
}
