package config

import (
	"reflect"
	"strconv"
	"testing"
)

// FuzzParse: the configuration parser (HCL and HCL's JSON syntax) never
// panics on any input; on error it leaves the configuration unchanged, and
// what it accepts can be validated and cloned.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		fullFile,
		`ncpu = -1` + "\n" + `arena_size = 4096`,
		`context "fast" { workers = [0, 1]` + "\n" + `sched = "dmda"` + "\n" + `config { sorted = true } }`,
		`context "" { workers = [] }`,
		`plugin "x" { config { a = 1.5e300 } }` + "\n" + `plugin "x" {}`,
		`queue_depth = 99999999999999999999999`,
		`ncpu = "${1 + 1}"`,
		`sched = [for x in [1] : x]`,
		`{"sched": "ws", "ncpu": 2, "plugin": {"sched-ws": {"config": {"steal": false}}}}`,
		`{"context": {"c": {"workers": [0]}}}`,
		"",
		"\x00\xff",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, src []byte, json bool) {
		name := "fuzz.hcl"
		if json {
			name = "fuzz.json"
		}
		c := Default()
		before := c.Clone()
		if err := c.Decode(src, name); err != nil {
			if err.Error() == "" {
				t.Fatal("error with an empty message")
			}
			if !reflect.DeepEqual(c, before) {
				t.Fatalf("failed Decode changed the configuration: %+v", c)
			}
			return
		}
		_ = c.Validate()
		if n := c.Clone(); !reflect.DeepEqual(n, c) {
			t.Fatalf("Clone differs: %+v, want %+v", n, c)
		}
	})
}

// FuzzApplyEnv: any value of any StarPU variable is taken or refused with
// an error, never a panic, and a refused environment changes nothing.
func FuzzApplyEnv(f *testing.F) {
	for _, s := range []string{"", "4", "-1", "-2", " 8GiB ", "1.5GiB", "99999999999999999999", "debug", "TRACE", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range []string{EnvSched, EnvNCPU, EnvPluginDir, EnvQueueDepth, EnvSpinIters, EnvArenaSize, EnvLogLevel, EnvCalibrate, EnvModelDir} {
			c := Default()
			before := c.Clone()
			err := c.ApplyEnv(func(k string) string {
				if k == name {
					return v
				}
				return ""
			})
			if err != nil && !reflect.DeepEqual(c, before) {
				t.Fatalf("%s=%q: refused but applied", name, v)
			}
		}
	})
}

// FuzzParseSize: ParseSize never panics, and a plain number of bytes it
// accepts is that number.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8GiB", "8 GiB", "512MB", "4096", "1.5GiB", "-1", "8GB2", "8 gigs", "18446744073709551615", "18446744073709551616", "17179869184GiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if m, err := ParseSize(strconv.FormatUint(n, 10)); err != nil || m != n {
			t.Fatalf("ParseSize(%q) = %d, but ParseSize(%d) = %d, %v", s, n, n, m, err)
		}
	})
}
