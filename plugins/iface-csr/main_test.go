package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacetest"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// binary is this package built as bin/plugins/iface-csr would be.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iface-csr-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		binary = ifacetest.Build(&buildTB{}, ".", dir, csr.Name)
		return m.Run()
	}()
	os.Exit(code)
}

// buildTB lets TestMain use ifacetest.Build, which reports through a
// testing.TB.
type buildTB struct{ testing.TB }

func (*buildTB) Helper() {}
func (*buildTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// laplacian is the 2-D 5-point Laplacian on a k x k grid as float64 CSR.
func laplacian(k int) ([]float64, []uint32, []uint32) {
	var nz []float64
	var ci []uint32
	rp := []uint32{0}
	for i := 0; i < k; i++ {
		for j := 0; j < k; j++ {
			add := func(ii, jj int, v float64) {
				if ii >= 0 && ii < k && jj >= 0 && jj < k {
					nz, ci = append(nz, v), append(ci, uint32(ii*k+jj))
				}
			}
			add(i-1, j, -1)
			add(i, j-1, -1)
			add(i, j, 4)
			add(i, j+1, -1)
			add(i+1, j, -1)
			rp = append(rp, uint32(len(nz)))
		}
	}
	return nz, ci, rp
}

func lapParts(k int) (csr.Meta, [][]byte, error) {
	nz, ci, rp := laplacian(k)
	return csr.Parts(nz, ci, rp, 0)
}

func start(t testing.TB, arena uint64) (*ifacetest.Plugin, *shm.Arena) {
	a := ifacetest.Arena(t, arena)
	return ifacetest.Start(t, binary, a), a
}

// TestEveryMethod drives each method of the real iface-csr process.
func TestEveryMethod(t *testing.T) {
	p, a := start(t, 1<<26)
	ctx := context.Background()
	info, err := p.PluginInfo(ctx)
	if err != nil || info.Kind != base.KindInterface || info.Name != "csr" {
		t.Fatalf("PluginInfo = %+v, %v", info, err)
	}
	if s, err := p.ConfigSchema(ctx); err != nil || len(s.Attrs) != 0 {
		t.Fatalf("ConfigSchema = %+v, %v", s, err)
	}
	if err := p.SetConfig(ctx, base.Config{}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	m, parts, _ := lapParts(8)
	other := m
	other.NNZ--
	ifacetest.Conformance(t, p, a, m.Encode(), parts, other.Encode())

	d, err := p.Describe(ctx, m.Encode(), nil)
	if err != nil || d.Name != "csr" || d.Layout != m.Layout() || d.Size != uint64(len(parts[0])+len(parts[1])+len(parts[2])) {
		t.Fatalf("Describe = %+v, %v", d, err)
	}
	plan, err := p.CopyPlan(ctx, m.Encode())
	if want := []iface.Range{{Buffer: 0, Len: d.Buffers[0]}, {Buffer: 1, Len: d.Buffers[1]}, {Buffer: 2, Len: d.Buffers[2]}}; err != nil || fmt.Sprint(plan) != fmt.Sprint(want) {
		t.Fatalf("CopyPlan = %v, %v; want %v", plan, err, want)
	}
	if s, err := p.Display(ctx, m.Encode()); err != nil || s != "csr(nrow=64 nnz=288 firstentry=0 elemsize=8)" {
		t.Fatalf("Display = %q, %v", s, err)
	}

	r := ifacetest.Load(t, a, parts)
	kids, err := p.Partition(ctx, csr.RowsFilter, m.Encode(), r.Parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := iface.CheckChildren(d.Buffers, kids); err != nil {
		t.Fatal(err)
	}
	for c, kid := range kids {
		cr := ifacetest.Place(t, a, kid.Desc.Buffers)
		for _, rg := range kid.Ranges {
			copy(a.Bytes(cr.Parts[rg.ChildPart])[rg.ChildOffset:], a.Bytes(r.Parts[rg.Part])[rg.Offset:rg.Offset+rg.Len])
		}
		if _, err := p.Describe(ctx, kid.Meta, cr.Parts); err != nil {
			t.Fatalf("child %d: %v", c, err)
		}
	}
}

// Malformed matrices are refused by Describe, as RegisterInterface calls it,
// with the first bad entry named, through the process boundary.
func TestDescribeRefusesMalformed(t *testing.T) {
	p, a := start(t, 1<<24)
	ctx := context.Background()
	nz, ci, rp := laplacian(3) // 9 rows, 33 entries
	for _, c := range []struct {
		name   string
		edit   func(rp, ci []uint32) []uint32
		meta   func(m csr.Meta) csr.Meta
		want   string
		colind []uint32
	}{
		{name: "decreasing", edit: func(rp, _ []uint32) []uint32 { rp[4] = 2; return rp },
			want: "describe: csr: rowptr[4] = 2 < rowptr[3] = 10: rowptr must not decrease"},
		{name: "end", edit: func(rp, _ []uint32) []uint32 { rp[9] = 32; rp[8] = 30; return rp },
			want: "describe: csr: rowptr[9] = 32, want firstentry+nnz = 33"},
		{name: "start", edit: func(rp, _ []uint32) []uint32 { rp[0] = 1; return rp },
			want: "describe: csr: rowptr[0] = 1, want firstentry 0"},
		{name: "sizes", edit: func(rp, _ []uint32) []uint32 { return rp[:9] },
			want: "describe: rowptr has 36 bytes, the metadata says 40"},
		{name: "meta", meta: func(m csr.Meta) csr.Meta { m.ElemSize = 0; return m },
			want: "describe: csr metadata: elemsize is 0"},
	} {
		rp2 := append([]uint32(nil), rp...)
		m, parts, _ := csr.Parts(nz, ci, rp, 0)
		if c.edit != nil {
			rp2 = c.edit(rp2, ci)
			_, parts, _ = csr.Parts(nz, ci, rp2, 0)
		}
		if c.meta != nil {
			m = c.meta(m)
		}
		r := ifacetest.Load(t, a, parts)
		_, err := p.Describe(ctx, m.Encode(), r.Parts)
		var re *base.RemoteError
		if err == nil || !errors.As(err, &re) || err.Error() != "plugin iface-csr: "+c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, "plugin iface-csr: "+c.want)
		}
	}
	if _, err := p.Partition(ctx, "columns", csr.Meta{NNZ: 0, NRow: 1, ElemSize: 8}.Encode(), nil, 1); err == nil ||
		!strings.HasSuffix(err.Error(), `partition: interface csr has no filter "columns" (it has rows)`) {
		t.Errorf("unknown filter: %v", err)
	}
}

// A plugin process killed under the core gives an error saying it exited,
// promptly, not a hang.
func TestKilledPlugin(t *testing.T) {
	p, _ := start(t, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta := csr.Meta{NRow: 1, ElemSize: 8}.Encode()
	if _, err := p.Describe(ctx, meta, nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !p.Exited() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_, err := p.Describe(ctx, meta, nil)
	if !errors.Is(err, base.ErrPluginExited) || !strings.HasPrefix(err.Error(), "plugin iface-csr: ") {
		t.Fatalf("Describe on a killed plugin: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to fail", d)
	}
}

// BenchmarkPackUnpack measures Pack then Unpack of a float64 CSR matrix of
// about 13 MB through the plugin process; MB/s counts the packed bytes once
// per round trip.
func BenchmarkPackUnpack(b *testing.B) {
	for _, k := range []int{16, 500} {
		m, parts, _ := lapParts(k)
		b.Run(fmt.Sprintf("nnz=%d", m.NNZ), func(b *testing.B) {
			p, a := start(b, 1<<28)
			ctx := context.Background()
			r := ifacetest.Load(b, a, parts)
			d, err := p.Describe(ctx, m.Encode(), r.Parts)
			if err != nil {
				b.Fatal(err)
			}
			msg, err := a.Alloc(d.Size)
			if err != nil {
				b.Fatal(err)
			}
			back := ifacetest.Place(b, a, d.Buffers)
			b.SetBytes(int64(d.Size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n, err := p.Pack(ctx, m.Encode(), r.Parts, msg)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Unpack(ctx, m.Encode(), base.Span{Offset: msg.Offset, Size: n}, back.Parts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
