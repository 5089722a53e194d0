package core

import (
	"testing"

	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// fetchTime predicts the copies the coherency protocol makes: through RAM,
// so that data valid only on one device pays both legs to reach another,
// but in one copy over a peer link (cuda_0 to cuda_1) when the bus model
// has measured it.
func TestFetchTime(t *testing.T) {
	bus := &perfmodel.Bus{}
	// 1 byte/us and 10 us of latency up, 2 bytes/us and 20 us down, and
	// distinct figures for the second device, so that each leg shows.
	for _, l := range []struct {
		src, dst      string
		mbps, latency float64
	}{
		{"RAM", "opencl_0", 1, 10}, {"opencl_0", "RAM", 2, 20},
		{"RAM", "cuda_0", 4, 40}, {"cuda_0", "RAM", 8, 80},
		{"cuda_0", "cuda_1", 16, 160}, {"RAM", "cuda_1", 32, 320}, {"cuda_1", "RAM", 64, 640},
	} {
		if err := bus.Set(l.src, l.dst, l.mbps, l.latency); err != nil {
			t.Fatal(err)
		}
	}
	// Both CUDA nodes are peers; only cuda_0 to cuda_1 was measured.
	rt := &Runtime{nodes: []*memNode{{id: 0, name: "RAM"}, {id: 1, name: "opencl_0"}, {id: 2, name: "cuda_0", peers: []int{3}}, {id: 3, name: "cuda_1", peers: []int{2}}}, bus: bus}
	const bytes = 800
	h := &Handle{layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 1, NX: bytes}, size: bytes}
	us := func(mbps, latency float64) float64 { return (latency + bytes/mbps) * 1e3 }
	for _, c := range []struct {
		name string
		mask uint64
		dst  int
		want float64
	}{
		{"RAM to a device", 1, 1, us(1, 10)},
		{"a device to RAM", 1 << 1, 0, us(2, 20)},
		{"one device to another, through RAM", 1 << 2, 1, us(8, 80) + us(1, 10)},
		{"RAM and a device to the other device: from RAM", 1 | 1<<1, 2, us(4, 40)},
		{"two devices to RAM: from the first", 1<<1 | 1<<2, 0, us(2, 20)},
		{"a device to its peer: one copy", 1 << 2, 3, us(16, 160)},
		{"another device and a peer: from the peer", 1<<1 | 1<<2, 3, us(16, 160)},
		{"a peer link not measured: through RAM", 1 << 3, 2, us(64, 640) + us(4, 40)},
	} {
		if got := rt.fetchTime(h, c.mask, c.dst); got != c.want {
			t.Errorf("%s: %v ns, want %v", c.name, got, c.want)
		}
	}
}

// A transfer moves the data without a strided matrix's gaps, and a plugin
// interface's Size.
func TestTransferBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		h    *Handle
		want uint64
	}{
		{"vector", &Handle{layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 100}, size: 400}, 400},
		{"strided matrix", &Handle{layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 8, NX: 3, NY: 5, LD: 10}, size: 8 * (10*4 + 3)}, 8 * 15},
		{"strided block", &Handle{layout: kernel.Layout{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 3, NZ: 4, LD: 5, LDZ: 20}, size: 4 * (20*3 + 5*2 + 2)}, 4 * 24},
		{"plugin interface", &Handle{iface: &ifaceData{desc: &iface.Description{Size: 4242, Buffers: []uint64{4000, 242}}}, size: 4096 + 242}, 4242},
	} {
		if got := c.h.transferBytes(1); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}
