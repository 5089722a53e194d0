package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
)

func TestResolveSchedAliases(t *testing.T) {
	intp := func(v int) *int { return &v }
	cases := []struct {
		name string
		in   Config
		want Config
	}{
		{
			name: "not an alias",
			in:   Config{Sched: "ws", Plugins: map[string]Plugin{"sched-ws": {Name: "sched-ws", Config: base.Config{"steal": false}}}},
			want: Config{Sched: "ws", Plugins: map[string]Plugin{"sched-ws": {Name: "sched-ws", Config: base.Config{"steal": false}}}},
		},
		{
			name: "help is not an alias",
			in:   Config{Sched: SchedHelp},
			want: Config{Sched: SchedHelp},
		},
		{
			name: "dmdas without a block",
			in:   Config{Sched: "dmdas"},
			want: Config{Sched: "dmda", SchedAlias: "dmdas", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"sorted": true}}}},
		},
		{
			name: "dmdar keeps the block's other attributes",
			in:   Config{Sched: "dmdar", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"alpha": 2.0}, Restarts: intp(1)}}},
			want: Config{Sched: "dmda", SchedAlias: "dmdar", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"alpha": 2.0, "ready": true}, Restarts: intp(1)}}},
		},
		{
			name: "an attribute set explicitly wins",
			in:   Config{Sched: "dmdas", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"sorted": false}}}},
			want: Config{Sched: "dmda", SchedAlias: "dmdas", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"sorted": false}}}},
		},
		{
			name: "a block named after the alias configures it",
			in: Config{Sched: "dmdas", Plugins: map[string]Plugin{
				"sched-dmda":  {Name: "sched-dmda", Config: base.Config{"alpha": 2.0, "beta": 1.0}},
				"sched-dmdas": {Name: "sched-dmdas", Config: base.Config{"beta": 3.0}, Restarts: intp(0)},
			}},
			want: Config{Sched: "dmda", SchedAlias: "dmdas", Plugins: map[string]Plugin{
				"sched-dmda": {Name: "sched-dmda", Config: base.Config{"alpha": 2.0, "beta": 3.0, "sorted": true}, Restarts: intp(0)},
			}},
		},
		{
			name: "contexts: alias, plain policy, inherited",
			in: Config{Sched: "dmdas", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"alpha": 2.0}}},
				Contexts: []Context{
					{Name: "a", Workers: []int{0}, Sched: "dmdar"},
					{Name: "b", Workers: []int{1}, Sched: "dmda"},
					{Name: "c", Workers: []int{2}},
					{Name: "d", Workers: []int{3}, Sched: "dmdas", Config: base.Config{"sorted": false}},
					{Name: "e", Workers: []int{4}, Sched: "ws"},
				}},
			want: Config{Sched: "dmda", SchedAlias: "dmdas", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"alpha": 2.0, "sorted": true}}},
				Contexts: []Context{
					{Name: "a", Workers: []int{0}, Sched: "dmda", Config: base.Config{"alpha": 2.0, "ready": true}},
					{Name: "b", Workers: []int{1}, Sched: "dmda", Config: base.Config{"alpha": 2.0}},
					{Name: "c", Workers: []int{2}},
					{Name: "d", Workers: []int{3}, Sched: "dmda", Config: base.Config{"sorted": false}},
					{Name: "e", Workers: []int{4}, Sched: "ws"},
				}},
		},
		{
			name: "a context alias under a plain global policy",
			in: Config{Sched: "ws", Plugins: map[string]Plugin{"sched-dmdas": {Name: "sched-dmdas", Config: base.Config{"beta": 0.5}}},
				Contexts: []Context{{Name: "gpu", Workers: []int{2}, Sched: "dmdas"}}},
			want: Config{Sched: "ws", Plugins: map[string]Plugin{},
				Contexts: []Context{{Name: "gpu", Workers: []int{2}, Sched: "dmda", Config: base.Config{"beta": 0.5, "sorted": true}}}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.ResolveSchedAliases()
			got := c.in
			got.userPlugins = nil // compared through ResolveContextSched below
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("resolved\n%s\nwant\n%s", dump(&c.in), dump(&c.want))
			}
			// Resolving again changes nothing.
			again := c.in.Clone()
			again.ResolveSchedAliases()
			if !reflect.DeepEqual(again, c.in.Clone()) {
				t.Fatalf("second resolution gave\n%s", dump(again))
			}
		})
	}
}

func dump(c *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sched %q alias %q\n", c.Sched, c.SchedAlias)
	for _, k := range sortedKeys(c.Plugins) {
		p := c.Plugins[k]
		r := "nil"
		if p.Restarts != nil {
			r = fmt.Sprint(*p.Restarts)
		}
		fmt.Fprintf(&b, "plugin %s: name %s config %v restarts %s\n", k, p.Name, p.Config, r)
	}
	for _, x := range c.Contexts {
		fmt.Fprintf(&b, "context %+v\n", x)
	}
	return b.String()
}

// TestLoadResolvesAliases: STARPU_SCHED and the file's sched go through
// ResolveSchedAliases in Load.
func TestLoadResolvesAliases(t *testing.T) {
	cases := []struct {
		name, file, env string
		want            string // Sched, SchedAlias, sched-dmda's config
	}{
		{"env", "", "dmdas", "dmda dmdas map[sorted:true]"},
		{"file", `sched = "dmdar"`, "", "dmda dmdar map[ready:true]"},
		{"env over file", "sched = \"dmdar\"\nplugin \"sched-dmda\" {\n  config {\n    ready = false\n  }\n}\n", "dmdas", "dmda dmdas map[ready:false sorted:true]"},
		{"plain", "", "dmda", "dmda  map[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.file != "" {
				path = filepath.Join(t.TempDir(), "starpu.hcl")
				if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{EnvSched: c.env}
			cfg, err := Load(func(k string) string { return env[k] }, path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(cfg.Sched, " ", cfg.SchedAlias, " ", cfg.Plugin("sched-dmda")); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestLookupSchedAlias(t *testing.T) {
	cases := []struct {
		name, policy string
		ok           bool
	}{{"dmdas", "dmda", true}, {"dmdar", "dmda", true}, {"dmda", "", false}, {"help", "", false}, {"DMDAS", "", false}}
	for _, c := range cases {
		a, ok := LookupSchedAlias(c.name)
		if ok != c.ok || a.Policy != c.policy {
			t.Errorf("LookupSchedAlias(%q) = %+v, %v", c.name, a, ok)
		}
	}
	// The list is a fresh copy: changing it changes nothing for others.
	l := SchedAliases()
	l[0].Config["ready"] = false
	if a, _ := LookupSchedAlias("dmdar"); a.Config["ready"] != true {
		t.Fatal("SchedAliases shares its configs")
	}
}

// TestResolveContextSched: a context created after the configuration was
// resolved (core's CreateSchedContext) resolves against the plugin
// blocks as the user wrote them, not as the global alias changed them.
func TestResolveContextSched(t *testing.T) {
	cfg := &Config{Sched: "dmdas", Plugins: map[string]Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"alpha": 2.0}}}}
	cfg.ResolveSchedAliases()
	cfg = cfg.Clone() // what the runtime keeps
	cases := []struct {
		in   Context
		want string
	}{
		{Context{Name: "r", Sched: "dmdar"}, "dmda map[alpha:2 ready:true]"},
		{Context{Name: "p", Sched: "dmda"}, "dmda map[alpha:2]"},
		{Context{Name: "s", Sched: "dmdas", Config: base.Config{"beta": 1.0}}, "dmda map[beta:1 sorted:true]"},
		{Context{Name: "g"}, " map[]"},
		{Context{Name: "w", Sched: "ws"}, "ws map[]"},
	}
	for _, c := range cases {
		x := cfg.ResolveContextSched(c.in)
		if got := fmt.Sprint(x.Sched, " ", x.Config); got != c.want {
			t.Errorf("context %s: %q, want %q", c.in.Name, got, c.want)
		}
	}
	if got := fmt.Sprint(cfg.Plugin("sched-dmda")); got != "map[alpha:2 sorted:true]" {
		t.Errorf("global block %s", got)
	}
}
