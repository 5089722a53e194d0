package drivertest

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Task is an Exec the suite posts: a kernel index (Rig.Kernel) and what
// the task carries.
type Task struct {
	Kernel int
	// Flags are the Exec's (wire.ExecAsync). The suite sets ExecAsync on
	// some of the tasks it posts, whatever the harness gives.
	Flags   uint32
	Arg     []byte
	Buffers []wire.BufferDesc
}

// Harness is what the conformance suite needs to know about a driver.
type Harness struct {
	// Start starts a fresh driver: InProcess or Plugin. Each scenario
	// starts its own.
	Start Starter
	// Env ("KEY=value") is set for the driver, Config given to its
	// SetConfig (when not nil) before its fingerprint is taken.
	Env    []string
	Config base.Config
	// Workers is how many workers the scenarios run, worker i on unit i
	// (default: one per unit, at most 4). Run skips when the driver
	// reports no unit, saying why (Fingerprint.Note).
	Workers int
	// OK builds a task that succeeds on worker w, allocating what it needs
	// on the rig: RAM (w.RAM), or device memory on the worker's node
	// (w.Alloc, w.Up). The suite calls it once per worker after each Init
	// and posts the task many times, several in flight at once, on the
	// dispatch ring and, for workers that have one, on the scheduler ring:
	// running it again and again must keep succeeding.
	OK func(w *Worker) Task
	// Fail, when not nil, builds a task that fails on worker w with an
	// error whose text contains msg, or at least its start when the text
	// is cut to wire.MaxErrLen. msg is ASCII letters, digits and
	// underscores, starting with a letter, so that it may be an
	// identifier (a kernel's name); the suite passes one longer than a
	// message of the worker's completion ring. Without Fail the suite
	// checks only errors it can cause itself (an unknown kernel).
	Fail func(w *Worker, msg string) Task
	// Team, when not nil, builds an SPMD task for a team of size workers
	// whose master is w, for a driver whose fingerprint sets Parallel, and
	// a check to call once it completed: an error unless every rank from
	// 0 to size-1 ran once and saw size (kernel.Context.CombinedSize).
	Team func(w *Worker, size int) (Task, func() error)
	// Tasks is how many tasks the scenarios that count post (default
	// 2000).
	Tasks int
	// Timeout bounds each wait (default 20 s): a task never answered
	// fails the scenario instead of hanging it.
	Timeout time.Duration
	// Skip names scenarios not to run, by their path below Run's test
	// ("DeinitInFlight/BusyWithSchedRing"), with the reason: a known bug,
	// named, until it is fixed. A name that is no scenario fails the test.
	Skip map[string]string

	// seen collects the scenarios' paths, to check Skip's names.
	seen map[string]bool
}

// deinitLimit is how long the runtime gives Deinit at shutdown before it
// kills the plugin (core/runtime.go's teardown, docs/plugin-guide.md).
const deinitLimit = 5 * time.Second

// Run runs the conformance scenarios as subtests of t, each on a fresh
// driver from h.Start:
//
//   - ExactlyOnce: many tasks on several workers, across the dispatch ring
//     and the scheduler ring (when the fingerprint sets SchedRing), each
//     answered by one completion, on its worker's completion ring, with
//     times on wire.Now's clock; a scheduler ring is drained only after
//     the completions of its tasks are posted.
//   - LastCompletionRung: the core's bell rings for the completion that
//     leaves a worker with nothing queued, one task at a time (a
//     dependency chain) and in bursts; the rig sleeps on the bell without
//     polling the rings.
//   - SleepReported: a worker left idle long enough to fall asleep on its
//     bell says so on its next completion (wire.Completion.SleepStartNs),
//     with times on wire.Now's clock, between its previous task and the
//     next; driver.Rings does it for drivers that wait in Rings.Idle and
//     post with Rings.Post.
//   - UnknownKernel: a task of a kernel index the driver never listed
//     fails with a message, and the worker goes on.
//   - LongError (with h.Fail): an error longer than a completion ring's
//     message arrives cut to wire.MaxErrLen, a short one whole, and the
//     worker goes on.
//   - DeviceRoundTrip, CopyOutOfRange, AllocBeyondNode (workers on a
//     device memory node): Alloc, Copy up and down with the data checked,
//     Free; a copy outside a buffer fails and leaves memory as it was; an
//     Alloc beyond the node's Bytes fails.
//   - DeinitInFlight: Deinit with many tasks queued returns within the
//     runtime's shutdown limit, every task sent before it completed, and
//     no worker slept on its bell again and again meanwhile with tasks
//     queued (sleeps over maxIdle reported on completions, begun after
//     Deinit was called):
//     tasks queued while the workers run them (WhileRunning), while they
//     sleep (WhileAsleep), and on one ring while the workers are busy
//     with the other (BusyWithSchedRing, BusyWithDispatchRing).
//   - InitAfterDeinit: the driver runs tasks again after Deinit and Init.
//   - ParallelTasks (a driver whose fingerprint sets Parallel): teams of
//     every size run FORKJOIN and (with h.Team) SPMD tasks between
//     sequential ones, each answered once, by the master; a failing
//     kernel is reported by the master; Deinit does not wait for a team
//     that can never form.
func Run(t *testing.T, h Harness) {
	if h.Start == nil || h.OK == nil {
		t.Fatal("drivertest.Run: the harness needs Start and OK")
	}
	if h.Tasks <= 0 {
		h.Tasks = 2000
	}
	if h.Timeout <= 0 {
		h.Timeout = 20 * time.Second
	}
	units, note := h.units(t)
	if units == 0 {
		t.Skipf("the driver reports no unit: %s", note)
	}
	if h.Workers <= 0 {
		h.Workers = min(units, 4)
	}
	h.seen = map[string]bool{}
	defer func() {
		for path := range h.Skip {
			if !h.seen[path] {
				t.Errorf("Harness.Skip names %q, which is no scenario of the suite", path)
			}
		}
	}()
	h.run(t, "", "ExactlyOnce", func(t *testing.T) { exactlyOnce(t, h) })
	h.run(t, "", "LastCompletionRung", func(t *testing.T) { lastRung(t, h) })
	h.run(t, "", "SleepReported", func(t *testing.T) { sleepReported(t, h) })
	h.run(t, "", "UnknownKernel", func(t *testing.T) { unknownKernel(t, h) })
	h.run(t, "", "LongError", func(t *testing.T) {
		if h.Fail == nil {
			t.Skip("the harness has no failing kernel (Harness.Fail)")
		}
		longError(t, h)
	})
	h.run(t, "", "DeviceRoundTrip", func(t *testing.T) { onDevices(t, h, roundTrip) })
	h.run(t, "", "CopyOutOfRange", func(t *testing.T) { onDevices(t, h, copyOutOfRange) })
	h.run(t, "", "AllocBeyondNode", func(t *testing.T) { onDevices(t, h, allocBeyond) })
	h.run(t, "", "DeinitInFlight", func(t *testing.T) { deinitInFlight(t, h) })
	h.run(t, "", "InitAfterDeinit", func(t *testing.T) { initAfterDeinit(t, h) })
	h.run(t, "", "ParallelTasks", func(t *testing.T) { parallelTasks(t, h) })
}

// run runs f as subtest name of t, whose path below Run is parent, unless
// the harness skips it.
func (h *Harness) run(t *testing.T, parent, name string, f func(t *testing.T)) {
	path := name
	if parent != "" {
		path = parent + "/" + name
	}
	h.seen[path] = true
	t.Run(name, func(t *testing.T) {
		if why, ok := h.Skip[path]; ok {
			t.Skip(why)
		}
		f(t)
	})
}

// units asks a driver how many units it has, and why none.
func (h *Harness) units(t *testing.T) (int, string) {
	t.Helper()
	a, err := shm.Create(1<<20, 1<<16)
	if err != nil {
		t.Fatalf("create arena: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	d := h.Start(t, a, h.Env)
	r := &Rig{T: t, Driver: d, Timeout: h.Timeout}
	if h.Config != nil {
		if err := d.SetConfig(r.Ctx(), h.Config); err != nil {
			t.Fatalf("SetConfig(%v): %v", h.Config, err)
		}
	}
	fp := r.fingerprint()
	return len(fp.Units), fp.Note
}

func (h *Harness) rig(t *testing.T, opts ...Option) *Rig {
	t.Helper()
	o := []Option{Env(h.Env...), Workers(h.Workers), Timeout(h.Timeout)}
	if h.Config != nil {
		o = append(o, Config(h.Config))
	}
	return Start(t, h.Start, append(o, opts...)...)
}

// ok builds the harness's task on every worker.
func (h *Harness) ok(r *Rig) []Task {
	r.T.Helper()
	tasks := make([]Task, len(r.Workers))
	for i, w := range r.Workers {
		tasks[i] = h.OK(w)
	}
	return tasks
}

// warm runs each worker's task once on each of its rings and waits for
// them: a kernel's first run may compile it, which the scenarios' bounds
// should not count.
func warm(r *Rig, tasks []Task) {
	r.T.Helper()
	var ids []uint64
	for _, w := range r.Workers {
		ids = append(ids, w.Run(tasks[w.Index], false))
		if w.Sched != nil {
			ids = append(ids, w.Run(tasks[w.Index], true))
		}
	}
	r.OK(ids...)
}

// spread posts n tasks round-robin over the workers, every other round on
// the scheduler ring of the workers that have one, every third flagged
// wire.ExecAsync. It returns the IDs, and
// those posted on scheduler rings by worker.
func spread(r *Rig, tasks []Task, n int) (ids []uint64, sched map[*Worker][]uint64) {
	r.T.Helper()
	sched = map[*Worker][]uint64{}
	for i := 0; i < n; i++ {
		w := r.Workers[i%len(r.Workers)]
		round := i / len(r.Workers)
		onSched := w.Sched != nil && round%2 == 1
		// Some tasks flagged asynchronous: a driver may keep those in
		// flight together, and must still answer each once.
		task := tasks[w.Index]
		if round%3 == 2 {
			task.Flags |= wire.ExecAsync
		}
		id := w.Run(task, onSched)
		ids = append(ids, id)
		if onSched {
			sched[w] = append(sched[w], id)
		}
	}
	return ids, sched
}

// strays fails the test if a completion came for a message the rig never
// sent.
func strays(r *Rig) {
	r.T.Helper()
	for id := range r.got {
		if _, ok := r.sent[id]; !ok {
			r.T.Fatalf("a completion for message %d, which the rig never sent", id)
		}
	}
}

func exactlyOnce(t *testing.T, h Harness) {
	r := h.rig(t)
	tasks := h.ok(r)
	warm(r, tasks)
	t0 := wire.Now()
	ids, sched := spread(r, tasks, h.Tasks)

	// Read completions until all have come and the scheduler rings are
	// drained. A drained ring is looked at before the completions are
	// read: a worker commits a task's completion before it releases the
	// task from the scheduler ring (driver.WorkerSpec.SchedRing), so every
	// task of a ring seen drained must have its completion there already.
	deadline := time.Now().Add(h.Timeout)
	for {
		drained := map[*Worker]bool{}
		for w := range sched {
			drained[w] = w.Sched.Drained()
		}
		r.poll()
		all := true
		for w, ws := range sched {
			n, first := r.missing(ws)
			if drained[w] && n > 0 {
				t.Fatalf("worker %d released message %d from its scheduler ring before posting its completion (%d such)", w.Index, first, n)
			}
			all = all && drained[w]
		}
		n, first := r.missing(ids)
		if n == 0 && all {
			break
		}
		if time.Now().After(deadline) {
			if n == 0 {
				t.Fatalf("every task completed, but a scheduler ring is not drained after %v: the worker must release the tasks it ran", h.Timeout)
			}
			t.Fatalf("%d of %d tasks never completed in %v (message %d among them)", n, len(ids), h.Timeout, first)
		}
		seq := r.seq
		r.CoreBell.Wait(func() bool { return r.CoreBell.Seq() != seq || r.posted() }, 100, 5*time.Millisecond)
	}
	t1 := wire.Now()
	for _, id := range ids {
		c := r.got[id]
		if c.Failed {
			t.Fatalf("message %d failed: %s", id, c.Err)
		}
		if c.StartNs < t0 || c.EndNs < c.StartNs || c.EndNs > t1 {
			t.Fatalf("message %d ran from %d to %d ns, outside the %d..%d ns it was in flight: times must be wire.Now's clock", id, c.StartNs, c.EndNs, t0, t1)
		}
	}
	releaseOrder(r, tasks)
	// A late second completion would arrive now, if ever.
	time.Sleep(20 * time.Millisecond)
	r.poll()
	strays(r)
}

// releaseOrder posts small bursts on each scheduler ring and watches the
// ring closely: the moment it is drained, the burst's completions must be
// on the completion ring, committed before the last task was released.
func releaseOrder(r *Rig, tasks []Task) {
	r.T.Helper()
	for _, w := range r.Workers {
		if w.Sched == nil {
			continue
		}
		for burst := 0; burst < 50; burst++ {
			var ids []uint64
			for range 2 {
				ids = append(ids, w.Run(tasks[w.Index], true))
			}
			deadline := time.Now().Add(r.Timeout)
			for !w.Sched.Drained() {
				if time.Now().After(deadline) {
					r.T.Fatalf("worker %d: scheduler ring not drained after %v", w.Index, r.Timeout)
				}
				runtime.Gosched()
			}
			r.poll()
			if n, first := r.missing(ids); n > 0 {
				r.T.Fatalf("worker %d released message %d from its scheduler ring before posting its completion (%d such)", w.Index, first, n)
			}
		}
	}
}

func lastRung(t *testing.T, h Harness) {
	r := h.rig(t)
	tasks := h.ok(r)
	warm(r, tasks)
	// One task at a time, as a dependency chain runs: each completion is
	// its worker's last. Now and then the worker is left long enough to
	// fall asleep on its bell.
	for i := 0; i < 24; i++ {
		for _, w := range r.Workers {
			if i%6 == 5 {
				time.Sleep(10 * time.Millisecond)
			}
			r.WaitRung(w.Run(tasks[w.Index], w.Sched != nil && i%2 == 1))
		}
	}
	// Bursts on every worker at once: the worker may ring once for
	// several completions, but must ring for the last.
	for round := 0; round < 4; round++ {
		ids, _ := spread(r, tasks, 64*len(r.Workers))
		r.WaitRung(ids...)
	}
}

// sleepNap is how long sleepReported first leaves the workers idle: far
// beyond the rig's spin of 100 polls on an idle machine. A loaded one may
// keep a polling worker off the CPU that long (it yields every 4 polls),
// so a worker that reports no sleep gets naps twice as long, up to
// maxNap. A driver's idle timeout within a nap costs nothing: the sleeps
// before and after it merge.
const (
	sleepNap = 50 * time.Millisecond
	maxNap   = 8 * sleepNap
)

// sleepReported leaves the workers idle, then gives each a task: its
// completion must report a sleep that began after the worker's previous
// task ended and before the task was sent (it may end after the task
// started, for drivers that sleep while their device runs it), and the
// sleeps must add up to a tenth of the naps at least (the rest is the
// polling before each sleep, long on a loaded machine).
func sleepReported(t *testing.T, h Harness) {
	r := h.rig(t)
	tasks := h.ok(r)
	warm(r, tasks)
	const rounds = 3
	prevEnd := map[*Worker]int64{}
	for _, w := range r.Workers {
		prevEnd[w] = r.Got(w.Run(tasks[w.Index], false)).EndNs
	}
	slept, napped := map[*Worker]time.Duration{}, map[*Worker]time.Duration{}
	for round := range rounds {
		todo := slices.Clone(r.Workers)
		for nap := sleepNap; len(todo) > 0; nap *= 2 {
			time.Sleep(nap)
			sent := map[*Worker]int64{}
			ids := map[*Worker]uint64{}
			for _, w := range todo {
				sent[w] = wire.Now()
				ids[w] = w.Run(tasks[w.Index], w.Sched != nil && round%2 == 1)
			}
			var again []*Worker
			for _, w := range todo {
				c := r.Got(ids[w])
				if c.Failed {
					t.Fatalf("worker %d: message %d failed: %s", w.Index, c.ID, c.Err)
				}
				s, e := c.SleepStartNs, c.SleepEndNs
				switch {
				case s == 0 && e == 0 && nap < maxNap:
					again = append(again, w)
				case s == 0 && e == 0:
					t.Fatalf("worker %d, round %d: idle for %v before message %d, and its completion reports no sleep: a worker that sleeps on its bell reports it on its next completion (driver.Rings.Idle, Rings.Post)", w.Index, round, nap, c.ID)
				case s < prevEnd[w] || s >= sent[w] || e < s:
					// A driver that sleeps while its device runs the task
					// may end its last sleep after the task's end: no bound
					// there but the rig's clock (Rig.read).
					t.Fatalf("worker %d, round %d: message %d reports a sleep from %d to %d ns; want it to start after its previous task's end (%d) and before the message was sent (%d), on wire.Now's clock", w.Index, round, c.ID, s, e, prevEnd[w], sent[w])
				default:
					slept[w] += time.Duration(e - s)
					napped[w] += nap
				}
				prevEnd[w] = c.EndNs
			}
			todo = again
		}
	}
	for _, w := range r.Workers {
		if slept[w] < napped[w]/10 {
			t.Fatalf("worker %d reports %v of sleep over naps of %v in all: want a tenth at least", w.Index, slept[w], napped[w])
		}
	}
}

func unknownKernel(t *testing.T, h Harness) {
	r := h.rig(t)
	tasks := h.ok(r)
	// Kernels loaded since Start extend the list: take it again.
	r.FP = r.fingerprint()
	for _, w := range r.Workers {
		for _, onSched := range rings(w) {
			for _, k := range []int{len(r.FP.Kernels), len(r.FP.Kernels) + 1000, math.MaxUint32} {
				bad := tasks[w.Index]
				bad.Kernel = k
				r.Failed(w.Run(bad, onSched))
			}
			r.OK(w.Run(tasks[w.Index], onSched))
		}
	}
}

// rings lists the rings a task can be posted on for w: false for the
// dispatch ring, true for the scheduler ring.
func rings(w *Worker) []bool {
	if w.Sched != nil {
		return []bool{false, true}
	}
	return []bool{false}
}

// message is an identifier-like text of n bytes, counting as it goes so
// that a cut shows where.
func message(n int) string {
	var b strings.Builder
	b.WriteString("drivertest_error")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "_%d", i)
	}
	return b.String()[:n]
}

func longError(t *testing.T, h Harness) {
	r := h.rig(t)
	tasks := h.ok(r)
	for _, w := range r.Workers {
		short := message(200)
		long := message(2*shm.MaxMessage(w.Completion) + 1000)
		fs, fl := h.Fail(w, short), h.Fail(w, long)
		for _, onSched := range rings(w) {
			if got := r.Failed(w.Run(fs, onSched)); !strings.Contains(got, short) {
				t.Fatalf("worker %d: an error of %d bytes arrived as %q, want it whole", w.Index, len(short), got)
			}
			// Twice: a worker that survives one such error must survive
			// the next.
			for range 2 {
				got := r.Failed(w.Run(fl, onSched))
				if len(got) > wire.MaxErrLen {
					t.Fatalf("worker %d: an error of %d bytes arrived as %d bytes, more than wire.MaxErrLen (%d)", w.Index, len(long), len(got), wire.MaxErrLen)
				}
				if !strings.Contains(got, long[:64]) {
					t.Fatalf("worker %d: an error of %d bytes arrived as %.200q..., without its start %q", w.Index, len(long), got, long[:64])
				}
			}
			r.OK(w.Run(tasks[w.Index], onSched))
		}
	}
}

// onDevices runs f on each worker of a device memory node.
func onDevices(t *testing.T, h Harness, f func(t *testing.T, w *Worker)) {
	r := h.rig(t)
	n := 0
	for _, w := range r.Workers {
		if w.Node > 0 {
			n++
			f(t, w)
		}
	}
	if n == 0 {
		t.Skip("no worker on a device memory node")
	}
}

// pattern fills b with bytes that differ from one position to the next
// and from one seed to another.
func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7+i>>8) ^ seed
	}
}

func roundTrip(t *testing.T, w *Worker) {
	// An odd size, in two ranges: no driver may assume whole words.
	const size = 1<<20 + 13
	const half = size / 2
	src, dst := w.RAM(size), w.RAM(size)
	pattern(w.Bytes(src), 0x5a)
	for i := range w.Bytes(dst) {
		w.Bytes(dst)[i] = 0xee
	}
	buf := w.Buffer()
	w.OK(w.Alloc(buf, size))
	node := uint32(w.Node)
	w.OK(w.Copy(0, node, src.Offset, buf, wire.CopyRange{Len: half}, wire.CopyRange{SrcOffset: half, DstOffset: half, Len: size - half}))
	w.OK(w.Down(buf, dst))
	if i := diff(w.Bytes(src), w.Bytes(dst)); i >= 0 {
		t.Fatalf("worker %d: byte %d of %d differs after a copy to node %d and back", w.Index, i, size, w.Node)
	}
	// A range at offsets on both sides, down into a buffer left as it
	// was around it.
	clear(w.Bytes(dst))
	w.OK(w.Copy(node, 0, buf, dst.Offset, wire.CopyRange{SrcOffset: 100, DstOffset: 5, Len: 1000}))
	want := make([]byte, size)
	copy(want[5:], w.Bytes(src)[100:1100])
	if i := diff(want, w.Bytes(dst)); i >= 0 {
		t.Fatalf("worker %d: byte %d wrong after copying bytes 100..1100 of a device buffer to offset 5", w.Index, i)
	}
	// After Free the number may name a new allocation.
	w.Free(buf)
	w.OK(w.Alloc(buf, 64))
	w.Free(buf)
}

func diff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func copyOutOfRange(t *testing.T, w *Worker) {
	const size = 4096
	src, dst := w.RAM(size), w.RAM(size)
	pattern(w.Bytes(src), 0x33)
	buf := w.Buffer()
	node := uint32(w.Node)
	w.OK(w.Alloc(buf, size), w.Up(src, buf))
	pattern(w.Bytes(dst), 0x77)
	before := bytes.Clone(w.Bytes(dst))
	other := w.RAM(size)
	pattern(w.Bytes(other), 0x11)
	cases := []struct {
		name string
		id   uint64
	}{
		{"up past the device buffer's end", w.Copy(0, node, other.Offset, buf, wire.CopyRange{DstOffset: size - 100, Len: 200})},
		{"up starting past the end", w.Copy(0, node, other.Offset, buf, wire.CopyRange{DstOffset: size + 1, Len: 1})},
		{"down past the device buffer's end", w.Copy(node, 0, buf, dst.Offset, wire.CopyRange{SrcOffset: size - 10, Len: 11})},
		{"down from an offset that wraps", w.Copy(node, 0, buf, dst.Offset, wire.CopyRange{SrcOffset: math.MaxUint64 - 7, Len: 16})},
		{"up from outside the arena", w.Copy(0, node, w.Arena.Size()-8, buf, wire.CopyRange{Len: 64})},
		{"down to outside the arena", w.Copy(node, 0, buf, w.Arena.Size()-8, wire.CopyRange{Len: 64})},
		{"up to a buffer never allocated", w.Copy(0, node, other.Offset, w.Buffer(), wire.CopyRange{Len: 8})},
	}
	for _, c := range cases {
		w.Failed(c.id)
	}
	if i := diff(before, w.Bytes(dst)); i >= 0 {
		t.Fatalf("worker %d: a failed copy changed byte %d of its RAM destination", w.Index, i)
	}
	// The device buffer holds what the first copy put there.
	w.OK(w.Down(buf, dst))
	if i := diff(w.Bytes(src), w.Bytes(dst)); i >= 0 {
		t.Fatalf("worker %d: byte %d of the device buffer changed by a failed copy", w.Index, i)
	}
}

func allocBeyond(t *testing.T, w *Worker) {
	bytes := w.FP.Nodes[w.Node-1].Bytes
	if bytes == math.MaxUint64 {
		t.Skipf("node %d reports %d bytes: nothing is beyond", w.Node, bytes)
	}
	buf := w.Buffer()
	w.Failed(w.Alloc(buf, bytes+1))
	w.Failed(w.Alloc(buf, math.MaxUint64))
	// The failed allocations took nothing, not even the number.
	w.OK(w.Alloc(buf, 4096))
	w.Free(buf)
}

func deinitInFlight(t *testing.T, h Harness) {
	rounds := []struct {
		name string
		// post queues tasks on r, returning their IDs, or skips.
		post func(t *testing.T, r *Rig, tasks []Task) []uint64
	}{
		{"WhileRunning", func(_ *testing.T, r *Rig, tasks []Task) []uint64 {
			ids, _ := spread(r, tasks, h.Tasks/2)
			return ids
		}},
		// The workers, asleep since warm, are not woken: every task is
		// still queued when Deinit comes, however fast the driver runs
		// them.
		{"WhileAsleep", func(_ *testing.T, r *Rig, tasks []Task) []uint64 {
			r.Quiet = true
			defer func() { r.Quiet = false }()
			ids, _ := spread(r, tasks, h.Tasks/2)
			return ids
		}},
		// A worker busy with one ring when Deinit comes must still take
		// what waits on the other.
		{"BusyWithSchedRing", func(t *testing.T, r *Rig, tasks []Task) []uint64 { return busyRings(t, r, tasks, true) }},
		{"BusyWithDispatchRing", func(t *testing.T, r *Rig, tasks []Task) []uint64 { return busyRings(t, r, tasks, false) }},
	}
	for _, c := range rounds {
		h.run(t, "DeinitInFlight", c.name, func(t *testing.T) {
			r := h.rig(t)
			// A few times each: what is lost at Deinit is often lost in
			// a race.
			for round := 0; round < 3; round++ {
				if round > 0 {
					r.Init()
				}
				tasks := h.ok(r)
				warm(r, tasks)
				ids := c.post(t, r, tasks)
				r.Timeout = deinitLimit
				start, startNs := time.Now(), wire.Now()
				if err := r.Deinit(); err != nil {
					t.Fatalf("round %d: Deinit: %v", round, err)
				}
				took := time.Since(start)
				r.Timeout = h.Timeout
				// Every task sent before Deinit has completed by the time
				// it returns: nothing is waited for now.
				r.poll()
				if n, first := r.missing(ids); n > 0 {
					t.Fatalf("round %d: %d of %d tasks queued before Deinit never completed (message %d among them; Deinit took %v): Deinit stops the workers after the tasks sent before it", round, n, len(ids), first, took)
				}
				for _, id := range ids {
					if got := r.got[id]; got.Failed {
						t.Fatalf("round %d: message %d queued before Deinit failed: %s", round, id, got.Err)
					}
				}
				if n, w, id := sleptHolding(r, ids, startNs); n >= maxStalls {
					t.Fatalf("round %d: workers went to sleep for more than %v %d times with tasks queued while Deinit waited for them, worker %d before message %d (Deinit took %v): a stopping worker must go on running what it holds", round, maxIdle, n, w.Index, id, took)
				}
			}
			strays(r)
		})
	}
}

// maxIdle and maxStalls: a round fails when a worker slept on its bell
// (a futex wait, not a loss of its core) for longer than maxIdle, with
// tasks queued, maxStalls times or more. A device driver may sleep a
// moment with tasks queued, waiting for the device's events; one that
// waits on a timeout while it holds tasks sleeps its whole timeout, again
// and again.
const (
	maxIdle   = 50 * time.Millisecond
	maxStalls = 3
)

// sleptHolding counts the completions, among those of ids (every one
// queued before Deinit was called at since, wire.Now's clock), that report
// a sleep longer than maxIdle begun after since
// (wire.Completion.SleepStartNs): the worker slept on its bell while that
// task waited for it. These are events the driver reports, not gaps
// between tasks, which a loaded machine stretches. It returns the count,
// with the worker and the task of the first.
func sleptHolding(r *Rig, ids []uint64, since int64) (n int, w *Worker, id uint64) {
	for _, i := range ids {
		c := r.got[i]
		if c.SleepEndNs != 0 && c.SleepStartNs > since && time.Duration(c.SleepEndNs-c.SleepStartNs) > maxIdle {
			if n == 0 {
				w, id = r.sent[i], i
			}
			n++
		}
	}
	return n, w, id
}

// busyRings loads one ring of each worker that has a scheduler ring (the
// scheduler ring when sched is true) while the worker sleeps, wakes the
// workers, and once the first of them has completed tops the ring up
// again (a worker starved of CPU meanwhile may have run them all) and
// posts a few tasks on the other ring: the workers are then in the middle
// of the load, the others behind it. Each worker gets no more tasks than
// its completion ring holds: the core never queues more (core/engine.go),
// and it stops reading completions before Deinit. It returns the IDs.
func busyRings(t *testing.T, r *Rig, tasks []Task, sched bool) []uint64 {
	t.Helper()
	has := false
	for _, w := range r.Workers {
		has = has || w.Sched != nil
	}
	if !has {
		t.Skip("no worker has a scheduler ring")
	}
	const others = 8
	var ids, load []uint64
	fill := func(w *Worker, n uint64) {
		for range n {
			load = append(load, w.Run(tasks[w.Index], sched))
		}
	}
	// budget is how many tasks of w fit its rings and their completions
	// its completion ring, besides the others.
	budget := func(w *Worker) uint64 {
		ring := w.Dispatch
		if sched {
			ring = w.Sched
		}
		task := tasks[w.Index]
		exec := uint64(8 + (wire.ExecSize(len(task.Buffers), len(task.Arg))+7)&^7)
		done := uint64(8 + wire.CompletionLen(0))
		return min(ring.Capacity()/exec, w.Completion.Capacity()/done) - others - 2
	}
	r.Quiet = true
	for _, w := range r.Workers {
		if w.Sched != nil {
			fill(w, budget(w)/2)
		}
	}
	r.Quiet = false
	for _, w := range r.Workers {
		w.Bell.Ring()
	}
	deadline := time.Now().Add(r.Timeout)
	for n, _ := r.missing(load); n == len(load); n, _ = r.missing(load) {
		if time.Now().After(deadline) {
			r.T.Fatalf("none of %d tasks completed in %v", len(load), r.Timeout)
		}
		runtime.Gosched()
		r.poll()
	}
	for _, w := range r.Workers {
		if w.Sched != nil {
			fill(w, budget(w)-budget(w)/2)
		}
	}
	for _, w := range r.Workers {
		for range others {
			ids = append(ids, w.Run(tasks[w.Index], !sched && w.Sched != nil))
		}
	}
	return append(ids, load...)
}

func initAfterDeinit(t *testing.T, h Harness) {
	r := h.rig(t)
	warm(r, h.ok(r))
	for round := 0; round < 2; round++ {
		if err := r.Deinit(); err != nil {
			t.Fatalf("Deinit %d: %v", round+1, err)
		}
		r.Init()
		tasks := h.ok(r)
		ids, _ := spread(r, tasks, 8*len(r.Workers))
		r.OK(ids...)
		for _, w := range r.Workers {
			if w.Node > 0 {
				s := w.RAM(256)
				pattern(w.Bytes(s), byte(round))
				want := bytes.Clone(w.Bytes(s))
				buf := w.Buffer()
				w.OK(w.Alloc(buf, s.Size), w.Up(s, buf))
				clear(w.Bytes(s))
				w.OK(w.Down(buf, s))
				if i := diff(want, w.Bytes(s)); i >= 0 {
					t.Fatalf("worker %d after Init %d: byte %d differs after a copy to the device and back", w.Index, round+2, i)
				}
			}
		}
	}
}
