// Package ifacetest is the test kit for data interface plugins: it builds a
// plugin binary, starts it as the core does (go-plugin handshake, the arena
// as file descriptor 3) and checks an interface's methods against a datum
// whose parts the test gives, so a plugin author tests across the real
// process boundary in a few lines.
package ifacetest

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/internal/launch"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Build compiles the plugin main package at pkg into dir/iface-<name> and
// returns its path.
func Build(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	return launch.Build(t, pkg, dir, base.KindInterface, name)
}

// Arena creates an arena of size bytes for a test, closed at its end.
func Arena(t testing.TB, size uint64) *shm.Arena {
	t.Helper()
	a, err := shm.Create(size, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// Plugin is a started interface plugin process.
type Plugin struct {
	iface.Interface
	client *plugin.Client
	cmd    *exec.Cmd
}

// Start launches the plugin binary at path on arena a as the core does and
// returns it; it is killed at the test's end.
func Start(t testing.TB, path string, a *shm.Arena) *Plugin {
	t.Helper()
	raw, client, cmd := launch.Start(t, path, a, base.KindInterface, &iface.Plugin{Name: filepath.Base(path)}, "ifacetest")
	return &Plugin{Interface: raw.(iface.Interface), client: client, cmd: cmd}
}

// Pid is the plugin process's id.
func (p *Plugin) Pid() int { return p.cmd.Process.Pid }

// Kill ends the plugin process and waits for it.
func (p *Plugin) Kill() { p.client.Kill() }

// Exited reports whether the plugin process has exited.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Region is a datum's region in the arena: its parts, placed by
// iface.PartOffsets as the core places them.
type Region struct {
	Span  base.Span
	Parts []base.Span
}

// Place allocates a region for parts of the given sizes.
func Place(t testing.TB, a *shm.Arena, sizes []uint64) Region {
	t.Helper()
	offs, total := iface.PartOffsets(sizes)
	s, err := a.Alloc(total)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Free(s) })
	r := Region{Span: s}
	for i, n := range sizes {
		r.Parts = append(r.Parts, base.Span{Offset: s.Offset + offs[i], Size: n})
	}
	return r
}

// Load places parts in a new region and copies them in, as the core does at
// registration.
func Load(t testing.TB, a *shm.Arena, parts [][]byte) Region {
	t.Helper()
	sizes := make([]uint64, len(parts))
	for i, p := range parts {
		sizes[i] = uint64(len(p))
	}
	r := Place(t, a, sizes)
	for i, p := range parts {
		copy(a.Bytes(r.Parts[i]), p)
	}
	return r
}

// Conformance checks the methods every interface has on a valid datum
// (meta, parts) and a datum of another shape (other): Describe with and
// without parts agree and pass Check and CheckParts, the copy plan covers
// every part's bytes exactly once, Pack then Unpack into a fresh region
// restores every part, and Compare and Display answer.
func Conformance(t *testing.T, i iface.Interface, a *shm.Arena, meta []byte, parts [][]byte, other []byte) {
	t.Helper()
	ctx := context.Background()
	r := Load(t, a, parts)
	d, err := i.Describe(ctx, meta, r.Parts)
	if err != nil {
		t.Fatalf("Describe with parts: %v", err)
	}
	if err := d.Check(); err != nil {
		t.Fatalf("Describe: %v", err)
	}
	sizes := make([]uint64, len(parts))
	for k, p := range parts {
		sizes[k] = uint64(len(p))
	}
	if err := d.CheckParts(sizes); err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if d2, err := i.Describe(ctx, meta, nil); err != nil || d2.Footprint != d.Footprint || d2.Layout != d.Layout {
		t.Fatalf("Describe without parts = %+v, %v; with parts %+v", d2, err, d)
	}

	plan, err := i.CopyPlan(ctx, meta)
	if err != nil {
		t.Fatalf("CopyPlan: %v", err)
	}
	// The ranges of each part, in order, must tile it.
	byPart := make([][]iface.Range, len(parts))
	for _, rg := range plan {
		if rg.Buffer < 0 || rg.Buffer >= len(parts) {
			t.Fatalf("copy plan range %+v names a part beyond the %d parts", rg, len(parts))
		}
		byPart[rg.Buffer] = append(byPart[rg.Buffer], rg)
	}
	for k, rs := range byPart {
		sort.Slice(rs, func(x, y int) bool { return rs[x].Offset < rs[y].Offset })
		var next uint64
		for _, rg := range rs {
			if rg.Offset != next {
				t.Fatalf("copy plan of part %d: range %+v starts at %d, want %d (gap or overlap)", k, rg, rg.Offset, next)
			}
			next += rg.Len
		}
		if next != sizes[k] {
			t.Fatalf("copy plan of part %d covers %d of its %d bytes", k, next, sizes[k])
		}
	}

	msg, err := a.Alloc(d.Size + 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free(msg)
	n, err := i.Pack(ctx, meta, r.Parts, msg)
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	back := Place(t, a, sizes)
	if err := i.Unpack(ctx, meta, base.Span{Offset: msg.Offset, Size: n}, back.Parts); err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	for k := range parts {
		if !bytes.Equal(a.Bytes(back.Parts[k]), parts[k]) {
			t.Fatalf("part %d differs after Pack and Unpack", k)
		}
	}

	if eq, err := i.Compare(ctx, meta, meta); err != nil || !eq {
		t.Fatalf("Compare(meta, meta) = %v, %v", eq, err)
	}
	if eq, err := i.Compare(ctx, meta, other); err != nil || eq {
		t.Fatalf("Compare(meta, other) = %v, %v; want false", eq, err)
	}
	if s, err := i.Display(ctx, meta); err != nil || s == "" {
		t.Fatalf("Display = %q, %v", s, err)
	}
}
