package core

// Parallel tasks: combined workers, and the dispatch of an SPMD or
// FORKJOIN task to every member of one. Design note:
// docs/design/scheduling.md, "Parallel tasks".
//
// StarPU runs a parallel task on a combined worker, a team of CPU workers:
// an SPMD kernel on every member, each knowing its rank; a FORKJOIN kernel
// on the master, which may start as many threads as the team has members.
//
// Combined workers. At Init the core groups the RAM workers of the first
// driver whose fingerprint sets Parallel (driver-cpu) as StarPU does
// without hwloc: consecutive workers in teams of MinWorkerSize (default
// 2), then twice that, and so on up to MaxWorkerSize and the worker
// count, plus one team of every worker when the doubling does not reach
// it (the root of StarPU's hwloc tree). They are numbered after the
// workers, and every policy instance is told of them
// (sched.InitRequest.Combined).
//
// Protocol.
//   - Push: a parallel task that may run on a combined worker (its
//     codelet's type, MaxParallelism, Where, the implementations the
//     team's driver hosts, no SCRATCH or REDUX buffer, no worker of its
//     own) is pushed flagged wire.PushParallel, with the sizes it may run
//     on and its predicted length on each, from the performance model
//     entry of that size ("cpu:2", "cpu:4": StarPU keys its models per
//     combined worker size too). It never carries its Exec: the policy
//     host does not post it, and it is never chained (engine.postKernel).
//   - Assign: a policy that places parallel tasks names a combined worker
//     (sched.Task.SetCombined); any other names a worker, and the task
//     runs there alone, as StarPU runs a parallel task on a basic worker
//     (the kernel sees a team of one). The core refuses, failing the task
//     with why, a combined worker the task may not run on.
//   - Dispatch: the Exec, flagged wire.ExecSPMD or wire.ExecForkJoin and
//     naming the team, goes to the master's dispatch ring and, in the same
//     engine step, to every other member's (their overflow lists when a
//     ring is full, which keep ring order). Every ring then holds the
//     parallel tasks in the order of these steps, so the members of one
//     team always reach it without waiting for each other in a cycle
//     (driver.Teams has the driver's side).
//   - Completion: the master alone answers, once every member is done.
//     The task ran on the master (Profiling().Worker, statistics); its
//     duration goes to the model entry of its size, its Done names the
//     combined worker, so that the policy host gives every member's slot
//     back.
//
// Rejected: an Exec per member with its own rank (the members must know
// each other anyway, to tell a late teammate from a gone one); posting
// each member's copy when that member has room (two teams sharing two
// workers could then be posted in opposite orders and wait for each other
// for ever); combined workers of several drivers (a team meets in one
// driver process).

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// combinedWorker is a team of workers of one driver that run parallel
// tasks together. Set at Init and read-only after.
type combinedWorker struct {
	id int
	// members, the master first; ids are their IDs, as the Exec's team
	// names them.
	members []*workerState
	ids     []int32
	// archKey is the combined worker's key in the performance models:
	// the master's, with the size ("cpu:4").
	archKey string
}

// size is the number of workers in the team.
func (c *combinedWorker) size() int { return len(c.members) }

// combinedTable is the runtime's combined workers (rt.teams), set at Init
// and read-only after: list by ID minus the worker count, sizes the
// distinct sizes in increasing order, drv the index of their driver (-1
// when there are none).
type combinedTable struct {
	list  []*combinedWorker
	sizes []int
	drv   int
}

// CombinedWorkerInfo describes one combined worker.
type CombinedWorkerInfo struct {
	// ID is the combined worker's number, after every worker's: the one
	// kernels see (kernel.Context.CombinedWorker) and
	// ProfilingInfo.CombinedWorker reports.
	ID int
	// Members are its workers' IDs, the master first.
	Members []int
	Arch    driver.Arch
	Driver  string
}

// CombinedWorkers lists the combined workers parallel tasks may run on
// (Codelet.Type SPMD or ForkJoin); none when no driver runs parallel tasks
// or it has a single worker.
func (rt *Runtime) CombinedWorkers() []CombinedWorkerInfo {
	var out []CombinedWorkerInfo
	for _, c := range rt.teams.list {
		ci := CombinedWorkerInfo{ID: c.id, Arch: c.members[0].drv.fp.Arch, Driver: c.members[0].drv.name}
		for _, m := range c.members {
			ci.Members = append(ci.Members, m.id)
		}
		out = append(out, ci)
	}
	return out
}

// formCombined forms the combined workers, once the workers and their
// model keys exist. See the header for the shape.
func (rt *Runtime) formCombined() {
	rt.teams = combinedTable{drv: -1}
	var ws []*workerState
	for i, d := range rt.drivers {
		if !d.fp.Parallel {
			continue
		}
		for _, w := range d.workers {
			// A worker the application runs (RunDriver) would hold its
			// teams back until it is run: it gets no team.
			if w.node == 0 && !rt.isAppDriven(w) {
				ws = append(ws, w)
			}
		}
		if len(ws) >= 2 {
			rt.teams.drv = i
			break
		}
		ws = nil
	}
	n := len(ws)
	lo, hi := max(rt.cfg.MinWorkerSize, 2), rt.cfg.MaxWorkerSize
	if hi == 0 || hi > n {
		hi = n
	}
	add := func(team []*workerState) {
		c := &combinedWorker{id: len(rt.workers) + len(rt.teams.list), members: team,
			archKey: perfmodel.CombinedArchKey(team[0].archKey, len(team))}
		for _, m := range team {
			c.ids = append(c.ids, int32(m.id))
		}
		rt.teams.list = append(rt.teams.list, c)
		if !slices.Contains(rt.teams.sizes, len(team)) {
			rt.teams.sizes = append(rt.teams.sizes, len(team))
		}
	}
	for size := lo; size <= hi; size *= 2 {
		for first := 0; first+size <= n; first += size {
			add(ws[first : first+size])
		}
	}
	if n >= lo && n <= hi && !slices.Contains(rt.teams.sizes, n) {
		add(ws)
	}
	slices.Sort(rt.teams.sizes)
	if len(rt.teams.list) == 0 {
		rt.teams.drv = -1
	}
}

// combinedByID is the combined worker with that ID, or nil.
func (rt *Runtime) combinedByID(id int) *combinedWorker {
	if i := id - len(rt.workers); i >= 0 && i < len(rt.teams.list) {
		return rt.teams.list[i]
	}
	return nil
}

// schedCombined is the combined workers as a policy is told of them.
func (rt *Runtime) schedCombined() []sched.Worker {
	var out []sched.Worker
	for _, c := range rt.teams.list {
		sw := sched.Worker{ID: c.id, Arch: c.members[0].drv.fp.Arch, Node: 0}
		for _, m := range c.members {
			sw.Members = append(sw.Members, m.id)
		}
		out = append(out, sw)
	}
	return out
}

// maxTeamLen is the most bytes a team adds to j's Exec.
func (rt *Runtime) maxTeamLen(j *job) int {
	if len(rt.teams.sizes) == 0 || j.cl == nil || !j.cl.par {
		return 0
	}
	return wire.TeamLen(rt.teams.sizes[len(rt.teams.sizes)-1])
}

// parallelSizes is the combined worker sizes j may run on, increasing:
// none unless j is a parallel task of the global machine's combined
// workers' architecture whose codelet that driver hosts, without a worker
// of its own or SCRATCH and REDUX buffers (a team would need one per
// member), and at most its codelet's MaxParallelism.
func (rt *Runtime) parallelSizes(j *job) []int {
	d := rt.teams.drv
	if j.cl == nil || !j.cl.par || d < 0 || j.pinned >= 0 {
		return nil
	}
	if j.sub {
		// Said once per codelet: a team would need a SCRATCH or REDUX
		// buffer per member, which the runtime does not make yet.
		if !j.cl.warnedAlone.Swap(true) {
			rt.log.Warn("parallel codelet's tasks with SCRATCH or REDUX buffers run on one worker, not on a team (a team would need such a buffer per member)", "codelet", j.name())
		}
		return nil
	}
	if j.archMask&driver.ArchBit(rt.drivers[d].fp.Arch) == 0 || j.implMaskOf(d) == 0 {
		return nil
	}
	sizes := rt.teams.sizes
	if m := j.cl.maxPar; m > 0 {
		n := 0
		for n < len(sizes) && sizes[n] <= m {
			n++
		}
		sizes = sizes[:n]
	}
	return sizes
}

// predictParallel flags p PushParallel with the sizes j may run on and its
// predicted length on each, when it may run on a combined worker.
func (e *engine) predictParallel(j *job, p *wire.Push) {
	sizes := e.rt.parallelSizes(j)
	if len(sizes) == 0 {
		return
	}
	p.Flags |= wire.PushParallel
	p.Parallel = make([]wire.SizeLength, 0, len(sizes))
	m := j.cl.model
	if m != nil && j.footprint == 0 && j.dataSize == 0 {
		j.footprint, j.dataSize = footprint(j.task)
	}
	first := bits.TrailingZeros8(j.implMaskOf(e.rt.teams.drv))
	key := e.rt.teams.list[0].members[0].archKey
	for _, n := range sizes {
		sl := wire.SizeLength{Size: int32(n), Length: -1}
		if m != nil {
			if ns, ok := m.PredictImpl(perfmodel.CombinedArchKey(key, n), first, j.footprint, j.dataSize); ok {
				sl.Length = int64(ns)
			}
		}
		p.Parallel = append(p.Parallel, sl)
	}
}

// dispatchTeam runs j, which a policy assigned to combined worker c (a),
// on c: it checks that j may run there, then posts it to the master, which
// posts it to the other members in the same engine step (post).
func (e *engine) dispatchTeam(j *job, c *combinedWorker, a *wire.Assign) {
	rt := e.rt
	fail := func(why string, args ...any) {
		e.fail(j, c.id, fmt.Errorf("%w: scheduler assigned task %q to combined worker %d (%d workers), "+why, append([]any{ErrTaskFailed, j.name(), c.id, c.size()}, args...)...))
	}
	switch {
	case j.cl == nil || !j.cl.par:
		fail("but it is not a parallel task (Codelet.Type is %s)", Seq)
		return
	case j.pinned >= 0:
		fail("but it must run on worker %d", j.pinned)
		return
	case j.cl.maxPar > 0 && c.size() > j.cl.maxPar:
		fail("beyond its codelet's MaxParallelism %d", j.cl.maxPar)
		return
	case !slices.Contains(rt.parallelSizes(j), c.size()):
		fail("where it may not run in parallel (it may on sizes %v)", rt.parallelSizes(j))
		return
	}
	master := c.members[0]
	if a.Flags&wire.AssignImpl != 0 {
		if err := rt.policyImpl(j, master, a.Impl); err != nil {
			e.fail(j, c.id, err)
			return
		}
	}
	j.worker, j.comb = int32(master.id), c
	e.enqueue(master, j)
}

// teamFlags is the Exec flags of j's team, 0 unless it runs on one.
func (j *job) teamFlags() uint32 {
	switch {
	case j.comb == nil:
		return 0
	case j.task.Codelet.Type == ForkJoin:
		return wire.ExecForkJoin
	}
	return wire.ExecSPMD
}

// teamLen is the bytes j's team adds to its Exec.
func (j *job) teamLen() int {
	if j.comb == nil {
		return 0
	}
	return wire.TeamLen(j.comb.size())
}

// isMemberCopy reports whether posting j to w posts a team member's copy
// of it: w is in j's team and not its master.
func (j *job) isMemberCopy(w *workerState) bool {
	return j.comb != nil && w != j.comb.members[0]
}

// putTeam writes j's team at the end of b, its Exec, when it runs on a
// combined worker.
func (j *job) putTeam(b []byte) {
	if c := j.comb; c != nil {
		wire.PutExecTeam(b[len(b)-wire.TeamLen(c.size()):], int32(c.id), c.ids)
	}
}

// postTeam ends the posting of team task j, once its master's copy is in
// the master's ring: it queues the other members' copies, in the same
// engine step, so that every member's ring holds the teams in one order.
func (e *engine) postTeam(j *job) {
	for _, m := range j.comb.members[1:] {
		e.enqueue(m, j)
	}
}

// postMember writes the copy of team task j for member w into w's dispatch
// ring; false when it has no room now. A dead driver's copy is dropped:
// the master's copy answers for the task.
func (e *engine) postMember(w *workerState, j *job) bool {
	if w.drv.dead.Load() {
		return true
	}
	t := j.task
	n := wire.ExecSize(len(t.Handles), len(t.Arg)) + j.teamLen()
	b := w.dispatch.Reserve(n)
	if b == nil {
		return false
	}
	e.encodeExec(b, j, j.cl.impls[w.driverIdx][j.impl], j.cl.execFlags(w.driverIdx, j.impl)|j.teamFlags(), w.node)
	j.putTeam(b)
	w.dispatch.Commit()
	w.mustRing = true
	return true
}

// dropTeamCopies removes the copies of team task j still waiting for room
// in its members' overflow lists, once j failed or is retried: they must
// never reach a worker.
func (e *engine) dropTeamCopies(j *job) {
	if j.comb == nil {
		return
	}
	for _, m := range j.comb.members[1:] {
		if slices.Contains(m.overflow, j) {
			// A new slice: the caller may be ranging over the old one
			// (emptyRings fails what a dead driver's workers held).
			m.overflow = slices.DeleteFunc(slices.Clone(m.overflow), func(o *job) bool { return o == j })
		}
	}
}

// doneWorker is the worker a Done for j names: its combined worker when it
// ran on one, so that the policy host gives back every member's slot.
func (j *job) doneWorker(wid int) int {
	if j.comb != nil {
		return j.comb.id
	}
	return wid
}

// notePredictionTeam is notePrediction for a task on combined worker c:
// its model entry is c's size's.
func (e *engine) notePredictionTeam(j *job) {
	j.predicted = -1
	if m := j.cl.model; m != nil {
		if ns, ok := m.PredictImpl(j.comb.archKey, int(max(j.impl, 0)), j.footprint, j.dataSize); ok {
			j.predicted = int64(ns)
		}
	}
	switch {
	case !e.rt.multiNode:
		j.predictedTransfer = 0
	case len(j.transfer) > 0:
		j.predictedTransfer = j.transfer[0]
	default:
		j.predictedTransfer = -1
	}
}

// recordTeam adds the duration of a task that ran on a combined worker to
// its codelet's model, under the combined worker's size.
func (e *engine) recordTeam(j *job, ns int64) {
	if j.cl == nil || j.cl.model == nil {
		return
	}
	if j.dataSize == 0 && j.footprint == 0 {
		j.footprint, j.dataSize = footprint(j.task)
	}
	j.cl.model.RecordImpl(j.comb.archKey, int(max(j.impl, 0)), j.footprint, j.dataSize, float64(ns))
}
