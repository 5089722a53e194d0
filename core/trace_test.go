package core_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/internal/trace"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

// env is an Options.Getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// A trace asked for by $STARPU_TRACE or Options.TraceFile holds every
// task with its times, handles and the dependencies that released it, in
// either format, and is complete once Shutdown returns.
func TestTraceFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		how  string // env or option
	}{
		{"native by env", "run.trace", "env"},
		{"json by env", "run.json", "env"},
		{"native by option", "run", "option"},
		{"one file per MPI rank", "run.trace", "rank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			opt := core.Options{Config: testConfig(pluginDir)}
			switch tc.how {
			case "env":
				opt.Getenv = env(map[string]string{core.EnvTrace: path})
			case "rank":
				opt.Getenv = env(map[string]string{core.EnvTrace: path, "OMPI_COMM_WORLD_RANK": "3"})
				path = strings.TrimSuffix(path, ".trace") + ".rank3.trace"
			default:
				opt.TraceFile = path
			}
			rt, err := core.Init(context.Background(), opt)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the trace file is not created at Init: %v", err)
			}
			x := make([]float32, 16)
			h, err := core.RegisterVector(rt, x)
			if err != nil {
				t.Fatal(err)
			}
			h.SetName("x")
			const chain = 5
			var ids []uint64
			var last *core.Task
			for i := range chain {
				last = &core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Priority: i}
				if err := rt.Submit(last); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, last.ID())
			}
			sync := &core.Task{Name: "barrier"}
			if err := rt.DeclareDeps(sync, last); err != nil {
				t.Fatal(err)
			}
			if err := rt.Submit(sync); err != nil {
				t.Fatal(err)
			}
			tf := endTrace(t, rt, h, path)
			s := tf.Summary()
			if !s.Complete || s.Ran != chain || s.Tasks != chain+1 || s.Workers != 2 || s.Codelets["scal_cpu"] != chain {
				t.Fatalf("summary %+v: want complete, %d runs of scal_cpu and a sync task, 2 workers", s, chain)
			}
			if s.CriticalTasks != chain {
				t.Errorf("critical path of %d tasks, want the chain of %d", s.CriticalTasks, chain)
			}
			recs := tasksRec(t, tf)
			if len(recs) != chain+1 {
				t.Fatalf("%d records in tasks.rec, want %d:\n%s", len(recs), chain+1, strings.Join(recs, "\n\n"))
			}
			for i, r := range recs[:chain] {
				f := fields(r)
				if f["Name"] != "scal_cpu" || f["JobId"] != itoa(ids[i]) || f["Modes"] != "RW" || f["Sizes"] != "64" || f["Priority"] != itoa(uint64(i)) {
					t.Errorf("task %d: %v", i, f)
				}
				if i > 0 && f["DependsOn"] != itoa(ids[i-1]) {
					t.Errorf("task %d depends on %q, want %d", i, f["DependsOn"], ids[i-1])
				}
				times := []string{f["SubmitTime"], f["ReadyTime"], f["StartTime"], f["EndTime"]}
				for k := 1; k < len(times); k++ {
					if atof(t, times[k]) < atof(t, times[k-1]) {
						t.Errorf("task %d: times out of order: submit, ready, start, end = %v", i, times)
					}
				}
			}
			if f := fields(recs[chain]); f["Name"] != "barrier" || f["WorkerId"] != "" || f["DependsOn"] != itoa(ids[chain-1]) {
				t.Errorf("the synchronisation task: %v", f)
			}
		})
	}
}

// A dependency on a task that had already ended when it was made (inferred
// from data, declared before the submission, declared on a waiting task)
// adds no wait but is an edge of the trace all the same, as in StarPU's:
// DependsOn must not depend on how fast the predecessor ran. A CI run
// lost TestTraceFile's edges when a 16-element task ended before the next
// was submitted.
func TestTraceEdgeToEndedTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.trace")
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), TraceFile: path})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 16)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	a := &core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Name: "a"}
	if err := rt.Submit(a); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(a); err != nil {
		t.Fatal(err)
	}
	b := &core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Name: "b"}
	if err := rt.Submit(b); err != nil {
		t.Fatal(err)
	}
	c := &core.Task{Name: "c"}
	if err := rt.DeclareDeps(c, a); err != nil {
		t.Fatal(err)
	}
	if err := rt.Submit(c); err != nil {
		t.Fatal(err)
	}
	d, e := &core.Task{Name: "d"}, &core.Task{Name: "e"}
	if err := rt.DeclareDeps(d, e); err != nil {
		t.Fatal(err)
	}
	if err := rt.Submit(d); err != nil {
		t.Fatal(err)
	}
	if err := rt.DeclareDeps(d, a); err != nil { // d waits for e
		t.Fatal(err)
	}
	if err := rt.Submit(e); err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{}
	for _, r := range tasksRec(t, endTrace(t, rt, h, path)) {
		f := fields(r)
		deps[f["Name"]] = f["DependsOn"]
	}
	ida, ide := itoa(a.ID()), itoa(e.ID())
	for _, tc := range []struct{ task, want string }{
		{"a", ""},
		{"b", ida},
		{"c", ida},
		{"d", ide + " " + ida},
	} {
		got := deps[tc.task]
		if tc.task == "d" && got == ida+" "+ide {
			got = tc.want
		}
		if got != tc.want {
			t.Errorf("task %s depends on %q, want %q", tc.task, deps[tc.task], tc.want)
		}
	}
}

// endTrace is shutdownRead through the public API: the trace as
// core.ReadTraceFile reads it.
func endTrace(t *testing.T, rt *core.Runtime, h *core.Handle, path string) *core.TraceFile {
	t.Helper()
	shutdown(t, rt, h)
	tf, err := core.ReadTraceFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

// tasksRec returns the records of tf's tasks.rec, in order.
func tasksRec(t *testing.T, tf *core.TraceFile) []string {
	t.Helper()
	var rec strings.Builder
	if err := tf.WriteTasksRec(&rec); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(rec.String()), "\n\n")
}

func fields(rec string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(rec, "\n") {
		k, v, _ := strings.Cut(l, ": ")
		m[k] = v
	}
	return m
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v
}

// A trace file that cannot be created fails Init, naming it, before any
// plugin starts; so does one named like a picture.
func TestTraceFileBad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"no such directory", filepath.Join(dir, "missing", "t.trace"), filepath.Join(dir, "missing", "t.trace")},
		{"a directory", dir, dir},
		{"a picture", filepath.Join(dir, "t.svg"), "starpu trace view"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), TraceFile: tc.path})
			if err == nil {
				rt.Shutdown()
				t.Fatal("Init succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Init: %v; want it to name %q", err, tc.want)
			}
		})
	}
}

// STARPU_WORKER_STATS's total counts from the end of Init: the plugins'
// start is no worker's time. So it leaves out most of Init (half is the
// bound: only the last steps of Init come after its start, however loaded
// the machine); it used to count the whole start-up.
func TestWorkerStatsFromInit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "workers.txt")
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	beforeInit := time.Now()
	rt, err := core.Init(context.Background(), core.Options{Config: cfg, Getenv: env(map[string]string{core.EnvWorkerStats: "1", core.EnvWorkerStatsFile: file})})
	if err != nil {
		t.Fatal(err)
	}
	afterInit := time.Now()
	if err := rt.Submit(&core.Task{Codelet: emptyCl, Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	whole, initDur := time.Since(beforeInit), afterInit.Sub(beforeInit)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	if i := strings.Index(string(b), "time split: total "); i < 0 {
		t.Fatalf("no time split in:\n%s", b)
	} else if _, err := fmt.Sscanf(string(b[i:]), "time split: total %f ms", &total); err != nil {
		t.Fatal(err)
	}
	if limit := float64(whole-initDur/2) / 1e6; total > limit {
		t.Errorf("worker total %.2f ms, beyond %.2f ms (Init took %v, the whole run %v): it counts the start-up", total, limit, initDur, whole)
	}
}

// startTraced runs one CPU worker and a memDevice, with env.
func startTraced(t *testing.T, vars map[string]string, traceFile string) *core.Runtime {
	t.Helper()
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	dev := &memDevice{capacity: 1 << 20, bufs: map[uint64][]byte{}}
	rt, err := core.Init(context.Background(), core.Options{
		Config:    cfg,
		Getenv:    env(vars),
		TraceFile: traceFile,
		Drivers: []core.DriverFactory{
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				return cpudriver.New(a, log, cpudriver.WithKernels(kernels.Library()...)), nil
			},
			func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
				dev.arena = a
				return dev, nil
			},
		},
		Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	return rt
}

// Copies between memory nodes appear in the trace and in the bus
// statistics; STARPU_WORKER_STATS counts each worker's tasks.
func TestTraceTransfersAndStats(t *testing.T) {
	dir := t.TempDir()
	path, busFile, workerFile := filepath.Join(dir, "t.trace"), filepath.Join(dir, "bus.txt"), filepath.Join(dir, "workers.txt")
	rt := startTraced(t, map[string]string{
		core.EnvBusStats: "1", core.EnvBusStatsFile: busFile,
		core.EnvWorkerStats: "1", core.EnvWorkerStatsFile: workerFile,
	}, path)
	x := make([]float32, 10)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	scalOnDev := &core.Codelet{Name: "scal_dev", Kernels: map[driver.Arch]string{driver.OpenCL: "dev_scal_f32"}, Modes: []core.Mode{core.RW}}
	for i := range 4 {
		cl := scalOnCPU
		if i%2 == 1 {
			cl = scalOnDev
		}
		scal(t, rt, cl, h, 2)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	tf, err := core.ReadTraceFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// In, out, in, out: 4 copies of 40 bytes.
	s := tf.Summary()
	if s.Transfers != 4 || s.Ran != 4 {
		t.Errorf("%d transfers and %d tasks in the trace, want 4 and 4", s.Transfers, s.Ran)
	}
	// Each task waited for its copy in: the workers fetched; the states
	// and the tasks cover both workers' makespan.
	if s.Fetching <= 0 || s.Scheduling <= 0 {
		t.Errorf("fetching %v, scheduling %v: want both", s.Fetching, s.Scheduling)
	}
	whole := float64(s.Makespan) * float64(s.Workers)
	covered := s.Efficiency*whole + float64(s.Fetching+s.Scheduling+s.Sleeping+s.Idle)
	if math.Abs(covered-whole) > whole/100 {
		t.Errorf("executing and the states cover %v of %d workers x the makespan %v", time.Duration(covered), s.Workers, s.Makespan)
	}
	var sum strings.Builder
	if err := tf.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, l := range strings.Split(sum.String(), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[0] == "RAM" || f[0] == "opencl_0") && f[1] == "->" {
			links++
			if f[3] != "2" || f[4] != "80" {
				t.Errorf("bus link line %q: want 2 transfers of 80 bytes in all", l)
			}
		}
	}
	if links != 2 {
		t.Errorf("summary has %d bus links, want RAM -> opencl_0 and back:\n%s", links, sum.String())
	}
	bus, err := os.ReadFile(busFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Data transfer stats:", "RAM -> opencl_0", "(transfers : 2 - avg", "opencl_0 -> RAM"} {
		if !strings.Contains(string(bus), want) {
			t.Errorf("bus statistics lack %q:\n%s", want, bus)
		}
	}
	ws, err := os.ReadFile(workerFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(ws), "\t2 task(s)") != 2 || !strings.Contains(string(ws), "Global time split") {
		t.Errorf("worker statistics: want 2 tasks on each worker:\n%s", ws)
	}
}

// STARPU_PROFILING=1 turns profiling on; a value that is not a number
// fails Init, naming the variable.
func TestProfilingEnv(t *testing.T) {
	for _, tc := range []struct {
		value   string
		on      bool
		initErr bool
	}{{"1", true, false}, {"0", false, false}, {"", false, false}, {"yes", false, true}} {
		t.Run(tc.value, func(t *testing.T) {
			rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), Getenv: env(map[string]string{core.EnvProfiling: tc.value})})
			if tc.initErr {
				if err == nil || !strings.Contains(err.Error(), core.EnvProfiling) {
					t.Fatalf("Init = %v, want an error naming %s", err, core.EnvProfiling)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Shutdown()
			task := &core.Task{Name: "nothing", Synchronous: true}
			if err := rt.Submit(task); err != nil {
				t.Fatal(err)
			}
			p, err := rt.Profiling(task)
			if err != nil {
				t.Fatal(err)
			}
			if on := !p.Submitted.IsZero(); on != tc.on {
				t.Errorf("submission time recorded: %v, want %v", on, tc.on)
			}
		})
	}
}

// Progress counts the tasks run and in flight, and says when Shutdown began.
func TestProgress(t *testing.T) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir)})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 4)
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		scal(t, rt, scalOnCPU, h, 2)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	if p := rt.Progress(); p != (core.Progress{Done: 3}) {
		t.Errorf("Progress = %+v, want 3 done, none in flight", p)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if p := rt.Progress(); !p.Stopped {
		t.Errorf("Progress after Shutdown = %+v, want Stopped", p)
	}
}

// BenchmarkTraceChain is bench overhead's chains, one task per op, by
// tags and through one read-write vector, with tracing off, to a native
// trace and to a JSON trace: their ratio is what tracing costs the
// dependency chain.
func BenchmarkTraceChain(b *testing.B) {
	for _, chain := range []string{"tags", "rw"} {
		for _, tc := range []struct{ name, file string }{{"off", ""}, {"native", "t.trace"}, {"json", "t.json"}} {
			b.Run(chain+"/"+tc.name, func(b *testing.B) {
				opt := core.Options{Config: testConfig(pluginDir)}
				if tc.file != "" {
					opt.TraceFile = filepath.Join(b.TempDir(), tc.file)
				}
				rt, err := core.Init(context.Background(), opt)
				if err != nil {
					b.Fatal(err)
				}
				if chain == "tags" {
					benchTagChain(b, rt)
				} else {
					benchRWChain(b, rt)
				}
				if err := rt.WaitForAll(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer() // the run, not the conversion to JSON at Shutdown
				if err := rt.Shutdown(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// benchTagChain submits b.N empty tasks chained by tags, the first last.
func benchTagChain(b *testing.B, rt *core.Runtime) {
	cl := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	tasks := make([]core.Task, b.N)
	b.ResetTimer()
	for i := 1; i < len(tasks); i++ {
		if err := rt.DeclareTagDeps(core.TagID(i), core.TagID(i-1)); err != nil {
			b.Fatal(err)
		}
		tasks[i] = core.Task{Codelet: cl, Tag: core.TagID(i), UseTag: true}
		if err := rt.Submit(&tasks[i]); err != nil {
			b.Fatal(err)
		}
	}
	tasks[0] = core.Task{Codelet: cl, Tag: 0, UseTag: true}
	if err := rt.Submit(&tasks[0]); err != nil {
		b.Fatal(err)
	}
}

// benchRWChain submits b.N empty tasks on one vector in RW.
func benchRWChain(b *testing.B, rt *core.Runtime) {
	h, err := core.RegisterVector(rt, []float32{0})
	if err != nil {
		b.Fatal(err)
	}
	cl := &core.Codelet{Name: "empty", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}, Modes: []core.Mode{core.RW}}
	tasks := make([]core.Task, b.N)
	b.ResetTimer()
	for i := range tasks {
		tasks[i] = core.Task{Codelet: cl, Handles: []*core.Handle{h}}
		if err := rt.Submit(&tasks[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// readTraceTasks reads the trace in path back with the trace package, its
// tasks by job number.
func readTraceTasks(t *testing.T, path string) map[uint64]*trace.Task {
	t.Helper()
	tr, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uint64]*trace.Task{}
	for _, x := range tr.Tasks {
		byID[x.ID] = x
	}
	return byID
}

// A FORKJOIN task that dmda runs on the combined worker of the two CPU
// workers is traced with its team, its master first, and the
// implementation it ran; one that runs alone has no team. dmda calibrates
// the sizes of a codelet without a model in turn (alone, then the team),
// so four tasks run both ways.
func TestTraceParallelTeam(t *testing.T) {
	path := filepath.Join(t.TempDir(), "team.trace")
	cfg := testConfig(pluginDir)
	cfg.NCPU, cfg.Sched, cfg.ModelDir = 2, "dmda", t.TempDir()
	rt := start(t, core.Options{Config: cfg, TraceFile: path})
	teams := combinedByID(rt)
	const n = 8
	reg := func(d []float64) *core.Handle {
		h, err := core.RegisterMatrix(rt, d, n, n, n)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := reg(make([]float64, n*n)), reg(make([]float64, n*n))
	modes := []core.Mode{core.R, core.R, core.RW}
	cl := &core.Codelet{Name: "trace_pgemm", Type: core.ForkJoin, Kernels: map[core.Arch]string{core.CPU: blasarg.ParGemmF64}, Modes: modes}
	arg := blasarg.GemmArg{Alpha: 1, Beta: 1}.Encode()
	hs := []*core.Handle{a, b}
	var tasks []*core.Task
	for range 4 {
		c := reg(make([]float64, n*n))
		hs = append(hs, c)
		task := &core.Task{Codelet: cl, Handles: []*core.Handle{a, b, c}, Arg: arg}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	if err := waitAll(t, rt); err != nil {
		t.Fatal(err)
	}
	profs := make([]core.ProfilingInfo, len(tasks))
	for i, task := range tasks {
		p, err := rt.Profiling(task)
		if err != nil {
			t.Fatal(err)
		}
		profs[i] = p
	}
	for _, h := range hs {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	byID := readTraceTasks(t, path)
	onTeam := 0
	for i, task := range tasks {
		p, x := profs[i], byID[task.ID()]
		if x == nil || !x.Ran {
			t.Fatalf("task %d (job %d) did not run in the trace: %+v", i, task.ID(), x)
		}
		var want []int
		if p.CombinedSize > 1 {
			onTeam++
			want = teams[p.CombinedWorker].Members
			if len(want) != 2 {
				t.Fatalf("task %d ran on combined worker %d, of members %v: want both CPU workers", i, p.CombinedWorker, want)
			}
		}
		if x.Worker != p.Worker || !slices.Equal(x.Team, want) || x.Impl != p.Implementation || x.Impl < 0 {
			t.Errorf("task %d traced on worker %d, team %v, implementation %d; Profiling says worker %d, combined worker %d of %d (members %v), implementation %d",
				i, x.Worker, x.Team, x.Impl, p.Worker, p.CombinedWorker, p.CombinedSize, want, p.Implementation)
		}
	}
	if onTeam == 0 {
		t.Errorf("no task ran on a team: Profiling says %+v", profs)
	}
}

// A codelet with two CPU implementations, which dmda calibrates in turn:
// each run's trace record names the implementation Profiling reports.
func TestTraceImplementation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "impl.trace")
	cfg := testConfig(pluginDir)
	cfg.Sched, cfg.ModelDir = "dmda", t.TempDir()
	rt := start(t, core.Options{Config: cfg, TraceFile: path})
	cl := &core.Codelet{Name: "trace_impls", Impls: map[driver.Arch][]string{driver.CPU: {blasarg.ScalF32, blasarg.Empty}},
		Modes: []core.Mode{core.RW}, Model: core.HistoryModel}
	h, err := core.RegisterVector(rt, make([]float32, 64))
	if err != nil {
		t.Fatal(err)
	}
	tasks := make([]*core.Task, 8)
	for i := range tasks {
		tasks[i] = &core.Task{Codelet: cl, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
		if err := rt.Submit(tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	impls := make([]int, len(tasks))
	for i, task := range tasks {
		p, err := rt.Profiling(task)
		if err != nil {
			t.Fatal(err)
		}
		impls[i] = p.Implementation
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	byID := readTraceTasks(t, path)
	var ran [2]int
	for i, task := range tasks {
		x := byID[task.ID()]
		if x == nil || !x.Ran || x.Impl != impls[i] || x.Team != nil {
			t.Fatalf("task %d traced as %+v; Profiling says implementation %d, on one worker", i, x, impls[i])
		}
		if x.Impl < 0 || x.Impl > 1 {
			t.Fatalf("task %d ran implementation %d of 2", i, x.Impl)
		}
		ran[x.Impl]++
	}
	if ran[0] == 0 || ran[1] == 0 {
		t.Errorf("runs per implementation %v: dmda calibrates both in turn", ran)
	}
}

// A trace holds each task as it was submitted: one Task submitted again
// after Wait, with another name, priority, iteration and handle label
// each time, reads back as it was at each submission, in order. (A
// design that writes submit records after Submit returns must keep
// this.)
func TestTraceResubmittedTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "again.trace")
	rt := start(t, core.Options{Config: testConfig(pluginDir), TraceFile: path})
	h, err := core.RegisterVector(rt, make([]float32, 16))
	if err != nil {
		t.Fatal(err)
	}
	task := &core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
	const runs = 20
	ids := make([]uint64, runs)
	for i := range runs {
		task.Name, task.Priority = fmt.Sprintf("run%d", i), i
		h.SetName(fmt.Sprintf("x%d", i))
		rt.IterationPush(uint64(100 + i))
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		if err := rt.IterationPop(); err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID()
		if err := rt.Wait(task); err != nil {
			t.Fatal(err)
		}
	}
	tr := shutdownRead(t, rt, path, h)
	if len(tr.Tasks) != runs {
		t.Fatalf("%d tasks traced, want %d", len(tr.Tasks), runs)
	}
	for i, x := range tr.Tasks {
		name, label := fmt.Sprintf("run%d", i), fmt.Sprintf("x%d", i)
		if x.ID != ids[i] || x.Name != name || x.Priority != int64(i) || len(x.Iter) != 1 || x.Iter[0] != int64(100+i) ||
			len(x.Handles) != 1 || x.Handles[0].Name != label || !x.Ran || x.Submit > x.Start {
			t.Errorf("submission %d traced as job %d %q, priority %d, iterations %v, handles %+v, ran %v, submitted at %d, started at %d;\n"+
				"want job %d %q, priority %d, iteration %d, handle %q, submitted before it started",
				i, x.ID, x.Name, x.Priority, x.Iter, x.Handles, x.Ran, x.Submit, x.Start, ids[i], name, i, 100+i, label)
		}
	}
}

// A task's callback may change its task (here its name): the submit
// record still holds the name submitted, for every task of a chain that
// flows from worker to worker without the engine's rounds in between. (A
// design that wrote the submit records at the end of the engine's round
// failed it, tracing 3 to 299 of the 3000 tasks by their new name.)
func TestTraceCallbackChangesTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callback.trace")
	rt := start(t, core.Options{Config: testConfig(pluginDir), TraceFile: path})
	h, err := core.RegisterVector(rt, make([]float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	rename := func(task *core.Task) { task.Name = "changed" }
	for i := range n {
		if err := rt.Submit(&core.Task{Codelet: emptyRW, Handles: []*core.Handle{h}, Name: fmt.Sprintf("t%d", i), Callback: rename}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	tr := shutdownRead(t, rt, path, h)
	if len(tr.Tasks) != n {
		t.Fatalf("%d tasks traced, want %d", len(tr.Tasks), n)
	}
	bad := 0
	for i, x := range tr.Tasks {
		if want := fmt.Sprintf("t%d", i); x.Name != want {
			if bad++; bad <= 3 {
				t.Errorf("task %d traced as %q, want %q", i, x.Name, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d tasks traced with the name their callback gave", bad, n)
	}
}

// shutdown unregisters hs and shuts rt down, which completes its trace.
func shutdown(t *testing.T, rt *core.Runtime, hs ...*core.Handle) {
	t.Helper()
	for _, h := range hs {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// shutdownRead unregisters hs, shuts rt down and reads the trace file it
// wrote to path.
func shutdownRead(t *testing.T, rt *core.Runtime, path string, hs ...*core.Handle) *trace.Trace {
	t.Helper()
	shutdown(t, rt, hs...)
	tr, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A paused trace (Options.TracePaused, PauseTrace) leaves out the tasks
// submitted meanwhile; a task submitted while it records is recorded to
// its end, dependencies on it included, though the trace is paused again
// before it runs. The in-memory trace follows the same rule.
func TestTracePause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.trace")
	rt := start(t, core.Options{Config: testConfig(pluginDir), TraceFile: path, TracePaused: true, Trace: true})
	h, err := core.RegisterVector(rt, make([]float32, 16))
	if err != nil {
		t.Fatal(err)
	}
	chain := func(n int) (ids []uint64) {
		for range n {
			task := &core.Task{Codelet: scalOnCPU, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()}
			if err := rt.Submit(task); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID())
		}
		return ids
	}
	chain(3) // paused from Init
	rt.ResumeTrace()
	recorded := chain(4)
	rt.PauseTrace() // before they ran, most likely: they are recorded all the same
	chain(2)
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	var mem strings.Builder
	if err := rt.WriteTrace(&mem); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(mem.String(), `"name":"scal_cpu"`); n != len(recorded) {
		t.Errorf("the in-memory trace has %d runs, want %d:\n%s", n, len(recorded), mem.String())
	}
	tr := shutdownRead(t, rt, path, h)
	var got []uint64
	for _, task := range tr.Tasks {
		got = append(got, task.ID)
		if !task.Submitted || !task.Ran || task.Ready == 0 {
			t.Errorf("task %d: submitted %v, ran %v, ready %d: want the whole task", task.ID, task.Submitted, task.Ran, task.Ready)
		}
	}
	if !slices.Equal(got, recorded) {
		t.Fatalf("traced tasks %v, want those submitted while recording: %v", got, recorded)
	}
	for i, task := range tr.Tasks {
		var want []uint64 // the first one's predecessor was not traced
		if i > 0 {
			want = []uint64{recorded[i-1]}
		}
		if !slices.Equal(task.Preds, want) {
			t.Errorf("task %d depends on %v, want %v", task.ID, task.Preds, want)
		}
	}
}
