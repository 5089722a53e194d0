package dmda

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

const (
	cpu  = driver.CPU
	cuda = driver.CUDA
)

var bothArchs = driver.ArchBit(cpu) | driver.ArchBit(cuda)

// newPolicy returns a policy over workers of the given architectures (ids
// 0..n-1; CPUs on node 0, each GPU on its own node) with a clock the test
// moves and no environment.
func newPolicy(t *testing.T, clock *int64, sorted bool, archs ...driver.Arch) *Policy {
	t.Helper()
	p := New()
	p.now = func() int64 { return *clock }
	p.getenv = func(string) string { return "" }
	p.sorted = sorted
	var ws []sched.Worker
	for i, a := range archs {
		node := 0
		if a != cpu {
			node = i + 1
		}
		ws = append(ws, sched.Worker{ID: i, Arch: a, Node: node})
	}
	if err := p.Init(ws); err != nil {
		t.Fatal(err)
	}
	return p
}

// mk is a task runnable on CPU and CUDA with predicted lengths (-1:
// uncalibrated) and transfer times per node.
func mk(id uint64, cpuNs, cudaNs int64, transfer ...int64) *sched.Task {
	return &sched.Task{ID: id, ArchMask: bothArchs, Worker: -1, ReleasedBy: -1,
		Length: [3]int64{cpuNs, cudaNs, -1}, Transfer: transfer}
}

// queued lists the task ids queued per worker, in pop order, emptying the
// queues.
func queued(p *Policy) map[int][]uint64 {
	out := map[int][]uint64{}
	for _, s := range p.workers.Slots() {
		for t := p.Pop(s.ID); t != nil; t = p.Pop(s.ID) {
			out[s.ID] = append(out[s.ID], t.ID)
		}
	}
	return out
}

func TestDecisions(t *testing.T) {
	cases := []struct {
		name        string
		archs       []driver.Arch
		alpha, beta float64
		tasks       []*sched.Task
		want        string // fmt of queued(p)
	}{
		{"equal workers share", []driver.Arch{cpu, cpu},
			1, 1, []*sched.Task{mk(1, 100, -1), mk(2, 100, -1), mk(3, 100, -1), mk(4, 100, -1)},
			"map[0:[1 3] 1:[2 4]]"},
		{"faster architecture until its queue outweighs", []driver.Arch{cpu, cuda}, 1, 1,
			[]*sched.Task{mk(1, 1000, 300), mk(2, 1000, 300), mk(3, 1000, 300), mk(4, 1000, 300), mk(5, 1000, 300)},
			"map[0:[4] 1:[1 2 3 5]]"}, // cuda ends 300, 600, 900; then cpu 1000 < cuda 1200; then cuda 1200 < cpu 2000
		{"transfer outweighs speed", []driver.Arch{cpu, cuda}, 1, 1,
			[]*sched.Task{mk(1, 1000, 100, 0, 0, 2000)}, "map[0:[1]]"},
		{"beta 0 ignores transfers", []driver.Arch{cpu, cuda}, 1, 0,
			[]*sched.Task{mk(1, 1000, 100, 0, 0, 2000)}, "map[1:[1]]"},
		{"alpha 0 only minimises transfers", []driver.Arch{cpu, cuda}, 0, 1,
			[]*sched.Task{mk(1, 1000, 100, 50, 0, 10)}, "map[1:[1]]"},
		{"zero-length tasks still spread", []driver.Arch{cpu, cpu, cpu},
			1, 1, []*sched.Task{mk(1, 0, -1), mk(2, 0, -1), mk(3, 0, -1)}, "map[0:[1] 1:[2] 2:[3]]"},
		{"uncalibrated architecture gets the samples", []driver.Arch{cpu, cuda, cuda}, 1, 1,
			[]*sched.Task{mk(1, 10, -1), mk(2, 10, -1), mk(3, 10, -1)}, "map[1:[1 3] 2:[2]]"},
		{"nothing calibrated: spread by count", []driver.Arch{cpu, cuda}, 1, 1,
			[]*sched.Task{mk(1, -1, -1), mk(2, -1, -1), mk(3, -1, -1)}, "map[0:[1 3] 1:[2]]"},
		{"architecture mask", []driver.Arch{cpu, cuda}, 1, 1,
			[]*sched.Task{{ID: 1, ArchMask: driver.ArchBit(cpu), Worker: -1, Length: [3]int64{1e6, 1, 1}}}, "map[0:[1]]"},
		{"bound to a worker", []driver.Arch{cpu, cpu}, 1, 1,
			[]*sched.Task{{ID: 1, ArchMask: bothArchs, Worker: 1, Length: [3]int64{1, 1, 1}},
				{ID: 2, ArchMask: bothArchs, Worker: 1, Length: [3]int64{1, 1, 1}}}, "map[1:[1 2]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock int64 = 1000
			p := newPolicy(t, &clock, false, c.archs...)
			p.alpha, p.beta = c.alpha, c.beta
			for _, tk := range c.tasks {
				p.Push(tk)
			}
			if got := fmt.Sprint(queued(p)); got != c.want {
				t.Fatalf("queues %s, want %s", got, c.want)
			}
		})
	}
}

// TestExpectedFreeTime: what a worker is expected to be busy with shrinks
// as its running task ages and vanishes when PostExec reports it done.
func TestExpectedFreeTime(t *testing.T) {
	var clock int64 = 1000
	p := newPolicy(t, &clock, false, cpu, cpu)
	p.Push(mk(1, 1000, -1)) // worker 0
	p.Push(mk(2, 450, -1))  // worker 1 (free 0 < 1000)
	if p.Pop(0).ID != 1 {
		t.Fatal("worker 0 did not get task 1")
	}
	clock += 600 // task 1 has 400 ns left; worker 1 has 450 queued
	p.Push(mk(3, 100, -1))
	if got := fmt.Sprint(queued(p)); got != "map[0:[3] 1:[2]]" {
		t.Fatalf("queues %s: worker 0 should be free first (400 left of its running task)", got)
	}
	// Workers 0 and 1 run 3 and 2. Finished tasks stop counting.
	p.PostExec(0, 1, 600)
	p.PostExec(0, 3, 100)
	p.PostExec(1, 2, 450)
	for i, s := range p.workers.Slots() {
		if f := p.free(&s.State, 0, clock); f != clock || len(s.State.running) != 0 || s.State.runNs != 0 {
			t.Fatalf("worker %d expected free at %d (now %d), running %v", i, f, clock, s.State.running)
		}
	}
	// A running task that overruns its prediction leaves its worker free
	// now, not in the past.
	p.Push(mk(4, 100, -1))
	w := p.Pop(0)
	if w == nil {
		t.Fatal("worker 0 got nothing")
	}
	clock += 10_000
	if f := p.free(&p.workers.Get(0).State, 0, clock); f != clock {
		t.Fatalf("overrun task: free at %d, want now %d", f, clock)
	}
}

// TestSorted: dmdas pops by priority and counts only the queued work that
// runs before a task; dmda is FIFO and counts all of it.
func TestSorted(t *testing.T) {
	push := func(p *Policy) {
		for i := uint64(1); i <= 4; i++ { // 4 low-priority tasks on worker 0 (cpu-only), 4000 ns
			p.Push(&sched.Task{ID: i, ArchMask: driver.ArchBit(cpu), Worker: 0, Length: [3]int64{1000, -1, -1}})
		}
		p.Push(&sched.Task{ID: 5, Priority: 5, ArchMask: bothArchs, Worker: 1, Length: [3]int64{3000, 3000, -1}})
		p.Push(&sched.Task{ID: 6, Priority: 5, ArchMask: bothArchs, Worker: -1, Length: [3]int64{100, 100, -1}})
	}
	var clock int64 = 1
	p := newPolicy(t, &clock, true, cpu, cuda)
	push(p)
	if got := fmt.Sprint(queued(p)); got != "map[0:[6 1 2 3 4] 1:[5]]" {
		t.Fatalf("dmdas queues %s: task 6 should jump worker 0's queue", got)
	}
	p = newPolicy(t, &clock, false, cpu, cuda)
	push(p)
	if got := fmt.Sprint(queued(p)); got != "map[0:[1 2 3 4] 1:[5 6]]" {
		t.Fatalf("dmda queues %s", got)
	}
}

func TestParkedAndRemoved(t *testing.T) {
	var clock int64 = 1
	p := newPolicy(t, &clock, false, cpu, cpu)
	p.Push(&sched.Task{ID: 1, ArchMask: bothArchs, Worker: 7, Length: [3]int64{1, 1, 1}})
	p.Push(&sched.Task{ID: 2, ArchMask: driver.ArchBit(cuda), Worker: -1, Length: [3]int64{1, 1, 1}})
	for i := uint64(3); i < 9; i++ {
		p.Push(mk(i, 10, 10))
	}
	p.RemoveWorkers([]int{1})
	if got := fmt.Sprint(queued(p)); got != "map[0:[3 5 7 4 6 8]]" {
		t.Fatalf("after removing worker 1: %s", got)
	}
	p.AddWorkers([]sched.Worker{{ID: 7, Arch: cuda, Node: 1}})
	if got := fmt.Sprint(queued(p)); got != "map[7:[1 2]]" {
		t.Fatalf("after adding worker 7 (cuda): %s", got)
	}
	p.Push(mk(9, 1, 1))
	p.Deinit()
	for _, id := range []int{0, 7} {
		if tk := p.Pop(id); tk != nil {
			t.Fatalf("Pop(%d) after Deinit: task %d", id, tk.ID)
		}
	}
}

func TestConfigAndEnv(t *testing.T) {
	p := New()
	schema := p.ConfigSchema()
	for _, cfg := range []base.Config{{"alpha": 2.5}, {"alpha": int64(2)}, {"beta": 0.0, "sorted": true}} {
		if err := schema.Validate(cfg); err != nil {
			t.Errorf("%v: %v", cfg, err)
		}
	}
	if err := schema.Validate(base.Config{"sorted": "yes"}); err == nil {
		t.Error("sorted = \"yes\" accepted")
	}
	if err := p.SetConfig(base.Config{"alpha": int64(2), "beta": 0.5, "sorted": true}); err != nil {
		t.Fatal(err)
	}
	if p.alpha != 2 || p.beta != 0.5 || !p.sorted {
		t.Fatalf("alpha %v beta %v sorted %v", p.alpha, p.beta, p.sorted)
	}
	if err := p.SetConfig(base.Config{"beta": -1.0}); err == nil || !strings.Contains(err.Error(), `"beta"`) {
		t.Errorf("negative beta: %v", err)
	}

	env := map[string]string{EnvAlpha: " 3 ", EnvBeta: ""}
	p.getenv = func(k string) string { return env[k] }
	if err := p.Init(nil); err != nil {
		t.Fatal(err)
	}
	if p.Alpha() != 3 || p.Beta() != 0.5 {
		t.Fatalf("after env: alpha %v beta %v, want 3 (env) and 0.5 (config)", p.Alpha(), p.Beta())
	}
	for _, bad := range []string{"x", "-1", "NaN", "Inf"} {
		p := New()
		p.getenv = func(k string) string {
			if k == EnvBeta {
				return bad
			}
			return ""
		}
		if err := p.Init(nil); err == nil || !strings.Contains(err.Error(), EnvBeta) {
			t.Errorf("%s=%q: Init error %v, want one naming the variable", EnvBeta, bad, err)
		}
	}
}

// TestReady: dmdar pops, among the tasks of priority at least the head's,
// the first one needing the least transfer to the worker's node.
func TestReady(t *testing.T) {
	// transfer to the GPU's node and priority of each task, in push
	// order; bound to the GPU so that the decision is not in question.
	type tk struct {
		transfer int64
		prio     int32
	}
	cases := []struct {
		name   string
		sorted bool
		tasks  []tk
		want   string // pop order of task IDs (1-based)
	}{
		{"nearest first", false, []tk{{500, 0}, {0, 0}, {100, 0}, {100, 0}}, "[2 3 4 1]"},
		{"FIFO when all are there", false, []tk{{0, 0}, {0, 0}, {0, 0}}, "[1 2 3]"},
		{"not below the head's priority", false, []tk{{500, 1}, {0, 0}, {100, 2}}, "[3 1 2]"},
		{"sorted: the head's priority only", true, []tk{{0, 0}, {500, 3}, {100, 3}, {0, 1}}, "[3 2 4 1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock int64 = 1
			p := newPolicy(t, &clock, c.sorted, cpu, cuda)
			if err := p.SetConfig(base.Config{"ready": true}); err != nil {
				t.Fatal(err)
			}
			for i, x := range c.tasks {
				task := mk(uint64(i+1), 100, 100, 0, 0, x.transfer) // the GPU is on node 2
				task.Worker, task.Priority = 1, x.prio
				p.Push(task)
			}
			var got []uint64
			for task := p.Pop(1); task != nil; task = p.Pop(1) {
				got = append(got, task.ID)
			}
			if fmt.Sprint(got) != c.want {
				t.Fatalf("popped %v, want %s", got, c.want)
			}
		})
	}
}

// TestUncalibratedWarning: placing tasks without a calibrated model is
// logged once per codelet and architecture, not per task.
func TestUncalibratedWarning(t *testing.T) {
	var clock int64 = 1
	p := newPolicy(t, &clock, false, cpu, cuda)
	var out strings.Builder
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Warn}))
	push := func(id uint64, codelet uint32, cpuNs, cudaNs int64) {
		task := mk(id, cpuNs, cudaNs)
		task.Codelet = codelet
		if codelet < 2 {
			task.Model = fmt.Sprintf("model_%d", codelet) // the core named them
		}
		p.Push(task)
	}
	for i := range uint64(50) {
		push(i, 0, -1, -1)        // codelet 0: no model at all
		push(100+i, 1, 10, -1)    // codelet 1: calibrated on CPU only
		push(200+i, 2, 10, 10)    // codelet 2: calibrated
		push(300+i, 1<<20, -1, 5) // a codelet number beyond the dense table
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"model=model_0 arch=cpu", "model=model_0 arch=cuda", "model=model_1 arch=cuda", `model="codelet #1048576" arch=cpu`}
	if len(lines) != len(want) {
		t.Fatalf("%d warnings, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], "uncalibrated performance model") || !strings.HasSuffix(lines[i], w) {
			t.Errorf("warning %d: %q, want one ending %q", i, lines[i], w)
		}
	}
}

// BenchmarkDecision is the policy's cost per task: one Push (the decision)
// and one Pop, with PostExec, over simulated workers (one GPU for every
// seven CPUs, each GPU on its own memory node) and calibrated tasks.
func BenchmarkDecision(b *testing.B) {
	for _, variant := range []string{"dmda", "dmdas", "dmda+impls"} {
		name, sorted, impls := variant, variant == "dmdas", variant == "dmda+impls"
		for _, n := range []int{2, 16, 64} {
			b.Run(fmt.Sprintf("%s/workers=%d", name, n), func(b *testing.B) {
				var clock int64 = 1
				archs := make([]driver.Arch, n)
				for i := range archs {
					archs[i] = cpu
					if i%8 == 7 || n == 2 && i == 1 {
						archs[i] = cuda
					}
				}
				p := New()
				p.now = func() int64 { return clock }
				p.getenv = func(string) string { return "" }
				p.sorted = sorted
				var ws []sched.Worker
				for i, a := range archs {
					ws = append(ws, sched.Worker{ID: i, Arch: a, Node: i + 1})
				}
				p.Init(ws)
				rng := rand.New(rand.NewSource(1))
				tasks := make([]sched.Task, 1024)
				for i := range tasks {
					tr := make([]int64, n+1)
					for j := range tr {
						tr[j] = rng.Int63n(1000)
					}
					tasks[i] = sched.Task{ID: uint64(i), Priority: int32(rng.Intn(3)), ArchMask: bothArchs, Worker: -1, ReleasedBy: -1,
						Length: [3]int64{1000 + rng.Int63n(1000), 100 + rng.Int63n(100), -1}, Transfer: tr}
					if impls { // two CPU implementations, one CUDA one
						l := tasks[i].Length
						withImpls(&tasks[i], []int64{l[0], l[0] / 2}, []int64{l[1]})
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p.Push(&tasks[i%len(tasks)])
					if i%n == n-1 { // every n tasks, the workers run what they were given
						clock += 1000
						for _, s := range p.workers.Slots() {
							for t := p.Pop(s.ID); t != nil; t = p.Pop(s.ID) {
								p.PostExec(s.ID, t.ID, 1000)
							}
						}
					}
				}
			})
		}
	}
}

// withImpls is mk with the implementations the core lists per
// architecture: their predicted lengths (-1: uncalibrated; -2 stands for
// one the task may not run).
func withImpls(tk *sched.Task, cpuImpls, cudaImpls []int64) *sched.Task {
	tk.Impls = new([wire.NumArch][]sched.Impl)
	for a, lens := range map[driver.Arch][]int64{cpu: cpuImpls, cuda: cudaImpls} {
		for i, ns := range lens {
			im := sched.Impl{Length: ns, Kernel: int32(10 + i)}
			if ns == -2 {
				im = sched.Impl{Length: -1, Kernel: -1}
			}
			tk.Impls[driver.ArchIndex(a)] = append(tk.Impls[driver.ArchIndex(a)], im)
		}
	}
	return tk
}

// queuedImpls is queued with each task's implementation: "id/impl".
func queuedImpls(p *Policy) map[int][]string {
	out := map[int][]string{}
	for _, s := range p.workers.Slots() {
		for t := p.Pop(s.ID); t != nil; t = p.Pop(s.ID) {
			out[s.ID] = append(out[s.ID], fmt.Sprintf("%d/%d", t.ID, t.Impl()))
		}
	}
	return out
}

// dmda decides (worker, implementation) pairs when the core lists a task's
// implementations: the fastest, after each has been measured.
func TestImplementationChoice(t *testing.T) {
	cpuOnly := func(id uint64, lens ...int64) *sched.Task {
		return withImpls(&sched.Task{ID: id, ArchMask: driver.ArchBit(cpu), Worker: -1, ReleasedBy: -1, Length: [3]int64{lens[0], -1, -1}}, lens, nil)
	}
	cases := []struct {
		name  string
		archs []driver.Arch
		tasks []*sched.Task
		want  string // fmt of queuedImpls(p)
	}{
		{"the fastest", []driver.Arch{cpu, cpu},
			[]*sched.Task{cpuOnly(1, 90, 20), cpuOnly(2, 90, 20), cpuOnly(3, 90, 20)},
			"map[0:[1/1 3/1] 1:[2/1]]"},
		{"roles swapped", []driver.Arch{cpu, cpu},
			[]*sched.Task{cpuOnly(1, 20, 90), cpuOnly(2, 20, 90)},
			"map[0:[1/0] 1:[2/0]]"},
		{"uncalibrated ones measured first, in turn", []driver.Arch{cpu, cpu},
			[]*sched.Task{cpuOnly(1, 10, -1, -1), cpuOnly(2, 10, -1, -1), cpuOnly(3, 10, -1, -1), cpuOnly(4, 10, -1, -1)},
			"map[0:[1/1 3/1] 1:[2/2 4/2]]"},
		{"one the task may not run is never chosen", []driver.Arch{cpu},
			[]*sched.Task{cpuOnly(1, -2, 50), cpuOnly(2, -2, 50)},
			"map[0:[1/1 2/1]]"},
		{"worker and implementation together", []driver.Arch{cpu, cuda},
			[]*sched.Task{
				withImpls(mk(1, 1000, 300), []int64{1000, 800}, []int64{300}),
				withImpls(mk(2, 1000, 300), []int64{1000, 800}, []int64{300}),
				withImpls(mk(3, 1000, 300), []int64{1000, 800}, []int64{300}),
			},
			"map[0:[3/1] 1:[1/0 2/0]]"}, // cuda ends 300, 600; then cpu 800 < cuda 900
		{"bound to a worker", []driver.Arch{cpu, cpu},
			[]*sched.Task{withImpls(&sched.Task{ID: 1, ArchMask: bothArchs, Worker: 1, Length: [3]int64{50, -1, -1}}, []int64{50, 30}, nil)},
			"map[1:[1/1]]"},
		{"no list: the core chooses", []driver.Arch{cpu},
			[]*sched.Task{mk(1, 10, -1)}, "map[0:[1/-1]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock int64 = 1000
			p := newPolicy(t, &clock, false, c.archs...)
			for _, tk := range c.tasks {
				p.Push(tk)
			}
			if got := fmt.Sprint(queuedImpls(p)); got != c.want {
				t.Fatalf("queues %s, want %s", got, c.want)
			}
		})
	}
}

// A task decided again (its worker left) gets the implementation of its
// new worker's architecture, charged at that implementation's length.
func TestImplementationDecidedAgain(t *testing.T) {
	var clock int64 = 1000
	p := newPolicy(t, &clock, false, cpu, cuda)
	tk := withImpls(mk(1, 1000, 100), []int64{1000, 700, 900}, []int64{400, 100})
	p.Push(tk)
	if s := p.workers.Get(1); s.State.q.Len() != 1 || tk.Impl() != 1 {
		t.Fatalf("task on the GPU with implementation %d, want the GPU's fastest, 1", tk.Impl())
	}
	p.RemoveWorkers([]int{1})
	s := p.workers.Get(0)
	if s.State.q.Len() != 1 || tk.Impl() != 1 || s.State.q.Cost() != 700 {
		t.Fatalf("after the GPU left: implementation %d charged %d ns on the CPU, want 1 and 700", tk.Impl(), s.State.q.Cost())
	}
}

// BenchmarkChainedRun is a long chain queued on one worker ahead of time
// (Chain), then run in order: each completion (PostExec) must cost the
// same however long the chain; ns/op grows with the chain if it does not.
func BenchmarkChainedRun(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 16} {
		b.Run(fmt.Sprintf("chain=%d", n), func(b *testing.B) {
			var clock int64 = 1
			p := New()
			p.now = func() int64 { return clock }
			p.getenv = func(string) string { return "" }
			if err := p.Init([]sched.Worker{{ID: 0, Arch: cpu}}); err != nil {
				b.Fatal(err)
			}
			tasks := make([]sched.Task, n)
			for i := range tasks {
				tasks[i] = sched.Task{ID: uint64(i), ArchMask: driver.ArchBit(cpu), Worker: -1, ReleasedBy: -1, Length: [3]int64{1000, -1, -1}}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := &tasks[i%n]
				if i%n == 0 {
					b.StopTimer()
					for k := range tasks {
						if !p.Chain(&tasks[k], 0) {
							b.Fatal("dmda refused to chain a task on its only worker")
						}
					}
					b.StartTimer()
				}
				p.PostExec(0, t.ID, 1000)
			}
		})
	}
}
