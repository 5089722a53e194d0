// Command custom-kernel runs a task on the kernel that its own CPU driver
// (./driver-cpu) adds to the standard library. Usage:
//
//	go build -o /tmp/plugins/driver-cpu ./examples/custom-kernel/driver-cpu
//	go build -o /tmp/plugins/sched-ws ./plugins/sched-ws
//	STARPU_PLUGIN_DIR=/tmp/plugins go run ./examples/custom-kernel
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/starpu-go/starpu/core"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "custom-kernel:", err)
		os.Exit(1)
	}
}

func run() error {
	rt, err := core.Init(context.Background(), core.Options{})
	if err != nil {
		return err
	}
	defer rt.Shutdown()
	x := []float32{-5, -0.5, 0, 0.5, 5}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		return err
	}
	clamp := &core.Codelet{Name: "clamp", Kernels: map[core.Arch]string{core.CPU: "clamp_f32"}, Modes: []core.Mode{core.RW}}
	arg := binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1))
	arg = binary.LittleEndian.AppendUint32(arg, math.Float32bits(1))
	if err := rt.Submit(&core.Task{Codelet: clamp, Handles: []*core.Handle{h}, Arg: arg, Synchronous: true}); err != nil {
		return err
	}
	if err := h.Unregister(); err != nil {
		return err
	}
	fmt.Println(x)
	return nil
}
