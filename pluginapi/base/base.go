// Package base holds what every plugin kind shares: the plugin identity, the
// configuration schema and the go-plugin handshake.
package base

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Kind names a family of plugins. A plugin binary in the plugin directory is
// named "<kind>-<name>", for example "driver-cpu" or "sched-ws".
type Kind string

// The plugin kinds the core knows how to load.
const (
	KindDriver    Kind = "driver"
	KindScheduler Kind = "sched"
	KindInterface Kind = "iface"
)

// APIVersion is the version of the plugin contracts this build speaks. It is
// go-plugin's protocol version: a plugin and the core agree on the highest
// version both support. 2: completions carry the worker's sleep and a
// Skipped flag, Execs and Pushes may be chained (wire.ExecAfter), Pushes
// may carry per-implementation predictions. 3: device workers receive
// wire.Parts (where a plugin datum's parts lie in a device buffer) and
// parallel Execs (a team's rank and size), memory nodes list their peers,
// and interface parts are aligned to iface.PartAlign (512 bytes).
const APIVersion = 3

// Info identifies a plugin: what kind it is, its name, its own version and the
// contract versions it supports.
type Info struct {
	Kind        Kind
	Name        string
	Version     string
	APIVersions []int
	// Description says in one line what the plugin does, for listings
	// such as `starpu sched list` (optional; at most MaxDescription bytes
	// of printable text).
	Description string
}

// MaxDescription bounds Info.Description.
const MaxDescription = 1024

// AttrType is the type of one configuration attribute.
type AttrType string

// The attribute types a plugin's configuration schema may use.
const (
	AttrString AttrType = "string"
	AttrInt    AttrType = "int"
	AttrFloat  AttrType = "float"
	AttrBool   AttrType = "bool"
)

// Attr describes one configuration attribute a plugin accepts.
type Attr struct {
	Name     string
	Type     AttrType
	Default  string
	Required bool
	Doc      string
}

// Schema lists the configuration attributes a plugin accepts. The core checks a
// plugin's config block against it before calling SetConfig, so that a typo in
// the config file is reported with the attribute's name.
type Schema struct {
	Attrs []Attr
}

// Config is a plugin's configuration: attribute name to value, as decoded from
// the config file's `plugin "name" { config { ... } }` block. Values are
// string, int64, float64 or bool.
type Config map[string]any

// Validate checks cfg against the schema: unknown attributes, missing required
// ones and values of the wrong type are errors naming the attribute.
func (s *Schema) Validate(cfg Config) error {
	known := make(map[string]Attr, len(s.Attrs))
	for _, a := range s.Attrs {
		known[a.Name] = a
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, ok := known[k]
		if !ok {
			names := make([]string, 0, len(s.Attrs))
			for _, a := range s.Attrs {
				names = append(names, a.Name)
			}
			return fmt.Errorf("unknown attribute %q (accepted: %s)", k, strings.Join(names, ", "))
		}
		if err := checkType(a, cfg[k]); err != nil {
			return err
		}
	}
	for _, a := range s.Attrs {
		if _, ok := cfg[a.Name]; a.Required && !ok {
			return fmt.Errorf("missing required attribute %q", a.Name)
		}
	}
	return nil
}

func checkType(a Attr, v any) error {
	ok := false
	switch a.Type {
	case AttrString:
		_, ok = v.(string)
	case AttrInt:
		_, ok = v.(int64)
	case AttrFloat:
		switch v.(type) {
		case float64, int64:
			ok = true
		}
	case AttrBool:
		_, ok = v.(bool)
	}
	if !ok {
		return fmt.Errorf("attribute %q: want %s, got %T", a.Name, a.Type, v)
	}
	return nil
}

// MarshalConfig encodes a configuration for the wire. A float64 is always
// written with a fraction or an exponent (2 as 2.0), so that UnmarshalConfig
// gives it back as a float64 even when it is whole.
func MarshalConfig(c Config) ([]byte, error) {
	out := make(map[string]any, len(c))
	for k, v := range c {
		if f, ok := v.(float64); ok {
			s := strconv.FormatFloat(f, 'g', -1, 64)
			if !strings.ContainsAny(s, ".eEIN") { // not already marked, nor Inf/NaN (which fail below)
				s += ".0"
			}
			v = json.Number(s)
		}
		out[k] = v
	}
	return json.Marshal(out)
}

// UnmarshalConfig decodes a configuration from the wire: a number written
// without a fraction or an exponent comes back as an int64 (a float64 if it
// does not fit), any other number as a float64.
func UnmarshalConfig(b []byte) (Config, error) {
	if len(b) == 0 {
		return Config{}, nil
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode plugin config: %w", err)
	}
	c := make(Config, len(raw))
	for k, v := range raw {
		n, ok := v.(json.Number)
		if !ok {
			c[k] = v
			continue
		}
		if !strings.ContainsAny(string(n), ".eE") {
			if i, err := n.Int64(); err == nil {
				c[k] = i
				continue
			}
		}
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Errorf("attribute %q: bad number %q", k, n)
		}
		c[k] = f
	}
	return c, nil
}

// Plugin is the base every plugin kind implements, in process or behind gRPC.
type Plugin interface {
	// PluginInfo says what the plugin is.
	PluginInfo(ctx context.Context) (*Info, error)
	// ConfigSchema lists the configuration the plugin accepts.
	ConfigSchema(ctx context.Context) (*Schema, error)
	// SetConfig configures the plugin before it is used.
	SetConfig(ctx context.Context, cfg Config) error
}

// Span is a byte range of the shared-memory arena: where a ring, a doorbell or
// a buffer lives. Messages between processes carry spans, never payloads.
type Span struct {
	Offset uint64
	Size   uint64
}
