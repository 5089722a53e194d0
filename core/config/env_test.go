package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want func(*Config)
	}{
		{"none", nil, func(*Config) {}},
		{"empty values are unset", map[string]string{EnvSched: "", EnvNCPU: " "}, func(*Config) {}},
		{"sched", map[string]string{EnvSched: "eager"}, func(c *Config) { c.Sched = "eager" }},
		{"ncpu", map[string]string{EnvNCPU: "3"}, func(c *Config) { c.NCPU = 3 }},
		{"ncpu zero", map[string]string{EnvNCPU: "0"}, func(c *Config) { c.NCPU = 0 }},
		{"ncpu -1", map[string]string{EnvNCPU: "-1"}, func(c *Config) { c.NCPU = -1 }},
		{"ncpu spaces", map[string]string{EnvNCPU: " 5 "}, func(c *Config) { c.NCPU = 5 }},
		{"plugin dir", map[string]string{EnvPluginDir: "/p"}, func(c *Config) { c.PluginDir = "/p" }},
		{"queue depth", map[string]string{EnvQueueDepth: "64"}, func(c *Config) { c.QueueDepth = 64 }},
		{"spin iters", map[string]string{EnvSpinIters: "0"}, func(c *Config) { c.SpinIters = 0 }},
		{"arena GiB", map[string]string{EnvArenaSize: "2GiB"}, func(c *Config) { c.ArenaSize = 2 << 30 }},
		{"calibrate and model dir", map[string]string{EnvCalibrate: "1", EnvModelDir: "/m"}, func(c *Config) { c.Calibrate, c.ModelDir = 1, "/m" }},
		{"history max error", map[string]string{EnvHistoryMaxError: "25"}, func(c *Config) { c.HistoryMaxError = 25 }},
		{"arena bytes", map[string]string{EnvArenaSize: "4096"}, func(c *Config) { c.ArenaSize = 4096 }},
		{"log level", map[string]string{EnvLogLevel: "Trace"}, func(c *Config) { c.LogLevel = "trace" }},
		{"config is not applied", map[string]string{EnvConfig: "/nonexistent"}, func(*Config) {}},
		{"plugin timeout duration", map[string]string{EnvPluginTimeout: "250ms"}, func(c *Config) { c.PluginTimeout = 250 * time.Millisecond }},
		{"plugin timeout seconds", map[string]string{EnvPluginTimeout: "2.5"}, func(c *Config) { c.PluginTimeout = 2500 * time.Millisecond }},
		{"plugin timeout off", map[string]string{EnvPluginTimeout: "0"}, func(c *Config) { c.PluginTimeout = 0 }},
		{"plugin restarts", map[string]string{EnvPluginRestarts: "0"}, func(c *Config) { c.PluginRestarts = 0 }},
		{"submission limits", map[string]string{EnvLimitMaxSubmitted: "1000", EnvLimitMinSubmitted: "100"}, func(c *Config) { c.LimitMaxSubmitted, c.LimitMinSubmitted = 1000, 100 }},
		{"combined worker sizes", map[string]string{EnvMinWorkerSize: "4", EnvMaxWorkerSize: "8"}, func(c *Config) { c.MinWorkerSize, c.MaxWorkerSize = 4, 8 }},
		{"watchdog", map[string]string{EnvWatchdogTimeout: "1500000", EnvWatchdogDelay: "20", EnvWatchdogCrash: "1"}, func(c *Config) {
			c.WatchdogTimeout, c.WatchdogDelay, c.WatchdogCrash = 1500*time.Millisecond, 20*time.Microsecond, true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			if err := c.ApplyEnv(env(tt.env)); err != nil {
				t.Fatal(err)
			}
			want := Default()
			tt.want(want)
			if !reflect.DeepEqual(c, want) {
				t.Fatalf("got  %+v\nwant %+v", c, want)
			}
		})
	}
}

func TestApplyEnvErrors(t *testing.T) {
	tests := []struct {
		name, key, val string
	}{
		{"ncpu word", EnvNCPU, "four"},
		{"ncpu -2", EnvNCPU, "-2"},
		{"ncpu float", EnvNCPU, "1.5"},
		{"ncpu overflow", EnvNCPU, "99999999999999999999"},
		{"queue depth 0", EnvQueueDepth, "0"},
		{"queue depth 65", EnvQueueDepth, "65"},
		{"queue depth word", EnvQueueDepth, "deep"},
		{"spin negative", EnvSpinIters, "-1"},
		{"spin word", EnvSpinIters, "lots"},
		{"plugin timeout negative", EnvPluginTimeout, "-1s"},
		{"plugin timeout word", EnvPluginTimeout, "soon"},
		{"plugin timeout inf", EnvPluginTimeout, "+Inf"},
		{"watchdog negative", EnvWatchdogTimeout, "-5"},
		{"watchdog with unit", EnvWatchdogTimeout, "5s"},
		{"watchdog crash 2", EnvWatchdogCrash, "2"},
		{"restarts negative", EnvPluginRestarts, "-1"},
		{"arena unit", EnvArenaSize, "8 gigs"},
		{"calibrate 3", EnvCalibrate, "3"},
		{"history max error 0", EnvHistoryMaxError, "0"},
		{"arena negative", EnvArenaSize, "-8GiB"},
		{"arena fraction", EnvArenaSize, "1.5GiB"},
		{"arena overflow", EnvArenaSize, "17179869184GiB"},
		{"log level", EnvLogLevel, "loud"},
		{"min worker size negative", EnvMinWorkerSize, "-2"},
		{"max worker size word", EnvMaxWorkerSize, "all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			before := c.Clone()
			err := c.ApplyEnv(env(map[string]string{tt.key: tt.val, EnvSched: "eager"}))
			if err == nil {
				t.Fatalf("ApplyEnv(%s=%q) succeeded", tt.key, tt.val)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.key) || !strings.Contains(msg, `"`+tt.val+`"`) {
				t.Fatalf("error %q does not name %s and %q", msg, tt.key, tt.val)
			}
			if !reflect.DeepEqual(c, before) {
				t.Fatalf("failed ApplyEnv changed the config: %+v", c)
			}
		})
	}
	// Every bad variable is reported.
	err := Default().ApplyEnv(env(map[string]string{EnvNCPU: "x", EnvLogLevel: "y"}))
	if err == nil || !strings.Contains(err.Error(), EnvNCPU) || !strings.Contains(err.Error(), EnvLogLevel) {
		t.Fatalf("ApplyEnv = %v, want both variables named", err)
	}
}

func TestApplyEnvNilGetenv(t *testing.T) {
	t.Setenv(EnvSched, "from-os")
	c := Default()
	if err := c.ApplyEnv(nil); err != nil {
		t.Fatal(err)
	}
	if c.Sched != "from-os" {
		t.Fatalf("Sched = %q, want from-os", c.Sched)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write("full.hcl", fullFile)
	other := write("other.hcl", `sched = "other"`)
	badRange := write("range.hcl", "\nqueue_depth = 100\n")
	syntax := write("syntax.hcl", "sched = \n")
	missing := filepath.Join(dir, "missing.hcl")

	tests := []struct {
		name     string
		env      map[string]string
		explicit string
		want     func() *Config
		wantErr  []string
	}{
		{name: "defaults", want: Default},
		{name: "explicit file", explicit: full, want: fullConfig},
		{name: "STARPU_CONFIG", env: map[string]string{EnvConfig: full}, want: fullConfig},
		{name: "explicit wins over STARPU_CONFIG", env: map[string]string{EnvConfig: other}, explicit: full, want: fullConfig},
		{name: "env overrides file", explicit: full, env: map[string]string{
			EnvSched: "eager", EnvNCPU: "-1", EnvPluginDir: "/env/plugins", EnvQueueDepth: "16",
			EnvSpinIters: "10", EnvArenaSize: "1MiB", EnvLogLevel: "error",
		}, want: func() *Config {
			c := fullConfig()
			c.Sched, c.NCPU, c.PluginDir, c.QueueDepth = "eager", -1, "/env/plugins", 16
			c.SpinIters, c.ArenaSize, c.LogLevel = 10, 1<<20, "error"
			return c
		}},
		{name: "env only", env: map[string]string{EnvNCPU: "1"}, want: func() *Config {
			c := Default()
			c.NCPU = 1
			return c
		}},
		{name: "missing explicit", explicit: missing, wantErr: []string{"config file " + missing}},
		{name: "missing STARPU_CONFIG", env: map[string]string{EnvConfig: missing}, wantErr: []string{"config file " + missing}},
		{name: "syntax", explicit: syntax, wantErr: []string{"config file " + syntax + ": ", syntax + ":1:"}},
		{name: "out of range in file", explicit: badRange, wantErr: []string{badRange + ":2:15", "queue_depth"}},
		{name: "bad env after good file", explicit: full, env: map[string]string{EnvNCPU: "many"}, wantErr: []string{EnvNCPU, `"many"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(tt.env), tt.explicit)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Load succeeded: %+v", c)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(); !reflect.DeepEqual(c, want) {
				t.Fatalf("got  %+v\nwant %+v", c, want)
			}
		})
	}
}

func TestLoadWithDefaults(t *testing.T) {
	def := Default()
	def.PluginDir = "/custom/plugins"
	def.ArenaSize = 1 << 30
	keep := def.Clone()

	c, err := LoadWithDefaults(def, env(map[string]string{EnvSched: "eager"}), "")
	if err != nil {
		t.Fatal(err)
	}
	want := keep.Clone()
	want.Sched = "eager"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if !reflect.DeepEqual(def, keep) {
		t.Fatal("LoadWithDefaults modified its defaults")
	}

	// Invalid defaults are caught by Validate.
	def.QueueDepth = 0
	if _, err := LoadWithDefaults(def, env(nil), ""); err == nil || !strings.Contains(err.Error(), "queue_depth") {
		t.Fatalf("LoadWithDefaults(bad defaults) = %v", err)
	}
	// nil defaults mean Default().
	c, err = LoadWithDefaults(nil, env(nil), "")
	if err != nil || !reflect.DeepEqual(c, Default()) {
		t.Fatalf("LoadWithDefaults(nil) = %+v, %v", c, err)
	}
}
