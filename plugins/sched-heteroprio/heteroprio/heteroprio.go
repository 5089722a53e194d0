// Package heteroprio is StarPU's heteroprio policy, in a simple faithful
// form: ready tasks wait in central buckets, one per priority (and per set
// of architectures able to run them, as StarPU's buckets hold tasks of
// one set), and each architecture visits the buckets in an order of its
// own: a GPU may take the big updates first while the CPUs take the small
// panel tasks first. A task bound to a worker waits in that worker's own
// queue, which the worker pops before any bucket, as StarPU's local tasks.
//
// The acceleration rule keeps slow workers off the work fast ones do
// much better: when a worker finds at the head of a bucket a task that
// another architecture (with workers) runs faster by a factor f, it takes
// the task only if the bucket holds at least f tasks per worker of that
// faster architecture, so that the fast workers still have plenty; else it
// looks at its next bucket. StarPU takes the faster architecture and f per
// bucket from the application (starpu_heteroprio_set_faster_arch,
// set_arch_slow_factor); here they come from the task's predicted lengths,
// and the rule is off while those are uncalibrated.
//
// Order setting: cpu_order, cuda_order, opencl_order list priorities,
// most wanted first ("3,1,2"); priorities a list leaves out come after
// it, by decreasing priority. Without a list an architecture visits the
// buckets by decreasing priority, as every policy here honours priorities
// (StarPU's default mapping visits bucket 0 first: heteroprio's
// priorities are bucket numbers the application orders itself).
package heteroprio

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Description is the policy's one line in `starpu sched list`.
const Description = "central buckets by priority, visited in an order per architecture, slow workers kept off tasks much faster elsewhere (StarPU's heteroprio)"

// Policy is the heteroprio policy. The host calls it from one goroutine.
type Policy struct {
	workers schedkit.Table[schedkit.Queue] // each worker's queue of tasks bound to it
	buckets map[bucketKey]*bucket
	// visit lists, per architecture (driver.ArchIndex), the buckets that
	// hold tasks it can run, in the order it takes from them.
	visit [wire.NumArch][]*bucket
	// order is the configured priority order per architecture; nil:
	// decreasing priority.
	order  [wire.NumArch][]int32
	accel  bool
	closed bool
}

// bucketKey: a bucket holds the tasks of one priority runnable on one set
// of architectures.
type bucketKey struct {
	prio int32
	mask uint32
}

type bucket struct {
	key bucketKey
	q   schedkit.Queue // FIFO
}

// New returns the heteroprio policy: every architecture by decreasing
// priority, acceleration rule on.
func New() *Policy { return &Policy{buckets: map[bucketKey]*bucket{}, accel: true} }

// orderAttrs names the order attributes by driver.ArchIndex.
func orderAttrs() [wire.NumArch]string {
	return [wire.NumArch]string{"cpu_order", "cuda_order", "opencl_order"}
}

// ConfigSchema implements sched.Configurable.
func (p *Policy) ConfigSchema() *base.Schema {
	s := &base.Schema{}
	for _, name := range orderAttrs() {
		arch, _, _ := strings.Cut(name, "_")
		s.Attrs = append(s.Attrs, base.Attr{Name: name, Type: base.AttrString, Default: "",
			Doc: "priorities in the order " + arch + " workers take from their buckets, comma-separated (empty: decreasing priority)"})
	}
	s.Attrs = append(s.Attrs, base.Attr{Name: "acceleration", Type: base.AttrBool, Default: "true",
		Doc: "keep a worker off a task another architecture runs f times faster unless its bucket holds f tasks per faster worker"})
	return s
}

// SetConfig implements sched.Configurable.
func (p *Policy) SetConfig(cfg base.Config) error {
	for i, name := range orderAttrs() {
		v, ok := cfg[name].(string)
		if !ok {
			continue
		}
		order, err := parseOrder(v)
		if err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
		p.order[i] = order
	}
	if v, ok := cfg["acceleration"].(bool); ok {
		p.accel = v
	}
	return nil
}

// parseOrder parses "3, 1,2" into priorities, each listed once.
func parseOrder(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: want comma-separated integer priorities", s)
		}
		if slices.Contains(out, int32(v)) {
			return nil, fmt.Errorf("%q: priority %d listed twice", s, v)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

// Init implements sched.Policy.
func (p *Policy) Init(workers []sched.Worker) error {
	if err := schedkit.CheckWorkers(workers); err != nil {
		return err
	}
	p.AddWorkers(workers)
	return nil
}

// AddWorkers implements sched.Policy: the buckets are central, so new
// workers take from them at once; tasks bound to a worker that was away
// go to its queue.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	p.workers.Add(workers)
	for _, t := range p.workers.Unpark() {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: tasks bound to a removed worker
// wait until it is added back; the buckets keep the rest.
func (p *Policy) RemoveWorkers(ids []int) {
	for _, s := range p.workers.Remove(ids) {
		for _, t := range s.State.Drain(nil) {
			p.workers.Park(t)
		}
	}
}

// Push implements sched.Policy.
func (p *Policy) Push(t *sched.Task) {
	if p.closed {
		return
	}
	if t.Worker >= 0 {
		if s := p.workers.Get(int(t.Worker)); s != nil {
			s.State.Append(t)
		} else {
			p.workers.Park(t)
		}
		return
	}
	k := bucketKey{prio: t.Priority, mask: t.ArchMask}
	b := p.buckets[k]
	if b == nil {
		b = p.newBucket(k)
	}
	b.q.Append(t)
}

// newBucket creates the bucket of k and places it in the visit order of
// every architecture that can run its tasks.
func (p *Policy) newBucket(k bucketKey) *bucket {
	b := &bucket{key: k}
	p.buckets[k] = b
	for a := range p.visit {
		if k.mask&archBit(a) == 0 {
			continue
		}
		v := append(p.visit[a], b)
		slices.SortStableFunc(v, func(x, y *bucket) int { return p.compare(a, x.key, y.key) })
		p.visit[a] = v
	}
	return b
}

// compare orders buckets for architecture a: by rank in its configured
// order (unlisted priorities last), then by decreasing priority, then by
// architecture set, so that the order is total.
func (p *Policy) compare(a int, x, y bucketKey) int {
	rank := func(prio int32) int {
		if i := slices.Index(p.order[a], prio); i >= 0 {
			return i
		}
		return len(p.order[a])
	}
	if rx, ry := rank(x.prio), rank(y.prio); rx != ry {
		return rx - ry
	}
	if x.prio != y.prio {
		if x.prio > y.prio {
			return -1
		}
		return 1
	}
	return int(x.mask) - int(y.mask)
}

// Pop implements sched.Policy: the worker's bound tasks first, then its
// architecture's buckets in order, under the acceleration rule.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed {
		return nil
	}
	if e, ok := s.State.PopFront(); ok {
		return e.Task
	}
	if s.ArchIndex < 0 {
		return nil
	}
	for _, b := range p.visit[s.ArchIndex] {
		head := b.q.Front()
		if head == nil || p.accel && !p.mayTake(s, b, head) {
			continue
		}
		e, _ := b.q.PopFront()
		return e.Task
	}
	return nil
}

// mayTake is the acceleration rule for worker s and t, the head of b: s
// takes t unless another architecture with workers runs t faster by a
// factor f and b holds fewer than f tasks per worker of it. Without
// predictions for s's architecture or the faster one, s takes t.
func (p *Policy) mayTake(s *schedkit.Slot[schedkit.Queue], b *bucket, t *sched.Task) bool {
	mine := s.Length(t)
	if mine <= 0 {
		return true
	}
	fast, best := -1, mine
	for a, l := range t.Length {
		if t.ArchMask&archBit(a) != 0 && l >= 0 && l < best && p.workers.CountArch(a) > 0 {
			fast, best = a, l
		}
	}
	if fast < 0 {
		return true // s's architecture is the fastest that has workers
	}
	factor := float64(mine) / float64(max(best, 1))
	return float64(b.q.Len())/float64(p.workers.CountArch(fast)) >= factor
}

// archBit is the driver.ArchBit of the architecture with driver.ArchIndex
// a.
func archBit(a int) uint32 {
	for _, arch := range []driver.Arch{driver.CPU, driver.CUDA, driver.OpenCL} {
		if driver.ArchIndex(arch) == a {
			return driver.ArchBit(arch)
		}
	}
	return 0
}

// PostExec implements sched.Policy; heteroprio keeps no account of
// running tasks.
func (p *Policy) PostExec(int, uint64, int64) {}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.workers.Reset()
	p.buckets = map[bucketKey]*bucket{}
	p.visit = [wire.NumArch][]*bucket{}
}
