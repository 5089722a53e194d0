package driver

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// ringsRig carves a worker's rings and bells in a real arena, returning
// the spec and the core's ends.
type ringsRig struct {
	a                    *shm.Arena
	spec                 WorkerSpec
	dispatch, completion *shm.Ring
	sched                *shm.Ring
}

func newRingsRig(t *testing.T, withSched bool) *ringsRig {
	t.Helper()
	a, err := shm.Create(8<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	r := &ringsRig{a: a}
	ring := func(capacity uint64) (*shm.Ring, base.Span) {
		s, err := a.Carve(shm.RingBytes(capacity), 64)
		if err != nil {
			t.Fatal(err)
		}
		ring, err := shm.InitRing(a.Bytes(s))
		if err != nil {
			t.Fatal(err)
		}
		return ring, s
	}
	bell := func() uint64 {
		s, err := a.Carve(shm.BellSize, 64)
		if err != nil {
			t.Fatal(err)
		}
		return s.Offset
	}
	r.dispatch, r.spec.Dispatch = ring(1 << 12)
	r.completion, r.spec.Completion = ring(1 << 14)
	if withSched {
		r.sched, r.spec.SchedRing = ring(1 << 12)
	}
	r.spec.Bell, r.spec.CoreBell = bell(), bell()
	return r
}

func (r *ringsRig) exec(t *testing.T, ring *shm.Ring, id uint64) {
	t.Helper()
	e := wire.Exec{ID: id}
	b := ring.Reserve(wire.ExecSize(0, 0))
	if b == nil {
		t.Fatal("ring full")
	}
	e.Encode(b)
	ring.Commit()
}

func TestOpenRingsRefuses(t *testing.T) {
	r := newRingsRig(t, false)
	outside := base.Span{Offset: r.a.Size() + 64, Size: 4096}
	cases := []struct {
		name string
		edit func(*WorkerSpec)
		want string
	}{
		{"dispatch", func(s *WorkerSpec) { s.Dispatch = outside }, "dispatch ring"},
		{"completion", func(s *WorkerSpec) { s.Completion = outside }, "completion ring"},
		{"sched", func(s *WorkerSpec) { s.SchedRing = outside }, "scheduler ring"},
		{"bell", func(s *WorkerSpec) { s.Bell = r.a.Size() + 8 }, "doorbell"},
		{"core bell", func(s *WorkerSpec) { s.CoreBell = r.a.Size() + 8 }, "core doorbell"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := r.spec
			c.edit(&spec)
			_, err := OpenRings(r.a, spec, 0)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err = %v, want one starting %q", err, c.want)
			}
		})
	}
}

// TestRingsPostBounded posts an error longer than a completion ring's
// largest message: it arrives cut to wire.MaxErrLen, and the ring goes on.
func TestRingsPostBounded(t *testing.T) {
	r := newRingsRig(t, false)
	w, err := OpenRings(r.a, r.spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	long := errors.New(strings.Repeat("é", shm.MaxMessage(r.completion)))
	for id := uint64(1); id <= 3; id++ {
		c := wire.Completion{ID: id}
		if err := w.Post(&c, long, nil); err != nil {
			t.Fatal(err)
		}
		msg := r.completion.Peek()
		var got wire.Completion
		if err := got.Decode(msg); err != nil {
			t.Fatal(err)
		}
		if !got.Failed || got.ID != id || len(got.Err) > wire.MaxErrLen || !strings.Contains(string(got.Err), "bytes cut]") {
			t.Fatalf("completion %d: failed %v, %d bytes of error", got.ID, got.Failed, len(got.Err))
		}
		r.completion.Release()
	}
	// A text set by hand is cut too.
	c := wire.Completion{ID: 9, Failed: true, Err: []byte(strings.Repeat("x", 2*wire.MaxErrLen))}
	if err := w.Post(&c, nil, nil); err != nil {
		t.Fatal(err)
	}
	var got wire.Completion
	if err := got.Decode(r.completion.Peek()); err != nil || len(got.Err) > wire.MaxErrLen {
		t.Fatalf("hand-set error: %v, %d bytes", err, len(got.Err))
	}
}

// TestRingsPostResched: a worker that runs kernel after kernel passes
// through the Go scheduler every shm.ReschedEvery of completion times
// (shm.Resched), which Post reads from the completions' end times.
func TestRingsPostResched(t *testing.T) {
	r := newRingsRig(t, false)
	w, err := OpenRings(r.a, r.spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	const every = shm.ReschedEvery
	for i, s := range []struct {
		end  int64 // the completion's EndNs, the last pass having been at every
		want bool  // whether Post passed through the scheduler
	}{
		{0, false}, // no end time: nothing to go by
		{every + 1_000_000, false},
		{2*every - 1, false},
		{2 * every, true},
		{3 * every, true},
	} {
		w.resched = shm.Resched{}
		w.resched.Tick(every)
		c := wire.Completion{ID: uint64(i + 1), EndNs: s.end}
		if err := w.Post(&c, nil, nil); err != nil {
			t.Fatal(err)
		}
		r.completion.Release()
		// The last pass is at every, or at s.end if Post made one: a
		// probe ReschedEvery less 1 ns after the later of s.end and
		// every+1 is due only in the first case.
		if got := !w.resched.Tick(max(s.end, every+1) + every - 1); got != s.want {
			t.Errorf("completion ending at %d ns: rescheduled %v, want %v", s.end, got, s.want)
		}
	}
}

// TestRingsBatching checks the completion rule: with tasks queued the
// core's bell rings once half the work is done and for the last task, for
// every task while the bell is urgent, and Flush rings only after a post.
func TestRingsBatching(t *testing.T) {
	r := newRingsRig(t, true)
	w, err := OpenRings(r.a, r.spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(ring *shm.Ring) {
		c := wire.Completion{ID: 1}
		if err := w.Post(&c, nil, nil); err != nil {
			t.Fatal(err)
		}
		r.completion.Release()
		ring.Release()
		w.Completed()
	}
	rings := func() uint32 { return w.CoreBell.Seq() }

	// The rig's rings produce; w's consume, as the driver does.
	// Four tasks, two on each ring: the bell rings when what ran since
	// the last ring reaches what is left: after the second (2 run, 2
	// left), the third (1, 1) and the fourth (1, 0), never after the first.
	for id := uint64(1); id <= 2; id++ {
		r.exec(t, r.dispatch, id)
		r.exec(t, r.sched, id+2)
	}
	var seen []uint32
	for _, ring := range []*shm.Ring{w.Dispatch, w.Dispatch, w.Sched, w.Sched} {
		if ring.Peek() == nil {
			t.Fatal("no message")
		}
		run(ring)
		seen = append(seen, rings())
	}
	if want := []uint32{0, 1, 2, 3}; !equal(seen, want) {
		t.Fatalf("bell count after each task %v, want %v", seen, want)
	}

	// Urgent: every task rings.
	w.CoreBell.AddUrgent(1)
	for id := uint64(1); id <= 3; id++ {
		r.exec(t, r.dispatch, id)
	}
	before := rings()
	for i := 0; i < 3; i++ {
		w.Dispatch.Peek()
		run(w.Dispatch)
	}
	if got := rings() - before; got != 3 {
		t.Fatalf("urgent: %d rings for 3 tasks", got)
	}
	w.CoreBell.AddUrgent(-1)

	// Flush rings once after posts, never without one.
	before = rings()
	w.Flush()
	if rings() != before {
		t.Fatal("Flush rang with nothing posted")
	}
	for i := 0; i < 2; i++ {
		c := wire.Completion{ID: 5}
		if err := w.Post(&c, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	w.Flush()
	if got := rings() - before; got != 1 {
		t.Fatalf("Flush after two posts rang %d times, want 1", got)
	}
}

// TestRingsSleep: Idle notes when the worker slept on its bell and the
// next completion posted carries it (first sleep's start to last sleep's
// end), once; a wait that ends while polling is no sleep.
func TestRingsSleep(t *testing.T) {
	const nap = 40 * time.Millisecond
	never := func() bool { return false }
	cases := []struct {
		name string
		// idle runs the worker's waits; it returns the earliest and latest
		// times the sleep may start and end at (0, 0: no sleep).
		idle func(t *testing.T, r *ringsRig, w *Rings) (from, to int64)
		// given is the sleep the driver set on the completion itself.
		given [2]int64
		// min is the least sleep wanted.
		min time.Duration
		// spin is OpenRings' spin (50 when 0, -1 for none).
		spin int
	}{
		{name: "work waiting: no sleep", idle: func(t *testing.T, r *ringsRig, w *Rings) (int64, int64) {
			r.exec(t, r.dispatch, 1)
			if !w.Idle(w.HasWork, time.Second) {
				t.Fatal("Idle did not see the work")
			}
			w.Dispatch.Release()
			return 0, 0
		}},
		{name: "timed out", min: nap, idle: func(t *testing.T, r *ringsRig, w *Rings) (int64, int64) {
			t0 := wire.Now()
			if w.Idle(never, nap) {
				t.Fatal("Idle returned true")
			}
			return t0, wire.Now()
		}},
		{name: "two timeouts merge", min: 2 * nap, idle: func(t *testing.T, r *ringsRig, w *Rings) (int64, int64) {
			t0 := wire.Now()
			w.Idle(never, nap)
			w.Idle(never, nap)
			return t0, wire.Now()
		}},
		// No polls, so that the sleep starts at once: on a loaded machine
		// 50 polls, each yielding, may take the whole nap.
		{name: "woken by the bell", min: nap / 2, spin: -1, idle: func(t *testing.T, r *ringsRig, w *Rings) (int64, int64) {
			t0 := wire.Now()
			var woken atomic.Bool
			go func() {
				time.Sleep(nap)
				woken.Store(true)
				w.Bell.Ring()
			}()
			if !w.Idle(woken.Load, 10*time.Second) {
				t.Fatal("Idle timed out")
			}
			return t0, wire.Now()
		}},
		{name: "merged with the driver's own", min: nap, given: [2]int64{1000, 2000}, idle: func(t *testing.T, r *ringsRig, w *Rings) (int64, int64) {
			t0 := wire.Now()
			w.Idle(never, nap)
			return t0, wire.Now()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRingsRig(t, false)
			spin := 50
			if tc.spin != 0 {
				spin = max(tc.spin, 0)
			}
			w, err := OpenRings(r.a, r.spec, spin)
			if err != nil {
				t.Fatal(err)
			}
			from, to := tc.idle(t, r, w)
			post := func() wire.Completion {
				t.Helper()
				c := wire.Completion{ID: 7, SleepStartNs: tc.given[0], SleepEndNs: tc.given[1]}
				if err := w.Post(&c, nil, nil); err != nil {
					t.Fatal(err)
				}
				var got wire.Completion
				if err := got.Decode(r.completion.Peek()); err != nil {
					t.Fatal(err)
				}
				r.completion.Release()
				return got
			}
			got := post()
			s, e := got.SleepStartNs, got.SleepEndNs
			switch {
			case from == 0 && (s != 0 || e != 0):
				t.Fatalf("reported a sleep from %d to %d, want none", s, e)
			case from == 0:
			case tc.given[1] != 0 && (s != tc.given[0] || e < to-int64(time.Millisecond) || e > to):
				t.Fatalf("sleep %d..%d, want the driver's start %d and Idle's end near %d", s, e, tc.given[0], to)
			case tc.given[1] == 0 && (s < from || e > to || e-s < int64(tc.min)):
				t.Fatalf("sleep %d..%d (%v), want within %d..%d and at least %v", s, e, time.Duration(e-s), from, to, tc.min)
			}
			// Once only: the next completion has slept nowhere since.
			tc.given = [2]int64{}
			if got := post(); got.SleepStartNs != 0 || got.SleepEndNs != 0 {
				t.Fatalf("the next completion reports a sleep %d..%d too", got.SleepStartNs, got.SleepEndNs)
			}
		})
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
