// Converters between the base contract's Go types and its protobuf
// messages; the client and server adapters of every kind use them.

package base

import "github.com/starpu-go/starpu/pluginapi/base/proto"

// SpanToProto converts a Span for the wire.
func SpanToProto(s Span) *proto.Span { return &proto.Span{Offset: s.Offset, Size: s.Size} }

// SpanFromProto converts a Span from the wire; a missing span is the zero
// Span.
func SpanFromProto(s *proto.Span) Span { return Span{Offset: s.GetOffset(), Size: s.GetSize()} }
