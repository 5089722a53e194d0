// Package core is the runtime applications import: codelets, tasks, data
// handles, implicit and explicit dependencies, and the machinery that hands
// ready tasks to a scheduler plugin and runs them on driver plugins.
//
// A minimal program:
//
//	rt, err := core.Init(ctx, core.Options{})
//	x := []float32{1, 2, 3}
//	h, err := core.RegisterVector(rt, x)
//	scal := &core.Codelet{Name: "scal", Kernels: map[driver.Arch]string{driver.CPU: "scal_f32"},
//		Modes: []core.Mode{core.RW}}
//	err = rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{h},
//		Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true})
//	err = h.Unregister() // x is now {2, 4, 6}
//	err = rt.Shutdown()
package core
