// Package schedtest is the conformance kit for scheduling policies: what
// every sched.Policy must guarantee, checked through the SDK's real Host
// over a real shared-memory arena, the kit playing the core and the
// workers. A policy's test is one line:
//
//	func TestConformance(t *testing.T) {
//		schedtest.Run(t, func() sched.Policy { return mypolicy.New() }, schedtest.HonoursPriorities())
//	}
//
// Run checks that every pushed task is assigned exactly once, only to a
// worker that can run it (Task.ArchMask, Task.Worker), with an
// implementation the task may run there when the policy chooses one
// (Task.SetImpl among Task.Impls), whatever the predictions, priorities
// and hints; that workers can be removed and added
// while tasks are queued without losing any (a task only a removed worker
// could run waits for a worker able to run it); that nothing is handed out
// after Deinit; that parallel tasks run, on one worker or, for a
// sched.ParallelPolicy, on a combined worker they may run on; and, for a
// policy that says it honours priorities, that a worker is always given
// the most urgent task it can run.
//
// RunPlugin runs the same scenarios across the process boundary, on the
// built plugin binary (Build) started as the runtime starts it:
//
//	func TestPlugin(t *testing.T) {
//		schedtest.RunPlugin(t, schedtest.Build(t, ".", t.TempDir(), "mypolicy"), nil)
//	}
package schedtest

import (
	"fmt"
	"maps"
	"math/rand"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Option changes what Run checks.
type Option func(*options)

type options struct {
	priorities bool
	tasks      int
	seed       int64
	timeout    time.Duration
}

// HonoursPriorities makes Run check that, with one worker, tasks are
// handed out by decreasing priority: for policies that order queues by
// priority (ws, dmdas, StarPU's prio).
func HonoursPriorities() Option { return func(o *options) { o.priorities = true } }

// Tasks sets how many tasks the host test pushes (default 3000).
func Tasks(n int) Option { return func(o *options) { o.tasks = n } }

// Seed fixes the random workload (default: the time, logged so that a
// failure can be replayed).
func Seed(s int64) Option { return func(o *options) { o.seed = s } }

// Timeout bounds each scenario (default 30 s): a policy that keeps a task
// forever fails instead of hanging.
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Run runs the conformance scenarios as subtests of t, each on a fresh
// policy from newPolicy, in process: the SDK's Host over the policy.
// RunPlugin runs them on a plugin process.
func Run(t *testing.T, newPolicy func() sched.Policy, opts ...Option) {
	inProcess := func() subject {
		p := newPolicy()
		return subject{policy: p, start: func(_ *testing.T, a *shm.Arena) sched.Scheduler {
			return sched.NewHost(a, p, base.Info{Name: "conformance"})
		}}
	}
	run(t, inProcess, opts)
	t.Run("AddRemoveWorkers", func(t *testing.T) { addRemove(t, newPolicy()) })
}

// subject is what a scenario drives: start gives a fresh scheduler on the
// scenario's arena; policy is the policy behind it when it runs in
// process, which the scenarios may then call directly (nil for a plugin
// process).
type subject struct {
	policy sched.Policy
	start  func(t *testing.T, a *shm.Arena) sched.Scheduler
}

// run runs the scenarios that go through the rings, each on a fresh
// subject.
func run(t *testing.T, fresh func() subject, opts []Option) {
	o := options{tasks: 3000, seed: time.Now().UnixNano(), timeout: 30 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	t.Run("ExactlyOnceOnCapableWorkers", func(t *testing.T) { exactlyOnce(t, fresh(), o) })
	t.Run("WorkersThroughHost", func(t *testing.T) { workersThroughHost(t, fresh(), o) })
	t.Run("NothingAfterDeinit", func(t *testing.T) { afterDeinit(t, fresh(), o) })
	t.Run("ParallelTasks", func(t *testing.T) { parallelTasks(t, fresh(), o) })
	if o.priorities {
		t.Run("Priorities", func(t *testing.T) { priorities(t, fresh(), o) })
	}
}

// The machine the host scenarios simulate: two CPUs on RAM, a GPU and an
// OpenCL device on their own nodes.
var machine = []sched.Worker{
	{ID: 0, Arch: driver.CPU, Node: 0},
	{ID: 1, Arch: driver.CPU, Node: 0},
	{ID: 2, Arch: driver.CUDA, Node: 1},
	{ID: 3, Arch: driver.OpenCL, Node: 2},
}

// core is the kit's side of a scheduler (a Host, in process or in a
// plugin process): it pushes and completes tasks on the events ring and
// reads decisions, as the runtime's engine does.
type core struct {
	t         *testing.T
	host      sched.Scheduler
	arena     *shm.Arena
	events    *shm.Ring
	decisions *shm.Ring
	bell      *shm.Bell // the host's
	coreBell  *shm.Bell // ours
	deadline  time.Time
	acks      []uint64 // Seq of the Workers messages the host echoed
}

func startHost(t *testing.T, sub subject, workers []sched.Worker, depth, maxDepth int, timeout time.Duration, combined ...sched.Worker) *core {
	t.Helper()
	const eventsCap, decisionsCap = 1 << 20, 1 << 18
	control := shm.RingBytes(eventsCap) + shm.RingBytes(decisionsCap) + 2*shm.BellSize + 4096
	a, err := shm.Create(control+1<<16, control)
	if err != nil {
		t.Fatalf("create arena: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	c := &core{t: t, arena: a, deadline: time.Now().Add(timeout)}
	var refs sched.RingRefs
	ring := func(capacity uint64) (*shm.Ring, base.Span) {
		s, err := a.Carve(shm.RingBytes(capacity), 64)
		if err != nil {
			t.Fatalf("carve ring: %v", err)
		}
		r, err := shm.InitRing(a.Bytes(s))
		if err != nil {
			t.Fatalf("init ring: %v", err)
		}
		return r, s
	}
	bell := func() (*shm.Bell, uint64) {
		s, err := a.Carve(shm.BellSize, 64)
		if err != nil {
			t.Fatalf("carve bell: %v", err)
		}
		return a.Bell(s.Offset), s.Offset
	}
	c.events, refs.Events = ring(eventsCap)
	c.decisions, refs.Decisions = ring(decisionsCap)
	c.bell, refs.Bell = bell()
	c.coreBell, refs.CoreBell = bell()
	c.host = sub.start(t, a)
	err = c.host.Init(t.Context(), &sched.InitRequest{Workers: workers, Rings: refs, Combined: combined,
		QueueDepth: depth, MaxQueueDepth: maxDepth, QueuedWork: 100 * time.Microsecond, SpinIters: 100})
	if err != nil {
		t.Fatalf("host init: %v", err)
	}
	t.Cleanup(func() { c.host.Deinit(t.Context()) })
	return c
}

func (c *core) alive() bool { return time.Now().Before(c.deadline) }

// pushBurst pushes, one time in two, a burst of 1 to 20 of the tasks
// after the first *pushed, rings the policy, and reports whether it did.
func (c *core) pushBurst(rng *rand.Rand, tasks []*sched.Task, pushed *int) bool {
	if *pushed == len(tasks) || rng.Intn(2) != 0 {
		return false
	}
	for k := 1 + rng.Intn(20); k > 0 && *pushed < len(tasks); k-- {
		c.push(tasks[*pushed])
		*pushed++
	}
	c.bell.Ring()
	return true
}

// idleWait is how long to wait for a decision: not at all after progress,
// else a little.
func idleWait(progress bool) time.Duration {
	if progress {
		return 0
	}
	return 10 * time.Millisecond
}

func (c *core) push(t *sched.Task) {
	flags := uint32(0)
	if t.Locality {
		flags |= wire.PushLocality
	}
	p := wire.Push{ID: t.ID, Priority: t.Priority, ArchMask: t.ArchMask, Worker: t.Worker,
		ReleasedBy: t.ReleasedBy, Codelet: t.Codelet, Flags: flags, Length: t.Length, Transfer: t.Transfer}
	if t.Impls != nil {
		p.Flags |= wire.PushImpls
		p.Impls = *t.Impls
	}
	if t.Parallel != nil {
		p.Flags |= wire.PushParallel
		p.Parallel = t.Parallel.Sizes
	}
	b, err := c.events.ReserveWait(p.Len(), c.alive)
	if err != nil {
		c.t.Fatalf("push task %d: the policy stopped taking events: %v", t.ID, err)
	}
	p.Encode(b)
	c.events.Commit()
}

func (c *core) done(worker int, id uint64, ns int64) {
	b, err := c.events.ReserveWait(wire.DoneSize, c.alive)
	if err != nil {
		c.t.Fatalf("completion of task %d: the policy stopped taking events: %v", id, err)
	}
	d := wire.Done{Worker: int32(worker), ID: id, DurationNs: ns}
	d.Encode(b)
	c.events.Commit()
}

// completeSome completes the first task queued on a random subset of the
// machine's workers, rings the policy if it did, and returns how many.
func (c *core) completeSome(rng *rand.Rand, tasks []*sched.Task, queues map[int][]uint64) int {
	n := 0
	for _, w := range machine {
		q := queues[w.ID]
		if len(q) == 0 || rng.Intn(3) == 0 {
			continue
		}
		c.done(w.ID, q[0], max(tasks[q[0]-1].LengthOn(&w), 1))
		queues[w.ID] = q[1:]
		n++
	}
	if n > 0 {
		c.bell.Ring()
	}
	return n
}

// decision returns the next assignment, waiting up to wait (> 0) for it;
// ok is false if none came.
func (c *core) decision(wait time.Duration) (a wire.Assign, ok bool) {
	if wait > 0 && c.decisions.Empty() {
		c.coreBell.Wait(func() bool { return !c.decisions.Empty() }, 100, wait)
	}
	msg := c.decisions.Peek()
	for msg != nil && wire.Type(msg) == wire.TypeWorkers {
		var w wire.Workers
		if err := w.Decode(msg); err != nil {
			c.t.Fatalf("decisions ring: workers echo: %v", err)
		}
		c.acks = append(c.acks, w.Seq)
		c.decisions.Release()
		msg = c.decisions.Peek()
	}
	if msg == nil {
		if err := c.decisions.Err(); err != nil {
			c.t.Fatalf("decisions ring: %v", err)
		}
		return a, false
	}
	if wire.Type(msg) != wire.TypeAssign || a.Decode(msg) != nil {
		c.t.Fatalf("decisions ring: message of type %d, length %d, is not an Assign", wire.Type(msg), len(msg))
	}
	c.decisions.Release()
	return a, true
}

// changeWorkers sends a Workers message on the events ring, as the core
// does when a scheduling context gains or loses workers.
func (c *core) changeWorkers(op uint32, seq uint64, ws ...sched.Worker) {
	m := wire.Workers{Op: op, Seq: seq}
	for _, w := range ws {
		m.Workers = append(m.Workers, wire.WorkerRef{ID: int32(w.ID), Arch: driver.ArchBit(w.Arch), Node: int32(w.Node)})
	}
	b, err := c.events.ReserveWait(wire.WorkersLen(len(m.Workers)), c.alive)
	if err != nil {
		c.t.Fatalf("workers message %d: the policy stopped taking events: %v", seq, err)
	}
	m.Encode(b)
	c.events.Commit()
	c.bell.Ring()
}

func (c *core) acked(seq uint64) bool {
	for _, s := range c.acks {
		if s == seq {
			return true
		}
	}
	return false
}

// randomTask is a task for workers: a random set of architectures among
// theirs, sometimes bound to one worker, with random priority, hints and
// predictions (calibrated or not).
func randomTask(rng *rand.Rand, id uint64, workers []sched.Worker) *sched.Task {
	var present uint32
	for _, w := range workers {
		present |= driver.ArchBit(w.Arch)
	}
	t := &sched.Task{ID: id, Priority: int32(rng.Intn(5) - 2), Worker: -1, ReleasedBy: -1,
		Codelet: uint32(rng.Intn(3)), Locality: rng.Intn(3) == 0}
	for t.ArchMask == 0 {
		t.ArchMask = uint32(rng.Intn(8)) & present
	}
	if rng.Intn(10) == 0 {
		w := workers[rng.Intn(len(workers))]
		t.Worker = int32(w.ID)
		t.ArchMask |= driver.ArchBit(w.Arch)
	}
	if rng.Intn(2) == 0 {
		t.ReleasedBy = int32(workers[rng.Intn(len(workers))].ID)
	}
	for i := range t.Length {
		t.Length[i] = -1
		if rng.Intn(4) != 0 {
			t.Length[i] = rng.Int63n(100_000)
		}
	}
	if rng.Intn(2) == 0 {
		t.Transfer = make([]int64, 3)
		for i := range t.Transfer {
			t.Transfer[i] = rng.Int63n(50_000)
		}
	}
	if rng.Intn(3) == 0 {
		randomImpls(rng, t)
	}
	return t
}

// randomImpls lists implementations for t, as the core does for a codelet
// with several: on each architecture t may run, one to four, calibrated
// or not, at least one of them usable, the others sometimes refused.
func randomImpls(rng *rand.Rand, t *sched.Task) {
	t.Impls = new([wire.NumArch][]sched.Impl)
	for a := range t.Impls {
		if t.ArchMask&(1<<a) == 0 {
			continue
		}
		n := 1 + rng.Intn(4)
		usable := rng.Intn(n)
		for i := 0; i < n; i++ {
			im := sched.Impl{Length: -1, Kernel: int32(rng.Intn(100))}
			if rng.Intn(4) != 0 {
				im.Length = rng.Int63n(100_000)
			}
			if i != usable && rng.Intn(3) == 0 {
				im.Kernel = -1
			}
			t.Impls[a] = append(t.Impls[a], im)
		}
	}
}

func workerByID(workers []sched.Worker, id int) *sched.Worker {
	for i := range workers {
		if workers[i].ID == id {
			return &workers[i]
		}
	}
	return nil
}

// exactlyOnce pushes tasks in random batches while simulated workers run
// what they are assigned, in order, and complete it at random moments.
func exactlyOnce(t *testing.T, sub subject, o options) {
	t.Logf("seed %d", o.seed)
	rng := rand.New(rand.NewSource(o.seed))
	c := startHost(t, sub, machine, 4, 16, o.timeout)
	tasks := make([]*sched.Task, o.tasks)
	for i := range tasks {
		tasks[i] = randomTask(rng, uint64(i+1), machine)
	}
	assigned := make([]int, len(tasks)) // worker+1, 0 while unassigned
	queues := map[int][]uint64{}        // per worker, assigned and not completed
	pushed, completed := 0, 0
	// A policy restarted after a crash hears of the tasks its previous
	// instance handed out (sched.Policy.PostExec): it must ignore them.
	for i, w := range machine {
		c.done(w.ID, 1<<40+uint64(i), 1000)
	}
	c.bell.Ring()
	for completed < len(tasks) {
		if !c.alive() {
			t.Fatalf("timed out: %d of %d tasks pushed, %d completed; %d never assigned (first: %v)",
				pushed, len(tasks), completed, countZero(assigned[:pushed]), firstUnassigned(tasks[:pushed], assigned))
		}
		progress := false
		if pushed < len(tasks) && rng.Intn(2) == 0 {
			for n := 1 + rng.Intn(40); n > 0 && pushed < len(tasks); n-- {
				c.push(tasks[pushed])
				pushed++
			}
			c.bell.Ring()
			progress = true
		}
		wait := time.Duration(0)
		if !progress {
			wait = 10 * time.Millisecond
		}
		for {
			a, ok := c.decision(wait)
			if !ok {
				break
			}
			wait = 0
			progress = true
			id, wid := checkAssign(t, a, tasks, pushed, assigned)
			assigned[id-1] = wid + 1
			queues[wid] = append(queues[wid], id)
		}
		if n := c.completeSome(rng, tasks, queues); n > 0 {
			completed += n
			progress = true
		}
	}
	if err := c.host.Deinit(t.Context()); err != nil {
		t.Fatalf("host deinit: %v", err)
	}
	if a, ok := c.decision(0); ok {
		t.Fatalf("decision after every task completed: task %d to worker %d", a.ID, a.Worker)
	}
}

// workersThroughHost runs tasks while the core removes workers 1 (a CPU)
// and 2 (the only CUDA worker) with Workers messages on the events ring, as
// a scheduling context does, and later adds them back. Tasks assigned
// before the removal's echo still complete there; after the echo nothing is
// assigned to them until the addition's echo; every task runs exactly once.
func workersThroughHost(t *testing.T, sub subject, o options) {
	t.Logf("seed %d", o.seed)
	rng := rand.New(rand.NewSource(o.seed))
	c := startHost(t, sub, machine, 4, 16, o.timeout)
	n := max(o.tasks/2, 30)
	tasks := make([]*sched.Task, n)
	for i := range tasks {
		tasks[i] = randomTask(rng, uint64(i+1), machine)
	}
	leaving := []sched.Worker{machine[1], machine[2]}
	const removeSeq, addSeq = 1, 2
	removed, added := false, false
	assigned := make([]int, n)
	queues := map[int][]uint64{}
	pushed, completed := 0, 0
	for completed < n {
		if !c.alive() {
			t.Fatalf("timed out: %d of %d tasks pushed, %d completed; %d never assigned (first: %v); removal echoed %v, addition echoed %v",
				pushed, n, completed, countZero(assigned[:pushed]), firstUnassigned(tasks[:pushed], assigned), c.acked(removeSeq), c.acked(addSeq))
		}
		progress := false
		if !removed && pushed >= n/3 {
			c.changeWorkers(wire.WorkersRemove, removeSeq, leaving...)
			removed, progress = true, true
		}
		// Add the workers back once the removal is echoed and some tasks
		// ran without them, so the removal is exercised.
		if removed && !added && c.acked(removeSeq) && (pushed == n || completed >= 2*n/3) {
			c.changeWorkers(wire.WorkersAdd, addSeq, leaving...)
			added, progress = true, true
		}
		if c.pushBurst(rng, tasks, &pushed) {
			progress = true
		}
		wait := idleWait(progress)
		for {
			// decision consumes the echoes ahead of the Assign it returns,
			// so acked tells whether this Assign follows the echo.
			a, ok := c.decision(wait)
			if !ok {
				break
			}
			wait = 0
			progress = true
			id, wid := checkAssign(t, a, tasks, pushed, assigned)
			if (wid == 1 || wid == 2) && c.acked(removeSeq) && !c.acked(addSeq) {
				t.Fatalf("task %d assigned to worker %d after its removal was acknowledged", id, wid)
			}
			assigned[id-1] = wid + 1
			queues[wid] = append(queues[wid], id)
		}
		if n := c.completeSome(rng, tasks, queues); n > 0 {
			completed += n
			progress = true
		}
	}
	if !c.acked(removeSeq) || !c.acked(addSeq) {
		t.Fatalf("the host never echoed the workers messages (removal %v, addition %v)", c.acked(removeSeq), c.acked(addSeq))
	}
}

// checkAssign checks a decision against the tasks pushed so far and the
// ones already assigned (assigned[i] is 1 + the worker of task i+1, or 0),
// and returns the task and worker.
func checkAssign(t *testing.T, a wire.Assign, tasks []*sched.Task, pushed int, assigned []int) (uint64, int) {
	t.Helper()
	return checkAssignOn(t, machine, a, tasks, pushed, assigned)
}

// checkAssignOn is checkAssign on the given machine.
func checkAssignOn(t *testing.T, machine []sched.Worker, a wire.Assign, tasks []*sched.Task, pushed int, assigned []int) (uint64, int) {
	t.Helper()
	id, wid := a.ID, int(a.Worker)
	if id == 0 || id > uint64(pushed) {
		t.Fatalf("policy assigned task %d, which was never pushed", id)
	}
	tk := tasks[id-1]
	if prev := assigned[id-1]; prev != 0 {
		t.Fatalf("task %d assigned twice: to worker %d, then to worker %d", id, prev-1, wid)
	}
	w := workerByID(machine, wid)
	if w == nil {
		t.Fatalf("task %d assigned to worker %d, which does not exist", id, wid)
	}
	if !tk.CanRun(w) {
		t.Fatalf("task %d (arch mask %#x, bound to %d) assigned to worker %d (%s), which cannot run it",
			id, tk.ArchMask, tk.Worker, wid, w.Arch)
	}
	if a.Flags&wire.AssignImpl != 0 {
		impls := tk.ImplsOn(w)
		if i := int32(a.Impl); i < 0 || int(i) >= len(impls) || !impls[i].Usable() {
			t.Fatalf("task %d assigned to worker %d (%s) with implementation %d, which it may not run there (implementations %+v): a policy chooses only among the usable Task.Impls of the worker's architecture",
				id, wid, w.Arch, i, impls)
		}
	}
	return id, wid
}

func countZero(s []int) int {
	n := 0
	for _, v := range s {
		if v == 0 {
			n++
		}
	}
	return n
}

func firstUnassigned(tasks []*sched.Task, assigned []int) string {
	for i, t := range tasks {
		if assigned[i] == 0 {
			return fmt.Sprintf("task %d: %+v", t.ID, *t)
		}
	}
	return "none"
}

// priorities: one worker, one task at a time. While a first task runs, the
// others are pushed; from then on each assignment must be a task of the
// highest priority still waiting.
func priorities(t *testing.T, sub subject, o options) {
	t.Logf("seed %d", o.seed)
	rng := rand.New(rand.NewSource(o.seed))
	cpu := []sched.Worker{{ID: 0, Arch: driver.CPU}}
	c := startHost(t, sub, cpu, 1, 1, o.timeout)
	mk := func(id uint64, prio int32) *sched.Task {
		return &sched.Task{ID: id, Priority: prio, ArchMask: driver.ArchBit(driver.CPU), Worker: -1, ReleasedBy: -1,
			Length: [wire.NumArch]int64{1000, -1, -1}}
	}
	c.push(mk(1, 0))
	c.bell.Ring()
	if a, ok := c.decision(o.timeout); !ok || a.ID != 1 {
		t.Fatalf("first task not assigned (got %+v, %v)", a, ok)
	}
	waiting := map[uint64]int32{}
	n := min(o.tasks, 500)
	for id := uint64(2); id <= uint64(n); id++ {
		prio := int32(rng.Intn(21) - 10)
		c.push(mk(id, prio))
		waiting[id] = prio
	}
	c.bell.Ring()
	// The completion comes after every push on the ring: the policy has
	// seen them all before the worker has room again.
	running := uint64(1)
	for len(waiting) > 0 {
		c.done(0, running, 1000)
		c.bell.Ring()
		a, ok := c.decision(time.Until(c.deadline))
		if !ok {
			t.Fatalf("timed out with %d tasks waiting", len(waiting))
		}
		prio, ok := waiting[a.ID]
		if !ok {
			t.Fatalf("assigned task %d, which is not waiting", a.ID)
		}
		for id, p := range waiting {
			if p > prio {
				t.Fatalf("assigned task %d of priority %d while task %d of priority %d waits", a.ID, prio, id, p)
			}
		}
		delete(waiting, a.ID)
		running = a.ID
	}
}

// afterDeinit: tasks queued at Deinit are dropped; Pop hands out nothing.
func afterDeinit(t *testing.T, sub subject, o options) {
	c := startHost(t, sub, machine, 1, 1, o.timeout)
	rng := rand.New(rand.NewSource(o.seed))
	for id := uint64(1); id <= 200; id++ {
		c.push(randomTask(rng, id, machine))
	}
	c.bell.Ring()
	time.Sleep(5 * time.Millisecond)
	if err := c.host.Deinit(t.Context()); err != nil {
		t.Fatalf("host deinit: %v", err)
	}
	// The host's goroutine is gone: calling the policy is safe now (in
	// process; a plugin's policy is out of reach, its rings are not).
	for _, w := range machine {
		if sub.policy == nil {
			break
		}
		if tk := sub.policy.Pop(w.ID); tk != nil {
			t.Fatalf("Pop(%d) after Deinit returned task %d", w.ID, tk.ID)
		}
	}
	for {
		if _, ok := c.decision(0); !ok {
			break
		}
	}
	c.push(randomTask(rng, 1000, machine))
	c.bell.Ring()
	if a, ok := c.decision(20 * time.Millisecond); ok {
		t.Fatalf("decision after Deinit: task %d to worker %d", a.ID, a.Worker)
	}
}

// addRemove calls the hooks directly, from this goroutine, as the host
// would: workers leave and join while tasks are queued.
func addRemove(t *testing.T, p sched.Policy) {
	cpu := driver.ArchBit(driver.CPU)
	cuda := driver.ArchBit(driver.CUDA)
	workers := map[int]sched.Worker{
		0: {ID: 0, Arch: driver.CPU},
		1: {ID: 1, Arch: driver.CPU},
		2: {ID: 2, Arch: driver.CUDA, Node: 1},
	}
	var list []sched.Worker
	for _, id := range []int{0, 1, 2} {
		list = append(list, workers[id])
	}
	if err := p.Init(list); err != nil {
		t.Fatalf("Init: %v", err)
	}
	var tasks []*sched.Task
	add := func(mask uint32, worker, releasedBy int32, locality bool) {
		tk := &sched.Task{ID: uint64(len(tasks) + 1), ArchMask: mask, Worker: worker, ReleasedBy: releasedBy,
			Locality: locality, Length: [wire.NumArch]int64{1000, 100, -1}, Transfer: []int64{0, 500}}
		tasks = append(tasks, tk)
		p.Push(tk)
	}
	for i := 0; i < 10; i++ {
		add(cpu, -1, -1, false)
		add(cpu, -1, 1, true) // kept by worker 1
		add(cpu|cuda, -1, 1, false)
		add(cuda, -1, 2, i%2 == 0) // only worker 2 can run these
	}
	add(cpu, 1, -1, false) // bound to worker 1
	add(cuda, 2, -1, false)
	popped := map[uint64]int{}
	pop := func(id int, n int) int {
		got := 0
		for ; got < n; got++ {
			tk := p.Pop(id)
			if tk == nil {
				break
			}
			w, ok := workers[id]
			if !ok {
				t.Fatalf("removed worker %d popped task %d", id, tk.ID)
			}
			if prev, dup := popped[tk.ID]; dup {
				t.Fatalf("task %d popped twice: by worker %d, then by %d", tk.ID, prev, id)
			}
			if !tk.CanRun(&w) {
				t.Fatalf("worker %d (%s) popped task %d (mask %#x, bound to %d), which it cannot run", id, w.Arch, tk.ID, tk.ArchMask, tk.Worker)
			}
			popped[tk.ID] = id
			p.PostExec(id, tk.ID, 1000)
		}
		return got
	}
	drain := func() {
		for progress := true; progress; {
			progress = false
			for _, id := range []int{0, 1, 2, 5} {
				if _, ok := workers[id]; ok && pop(id, 1) > 0 {
					progress = true
				}
			}
		}
	}
	pop(1, 2)
	// A policy may give worker 1 its bound task before any other (StarPU
	// runs a worker's local tasks first): that one ran before the removal.
	before := maps.Clone(popped)
	p.RemoveWorkers([]int{1})
	delete(workers, 1)
	if tk := p.Pop(1); tk != nil {
		t.Fatalf("removed worker 1 popped task %d", tk.ID)
	}
	drain()
	for _, tk := range tasks {
		_, done := popped[tk.ID]
		if _, ran := before[tk.ID]; tk.Worker == 1 && done && !ran {
			t.Fatalf("task %d bound to removed worker 1 ran on worker %d after the removal", tk.ID, popped[tk.ID])
		}
		if tk.Worker != 1 && !done {
			t.Fatalf("task %d (mask %#x, released by %d) was lost when worker 1 left", tk.ID, tk.ArchMask, tk.ReleasedBy)
		}
	}
	// Worker 2, the only CUDA worker, leaves with CUDA tasks queued; they
	// wait for CUDA worker 5. Worker 1 comes back for its bound task.
	for i := 0; i < 5; i++ {
		add(cuda, -1, 2, false)
		add(cpu|cuda, -1, 2, true)
	}
	p.RemoveWorkers([]int{2})
	delete(workers, 2)
	drain()
	for _, tk := range tasks {
		if _, done := popped[tk.ID]; done && tk.ArchMask == cuda && popped[tk.ID] != 2 && popped[tk.ID] != 5 {
			t.Fatalf("CUDA task %d ran on worker %d", tk.ID, popped[tk.ID])
		}
	}
	workers[1] = sched.Worker{ID: 1, Arch: driver.CPU}
	workers[5] = sched.Worker{ID: 5, Arch: driver.CUDA, Node: 1}
	p.AddWorkers([]sched.Worker{workers[1], workers[5]})
	drain()
	lost := func() []uint64 {
		var ids []uint64
		for _, tk := range tasks {
			if _, done := popped[tk.ID]; !done {
				ids = append(ids, tk.ID)
			}
		}
		return ids
	}
	for _, id := range lost() {
		if tasks[id-1].Worker != 2 {
			t.Fatalf("task %d (mask %#x, bound to %d) never popped after workers 1 and 5 came", id, tasks[id-1].ArchMask, tasks[id-1].Worker)
		}
	}
	workers[2] = sched.Worker{ID: 2, Arch: driver.CUDA, Node: 1}
	p.AddWorkers([]sched.Worker{workers[2]})
	drain()
	if ids := lost(); len(ids) != 0 {
		t.Fatalf("tasks never popped after worker 2 came back: %v", ids)
	}
	p.Deinit()
}
