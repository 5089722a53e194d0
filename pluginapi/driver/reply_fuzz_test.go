package driver

import (
	"context"
	"math"
	"reflect"
	"testing"

	gproto "google.golang.org/protobuf/proto"

	"github.com/starpu-go/starpu/pluginapi/driver/proto"
)

// addSeeds adds each message, encoded, to f's corpus, with the given
// further arguments.
func addSeeds(f *testing.F, msgs []gproto.Message, more ...any) {
	for _, m := range msgs {
		b, err := gproto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]any{b}, more...)...)
	}
}

// FuzzFingerprintReply decodes random bytes as a Fingerprint reply and runs
// them through the client's check: it never panics, and in an accepted
// fingerprint the architecture is known, there are at most MaxNodes nodes,
// and every unit's node maps, as the core maps a driver's node numbers,
// onto RAM or onto this driver's own nodes, never another driver's. The
// accepted fingerprint survives the server's encoding unchanged.
func FuzzFingerprintReply(f *testing.F) {
	addSeeds(f, []gproto.Message{
		&proto.FingerprintResponse{Arch: "cpu", Units: []*proto.Unit{{Name: "CPU 0"}, {Name: "CPU 1"}}, Kernels: []string{"axpy", "gemm"}, SchedRing: true},
		&proto.FingerprintResponse{Arch: "cuda", Units: []*proto.Unit{{Name: "gpu0", Node: 1}, {Name: "gpu1", Node: 2}},
			Nodes: []*proto.MemoryNode{{Name: "m0", Bytes: 1 << 34}, {Name: "m1", Bytes: 1 << 34}}},
		&proto.FingerprintResponse{Arch: "opencl", Units: []*proto.Unit{{Name: "d", Node: 5}}, Nodes: []*proto.MemoryNode{{}}},
		&proto.FingerprintResponse{Arch: "tpu", Units: []*proto.Unit{{Node: -1}}},
		&proto.FingerprintResponse{},
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		var resp proto.FingerprintResponse
		if gproto.Unmarshal(b, &resp) != nil {
			return
		}
		fp, err := fingerprintReply(&resp)
		if err != nil {
			if fp != nil {
				t.Fatalf("rejected with %v, yet returned %+v", err, fp)
			}
			return
		}
		if ArchIndex(fp.Arch) < 0 || ArchBit(fp.Arch) == 0 {
			t.Fatalf("accepted architecture %q", fp.Arch)
		}
		if len(fp.Nodes) > MaxNodes {
			t.Fatalf("accepted %d nodes", len(fp.Nodes))
		}
		// The core numbers this driver's nodes from nodeBase, after RAM and
		// the nodes of the drivers before it.
		const nodeBase = 3
		for i, u := range fp.Units {
			global := 0
			if u.Node != 0 {
				global = nodeBase + u.Node - 1
			}
			if global != 0 && (global < nodeBase || global >= nodeBase+len(fp.Nodes)) {
				t.Fatalf("unit %d on node %d maps to runtime node %d, outside this driver's %d..%d",
					i, u.Node, global, nodeBase, nodeBase+len(fp.Nodes)-1)
			}
		}
		back, err := NewServer(&recDriver{fp: fp}).Fingerprint(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := fingerprintReply(back); err != nil || !reflect.DeepEqual(again, fp) {
			t.Fatalf("round trip of %+v gave %+v, %v", fp, again, err)
		}
	})
}

// FuzzLoadKernelReply decodes random bytes as a LoadKernel reply, for a
// driver whose fingerprint listed builtins kernels: the check never panics,
// and an accepted index comes after the built-in kernels and fits the 32
// bits an Exec message carries.
func FuzzLoadKernelReply(f *testing.F) {
	addSeeds(f, []gproto.Message{&proto.LoadKernelResponse{Index: 3}}, uint16(3))
	addSeeds(f, []gproto.Message{&proto.LoadKernelResponse{Index: 1}}, uint16(3))
	addSeeds(f, []gproto.Message{&proto.LoadKernelResponse{Index: -1}}, uint16(0))
	addSeeds(f, []gproto.Message{&proto.LoadKernelResponse{Index: math.MaxInt32 + 1}}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, builtins uint16) {
		var resp proto.LoadKernelResponse
		if gproto.Unmarshal(b, &resp) != nil {
			return
		}
		idx, err := loadKernelReply(&resp, int64(builtins))
		if err != nil {
			return
		}
		if idx < int(builtins) || idx > math.MaxInt32 || int(int32(idx)) != idx || int64(idx) != resp.GetIndex() {
			t.Fatalf("accepted index %d (sent %d) after %d built-in kernels", idx, resp.GetIndex(), builtins)
		}
	})
}
