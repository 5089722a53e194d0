package driver

// Parallel tasks, the driver's side: the members of a combined worker
// meet, run, and report once.
//
// The core posts a parallel task's Exec, flagged wire.ExecSPMD or
// wire.ExecForkJoin and naming the team's members, to every member's
// dispatch ring, in the same order relative to every other parallel task
// on every ring (core/task_parallel.go). Each member, reaching it in its
// ring, calls Teams.Run, which
//
//   - waits until every member has arrived, so that no member starts while
//     another still runs a task of its own (an SPMD kernel's ranks may wait
//     for each other; a FORKJOIN kernel uses the others' cores);
//   - runs the kernel: on every member with its rank (SPMD), or on the
//     master only, the others waiting (FORKJOIN);
//   - waits until every member is done, then tells the master to post the
//     task's one completion, failed with the errors of the members that
//     failed; the others post nothing (the core would ignore them).
//
// Because every ring holds the parallel tasks in one global order and a
// sequential task always ends, every member reaches each team in turn:
// the waits cannot deadlock. What can happen is a member that will never
// come: its loop ended (Deinit while a team is half formed, a worker
// stopped by an error) or the application refused the task (Fail). The
// waiting members then give up and the master reports the task failed,
// naming the member, instead of hanging.
//
// Rejected: a barrier keyed by size alone (a member could not tell a
// teammate that will come from one that left); spinning while waiting
// (a team waits for its slowest member's current task, which may take
// seconds, and the cores it spins on are the ones the others need).

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Teams is where the workers of one driver meet to run parallel tasks. A
// driver makes one per Init, calls Join for each of its workers before
// they take tasks, Leave when a worker's loop ends (or, for a worker the
// application runs, at Deinit), and Run or Fail for every Exec flagged
// wire.ExecParallel. Its methods may be called from any goroutine.
type Teams struct {
	mu    sync.Mutex
	cond  sync.Cond
	teams map[uint64]*team
	// gone are the workers that left: a team still waiting for one of them
	// gives up.
	gone map[int]bool
}

// team is one parallel task's meeting.
type team struct {
	members []int32
	arrived []bool // by rank
	n       int    // members arrived
	done    int    // members done with the kernel
	errs    []error
	// failed, once set, is why the team gave up before running.
	failed error
}

// NewTeams returns an empty meeting place.
func NewTeams() *Teams {
	ts := &Teams{teams: map[uint64]*team{}, gone: map[int]bool{}}
	ts.cond.L = &ts.mu
	return ts
}

// Join counts worker as running: the teams it is a member of wait for it.
func (ts *Teams) Join(worker int) {
	ts.mu.Lock()
	delete(ts.gone, worker)
	ts.mu.Unlock()
}

// Leave says worker takes no more tasks: the teams waiting for it give up.
func (ts *Teams) Leave(worker int) {
	ts.mu.Lock()
	ts.gone[worker] = true
	ts.mu.Unlock()
	ts.cond.Broadcast()
}

// Run is worker's part of parallel task e: it meets the other members,
// runs kernel (with worker's rank, 0 to len(e.Members)-1) on every member
// for an SPMD task or on the master alone for a FORKJOIN one, and waits
// until every member is done. It returns whether worker is the master,
// which alone posts the task's completion, with err: the members' kernel
// errors joined, or why the team could not run.
func (ts *Teams) Run(worker int, e *wire.Exec, kernel func(rank int) error) (master bool, err error) {
	return ts.run(worker, e, kernel, nil)
}

// Fail is Run for a worker that cannot run e (a worker the application
// refuses tasks for): the team gives up, failing with why.
func (ts *Teams) Fail(worker int, e *wire.Exec, why error) (master bool, err error) {
	if why == nil {
		why = errors.New("refused")
	}
	return ts.run(worker, e, nil, why)
}

func (ts *Teams) run(worker int, e *wire.Exec, kernel func(rank int) error, refuse error) (bool, error) {
	rank := e.Rank(worker)
	if e.Flags&wire.ExecParallel == 0 || rank < 0 {
		// Not a team task for this worker: nobody else can report it.
		return true, fmt.Errorf("worker %d: task %d is not a parallel task of a team it belongs to (members %v)", worker, e.ID, e.Members)
	}
	ts.mu.Lock()
	t, err := ts.arrive(worker, rank, e)
	if err != nil {
		ts.mu.Unlock()
		ts.cond.Broadcast()
		return rank == 0, err
	}
	if refuse != nil && t.failed == nil {
		t.failed = fmt.Errorf("parallel task %d: worker %d (rank %d of %d) did not run it: %w", e.ID, worker, rank, len(t.members), refuse)
	}
	ts.cond.Broadcast()
	for t.n < len(t.members) && t.failed == nil {
		if w, ok := ts.missingGone(t); ok {
			t.failed = fmt.Errorf("parallel task %d: worker %d, a member of its combined worker %d, stopped before joining it", e.ID, w, e.Combined)
			ts.cond.Broadcast()
			break
		}
		ts.cond.Wait()
	}
	if t.failed != nil {
		ts.forget(e.ID, t)
		ts.mu.Unlock()
		return rank == 0, t.failed
	}
	ts.mu.Unlock()

	var kerr error
	if e.Flags&wire.ExecSPMD != 0 || rank == 0 {
		kerr = kernel(rank)
	}

	ts.mu.Lock()
	if kerr != nil {
		t.errs[rank] = fmt.Errorf("rank %d (worker %d): %w", rank, worker, kerr)
	}
	t.done++
	if t.done == len(t.members) {
		ts.forget(e.ID, t)
		ts.cond.Broadcast()
	}
	for t.done < len(t.members) {
		ts.cond.Wait()
	}
	ts.mu.Unlock()
	if rank != 0 {
		return false, nil
	}
	return true, errors.Join(t.errs...)
}

// arrive records worker, of the given rank, at e's team, making the team
// when it is the first; ts.mu held.
func (ts *Teams) arrive(worker, rank int, e *wire.Exec) (*team, error) {
	t := ts.teams[e.ID]
	if t == nil {
		t = &team{members: slices.Clone(e.Members), arrived: make([]bool, len(e.Members)), errs: make([]error, len(e.Members))}
		ts.teams[e.ID] = t
	} else if !slices.Equal(t.members, e.Members) {
		t.failed = fmt.Errorf("parallel task %d: worker %d got the team %v, another member %v", e.ID, worker, e.Members, t.members)
		return nil, t.failed
	}
	if t.arrived[rank] {
		t.failed = fmt.Errorf("parallel task %d: worker %d (rank %d) arrived twice", e.ID, worker, rank)
		return nil, t.failed
	}
	t.arrived[rank] = true
	t.n++
	return t, nil
}

// missingGone returns a member of t that has not arrived and left; ts.mu
// held.
func (ts *Teams) missingGone(t *team) (int, bool) {
	for r, m := range t.members {
		if !t.arrived[r] && ts.gone[int(m)] {
			return int(m), true
		}
	}
	return 0, false
}

// forget drops t once every member has arrived: no member looks it up
// again. A team that failed before all arrived stays, so that a member
// arriving late learns of the failure instead of waiting for the others
// anew. ts.mu held.
func (ts *Teams) forget(id uint64, t *team) {
	if t.n == len(t.members) && ts.teams[id] == t {
		delete(ts.teams, id)
	}
}
