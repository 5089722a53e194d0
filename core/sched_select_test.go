package core

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-dmda/dmda"
)

// TestSchedSelect builds a plugin directory with the real sched-ws and
// sched-dmda and a sched-broken that is no plugin, and lists and selects
// policies from it.
func TestSchedSelect(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"ws", "dmda"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "sched-"+name), "../plugins/sched-"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build sched-%s: %v\n%s", name, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sched-broken"), []byte("#!/bin/sh\necho not a plugin >&2\nexit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Run("Policies", func(t *testing.T) { testSchedPolicies(t, dir) })
	t.Run("Select", func(t *testing.T) { testSelectSched(t, dir) })
}

// testSchedPolicies lists dir: each plugin's description and settings as
// it reports them, the aliases of the plugins present, and a plugin that
// does not start, with why.
func testSchedPolicies(t *testing.T, dir string) {
	ps, where, err := SchedPolicies(context.Background(), &config.Config{PluginDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]SchedPolicy{}
	for _, p := range ps {
		names = append(names, p.Name)
		byName[p.Name] = p
	}
	if got := strings.Join(names, " "); got != "broken dmda dmdar dmdas ws" {
		t.Fatalf("policies %q", got)
	}
	cases := []struct {
		name, desc, settings, aliasOf string
		err                           bool
	}{
		{"ws", "work stealing:", "steal locality_overload locality_idle_us", "", false},
		{"dmda", "deque model data aware", "alpha beta sorted ready", "", false},
		{"dmdas", "each worker's queue sorted by priority", "alpha beta sorted ready", "dmda", false},
		{"dmdar", "ready first", "alpha beta sorted ready", "dmda", false},
		{"broken", "", "", "", true},
	}
	for _, c := range cases {
		p := byName[c.name]
		var attrs []string
		for _, a := range p.Settings {
			attrs = append(attrs, a.Name)
		}
		if !strings.HasPrefix(p.Description, c.desc) || strings.Join(attrs, " ") != c.settings || p.AliasOf != c.aliasOf || (p.Err != nil) != c.err {
			t.Errorf("%s: %+v", c.name, p)
		}
		if c.aliasOf == "" && p.Plugin != "sched-"+c.name {
			t.Errorf("%s: served by %s", c.name, p.Plugin)
		}
	}
	if byName["dmdas"].Plugin != "sched-dmda" || byName["dmdas"].AliasConfig["sorted"] != true {
		t.Errorf("dmdas: %+v", byName["dmdas"])
	}
	var out strings.Builder
	if err := WriteSchedPolicies(&out, where, ps); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Scheduling policies found in " + dir,
		"ws (default)  work stealing:",
		"dmdas         = dmda with sorted = true: each worker's queue sorted by priority",
		"alpha = 1 (float)",
		"locality_idle_us = 500 (int)",
		"error: plugin sched-broken",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("listing lacks %q:\n%s", want, out.String())
		}
	}
	if _, _, err := SchedPolicies(context.Background(), &config.Config{PluginDir: filepath.Join(dir, "nowhere")}, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing directory: %v", err)
	}
	// Along a search path, the first directory holding a name wins and
	// the message lists every directory with what it held.
	path := &config.Config{PluginPath: []string{filepath.Join(dir, "nowhere"), dir}}
	ps, where, err = SchedPolicies(context.Background(), path, nil)
	if err != nil || len(ps) == 0 {
		t.Fatalf("along the path: %d policies, %v", len(ps), err)
	}
	if want := "on the plugin path: " + filepath.Join(dir, "nowhere") + " (does not exist), " + dir + " (3 plugins)"; where != want {
		t.Errorf("where = %q, want %q", where, want)
	}
	_, _, err = SchedPolicies(context.Background(), &config.Config{PluginPath: []string{filepath.Join(dir, "nowhere")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no plugins found on the plugin path: "+filepath.Join(dir, "nowhere")+" (does not exist)") || !strings.Contains(err.Error(), "make install") {
		t.Errorf("empty path: %v", err)
	}
}

// testSelectSched: aliases resolve on a copy; help prints the list of
// the policies in dir and runs the default policy, even when the
// directory cannot be listed.
func testSelectSched(t *testing.T, dir string) {
	cases := []struct {
		name, sched, dir string
		want             string // Sched, SchedAlias, sched-dmda's config
		help             string // in what help received; "" when nothing
		log              string // in the log
	}{
		{"plain", "dmda", dir, "dmda  map[]", "", ""},
		{"alias", "dmdas", dir, "dmda dmdas map[sorted:true]", "", ""},
		{"help", config.SchedHelp, dir, "ws  map[]", "dmdar         = dmda with ready = true", "running with the default scheduling policy: policy=ws"},
		{"help without a directory", config.SchedHelp, filepath.Join(dir, "nowhere"), "ws  map[]", "", "cannot list the scheduling policies"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Sched, cfg.PluginDir = c.sched, c.dir
			var help, log strings.Builder
			got := selectSched(context.Background(), cfg, hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info}), &help)
			if s := fmt.Sprint(got.Sched, " ", got.SchedAlias, " ", got.Plugin("sched-dmda")); s != c.want {
				t.Errorf("selected %q, want %q", s, c.want)
			}
			if cfg.Sched != c.sched || len(cfg.Plugins) != 0 {
				t.Errorf("the caller's configuration changed: %q %v", cfg.Sched, cfg.Plugins)
			}
			if (c.help == "") != (help.Len() == 0) || !strings.Contains(help.String(), c.help) {
				t.Errorf("help printed %q, want it to hold %q", help.String(), c.help)
			}
			if !strings.Contains(log.String(), c.log) {
				t.Errorf("log %q, want it to hold %q", log.String(), c.log)
			}
		})
	}
}

// TestLogSched: the info line names the policy, the alias it was selected
// by, and every setting, configured or default.
func TestLogSched(t *testing.T) {
	cases := []struct {
		name  string
		cfg   config.Config
		level hclog.Level
		want  string
	}{
		{"defaults", config.Config{Sched: "dmda"}, hclog.Info,
			`scheduling policy: policy=dmda settings="alpha=1 beta=1 sorted=false ready=false"`},
		{"alias and settings", config.Config{Sched: "dmda", SchedAlias: "dmdas",
			Plugins: map[string]config.Plugin{"sched-dmda": {Name: "sched-dmda", Config: base.Config{"sorted": true, "alpha": 0.5}}}}, hclog.Info,
			`scheduling policy: policy=dmda as=dmdas settings="alpha=0.5 beta=1 sorted=true ready=false"`},
		{"quiet below info", config.Config{Sched: "dmda"}, hclog.Warn, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: c.level})
			logSched(context.Background(), log, &c.cfg, sched.NewHost(nil, dmda.New(), base.Info{Name: "dmda"}))
			if got := strings.TrimSpace(out.String()); !strings.HasSuffix(got, c.want) || (c.want == "") != (got == "") {
				t.Fatalf("logged %q, want a line ending %q", got, c.want)
			}
		})
	}
}
