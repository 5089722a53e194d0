package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// A buffer asked on a memory node is accessed there: a codelet that runs
// on the CPU and on the device runs every task on the workers of the node
// its buffer names, and the data ends valid on that node only.
func TestCodeletNodes(t *testing.T) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			rt, scalOnDev := d.start(t, 1<<20)
			kernels := map[driver.Arch]string{driver.CPU: blasarg.ScalF32, driver.OpenCL: scalOnDev.Kernels[driver.OpenCL]}
			nodeOf := map[int]int{}
			for _, w := range rt.Workers() {
				nodeOf[w.ID] = w.Node
			}
			for _, tc := range []struct {
				name  string
				nodes []int
				node  int // where every task must run and the data end
			}{
				{"RAM", []int{0}, 0},
				{"NodeCPU", []int{core.NodeCPU}, 0},
				{"device", []int{devNode}, devNode},
			} {
				cl := &core.Codelet{Name: "scal_" + tc.name, Kernels: kernels, Modes: []core.Mode{core.RW}, Nodes: tc.nodes}
				x := ramp(64)
				h := register(t, rt, x)
				var tasks []*core.Task
				for range 6 {
					tasks = append(tasks, scal(t, rt, cl, h, 2))
				}
				if err := rt.WaitForAll(); err != nil {
					t.Fatal(err)
				}
				for i, task := range tasks {
					p, err := rt.Profiling(task)
					if err != nil {
						t.Fatal(err)
					}
					if nodeOf[p.Worker] != tc.node {
						t.Fatalf("%s: task %d ran on worker %d, on node %d; want node %d", tc.name, i, p.Worker, nodeOf[p.Worker], tc.node)
					}
				}
				other := devNode - tc.node
				if !status(t, h, tc.node).Valid || status(t, h, other).Valid {
					t.Fatalf("%s: valid on node %d: %v, on node %d: %v; want node %d alone", tc.name, tc.node, status(t, h, tc.node).Valid, other, status(t, h, other).Valid, tc.node)
				}
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
				wantValues(t, tc.name, x, func(i int) float32 { return 64 * float32(i) })
			}
		})
	}
}

// Nodes no worker can honour are refused at Submit.
func TestCodeletNodesRefused(t *testing.T) {
	rt, scalOnDev := devices[0].start(t, 1<<20)
	both := map[driver.Arch]string{driver.CPU: blasarg.ScalF32, driver.OpenCL: scalOnDev.Kernels[driver.OpenCL]}
	cpuWorker := -1
	for _, w := range rt.Workers() {
		if w.Node == 0 {
			cpuWorker = w.ID
		}
	}
	h, h2 := register(t, rt, ramp(8)), register(t, rt, ramp(8))
	for _, tc := range []struct {
		name string
		task *core.Task
		why  string
	}{
		{"two nodes", &core.Task{Codelet: &core.Codelet{Name: "two", Kernels: both, NBuffers: core.VariableBuffers}, Handles: []*core.Handle{h, h2},
			Modes: []core.Mode{core.RW, core.R}, Nodes: []int{devNode, core.NodeCPU}}, "reach only its own node"},
		{"no worker there", &core.Task{Codelet: &core.Codelet{Name: "cpu_only", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF32},
			Modes: []core.Mode{core.RW}, Nodes: []int{devNode}}, Handles: []*core.Handle{h}}, "where no worker that can run codelet"},
		{"pinned elsewhere", &core.Task{Codelet: &core.Codelet{Name: "pinned", Kernels: both, Modes: []core.Mode{core.RW}, Nodes: []int{devNode}},
			Handles: []*core.Handle{h}, ExecuteOnWorker: true, Worker: cpuWorker}, "must run on worker"},
	} {
		err := rt.Submit(tc.task)
		if !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want ErrNoWorker saying %q", tc.name, err, tc.why)
		}
	}
}
