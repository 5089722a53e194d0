// Package random is StarPU's random policy (random_policy.c): each ready
// task goes at once to a worker drawn at random among those that can run
// it, each weighted by its architecture's relative speed, so that a GPU
// worth thirteen CPU cores gets thirteen times their share. Each worker
// then runs its own queue, most urgent task first; nothing is stolen. It
// ignores predictions and data placement: a baseline, and a policy that
// spreads work without any model.
package random

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Description is the policy's one line in `starpu sched list`.
const Description = "each task to a random worker, weighted by its architecture's speed (StarPU's random)"

// DefaultSpeeds are the relative speeds of the architectures by
// driver.ArchIndex (CPU, CUDA, OpenCL): StarPU's own defaults
// (_STARPU_CPU_ALPHA, _STARPU_CUDA_ALPHA, _STARPU_OPENCL_ALPHA), which
// starpu_worker_get_relative_speedup returns to its random policy.
func DefaultSpeeds() [wire.NumArch]float64 { return [wire.NumArch]float64{1, 13.33, 12.22} }

// Policy is the random policy. The host calls it from one goroutine.
type Policy struct {
	workers schedkit.Table[schedkit.Queue]
	speeds  [wire.NumArch]float64
	seed    int64 // 0: drawn from the clock at Init
	rng     *rand.Rand
	closed  bool
}

// New returns the random policy with StarPU's speeds and a seed drawn at
// Init.
func New() *Policy { return &Policy{speeds: DefaultSpeeds()} }

// speedAttrs names the speed attributes by driver.ArchIndex.
func speedAttrs() [wire.NumArch]string {
	return [wire.NumArch]string{"cpu_speed", "cuda_speed", "opencl_speed"}
}

// ConfigSchema implements sched.Configurable.
func (p *Policy) ConfigSchema() *base.Schema {
	def := DefaultSpeeds()
	s := &base.Schema{}
	for i, name := range speedAttrs() {
		s.Attrs = append(s.Attrs, base.Attr{Name: name, Type: base.AttrFloat,
			Default: strconv.FormatFloat(def[i], 'g', -1, 64), Doc: "relative speed of a worker of this architecture: its weight in the draw (> 0)"})
	}
	s.Attrs = append(s.Attrs, base.Attr{Name: "seed", Type: base.AttrInt, Default: "0",
		Doc: "seed of the draws, for a reproducible schedule; 0 draws one from the clock"})
	return s
}

// SetConfig implements sched.Configurable.
func (p *Policy) SetConfig(cfg base.Config) error {
	for i, name := range speedAttrs() {
		v, ok := cfg[name]
		if !ok {
			continue
		}
		var f float64
		switch v := v.(type) {
		case float64:
			f = v
		case int64: // a whole number in the config file
			f = float64(v)
		default:
			return fmt.Errorf("attribute %q: want a number, got %T", name, v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			return fmt.Errorf("attribute %q: %v: want a finite number > 0", name, f)
		}
		p.speeds[i] = f
	}
	if v, ok := cfg["seed"].(int64); ok {
		p.seed = v
	}
	return nil
}

// Init implements sched.Policy.
func (p *Policy) Init(workers []sched.Worker) error {
	if err := schedkit.CheckWorkers(workers); err != nil {
		return err
	}
	seed := uint64(p.seed)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	p.rng = rand.New(rand.NewPCG(seed, seed>>32|seed<<32))
	p.AddWorkers(workers)
	return nil
}

// AddWorkers implements sched.Policy: tasks that no worker could run so far
// are drawn again.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	p.workers.Add(workers)
	for _, t := range p.workers.Unpark() {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: the removed workers' queued tasks
// are drawn again among the others; a task bound to a removed worker waits
// until it is added back.
func (p *Policy) RemoveWorkers(ids []int) {
	var orphans []*sched.Task
	for _, s := range p.workers.Remove(ids) {
		orphans = s.State.Drain(orphans)
	}
	for _, t := range orphans {
		p.Push(t)
	}
}

// Push implements sched.Policy: the draw, as StarPU's _random_push_task
// makes it: a number in [0, sum of the capable workers' speeds), and the
// worker whose share of the sum holds it.
func (p *Policy) Push(t *sched.Task) {
	if p.closed {
		return
	}
	if t.Worker >= 0 {
		if s := p.workers.Get(int(t.Worker)); s != nil {
			s.State.Push(t)
		} else {
			p.workers.Park(t)
		}
		return
	}
	var sum float64
	for _, s := range p.workers.Slots() {
		if s.CanRun(t) {
			sum += p.speed(s)
		}
	}
	if sum == 0 {
		p.workers.Park(t) // no worker can run it now
		return
	}
	r := p.rng.Float64() * sum
	var last *schedkit.Slot[schedkit.Queue]
	for _, s := range p.workers.Slots() {
		if !s.CanRun(t) {
			continue
		}
		last = s
		if r -= p.speed(s); r < 0 {
			break
		}
	}
	// last: r can only outlive the loop by rounding, on the last capable
	// worker.
	last.State.Push(t)
}

// speed is the weight of s in the draw.
func (p *Policy) speed(s *schedkit.Slot[schedkit.Queue]) float64 {
	if s.ArchIndex < 0 {
		return 1
	}
	return p.speeds[s.ArchIndex]
}

// Pop implements sched.Policy: the most urgent, oldest task of the worker's
// own queue.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed {
		return nil
	}
	e, ok := s.State.PopFront()
	if !ok {
		return nil
	}
	return e.Task
}

// PostExec implements sched.Policy; random keeps no account of running
// tasks.
func (p *Policy) PostExec(int, uint64, int64) {}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.workers.Reset()
}
