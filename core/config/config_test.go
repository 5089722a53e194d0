package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/starpu-go/starpu/pluginapi/base"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

const fullFile = `
plugin_dir  = "/opt/starpu/plugins"
sched       = "dmda"
ncpu        = 2
queue_depth = 8
spin_iters  = 500
arena_size  = "8GiB"
log_level   = "info"

plugin "sched-ws" {
  config {
    steal  = true
    victim = "random"
    ratio  = 0.5
    tries  = 3
  }
}

plugin "driver-cpu" {}
`

func fullConfig() *Config {
	return &Config{
		PluginDir:  "/opt/starpu/plugins",
		PluginPath: DefaultPluginPath(),
		Sched:      "dmda",
		NCPU:       2,
		QueueDepth: 8,
		SpinIters:  500,
		ArenaSize:  8 << 30,
		LogLevel:   "info",

		PluginTimeout:  DefaultPluginTimeout,
		PluginRestarts: DefaultPluginRestarts,
		Plugins: map[string]Plugin{
			"sched-ws": {Name: "sched-ws", Config: base.Config{
				"steal": true, "victim": "random", "ratio": 0.5, "tries": int64(3),
			}},
			"driver-cpu": {Name: "driver-cpu", Config: base.Config{}},
		},
	}
}

func TestDefault(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		PluginPath: DefaultPluginPath(),
		Sched:      "ws",
		NCPU:       -1,
		QueueDepth: 4,
		SpinIters:  2000,
		LogLevel:   "warn",
		Plugins:    map[string]Plugin{},

		PluginTimeout:  DefaultPluginTimeout,
		PluginRestarts: DefaultPluginRestarts,
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Default() = %+v, want %+v", got, want)
	}
	if got, first := want.PluginPath, filepath.Join(filepath.Dir(exe), "plugins"); len(got) < 3 || got[0] != first {
		t.Fatalf("DefaultPluginPath() = %v, want %s first, then the installation directories", got, first)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestParse(t *testing.T) {
	def := Default()
	tests := []struct {
		name string
		file string
		src  string
		want func() *Config
	}{
		{"empty", "a.hcl", "", Default},
		{"comments only", "a.hcl", "# nothing\n// here\n", Default},
		{"full", "a.hcl", fullFile, fullConfig},
		{"partial keeps defaults", "a.hcl", `sched = "eager"`, func() *Config {
			c := Default()
			c.Sched = "eager"
			return c
		}},
		{"models", "a.hcl", "calibrate = 2\nmodel_dir = \"/tmp/models\"\nhistory_max_error = 80", func() *Config {
			c := Default()
			c.Calibrate, c.ModelDir, c.HistoryMaxError = 2, "/tmp/models", 80
			return c
		}},
		{"arena bytes", "a.hcl", `arena_size = 1048576`, func() *Config {
			c := Default()
			c.ArenaSize = 1 << 20
			return c
		}},
		{"arena decimal unit", "a.hcl", `arena_size = "512 MB"`, func() *Config {
			c := Default()
			c.ArenaSize = 512e6
			return c
		}},
		{"ncpu -1 and spin 0", "a.hcl", "ncpu = -1\nspin_iters = 0", func() *Config {
			c := Default()
			c.SpinIters = 0
			return c
		}},
		{"plugin timeout and watchdog", "a.hcl", "plugin_restarts = 0\nplugin_timeout = \"1m\"\nwatchdog_timeout = 0.5\nwatchdog_crash = true\nwatchdog_delay = \"2s\"", func() *Config {
			c := Default()
			c.PluginTimeout, c.WatchdogTimeout, c.WatchdogCrash, c.WatchdogDelay = time.Minute, 500*time.Millisecond, true, 2*time.Second
			c.PluginRestarts = 0
			return c
		}},
		{"combined worker sizes", "a.hcl", "min_worker_size = 3\nmax_worker_size = 6", func() *Config {
			c := Default()
			c.MinWorkerSize, c.MaxWorkerSize = 3, 6
			return c
		}},
		{"log level case folded", "a.hcl", `log_level = "DEBUG"`, func() *Config {
			c := Default()
			c.LogLevel = "debug"
			return c
		}},
		{"whole float is int64", "a.hcl", "plugin \"p\" {\n  config {\n    n = 4.0\n  }\n}\n", func() *Config {
			c := Default()
			c.Plugins["p"] = Plugin{Name: "p", Config: base.Config{"n": int64(4)}}
			return c
		}},
		{"huge whole number is float64", "a.hcl", "plugin \"p\" {\n  config {\n    n = 1e30\n  }\n}\n", func() *Config {
			c := Default()
			c.Plugins["p"] = Plugin{Name: "p", Config: base.Config{"n": 1e30}}
			return c
		}},
		{"negative and expression", "a.hcl", "plugin \"p\" {\n  config {\n    n = -3 + 1\n  }\n}\n", func() *Config {
			c := Default()
			c.Plugins["p"] = Plugin{Name: "p", Config: base.Config{"n": int64(-2)}}
			return c
		}},
		{"per-plugin restarts", "a.hcl", "plugin_restarts = 5\nplugin \"sched-ws\" {\n  restarts = 0\n}\n", func() *Config {
			c := Default()
			c.PluginRestarts = 5
			zero := 0
			c.Plugins["sched-ws"] = Plugin{Name: "sched-ws", Config: base.Config{}, Restarts: &zero}
			return c
		}},
		{"json syntax", "a.json", `{
  "sched": "dmda", "ncpu": 2, "queue_depth": 8, "spin_iters": 500,
  "arena_size": "8GiB", "log_level": "info", "plugin_dir": "/opt/starpu/plugins",
  "plugin": {
    "sched-ws": {"config": {"steal": true, "victim": "random", "ratio": 0.5, "tries": 3}},
    "driver-cpu": {}
  }
}`, fullConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.src), tt.file)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want := tt.want(); !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
	if !reflect.DeepEqual(def, Default()) {
		t.Fatal("Default() changed")
	}
}

func TestRestartsFor(t *testing.T) {
	c, err := Parse([]byte("plugin_restarts = 4\nplugin \"driver-cpu\" {\n  restarts = 0\n}\nplugin \"sched-ws\" {\n  config {\n    steal = true\n  }\n}\n"), "a.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"driver-cpu": 0, "sched-ws": 4, "sched-dmda": 4} {
		if got := c.RestartsFor(name); got != want {
			t.Errorf("RestartsFor(%q) = %d, want %d", name, got, want)
		}
	}
	if got := c.Clone().RestartsFor("driver-cpu"); got != 0 {
		t.Errorf("a clone forgets the per-plugin restarts: %d", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error
	}{
		{"syntax", "sched = \"ws\"\nncpu = 2\nqueue_depth = = 4\n", []string{"config file test.hcl: ", "test.hcl:3:"}},
		{"unterminated block", "plugin \"x\" {\n  config {\n", []string{"test.hcl:"}},
		{"unknown attribute", "sched = \"ws\"\nschedd = \"ws\"\n", []string{"test.hcl:2:1", "schedd"}},
		{"unknown block", "\n\nworker \"x\" {}\n", []string{"test.hcl:3:1", "worker"}},
		{"plugin without label", "plugin {}\n", []string{"test.hcl:1:", "plugin"}},
		{"plugin with empty label", `plugin "" {}`, []string{"test.hcl:1:8", "Empty plugin name"}},
		{"unknown plugin attribute", "plugin \"a\" {\n  steal = true\n}\n", []string{"test.hcl:2:3", "steal"}},
		{"redefined attribute", "ncpu = 1\nncpu = 2\n", []string{"test.hcl:2:", "ncpu"}},
		{"string for int", `ncpu = "two"`, []string{"test.hcl:1:8", `"ncpu"`, "whole number", "string"}},
		{"int for string", `sched = 3`, []string{"test.hcl:1:9", `"sched"`, "number"}},
		{"bool for log level", `log_level = true`, []string{"test.hcl:1:13", `"log_level"`}},
		{"list for plugin dir", `plugin_dir = ["a"]`, []string{"test.hcl:1:14", `"plugin_dir"`, "tuple"}},
		{"fraction for int", `queue_depth = 2.5`, []string{"test.hcl:1:15", "queue_depth", "2.5"}},
		{"queue depth zero", `queue_depth = 0`, []string{"test.hcl:1:15", "1..64"}},
		{"queue depth 65", `queue_depth = 65`, []string{"test.hcl:1:15", "1..64"}},
		{"ncpu -2", `ncpu = -2`, []string{"test.hcl:1:8", "ncpu"}},
		{"spin negative", `spin_iters = -1`, []string{"test.hcl:1:14", "spin_iters"}},
		{"unknown log level", `log_level = "loud"`, []string{"test.hcl:1:13", `"loud"`}},
		{"empty sched", `sched = ""`, []string{"test.hcl:1:9", "empty"}},
		{"null", `sched = null`, []string{"test.hcl:1:9", "null"}},
		{"variable", `sched = foo`, []string{"test.hcl:1:9", "Variables not allowed", `foo is a word without quotes: a name is a string, as in sched = "foo"`}},
		{"variable in a plugin's config", "plugin \"sched-ws\" {\n  config {\n    victim = random\n  }\n}", []string{"test.hcl:3:14", `as in victim = "random"`}},
		{"bad size string", `arena_size = "8 gigs"`, []string{"test.hcl:1:14", "arena_size", "gigs"}},
		{"negative timeout", `plugin_timeout = "-1s"`, []string{"test.hcl:1:18", "plugin_timeout", ">= 0"}},
		{"timeout word", `watchdog_timeout = "later"`, []string{"watchdog_timeout", "duration"}},
		{"crash not bool", `watchdog_crash = 1`, []string{"watchdog_crash", "true or false"}},
		{"negative worker size", `max_worker_size = -4`, []string{"test.hcl:1:19", "max_worker_size"}},
		{"negative size", `arena_size = -1`, []string{"test.hcl:1:14", "arena_size"}},
		{"fractional size", `arena_size = 1.5`, []string{"test.hcl:1:14", "arena_size"}},
		{"bool size", `arena_size = true`, []string{"test.hcl:1:14", "arena_size", "bool"}},
		{"duplicate plugin", "plugin \"sched-ws\" {}\n\nplugin \"sched-ws\" {\n}\n", []string{"test.hcl:3:1", "Duplicate plugin block", "test.hcl:1:1"}},
		{"duplicate config", "plugin \"a\" {\n  config {}\n  config {}\n}\n", []string{"test.hcl:3:3", "Duplicate config block"}},
		{"list in plugin config", "plugin \"a\" {\n  config {\n    victims = [1, 2]\n  }\n}\n", []string{"test.hcl:3:15", `"victims"`, "tuple"}},
		{"object in plugin config", "plugin \"a\" {\n  config {\n    o = { x = 1 }\n  }\n}\n", []string{"test.hcl:3:9", `"o"`, "object"}},
		{"nested block in plugin config", "plugin \"a\" {\n  config {\n    inner {}\n  }\n}\n", []string{"test.hcl:3:"}},
		{"null in plugin config", "plugin \"a\" {\n  config {\n    x = null\n  }\n}\n", []string{"test.hcl:3:9", "null"}},
		{"duplicate config key", "plugin \"a\" {\n  config {\n    x = 1\n    x = 2\n  }\n}\n", []string{"test.hcl:4:"}},
		{"negative plugin restarts", "plugin \"a\" {\n  restarts = -1\n}\n", []string{"test.hcl:2:14", "restarts", ">= 0"}},
		{"restarts inside config", "plugin \"a\" {\n  restarts = true\n}\n", []string{"test.hcl:2:14", "restarts"}},
		{"two errors both reported", "ncpu = \"x\"\nsched = 1\n", []string{"test.hcl:1:8", "test.hcl:2:9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.src), "test.hcl")
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config file test.hcl: ") {
				t.Errorf("error %q lacks the config file prefix", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			var diags hcl.Diagnostics
			if !errors.As(err, &diags) || !diags.HasErrors() {
				t.Errorf("error does not unwrap to hcl.Diagnostics: %v", err)
			}
		})
	}
}

func TestDecodeOverlaysAndIsAtomic(t *testing.T) {
	c := Default()
	c.PluginDir = "/mine"
	c.Plugins["keep"] = Plugin{Name: "keep", Config: base.Config{"a": int64(1)}}
	c.Plugins["sched-ws"] = Plugin{Name: "sched-ws", Config: base.Config{"old": true}}
	before := c.Clone()

	if err := c.Decode([]byte("ncpu = 3\nplugin \"sched-ws\" {\n}\nbogus = 1\n"), "x.hcl"); err == nil {
		t.Fatal("Decode of a bad file succeeded")
	}
	if !reflect.DeepEqual(c, before) {
		t.Fatalf("failed Decode changed the config: %+v", c)
	}

	if err := c.Decode([]byte("ncpu = 3\nplugin \"sched-ws\" {\n config {\n steal = false\n }\n}\n"), "x.hcl"); err != nil {
		t.Fatal(err)
	}
	want := before.Clone()
	want.NCPU = 3
	want.Plugins["sched-ws"] = Plugin{Name: "sched-ws", Config: base.Config{"steal": false}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
}

func TestClone(t *testing.T) {
	c := fullConfig()
	d := c.Clone()
	d.Plugins["sched-ws"].Config["steal"] = false
	d.Plugins["new"] = Plugin{Name: "new"}
	if !reflect.DeepEqual(c, fullConfig()) {
		t.Fatal("changing the clone changed the original")
	}
}

func TestPluginAccessor(t *testing.T) {
	c := fullConfig()
	if got := c.Plugin("sched-ws")["victim"]; got != "random" {
		t.Fatalf("Plugin(sched-ws)[victim] = %v", got)
	}
	if got := c.Plugin("absent"); got == nil || len(got) != 0 {
		t.Fatalf("Plugin(absent) = %#v, want empty non-nil", got)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "starpu.hcl")
	if err := os.WriteFile(good, []byte(fullFile), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, fullConfig()) {
		t.Fatalf("got %+v", c)
	}

	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte("\n\nncpu = {"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(bad)
	if err == nil || !strings.HasPrefix(err.Error(), "config file "+bad+": ") || !strings.Contains(err.Error(), bad+":3:") {
		t.Fatalf("LoadFile(bad) error = %v", err)
	}

	missing := filepath.Join(dir, "missing.hcl")
	_, err = LoadFile(missing)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "config file "+missing+": ") {
		t.Fatalf("LoadFile(missing) error = %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // "" means valid
	}{
		{"default", func(*Config) {}, ""},
		{"ncpu 0", func(c *Config) { c.NCPU = 0 }, ""},
		{"queue depth 1", func(c *Config) { c.QueueDepth = 1 }, ""},
		{"queue depth 64", func(c *Config) { c.QueueDepth = 64 }, ""},
		{"every level", func(c *Config) { c.LogLevel = "off" }, ""},
		{"empty sched", func(c *Config) { c.Sched = "" }, "sched"},
		{"blank sched", func(c *Config) { c.Sched = "  " }, "sched"},
		{"no plugin dir nor path", func(c *Config) { c.PluginDir, c.PluginPath = "", nil }, "plugin_dir"},
		{"plugin path only", func(c *Config) { c.PluginDir, c.PluginPath = "", []string{"/x"} }, ""},
		{"submission limits", func(c *Config) { c.LimitMaxSubmitted, c.LimitMinSubmitted = 10, 5 }, ""},
		{"negative max submitted", func(c *Config) { c.LimitMaxSubmitted = -1 }, "limit_max_submitted_tasks: -1"},
		{"min submitted alone", func(c *Config) { c.LimitMinSubmitted = 5 }, "means nothing without limit_max_submitted_tasks"},
		{"min submitted not below max", func(c *Config) { c.LimitMaxSubmitted, c.LimitMinSubmitted = 5, 5 }, "is not below limit_max_submitted_tasks 5"},
		{"ncpu -2", func(c *Config) { c.NCPU = -2 }, "ncpu"},
		{"plugin timeout below three heartbeats", func(c *Config) { c.PluginTimeout = 50 * time.Millisecond }, "plugin_timeout: 50ms is shorter than 300ms"},
		{"plugin timeout of three heartbeats", func(c *Config) { c.PluginTimeout = MinPluginTimeout }, ""},
		{"queue depth 0", func(c *Config) { c.QueueDepth = 0 }, "queue_depth"},
		{"queue depth 65", func(c *Config) { c.QueueDepth = 65 }, "queue_depth"},
		{"spin -1", func(c *Config) { c.SpinIters = -1 }, "spin_iters"},
		{"log level", func(c *Config) { c.LogLevel = "verbose" }, "verbose"},
		{"empty log level", func(c *Config) { c.LogLevel = "" }, "log_level"},
		{"plugin name mismatch", func(c *Config) { c.Plugins["a"] = Plugin{Name: "b"} }, `plugin "a"`},
		{"empty plugin key", func(c *Config) { c.Plugins[""] = Plugin{} }, "empty plugin name"},
		{"worker sizes", func(c *Config) { c.MinWorkerSize, c.MaxWorkerSize = 2, 4 }, ""},
		{"no combined worker", func(c *Config) { c.MinWorkerSize, c.MaxWorkerSize = 8, 1 }, ""},
		{"min above max", func(c *Config) { c.MinWorkerSize, c.MaxWorkerSize = 8, 4 }, "min_worker_size 8 is above max_worker_size 4"},
		{"negative max worker size", func(c *Config) { c.MaxWorkerSize = -1 }, "max_worker_size: -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
	// Several problems are all reported.
	c := Default()
	c.Sched, c.QueueDepth = "", 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "sched") || !strings.Contains(err.Error(), "queue_depth") {
		t.Fatalf("Validate() = %v, want both problems", err)
	}
}

// TestPluginConfigSchema checks that the values decoded from a config block
// have the Go types base.Schema.Validate expects, including after a trip over
// the wire.
func TestPluginConfigSchema(t *testing.T) {
	schema := &base.Schema{Attrs: []base.Attr{
		{Name: "steal", Type: base.AttrBool},
		{Name: "victim", Type: base.AttrString, Required: true},
		{Name: "ratio", Type: base.AttrFloat},
		{Name: "tries", Type: base.AttrInt},
		{Name: "scale", Type: base.AttrFloat}, // a whole number is fine as a float
	}}
	tests := []struct {
		name string
		body string
		want string // "" means valid
	}{
		{"all types", `steal = true
victim = "random"
ratio = 0.5
tries = 3
scale = 2`, ""},
		{"required only", `victim = "last"`, ""},
		{"int given as float", `victim = "x"
tries = 1.5`, `"tries"`},
		{"string for bool", `victim = "x"
steal = "yes"`, `"steal"`},
		{"number for string", `victim = 3`, `"victim"`},
		{"unknown attribute", `victim = "x"
stael = true`, `"stael"`},
		{"missing required", `steal = false`, `"victim"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "plugin \"sched-ws\" {\n  config {\n" + tt.body + "\n  }\n}\n"
			c, err := Parse([]byte(src), "schema.hcl")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			cfg := c.Plugin("sched-ws")
			wire, err := base.MarshalConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			back, err := base.UnmarshalConfig(wire)
			if err != nil {
				t.Fatal(err)
			}
			for label, cf := range map[string]base.Config{"decoded": cfg, "after wire": back} {
				err := schema.Validate(cf)
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("%s: Validate(%v) = %v", label, cf, err)
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
					t.Errorf("%s: Validate(%v) = %v, want error containing %s", label, cf, err, tt.want)
				}
			}
		})
	}
}

func TestSubmitLimits(t *testing.T) {
	tests := []struct{ max, min, wantMax, wantMin int }{
		{0, 0, 0, 0},
		{100, 0, 100, 90},
		{100, 10, 100, 10},
		{1, 0, 1, 0},
	}
	for _, tc := range tests {
		c := &Config{LimitMaxSubmitted: tc.max, LimitMinSubmitted: tc.min}
		if max, min := c.SubmitLimits(); max != tc.wantMax || min != tc.wantMin {
			t.Errorf("SubmitLimits(%d, %d) = %d, %d; want %d, %d", tc.max, tc.min, max, min, tc.wantMax, tc.wantMin)
		}
	}
}

// A file nested deeper than MaxNesting is refused with a position, in
// HCL's syntax and in JSON, before the parser recurses (100,000 levels
// overflowed its stack); brackets in strings and comments do not count.
func TestNestingBounded(t *testing.T) {
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	for _, c := range []struct {
		name, file, src string
		ok              bool
	}{
		{"hcl 100000 deep", "deep.hcl", "x = " + deep("[", "]", 100000) + "\n", false},
		{"json 100000 deep", "deep.json", `{"x": ` + deep("[", "]", 100000) + "}", false},
		{"brackets in a string and a comment", "s.hcl", "# " + strings.Repeat("{", 100) + "\nsched = \"" + strings.Repeat("{", 100) + "\"\n", true},
		{"a few levels", "ok.hcl", "sched = \"ws\"\nplugin \"sched-ws\" {\n  config {\n  }\n}\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), c.file)
			switch {
			case c.ok && err != nil && strings.Contains(err.Error(), "Nested too deeply"):
				t.Fatalf("refused: %v", err)
			case !c.ok && (err == nil || !strings.Contains(err.Error(), "more than 64 levels") || !strings.Contains(err.Error(), c.file+":1")):
				t.Fatalf("Parse: %v, want nesting refused at %s:1", err, c.file)
			}
		})
	}
}
