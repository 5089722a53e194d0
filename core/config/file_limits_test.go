package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A configuration file that is not a regular file, or is larger than
// MaxFileSize, is refused with an error naming it, before it is read: a
// device such as /dev/zero would be read forever and a FIFO would block.
func TestConfigFileLimits(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	atLimit := write("at-limit.hcl", append([]byte("sched = \"eager\"\n#"), []byte(strings.Repeat("x", MaxFileSize-17))...))
	tooBig := write("too-big.hcl", append([]byte("sched = \"eager\"\n#"), []byte(strings.Repeat("x", MaxFileSize-16))...))
	fifo := filepath.Join(dir, "fifo.hcl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	linkToZero := filepath.Join(dir, "zero.hcl")
	if err := os.Symlink("/dev/zero", linkToZero); err != nil {
		t.Fatal(err)
	}
	linkToGood := filepath.Join(dir, "good-link.hcl")
	if err := os.Symlink(atLimit, linkToGood); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		want       string // "" means accepted
	}{
		{"dev zero", "/dev/zero", "config file /dev/zero: not a regular file (a character device)"},
		{"link to dev zero", linkToZero, "config file " + linkToZero + ": not a regular file (a character device)"},
		{"fifo", fifo, "config file " + fifo + ": not a regular file (a named pipe)"},
		{"directory", dir, "config file " + dir + ": not a regular file (a directory)"},
		{"too big", tooBig, "config file " + tooBig + ": 1048577 bytes, more than the 1048576 accepted"},
		{"at the limit", atLimit, ""},
		{"link to a regular file", linkToGood, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			// As the probe did it: STARPU_CONFIG=/dev/zero.
			cfg, err := Load(env(map[string]string{EnvConfig: c.path}), "")
			if c.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if cfg.Sched != "eager" {
					t.Fatalf("Load: sched %q, want the file's", cfg.Sched)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("Load error = %v, want %q", err, c.want)
			}
		})
	}
}
