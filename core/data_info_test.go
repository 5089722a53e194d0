package core_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// Handle.Pack packs a plugin interface's datum by its copy plan, without
// asking the plugin: for the sparse interfaces that is byte for byte what
// the plugin's own Pack gives, Size is the plugin's Size, and Unpack into
// a handle of the same shape gives the datum back, whole matrices and
// filter children alike.
func TestPackIsThePluginsPack(t *testing.T) {
	dir := buildPlugins(t, "iface-csr", "iface-bcsr", "iface-coo")
	cfg := testConfig(dir)
	cfg.ModelDir = t.TempDir()
	rt := start(t, core.Options{Config: cfg})
	for _, c := range sparseCases {
		t.Run(c.iface, func(t *testing.T) {
			check := func(what string, h *core.Handle) {
				p, err := h.Pack()
				if err != nil {
					t.Fatal(err)
				}
				q, err := h.PluginPack()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p, q) || uint64(len(p)) != h.Size() || h.Size() != h.PluginSize() {
					t.Fatalf("%s: Pack gave %d bytes %x, the plugin's Pack %d bytes %x; Size %d, the plugin's %d", what, len(p), p, len(q), q, h.Size(), h.PluginSize())
				}
				same, err := h.RegisterSame()
				if err != nil {
					t.Fatal(err)
				}
				if err := same.Unpack(p); err != nil {
					t.Fatal(err)
				}
				if r, err := same.PluginPack(); err != nil || !bytes.Equal(r, p) {
					t.Fatalf("%s: unpacked into a handle of its shape, it packs as %x (%v), want %x", what, r, err, p)
				}
				if err := same.Unregister(); err != nil {
					t.Fatal(err)
				}
			}
			h := registerSparse(t, rt, c.iface, c.matrix)
			check("matrix", h)
			children, err := h.Partition(core.PluginFilter(c.filter, 2))
			if err != nil {
				t.Fatal(err)
			}
			check("child 1", children[1])
		})
	}
}

// BenchmarkPackCSR packs a CSR matrix of 1,216 non-zeros by its copy plan
// (Handle.Pack) and with the plugin's own Pack, a gRPC call to iface-csr.
func BenchmarkPackCSR(b *testing.B) {
	cfg := testConfig(buildPlugins(b, "iface-csr"))
	cfg.ModelDir = b.TempDir()
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Shutdown()
	const nrow, perRow = 152, 8
	val, col, row := make([]float64, nrow*perRow), make([]uint32, nrow*perRow), []uint32{0}
	for i := range val {
		val[i], col[i] = float64(i), uint32(i%perRow)
		if i%perRow == perRow-1 {
			row = append(row, uint32(i+1))
		}
	}
	m, parts, err := csr.Parts(val, col, row, 0)
	if err != nil {
		b.Fatal(err)
	}
	h, err := rt.RegisterInterface(csr.Name, m.Encode(), parts)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pack func() ([]byte, error)
	}{{"copy plan", h.Pack}, {"plugin", h.PluginPack}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.pack(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
