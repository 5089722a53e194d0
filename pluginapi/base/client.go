package base

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/starpu-go/starpu/pluginapi/base/proto"
)

// ErrPluginExited is wrapped by the errors of calls made to a plugin whose
// process has exited or whose connection is lost: errors.Is(err,
// ErrPluginExited) tells a crashed plugin from a plugin that refused a call.
var ErrPluginExited = errors.New("plugin process exited")

// ErrBadReply is wrapped by the errors of calls that the plugin answered
// with a reply the core cannot use: a missing message, a number out of
// range, an index past a list, a count that does not match the request.
// errors.Is(err, ErrBadReply) tells a plugin that answered nonsense from
// one that refused the call (*RemoteError) or died (ErrPluginExited).
var ErrBadReply = errors.New("invalid reply")

// clientConnClosing is the message of grpc.ErrClientConnClosing (deprecated
// as a value), which a call on a closed connection fails with.
const clientConnClosing = "grpc: the client connection is closing"

// RemoteError is an error returned by the plugin side of a call: Message is
// the plugin's error text, intact. Its Error() is "plugin <kind>-<name>:
// <message>".
type RemoteError struct {
	// Plugin names the plugin, "<kind>-<name>" (for example "sched-ws").
	Plugin string
	// Code is the gRPC status code; codes.Unknown for an ordinary error
	// returned by the plugin's implementation.
	Code codes.Code
	// Message is the plugin's error message.
	Message string
}

// Error implements error.
func (e *RemoteError) Error() string { return "plugin " + e.Plugin + ": " + e.Message }

// Unwrap makes a call that failed on a deadline or a cancellation match
// context.DeadlineExceeded or context.Canceled with errors.Is, whichever
// side noticed it first.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Canceled:
		return context.Canceled
	}
	return nil
}

// BasePluginClient implements Plugin over a gRPC connection to a plugin
// process. The client adapter of every kind embeds it, so the base methods
// come with every kind, and uses Err to turn gRPC errors into errors that
// name the plugin.
type BasePluginClient struct {
	client proto.BasePluginClient
	// doneCtx is go-plugin's context, cancelled when the plugin process
	// has exited.
	doneCtx context.Context
	label   atomic.Pointer[string]
	// learn is set when no label was given: PluginInfo then sets it.
	learn bool
}

// NewBasePluginClient returns a client for the BasePlugin service on conn.
// doneCtx is cancelled when the plugin process exits (go-plugin passes it
// to GRPCPlugin.GRPCClient); it may be nil. label names the plugin in
// errors ("driver-cpu"); when it is empty the client says fallback (the
// kind, say) until a PluginInfo call tells it the plugin's kind and name.
func NewBasePluginClient(conn grpc.ClientConnInterface, doneCtx context.Context, label, fallback string) *BasePluginClient {
	if doneCtx == nil {
		doneCtx = context.Background()
	}
	c := &BasePluginClient{client: proto.NewBasePluginClient(conn), doneCtx: doneCtx}
	if label != "" {
		c.label.Store(&label)
	} else {
		c.label.Store(&fallback)
		c.learn = true
	}
	return c
}

// Label is the name the client gives the plugin in errors, "<kind>-<name>".
func (c *BasePluginClient) Label() string {
	return *c.label.Load()
}

// Done is closed when the plugin process has exited.
func (c *BasePluginClient) Done() <-chan struct{} { return c.doneCtx.Done() }

// Err turns the error of a gRPC call made with ctx into the error the Go
// interface returns: nil stays nil; a lost connection or an exited plugin
// wraps ErrPluginExited; anything else is a *RemoteError carrying the
// plugin's message intact, which matches context.DeadlineExceeded or
// context.Canceled when the call ran out of time or was cancelled.
func (c *BasePluginClient) Err(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	label := c.Label()
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("plugin %s: %w", label, err)
	}
	switch {
	case st.Code() == codes.Unavailable:
		// On a local socket, unavailable means the process is gone or going.
		return fmt.Errorf("plugin %s: %w (%s)", label, ErrPluginExited, st.Message())
	case st.Code() == codes.Canceled && (ctx == nil || ctx.Err() == nil) &&
		(c.doneCtx.Err() != nil || st.Message() == clientConnClosing):
		// Not the caller's cancellation: the connection was closed, by
		// go-plugin because the process exited or by Kill.
		return fmt.Errorf("plugin %s: %w", label, ErrPluginExited)
	}
	return &RemoteError{Plugin: label, Code: st.Code(), Message: st.Message()}
}

// BadReply is the error a client adapter returns when the plugin's reply
// to call (the Go method's name: "Fingerprint", "Describe") fails the
// adapter's checks: "plugin <kind>-<name>: <call>: invalid reply: <why>",
// wrapping ErrBadReply and why.
func (c *BasePluginClient) BadReply(call string, why error) error {
	return fmt.Errorf("plugin %s: %s: %w: %w", c.Label(), call, ErrBadReply, why)
}

// PluginInfo implements Plugin. A reply with an empty or unprintable kind or
// name, or an API version below 1, is an error wrapping ErrBadReply.
func (c *BasePluginClient) PluginInfo(ctx context.Context) (*Info, error) {
	resp, err := c.client.PluginInfo(ctx, &proto.PluginInfoRequest{})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	info, err := pluginInfoReply(resp)
	if err != nil {
		return nil, c.BadReply("PluginInfo", err)
	}
	if c.learn {
		l := string(info.Kind) + "-" + info.Name
		c.label.Store(&l)
	}
	return info, nil
}

// maxLabelPart bounds a plugin's kind and name: together they make a file
// name, "<kind>-<name>", and they label every error and log line.
const maxLabelPart = 255

// pluginInfoReply converts and checks a PluginInfo reply: kind and name
// are what the plugin's label and binary name are made of, so they must be
// non-empty, printable and free of spaces and slashes; API versions start
// at 1; the description is one printable line (checkDescription).
func pluginInfoReply(resp *proto.PluginInfoResponse) (*Info, error) {
	if resp == nil {
		return nil, errors.New("no info")
	}
	if err := checkLabelPart("kind", resp.GetKind()); err != nil {
		return nil, err
	}
	if err := checkLabelPart("name", resp.GetName()); err != nil {
		return nil, err
	}
	for i, v := range resp.GetApiVersions() {
		if v < 1 {
			return nil, fmt.Errorf("API version %d is %d; versions start at 1", i, v)
		}
	}
	if err := checkDescription(resp.GetDescription()); err != nil {
		return nil, err
	}
	return pluginInfoFromProto(resp), nil
}

// checkDescription checks a plugin's description: one line of printable
// text, at most MaxDescription bytes, since listings print it to a
// terminal as it comes.
func checkDescription(s string) error {
	if len(s) > MaxDescription {
		return fmt.Errorf("description of %d bytes, more than %d", len(s), MaxDescription)
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return fmt.Errorf("description %q: it may not hold %q", s, r)
		}
	}
	return nil
}

// checkLabelPart checks a plugin's kind or name (what says which) as
// pluginInfoReply describes.
func checkLabelPart(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty %s", what)
	case len(s) > maxLabelPart:
		return fmt.Errorf("%s of %d bytes, more than %d", what, len(s), maxLabelPart)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/' {
			return fmt.Errorf("%s %q: it may not hold %q", what, s, r)
		}
	}
	return nil
}

// ConfigSchema implements Plugin. A schema with an attribute that has no
// name, a name given twice or a type other than the AttrType constants is
// an error wrapping ErrBadReply: the core checks the user's configuration
// against it, and would otherwise blame the user.
func (c *BasePluginClient) ConfigSchema(ctx context.Context) (*Schema, error) {
	resp, err := c.client.ConfigSchema(ctx, &proto.ConfigSchemaRequest{})
	if err != nil {
		return nil, c.Err(ctx, err)
	}
	s, err := configSchemaReply(resp)
	if err != nil {
		return nil, c.BadReply("ConfigSchema", err)
	}
	return s, nil
}

// configSchemaReply converts and checks a ConfigSchema reply (see
// ConfigSchema); a nil reply is an empty schema.
func configSchemaReply(resp *proto.ConfigSchemaResponse) (*Schema, error) {
	s := configSchemaFromProto(resp)
	seen := make(map[string]bool, len(s.Attrs))
	for i, attr := range s.Attrs {
		switch {
		case attr.Name == "":
			return nil, fmt.Errorf("attribute %d has no name", i)
		case seen[attr.Name]:
			return nil, fmt.Errorf("attribute %q is listed twice", attr.Name)
		}
		switch attr.Type {
		case AttrString, AttrInt, AttrFloat, AttrBool:
		default:
			return nil, fmt.Errorf("attribute %q has type %q, not one of %s, %s, %s, %s",
				attr.Name, attr.Type, AttrString, AttrInt, AttrFloat, AttrBool)
		}
		seen[attr.Name] = true
	}
	return s, nil
}

// SetConfig implements Plugin. The configuration travels as JSON
// (MarshalConfig); the plugin side decodes it with UnmarshalConfig, so whole
// numbers arrive as int64.
func (c *BasePluginClient) SetConfig(ctx context.Context, cfg Config) error {
	b, err := MarshalConfig(cfg)
	if err != nil {
		return fmt.Errorf("plugin %s: encode config: %w", c.Label(), err)
	}
	_, err = c.client.SetConfig(ctx, &proto.SetConfigRequest{ConfigJson: b})
	return c.Err(ctx, err)
}
