package core

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
)

// A restarted driver must be the same driver in what the runtime relies
// on; each difference is refused, naming it.
func TestSameDriver(t *testing.T) {
	old := driver.Fingerprint{Arch: driver.OpenCL, Kernels: []string{"scal", "gemm"},
		Units: []driver.Unit{{Name: "gpu0", Node: 1}, {Name: "gpu1", Node: 2}},
		Nodes: []driver.MemoryNode{{Name: "m0"}, {Name: "m1"}}}
	d := &driverInst{fp: &old, workers: []*workerState{{id: 3, spec: driver.WorkerSpec{Unit: 1}}}}
	for _, tc := range []struct {
		name   string
		change func(fp *driver.Fingerprint)
		want   string // "" when the same
	}{
		{"same", func(*driver.Fingerprint) {}, ""},
		{"a unit no worker uses moved", func(fp *driver.Fingerprint) { fp.Units[0].Node = 2 }, ""},
		{"architecture", func(fp *driver.Fingerprint) { fp.Arch = driver.CUDA }, "now a cuda driver"},
		{"kernels reordered", func(fp *driver.Fingerprint) { fp.Kernels = []string{"gemm", "scal"} }, "kernels changed"},
		{"scheduler rings", func(fp *driver.Fingerprint) { fp.SchedRing = true }, "scheduler rings"},
		{"a memory node fewer", func(fp *driver.Fingerprint) { fp.Nodes = fp.Nodes[:1] }, "1 memory nodes, 2 before"},
		{"the worker's unit gone", func(fp *driver.Fingerprint) { fp.Units = fp.Units[:1] }, "worker 3 used unit 1"},
		{"the worker's unit on another node", func(fp *driver.Fingerprint) { fp.Units[1].Node = 1 }, "unit 1 (worker 3) is on its memory node 1, 2 before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := old
			fp.Kernels = append([]string(nil), old.Kernels...)
			fp.Units = append([]driver.Unit(nil), old.Units...)
			fp.Nodes = append([]driver.MemoryNode(nil), old.Nodes...)
			tc.change(&fp)
			err := d.sameDriver(&fp)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("sameDriver: %v, want %q", err, tc.want)
			}
		})
	}
}

// reloader is a driver whose LoadKernel hands out the indices it is given,
// or fails.
type reloader struct {
	driver.Driver
	next  []int
	fail  error
	names []string
}

func (r *reloader) LoadKernel(_ context.Context, k driver.KernelSource) (int, error) {
	if r.fail != nil {
		return 0, r.fail
	}
	r.names = append(r.names, k.Name)
	i := r.next[0]
	r.next = r.next[1:]
	return i, nil
}

// The kernels built from sources are loaded again in their first order and
// must come back at their old indices; a refusal or a moved index fails the
// restart.
func TestReloadKernels(t *testing.T) {
	loaded := map[string]int{"b\x00src b": 5, "a\x00src a": 4, "c\x00src c": 6}
	for _, tc := range []struct {
		name string
		drv  *reloader
		want string
	}{
		{"same indices", &reloader{next: []int{4, 5, 6}}, ""},
		{"an index moved", &reloader{next: []int{4, 6, 5}}, `kernel "b" from its source came back as kernel 6, was 5`},
		{"the compiler refuses", &reloader{fail: errors.New("build failed")}, `kernel "a" from its source: build failed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &driverInst{loaded: loaded}
			err := d.reloadKernels(t.Context(), tc.drv)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("reloadKernels: %v, want %q", err, tc.want)
			}
			if tc.want == "" && strings.Join(tc.drv.names, "") != "abc" {
				t.Fatalf("loaded %v, want a, b, c in their first order", tc.drv.names)
			}
		})
	}
}

// The shortest plugin timeout the configuration accepts leaves a plugin
// three heartbeats: below that every plugin would be killed as hung.
func TestMinPluginTimeout(t *testing.T) {
	if config.MinPluginTimeout < 3*base.HeartbeatEvery {
		t.Fatalf("config.MinPluginTimeout = %v, under three heartbeats of %v", config.MinPluginTimeout, base.HeartbeatEvery)
	}
}
