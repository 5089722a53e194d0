package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A relative plugin_dir in a configuration file is relative to the file's
// directory, wherever the program runs.
func TestPluginDirRelativeToFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "etc", "starpu.hcl")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ src, want string }{
		{`plugin_dir = "plugins"`, filepath.Join(dir, "etc", "plugins")},
		{`plugin_dir = "../lib/starpu/./plugins/"`, filepath.Join(dir, "lib", "starpu", "plugins")},
		{`plugin_dir = "/opt/starpu//plugins/"`, "/opt/starpu/plugins"},
	} {
		if err := os.WriteFile(file, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		// Also through a relative path to the file, from elsewhere.
		t.Chdir(filepath.Join(dir, "etc"))
		for _, path := range []string{file, "starpu.hcl"} {
			c, err := LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if c.PluginDir != tc.want {
				t.Errorf("%s from %s: PluginDir %q, want %q", tc.src, path, c.PluginDir, tc.want)
			}
		}
		t.Chdir(t.TempDir())
		c, err := Load(env(map[string]string{EnvConfig: file}), "")
		if err != nil {
			t.Fatal(err)
		}
		if c.PluginDir != tc.want {
			t.Errorf("%s through %s: PluginDir %q, want %q", tc.src, EnvConfig, c.PluginDir, tc.want)
		}
	}
}

// Without a file to be relative to, a relative plugin_dir is refused.
func TestPluginDirRelativeWithoutFile(t *testing.T) {
	_, err := Parse([]byte("plugin_dir = \"plugins\"\n"), "inline.hcl")
	if err == nil {
		t.Fatal("Parse accepted a relative plugin_dir")
	}
	for _, w := range []string{"inline.hcl:1", `"plugins" is relative`, "absolute path"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
	c, err := Parse([]byte(`plugin_dir = "/abs/plugins"`), "inline.hcl")
	if err != nil || c.PluginDir != "/abs/plugins" {
		t.Fatalf("absolute plugin_dir: %v, %v", c, err)
	}
}

// A relative STARPU_PLUGIN_DIR is relative to the working directory at
// load time, and made absolute.
func TestPluginDirRelativeFromEnv(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	c := Default()
	if err := c.ApplyEnv(env(map[string]string{EnvPluginDir: "bin/plugins"})); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(wd, "bin", "plugins")
	if c.PluginDir != want {
		t.Fatalf("PluginDir %q, want %q", c.PluginDir, want)
	}
}

// STARPU_PLUGIN_PATH puts its directories, made absolute, before the
// default search path; empty entries and repeats are dropped.
func TestPluginPathFromEnv(t *testing.T) {
	c := &Config{PluginPath: []string{"/usr/local/lib/starpu/plugins", "/b"}}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv(env(map[string]string{EnvPluginPath: "/a::rel/plugins:/b/"})); err != nil {
		t.Fatal(err)
	}
	want := []string{"/a", filepath.Join(wd, "rel/plugins"), "/b", "/usr/local/lib/starpu/plugins"}
	if !slices.Equal(c.PluginPath, want) {
		t.Fatalf("PluginPath %q, want %q", c.PluginPath, want)
	}
	if got := c.PluginDirs(); !slices.Equal(got, want) {
		t.Fatalf("PluginDirs() %q without a PluginDir, want the path %q", got, want)
	}
	c.PluginDir = "/only"
	if got := c.PluginDirs(); !slices.Equal(got, []string{"/only"}) {
		t.Fatalf("PluginDirs() %q with a PluginDir, want it alone", got)
	}
}
