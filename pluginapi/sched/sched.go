// Package sched is the contract between the core and a scheduling policy
// plugin, with StarPU's policy hooks.
//
// A policy author implements Policy. The SDK wraps a Policy in a Host, which
// reads scheduling events (tasks made ready, tasks completed) from a
// shared-memory ring, calls the hooks, and writes decisions (task to worker)
// to another ring. The core drives a Scheduler: the Host in process, or the
// gRPC client adapter when the policy runs in its own plugin process; the hot
// path is the rings in both cases.
package sched

import (
	"context"
	"math"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Worker is a worker as a policy sees it.
type Worker struct {
	ID   int
	Arch driver.Arch
	// Node is the runtime-wide memory node the worker computes on.
	Node int
	// Members, for a combined worker (InitRequest.Combined), are the
	// workers it is made of, in rank order: the master first. Nil for a
	// worker of its own.
	Members []int
}

// Task is a ready task as a policy sees it.
type Task struct {
	ID       uint64
	Priority int32
	// ArchMask has driver.ArchBit set for every architecture that can run
	// the task.
	ArchMask uint32
	// Worker is the worker the task must run on, or -1.
	Worker int32
	// ReleasedBy is the worker whose completed task made this one ready, or
	// -1 when the application's submit did; locality-minded policies keep the
	// task there.
	ReleasedBy int32
	// Codelet numbers the task's codelet (for per-codelet statistics and models).
	Codelet uint32
	// Model names the codelet's performance model (its ModelName, else its
	// Name), for the policy's messages: what model files and `starpu
	// perfmodel` show. Empty when the core did not say.
	Model string
	// Locality is StarPU's LOCALITY hint: run the task where its data is.
	Locality bool
	// Length is the core's predicted execution time in ns per architecture
	// (indexed by driver.ArchIndex), or -1 where the codelet's performance
	// model is not calibrated for that architecture.
	Length [wire.NumArch]int64
	// Transfer[n] is the predicted time in ns to bring the task's input data
	// to memory node n (Worker.Node); nil on a machine with one memory node.
	Transfer []int64
	// Impls, when not nil, lists per architecture (indexed by
	// driver.ArchIndex) the implementations of the task's codelet: the
	// core sends them when the codelet has a performance model and the
	// task may run more than one of them on some architecture.
	// (*Impls)[a][i] is implementation i on architecture a, with its
	// predicted length (-1 while uncalibrated) and whether the task may run
	// it (Usable); ImplsOn reads it for a worker. The policy may then
	// choose one with SetImpl. Where there is no list the core chooses,
	// and Length is all there is to know: the prediction of the
	// implementation the core runs when the policy leaves the choice to
	// it (the first usable one). A pointer, nil for most tasks, so that a
	// task stays small: policies queue many.
	Impls *[wire.NumArch][]Impl
	// Parallel, when not nil, says the task is a parallel task (an SPMD or
	// FORKJOIN codelet's): besides running on one worker, as any task, it
	// may run on a combined worker of one of the sizes listed, with the
	// predicted length there (parallel.go).
	Parallel *Parallel

	// impl is the implementation SetImpl chose, plus one: 0 leaves the
	// choice to the core.
	impl int32
	// combined is the combined worker SetCombined chose, plus one: 0 runs
	// the task on the worker whose Pop returned it.
	combined int32
	// exec is the Exec the host posts to a worker's scheduler ring, when
	// the core sent one.
	exec []byte
	// after is the task a chained task may be queued behind (host_chain.go).
	after uint64
}

// Impl is one implementation of a task's codelet on one architecture: its
// predicted length in ns (-1 while the performance model is not calibrated
// for it) and its kernel (Usable: whether the task may run it).
type Impl = wire.Impl

// HasImpls reports whether the core listed t's implementations (Impls) on
// some architecture: a policy that chooses among them can skip looking
// when it did not.
func (t *Task) HasImpls() bool { return t.Impls != nil }

// ImplsOn is the implementations of t on w's architecture (Task.Impls),
// nil when the core chooses there.
func (t *Task) ImplsOn(w *Worker) []Impl {
	i := driver.ArchIndex(w.Arch)
	if i < 0 || t.Impls == nil {
		return nil
	}
	return t.Impls[i]
}

// SetImpl chooses the implementation t runs with on the worker the policy
// hands it to: an index into t.Impls for that worker's architecture, of a
// usable implementation, or -1 to leave the choice to the core (the
// default). The core refuses a task whose chosen implementation the worker
// cannot run, failing it with an error that names the implementation.
func (t *Task) SetImpl(i int) {
	if i <= math.MinInt32 || i >= math.MaxInt32 {
		i = math.MaxInt32 - 1 // no such implementation either: refused
	}
	t.impl = int32(i + 1)
}

// Impl is the implementation chosen by SetImpl, or -1 when the core
// chooses.
func (t *Task) Impl() int { return int(t.impl) - 1 }

// LengthOn is the predicted execution time of t on w's architecture, or -1.
func (t *Task) LengthOn(w *Worker) int64 {
	i := driver.ArchIndex(w.Arch)
	if i < 0 {
		return -1
	}
	return t.Length[i]
}

// TransferTo is the predicted time to bring t's data to w's memory node, 0
// when unknown.
func (t *Task) TransferTo(w *Worker) int64 {
	if w.Node >= 0 && w.Node < len(t.Transfer) {
		return t.Transfer[w.Node]
	}
	return 0
}

// CanRun reports whether w can execute t.
func (t *Task) CanRun(w *Worker) bool {
	if t.Worker >= 0 {
		return int(t.Worker) == w.ID
	}
	return t.ArchMask&driver.ArchBit(w.Arch) != 0
}

// Policy is a scheduling policy: StarPU's sched_policy hooks. The host calls
// the hooks from one goroutine, so a policy needs no locking of its own.
type Policy interface {
	// Init is called once with the initial workers.
	Init(workers []Worker) error
	// AddWorkers and RemoveWorkers change the set of workers while tasks
	// run (a scheduling context gains or loses workers). After
	// RemoveWorkers the host never calls Pop for those workers; the tasks
	// the policy queued for them must be placed again, and a task no
	// remaining worker can run must wait for an AddWorkers that brings
	// one. Tasks already handed out still get their PostExec.
	AddWorkers(workers []Worker)
	RemoveWorkers(ids []int)
	// Push hands the policy a ready task.
	Push(t *Task)
	// Pop asks for a task for worker id; nil when the policy has none it
	// wants that worker to run now. The host calls it whenever the worker
	// has room in its queue.
	Pop(id int) *Task
	// PostExec tells the policy that task id finished on worker after
	// running for durationNs; worker is the combined worker's ID for a
	// task handed to one (parallel.go). It may name a task the policy never saw:
	// when a policy's process is restarted after a crash, the tasks its
	// previous instance handed out still finish, and are ignored.
	PostExec(worker int, id uint64, durationNs int64)
	// Deinit is called once at shutdown.
	Deinit()
}

// RingRefs locates the scheduler's rings and doorbells in the arena.
type RingRefs struct {
	// Events carries pushes and completions from the core to the policy.
	Events base.Span
	// Decisions carries assignments from the policy to the core.
	Decisions base.Span
	// Bell is the doorbell the policy sleeps on; CoreBell the one it rings.
	Bell, CoreBell uint64
}

// WorkerRing is a worker's scheduler ring (driver.WorkerSpec.SchedRing):
// the host posts there the Exec of a task it assigns to the worker when the
// core sent one with the Push, and rings Bell, the worker's doorbell.
type WorkerRing struct {
	Worker int
	Ring   base.Span
	Bell   uint64
}

// InitRequest starts a scheduling session.
type InitRequest struct {
	Workers []Worker
	Rings   RingRefs
	// WorkerRings are the scheduler rings of the workers that have one.
	WorkerRings []WorkerRing
	// Combined are the combined workers (Worker.Members set, IDs after
	// every worker's) that parallel tasks may run on: the host gives a
	// ParallelPolicy those whose members it schedules.
	Combined []Worker
	// QueueDepth bounds the tasks handed to one worker and not yet
	// completed. When MaxQueueDepth is larger, the bound adapts per worker
	// between the two so that about QueuedWork of predicted work waits in
	// the worker's queue: short tasks get deep queues (the worker never
	// idles while the next decision crosses the processes), long ones stay
	// stealable by other workers.
	QueueDepth    int
	MaxQueueDepth int
	QueuedWork    time.Duration
	SpinIters     int
}

// Scheduler is what the core drives.
type Scheduler interface {
	base.Plugin
	// Init starts the session: from then on the policy consumes events and
	// posts decisions on the rings.
	Init(ctx context.Context, req *InitRequest) error
	// Deinit stops the session.
	Deinit(ctx context.Context) error
}
