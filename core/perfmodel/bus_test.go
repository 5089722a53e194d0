package perfmodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBusPredict(t *testing.T) {
	var b Bus
	if _, ok := b.Predict("RAM", "opencl_0", 1); ok {
		t.Error("empty bus predicted")
	}
	if err := b.Set("RAM", "opencl_0", 1000, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.Set("opencl_0", "RAM", 500, 20); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		src, dst string
		bytes    uint64
		ns       float64
		ok       bool
	}{
		{"RAM", "opencl_0", 0, 10e3, true},
		{"RAM", "opencl_0", 1e6, 10e3 + 1e6, true}, // 1 MB at 1000 MB/s = 1 ms
		{"opencl_0", "RAM", 1e6, 20e3 + 2e6, true},
		{"RAM", "RAM", 1 << 30, 0, true},
		{"RAM", "cuda_0", 1, 0, false},
	}
	for _, c := range cases {
		ns, ok := b.Predict(c.src, c.dst, c.bytes)
		if ok != c.ok || !near(ns, c.ns, 1e-12) {
			t.Errorf("Predict(%s, %s, %d) = %v, %v; want %v, %v", c.src, c.dst, c.bytes, ns, ok, c.ns, c.ok)
		}
	}
	bad := []struct {
		src, dst    string
		mbps, latUs float64
		want        string
	}{
		{"", "RAM", 1, 1, "empty node name"},
		{"RAM", "RAM", 1, 1, "itself"},
		{"RAM", "x", 0, 1, "bandwidth"},
		{"RAM", "x", 1, -1, "latency"},
	}
	for _, c := range bad {
		if err := b.Set(c.src, c.dst, c.mbps, c.latUs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Set(%q, %q, %v, %v) = %v, want an error about %s", c.src, c.dst, c.mbps, c.latUs, err, c.want)
		}
	}
}

func TestBusRoundTripAndErrors(t *testing.T) {
	t.Setenv("STARPU_HOSTNAME", testHost)
	dir := t.TempDir()
	b, found, err := LoadBus(dir)
	if err != nil || found || len(b.Links()) != 0 {
		t.Fatalf("LoadBus of an empty dir = %v, %v, %v", b.Links(), found, err)
	}
	b.Set("RAM", "opencl_0", 5200, 12.5)
	b.Set("opencl_0", "RAM", 4800, 14)
	if err := b.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bus", testHost+".json")
	b2, found, err := LoadBus(dir)
	if err != nil || !found {
		t.Fatalf("LoadBus = %v, %v", found, err)
	}
	if got, want := b2.Links(), b.Links(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("links after reload %+v, want %+v", got, want)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, content, want string
	}{
		{"syntax", strings.Replace(string(raw), "[", "[[", 1), "line 19 column 2"},
		{"version", strings.Replace(string(raw), `"version": 1`, `"version": 2`, 1), "field version"},
		{"link", strings.Replace(string(raw), "5200", "-1", 1), "field links[0]"},
		{"duplicate", strings.Replace(strings.Replace(string(raw), `"dst": "RAM"`, `"dst": "opencl_0"`, 1), `"src": "opencl_0"`, `"src": "RAM"`, 1), "appears twice"},
	}
	for _, c := range cases {
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadBus(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: LoadBus = %v, want an error naming %s and %q", c.name, err, path, c.want)
		}
	}
}
