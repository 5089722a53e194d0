package driver

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// indexDriver is a recDriver whose LoadKernel answers index, whatever the
// source.
type indexDriver struct {
	recDriver
	index int
}

func (d *indexDriver) LoadKernel(context.Context, KernelSource) (int, error) { return d.index, nil }

// A driver plugin that answers nonsense gets an error naming it, the call
// and what is wrong, wrapping base.ErrBadReply, never a value the core would
// index with.
func TestBadReplies(t *testing.T) {
	nodes := func(n int) []MemoryNode { return make([]MemoryNode, n) }
	for _, c := range []struct {
		name  string
		fp    *Fingerprint
		index int // LoadKernel's answer, after fp
		want  string
	}{
		{"unknown architecture", &Fingerprint{Arch: "tpu"}, 0,
			`plugin driver-rec: Fingerprint: invalid reply: architecture "tpu" is not one of cpu, cuda, opencl`},
		{"no architecture", &Fingerprint{Units: []Unit{{"u", 0}}}, 0,
			`plugin driver-rec: Fingerprint: invalid reply: architecture "" is not one of cpu, cuda, opencl`},
		{"unit on a negative node", &Fingerprint{Arch: CUDA, Units: []Unit{{"gpu0", -1}}, Nodes: nodes(1)}, 0,
			`plugin driver-rec: Fingerprint: invalid reply: unit 0 ("gpu0") is on memory node -1; the driver reports RAM (0) and 1 nodes of its own`},
		{"unit past the nodes", &Fingerprint{Arch: CUDA, Units: []Unit{{"gpu0", 1}, {"gpu1", 3}}, Nodes: nodes(2)}, 0,
			`plugin driver-rec: Fingerprint: invalid reply: unit 1 ("gpu1") is on memory node 3; the driver reports RAM (0) and 2 nodes of its own`},
		{"device unit, no node", &Fingerprint{Arch: OpenCL, Units: []Unit{{"dev", 1}}}, 0,
			`plugin driver-rec: Fingerprint: invalid reply: unit 0 ("dev") is on memory node 1; the driver reports RAM (0) and 0 nodes of its own`},
		{"too many nodes", &Fingerprint{Arch: CUDA, Nodes: nodes(MaxNodes + 1)}, 0,
			"plugin driver-rec: Fingerprint: invalid reply: 65 memory nodes, more than 64"},
		{"negative kernel index", &Fingerprint{Arch: OpenCL}, -1,
			`plugin driver-rec: LoadKernel: invalid reply: kernel "k": negative index -1`},
		{"kernel index of a built-in", &Fingerprint{Arch: OpenCL, Kernels: []string{"a", "b", "c"}}, 2,
			`plugin driver-rec: LoadKernel: invalid reply: kernel "k": index 2 names one of the 3 built-in kernels of the fingerprint`},
		{"kernel index past 32 bits", &Fingerprint{Arch: OpenCL}, math.MaxInt32 + 1,
			`plugin driver-rec: LoadKernel: invalid reply: kernel "k": index 2147483648 is past 2147483647`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &indexDriver{recDriver: recDriver{fp: c.fp}, index: c.index}
			d := harness(t, rec, "driver-rec")
			ctx := context.Background()
			_, err := d.Fingerprint(ctx)
			if err == nil {
				_, err = d.LoadKernel(ctx, KernelSource{Name: "k", Source: "kernel void k() {}"})
			}
			var re *base.RemoteError
			if err == nil || err.Error() != c.want || !errors.Is(err, base.ErrBadReply) || errors.As(err, &re) {
				t.Fatalf("error %v, want %q wrapping base.ErrBadReply", err, c.want)
			}
		})
	}
}

// The fingerprints the client accepts: RAM and the driver's own nodes, the
// index right after the built-in kernels, the last 32-bit index.
func TestGoodReplies(t *testing.T) {
	for _, c := range []struct {
		name  string
		fp    *Fingerprint
		index int
	}{
		{"CPU, no kernels", &Fingerprint{Arch: CPU, Units: []Unit{{"c0", 0}, {"c1", 0}}}, 0},
		{"GPUs on their nodes", &Fingerprint{Arch: CUDA, Units: []Unit{{"g0", 1}, {"g1", 2}, {"host", 0}}, Nodes: make([]MemoryNode, 2), Kernels: []string{"a"}}, 1},
		{"every node", &Fingerprint{Arch: OpenCL, Units: []Unit{{"d", MaxNodes}}, Nodes: make([]MemoryNode, MaxNodes)}, math.MaxInt32},
		{"no unit, a note", &Fingerprint{Arch: OpenCL, Note: "no OpenCL platform"}, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := harness(t, &indexDriver{recDriver: recDriver{fp: c.fp}, index: c.index}, "driver-rec")
			ctx := context.Background()
			if _, err := d.Fingerprint(ctx); err != nil {
				t.Fatal(err)
			}
			if idx, err := d.LoadKernel(ctx, KernelSource{Name: "k"}); err != nil || idx != c.index {
				t.Fatalf("LoadKernel = %d, %v; want %d", idx, err, c.index)
			}
		})
	}
}

func TestFingerprintCheck(t *testing.T) {
	for _, c := range []struct {
		fp   Fingerprint
		want string // "" when valid
	}{
		{Fingerprint{Arch: CPU}, ""},
		{Fingerprint{Arch: CUDA, Units: []Unit{{"g", 1}}, Nodes: make([]MemoryNode, 1)}, ""},
		{Fingerprint{Arch: "cpu "}, `architecture "cpu " is not one of`},
		{Fingerprint{Arch: CUDA, Units: []Unit{{"g", 2}}, Nodes: make([]MemoryNode, 1)}, "is on memory node 2"},
		{Fingerprint{Arch: CPU, Nodes: make([]MemoryNode, MaxNodes+1)}, "more than 64"},
		{Fingerprint{Arch: CUDA, Nodes: []MemoryNode{{Peers: []int{2}}, {Peers: []int{1}}}}, ""},
		{Fingerprint{Arch: CUDA, Nodes: []MemoryNode{{Name: "g0", Peers: []int{1}}, {}}}, `memory node 1 ("g0") names node 1 as a peer`},
		{Fingerprint{Arch: CUDA, Nodes: []MemoryNode{{}, {Peers: []int{3}}}}, "names node 3 as a peer; peers are the driver's other nodes, 1 to 2"},
		{Fingerprint{Arch: CUDA, Nodes: []MemoryNode{{Peers: []int{0}}, {}}}, "names node 0 as a peer"},
	} {
		err := c.fp.Check()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want %q", c.fp, err, c.want)
		}
	}
}
