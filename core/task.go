package core

// Tasks: submit, wait, complete; design note: docs/design/tasks.md.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// TagID names a tag: a point in the task graph that tasks and the
// application can depend on, as in StarPU.
type TagID uint64

// Task priorities. Policies that honour priorities run higher ones first;
// the scheduler sees them as 32-bit integers.
const (
	MinPriority     = math.MinInt32
	MaxPriority     = math.MaxInt32
	DefaultPriority = 0
)

// Task is one execution of a codelet on a list of data handles. The
// application owns the struct; it must not change it between Submit and the
// task's completion, except Regenerate from the task's callback.
type Task struct {
	// Codelet is what to run; nil makes a synchronisation task that runs
	// nowhere and completes as soon as its dependencies are met.
	Codelet *Codelet
	Handles []*Handle
	// Modes gives one mode per handle for codelets with VariableBuffers.
	Modes []Mode
	// Nodes gives one memory node per handle for codelets with
	// VariableBuffers (see Codelet.Nodes); nil means the worker's node.
	Nodes []int
	// Arg is passed to the kernel as is.
	Arg []byte
	// Where, when not zero, restricts the architectures the task may run
	// on (driver.ArchBit values) beyond its codelet's, or is Nowhere.
	Where uint32
	// Priority orders ready tasks in policies that honour it; higher first.
	// It must lie between MinPriority and MaxPriority.
	Priority int
	// Name names the task in traces and errors; TaskName falls back to the
	// codelet's model and name.
	Name string
	// ExecuteOnWorker makes the task run on worker Worker (an ID from
	// Workers), bypassing the policy's choice of worker.
	ExecuteOnWorker bool
	Worker          int
	// WorkerOrder, with ExecuteOnWorker, runs the tasks given to one worker
	// in the order 1, 2, 3, ... of this field, whatever the order they
	// become ready in: task k starts after task k-1 completed. Zero means
	// no order.
	WorkerOrder uint
	// PrologueCallback runs when the task becomes ready, before it goes to
	// the scheduler, on the goroutine that released it.
	PrologueCallback func(*Task)
	// Callback runs after the task completes, on the runtime's completion
	// thread: keep it short and never block in it. Blocking data calls
	// (Acquire, FetchOnNode, ...) from it fail with ErrDeadlock; the
	// asynchronous ones (AcquireCB, ...) may be used.
	Callback func(*Task)
	// Synchronous makes Submit wait for the task's completion.
	Synchronous bool
	// Detach declares that nobody will Wait for the task: Wait on it is an
	// error. WaitForAll still covers it.
	Detach bool
	// Regenerate submits the task again each time it completes, after its
	// callback, with the same tag and data, until the callback clears it.
	// Explicit dependencies (DeclareDeps) hold for one submission only.
	// Wait returns once a completion leaves Regenerate cleared.
	Regenerate bool
	// NoSequentialConsistency drops the implicit data dependencies of this
	// task: it orders with no other task through its handles.
	NoSequentialConsistency bool
	// HandlesNoSequentialConsistency, when not nil, has one flag per
	// handle: true drops the implicit data dependencies of this task
	// through that handle only (StarPU's handles_sequential_consistency,
	// inverted so that nil keeps the default).
	HandlesNoSequentialConsistency []bool
	// Flops is the number of floating-point operations the task performs,
	// for the statistics (CodeletStats).
	Flops float64
	// Tag, when UseTag is set, is notified when the task completes; tasks
	// and tags that depend on it wait for that.
	Tag    TagID
	UseTag bool

	// SchedContext is the scheduling context the task is pushed to; nil means
	// the global context.
	SchedContext *SchedContext

	// job is the task's runtime side: created by Submit, or earlier by a
	// dependency declaration.
	job *job
	// nsub counts the task's submissions (Submit and Regenerate's), for
	// the declared dependencies of the tasks that wait for it; decl is what
	// DeclareDeps declared on it, for all its runs (task_deps.go).
	nsub int32 // atomically
	decl *taskDecl
}

// Err returns the task's error once it has completed: a kernel failure, a
// crashed plugin, or nil. In the task's callback it is the error of the run
// that just completed; once a task that Regenerate resubmitted stops, the
// errors of all its failed runs, as Wait returns them.
func (t *Task) Err() error {
	h := t.job
	if h == nil {
		return nil
	}
	h.mu.Lock()
	if h.finished {
		defer h.mu.Unlock()
		return h.err
	}
	cur := h.curLocked()
	h.mu.Unlock()
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.released {
		return cur.err // in its callback: the run is over
	}
	return nil
}

// ID is the number of the task's current submission, as kernels see it in
// kernel.Context.TaskID; 0 before submission.
func (t *Task) ID() uint64 {
	if j := t.current(); j != nil {
		return j.id
	}
	return 0
}

// TaskName is the task's name: Name, or else its codelet's model name, or
// else its codelet's name (StarPU's starpu_task_get_name).
func (t *Task) TaskName() string {
	switch {
	case t.Name != "":
		return t.Name
	case t.Codelet == nil:
		return ""
	case t.Codelet.ModelName != "":
		return t.Codelet.ModelName
	}
	return t.Codelet.Name
}

// ModelName is the name of the task's performance model, or "".
func (t *Task) ModelName() string {
	if t.Codelet == nil {
		return ""
	}
	return t.Codelet.ModelName
}

// Dup returns a copy of t that can be submitted on its own: the same
// fields, with slices copied, and none of t's runtime state or dependency
// declarations.
func (t *Task) Dup() *Task {
	d := *t
	d.job, d.nsub, d.decl = nil, 0, nil
	d.Handles = clone(t.Handles)
	d.Modes = clone(t.Modes)
	d.Nodes = clone(t.Nodes)
	d.Arg = clone(t.Arg)
	d.HandlesNoSequentialConsistency = clone(t.HandlesNoSequentialConsistency)
	return &d
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}

// job is the runtime's side of a task submission, or of an application's
// acquire.
type job struct {
	id    uint64
	task  *Task
	cl    *codeletInfo
	modes []Mode
	// ndeps counts unmet dependencies plus one while submit is in progress.
	ndeps atomic.Int32

	// archMask is where the task may run; impl is the implementation
	// chosen at dispatch, or -1.
	archMask uint32
	pinned   int32 // the worker the task must run on, or -1
	impl     int8
	// pushImpl is the implementation whose kernel push put in the Exec
	// that travelled with the task's Push (-1: none did); the engine
	// takes it when the policy posts the task without choosing.
	pushImpl int8
	nowhere  bool // completes once ready, running nowhere
	counted  bool // pushed to the scheduler and counted in NReady
	// mayHaveRun: the task failed on a worker (its kernel's error, or its
	// driver died holding it), so it may have written part of its data.
	// Set by the engine goroutine before it completes the job.
	mayHaveRun bool
	// retried: the task ran once on a driver that died, and was pushed
	// again (plugin_restart.go).
	retried bool
	// traced: submitted while the trace recorded (PauseTrace): its later
	// records follow, whatever the trace does meanwhile.
	traced bool
	// arb: the job takes data locks when ready, or is a reduction job;
	// sub: its worker gets SCRATCH or REDUX buffers (data_access.go).
	arb, sub bool
	// ctx is the context the task was submitted to (nil: global), sctx
	// the one whose policy holds it once pushed.
	ctx, sctx *SchedContext

	mu       sync.Mutex
	released bool // terminated: successors released
	executed bool
	finished bool
	succs    []*job // waiting for this one through data or tags
	// succ1 holds the first successor without an allocation: in a chain
	// every job has exactly one.
	succ1  [1]*job
	doneCh chan struct{}

	err    error
	worker int32
	posted bool // by the scheduler, to the worker's scheduler ring
	start  int64
	end    int64

	// comb is the combined worker the task runs on (task_parallel.go),
	// worker its master; nil on one worker.
	comb *combinedWorker

	// Data placement (engine goroutine only, multi-node runtimes): the
	// node the job runs on, whether it holds references on its replicates
	// there, and the transfers it waits for before being posted.
	node         int
	dataHeld     bool
	waitWorker   *workerState
	pendingXfers int
	xferErr      error

	status atomic.Uint32
	// queue is the ring the job's Exec was posted to, and queueAt where
	// it lies there with flags below (task_status.go): Status tells a
	// running task from one queued behind others by them.
	queue    atomic.Pointer[shm.Ring]
	queueAt  atomic.Uint64
	taskDeps atomic.Int32 // explicit task dependencies not yet met
	tagWait  atomic.Bool  // waiting for the dependencies of its tag
	// Predictions the performance models made when the task was pushed
	// (ns, -1 when unknown).
	predicted, predictedTransfer int64
	// The keys of its performance model entries, and the predicted
	// transfer time per node sent to the scheduler.
	footprint uint32
	dataSize  uint64
	transfer  []int64
	// ext holds what only some tasks use, so that the others do not carry
	// it; created under mu, read without it by the engine.
	ext atomic.Pointer[jobExt]

	// acquire is set for a job that stands for an application's acquire.
	acquire *acquisition
	tag     *tagState

	// Chaining (task_chain.go): the job's state as a task queued behind its
	// only unfinished predecessor, that predecessor's id, and the result
	// of a run that ended before its dependencies were released. pred1 is
	// the job's data predecessor and npred1 how many of its dependencies
	// it accounts for (-1: several predecessors); both are written while
	// the job is submitted, by the goroutine submitting it, and pred1 is
	// cleared when the job is released (terminate), under j.mu.
	chain       atomic.Uint32
	chainPred   uint64
	chainWorker int32
	chainErr    error
	// chainReadyNs is when the predecessor whose termination released a
	// chained job ended, or for another job the latest end of the
	// predecessors whose completions the engine terminated: its ready
	// time in a trace (tracer.ready, readyAt); 0 if none ran.
	chainReadyNs int64
	pred1        *job
	npred1       int32
	// freeHandles counts the job's handles whose access waited for
	// nothing: a chained job has none (task_chain.go).
	freeHandles int32
}

// jobExt is the part of a job that few tasks use.
type jobExt struct {
	tsuccs  []*job // waiting for this one through DeclareDeps
	esuccs  []*job // end dependencies waiting for this one
	endDeps int32  // end dependencies not yet released
	// implMask, when not nil, is per driver the implementations
	// CanExecute accepted (instead of cl.implMask).
	implMask []uint8
	// head is the task's first submission when Regenerate resubmitted
	// it; cur (on the head) is the current one and next the job of the
	// next submission when dependencies were declared for it early.
	head, cur, next *job
	submitNs        int64
	iter            [2]int64 // iterations at submit, innermost first
	niter           uint8
	// acc is the job's data locks and SCRATCH and REDUX buffers.
	acc *jobAccess
	// snap is the snapshot of a Retryable codelet's read-write buffers,
	// per buffer (zero spans for the others), until the task completes.
	snap []base.Span
	// doom, when set, is why the job must fail instead of running: a
	// handle it accesses was unregistered while it was submitted.
	doom error
	// doomChecked: doom counts in engine.checks until the job is released.
	doomChecked bool
	// runErrs (on the head) are the errors of the failed runs of a task
	// that Regenerate resubmitted, the first 16 of them; runErrsDropped
	// counts the others. Wait reports them once the task stops.
	runErrs        []error
	runErrsDropped int
	// endedPreds are predecessors DeclareDeps was given that had already
	// terminated before the job was submitted: no wait, but the trace
	// records their edges once the submission is (traceEndedPreds).
	endedPreds []*job
}

// reduces tells whether j folds a REDUX contribution into its first
// handle, for the unregistration that closed the REDUX group.
func (j *job) reduces() bool {
	x := j.ext.Load()
	return x != nil && x.acc != nil && x.acc.reduce != nil
}

// x returns j's extension, creating it; call with j.mu held.
func (j *job) x() *jobExt {
	x := j.ext.Load()
	if x == nil {
		x = &jobExt{}
		j.ext.Store(x)
	}
	return x
}

// endDeps is the number of j's end dependencies not yet released; j.mu held.
func (j *job) endDeps() int32 {
	if x := j.ext.Load(); x != nil {
		return x.endDeps
	}
	return 0
}

func (rt *Runtime) newJob() *job {
	j := &job{id: rt.nextJob.Add(1), worker: -1, pinned: -1, impl: -1, pushImpl: -1, predicted: -1, predictedTransfer: -1}
	j.ndeps.Store(1)
	return j
}

// runOver tells whether the task's current run has terminated, while its
// callback runs and before it finishes: the callback may submit the task
// again (StarPU allows it), as a new submission. h.mu held.
func (h *job) runOver() bool {
	cur := h.curLocked()
	if cur == h {
		return h.released
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return cur.released
}

// headJob is the job Wait and Err use for j's task.
func (j *job) headJob() *job {
	if x := j.ext.Load(); x != nil && x.head != nil {
		return x.head
	}
	return j
}

// current is t's job of the submission in progress or last made, or nil.
func (t *Task) current() *job {
	h := t.job
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.curLocked()
}

// curLocked is the job of the task's submission in progress or last made,
// h being its head; h.mu held.
func (h *job) curLocked() *job {
	if x := h.ext.Load(); x != nil && x.cur != nil {
		return x.cur
	}
	return h
}

// addDep makes succ wait for pred, unless pred is already released or is
// succ itself (a task touching one handle twice), and reports whether it
// did.
func addDep(pred, succ *job) bool {
	if pred == nil || pred == succ {
		return false
	}
	pred.mu.Lock()
	added := !pred.released
	if added {
		if pred.succs == nil {
			pred.succs = pred.succ1[:0]
		}
		pred.succs = append(pred.succs, succ)
		succ.ndeps.Add(1)
		// What chaining needs (task_chain.go): whether every dependency
		// is on one job. Written before the job's status says it waits.
		switch {
		case succ.npred1 < 0:
		case succ.pred1 == nil:
			succ.pred1, succ.npred1 = pred, 1
		case succ.pred1 == pred:
			succ.npred1++
		default:
			succ.npred1 = -1
		}
	}
	pred.mu.Unlock()
	return added
}

// dependOn is addDep for a dependency the runtime infers (data, REDUX): a
// predecessor that already terminated adds no wait, but a trace still
// records the edge, as StarPU's records every dependency it declares, so
// that a task.rec's DependsOn and the critical path do not depend on how
// fast the predecessor ran.
func (rt *Runtime) dependOn(pred, succ *job) {
	if !addDep(pred, succ) && pred != nil && pred != succ && rt.trace != nil {
		rt.trace.edge(pred, succ, false)
	}
}

// Submit hands a task to the runtime. Errors in the task (wrong number of
// handles, an unregistered handle, a codelet no worker can run) are returned
// here; errors while running are returned by Wait.
func (rt *Runtime) Submit(t *Task) error {
	if err := rt.usable(); err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%w: Submit(nil)", ErrInvalidTask)
	}
	rt.throttleSubmit()
	if t.Synchronous {
		if err := rt.mayBlock("synchronous Submit"); err != nil {
			return err
		}
	}
	j, err := rt.jobForSubmit(t)
	if err != nil {
		return err
	}
	if err := rt.checkTask(t, j); err != nil {
		return err
	}
	if t.SchedContext != nil {
		if err := rt.checkContextTask(t, j); err != nil {
			return err
		}
	}
	if rt.clock.profiling.Load() {
		j.mu.Lock()
		j.x().submitNs = wire.Now()
		j.mu.Unlock()
	}
	if rt.trace != nil {
		rt.trace.submit(rt, j)
		rt.traceEndedPreds(j)
	}
	t.job = j
	rt.bindDeclared(t, j, atomic.AddInt32(&t.nsub, 1))
	rt.waits.pending.Add(1)
	if c := t.SchedContext; c != nil {
		j.ctx = c
		c.pending.Add(1)
	}
	rt.enqueue(t, j)
	if t.Synchronous {
		return rt.wait(j)
	}
	return nil
}

// jobForSubmit returns the job for t's next submission: the one dependency
// declarations made early, or a new one.
func (rt *Runtime) jobForSubmit(t *Task) (*job, error) {
	h := t.job
	if h == nil {
		j := rt.newJob()
		j.task = t
		return j, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isSubmitted() {
		return h, nil
	}
	if !h.finished && !h.runOver() {
		return nil, fmt.Errorf("%w: task %q is already submitted", ErrInvalidTask, t.TaskName())
	}
	if x := h.ext.Load(); x != nil && x.next != nil {
		return x.next, nil
	}
	j := rt.newJob()
	j.task = t
	return j, nil
}

// enqueue registers a checked job's dependencies and makes it ready when it
// has none left.
func (rt *Runtime) enqueue(t *Task, j *job) {
	j.status.Store(uint32(StatusBlocked))
	if rt.iters.depth.Load() > 0 {
		rt.noteIteration(j)
	}
	if !t.NoSequentialConsistency && t.HandlesNoSequentialConsistency == nil {
		for i, h := range t.Handles {
			h.depend(j, j.modes[i])
		}
	} else {
		for i, h := range t.Handles {
			if t.NoSequentialConsistency || t.HandlesNoSequentialConsistency[i] {
				j.freeHandles++
				h.dependFree(j, j.modes[i])
			} else {
				h.depend(j, j.modes[i])
			}
		}
	}
	if j.tag != nil {
		j.tag.bind(j)
	}
	j.status.Store(uint32(statusWaiting))
	if j.ndeps.Add(-1) == 0 {
		rt.ready(j, readyAtSubmit)
	} else if rt.chains {
		rt.chainSubmitted(j)
	}
}

func (rt *Runtime) checkTask(t *Task, j *job) error {
	name := t.TaskName()
	if t.Priority < MinPriority || t.Priority > MaxPriority {
		return fmt.Errorf("%w: task %q: priority %d is outside [MinPriority, MaxPriority]", ErrInvalidTask, name, t.Priority)
	}
	if t.Where&Nowhere != 0 && t.Where != Nowhere {
		return fmt.Errorf("%w: task %q: Where combines Nowhere with architectures (%#x)", ErrInvalidTask, name, t.Where)
	}
	if t.WorkerOrder != 0 && !t.ExecuteOnWorker {
		return fmt.Errorf("%w: task %q: WorkerOrder needs ExecuteOnWorker", ErrInvalidTask, name)
	}
	if t.ExecuteOnWorker && (t.Worker < 0 || t.Worker >= len(rt.workers)) {
		if c := t.Worker - len(rt.workers); c >= 0 && c < len(rt.teams.list) {
			// StarPU runs a parallel task on a combined worker named so;
			// here the policy picks the team (docs/user-guide.md,
			// Differences from StarPU).
			var ids []int
			for _, m := range rt.teams.list[c].members {
				ids = append(ids, m.id)
			}
			return fmt.Errorf("%w: task %q: %d is a combined worker (workers %v), which ExecuteOnWorker does not take: a parallel task runs on a combined worker its policy picks; ExecuteOnWorker takes workers 0 to %d", ErrNoWorker, name, t.Worker, ids, len(rt.workers)-1)
		}
		return fmt.Errorf("%w: task %q: worker %d does not exist (workers 0 to %d)", ErrNoWorker, name, t.Worker, len(rt.workers)-1)
	}
	if t.HandlesNoSequentialConsistency != nil && len(t.HandlesNoSequentialConsistency) != len(t.Handles) {
		return fmt.Errorf("%w: task %q: HandlesNoSequentialConsistency has %d flags for %d handles", ErrInvalidTask, name, len(t.HandlesNoSequentialConsistency), len(t.Handles))
	}
	if t.Codelet == nil {
		if len(t.Handles) > 0 {
			return fmt.Errorf("%w: task %q has handles but no codelet", ErrInvalidTask, name)
		}
		j.nowhere = true
		return rt.checkTag(t, j)
	}
	info, err := rt.resolve(t.Codelet)
	if err != nil {
		return err
	}
	j.cl = info
	cl := t.Codelet
	var special Mode // the modes' bits together
	if n := cl.nbuffers(); n == VariableBuffers {
		if len(t.Modes) != len(t.Handles) {
			return fmt.Errorf("%w: task %q: codelet %q has variable buffers: %d handles but %d modes", ErrInvalidTask, name, cl.Name, len(t.Handles), len(t.Modes))
		}
		for i, m := range t.Modes {
			if !validMode(m) {
				return fmt.Errorf("%w: task %q: buffer %d has invalid mode %v", ErrInvalidTask, name, i, m)
			}
			special |= m
		}
		j.modes = t.Modes
		if t.Nodes != nil {
			if len(t.Nodes) != len(t.Handles) {
				return fmt.Errorf("%w: task %q: %d nodes for %d handles", ErrInvalidTask, name, len(t.Nodes), len(t.Handles))
			}
			if err := validNodes(t.Nodes, rt.nnodes()); err != nil {
				return fmt.Errorf("%w: task %q: %w", ErrInvalidTask, name, err)
			}
		}
	} else {
		if len(t.Handles) != n {
			return fmt.Errorf("%w: task %q: codelet %q takes %d buffers, task gives %d handles", ErrInvalidTask, name, cl.Name, n, len(t.Handles))
		}
		if len(t.Modes) != 0 {
			return fmt.Errorf("%w: task %q: Modes is for codelets with VariableBuffers; codelet %q fixes its modes", ErrInvalidTask, name, cl.Name)
		}
		if t.Nodes != nil {
			return fmt.Errorf("%w: task %q: Nodes is for codelets with VariableBuffers; codelet %q gives Codelet.Nodes", ErrInvalidTask, name, cl.Name)
		}
		j.modes = cl.Modes
		special = info.modes
	}
	for i, h := range t.Handles {
		if h == nil {
			return fmt.Errorf("%w: task %q: handle %d is nil", ErrInvalidTask, name, i)
		}
		if h.rt != rt {
			return fmt.Errorf("%w: task %q: handle %d belongs to another runtime", ErrInvalidTask, name, i)
		}
		if err := h.checkAccess(j.modes[i]); err != nil && !(i == 0 && j.reduces() && errors.Is(err, ErrUnregistered)) {
			return fmt.Errorf("task %q: handle %d: %w", name, i, err)
		}
	}
	if info.nowhere || t.Where == Nowhere {
		j.nowhere = true
		if special&(Scratch|Redux) != 0 {
			return fmt.Errorf("%w: task %q runs nowhere: SCRATCH and REDUX buffers are for tasks that run", ErrInvalidTask, name)
		}
		return rt.checkTag(t, j)
	}
	if max := rt.maxExec; wire.ExecSize(len(t.Handles), len(t.Arg))+rt.maxTeamLen(j) > max {
		return fmt.Errorf("%w: task %q: argument of %d bytes with %d buffers exceeds the %d-byte dispatch message", ErrInvalidTask, name, len(t.Arg), len(t.Handles), max)
	}
	if err := rt.placeTask(t, j, name); err != nil {
		return err
	}
	if special&(Scratch|Redux) != 0 {
		if err := rt.checkScratchRedux(t, j, name); err != nil {
			return err
		}
	}
	if err := rt.checkDeviceData(t, j, name); err != nil {
		return err
	}
	return rt.checkTag(t, j)
}

// placeTask works out where j may run: the codelet's architectures narrowed
// by Task.Where, CanExecute and ExecuteOnWorker.
func (rt *Runtime) placeTask(t *Task, j *job, name string) error {
	info, cl := j.cl, t.Codelet
	j.archMask = info.archMask
	if t.Where != 0 {
		j.archMask &= t.Where
	}
	if j.archMask == 0 {
		return fmt.Errorf("%w: task %q: Where %s leaves no architecture for codelet %q, which runs on %s", ErrNoWorker, name, describeWhere(t.Where), cl.Name, describeWhere(info.archMask))
	}
	if cl.CanExecute != nil {
		implMask := make([]uint8, len(info.implMask))
		j.archMask = 0
		for d, drv := range rt.drivers {
			bit := driver.ArchBit(drv.fp.Arch)
			if t.Where != 0 && t.Where&bit == 0 {
				continue
			}
			for m := info.implMask[d]; m != 0; m &= m - 1 {
				i := bits.TrailingZeros8(m)
				if cl.CanExecute(drv.fp.Arch, t, i) {
					implMask[d] |= 1 << i
					j.archMask |= bit
				}
			}
		}
		j.mu.Lock()
		j.x().implMask = implMask
		j.mu.Unlock()
		if j.archMask == 0 {
			return fmt.Errorf("%w: task %q: CanExecute of codelet %q accepts no implementation on %s", ErrNoWorker, name, cl.Name, describeWhere(info.archMask))
		}
	}
	if t.ExecuteOnWorker {
		w := rt.workers[t.Worker]
		mask := j.implMaskOf(w.driverIdx)
		if mask == 0 || j.archMask&driver.ArchBit(w.drv.fp.Arch) == 0 {
			return fmt.Errorf("%w: task %q must run on worker %d (%s), which cannot run codelet %q", ErrNoWorker, name, t.Worker, w.drv.fp.Arch, cl.Name)
		}
		j.pinned = int32(t.Worker)
		if t.WorkerOrder != 0 {
			if err := rt.checkOrder(t, name); err != nil {
				return err
			}
		}
	}
	return rt.placeByNodes(t, j, name)
}

// readyAtSubmit is ready's releasedBy for a job ready at its submission
// (enqueue): as -1, but a trace then leaves its ready record out, the
// submit record's time being its ready time (task_trace.go).
const readyAtSubmit int32 = -2

// ready is called once a job's dependencies are all met; releasedBy is the
// worker whose task completion made it ready, or -1 (readyAtSubmit).
func (rt *Runtime) ready(j *job, releasedBy int32) {
	by := max(releasedBy, -1)
	if rt.chains && rt.chainReady(j, by >= 0) {
		return // queued behind its predecessor already
	}
	switch {
	case j.acquire != nil:
		if j.arb && !rt.lockData(j) {
			return // granted with the data locks
		}
		j.acquire.grant()
	case j.nowhere:
		if f := j.task.PrologueCallback; f != nil {
			rt.taskCallback(f, j.task, by)
		}
		if j.arb && !rt.lockData(j) {
			return // completed with the data locks
		}
		rt.complete(j, -1, nil)
	default:
		if j.arb && rt.skipReduction(j) {
			return
		}
		if f := j.task.PrologueCallback; f != nil {
			rt.taskCallback(f, j.task, by)
		}
		j.status.Store(uint32(StatusReady))
		if j.task.WorkerOrder != 0 && !rt.orderTurn(j) {
			return // pushed when the previous task in the worker's order completes
		}
		rt.pushReady(j, releasedBy)
	}
}

// pushReady hands a ready job to the scheduler once it holds its data
// locks.
func (rt *Runtime) pushReady(j *job, releasedBy int32) {
	if j.arb && !rt.lockData(j) {
		return // pushed with the data locks
	}
	rt.pushLocked(j, releasedBy)
}

func (rt *Runtime) pushLocked(j *job, releasedBy int32) {
	if rt.trace != nil {
		rt.trace.ready(j, releasedBy)
	}
	j.counted = true
	rt.waits.nready.Add(1)
	rt.push(j, max(releasedBy, -1))
}

// Wait blocks until t has completed and returns its error. A detached task
// cannot be waited for. Called from a callback, where it would wait for
// the completion path the callback holds up, it returns ErrDeadlock, as
// every blocking call does there.
func (rt *Runtime) Wait(t *Task) error {
	if t == nil {
		return fmt.Errorf("%w: Wait(nil)", ErrInvalidTask)
	}
	if err := rt.mayBlock("Wait"); err != nil {
		return err
	}
	h := t.job
	if h == nil || !h.isSubmitted() {
		return fmt.Errorf("%w: task %q was not submitted", ErrInvalidTask, t.TaskName())
	}
	if t.Detach {
		return fmt.Errorf("%w: task %q is detached: it cannot be waited for", ErrInvalidTask, t.TaskName())
	}
	return rt.wait(h)
}

// WaitArray waits for every task of ts and returns their errors joined.
func (rt *Runtime) WaitArray(ts ...*Task) error {
	if err := rt.mayBlock("WaitArray"); err != nil {
		return err
	}
	for i, t := range ts {
		if t == nil {
			return fmt.Errorf("%w: WaitArray: task %d is nil", ErrInvalidTask, i)
		}
		if t.job == nil || !t.job.isSubmitted() {
			return fmt.Errorf("%w: task %q was not submitted", ErrInvalidTask, t.TaskName())
		}
		if t.Detach {
			return fmt.Errorf("%w: task %q is detached: it cannot be waited for", ErrInvalidTask, t.TaskName())
		}
	}
	var errs []error
	for _, t := range ts {
		if err := rt.wait(t.job); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (rt *Runtime) wait(h *job) error {
	h.mu.Lock()
	if !h.finished {
		if h.doneCh == nil {
			h.doneCh = make(chan struct{})
		}
		ch := h.doneCh
		h.mu.Unlock()
		rt.await(ch)
		h.mu.Lock()
	}
	err := h.err
	h.mu.Unlock()
	return err
}

// await blocks the application until ch is closed by the engine. Meanwhile
// the core bell is urgent: workers report each completion at once instead
// of in batches, as the one awaited may be among them.
func (rt *Runtime) await(ch <-chan struct{}) {
	select {
	case <-ch:
		return
	default:
	}
	rt.engine.coreBell.AddUrgent(1)
	<-ch
	rt.engine.coreBell.AddUrgent(-1)
}

// isSubmitted tells whether Submit took the job (it may exist earlier, for
// dependencies): its status is no longer StatusInvalid.
func (j *job) isSubmitted() bool {
	return j.status.Load() != uint32(StatusInvalid)
}

// WaitForAll blocks until every submitted task has completed and returns the
// errors of the tasks that failed since the previous WaitForAll; from a
// callback, ErrDeadlock.
func (rt *Runtime) WaitForAll() error {
	if err := rt.mayBlock("WaitForAll"); err != nil {
		return err
	}
	rt.waits.mu.Lock()
	for rt.waits.pending.Load() > 0 {
		rt.waits.idle.Wait()
	}
	errs := rt.waits.failed
	dropped := rt.waits.failedDropped
	lostMore := rt.waits.lostMore
	rt.waits.failed, rt.waits.failedDropped, rt.waits.lostMore = nil, 0, nil
	rt.waits.mu.Unlock()
	errs = foldLost(errs, lostMore)
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("and %d more failed tasks", dropped))
	}
	return errors.Join(errs...)
}

// WaitForNSubmitted blocks until at most n submitted tasks have not
// completed, to bound the tasks in flight while submitting.
func (rt *Runtime) WaitForNSubmitted(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: wait for %d submitted tasks", ErrInvalidTask, n)
	}
	if err := rt.mayBlock("WaitForNSubmitted"); err != nil {
		return err
	}
	rt.waits.mu.Lock()
	rt.waits.idleWaiters.Add(1)
	for rt.waits.pending.Load() > int64(n) {
		rt.waits.idle.Wait()
	}
	rt.waits.idleWaiters.Add(-1)
	rt.waits.mu.Unlock()
	return nil
}

// WaitForNoReady blocks until no task is ready or running: those left wait
// for dependencies. From a callback it returns ErrDeadlock.
func (rt *Runtime) WaitForNoReady() error {
	if err := rt.mayBlock("WaitForNoReady"); err != nil {
		return err
	}
	rt.waits.mu.Lock()
	rt.waits.idleWaiters.Add(1)
	for rt.waits.nready.Load() > 0 {
		rt.waits.idle.Wait()
	}
	rt.waits.idleWaiters.Add(-1)
	rt.waits.mu.Unlock()
	return nil
}

// NSubmitted is the number of submitted tasks that have not completed.
func (rt *Runtime) NSubmitted() int { return int(rt.waits.pending.Load()) }

// NReady is the number of tasks ready to run or running: submitted tasks
// that no longer wait for a dependency.
func (rt *Runtime) NReady() int { return int(rt.waits.nready.Load()) }

// TaskByID returns the task whose submission number is id while it is
// ready or running, or nil: a kernel running in the application's process
// (an in-process driver) maps its kernel.Context.TaskID back to its task.
// Kernels in a driver plugin process have the number only.
func (rt *Runtime) TaskByID(id uint64) *Task {
	if j := rt.engine.lookup(id); j != nil {
		return j.task
	}
	return nil
}

// waitState is what the waits (WaitForAll, WaitForNSubmitted,
// WaitForNoReady, Shutdown) watch. pending counts submitted tasks not yet
// finished and nready those pushed to a scheduler and not completed; both
// are atomics on the hot path. mu guards failed (the errors WaitForAll
// reports next, at most 16 kept, failedDropped counting the rest; lostMore
// counts, per failed task, the tasks that did not run because it lost
// their inputs beyond the first, which failed keeps: foldLost) and is
// idle's lock: idle is broadcast when pending reaches zero, or on any
// completion while idleWaiters (goroutines waiting on idle for something
// else than pending reaching zero) is non-zero.
type waitState struct {
	pending       atomic.Int64
	nready        atomic.Int64
	idleWaiters   atomic.Int32
	mu            sync.Mutex
	idle          *sync.Cond
	failed        []error
	failedDropped int
	lostMore      map[string]int
}

// failQueue holds the jobs that failed where they were pushed, for the
// goroutine already draining it to complete. Completing a job releases its
// successors, which are pushed and, while the runtime cannot run them,
// fail in turn: done inline, that is one nested call per task of a chain,
// and a chain of a million tasks overflows the stack. Through the queue,
// the first failLater on the stack completes them all in a loop.
type failQueue struct {
	mu       sync.Mutex
	jobs     []failedJob
	spare    []failedJob
	draining bool
}

type failedJob struct {
	j   *job
	err error
}

// failLater completes j with err, now or, when a failLater is already
// completing jobs (further up this goroutine's stack or on another), by
// that one before it returns.
func (rt *Runtime) failLater(j *job, err error) {
	q := &rt.fails
	q.mu.Lock()
	q.jobs = append(q.jobs, failedJob{j, err})
	if q.draining {
		q.mu.Unlock()
		return
	}
	q.draining = true
	for len(q.jobs) > 0 {
		batch := q.jobs
		q.jobs = q.spare[:0]
		q.mu.Unlock()
		for _, f := range batch {
			rt.complete(f.j, -1, f.err)
		}
		clear(batch)
		q.mu.Lock()
		q.spare = batch
	}
	q.draining = false
	q.mu.Unlock()
}

// termination is one call towards ending a job: its execution is over, or
// one of its end dependencies is released.
type termination struct {
	j      *job
	endDep bool
}

// complete ends a job's execution: it records where it ran and its error,
// and terminates it unless end dependencies hold it. worker is where it ran,
// or -1.
func (rt *Runtime) complete(j *job, worker int32, err error) {
	if j.chain.Load()&chainOn != 0 && rt.chainDefer(j, worker, err) {
		return // completed once its dependencies are released
	}
	rt.executed(j, worker, err)
	rt.terminate(termination{j: j}, worker)
}

// executed does the bookkeeping of a job whose execution is over.
func (rt *Runtime) executed(j *job, worker int32, err error) {
	if err != nil {
		j.err = err
	}
	if x := j.ext.Load(); x != nil && x.snap != nil {
		j.dropSnapshot(rt)
	}
	// Before anything lets another access in (data locks here, successors
	// in terminate): an acquisition must find the application's copy stale.
	if j.task != nil && j.cl != nil && !j.nowhere {
		if j.err == nil {
			rt.noteWrites(j)
			if rt.nlost.Load() > 0 {
				rt.noteRewrites(j)
			}
		} else if j.mayHaveRun || isLost(j.err) {
			rt.noteLost(j)
		}
	}
	if j.arb || j.sub {
		rt.accessDone(j, worker)
	}
	if j.counted {
		if rt.waits.nready.Add(-1) == 0 && rt.waits.idleWaiters.Load() > 0 {
			rt.wakeIdle()
		}
	}
	if j.task == nil {
		return
	}
	if worker >= 0 && j.cl != nil {
		j.cl.note(int(worker), j.end-j.start, j.task.Flops, j.posted, j.chain.Load()&chainAccepted != 0)
	}
	if j.task.WorkerOrder != 0 && j.pinned >= 0 {
		rt.orderDone(j)
	}
}

// terminate makes termination calls until none is left: when a job has
// both executed and seen its end dependencies released, it releases its
// successors, runs the callback and wakes the waiters. A stack instead of
// recursion: chains of synchronisation tasks release one another.
func (rt *Runtime) terminate(first termination, worker int32) {
	var buf [8]termination
	stack := append(buf[:0], first)
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		j := c.j
		j.mu.Lock()
		if c.endDep {
			j.ext.Load().endDeps--
		} else {
			j.executed = true
		}
		if !j.executed || j.endDeps() > 0 {
			if j.executed {
				j.status.Store(uint32(StatusStopped))
			}
			j.mu.Unlock()
			continue
		}
		j.released = true
		// No finished job keeps its predecessor alive: a handle's last
		// access would hold the whole chain behind it (task_chain.go
		// reads pred1 only while the job waits, under its lock or its
		// unreleased predecessor's).
		j.pred1 = nil
		if j.task != nil {
			j.status.Store(uint32(StatusFinished))
		}
		succs := j.succs
		j.succs = nil
		var tsuccs, esuccs []*job
		if x := j.ext.Load(); x != nil {
			tsuccs, esuccs = x.tsuccs, x.esuccs
			x.tsuccs, x.esuccs = nil, nil
			if x.doomChecked {
				x.doomChecked = false
				rt.engine.checks.Add(-1)
			}
		}
		j.mu.Unlock()
		if j.tag != nil {
			succs = append(succs, j.tag.notify(j)...)
		}
		for _, s := range tsuccs {
			s.taskDeps.Add(-1)
		}
		for _, list := range [2][]*job{succs, tsuccs} {
			for _, s := range list {
				if rt.trace != nil {
					rt.trace.edge(j, s, worker >= 0)
					switch {
					case s.chain.Load()&chainOn != 0:
						s.chainReadyNs = j.end
					case worker >= 0 && j.end > s.chainReadyNs:
						// The engine's goroutine, as every release
						// reading it (tracer.ready).
						s.chainReadyNs = j.end
					}
				}
				if s.ndeps.Add(-1) != 0 {
					continue
				}
				if s.nowhere && !s.arb {
					if f := s.task.PrologueCallback; f != nil {
						rt.taskCallback(f, s.task, worker)
					}
					rt.executed(s, -1, nil)
					stack = append(stack, termination{j: s})
					continue
				}
				rt.ready(s, worker)
			}
		}
		j.succ1[0] = nil // released: keep no chain of finished jobs alive
		for _, s := range esuccs {
			stack = append(stack, termination{j: s, endDep: true})
		}
		if j.acquire != nil {
			continue
		}
		t := j.task
		if t.Callback != nil {
			rt.taskCallback(t.Callback, t, worker)
		}
		// A callback that submitted the task again made a new head:
		// that submission replaces Regenerate's.
		if t.Regenerate && t.job == j.headJob() && rt.regenerate(j) {
			rt.noteRunFailure(j)
			continue
		}
		rt.finish(j)
	}
}

// noteRunFailure records the failure of run j of a task that Regenerate
// submits again: WaitForAll reports it at once, Wait when the task stops.
func (rt *Runtime) noteRunFailure(j *job) {
	if j.err == nil {
		return
	}
	rt.recordFailure(j.err)
	h := j.headJob()
	h.mu.Lock()
	x := h.x()
	if len(x.runErrs) < 16 {
		x.runErrs = append(x.runErrs, j.err)
	} else {
		x.runErrsDropped++
	}
	h.mu.Unlock()
}

// finish marks j's task finished and wakes whoever waits for it.
func (rt *Runtime) finish(j *job) {
	h := j.headJob()
	h.mu.Lock()
	if x := h.ext.Load(); x != nil && len(x.runErrs) > 0 {
		// A regenerated task: every failed run, the last one included.
		errs := slices.Clone(x.runErrs)
		if j.err != nil {
			errs = append(errs, j.err)
		}
		if x.runErrsDropped > 0 {
			errs = append(errs, fmt.Errorf("and %d more failed runs", x.runErrsDropped))
		}
		h.err = errors.Join(errs...)
	} else if h != j {
		h.err = j.err
	}
	h.finished = true
	ch := h.doneCh
	h.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	if j.err != nil {
		rt.recordFailure(j.err)
	}
	if c := j.ctx; c != nil {
		c.taskFinished()
	}
	if rt.waits.pending.Add(-1) == 0 || rt.waits.idleWaiters.Load() > 0 {
		rt.wakeIdle()
	}
}

func (rt *Runtime) wakeIdle() {
	rt.waits.mu.Lock()
	rt.waits.idle.Broadcast()
	rt.waits.mu.Unlock()
}

// regenerate submits j's task again, as a new job, after a completion
// that left Regenerate set. False when it cannot: the task then finishes
// with the reason as its error.
func (rt *Runtime) regenerate(old *job) bool {
	t := old.task
	if err := rt.usable(); err != nil {
		if old.err == nil {
			old.err = fmt.Errorf("regenerate task %q: %w", t.TaskName(), err)
		}
		return false
	}
	h := old.headJob()
	h.mu.Lock()
	var j *job
	if x := h.ext.Load(); x != nil {
		j, x.next = x.next, nil
	}
	h.mu.Unlock()
	if j == nil {
		j = rt.newJob()
		j.task = t
	}
	j.mu.Lock()
	j.x().head = h
	j.mu.Unlock()
	err := rt.checkTask(t, j)
	if err == nil && t.SchedContext != nil {
		err = rt.checkContextTask(t, j)
	}
	if err != nil {
		if old.err == nil {
			old.err = fmt.Errorf("regenerate task %q: %w", t.TaskName(), err)
		}
		return false
	}
	if rt.clock.profiling.Load() {
		j.mu.Lock()
		j.x().submitNs = wire.Now()
		j.mu.Unlock()
	}
	if rt.trace != nil {
		rt.trace.submit(rt, j)
	}
	h.mu.Lock()
	h.x().cur = j
	h.mu.Unlock()
	rt.bindDeclared(t, j, atomic.AddInt32(&t.nsub, 1))
	// The new submission counts in the context it goes to, in place of the
	// old one (a callback may have changed Task.SchedContext).
	if j.ctx = t.SchedContext; j.ctx != old.ctx {
		if j.ctx != nil {
			j.ctx.pending.Add(1)
		}
		if old.ctx != nil {
			old.ctx.taskFinished()
		}
	}
	rt.enqueue(t, j)
	return true
}

func (rt *Runtime) recordFailure(err error) {
	rt.waits.mu.Lock()
	if by := lostBy(err); by != "" && slices.ContainsFunc(rt.waits.failed, func(e error) bool { return lostBy(e) == by }) {
		if rt.waits.lostMore == nil {
			rt.waits.lostMore = map[string]int{}
		}
		rt.waits.lostMore[by]++
	} else if len(rt.waits.failed) < 16 {
		rt.waits.failed = append(rt.waits.failed, err)
	} else {
		rt.waits.failedDropped++
	}
	rt.waits.mu.Unlock()
}

// noteWrites marks the application's copies of written handles stale.
func (rt *Runtime) noteWrites(j *job) {
	for i, h := range j.task.Handles {
		if j.modes[i]&W != 0 && h.home != nil {
			h.mu.Lock()
			h.homeValid = false
			h.mu.Unlock()
		}
	}
}
