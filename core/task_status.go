package core

// Status, profiling, iterations; design note: docs/design/tasks.md.

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// TaskStatus is where a task stands, as StarPU's starpu_task_status.
type TaskStatus uint32

// Task statuses.
const (
	// StatusInvalid: not submitted.
	StatusInvalid TaskStatus = iota
	// StatusBlocked: being submitted; its dependencies are not all known.
	StatusBlocked
	// StatusReady: its dependencies are met; it waits for a worker, or
	// in a worker's queue.
	StatusReady
	// StatusRunning: started by its worker (a task queued on a worker
	// behind others is StatusReady).
	StatusRunning
	// StatusFinished: terminated.
	StatusFinished
	// StatusBlockedOnTag: waiting for the dependencies of its tag.
	StatusBlockedOnTag
	// StatusBlockedOnTask: waiting for tasks declared with DeclareDeps.
	StatusBlockedOnTask
	// StatusBlockedOnData: waiting for earlier accesses to its data.
	StatusBlockedOnData
	// StatusStopped: it has run, and waits for its end dependencies to
	// terminate.
	StatusStopped

	// statusWaiting is stored for a submitted task with dependencies
	// left; Status refines it into one of the BlockedOn statuses.
	statusWaiting
)

var statusNames = [...]string{"invalid", "blocked", "ready", "running", "finished", "blocked on tag", "blocked on task", "blocked on data", "stopped"}

func (s TaskStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("TaskStatus(%d)", uint32(s))
}

// Status returns where t's current submission stands.
func (t *Task) Status() TaskStatus {
	h := t.job
	if h == nil || !h.isSubmitted() {
		return StatusInvalid
	}
	j := t.current()
	s := TaskStatus(j.status.Load())
	if s == StatusRunning && j.waitsInRing() {
		return StatusReady
	}
	if s != statusWaiting {
		return s
	}
	switch {
	case j.tagWait.Load():
		return StatusBlockedOnTag
	case j.taskDeps.Load() > 0:
		return StatusBlockedOnTask
	}
	return StatusBlockedOnData
}

// A task is running from when its worker starts it, not from when the
// core or the policy posts it to the worker's ring, where it may wait
// behind others (StarPU: "running on some worker"). Ring positions are
// multiples of 8, so queueAt keeps two flags in its low bits.
const (
	queueKnown = 1 // queueAt holds the Exec's position (shm.Ring.ReservedAt)
	// queueAtHead: the worker runs the Exec at the head of its ring, and
	// releases it once it ended (a CPU worker); without it the worker
	// releases an Exec as it starts it (a device worker, which queues it
	// on the device, up to its pipeline's depth).
	queueAtHead = 2
)

// queued records that j's Exec lies at position at of ring r, which worker
// w reads, and marks j running: Status asks the ring whether it is. Engine
// goroutine.
func (j *job) queued(w *workerState, r *shm.Ring, at uint64) {
	flags := uint64(queueKnown)
	if w.drv.fp.Arch == driver.CPU {
		flags |= queueAtHead
	}
	j.queue.Store(r)
	j.queueAt.Store(at&^7 | flags)
	j.status.Store(uint32(StatusRunning))
}

// waitsInRing reports whether j, marked running, still waits in its
// worker's ring: a CPU worker has not peeked it, or a device worker has
// not taken it. Any goroutine.
func (j *job) waitsInRing() bool {
	at := j.queueAt.Load()
	r := j.queue.Load()
	if at&queueKnown == 0 || r == nil || j.queueAt.Load() != at {
		return false // not known, or posted anew meanwhile
	}
	pos := at &^ 7
	if at&queueAtHead != 0 {
		return r.Peeked() <= pos
	}
	return r.Consumed() <= pos
}

// ProfilingInfo is what the runtime measured about one execution of a task
// (StarPU's starpu_profiling_task_info).
type ProfilingInfo struct {
	// Submitted is when Submit took the task, zero unless profiling is on
	// (Options.Profiling, SetProfiling). Started and Ended are when its
	// kernel started and ended on the worker, zero for tasks that ran
	// nowhere.
	Submitted, Started, Ended time.Time
	// Worker ran the task, -1 when none did; Implementation is the index
	// of the implementation it ran (Codelet.Impls), -1 when none.
	Worker         int
	Implementation int
	// CombinedWorker is the combined worker a parallel task ran on
	// (Runtime.CombinedWorkers; Worker is its master), -1 when it ran on
	// one worker; CombinedSize is the number of workers that ran it, 1
	// then.
	CombinedWorker, CombinedSize int
	// Predicted is the performance model's prediction of its execution on
	// the worker that ran it (that worker's architecture, the
	// implementation it ran), read when it was dispatched there, -1
	// without a calibrated model. PredictedTransfer is the bus model's
	// time to bring its input to that worker's memory node from where it
	// was valid when the task was pushed to the scheduler (what the
	// scheduler weighed): 0 on a machine with RAM only or when nothing had
	// to move, -1 on a machine with devices but no bus model.
	Predicted, PredictedTransfer time.Duration
}

// SetProfiling turns the recording of submission times on or off (StarPU's
// starpu_profiling_status_set); execution times are always recorded.
func (rt *Runtime) SetProfiling(on bool) { rt.clock.profiling.Store(on) }

// Profiling returns t's profiling information once its current submission
// has run.
func (rt *Runtime) Profiling(t *Task) (ProfilingInfo, error) {
	j := t.current()
	if j == nil {
		return ProfilingInfo{}, fmt.Errorf("%w: task %q was not submitted", ErrInvalidTask, t.TaskName())
	}
	j.mu.Lock()
	done := j.executed
	j.mu.Unlock()
	if !done {
		return ProfilingInfo{}, fmt.Errorf("%w: task %q has not run yet", ErrInvalidTask, t.TaskName())
	}
	p := ProfilingInfo{Worker: int(j.worker), Implementation: int(j.impl), CombinedWorker: -1, CombinedSize: 1,
		Predicted: nsOrUnknown(j.predicted), PredictedTransfer: nsOrUnknown(j.predictedTransfer)}
	if c := j.comb; c != nil {
		p.CombinedWorker, p.CombinedSize = c.id, c.size()
	}
	if x := j.ext.Load(); x != nil && x.submitNs != 0 {
		p.Submitted = rt.monoTime(x.submitNs)
	}
	if j.end != 0 {
		p.Started, p.Ended = rt.monoTime(j.start), rt.monoTime(j.end)
	}
	return p, nil
}

func nsOrUnknown(ns int64) time.Duration {
	if ns < 0 {
		return -1
	}
	return time.Duration(ns)
}

// monoTime converts a wire.Now reading (CLOCK_MONOTONIC, shared by every
// process) to wall-clock time.
func (rt *Runtime) monoTime(ns int64) time.Time {
	return rt.clock.base.Add(time.Duration(ns - rt.clock.baseNs))
}

// note counts one execution on worker w.
func (ci *codeletInfo) note(w int, ns int64, flops float64, posted, chained bool) {
	if w >= len(ci.stats) {
		return
	}
	s := &ci.stats[w]
	s.n.Add(1)
	s.ns.Add(ns)
	if posted {
		s.posted.Add(1)
	}
	if chained {
		s.chained.Add(1)
	}
	if flops != 0 {
		for {
			old := s.flops.Load()
			if s.flops.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+flops)) {
				break
			}
		}
	}
}

// CodeletStats is a codelet's executions per worker, as StarPU's
// per_worker_stats and STARPU_CODELET_PROFILING summary.
type CodeletStats struct {
	Name    string
	Workers []WorkerStats
}

// WorkerStats is one worker's share of a codelet's executions.
type WorkerStats struct {
	Worker int
	Arch   driver.Arch
	Tasks  int64
	Total  time.Duration
	Flops  float64
	// Posted counts the tasks the scheduler posted straight to the
	// worker's scheduler ring, without the core's dispatch (RAM-only
	// tasks of the global context on a driver that reads such a ring).
	Posted int64
	// Chained counts, among those, the tasks queued behind their only
	// unfinished predecessor on this worker before they were ready
	// (config chain_tasks; docs/design/hot-path.md, "Chains").
	Chained int64
}

// Mean is the mean execution time.
func (w WorkerStats) Mean() time.Duration {
	if w.Tasks == 0 {
		return 0
	}
	return w.Total / time.Duration(w.Tasks)
}

// Tasks is the executions on every worker.
func (s CodeletStats) Tasks() int64 {
	var n int64
	for _, w := range s.Workers {
		n += w.Tasks
	}
	return n
}

// String prints the statistics one line per worker that ran the codelet.
func (s CodeletStats) String() string {
	var b strings.Builder
	total := s.Tasks()
	fmt.Fprintf(&b, "Statistics for codelet %s: %d tasks\n", s.Name, total)
	for _, w := range s.Workers {
		if w.Tasks == 0 {
			continue
		}
		fmt.Fprintf(&b, "\tworker %d (%s): %d tasks (%.1f%%), total %v, mean %v", w.Worker, w.Arch, w.Tasks, 100*float64(w.Tasks)/float64(total), w.Total, w.Mean())
		if w.Flops > 0 && w.Total > 0 {
			fmt.Fprintf(&b, ", %.3f GFlop/s", w.Flops/w.Total.Seconds()/1e9)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// CodeletStats returns cl's statistics since its first submission.
func (rt *Runtime) CodeletStats(cl *Codelet) (CodeletStats, error) {
	v, ok := rt.codelets.byPtr.Load(cl)
	if !ok {
		return CodeletStats{}, fmt.Errorf("%w: codelet %q was never submitted", ErrInvalidTask, cl.Name)
	}
	ci := v.(*codeletInfo)
	s := CodeletStats{Name: cl.Name}
	for w := range ci.stats {
		st := &ci.stats[w]
		s.Workers = append(s.Workers, WorkerStats{Worker: w, Arch: rt.workers[w].drv.fp.Arch, Tasks: st.n.Load(),
			Total: time.Duration(st.ns.Load()), Flops: math.Float64frombits(st.flops.Load()), Posted: st.posted.Load(), Chained: st.chained.Load()})
	}
	return s, nil
}

// CodeletStatsReport prints the statistics of every codelet submitted so
// far, in the order of their first submission.
func (rt *Runtime) CodeletStatsReport() string {
	rt.codelets.mu.Lock()
	cls := append([]*Codelet(nil), rt.codelets.order...)
	rt.codelets.mu.Unlock()
	var b strings.Builder
	for _, cl := range cls {
		if s, err := rt.CodeletStats(cl); err == nil && s.Tasks() > 0 {
			b.WriteString(s.String())
		}
	}
	return b.String()
}

// iterTable is the stack of IterationPush numbers; mu guards stack and
// depth mirrors its length, so Submit checks for "no iteration" without
// the lock.
type iterTable struct {
	mu    sync.Mutex
	stack []uint64
	depth atomic.Int32
}

// orderTable is Task.WorkerOrder's state; mu guards byWorker (worker ->
// its order, made on first use) and every workerOrder in it.
type orderTable struct {
	mu       sync.Mutex
	byWorker map[int]*workerOrder
}

// profilingClock says whether tasks are profiled and how the wire clock
// maps to wall time: base is the wall time at baseNs on wire.Now's clock,
// both set at Init and read-only after.
type profilingClock struct {
	profiling atomic.Bool
	base      time.Time
	baseNs    int64
}

// IterationPush sets the iteration number of the tasks submitted from now
// on, until the matching IterationPop; pushes nest (a loop nest). The
// innermost two levels show in traces (StarPU's starpu_iteration_push).
func (rt *Runtime) IterationPush(it uint64) {
	rt.iters.mu.Lock()
	rt.iters.stack = append(rt.iters.stack, it)
	rt.iters.depth.Store(int32(len(rt.iters.stack)))
	rt.iters.mu.Unlock()
}

// IterationPop ends the innermost IterationPush.
func (rt *Runtime) IterationPop() error {
	rt.iters.mu.Lock()
	defer rt.iters.mu.Unlock()
	if len(rt.iters.stack) == 0 {
		return fmt.Errorf("%w: IterationPop without IterationPush", ErrInvalidTask)
	}
	rt.iters.stack = rt.iters.stack[:len(rt.iters.stack)-1]
	rt.iters.depth.Store(int32(len(rt.iters.stack)))
	return nil
}

// noteIteration records the current iterations in j.
func (rt *Runtime) noteIteration(j *job) {
	rt.iters.mu.Lock()
	n := len(rt.iters.stack)
	j.mu.Lock()
	x := j.x()
	for k := 0; k < 2 && k < n; k++ {
		x.iter[k] = int64(rt.iters.stack[n-1-k])
		x.niter++
	}
	j.mu.Unlock()
	rt.iters.mu.Unlock()
}

// workerOrder tracks Task.WorkerOrder on one worker: next is the order
// allowed to run, parked the ready tasks waiting for their turn.
type workerOrder struct {
	next   uint
	parked map[uint]*job
}

func (rt *Runtime) workerOrder(w int) *workerOrder {
	if rt.orders.byWorker == nil {
		rt.orders.byWorker = map[int]*workerOrder{}
	}
	o := rt.orders.byWorker[w]
	if o == nil {
		o = &workerOrder{next: 1, parked: map[uint]*job{}}
		rt.orders.byWorker[w] = o
	}
	return o
}

func (rt *Runtime) checkOrder(t *Task, name string) error {
	rt.orders.mu.Lock()
	defer rt.orders.mu.Unlock()
	o := rt.workerOrder(t.Worker)
	if t.WorkerOrder < o.next {
		return fmt.Errorf("%w: task %q: order %d on worker %d has passed (next is %d)", ErrInvalidTask, name, t.WorkerOrder, t.Worker, o.next)
	}
	if _, dup := o.parked[t.WorkerOrder]; dup {
		return fmt.Errorf("%w: task %q: another task has order %d on worker %d", ErrInvalidTask, name, t.WorkerOrder, t.Worker)
	}
	return nil
}

// orderTurn tells whether ready job j may go to the scheduler now, parking
// it otherwise.
func (rt *Runtime) orderTurn(j *job) bool {
	t := j.task
	rt.orders.mu.Lock()
	o := rt.workerOrder(t.Worker)
	if t.WorkerOrder == o.next {
		rt.orders.mu.Unlock()
		return true
	}
	_, dup := o.parked[t.WorkerOrder]
	if !dup {
		o.parked[t.WorkerOrder] = j
	}
	rt.orders.mu.Unlock()
	if dup {
		rt.complete(j, -1, fmt.Errorf("%w: task %q: another task has order %d on worker %d", ErrInvalidTask, j.name(), t.WorkerOrder, t.Worker))
	}
	return false
}

// orderDone lets the next task in j's worker order go.
func (rt *Runtime) orderDone(j *job) {
	rt.orders.mu.Lock()
	o := rt.workerOrder(j.task.Worker)
	o.next++
	p := o.parked[o.next]
	delete(o.parked, o.next)
	rt.orders.mu.Unlock()
	if p != nil {
		rt.pushReady(p, -1)
	}
}
