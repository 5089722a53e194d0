package base

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	gproto "google.golang.org/protobuf/proto"

	"github.com/starpu-go/starpu/pluginapi/base/proto"
)

// addSeeds adds each message, encoded, to f's corpus.
func addSeeds[M gproto.Message](f *testing.F, msgs ...M) {
	for _, m := range msgs {
		b, err := gproto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzPluginInfoReply decodes random bytes as a PluginInfo reply and runs
// them through the client's check: it never panics, and an accepted reply
// has a printable kind and name without spaces or slashes, positive API
// versions, and survives the server's encoding unchanged.
func FuzzPluginInfoReply(f *testing.F) {
	addSeeds(f,
		&proto.PluginInfoResponse{Kind: "driver", Name: "cpu", Version: "1.0", ApiVersions: []int32{1}},
		&proto.PluginInfoResponse{Kind: "sched", Name: "ws", ApiVersions: []int32{1, 2, 3}, Description: "work stealing"},
		&proto.PluginInfoResponse{Kind: "sched", Name: "ws", ApiVersions: []int32{1}, Description: "two\nlines"},
		&proto.PluginInfoResponse{Kind: "iface", Name: "c s r", ApiVersions: []int32{0, -1}},
		&proto.PluginInfoResponse{},
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		var resp proto.PluginInfoResponse
		if gproto.Unmarshal(b, &resp) != nil {
			return
		}
		info, err := pluginInfoReply(&resp)
		if err != nil {
			if info != nil {
				t.Fatalf("rejected with %v, yet returned %+v", err, info)
			}
			return
		}
		for what, s := range map[string]string{"kind": string(info.Kind), "name": info.Name} {
			if s == "" || len(s) > maxLabelPart || !utf8.ValidString(s) || strings.ContainsAny(s, "/") ||
				strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
				t.Fatalf("accepted %s %q", what, s)
			}
		}
		for _, v := range info.APIVersions {
			if v < 1 {
				t.Fatalf("accepted API version %d", v)
			}
		}
		if len(info.Description) > MaxDescription || !utf8.ValidString(info.Description) ||
			strings.IndexFunc(info.Description, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) >= 0 {
			t.Fatalf("accepted description %q", info.Description)
		}
		back, err := NewBasePluginServer(&fakePlugin{info: info}).PluginInfo(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := pluginInfoReply(back); err != nil || !reflect.DeepEqual(again, info) {
			t.Fatalf("round trip of %+v gave %+v, %v", info, again, err)
		}
	})
}

// FuzzConfigSchemaReply decodes random bytes as a ConfigSchema reply and
// runs them through the client's check: it never panics, and an accepted
// schema has unique, non-empty attribute names of known types, so that a
// configuration giving each attribute a value of its type validates.
func FuzzConfigSchemaReply(f *testing.F) {
	addSeeds(f,
		&proto.ConfigSchemaResponse{Attrs: []*proto.Attr{
			{Name: "steal", Type: "bool", Default: "true"}, {Name: "depth", Type: "int", Required: true},
			{Name: "ratio", Type: "float"}, {Name: "mode", Type: "string"},
		}},
		&proto.ConfigSchemaResponse{Attrs: []*proto.Attr{{Name: "a", Type: "int"}, {Name: "a", Type: "bool"}}},
		&proto.ConfigSchemaResponse{Attrs: []*proto.Attr{{Type: "int"}, {Name: "x", Type: "integer"}}},
		&proto.ConfigSchemaResponse{},
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		var resp proto.ConfigSchemaResponse
		if gproto.Unmarshal(b, &resp) != nil {
			return
		}
		s, err := configSchemaReply(&resp)
		if err != nil {
			if s != nil {
				t.Fatalf("rejected with %v, yet returned %+v", err, s)
			}
			return
		}
		if len(s.Attrs) != len(resp.GetAttrs()) {
			t.Fatalf("%d attributes sent, %d kept", len(resp.GetAttrs()), len(s.Attrs))
		}
		cfg := Config{}
		for _, a := range s.Attrs {
			if _, dup := cfg[a.Name]; dup || a.Name == "" {
				t.Fatalf("accepted attribute name %q (empty or twice)", a.Name)
			}
			switch a.Type {
			case AttrString:
				cfg[a.Name] = "v"
			case AttrInt:
				cfg[a.Name] = int64(1)
			case AttrFloat:
				cfg[a.Name] = 0.5
			case AttrBool:
				cfg[a.Name] = true
			default:
				t.Fatalf("accepted attribute %q of type %q", a.Name, a.Type)
			}
		}
		if err := s.Validate(cfg); err != nil {
			t.Fatalf("a config of the schema's own types fails it: %v", err)
		}
	})
}
