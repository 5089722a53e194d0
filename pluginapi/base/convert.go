// Converters between the base contract's Go types and its protobuf
// messages; the client and server adapters of every kind use them.

package base

import "github.com/starpu-go/starpu/pluginapi/base/proto"

// SpanToProto converts a Span for the wire.
func SpanToProto(s Span) *proto.Span { return &proto.Span{Offset: s.Offset, Size: s.Size} }

// SpanFromProto converts a Span from the wire; a missing span is the zero
// Span.
func SpanFromProto(s *proto.Span) Span { return Span{Offset: s.GetOffset(), Size: s.GetSize()} }

// pluginInfoToProto converts a plugin's Info for the wire; info must not be
// nil.
func pluginInfoToProto(info *Info) *proto.PluginInfoResponse {
	resp := &proto.PluginInfoResponse{
		Kind:        string(info.Kind),
		Name:        info.Name,
		Version:     info.Version,
		Description: info.Description,
	}
	for _, v := range info.APIVersions {
		resp.ApiVersions = append(resp.ApiVersions, int32(v))
	}
	return resp
}

// pluginInfoFromProto converts a PluginInfo reply, unchecked
// (pluginInfoReply checks it); a nil reply is the zero Info.
func pluginInfoFromProto(resp *proto.PluginInfoResponse) *Info {
	info := &Info{
		Kind:        Kind(resp.GetKind()),
		Name:        resp.GetName(),
		Version:     resp.GetVersion(),
		Description: resp.GetDescription(),
	}
	for _, v := range resp.GetApiVersions() {
		info.APIVersions = append(info.APIVersions, int(v))
	}
	return info
}

// configSchemaToProto converts a configuration schema for the wire; a nil
// schema is an empty one.
func configSchemaToProto(schema *Schema) *proto.ConfigSchemaResponse {
	resp := &proto.ConfigSchemaResponse{}
	if schema == nil {
		return resp
	}
	for _, a := range schema.Attrs {
		resp.Attrs = append(resp.Attrs, attrToProto(a))
	}
	return resp
}

// configSchemaFromProto converts a ConfigSchema reply, unchecked
// (configSchemaReply checks it); a nil reply is an empty schema.
func configSchemaFromProto(resp *proto.ConfigSchemaResponse) *Schema {
	s := &Schema{}
	for _, a := range resp.GetAttrs() {
		s.Attrs = append(s.Attrs, attrFromProto(a))
	}
	return s
}

// attrToProto converts one schema attribute for the wire.
func attrToProto(a Attr) *proto.Attr {
	return &proto.Attr{
		Name:     a.Name,
		Type:     string(a.Type),
		Default:  a.Default,
		Required: a.Required,
		Doc:      a.Doc,
	}
}

// attrFromProto converts one schema attribute from the wire, unchecked; a
// missing attribute is the zero Attr.
func attrFromProto(a *proto.Attr) Attr {
	return Attr{
		Name:     a.GetName(),
		Type:     AttrType(a.GetType()),
		Default:  a.GetDefault(),
		Required: a.GetRequired(),
		Doc:      a.GetDoc(),
	}
}
