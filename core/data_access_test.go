package core_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

var (
	addF64Cl = &core.Codelet{Name: "add", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF64}, Modes: []core.Mode{core.RW, core.R}}
	zeroCl   = &core.Codelet{Name: "zero", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.W}}
	// contribute adds its second buffer into its first, a REDUX one.
	contribute = &core.Codelet{Name: "contribute", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF64}, Modes: []core.Mode{core.Redux, core.R}}
	scal64RW   = &core.Codelet{Name: "scal64", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF64}, Modes: []core.Mode{core.RW}}
	axpy64     = &core.Codelet{Name: "axpy64", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AxpyF64}, Modes: []core.Mode{core.R, core.RW}}
)

// TestReduxSum: many REDUX contributions from both workers, in several
// phases, each folded into the data before the next access in another mode
// (a task, an acquisition, Unregister), give the sequential sum.
func TestReduxSum(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	x := []float64{3}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	srcs := make([]*core.Handle, 10)
	for k := range srcs {
		srcs[k], _ = core.RegisterVector(rt, []float64{float64(k + 1)})
	}
	want := 3.0
	contributions := func(n int) {
		for i := 0; i < n; i++ {
			task := &core.Task{Codelet: contribute, Handles: []*core.Handle{h, srcs[i%10]}}
			if i < 100 {
				// Both workers contribute, whatever the scheduler does.
				task.ExecuteOnWorker, task.Worker = true, i%2
			}
			submit(t, rt, task)
			want += float64(i%10 + 1)
		}
	}
	contributions(1000)
	submit(t, rt, &core.Task{Codelet: scal64RW, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()})
	want *= 2
	contributions(200)
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	if x[0] != want {
		t.Errorf("after the acquisition: %v, want %v", x[0], want)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	contributions(10)
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != want {
		t.Errorf("after Unregister: %v, want %v", x[0], want)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
}

// TestReduxAtShutdown: contributions still pending at Shutdown reach the
// application's memory.
func TestReduxAtShutdown(t *testing.T) {
	rt, err := core.Init(t.Context(), core.Options{Config: testConfig(pluginDir)})
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{1}
	h, _ := core.RegisterVector(rt, x)
	one, _ := core.RegisterVector(rt, []float64{1})
	if err := h.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		submit(t, rt, &core.Task{Codelet: contribute, Handles: []*core.Handle{h, one}})
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 51 {
		t.Errorf("after Shutdown: %v, want 51", x[0])
	}
}

// TestReduxConcurrent: REDUX tasks do not wait for each other: one
// completes while another, on the other worker, is blocked.
func TestReduxConcurrent(t *testing.T) {
	gate, openGate := newGate()
	add1 := func(ctx *kernel.Context) error {
		ctx.Buffers[0].Float64s()[0]++
		return nil
	}
	rt := start(t, withKernels(
		kernel.Kernel{Name: "test_redux_gate", Func: func(ctx *kernel.Context) error { <-gate; return add1(ctx) }},
		kernel.Kernel{Name: "test_redux_add1", Func: add1}))
	t.Cleanup(openGate)
	x := []float64{10}
	h, _ := core.RegisterVector(rt, x)
	if err := h.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	gated := &core.Codelet{Name: "redux-gate", Kernels: map[driver.Arch]string{driver.CPU: "test_redux_gate"}, Modes: []core.Mode{core.Redux}}
	plain := &core.Codelet{Name: "redux-add1", Kernels: map[driver.Arch]string{driver.CPU: "test_redux_add1"}, Modes: []core.Mode{core.Redux}}
	a := &core.Task{Codelet: gated, Handles: []*core.Handle{h}, ExecuteOnWorker: true, Worker: 0}
	b := &core.Task{Codelet: plain, Handles: []*core.Handle{h}, ExecuteOnWorker: true, Worker: 1}
	submit(t, rt, a, b)
	ch := make(chan error, 1)
	go func() { ch <- rt.Wait(b) }()
	done(t, "a REDUX task while another one is blocked", ch)
	for _, s := range rt.TaskSuccessors(a) {
		if s == b {
			t.Error("a REDUX task waits for another")
		}
	}
	openGate()
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if x[0] != 12 {
		t.Errorf("x = %v, want 12", x[0])
	}
}

func TestAccessModeErrors(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, _ := core.RegisterVector(rt, []float64{1})
	noMethods, _ := core.RegisterVector(rt, []float64{1})
	noSeq, _ := core.RegisterVector(rt, []float64{1})
	noSeq.SetSequentialConsistency(false)
	if err := noSeq.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	if err := h.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	void, _ := rt.RegisterVoid()
	reduxVar := &core.Codelet{Name: "redux-var", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, NBuffers: core.VariableBuffers}
	nowhereRedux := &core.Codelet{Name: "nowhere-redux", Where: core.Nowhere, Modes: []core.Mode{core.Redux}}
	commuteAlone := &core.Codelet{Name: "commute-alone", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, Modes: []core.Mode{core.Commute}}
	readCommute := &core.Codelet{Name: "read-commute", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, Modes: []core.Mode{core.R | core.Commute}}
	submits := []struct {
		name string
		task *core.Task
		is   error
		want string
	}{
		{"REDUX without methods", &core.Task{Codelet: reduxVar, Handles: []*core.Handle{noMethods}, Modes: []core.Mode{core.Redux}}, core.ErrInvalidTask, "has no reduction methods"},
		{"REDUX without task consistency", &core.Task{Codelet: reduxVar, Handles: []*core.Handle{h}, Modes: []core.Mode{core.Redux}, NoSequentialConsistency: true}, core.ErrInvalidTask, "REDUX needs sequential consistency"},
		{"REDUX without handle consistency", &core.Task{Codelet: reduxVar, Handles: []*core.Handle{noSeq}, Modes: []core.Mode{core.Redux}}, core.ErrInvalidTask, "sequential consistency is off"},
		{"REDUX nowhere", &core.Task{Codelet: nowhereRedux, Handles: []*core.Handle{h}}, core.ErrInvalidTask, "runs nowhere"},
		{"COMMUTE alone", &core.Task{Codelet: commuteAlone, Handles: []*core.Handle{h}}, core.ErrInvalidTask, "invalid mode"},
		{"R|COMMUTE", &core.Task{Codelet: readCommute, Handles: []*core.Handle{h}}, core.ErrInvalidTask, "invalid mode"},
		{"SCRATCH|W", &core.Task{Codelet: reduxVar, Handles: []*core.Handle{h}, Modes: []core.Mode{core.Scratch | core.W}}, core.ErrInvalidTask, "invalid mode"},
	}
	for _, c := range submits {
		t.Run(c.name, func(t *testing.T) {
			err := rt.Submit(c.task)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Submit: %v, want %v containing %q", err, c.is, c.want)
			}
		})
	}
	methods := []struct {
		name         string
		h            *core.Handle
		redux, init_ *core.Codelet
		is           error
		want         string
	}{
		{"nil init", h, addF64Cl, nil, core.ErrInvalidTask, "both the reduction and the init codelet"},
		{"redux with one buffer", h, zeroCl, zeroCl, core.ErrInvalidTask, "takes 1 buffers, want 2"},
		{"init with two buffers", h, addF64Cl, addF64Cl, core.ErrInvalidTask, "takes 2 buffers, want 1"},
		{"redux source written", h, &core.Codelet{Name: "rw-rw", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF64}, Modes: []core.Mode{core.RW, core.RW}}, zeroCl, core.ErrInvalidTask, "buffer 1 has mode RW, want R"},
		{"init reads only", h, addF64Cl, &core.Codelet{Name: "r", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.R}}, core.ErrInvalidTask, "buffer 0 has mode R, want W"},
		{"void handle", void, addF64Cl, zeroCl, core.ErrInvalidData, "REDUX is for variables"},
		{"unknown kernel", h, addF64Cl, &core.Codelet{Name: "nokernel", Kernels: map[driver.Arch]string{driver.CPU: "no_such_kernel"}, Modes: []core.Mode{core.W}}, core.ErrNoWorker, "init codelet"},
	}
	for _, c := range methods {
		t.Run(c.name, func(t *testing.T) {
			err := c.h.SetReductionMethods(c.redux, c.init_)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("SetReductionMethods: %v, want %v containing %q", err, c.is, c.want)
			}
		})
	}
	for _, m := range []core.Mode{core.Redux, core.Scratch, core.Commute, 0} {
		if err := h.Acquire(m); !errors.Is(err, core.ErrInvalidTask) {
			t.Errorf("Acquire(%v): %v, want ErrInvalidTask", m, err)
		}
		if err := h.TryAcquire(m); !errors.Is(err, core.ErrInvalidTask) {
			t.Errorf("TryAcquire(%v): %v, want ErrInvalidTask", m, err)
		}
		if err := h.AcquireSequentialConsistency(m, false); !errors.Is(err, core.ErrInvalidTask) {
			t.Errorf("AcquireSequentialConsistency(%v): %v, want ErrInvalidTask", m, err)
		}
	}
}

// newGate returns a channel for gate kernels to block on and the function
// that opens it, once. Tests also open it at cleanup, before Shutdown, so
// that a failing test does not leave Shutdown waiting for a blocked kernel.
func newGate() (chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

// appendArg is the argument of the test_append kernel.
func appendArg(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

// appender is a kernel that appends its argument to a log vector (element 0
// counts the entries) and notes any other appender running at the same
// time on the same log.
type appender struct {
	inside  atomic.Int32
	overlap atomic.Bool
}

func (a *appender) kernel(name string, gate <-chan struct{}) kernel.Kernel {
	return kernel.Kernel{Name: name, Func: func(ctx *kernel.Context) error {
		if gate != nil {
			<-gate
		}
		if a.inside.Add(1) > 1 {
			a.overlap.Store(true)
		}
		defer a.inside.Add(-1)
		d := ctx.Buffers[0].Float64s()
		n := int(d[0])
		for i := 0; i < 20; i++ {
			runtime.Gosched() // leave room for another appender to show
		}
		d[1+n] = float64(binary.LittleEndian.Uint32(ctx.Arg))
		d[0] = float64(n + 1)
		return nil
	}}
}

// TestCommute: COMMUTE tasks run after the plain writer before them, before
// the reader after them, one at a time, and wait for no one else.
func TestCommute(t *testing.T) {
	gate, openGate := newGate()
	var app appender
	var seen atomic.Int64
	rt := start(t, withKernels(
		app.kernel("test_gate_append", gate),
		app.kernel("test_append", nil),
		kernel.Kernel{Name: "test_count", Func: func(ctx *kernel.Context) error {
			seen.Store(int64(ctx.Buffers[0].Float64s()[0]))
			return nil
		}}))
	t.Cleanup(openGate)
	logv := make([]float64, 64)
	h, _ := core.RegisterVector(rt, logv)
	first := &core.Task{Name: "first", Handles: []*core.Handle{h}, Arg: appendArg(100),
		Codelet: &core.Codelet{Name: "gate-append", Kernels: map[driver.Arch]string{driver.CPU: "test_gate_append"}, Modes: []core.Mode{core.RW}}}
	submit(t, rt, first)
	commute := &core.Codelet{Name: "append", Kernels: map[driver.Arch]string{driver.CPU: "test_append"}, Modes: []core.Mode{core.RW | core.Commute}}
	var group []*core.Task
	for i := 1; i <= 20; i++ {
		c := &core.Task{Name: fmt.Sprint("commute ", i), Codelet: commute, Handles: []*core.Handle{h}, Arg: appendArg(i)}
		submit(t, rt, c)
		group = append(group, c)
	}
	last := &core.Task{Name: "last", Handles: []*core.Handle{h},
		Codelet: &core.Codelet{Name: "count", Kernels: map[driver.Arch]string{driver.CPU: "test_count"}, Modes: []core.Mode{core.R}}}
	submit(t, rt, last)

	// While first runs, the graph is: first -> every commute task -> last.
	succ := map[*core.Task]bool{}
	for _, s := range rt.TaskSuccessors(first) {
		succ[s] = true
	}
	for _, c := range group {
		if !succ[c] {
			t.Errorf("%s does not wait for the writer before it", c.Name)
		}
	}
	for _, s := range rt.TaskSuccessors(group[0]) {
		if s != last {
			t.Errorf("%s waits for %s", s.Name, group[0].Name)
		}
	}
	openGate()
	if err := rt.Wait(last); err != nil {
		t.Fatal(err)
	}
	if seen.Load() != 21 {
		t.Errorf("the reader after the commute tasks saw %d entries, want 21", seen.Load())
	}
	if app.overlap.Load() {
		t.Error("two commute tasks ran at once")
	}
	if err := h.Acquire(core.R); err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if logv[0] != 21 || logv[1] != 100 {
		t.Fatalf("log %v: want 21 entries, 100 first", logv[:22])
	}
	got := append([]float64(nil), logv[2:22]...)
	sort.Float64s(got)
	for i, v := range got {
		if v != float64(i+1) {
			t.Fatalf("commute entries %v: want 1 to 20 once each", logv[2:22])
		}
	}
}

// TestDiningPhilosophers: philosopher i takes forks i and i+1 (RW both), in
// many rounds, with the forks' accesses unordered (sequential consistency
// off, with and without an arbiter) or commuting. It never deadlocks, and
// no fork is ever used by two philosophers at once.
func TestDiningPhilosophers(t *testing.T) {
	const n, rounds = 5, 40
	var inside [n]atomic.Int32
	var clash atomic.Bool
	eat := kernel.Kernel{Name: "test_eat", Func: func(ctx *kernel.Context) error {
		var ids [2]int
		for k := range ids {
			ids[k] = int(ctx.Buffers[k].Float64s()[1])
			if inside[ids[k]].Add(1) > 1 {
				clash.Store(true)
			}
		}
		for i := 0; i < 10; i++ {
			runtime.Gosched()
		}
		for k := range ids {
			ctx.Buffers[k].Float64s()[0]++
			inside[ids[k]].Add(-1)
		}
		return nil
	}}
	cases := []struct {
		name    string
		mode    core.Mode
		arbiter bool
		plugins bool
	}{
		{"unordered", core.RW, false, false},
		{"unordered-arbiter", core.RW, true, false},
		{"commute", core.RW | core.Commute, false, false},
		{"commute-arbiter", core.RW | core.Commute, true, false},
		{"unordered-plugins", core.RW, false, true},
		{"commute-arbiter-plugins", core.RW | core.Commute, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clash.Store(false)
			opts := withKernels(eat)
			cl := &core.Codelet{Name: "eat", Kernels: map[driver.Arch]string{driver.CPU: "test_eat"}, NBuffers: core.VariableBuffers}
			if c.plugins {
				opts = core.Options{Config: testConfig(pluginDir)}
				cl = emptyVar
			}
			rt := start(t, opts)
			if c.mode&core.Commute == 0 {
				rt.SetDefaultSequentialConsistency(false)
			}
			var arb *core.Arbiter
			if c.arbiter {
				arb = rt.NewArbiter()
			}
			forks := make([][]float64, n)
			hs := make([]*core.Handle, n)
			for i := range hs {
				forks[i] = []float64{0, float64(i)}
				hs[i], _ = core.RegisterVector(rt, forks[i])
				if arb != nil {
					if err := hs[i].AssignArbiter(arb); err != nil {
						t.Fatal(err)
					}
				}
			}
			for r := 0; r < rounds; r++ {
				for i := 0; i < n; i++ {
					submit(t, rt, &core.Task{Codelet: cl, Handles: []*core.Handle{hs[i], hs[(i+1)%n]}, Modes: []core.Mode{c.mode, c.mode}})
				}
			}
			ch := make(chan error, 1)
			go func() { ch <- rt.WaitForAll() }()
			done(t, "the philosophers' meals", ch)
			if clash.Load() {
				t.Error("a fork was used by two philosophers at once")
			}
			for i, h := range hs {
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
				if want := 2.0 * rounds; !c.plugins && forks[i][0] != want {
					t.Errorf("fork %d used %v times, want %v", i, forks[i][0], want)
				}
			}
			if arb != nil {
				if err := arb.Destroy(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestTryAcquire: TryAcquire fails at once, leaving nothing behind, while a
// conflicting task or acquisition is pending, and acquires otherwise.
func TestTryAcquire(t *testing.T) {
	gate, openGate := newGate()
	rt := start(t, withKernels(gateKernel("test_gate", gate)))
	t.Cleanup(openGate)
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}, Modes: []core.Mode{core.RW}}
	x := []float64{1}
	h, _ := core.RegisterVector(rt, x)
	writer := &core.Task{Name: "writer", Codelet: gated, Handles: []*core.Handle{h}}
	submit(t, rt, writer)
	eventually(t, "the writer running", func() bool { return writer.Status() == core.StatusRunning })
	wouldBlock := func(m core.Mode, why string) {
		t.Helper()
		err := h.TryAcquire(m)
		if !errors.Is(err, core.ErrWouldBlock) || !strings.Contains(err.Error(), why) {
			t.Fatalf("TryAcquire(%v): %v, want ErrWouldBlock saying %q", m, err, why)
		}
	}
	wouldBlock(core.R, `task "writer" is pending`)
	wouldBlock(core.RW, `task "writer" is pending`)
	after := &core.Task{Name: "after", Codelet: emptyRW, Handles: []*core.Handle{h}}
	submit(t, rt, after)
	wouldBlock(core.R, `task "after" is pending`)
	openGate()
	if err := rt.Wait(after); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := h.TryAcquire(core.R); err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	wouldBlock(core.RW, "an acquisition is pending")
	h.Release()
	h.Release()
	if err := h.TryAcquire(core.RW); err != nil {
		t.Fatal(err)
	}
	next := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}}
	submit(t, rt, next)
	eventually(t, "the task waiting for the acquisition", func() bool { return next.Status() == core.StatusBlockedOnData })
	h.Release()
	if err := rt.Wait(next); err != nil {
		t.Fatal(err)
	}
}

// TestTryAcquireUnordered: on a handle without sequential consistency,
// TryAcquire only fails while the data lock is held.
func TestTryAcquireUnordered(t *testing.T) {
	gate, openGate := newGate()
	rt := start(t, withKernels(gateKernel("test_gate", gate)))
	t.Cleanup(openGate)
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}, Modes: []core.Mode{core.RW}}
	h, _ := core.RegisterVector(rt, []float64{1})
	h.SetSequentialConsistency(false)
	running := &core.Task{Codelet: gated, Handles: []*core.Handle{h}}
	submit(t, rt, running)
	eventually(t, "the task running", func() bool { return running.Status() == core.StatusRunning })
	if err := h.TryAcquire(core.R); !errors.Is(err, core.ErrWouldBlock) || !strings.Contains(err.Error(), "holds the data") {
		t.Fatalf("TryAcquire while a task holds the data: %v", err)
	}
	openGate()
	if err := rt.Wait(running); err != nil {
		t.Fatal(err)
	}
	if err := h.TryAcquire(core.RW); err != nil {
		t.Fatal(err)
	}
	h.Release()
}

// TestAcquireUnordered: an acquisition without sequential consistency does
// not wait for the tasks submitted before it, only for the data lock; a
// task that becomes ready meanwhile waits for its Release, and sees what was
// written under it.
func TestAcquireUnordered(t *testing.T) {
	gate, openGate := newGate()
	var saw atomic.Int64
	rt := start(t, withKernels(gateKernel("test_gate", gate),
		kernel.Kernel{Name: "test_see", Func: func(ctx *kernel.Context) error {
			saw.Store(int64(ctx.Buffers[1].Float64s()[0]))
			return nil
		}}))
	t.Cleanup(openGate)
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}, Modes: []core.Mode{core.RW}}
	see := &core.Codelet{Name: "see", Kernels: map[driver.Arch]string{driver.CPU: "test_see"}, NBuffers: core.VariableBuffers}
	other, _ := core.RegisterVector(rt, []float64{0})
	x := []float64{1}
	h, _ := core.RegisterVector(rt, x)
	submit(t, rt, &core.Task{Codelet: gated, Handles: []*core.Handle{other}})
	prologue := make(chan error, 1)
	pending := &core.Task{Codelet: see, Handles: []*core.Handle{other, h}, Modes: []core.Mode{core.RW, core.RW},
		PrologueCallback: func(*core.Task) { prologue <- nil }}
	submit(t, rt, pending)
	ch := make(chan error, 1)
	go func() { ch <- h.AcquireSequentialConsistency(core.RW, false) }()
	done(t, "an unordered acquisition while an earlier task is pending", ch)
	openGate()
	done(t, "the pending task becoming ready", prologue)
	eventually(t, "the pending task waiting for the data lock", func() bool { return pending.Status() == core.StatusBlockedOnData })
	x[0] = 5
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(pending); err != nil {
		t.Fatal(err)
	}
	if saw.Load() != 5 {
		t.Errorf("the task saw %d: it ran while the data was acquired", saw.Load())
	}
}

// TestSequentialConsistencyFlags covers the flags, and unordered tasks:
// they do not wait for the tasks before them, hold the data one at a time,
// and Unregister waits for them.
func TestSequentialConsistencyFlags(t *testing.T) {
	gate, openGate := newGate()
	gate2, openGate2 := newGate()
	rt := start(t, withKernels(gateKernel("test_gate", gate),
		kernel.Kernel{Name: "test_write42", Func: func(ctx *kernel.Context) error {
			<-gate2
			ctx.Buffers[0].Float64s()[0] = 42
			return nil
		}}))
	t.Cleanup(openGate)
	t.Cleanup(openGate2)
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}, Modes: []core.Mode{core.RW}}
	if !rt.DefaultSequentialConsistency() {
		t.Fatal("sequential consistency is off by default")
	}
	on, _ := core.RegisterVector(rt, []float64{0})
	rt.SetDefaultSequentialConsistency(false)
	x := make([]float64, 8)
	off, _ := core.RegisterVector(rt, x)
	rt.SetDefaultSequentialConsistency(true)
	if !on.SequentialConsistency() || off.SequentialConsistency() || rt.DefaultSequentialConsistency() != true {
		t.Fatalf("flags: on %v, off %v, default %v", on.SequentialConsistency(), off.SequentialConsistency(), rt.DefaultSequentialConsistency())
	}

	// A task waiting for another handle does not hold back a later one on
	// off: they are not ordered. (Pinned apart: a task queued on the
	// worker of the gated one would wait for it whatever the data.)
	submit(t, rt, &core.Task{Codelet: gated, Handles: []*core.Handle{on}, ExecuteOnWorker: true, Worker: 0})
	earlier := &core.Task{Codelet: emptyVar, Handles: []*core.Handle{on, off}, Modes: []core.Mode{core.R, core.RW}}
	later := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{off}, ExecuteOnWorker: true, Worker: 1}
	submit(t, rt, earlier, later)
	ch := make(chan error, 1)
	go func() { ch <- rt.Wait(later) }()
	done(t, "a later unordered task while an earlier one waits", ch)
	openGate()
	if err := rt.Wait(earlier); err != nil {
		t.Fatal(err)
	}

	// Unordered writers exclude each other.
	writer := &core.Task{Codelet: &core.Codelet{Name: "write42", Kernels: map[driver.Arch]string{driver.CPU: "test_write42"}, Modes: []core.Mode{core.RW}}, Handles: []*core.Handle{off}}
	submit(t, rt, writer)
	eventually(t, "the writer running", func() bool { return writer.Status() == core.StatusRunning })
	second := &core.Task{Codelet: emptyRW, Handles: []*core.Handle{off}}
	submit(t, rt, second)
	eventually(t, "the second writer waiting for the data lock", func() bool { return second.Status() == core.StatusBlockedOnData })

	// Partition children inherit the flag.
	kids, err := on.Partition(core.VectorBlocks(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !kids[0].SequentialConsistency() {
		t.Error("child of an ordered handle is unordered")
	}
	if err := on.Unpartition(); err != nil {
		t.Fatal(err)
	}

	// Unregister waits for the unordered writer.
	ch = make(chan error, 1)
	go func() { ch <- off.Unregister() }()
	openGate2()
	done(t, "Unregister", ch)
	if x[0] != 42 {
		t.Errorf("after Unregister: %v, want the unordered writer's 42", x[0])
	}
}

// TestArbiterErrors covers misuse of arbiters.
func TestArbiterErrors(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	h, _ := core.RegisterVector(rt, []float64{1})
	used, _ := core.RegisterVector(rt, []float64{1})
	submit(t, rt, &core.Task{Codelet: emptyRW, Handles: []*core.Handle{used}, Synchronous: true})
	a := rt.NewArbiter()
	if err := h.AssignArbiter(nil); !errors.Is(err, core.ErrInvalidData) {
		t.Errorf("nil arbiter: %v", err)
	}
	if err := used.AssignArbiter(a); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "assign the arbiter first") {
		t.Errorf("arbiter after an access: %v", err)
	}
	if err := h.AssignArbiter(a); err != nil {
		t.Fatal(err)
	}
	if err := h.AssignArbiter(rt.NewArbiter()); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "already has one") {
		t.Errorf("second arbiter: %v", err)
	}
	if err := a.Destroy(); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "1 handles") {
		t.Errorf("Destroy with a handle: %v", err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := a.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := a.Destroy(); !errors.Is(err, core.ErrInvalidData) {
		t.Errorf("second Destroy: %v", err)
	}
	other, _ := core.RegisterVector(rt, []float64{1})
	if err := other.AssignArbiter(a); !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), "destroyed") {
		t.Errorf("destroyed arbiter: %v", err)
	}
}

// TestScratch: SCRATCH buffers never touch the handle's data, each running
// task has its own, and they are not ordered with the handle's accesses.
func TestScratch(t *testing.T) {
	t.Run("plugins", func(t *testing.T) {
		rt := start(t, core.Options{Config: testConfig(pluginDir)})
		// In the arena, so that any write to the handle's data shows.
		s, err := core.Malloc[float64](rt, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s {
			s[i] = 7
		}
		h, _ := core.RegisterVector(rt, s)
		cl := &core.Codelet{Name: "zero-scratch", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.Scratch}}
		for i := 0; i < 100; i++ {
			submit(t, rt, &core.Task{Codelet: cl, Handles: []*core.Handle{h}})
		}
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		if err := h.Acquire(core.R); err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		for i, v := range s {
			if v != 7 {
				t.Fatalf("element %d = %v: a SCRATCH task wrote the handle's data", i, v)
			}
		}
	})
	t.Run("in-process", func(t *testing.T) {
		gate, openGate := newGate()
		var shared atomic.Bool
		rt := start(t, withKernels(gateKernel("test_gate", gate),
			kernel.Kernel{Name: "test_scratch", Func: func(ctx *kernel.Context) error {
				b := ctx.Buffers[0]
				if b.Interface != kernel.Vector || b.NX != 4 || b.Mode != kernel.RW {
					return fmt.Errorf("scratch buffer %+v, want a 4-element vector in RW", b.Layout)
				}
				d := b.Float64s()
				id := float64(ctx.TaskID)
				for i := range d {
					d[i] = id
				}
				for i := 0; i < 20; i++ {
					runtime.Gosched()
				}
				for _, v := range d {
					if v != id {
						shared.Store(true)
					}
				}
				return nil
			}}))
		t.Cleanup(openGate)
		s := []float64{7, 7, 7, 7}
		h, _ := core.RegisterVector(rt, s)
		gated := &core.Task{Codelet: &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}, Modes: []core.Mode{core.RW}}, Handles: []*core.Handle{h},
			ExecuteOnWorker: true, Worker: 0}
		submit(t, rt, gated)
		cl := &core.Codelet{Name: "scratch", Kernels: map[driver.Arch]string{driver.CPU: "test_scratch"}, Modes: []core.Mode{core.Scratch}}
		var ts []*core.Task
		for i := 0; i < 100; i++ {
			task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}}
			if i < 2 {
				task.ExecuteOnWorker, task.Worker = true, 1 // beside the gated task
			}
			submit(t, rt, task)
			ts = append(ts, task)
		}
		ch := make(chan error, 1)
		go func() { ch <- rt.WaitArray(ts[:2]...) }()
		done(t, "SCRATCH tasks while a writer holds the handle", ch)
		openGate()
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		if shared.Load() {
			t.Error("two running tasks shared a scratch buffer")
		}
		if err := h.Acquire(core.R); err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		for i, v := range s {
			if v != 7 {
				t.Fatalf("element %d = %v: a SCRATCH task wrote the handle's data", i, v)
			}
		}
	})
}

// TestRandomAccesses: readers and writers at random over a few handles
// give the sequential result. Writers scale by -1 or add one handle into
// another; readers copy a handle into a fresh snapshot.
func TestRandomAccesses(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	rng := rand.New(rand.NewSource(7))
	const nh = 3
	model := []float64{1, 2, 3}
	hs := make([]*core.Handle, nh)
	data := make([][]float64, nh)
	for i := range hs {
		data[i] = []float64{model[i]}
		hs[i], _ = core.RegisterVector(rt, data[i])
	}
	type snap struct {
		h    *core.Handle
		v    []float64
		want float64
	}
	var snaps []snap
	for op := 0; op < 300; op++ {
		i, j := rng.Intn(nh), rng.Intn(nh)
		switch r := rng.Intn(4); {
		case r == 0:
			submit(t, rt, &core.Task{Codelet: scal64RW, Handles: []*core.Handle{hs[i]}, Arg: blasarg.ScalArg{Alpha: -1}.Encode()})
			model[i] = -model[i]
		case r == 1 && i != j:
			alpha := float64(1 - 2*rng.Intn(2))
			submit(t, rt, &core.Task{Codelet: axpy64, Handles: []*core.Handle{hs[i], hs[j]}, Arg: blasarg.AxpyArg{Alpha: alpha}.Encode()})
			model[j] += alpha * model[i]
		default:
			v := []float64{0}
			sh, _ := core.RegisterVector(rt, v)
			submit(t, rt, &core.Task{Codelet: axpy64, Handles: []*core.Handle{hs[i], sh}, Arg: blasarg.AxpyArg{Alpha: 1}.Encode()})
			snaps = append(snaps, snap{sh, v, model[i]})
		}
		for _, m := range model {
			if math.Abs(m) > 1<<50 {
				t.Fatalf("the model left the exact range at op %d; pick another seed", op)
			}
		}
	}
	for k, s := range snaps {
		if err := s.h.Unregister(); err != nil {
			t.Fatal(err)
		}
		if s.v[0] != s.want {
			t.Errorf("snapshot %d = %v, want %v", k, s.v[0], s.want)
		}
	}
	for i, h := range hs {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
		if data[i][0] != model[i] {
			t.Errorf("handle %d = %v, want %v", i, data[i][0], model[i])
		}
	}
}

// TestReduxWithDevice: with a device memory node, REDUX tasks stay on the
// workers their init codelet runs on (here the RAM worker) even when their
// codelet has a device kernel, the reductions fetch the data the device
// wrote, and a task that must run on the device fails at submit. REDUX
// and SCRATCH buffers on the device itself: data_redux_test.go.
func TestReduxWithDevice(t *testing.T) {
	rt, _ := startWithDevice(t, 1<<20)
	add32 := &core.Codelet{Name: "add32", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF32}, Modes: []core.Mode{core.RW, core.R}}
	// On the device this kernel would scale instead of adding.
	contribute32 := &core.Codelet{Name: "contribute32", Modes: []core.Mode{core.Redux, core.R},
		Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF32, driver.OpenCL: "dev_scal_f32"}}
	scalOnDev := &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	x := []float32{1, 2, 3, 4}
	h, _ := core.RegisterVector(rt, x)
	ones, _ := core.RegisterVector(rt, []float32{1, 1, 1, 1})
	if err := h.SetReductionMethods(add32, zeroCl); err != nil {
		t.Fatal(err)
	}
	contributions := func(n int) {
		for i := 0; i < n; i++ {
			submit(t, rt, &core.Task{Codelet: contribute32, Handles: []*core.Handle{h, ones}, Arg: blasarg.ScalArg{Alpha: 0}.Encode()})
		}
	}
	contributions(20)
	scal(t, rt, scalOnDev, h, 2) // the device then holds the only valid copy
	contributions(10)
	scratch := &core.Codelet{Name: "zero-scratch", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.Scratch}}
	submit(t, rt, &core.Task{Codelet: scratch, Handles: []*core.Handle{h}})
	devOnly := &core.Codelet{Name: "redux-dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.Redux}}
	if err := rt.Submit(&core.Task{Codelet: devOnly, Handles: []*core.Handle{h}}); !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), "no worker can do both") {
		t.Errorf("REDUX task with a device kernel only: %v", err)
	}
	if err := rt.Submit(&core.Task{Codelet: contribute32, Handles: []*core.Handle{h, ones}, ExecuteOnWorker: true, Worker: 1}); !errors.Is(err, core.ErrNoWorker) {
		t.Errorf("REDUX task pinned to the device: %v", err)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if want := float32(i+1+20)*2 + 10; v != want {
			t.Errorf("x[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestReduxMethodsAgain: setting the reduction methods again between
// phases keeps every worker's buffer initialised once per phase.
func TestReduxMethodsAgain(t *testing.T) {
	rt := start(t, core.Options{Config: testConfig(pluginDir)})
	x := []float64{0}
	h, _ := core.RegisterVector(rt, x)
	one, _ := core.RegisterVector(rt, []float64{1})
	if err := h.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	want := 0.0
	phase := func(workers ...int) {
		t.Helper()
		for _, w := range workers {
			submit(t, rt, &core.Task{Codelet: contribute, Handles: []*core.Handle{h, one}, ExecuteOnWorker: true, Worker: w})
			want++
		}
		if err := h.Acquire(core.R); err != nil {
			t.Fatal(err)
		}
		if x[0] != want {
			t.Errorf("after contributions on workers %v: %v, want %v", workers, x[0], want)
		}
		h.Release()
	}
	phase(0, 1)
	phase(1)
	if err := h.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	phase(0)
	phase(1)
}

// The callback acquisitions take the same choice: unordered, the callback
// runs while an earlier task on the handle still waits; ordered, only after
// that task.
func TestAcquireCBSequentialConsistency(t *testing.T) {
	gate, openGate := newGate()
	var saw atomic.Int64
	rt := start(t, withKernels(gateKernel("test_gate", gate),
		kernel.Kernel{Name: "test_see", Func: func(ctx *kernel.Context) error {
			saw.Store(int64(ctx.Buffers[1].Float64s()[0]))
			return nil
		}}))
	t.Cleanup(openGate)
	gated := &core.Codelet{Name: "gated", Kernels: map[driver.Arch]string{driver.CPU: "test_gate"}, Modes: []core.Mode{core.RW}}
	see := &core.Codelet{Name: "see", Kernels: map[driver.Arch]string{driver.CPU: "test_see"}, NBuffers: core.VariableBuffers}
	other, _ := core.RegisterVector(rt, []float64{0})
	x := []float64{1}
	h, _ := core.RegisterVector(rt, x)
	submit(t, rt, &core.Task{Codelet: gated, Handles: []*core.Handle{other}})
	pending := &core.Task{Codelet: see, Handles: []*core.Handle{other, h}, Modes: []core.Mode{core.RW, core.RW}}
	submit(t, rt, pending)
	unordered := make(chan error, 1)
	if err := h.AcquireCBSequentialConsistency(core.RW, false, func(err error) { unordered <- err }); err != nil {
		t.Fatal(err)
	}
	done(t, "the unordered callback while an earlier task is pending", unordered)
	ordered := make(chan error, 1)
	if err := h.AcquireCBSequentialConsistency(core.R, true, func(err error) { ordered <- err }); err != nil {
		t.Fatal(err)
	}
	x[0] = 5
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ordered:
		t.Fatalf("the ordered callback ran (%v) before the task submitted earlier", err)
	case <-time.After(50 * time.Millisecond):
	}
	openGate()
	done(t, "the ordered callback after the task", ordered)
	if pending.Status() != core.StatusFinished {
		t.Errorf("ordered callback ran with the earlier task %v", pending.Status())
	}
	if saw.Load() != 5 {
		t.Errorf("the task saw %d, want the value written under the unordered hold", saw.Load())
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.AcquireCBSequentialConsistency(core.RW, false, nil); !errors.Is(err, core.ErrInvalidTask) {
		t.Errorf("nil callback: %v", err)
	}
}
