package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

// mute is the CPU driver with its workers ringing a bell of their own
// instead of the core's: the core hears of no completion.
type mute struct {
	*cpudriver.Driver
	arena *shm.Arena
}

func (m *mute) Init(ctx context.Context, req *driver.InitRequest) error {
	s, err := m.arena.Carve(shm.BellSize, 64)
	if err != nil {
		return err
	}
	for i := range req.Workers {
		req.Workers[i].CoreBell = s.Offset
	}
	return m.Driver.Init(ctx, req)
}

// A worker may leave completions unrung while it runs a long task (see
// driver.WorkerSpec.CoreBell): the engine still reads them within about a
// millisecond while tasks are in flight, not at its 50 ms liveness check.
func TestCompletionsNotRungForAreRead(t *testing.T) {
	const n = 30
	opts := setups[1].opts()
	opts.Drivers = []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return &mute{Driver: cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), arena: a}, nil
	}}
	rt := start(t, opts)
	begin := time.Now()
	scalChain(t, rt, nil, n)
	if el := time.Since(begin); el > 750*time.Millisecond {
		t.Errorf("%d chained tasks whose completions were never rung took %v: the engine did not look for them", n, el)
	}
}
