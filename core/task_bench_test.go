package core_test

import (
	"context"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// BenchmarkChain is one dependency hop per op: every task accesses the same
// handle in RW, so each waits for the previous one's completion (StarPU's
// tasks_overhead with one buffer). Compare the setups side by side: their
// ratio is the cost of the process boundary.
func BenchmarkChain(b *testing.B) {
	for _, s := range setups {
		b.Run(s.name, func(b *testing.B) {
			rt, err := core.Init(context.Background(), s.opts())
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Shutdown()
			h, _ := core.RegisterVector(rt, []float32{0})
			cl := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, Modes: []core.Mode{core.RW}}
			tasks := make([]core.Task, b.N)
			b.ResetTimer()
			for i := range tasks {
				tasks[i] = core.Task{Codelet: cl, Handles: []*core.Handle{h}}
				if err := rt.Submit(&tasks[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := rt.WaitForAll(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkIndependent is the throughput of independent empty tasks (StarPU's
// async_tasks_overhead).
func BenchmarkIndependent(b *testing.B) {
	for _, s := range setups {
		b.Run(s.name, func(b *testing.B) {
			rt, err := core.Init(context.Background(), s.opts())
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Shutdown()
			cl := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
			tasks := make([]core.Task, b.N)
			b.ResetTimer()
			for i := range tasks {
				tasks[i] = core.Task{Codelet: cl}
				if err := rt.Submit(&tasks[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := rt.WaitForAll(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
