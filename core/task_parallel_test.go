package core_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/sched-dmda/dmda"
)

// parallelTestKernels are the kernels of the parallel task tests, hosted
// by this test binary started again as the CPU driver (hostedKernels).
func parallelTestKernels() []kernel.Kernel {
	return []kernel.Kernel{
		// par_ranks records, for its rank r, that it ran (int32 slot r),
		// the team's size (64+r), the worker it ran on (128+r) and the
		// combined worker (192+r).
		{Name: "par_ranks", Func: func(ctx *kernel.Context) error {
			v := ctx.Buffers[0].Int32s()
			r := ctx.CombinedRank()
			if r < 0 || r >= 64 || len(v) < 256 {
				return fmt.Errorf("rank %d, %d slots", r, len(v))
			}
			v[r]++
			v[64+r] = int32(ctx.CombinedSize())
			v[128+r] = int32(ctx.Worker)
			v[192+r] = int32(ctx.CombinedWorker())
			return nil
		}},
		// par_fail fails on rank 1 only.
		{Name: "par_fail", Func: func(ctx *kernel.Context) error {
			if ctx.CombinedRank() == 1 {
				return errors.New("rank one says no")
			}
			return nil
		}},
		// par_exit kills its host on rank 1, as a crashing kernel would.
		{Name: "par_exit", Func: func(ctx *kernel.Context) error {
			if ctx.CombinedRank() == 1 {
				os.Exit(3)
			}
			return nil
		}},
		// par_add adds its float64 argument to the elements of its first
		// buffer: rank r of an SPMD team to its own slice.
		{Name: "par_add", Func: func(ctx *kernel.Context) error {
			var a float64
			if err := ctx.Unpack(&a); err != nil {
				return err
			}
			x := ctx.Buffers[0].Float64s()[:ctx.Buffers[0].NX]
			n, size, r := len(x), ctx.CombinedSize(), ctx.CombinedRank()
			for i := n * r / size; i < n*(r+1)/size; i++ {
				x[i] += a
			}
			return nil
		}},
		// par_fjadd is par_add for a FORKJOIN codelet: the master adds to
		// every element, on CombinedSize goroutines.
		{Name: "par_fjadd", Func: func(ctx *kernel.Context) error {
			var a float64
			if err := ctx.Unpack(&a); err != nil {
				return err
			}
			if ctx.CombinedRank() != 0 {
				return fmt.Errorf("a FORKJOIN kernel ran on rank %d", ctx.CombinedRank())
			}
			x := ctx.Buffers[0].Float64s()[:ctx.Buffers[0].NX]
			n, size := len(x), ctx.CombinedSize()
			var wg sync.WaitGroup
			for g := range size {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := n * g / size; i < n*(g+1)/size; i++ {
						x[i] += a
					}
				}()
			}
			wg.Wait()
			return nil
		}},
	}
}

// parallelRuntime starts a runtime with ncpu CPU workers under policy,
// the CPU driver being this test binary (hostKernels) or the real
// driver-cpu plugin.
func parallelRuntime(t *testing.T, policy string, ncpu int, hostKernels bool, edit ...func(*config.Config)) *core.Runtime {
	t.Helper()
	cfg := testConfig(pluginDir)
	cfg.NCPU, cfg.Sched = ncpu, policy
	for _, f := range edit {
		f(cfg)
	}
	opt := core.Options{Config: cfg}
	if hostKernels {
		opt.Kernels = hostedKernels()
	}
	return start(t, opt)
}

// waitAll is WaitForAll, failing the test instead of hanging: parallel
// tasks waiting for each other in a cycle would never end.
func waitAll(t *testing.T, rt *core.Runtime) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- rt.WaitForAll() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("WaitForAll hung: parallel tasks deadlocked?")
	}
	return nil
}

// mustVector registers a vector of 256 int32 on rt.
func mustVector(t *testing.T, rt *core.Runtime) *core.Handle {
	t.Helper()
	h, err := core.RegisterVector(rt, make([]int32, 256))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// combinedByID lists rt's combined workers by ID.
func combinedByID(rt *core.Runtime) map[int]core.CombinedWorkerInfo {
	out := map[int]core.CombinedWorkerInfo{}
	for _, c := range rt.CombinedWorkers() {
		out[c.ID] = c
	}
	return out
}

func TestCombinedWorkerShapes(t *testing.T) {
	tests := []struct {
		name     string
		ncpu     int
		min, max int
		want     [][]int
	}{
		{"4 workers", 4, 0, 0, [][]int{{0, 1}, {2, 3}, {0, 1, 2, 3}}},
		{"6 workers: the doubling stops at 4, then all", 6, 0, 0, [][]int{{0, 1}, {2, 3}, {4, 5}, {0, 1, 2, 3}, {0, 1, 2, 3, 4, 5}}},
		{"3 workers", 3, 0, 0, [][]int{{0, 1}, {0, 1, 2}}},
		{"max 2", 4, 0, 2, [][]int{{0, 1}, {2, 3}}},
		{"min 4", 4, 4, 0, [][]int{{0, 1, 2, 3}}},
		{"min 3", 6, 3, 0, [][]int{{0, 1, 2}, {3, 4, 5}, {0, 1, 2, 3, 4, 5}}},
		{"max 1: none", 4, 0, 1, nil},
		{"one worker: none", 1, 0, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := parallelRuntime(t, "ws", tt.ncpu, false, func(c *config.Config) { c.MinWorkerSize, c.MaxWorkerSize = tt.min, tt.max })
			var got [][]int
			for i, c := range rt.CombinedWorkers() {
				if c.ID != tt.ncpu+i || c.Arch != core.CPU || c.Driver != "cpu" {
					t.Errorf("combined worker %d: %+v, want ID %d, cpu, driver-cpu", i, c, tt.ncpu+i)
				}
				got = append(got, c.Members)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("combined workers %v, want %v", got, tt.want)
			}
		})
	}
}

// TestParallelSPMDRanks: under dmda, which places parallel tasks, SPMD
// tasks run on combined workers of every size, through a real driver
// process (the kernel host) and in process: on a team of n, each rank
// 0..n-1 runs once, on the member of that rank, seeing the team's size
// and ID; Profiling says where.
func TestParallelSPMDRanks(t *testing.T) {
	t.Run("kernel host", func(t *testing.T) { testSPMDRanks(t, parallelRuntime(t, "dmda", 4, true)) })
	t.Run("in process", func(t *testing.T) {
		cfg := testConfig(pluginDir)
		cfg.NCPU = 4
		testSPMDRanks(t, start(t, core.Options{Config: cfg,
			Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(parallelTestKernels()...)), nil
			}},
			Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
				return sched.NewHost(a, dmda.New(), base.Info{Name: "dmda"}), nil
			}}))
	})
}

func testSPMDRanks(t *testing.T, rt *core.Runtime) {
	teams := combinedByID(rt)
	if len(teams) != 3 {
		t.Fatalf("combined workers %v, want 3 over 4 workers", rt.CombinedWorkers())
	}
	cl := &core.Codelet{Name: "par_ranks", Type: core.SPMD, Kernels: map[core.Arch]string{core.CPU: "par_ranks"}, Modes: []core.Mode{core.W}}
	// A combined worker's ID is refused by ExecuteOnWorker, saying what
	// it is (it read "worker 5 does not exist").
	for id := range teams {
		err := rt.Submit(&core.Task{Codelet: cl, ExecuteOnWorker: true, Worker: id, Handles: []*core.Handle{mustVector(t, rt)}})
		if !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), fmt.Sprintf("%d is a combined worker (workers %v)", id, teams[id].Members)) {
			t.Errorf("ExecuteOnWorker on combined worker %d: %v", id, err)
		}
		break
	}
	const n = 24
	tasks := make([]*core.Task, n)
	vs := make([][]int32, n)
	hs := make([]*core.Handle, n)
	for i := range tasks {
		vs[i] = make([]int32, 256)
		h, err := core.RegisterVector(rt, vs[i])
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
		tasks[i] = &core.Task{Codelet: cl, Handles: []*core.Handle{h}}
		if err := rt.Submit(tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitAll(t, rt); err != nil {
		t.Fatal(err)
	}
	sizes := map[int]int{}
	for i, task := range tasks {
		if err := hs[i].Unregister(); err != nil {
			t.Fatal(err)
		}
		p, err := rt.Profiling(task)
		if err != nil {
			t.Fatal(err)
		}
		sizes[p.CombinedSize]++
		members := []int{p.Worker}
		if p.CombinedSize > 1 {
			c, ok := teams[p.CombinedWorker]
			if !ok || len(c.Members) != p.CombinedSize || c.Members[0] != p.Worker {
				t.Fatalf("task %d: Profiling says combined worker %d of %d, master %d; the combined workers are %v", i, p.CombinedWorker, p.CombinedSize, p.Worker, rt.CombinedWorkers())
			}
			members = c.Members
		} else if p.CombinedWorker != -1 {
			t.Fatalf("task %d ran alone, Profiling says combined worker %d", i, p.CombinedWorker)
		}
		v := vs[i]
		for r := range 64 {
			if r >= p.CombinedSize {
				if v[r] != 0 || v[64+r] != 0 {
					t.Fatalf("task %d on a team of %d: rank %d ran", i, p.CombinedSize, r)
				}
				continue
			}
			if v[r] != 1 || int(v[64+r]) != p.CombinedSize || int(v[128+r]) != members[r] || int(v[192+r]) != p.CombinedWorker {
				t.Fatalf("task %d, rank %d of a team of %d: ran %d times, saw size %d on worker %d in combined worker %d; want once, %d, worker %d, %d",
					i, r, p.CombinedSize, v[r], v[64+r], v[128+r], v[192+r], p.CombinedSize, members[r], p.CombinedWorker)
			}
		}
	}
	for _, size := range []int{1, 2, 4} {
		if sizes[size] == 0 {
			t.Errorf("no task ran on %d workers: sizes %v (dmda calibrates each size in turn)", size, sizes)
		}
	}
}

// TestParallelForkJoinGemm: the FORKJOIN gemm of the kernel library, run
// by real driver-cpu plugin processes on teams of 2 and 4 and alone,
// gives the sequential gemm's product.
func TestParallelForkJoinGemm(t *testing.T) {
	rt := parallelRuntime(t, "dmda", 4, false)
	const m, n, k = 96, 112, 80
	rng := rand.New(rand.NewSource(1))
	fill := func(rows, cols int) []float64 {
		d := make([]float64, rows*cols)
		for i := range d {
			d[i] = rng.Float64()*2 - 1
		}
		return d
	}
	a, b, c0 := fill(m, k), fill(k, n), fill(m, n)
	reg := func(d []float64, rows, cols int) *core.Handle {
		h, err := core.RegisterMatrix(rt, d, rows, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ha, hb := reg(a, m, k), reg(b, k, n)
	arg := blasarg.GemmArg{Alpha: 1.5, Beta: -0.5}.Encode()
	modes := []core.Mode{core.R, core.R, core.RW}
	seq := &core.Codelet{Name: "gemm", Kernels: map[core.Arch]string{core.CPU: blasarg.GemmF64}, Modes: modes}
	par := &core.Codelet{Name: "pgemm", Type: core.ForkJoin, Kernels: map[core.Arch]string{core.CPU: blasarg.ParGemmF64}, Modes: modes}
	want := slices.Clone(c0)
	hw := reg(want, m, n)
	if err := rt.Submit(&core.Task{Codelet: seq, Handles: []*core.Handle{ha, hb, hw}, Arg: arg}); err != nil {
		t.Fatal(err)
	}
	const runs = 9
	cs := make([][]float64, runs)
	hcs := make([]*core.Handle, runs)
	tasks := make([]*core.Task, runs)
	for i := range cs {
		cs[i] = slices.Clone(c0)
		hcs[i] = reg(cs[i], m, n)
		tasks[i] = &core.Task{Codelet: par, Handles: []*core.Handle{ha, hb, hcs[i]}, Arg: arg}
		if err := rt.Submit(tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitAll(t, rt); err != nil {
		t.Fatal(err)
	}
	for _, h := range append(hcs, ha, hb, hw) {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	sizes := map[int]bool{}
	for i, task := range tasks {
		p, err := rt.Profiling(task)
		if err != nil {
			t.Fatal(err)
		}
		sizes[p.CombinedSize] = true
		for e := range want {
			if math.Abs(cs[i][e]-want[e]) > 1e-12*k {
				t.Fatalf("run %d on %d workers: element %d is %v, the sequential gemm gives %v", i, p.CombinedSize, e, cs[i][e], want[e])
			}
		}
	}
	if !sizes[2] || !sizes[4] {
		t.Errorf("the runs used teams of %v, want 2 and 4 among them", sizes)
	}
}

// TestParallelMaxParallelism: a codelet's MaxParallelism bounds the teams
// its tasks get; 1 keeps them on one worker.
func TestParallelMaxParallelism(t *testing.T) {
	rt := parallelRuntime(t, "dmda", 4, true)
	tests := []struct {
		max  int
		want []int // the sizes its tasks run on
	}{{0, []int{1, 2, 4}}, {1, []int{1}}, {2, []int{1, 2}}, {3, []int{1, 2}}, {4, []int{1, 2, 4}}}
	for _, tt := range tests {
		t.Run(fmt.Sprint("max ", tt.max), func(t *testing.T) {
			cl := &core.Codelet{Name: fmt.Sprint("par_ranks_max", tt.max), Type: core.SPMD, MaxParallelism: tt.max,
				Kernels: map[core.Arch]string{core.CPU: "par_ranks"}, Modes: []core.Mode{core.W}}
			var tasks []*core.Task
			var hs []*core.Handle
			for range 4 * len(tt.want) {
				h, err := core.RegisterVector(rt, make([]int32, 256))
				if err != nil {
					t.Fatal(err)
				}
				task := &core.Task{Codelet: cl, Handles: []*core.Handle{h}}
				if err := rt.Submit(task); err != nil {
					t.Fatal(err)
				}
				tasks, hs = append(tasks, task), append(hs, h)
			}
			if err := waitAll(t, rt); err != nil {
				t.Fatal(err)
			}
			var got []int
			for i, task := range tasks {
				p, err := rt.Profiling(task)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(got, p.CombinedSize) {
					got = append(got, p.CombinedSize)
				}
				if err := hs[i].Unregister(); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("tasks ran on teams of %v, want %v", got, tt.want)
			}
		})
	}
}

// TestParallelMixed: many SPMD, FORKJOIN and sequential tasks, chained
// through their data, on the same workers, all end with the values of
// the sequential program: under dmda, which places parallel tasks on
// teams of every size, and under ws, which runs them alone.
func TestParallelMixed(t *testing.T) {
	for _, policy := range []string{"dmda", "ws"} {
		t.Run(policy, func(t *testing.T) {
			rt := parallelRuntime(t, policy, 4, true)
			const nvec, length, ntasks = 5, 1000, 300
			vecs := make([][]float64, nvec)
			hs := make([]*core.Handle, nvec)
			for i := range vecs {
				vecs[i] = make([]float64, length)
				h, err := core.RegisterVector(rt, vecs[i])
				if err != nil {
					t.Fatal(err)
				}
				hs[i] = h
			}
			mk := func(name, k string, typ core.CodeletType) *core.Codelet {
				return &core.Codelet{Name: name, Type: typ, Kernels: map[core.Arch]string{core.CPU: k}, NBuffers: core.VariableBuffers}
			}
			cls := []*core.Codelet{mk("seq_add", "par_add", core.Seq), mk("spmd_add", "par_add", core.SPMD), mk("fj_add", "par_fjadd", core.ForkJoin)}
			rng := rand.New(rand.NewSource(7))
			want := make([]float64, nvec)
			var tasks []*core.Task
			for range ntasks {
				dst, v := rng.Intn(nvec), float64(1+rng.Intn(9))
				task := &core.Task{Codelet: cls[rng.Intn(len(cls))], Handles: []*core.Handle{hs[dst]}, Modes: []core.Mode{core.RW}}
				if rng.Intn(2) == 0 {
					// Read another vector too: the task also waits for its
					// writers.
					src := (dst + 1 + rng.Intn(nvec-1)) % nvec
					task.Handles, task.Modes = append(task.Handles, hs[src]), append(task.Modes, core.R)
				}
				var err error
				if task.Arg, err = kernel.Pack(v); err != nil {
					t.Fatal(err)
				}
				want[dst] += v
				if err := rt.Submit(task); err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
			}
			if err := waitAll(t, rt); err != nil {
				t.Fatal(err)
			}
			for _, h := range hs {
				if err := h.Unregister(); err != nil {
					t.Fatal(err)
				}
			}
			for i, vec := range vecs {
				for e, x := range vec {
					if x != want[i] {
						t.Fatalf("vector %d, element %d: %v, want %v", i, e, x, want[i])
					}
				}
			}
			sizes := map[int]int{}
			for _, task := range tasks {
				p, err := rt.Profiling(task)
				if err != nil {
					t.Fatal(err)
				}
				sizes[p.CombinedSize]++
			}
			switch {
			case policy == "ws" && len(sizes) != 1:
				t.Errorf("ws, which does not place parallel tasks, ran them on teams: sizes %v", sizes)
			case policy == "dmda" && (sizes[2] == 0 || sizes[4] == 0):
				t.Errorf("dmda ran no parallel task on a team of 2 or 4: sizes %v", sizes)
			}
		})
	}
}

// TestParallelMemberFails: an SPMD task whose rank 1 fails fails, saying
// which rank on which worker and why; the other ranks' success does not
// hide it, and the workers go on.
func TestParallelMemberFails(t *testing.T) {
	rt := parallelRuntime(t, "dmda", 4, true)
	teams := combinedByID(rt)
	cl := &core.Codelet{Name: "par_fail", Type: core.SPMD, Kernels: map[core.Arch]string{core.CPU: "par_fail"}}
	var tasks []*core.Task
	for range 12 {
		task := &core.Task{Codelet: cl}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	waitAll(t, rt)
	teamed := 0
	for i, task := range tasks {
		p, err := rt.Profiling(task)
		if err != nil {
			t.Fatal(err)
		}
		err = task.Err()
		if p.CombinedSize == 1 {
			if err != nil {
				t.Fatalf("task %d ran alone (rank 0) and failed: %v", i, err)
			}
			continue
		}
		teamed++
		w := fmt.Sprintf("rank 1 (worker %d): rank one says no", teams[p.CombinedWorker].Members[1])
		if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), w) {
			t.Fatalf("task %d on combined worker %d: error %v, want ErrTaskFailed saying %q", i, p.CombinedWorker, err, w)
		}
	}
	if teamed == 0 {
		t.Fatal("no task ran on a team")
	}
}

// teamPolicy hands every task to one combined worker, through worker 0's
// Pop: it makes the core check what a policy asks.
type teamPolicy struct {
	queue  []*sched.Task
	target int
}

func (p *teamPolicy) Init([]sched.Worker) error { return nil }
func (p *teamPolicy) AddWorkers([]sched.Worker) {}
func (p *teamPolicy) RemoveWorkers([]int)       {}
func (p *teamPolicy) Push(t *sched.Task)        { p.queue = append(p.queue, t) }
func (p *teamPolicy) PostExec(int, uint64, int64) {
}
func (p *teamPolicy) Deinit() {}
func (p *teamPolicy) SetCombinedWorkers(cs []sched.Worker) {
	for _, c := range cs {
		if len(c.Members) == 4 {
			p.target = c.ID
		}
	}
}
func (p *teamPolicy) Pop(id int) *sched.Task {
	if id != 0 || len(p.queue) == 0 {
		return nil
	}
	t := p.queue[0]
	p.queue = p.queue[1:]
	t.SetCombined(p.target)
	return t
}

// TestParallelAssignRefused: the core fails, saying why, a task a policy
// hands to a combined worker it may not run on, and runs the others there.
func TestParallelAssignRefused(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.NCPU = 4
	rt := start(t, core.Options{Config: cfg, Kernels: hostedKernels(),
		Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, &teamPolicy{}, base.Info{Name: "team"}), nil
		}})
	cl := func(typ core.CodeletType, max int) *core.Codelet {
		return &core.Codelet{Name: fmt.Sprint("par_ranks", typ, max), Type: typ, MaxParallelism: max, Kernels: map[core.Arch]string{core.CPU: "par_ranks"}, Modes: []core.Mode{core.W}}
	}
	tests := []struct {
		name string
		cl   *core.Codelet
		want string // "" runs on the team of 4
	}{
		{"sequential", cl(core.Seq, 0), "it is not a parallel task"},
		{"beyond MaxParallelism", cl(core.SPMD, 2), "beyond its codelet's MaxParallelism 2"},
		{"parallel", cl(core.SPMD, 0), ""},
		{"forkjoin", cl(core.ForkJoin, 4), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := make([]int32, 256)
			h, err := core.RegisterVector(rt, v)
			if err != nil {
				t.Fatal(err)
			}
			task := &core.Task{Codelet: tt.cl, Handles: []*core.Handle{h}}
			if err := rt.Submit(task); err != nil {
				t.Fatal(err)
			}
			ch := make(chan error, 1)
			go func() { ch <- rt.Wait(task) }()
			select {
			case err = <-ch:
			case <-time.After(30 * time.Second):
				t.Fatal("Wait hung")
			}
			if uerr := h.Unregister(); uerr != nil {
				t.Fatal(uerr)
			}
			if tt.want != "" {
				if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Wait: %v, want ErrTaskFailed saying %q", err, tt.want)
				}
				if v[0] != 0 {
					t.Fatal("the refused task ran")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := rt.Profiling(task)
			if err != nil {
				t.Fatal(err)
			}
			ranks := 4
			if tt.cl.Type == core.ForkJoin {
				ranks = 1
			}
			if p.CombinedSize != 4 || v[ranks-1] != 1 || (ranks < 4 && v[ranks] != 0) {
				t.Fatalf("ran on a team of %d, ranks %v", p.CombinedSize, v[:4])
			}
		})
	}
}

// TestParallelMemberCrashes: a team member's kernel killing its driver
// process fails the task with ErrPluginCrashed; nothing waits for the
// team for ever.
func TestParallelMemberCrashes(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.NCPU, cfg.PluginRestarts = 4, 0
	rt := start(t, core.Options{Config: cfg, Kernels: hostedKernels(),
		Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, &teamPolicy{}, base.Info{Name: "team"}), nil
		}})
	task := &core.Task{Codelet: &core.Codelet{Name: "par_exit", Type: core.SPMD, Kernels: map[core.Arch]string{core.CPU: "par_exit"}}}
	if err := rt.Submit(task); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- rt.Wait(task) }()
	select {
	case err := <-ch:
		if !errors.Is(err, core.ErrPluginCrashed) {
			t.Fatalf("Wait: %v, want ErrPluginCrashed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait hung on a team whose driver died")
	}
}
