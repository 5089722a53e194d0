package base

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A plugin that answers PluginInfo or ConfigSchema with nonsense gets an
// error naming it, the call and what is wrong, wrapping ErrBadReply; it is
// not a RemoteError (the plugin did not refuse) and not ErrPluginExited.
func TestBadReplies(t *testing.T) {
	good := &Info{Kind: KindScheduler, Name: "ws", APIVersions: []int{1}}
	for _, c := range []struct {
		name   string
		info   *Info
		schema *Schema
		want   string
	}{
		{"empty name", &Info{Kind: KindDriver, APIVersions: []int{1}}, nil,
			"plugin sched-ws: PluginInfo: invalid reply: empty name"},
		{"empty kind", &Info{Name: "x", APIVersions: []int{1}}, nil,
			"plugin sched-ws: PluginInfo: invalid reply: empty kind"},
		{"space in name", &Info{Kind: KindDriver, Name: "c p u", APIVersions: []int{1}}, nil,
			`plugin sched-ws: PluginInfo: invalid reply: name "c p u": it may not hold ' '`},
		{"slash in name", &Info{Kind: KindDriver, Name: "../cpu", APIVersions: []int{1}}, nil,
			`plugin sched-ws: PluginInfo: invalid reply: name "../cpu": it may not hold '/'`},
		{"control character in kind", &Info{Kind: "dri\x00ver", Name: "cpu", APIVersions: []int{1}}, nil,
			`plugin sched-ws: PluginInfo: invalid reply: kind "dri\x00ver": it may not hold '\x00'`},
		{"long name", &Info{Kind: KindDriver, Name: strings.Repeat("n", 256), APIVersions: []int{1}}, nil,
			"plugin sched-ws: PluginInfo: invalid reply: name of 256 bytes, more than 255"},
		{"API version 0", &Info{Kind: KindDriver, Name: "cpu", APIVersions: []int{1, 0}}, nil,
			"plugin sched-ws: PluginInfo: invalid reply: API version 1 is 0; versions start at 1"},
		{"negative API version", &Info{Kind: KindDriver, Name: "cpu", APIVersions: []int{-3}}, nil,
			"plugin sched-ws: PluginInfo: invalid reply: API version 0 is -3; versions start at 1"},
		{"newline in description", &Info{Kind: KindScheduler, Name: "ws", APIVersions: []int{1}, Description: "one\ntwo"}, nil,
			`plugin sched-ws: PluginInfo: invalid reply: description "one\ntwo": it may not hold '\n'`},
		{"long description", &Info{Kind: KindScheduler, Name: "ws", APIVersions: []int{1}, Description: strings.Repeat("d", MaxDescription+1)}, nil,
			"plugin sched-ws: PluginInfo: invalid reply: description of 1025 bytes, more than 1024"},
		{"attribute without a name", good, &Schema{Attrs: []Attr{{Name: "a", Type: AttrInt}, {Type: AttrInt}}},
			"plugin sched-ws: ConfigSchema: invalid reply: attribute 1 has no name"},
		{"attribute twice", good, &Schema{Attrs: []Attr{{Name: "a", Type: AttrInt}, {Name: "a", Type: AttrBool}}},
			`plugin sched-ws: ConfigSchema: invalid reply: attribute "a" is listed twice`},
		{"unknown attribute type", good, &Schema{Attrs: []Attr{{Name: "depth", Type: "integer"}}},
			`plugin sched-ws: ConfigSchema: invalid reply: attribute "depth" has type "integer", not one of string, int, float, bool`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakePlugin{info: c.info, schema: c.schema}
			cl, _ := connect(t, f, "sched-ws")
			ctx := context.Background()
			err := errOf(cl.PluginInfo(ctx))
			if err == nil {
				err = errOf(cl.ConfigSchema(ctx))
			}
			var re *RemoteError
			if err == nil || err.Error() != c.want || !errors.Is(err, ErrBadReply) || errors.As(err, &re) || errors.Is(err, ErrPluginExited) {
				t.Fatalf("error %v, want %q wrapping ErrBadReply", err, c.want)
			}
		})
	}
}

// A client that learns its label from PluginInfo keeps its fallback when
// the reply is rejected: nonsense never becomes the plugin's name.
func TestBadInfoNotLearnt(t *testing.T) {
	f := &fakePlugin{info: &Info{Kind: KindDriver, Name: "a\nb", APIVersions: []int{1}}}
	cl, _ := connect(t, f, "")
	if _, err := cl.PluginInfo(context.Background()); !errors.Is(err, ErrBadReply) || !strings.HasPrefix(err.Error(), "plugin plugin: PluginInfo: ") {
		t.Fatalf("PluginInfo: %v", err)
	}
	if cl.Label() != "plugin" {
		t.Fatalf("label %q after a rejected PluginInfo", cl.Label())
	}
}
