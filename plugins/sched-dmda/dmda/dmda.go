// Package dmda is StarPU's deque-model-data-aware policy (HEFT-like): each
// ready task goes at once to the worker where it is expected to finish
// first, counting the work already queued there, the task's predicted
// length on the worker's architecture and the predicted time to bring its
// data to the worker's memory node. Each worker then runs its own queue in
// order; nothing is stolen. With the setting sorted = true it is dmdas: the
// queues are ordered by priority and a task's expected start only counts
// the queued work that will run before it.
//
// The decision for a task t, among the workers w that can run it:
//
//	end(w)     = free(w) + length(t, arch(w))
//	fitness(w) = alpha * (end(w) - min end) + beta * transfer(t, node(w))
//
// and t goes to the worker of least fitness, as in StarPU. free(w) is when
// w is expected to be done with what it was given: now, plus what is left
// of its running task, plus the predicted lengths of the tasks after it.
// When some worker's architecture has no calibrated prediction for t, the
// policy calibrates instead, again as StarPU does: t goes to the
// uncalibrated worker with the fewest tasks, so that every architecture
// that can run t gets samples. docs/design/scheduling.md has the details.
package dmda

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Environment variables that override the config attributes alpha and
// beta, with StarPU's names.
const (
	EnvAlpha = "STARPU_SCHED_ALPHA"
	EnvBeta  = "STARPU_SCHED_BETA"
)

// Policy is the dmda policy. The host calls it from one goroutine.
type Policy struct {
	ws     []*wstate // by worker id; nil where there is no worker
	order  []int     // worker ids in the order of Init/AddWorkers
	parked []*sched.Task
	closed bool

	alpha, beta float64
	sorted      bool
	getenv      func(string) string
	now         func() int64 // monotonic ns; fields so tests can drive them
	ends        []int64      // scratch for best, by position in order
}

// wstate is one worker's queue and expected load.
type wstate struct {
	w        sched.Worker
	bit      uint32   // driver.ArchBit(w.Arch), and
	arch     int      // driver.ArchIndex(w.Arch), computed once: decisions test them per worker
	q        queue    // decided for this worker, not popped yet
	running  []flight // popped and not finished, in pop order
	runNs    int64    // predicted ns of running
	runStart int64    // when running[0] started, as far as the policy knows
}

// canRun is t.CanRun(&s.w) for an unbound t, without looking up the
// architecture.
func (s *wstate) canRun(t *sched.Task) bool { return t.ArchMask&s.bit != 0 }

// length is t.LengthOn(&s.w).
func (s *wstate) length(t *sched.Task) int64 {
	if s.arch < 0 {
		return -1
	}
	return t.Length[s.arch]
}

// flight is a popped task and the ns it was charged on its worker.
type flight struct {
	id uint64
	ns int64
}

// New returns the dmda policy with alpha = beta = 1, unsorted.
func New() *Policy {
	return &Policy{alpha: 1, beta: 1, getenv: os.Getenv, now: wire.Now}
}

// ConfigSchema implements sched.Configurable.
func (p *Policy) ConfigSchema() *base.Schema {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "alpha", Type: base.AttrFloat, Default: "1", Doc: "weight of the expected completion time (env " + EnvAlpha + " overrides)"},
		{Name: "beta", Type: base.AttrFloat, Default: "1", Doc: "weight of the data transfer time (env " + EnvBeta + " overrides)"},
		{Name: "sorted", Type: base.AttrBool, Default: "false", Doc: "dmdas: order each worker's queue by priority"},
	}}
}

// SetConfig implements sched.Configurable.
func (p *Policy) SetConfig(cfg base.Config) error {
	for _, a := range []struct {
		name string
		dst  *float64
	}{{"alpha", &p.alpha}, {"beta", &p.beta}} {
		v, ok := cfg[a.name]
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
			return fmt.Errorf("attribute %q: want a number, got %T", a.name, v)
		}
		if err := checkWeight(f); err != nil {
			return fmt.Errorf("attribute %q: %w", a.name, err)
		}
		*a.dst = f
	}
	if v, ok := cfg["sorted"].(bool); ok {
		p.sorted = v
	}
	return nil
}

func checkWeight(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return fmt.Errorf("%v: want a finite number >= 0", f)
	}
	return nil
}

// Init implements sched.Policy. The environment overrides the configured
// alpha and beta here, as StarPU reads them when the policy starts.
func (p *Policy) Init(workers []sched.Worker) error {
	for _, e := range []struct {
		name string
		dst  *float64
	}{{EnvAlpha, &p.alpha}, {EnvBeta, &p.beta}} {
		raw := p.getenv(e.name)
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		f, err := strconv.ParseFloat(s, 64)
		if err == nil {
			err = checkWeight(f)
		}
		if err != nil {
			return fmt.Errorf("environment variable %s=%q: want a finite number >= 0", e.name, raw)
		}
		*e.dst = f
	}
	for _, w := range workers {
		if w.ID < 0 {
			return fmt.Errorf("worker id %d: must not be negative", w.ID)
		}
	}
	p.AddWorkers(workers)
	return nil
}

// Alpha is the weight of expected completion times in use (after Init,
// with the environment applied).
func (p *Policy) Alpha() float64 { return p.alpha }

// Beta is the weight of transfer times in use.
func (p *Policy) Beta() float64 { return p.beta }

// AddWorkers implements sched.Policy. Tasks that no worker could run so far
// are decided again.
func (p *Policy) AddWorkers(workers []sched.Worker) {
	for _, w := range workers {
		if w.ID < 0 || w.ID < len(p.ws) && p.ws[w.ID] != nil {
			continue
		}
		for w.ID >= len(p.ws) {
			p.ws = append(p.ws, nil)
		}
		p.ws[w.ID] = &wstate{w: w, bit: driver.ArchBit(w.Arch), arch: driver.ArchIndex(w.Arch)}
		p.order = append(p.order, w.ID)
	}
	parked := p.parked
	p.parked = nil
	for _, t := range parked {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: the tasks queued for a removed
// worker are decided again among the others; a task bound to a removed
// worker waits until it is added back.
func (p *Policy) RemoveWorkers(ids []int) {
	var orphans []*sched.Task
	for _, id := range ids {
		s := p.state(id)
		if s == nil {
			continue
		}
		orphans = s.q.appendAll(orphans)
		p.ws[id] = nil
		for i, o := range p.order {
			if o == id {
				p.order = append(p.order[:i], p.order[i+1:]...)
				break
			}
		}
	}
	for _, t := range orphans {
		p.Push(t)
	}
}

// Push implements sched.Policy: it decides the task's worker now.
func (p *Policy) Push(t *sched.Task) {
	if p.closed {
		return
	}
	now := p.now()
	if t.Worker >= 0 {
		if s := p.state(int(t.Worker)); s != nil {
			p.assign(s, t, now)
		} else {
			p.parked = append(p.parked, t)
		}
		return
	}
	if s := p.calibrating(t, now); s != nil {
		p.assign(s, t, now)
		return
	}
	if s := p.best(t, now); s != nil {
		p.assign(s, t, now)
		return
	}
	p.parked = append(p.parked, t) // no worker can run it now
}

// calibrating returns the worker for t when some worker that can run t has
// no prediction for it: among those, the one with the fewest tasks, then
// the one expected free first. It returns nil when every capable worker
// has a prediction (or none can run t).
func (p *Policy) calibrating(t *sched.Task, now int64) *wstate {
	var best *wstate
	var bestN int
	var bestFree int64
	for _, id := range p.order {
		s := p.ws[id]
		if !s.canRun(t) || s.length(t) >= 0 {
			continue
		}
		n := s.q.n + len(s.running)
		if best != nil && n > bestN {
			continue
		}
		free := p.free(s, t.Priority, now)
		if best == nil || n < bestN || free < bestFree {
			best, bestN, bestFree = s, n, free
		}
	}
	return best
}

// best returns the worker of least fitness for a calibrated t.
func (p *Policy) best(t *sched.Task, now int64) *wstate {
	minEnd := int64(math.MaxInt64)
	p.ends = p.ends[:0]
	for _, id := range p.order {
		s := p.ws[id]
		end := int64(-1)
		if s.canRun(t) {
			end = p.free(s, t.Priority, now) + s.length(t)
			minEnd = min(minEnd, end)
		}
		p.ends = append(p.ends, end)
	}
	var best *wstate
	bestFit := math.Inf(1)
	bestN := 0
	for i, id := range p.order {
		s := p.ws[id]
		end := p.ends[i]
		if end < 0 {
			continue
		}
		fit := p.alpha*float64(end-minEnd) + p.beta*float64(t.TransferTo(&s.w))
		n := s.q.n + len(s.running)
		// Ties (equal predictions, zero-length tasks) go to the worker
		// with fewer tasks, so that they still spread.
		if fit < bestFit || fit == bestFit && n < bestN {
			best, bestFit, bestN = s, fit, n
		}
	}
	return best
}

// free is when s is expected to start a task of priority prio pushed now:
// after what is left of its running tasks and, unsorted, all its queued
// tasks; sorted, the queued tasks of priority prio or higher.
func (p *Policy) free(s *wstate, prio int32, now int64) int64 {
	t := now
	if len(s.running) > 0 {
		head := s.running[0].ns
		t += max(head-(now-s.runStart), 0) + s.runNs - head
	}
	if p.sorted {
		return t + s.q.nsAtLeast(prio)
	}
	return t + s.q.ns
}

// assign queues t on s, charging s the predicted length and, as StarPU
// does, the part of the transfer that would not overlap the work queued
// before it.
func (p *Policy) assign(s *wstate, t *sched.Task, now int64) {
	ns := max(s.length(t), 0)
	if tr := t.TransferTo(&s.w); tr > 0 {
		ns += max(now+tr-p.free(s, t.Priority, now), 0)
	}
	prio := t.Priority
	if !p.sorted {
		prio = 0 // one FIFO
	}
	s.q.push(entry{t: t, ns: ns}, prio)
}

// Pop implements sched.Policy: the worker's own queue, in order.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.state(id)
	if s == nil || p.closed || s.q.n == 0 {
		return nil
	}
	e := s.q.take()
	if len(s.running) == 0 {
		s.runStart = p.now()
	}
	s.running = append(s.running, flight{id: e.t.ID, ns: e.ns})
	s.runNs += e.ns
	return e.t
}

// PostExec implements sched.Policy: the task leaves its worker's load; the
// next one is taken to start now.
func (p *Policy) PostExec(worker int, id uint64, _ int64) {
	s := p.state(worker)
	if s == nil {
		return
	}
	for i, f := range s.running {
		if f.id != id {
			continue
		}
		s.runNs -= f.ns
		s.running = append(s.running[:i], s.running[i+1:]...)
		if i == 0 {
			s.runStart = p.now()
		}
		return
	}
}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.ws, p.order, p.parked = nil, nil, nil
}

func (p *Policy) state(id int) *wstate {
	if id < 0 || id >= len(p.ws) {
		return nil
	}
	return p.ws[id]
}

// entry is a queued task and the ns it is charged on its worker.
type entry struct {
	t  *sched.Task
	ns int64
}

// queue holds a worker's tasks by decreasing priority, FIFO among equals
// (one bucket per distinct priority; unsorted, everything is priority 0),
// with the predicted ns per bucket for dmdas's expected start.
type queue struct {
	buckets []*bucket
	n       int
	ns      int64
	spares  []*bucket // drained buckets kept for reuse: no allocation per task
}

type bucket struct {
	prio    int32
	entries []entry
	head    int
	ns      int64
}

func (q *queue) push(e entry, prio int32) {
	i := 0
	for i < len(q.buckets) && q.buckets[i].prio > prio {
		i++
	}
	if i == len(q.buckets) || q.buckets[i].prio != prio {
		var b *bucket
		if k := len(q.spares); k > 0 {
			b, q.spares = q.spares[k-1], q.spares[:k-1]
		} else {
			b = &bucket{}
		}
		b.prio = prio
		q.buckets = append(q.buckets, nil)
		copy(q.buckets[i+1:], q.buckets[i:])
		q.buckets[i] = b
	}
	b := q.buckets[i]
	b.entries = append(b.entries, e)
	b.ns += e.ns
	q.n++
	q.ns += e.ns
}

// take removes the most urgent, oldest entry; q must not be empty.
func (q *queue) take() entry {
	b := q.buckets[0]
	e := b.entries[b.head]
	b.entries[b.head] = entry{}
	b.head++
	b.ns -= e.ns
	q.n--
	q.ns -= e.ns
	switch {
	case b.head == len(b.entries):
		q.buckets = append(q.buckets[:0], q.buckets[1:]...)
		b.entries, b.head, b.ns = b.entries[:0], 0, 0
		q.spares = append(q.spares, b)
	case b.head > 64 && b.head*2 > len(b.entries):
		m := copy(b.entries, b.entries[b.head:])
		clear(b.entries[m:])
		b.entries, b.head = b.entries[:m], 0
	}
	return e
}

// nsAtLeast is the predicted ns of the entries of priority prio or higher.
func (q *queue) nsAtLeast(prio int32) int64 {
	var ns int64
	for _, b := range q.buckets {
		if b.prio < prio {
			break
		}
		ns += b.ns
	}
	return ns
}

// appendAll empties q onto out.
func (q *queue) appendAll(out []*sched.Task) []*sched.Task {
	for _, b := range q.buckets {
		for _, e := range b.entries[b.head:] {
			out = append(out, e.t)
		}
	}
	*q = queue{}
	return out
}
