// Command sched-eager is the smallest useful scheduling policy, and the
// template for writing your own: StarPU's eager policy, one central FIFO
// from which any worker that can run the head-most task takes it.
//
// # Build and use
//
// A scheduler plugin is a binary named sched-<name> in the plugin
// directory. From the repository root, `make` builds this one as
// bin/plugins/sched-eager; by hand:
//
//	go build -o bin/plugins/sched-eager ./examples/sched-eager
//	STARPU_SCHED=eager bin/starpu run ...
//
// or, in the configuration file, `sched = "eager"`. The core needs no change
// and no rebuild: it finds the binary by name when the application starts.
//
// # What is here
//
// main is one call to the SDK: sched.ServePolicy wraps a sched.Policy in the
// SDK's Host, which speaks the plugin protocol and the shared-memory rings,
// and calls the policy's hooks from a single goroutine (so the policy needs
// no locks). The policy itself is package eager: Init, AddWorkers,
// RemoveWorkers, Push (a task became ready), Pop (a worker has room: return
// a task for it, or nil), PostExec (a task finished) and Deinit. Its test
// runs the SDK's conformance kit, pluginapi/sched/schedtest, which every
// policy should pass.
//
// docs/plugin-guide.md walks through writing a policy with this one as the
// example.
package main

import (
	"github.com/starpu-go/starpu/examples/sched-eager/eager"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

func main() {
	// Name is what STARPU_SCHED selects: it must match the binary's
	// sched-<name>. Description is the line `starpu sched list` shows.
	info := base.Info{Name: "eager", Version: "0.1.0", Description: "one central FIFO (StarPU's eager): a worker takes the oldest task it can run"}
	sched.ServePolicy(info, func() sched.Policy { return eager.New() })
}
