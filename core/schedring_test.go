package core_test

import (
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// scalChain submits n tasks doubling x (a fresh codelet, so that its
// statistics count these tasks only), waits, and checks x.
func scalChain(t *testing.T, rt *core.Runtime, ctx *core.Context, n int) *core.Codelet {
	t.Helper()
	cl := &core.Codelet{Name: "scal_chain", Kernels: scalF32.Kernels, Modes: scalF32.Modes}
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i)
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := rt.Submit(&core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Context: ctx}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if want := float32(i) * float32(uint32(1)<<n); v != want {
			t.Fatalf("x[%d] = %v after %d doublings, want %v", i, v, n, want)
		}
	}
	return cl
}

func posted(t *testing.T, rt *core.Runtime, cl *core.Codelet) (tasks, posted int64) {
	t.Helper()
	s, err := rt.CodeletStats(cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range s.Workers {
		posted += w.Posted
	}
	return s.Tasks(), posted
}

// Tasks of the global context whose data is all in RAM go from the policy
// straight to the worker's scheduler ring; tasks of another context, and
// every task on a machine with a device memory node, take the core's
// dispatch. Either way each runs once, in dependency order.
func TestSchedulerRings(t *testing.T) {
	const n = 20
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			rt := start(t, s.opts())
			cl := scalChain(t, rt, nil, n)
			if tasks, p := posted(t, rt, cl); tasks != n || p != n {
				t.Fatalf("global context: %d tasks, %d posted by the scheduler; want %d and %d", tasks, p, n, n)
			}
			ctx, err := rt.CreateContext("side", []int{0, 1}, "ws")
			if err != nil {
				t.Fatal(err)
			}
			cl = scalChain(t, rt, ctx, n)
			if tasks, p := posted(t, rt, cl); tasks != n || p != 0 {
				t.Fatalf("context %q: %d tasks, %d posted by the scheduler; want %d and none", ctx.Name(), tasks, p, n)
			}
		})
	}
	t.Run("device node", func(t *testing.T) {
		rt, _ := startWithDevice(t, 1<<20)
		cl := scalChain(t, rt, nil, n)
		if tasks, p := posted(t, rt, cl); tasks != n || p != 0 {
			t.Fatalf("with a device node: %d tasks, %d posted by the scheduler; want %d and none", tasks, p, n)
		}
	})
}
