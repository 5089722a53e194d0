// Package dmda is StarPU's deque-model-data-aware policy (HEFT-like): each
// ready task goes at once to the worker where it is expected to finish
// first, counting the work already queued there, the task's predicted
// length on the worker's architecture and the predicted time to bring its
// data to the worker's memory node. Each worker then runs its own queue in
// order; nothing is stolen. With the setting sorted = true it is dmdas: the
// queues are ordered by priority and a task's expected start only counts
// the queued work that will run before it. With ready = true it is dmdar:
// a worker takes first, among its most urgent tasks, the one whose data
// is already on its memory node.
//
// The decision for a task t, among the workers w that can run it:
//
//	end(w)     = free(w) + length(t, arch(w))
//	fitness(w) = alpha * (end(w) - min end) + beta * transfer(t, node(w))
//
// and t goes to the worker of least fitness, as in StarPU. free(w) is when
// w is expected to be done with what it was given: now, plus what is left
// of its running task, plus the predicted lengths of the tasks after it.
// When the core lists t's implementations (sched.Task.Impls), the
// decision is over (worker, implementation) pairs, as in StarPU: length is
// then that of the implementation of least predicted length on the
// worker's architecture, and t runs with it. When some worker's
// architecture, or some implementation t may run there, has no calibrated
// prediction for t, the policy calibrates instead, again as StarPU does: t
// goes to the uncalibrated worker with the fewest tasks, with one of the
// uncalibrated implementations in turn, so that every architecture and
// implementation that can run t gets samples, and says so once per codelet
// and architecture in the plugin's log. docs/design/scheduling.md has the
// details.
package dmda

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/sched/schedkit"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Description is the policy's one line in `starpu sched list`.
const Description = "deque model data aware (StarPU's dmda, HEFT-like): each task to the worker expected to finish it first, transfers included"

// Environment variables that override the config attributes alpha and
// beta, with StarPU's names.
const (
	EnvAlpha = "STARPU_SCHED_ALPHA"
	EnvBeta  = "STARPU_SCHED_BETA"
)

// Policy is the dmda policy. The host calls it from one goroutine.
type Policy struct {
	workers schedkit.Table[wstate]
	closed  bool

	alpha, beta float64
	sorted      bool
	ready       bool
	getenv      func(string) string
	now         func() int64 // monotonic ns; fields so tests can drive them
	ends        []int64      // scratch for best, by position in workers.Slots
	// calib counts the implementations chosen to be calibrated, so that
	// they are taken in turn (schedkit.ChooseImpl).
	calib uint

	log hclog.Logger
	// warned[c][a] is set once codelet c's missing model on architecture
	// a was logged: the warning is for the user, once, not per task.
	// Codelets are numbered densely from 0 (sched.Task.Codelet); those
	// beyond maxWarned go to warnedFar.
	warned    [][wire.NumArch]bool
	warnedFar map[uint64]bool

	// combined are the combined workers parallel tasks may go to, pending
	// the tasks queued on a team's members until the last pops its copy,
	// warnedSizes the codelets whose sizes' missing models were logged
	// (parallel.go).
	combined    []*team
	pending     map[uint64]*ptask
	warnedSizes map[uint32]bool
	// calibSize counts the parallel tasks placed to calibrate, so that
	// they go to every size in turn.
	calibSize uint
}

// maxWarned bounds the dense table of uncalibrated-model warnings.
const maxWarned = 1 << 16

// slot is one worker of the policy.
type slot = schedkit.Slot[wstate]

// wstate is one worker's queue and expected load.
type wstate struct {
	// q holds the tasks decided for the worker and not popped yet, each
	// with the ns it is charged (schedkit.Entry.Cost); unsorted, they are
	// all queued at priority 0: one FIFO.
	q        schedkit.Queue
	running  []flight // popped and not finished, in pop order
	runNs    int64    // predicted ns of running
	runStart int64    // when running[0] started, as far as the policy knows
	// blocked is the team whose copy the worker popped, waiting for the
	// other members to pop theirs: it gets nothing else meanwhile. next
	// are the teams other members reached first, which it joins before
	// anything else (parallel.go).
	blocked *ptask
	next    []*ptask
}

// archCanRun is s.CanRun(t) for a t bound to no worker: the decision
// loops test it for every worker, and the test of Task.Worker they can
// skip costs about 1 ns a worker.
func archCanRun(s *slot, t *sched.Task) bool { return t.ArchMask&s.Bit != 0 }

// flight is a popped task and the ns it was charged on its worker.
type flight struct {
	id uint64
	ns int64
}

// New returns the dmda policy with alpha = beta = 1, unsorted, logging
// nowhere until SetLogger.
func New() *Policy {
	return &Policy{alpha: 1, beta: 1, getenv: os.Getenv, now: wire.Now, log: hclog.NewNullLogger()}
}

// SetLogger sets where the policy writes its warnings: the plugin's
// logger, whose lines reach the runtime's log.
func (p *Policy) SetLogger(l hclog.Logger) { p.log = l }

// ConfigSchema implements sched.Configurable.
func (p *Policy) ConfigSchema() *base.Schema {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "alpha", Type: base.AttrFloat, Default: "1", Doc: "weight of the expected completion time (env " + EnvAlpha + " overrides)"},
		{Name: "beta", Type: base.AttrFloat, Default: "1", Doc: "weight of the data transfer time (env " + EnvBeta + " overrides)"},
		{Name: "sorted", Type: base.AttrBool, Default: "false", Doc: "dmdas: order each worker's queue by priority"},
		{Name: "ready", Type: base.AttrBool, Default: "false", Doc: "dmdar: a worker takes first, among its most urgent tasks, one whose data is on its node"},
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
	if v, ok := cfg["ready"].(bool); ok {
		p.ready = v
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
	if err := schedkit.CheckWorkers(workers); err != nil {
		return err
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
	p.workers.Add(workers)
	for _, t := range p.workers.Unpark() {
		p.Push(t)
	}
}

// RemoveWorkers implements sched.Policy: the tasks queued for a removed
// worker are decided again among the others; a task bound to a removed
// worker waits until it is added back.
func (p *Policy) RemoveWorkers(ids []int) {
	// Teams with a member leaving first: their copies leave every queue.
	orphans := p.cancelTeams(func(c *team) bool {
		for _, m := range c.Members {
			if slices.Contains(ids, m) {
				return true
			}
		}
		return false
	})
	for _, s := range p.workers.Remove(ids) {
		orphans = s.State.q.Drain(orphans)
	}
	for _, t := range orphans {
		p.Push(t)
	}
}

// Push implements sched.Policy: it decides the task's worker, and its
// implementation when the core lists them, now.
func (p *Policy) Push(t *sched.Task) {
	if p.closed {
		return
	}
	t.SetImpl(-1) // a task placed again is decided again
	now := p.now()
	var s *slot
	if t.Worker >= 0 {
		if s = p.workers.Get(int(t.Worker)); s == nil {
			p.workers.Park(t)
			return
		}
	} else {
		// Lengths per architecture, once per decision rather than per
		// worker: the decision loops then cost what they did before
		// implementations, and tasks with one skip the lookup.
		l := t.Length
		if t.HasImpls() {
			implLengths(t, &l)
		}
		if t.Parallel != nil && len(p.combined) > 0 {
			var placed bool
			if s, placed = p.pushParallel(t, now, &l); placed {
				return // on a combined worker (parallel.go)
			}
			if s == nil {
				p.workers.Park(t) // no worker can run it now
				return
			}
		} else if s = p.calibrating(t, now, &l); s == nil {
			if s = p.best(t, now, &l); s == nil {
				p.workers.Park(t) // no worker can run it now
				return
			}
		}
	}
	if len(s.Impls(t)) > 0 {
		p.chooseImpl(s, t)
	}
	p.assign(s, t, now)
}

// implLengths sets in l, for each architecture where the core lists t's
// implementations, the predicted length (-1 when uncalibrated) of the one
// chooseImpl takes there.
func implLengths(t *sched.Task, l *[wire.NumArch]int64) {
	for a, impls := range t.Impls {
		if len(impls) > 0 {
			if i, ns, _ := schedkit.ChooseImpl(impls, 0); i >= 0 {
				l[a] = ns
			}
		}
	}
}

// lengthOn is s's entry of the lengths per architecture, -1 for an
// unknown architecture.
func lengthOn(s *slot, l *[wire.NumArch]int64) int64 {
	if s.ArchIndex < 0 {
		return -1
	}
	return l[s.ArchIndex]
}

// chooseImpl sets the implementation t runs with on s, when the core lists
// them: an uncalibrated one, in turn, while there are some, else the
// fastest (schedkit.ChooseImpl).
func (p *Policy) chooseImpl(s *slot, t *sched.Task) {
	i, _, calibrated := schedkit.ChooseImpl(s.Impls(t), p.calib)
	if !calibrated {
		p.calib++
	}
	t.SetImpl(i)
}

// chosenLength is t's predicted length on s with the implementation chosen
// for it.
func chosenLength(s *slot, t *sched.Task) int64 {
	if i, impls := t.Impl(), s.Impls(t); i >= 0 && i < len(impls) {
		return impls[i].Length
	}
	return s.Length(t)
}

// calibrating returns the worker for t when some worker that can run t has
// no prediction for it (for an implementation t may run there, when the
// core lists them): among those, the one with the fewest tasks, then the
// one expected free first. It returns nil when every capable worker has a
// prediction (or none can run t).
func (p *Policy) calibrating(t *sched.Task, now int64, l *[wire.NumArch]int64) *slot {
	var best *slot
	var bestN int
	var bestFree int64
	for _, s := range p.workers.Slots() {
		if !archCanRun(s, t) || lengthOn(s, l) >= 0 {
			continue
		}
		p.warnUncalibrated(t, s.ArchIndex)
		n := s.State.q.Len() + len(s.State.running)
		if best != nil && n > bestN {
			continue
		}
		free := p.free(&s.State, t.Priority, now)
		if best == nil || n < bestN || free < bestFree {
			best, bestN, bestFree = s, n, free
		}
	}
	return best
}

// warnUncalibrated logs, the first time only, that tasks of t's codelet
// are placed without a prediction for architecture a: the schedule is then
// a calibration run, balanced by task count, not dmda's.
func (p *Policy) warnUncalibrated(t *sched.Task, a int) {
	c := t.Codelet
	if a < 0 {
		return
	}
	if c < maxWarned {
		for int(c) >= len(p.warned) {
			p.warned = append(p.warned, [wire.NumArch]bool{})
		}
		if p.warned[c][a] {
			return
		}
		p.warned[c][a] = true
	} else {
		k := uint64(c)<<8 | uint64(a)
		if p.warnedFar[k] {
			return
		}
		if p.warnedFar == nil {
			p.warnedFar = map[uint64]bool{}
		}
		p.warnedFar[k] = true
	}
	p.log.Warn("uncalibrated performance model: the codelet's tasks are placed by count until it is calibrated (for good if the codelet has none)",
		"model", modelOf(t), "arch", archName(a))
}

// modelOf names t's codelet's model for a message: by its name, or by the
// codelet's number when the core did not name it.
func modelOf(t *sched.Task) string {
	if t.Model != "" {
		return t.Model
	}
	return fmt.Sprintf("codelet #%d", t.Codelet)
}

// archName is the architecture with driver.ArchIndex a.
func archName(a int) driver.Arch {
	for _, arch := range []driver.Arch{driver.CPU, driver.CUDA, driver.OpenCL} {
		if driver.ArchIndex(arch) == a {
			return arch
		}
	}
	return ""
}

// best returns the worker of least fitness for a calibrated t, each
// worker with the implementation of least predicted length there.
func (p *Policy) best(t *sched.Task, now int64, l *[wire.NumArch]int64) *slot {
	minEnd := int64(math.MaxInt64)
	p.ends = p.ends[:0]
	slots := p.workers.Slots()
	for _, s := range slots {
		end := int64(-1)
		if archCanRun(s, t) {
			end = p.free(&s.State, t.Priority, now) + lengthOn(s, l)
			minEnd = min(minEnd, end)
		}
		p.ends = append(p.ends, end)
	}
	var best *slot
	bestFit := math.Inf(1)
	bestN := 0
	for i, s := range slots {
		end := p.ends[i]
		if end < 0 {
			continue
		}
		fit := p.alpha*float64(end-minEnd) + p.beta*float64(s.Transfer(t))
		n := s.State.q.Len() + len(s.State.running)
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
func (p *Policy) free(w *wstate, prio int32, now int64) int64 {
	t := now
	if len(w.running) > 0 {
		head := w.running[0].ns
		t += max(head-(now-w.runStart), 0) + w.runNs - head
	}
	if p.sorted {
		return t + w.q.CostAtLeast(prio)
	}
	return t + w.q.Cost()
}

// assign queues t on s, charging s the predicted length and, as StarPU
// does, the part of the transfer that would not overlap the work queued
// before it.
func (p *Policy) assign(s *slot, t *sched.Task, now int64) {
	ns := max(chosenLength(s, t), 0)
	if tr := s.Transfer(t); tr > 0 {
		ns += max(now+tr-p.free(&s.State, t.Priority, now), 0)
	}
	prio := t.Priority
	if !p.sorted {
		prio = 0 // one FIFO
	}
	s.State.q.PushAs(t, prio, ns)
}

// Pop implements sched.Policy: the worker's own queue, in order; with
// ready set (dmdar), the task of the first ones whose data is nearest.
func (p *Policy) Pop(id int) *sched.Task {
	s := p.workers.Get(id)
	if s == nil || p.closed || s.State.q.Len() == 0 || s.State.blocked != nil {
		return nil
	}
	w := &s.State
	if len(w.next) > 0 && p.isTeamCopy(w.q.Front()) {
		return p.joinNext(s) // teammates wait for it (parallel.go)
	}
	var e schedkit.Entry
	if p.ready && len(w.next) == 0 {
		e = w.q.TakeAt(p.readyPos(s))
	} else {
		e, _ = w.q.PopFront()
	}
	if len(w.running) == 0 {
		w.runStart = p.now()
	}
	w.running = append(w.running, flight{id: e.Task.ID, ns: e.Cost})
	w.runNs += e.Cost
	if len(p.pending) > 0 {
		if pt := p.pending[e.Task.ID]; pt != nil {
			return p.arrive(s, pt) // a team's copy (parallel.go)
		}
	}
	return e.Task
}

// readyPos is dmdar's choice in s's queue, as StarPU's
// _starpu_fifo_pop_first_ready_task makes it: among the tasks of priority
// at least the head's (the head's bucket when sorted; unsorted, the FIFO
// holds every priority), the first one needing the least transfer to s's
// node, stopping at one needing none. The transfer is the one predicted
// when the task was pushed: the core moves no data ahead of a task, so
// the data still lies where it was.
func (p *Policy) readyPos(s *slot) int {
	first := s.State.q.Front().Priority
	best, bestTr := 0, int64(math.MaxInt64)
	s.State.q.Each(func(pos int, e schedkit.Entry) bool {
		if p.isTeamCopy(e.Task) {
			// Never past a team's copy: the members' queues keep the
			// teams in one order (parallel.go).
			if pos == 0 {
				best = 0
			}
			return false
		}
		if e.Task.Priority < first {
			return true
		}
		if tr := s.Transfer(e.Task); tr < bestTr {
			best, bestTr = pos, tr
		}
		return bestTr > 0
	})
	return best
}

// PostExec implements sched.Policy: the task leaves its worker's load
// (every member's, for a combined worker); the next one is taken to start
// now.
func (p *Policy) PostExec(worker int, id uint64, _ int64) {
	if s := p.workers.Get(worker); s != nil {
		p.finish(s, id)
	} else if c := p.teamByID(worker); c != nil {
		p.members(c, func(s *slot) { p.finish(s, id) })
	}
}

// finish takes task id out of s's load.
func (p *Policy) finish(s *slot, id uint64) {
	w := &s.State
	for i, f := range w.running {
		if f.id != id {
			continue
		}
		w.runNs -= f.ns
		if i == 0 {
			// The usual case, tasks ending in order: dropping the head
			// must not move the rest, which with tasks chained ahead
			// (Chain) is the worker's whole chain.
			w.running = w.running[1:]
			w.runStart = p.now()
			return
		}
		w.running = append(w.running[:i], w.running[i+1:]...)
		return
	}
}

// Deinit implements sched.Policy: it drops every queued task.
func (p *Policy) Deinit() {
	p.closed = true
	p.workers.Reset()
	p.combined, p.pending = nil, nil
}
