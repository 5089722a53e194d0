package trace

// Worker states: what a worker did between two tasks, derived from the
// records a trace already holds, so that the runtime pays nothing more for
// them. For each gap on a worker, from the end of its previous task (or
// the time the first task of the run was ready) to the start of the next:
//
//   - fetching: a transfer of one of the next task's handles to the
//     worker's memory node was in flight (the copy it waited for);
//   - scheduling: the next task was ready (its dependencies met) and the
//     worker was not running it yet: the policy's decision, the dispatch
//     through the rings, the worker's wake-up; StarPU's "Overhead" and
//     "Scheduling" together;
//   - sleeping: the next task was not ready yet and the worker slept on
//     its doorbell's futex (its driver reported the sleep with the task's
//     completion: Task.SleepStart);
//   - idle: the next task was not ready yet, and the worker was awake
//     (polling its rings) or its driver said nothing of a sleep.
//
// Sleeping is thus a part of what would otherwise be idle: where a
// reported sleep overlaps fetching or scheduling, those win, as they say
// why the worker waited (its data; the dispatch and its own wake-up,
// which a sleep past the ready time is). A driver reports the first
// sleep's start and the last one's end since its previous completion;
// the deriver clips that to the gap, so the polling between two sleeps
// in it (after a driver's idle timeout) counts as sleeping.
//
// After a worker's last task it is idle to the end of the run: no
// completion reports the sleep after it.
//
// A parallel task that ran on a team (Task.Team) counts on every member:
// each has its gap before it, and none is idle while it runs.
//
// Rejected: a record per state change from the drivers (a message per
// wake-up on the hot path, for what one completion can carry), and timing
// the gaps on the engine goroutine (a clock read per dispatch on the
// dependency hop; the policy posts most tasks to the workers itself, so
// the engine never sees when).
//
// The deriver works in one pass over the records in file order, with
// memory bounded by the workers and handles, so that the streaming
// converters (chrome.go) derive the same states as Read.

import "fmt"

// StateKind is what a worker does between tasks.
type StateKind uint8

// The states between tasks; executing is the tasks themselves.
const (
	StateIdle StateKind = iota + 1
	StateScheduling
	StateFetching
	StateSleeping
	// stateLast is the last state.
	stateLast = StateSleeping
)

// String names k as the summary and the viewers do.
func (k StateKind) String() string {
	switch k {
	case StateIdle:
		return "idle"
	case StateScheduling:
		return "scheduling"
	case StateFetching:
		return "fetching"
	case StateSleeping:
		return "sleeping"
	}
	return fmt.Sprintf("state %d", uint8(k))
}

// parseState is String's inverse; 0 for an unknown name.
func parseState(s string) StateKind {
	for k := StateIdle; k <= stateLast; k++ {
		if k.String() == s {
			return k
		}
	}
	return 0
}

// State is one stretch of a worker's time between tasks. Task is the job
// the worker ran next (0 after its last one).
type State struct {
	Worker     int
	Kind       StateKind
	Start, End int64
	Task       uint64
}

// xferSlots is how many recent transfers per handle the deriver keeps: a
// task's gap overlaps the last few copies of its handles, never older
// ones (those ended before the worker's previous task).
const xferSlots = 4

type xferSeen struct {
	dst        int
	start, end int64
}

type xferRing struct {
	x [xferSlots]xferSeen
	n int // transfers seen; the last min(n, xferSlots) are in x
}

// stateDeriver turns run and transfer records, in file order, into
// states; emit receives them.
type stateDeriver struct {
	emit    func(State)
	nodeOf  map[int]int
	lastEnd map[int]int64
	workers []int // in the order first seen, for finish
	// origin is the earliest ready or submit time seen: a worker's first
	// gap starts there.
	origin    int64
	hasOrigin bool
	end       int64 // the last task end seen
	xfers     map[uint64]*xferRing
	fetch     [][2]int64 // scratch
}

func newStateDeriver(emit func(State)) *stateDeriver {
	return &stateDeriver{emit: emit, nodeOf: map[int]int{}, lastEnd: map[int]int64{}, xfers: map[uint64]*xferRing{}}
}

// worker notes w's memory node.
func (d *stateDeriver) worker(w Worker) { d.nodeOf[w.ID] = w.Node }

// seen notes a task's ready or submit time t.
func (d *stateDeriver) seen(t int64) {
	if !d.hasOrigin || t < d.origin {
		d.origin, d.hasOrigin = t, true
	}
}

// transfer notes a completed copy.
func (d *stateDeriver) transfer(x Transfer) {
	if x.Failed {
		return
	}
	r := d.xfers[x.Handle]
	if r == nil {
		r = &xferRing{}
		d.xfers[x.Handle] = r
	}
	r.x[r.n%xferSlots] = xferSeen{dst: x.Dst, start: x.Start, end: x.End}
	r.n++
}

// run derives the states before t of every worker that ran it: its
// worker, or each member of its team (a member running a team's task is
// executing, not idle). The sleep its record carries is its worker's,
// the master's: the other members do not report theirs.
func (d *stateDeriver) run(t *Task) {
	var one [1]int
	for i, w := range t.ranOn(&one) {
		sleep := [2]int64{t.SleepStart, t.SleepEnd}
		if i > 0 {
			sleep = [2]int64{}
		}
		d.runOn(w, t, sleep)
	}
}

// runOn derives the states of worker w before t, which ran there, w
// having slept within sleep ({0, 0} none).
func (d *stateDeriver) runOn(w int, t *Task, sleep [2]int64) {
	g0, ok := d.lastEnd[w]
	if !ok {
		d.workers = append(d.workers, w)
		g0 = t.Start
		if d.hasOrigin {
			g0 = min(d.origin, t.Start)
		}
	}
	d.lastEnd[w] = max(g0, t.End)
	d.end = max(d.end, t.End)
	g1 := t.Start
	if g1 <= g0 {
		return
	}
	node, known := d.nodeOf[w]
	fetch := d.fetch[:0]
	for _, h := range t.Handles {
		r := d.xfers[h.Handle]
		if r == nil {
			continue
		}
		for k := range min(r.n, xferSlots) {
			x := r.x[k]
			if !known || x.dst != node {
				continue
			}
			if s, e := max(x.start, g0), min(x.end, g1); s < e {
				fetch = append(fetch, [2]int64{s, e})
			}
		}
	}
	d.fetch = fetch
	ready := t.Ready
	if ready == 0 {
		ready = t.Submit
	}
	if ready == 0 && !t.Submitted {
		ready = g1 // nothing says when it was ready: idle
	}
	classify(g0, g1, ready, sleep, fetch, func(k StateKind, s, e int64) {
		d.emit(State{Worker: w, Kind: k, Start: s, End: e, Task: t.ID})
	})
}

// finish ends every worker's timeline, idle from its last task to the
// run's last task end.
func (d *stateDeriver) finish() {
	for _, w := range d.workers {
		if e := d.lastEnd[w]; e < d.end {
			d.emit(State{Worker: w, Kind: StateIdle, Start: e, End: d.end})
		}
	}
}

// classify splits the gap [g0, g1) into states: the union of fetch
// (intervals inside the gap, in any order) is fetching; the rest is
// scheduling from ready on, and before it sleeping within sleep (the
// worker's sleep, from its start to its end; {0, 0} none) and idle
// elsewhere. Adjacent pieces of one state merge.
func classify(g0, g1, ready int64, sleep [2]int64, fetch [][2]int64, emit func(StateKind, int64, int64)) {
	sortIntervals(fetch)
	var pk StateKind
	var ps, pe int64
	put := func(k StateKind, s, e int64) {
		if s >= e {
			return
		}
		if k == pk && s == pe {
			pe = e
			return
		}
		if pk != 0 {
			emit(pk, ps, pe)
		}
		pk, ps, pe = k, s, e
	}
	idle := func(s, e int64) {
		if ss, se := max(s, sleep[0]), min(e, sleep[1]); ss < se {
			put(StateIdle, s, ss)
			put(StateSleeping, ss, se)
			put(StateIdle, se, e)
			return
		}
		put(StateIdle, s, e)
	}
	rest := func(s, e int64) {
		idle(s, min(e, max(s, ready)))
		put(StateScheduling, max(s, ready), e)
	}
	cur := g0
	for _, f := range fetch {
		if f[1] <= cur {
			continue
		}
		rest(cur, f[0])
		put(StateFetching, max(cur, f[0]), f[1])
		cur = f[1]
	}
	rest(cur, g1)
	if pk != 0 {
		emit(pk, ps, pe)
	}
}

// sortIntervals sorts a few intervals by start (insertion sort: there are
// as many as the task's handles' recent copies).
func sortIntervals(v [][2]int64) {
	for i := 1; i < len(v); i++ {
		for k := i; k > 0 && v[k][0] < v[k-1][0]; k-- {
			v[k], v[k-1] = v[k-1], v[k]
		}
	}
}
