package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// soakFlatPct is the growth, in percent, under which the verdict calls a
// metric flat when --max-growth-pct is not given.
const soakFlatPct = 5.0

// soak runs a mixed workload in rounds for --duration while it samples the
// memory of the process and of its plugins, the Go heap and the goroutines,
// then tells whether they stayed flat. Each round registers and unregisters
// data of changing sizes, runs dependency chains ordered by data, by
// explicit dependencies and by tags, independent tasks, a partitioned matrix
// (at once or through a plan), a task whose kernel fails and one no worker
// can run, and verifies every result.
func soak(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("bench soak", "[flags]", "Run a long mixed workload while the memory of the process and of its plugins,\nthe Go heap and the goroutines are sampled, and tell whether they stay flat.")
	var rf runtimeFlags
	rf.register(c.FlagSet)
	fs := c.FlagSet
	duration := fs.Duration("duration", 60*time.Second, "how long to run the workload")
	every := fs.Duration("sample", time.Second, "sampling interval")
	nrounds := fs.Int("rounds", 0, "run exactly `N` rounds, with a sample after each, instead of --duration (a run the same on a loaded machine)")
	size := fs.Int("size", 1<<16, "mean length of the chains' vectors (float32 elements)")
	chain := fs.Int("chain", 16, "scal+axpy pairs per chain (at most 20, so that results stay exact in float32)")
	indep := fs.Int("tasks", 64, "independent tasks per round, each on a vector of its own")
	order := fs.Int("matrix", 256, "largest order of the partitioned matrix")
	tiles := fs.Int("tiles", 4, "tiles per dimension of the partitioned matrix")
	gc := fs.Bool("gc", true, "collect garbage before each sample, so that the heap is the live heap")
	var maxGrowth optionalFloat
	fs.Var(&maxGrowth, "max-growth-pct", fmt.Sprintf("fail when a metric grows more than `PCT` percent (default: never fail; the verdict calls growth under %g%% flat)", soakFlatPct))
	memprofile := fs.String("memprofile", "", "write heap profiles to `FILE`.base (at the end of warm-up) and FILE (at the end), for go tool pprof -diff_base")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench soak"
	if err := checkFlags(checkFlag(cmd, "size", *size, 2, maxVectorSize/2), checkFlag(cmd, "chain", *chain, 1, 20),
		checkFlag(cmd, "tasks", *indep, 0, maxParts), checkFlag(cmd, "tiles", *tiles, 1, maxTiles),
		checkFlag(cmd, "matrix", *order, 2**tiles, maxMatrixOrder)); err != nil {
		return err
	}
	if *duration <= 0 || *every <= 0 {
		return usagef("bench soak: --duration and --sample must be positive")
	}
	if *nrounds < 0 {
		return usagef("bench soak: --rounds %d is out of range (want a number of rounds, or 0 to run for --duration)", *nrounds)
	}
	if maxGrowth.set && !(maxGrowth.v >= 0 && !math.IsInf(maxGrowth.v, 1)) {
		return usagef("bench soak: --max-growth-pct %g is out of range (want a percentage >= 0)", maxGrowth.v)
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	w := newSoakWork(rt, *size, *chain, *indep, *order, *tiles)
	smp := &sampler{gc: *gc, start: time.Now()}
	// Samples are taken between rounds, when the round's data is
	// unregistered and garbage: what stays is what the runtime keeps.
	smp.take(w.tasks)
	rounds, baseDue := 0, *memprofile != ""
	more := func() bool {
		if *nrounds > 0 {
			return rounds < *nrounds
		}
		return time.Since(smp.start) < *duration
	}
	for more() && ctx.Err() == nil && err == nil {
		if err = w.round(rounds); err != nil {
			err = fmt.Errorf("round %d: %w", rounds, err)
		}
		rounds++
		if *nrounds > 0 || time.Since(smp.start) >= time.Duration(len(smp.samples))**every {
			smp.take(w.tasks)
		}
		quarter := time.Since(smp.start) >= *duration/4
		if *nrounds > 0 {
			quarter = rounds >= *nrounds/4
		}
		if baseDue && err == nil && quarter {
			err, baseDue = writeHeapProfile(*memprofile+".base"), false
		}
	}
	smp.take(w.tasks)
	if *memprofile != "" && err == nil {
		err = writeHeapProfile(*memprofile)
	}
	if ferr := rf.finish(rt); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("bench soak: %w", err)
	}
	elapsed := time.Since(smp.start)

	ss := smp.samples
	fmt.Fprintf(out, "soak: %d rounds, %d tasks in %v (%d CPU workers, sched %s); %d expected task failures, %d mismatches\n",
		rounds, w.tasks, elapsed.Round(time.Millisecond), len(rt.Workers()), rt.SchedName(), w.failed, w.bad)
	for _, m := range w.msgs {
		fmt.Fprintln(out, "  mismatch:", m)
	}
	printSamples(out, ss)
	limit := soakFlatPct
	if maxGrowth.set {
		limit = maxGrowth.v
	}
	pairs := map[string]any{"rounds": rounds, "tasks": w.tasks, "seconds": elapsed.Seconds(), "samples": len(ss),
		"failed_tasks": w.failed, "mismatches": w.bad, "verified": w.bad == 0}
	flat, worst := true, ""
	for _, m := range soakMetrics {
		g, ok := growth(ss, m.get)
		if !ok {
			flat = false
			continue
		}
		fmt.Fprintf(out, "%-10s %9.2f -> %9.2f %-10s %+7.2f%%  %+9.3f %s/min\n", m.name, g.from, g.to, m.unit, g.pct, g.perMin, m.unit)
		pairs[m.name+"_growth_pct"] = g.pct
		pairs[m.name+"_per_min"] = g.perMin
		if g.pct > limit {
			flat = false
			if worst == "" {
				worst = fmt.Sprintf("%s grew %.2f%% (limit %.4g%%)", m.name, g.pct, limit)
			}
		}
	}
	switch {
	case len(ss) < 8:
		fmt.Fprintf(out, "verdict: too few samples (%d, want 8) to tell; run longer or sample more often\n", len(ss))
	case flat:
		fmt.Fprintf(out, "verdict: flat (last quarter against second quarter, every metric within %.4g%%)\n", limit)
	default:
		fmt.Fprintf(out, "verdict: NOT flat: %s\n", worst)
	}
	pairs["flat"] = flat
	kv(out, "soak", pairs)
	if w.bad > 0 {
		return fmt.Errorf("bench soak: %d results were wrong (first: %s)", w.bad, w.msgs[0])
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bench soak: interrupted after %v: %w", elapsed.Round(time.Millisecond), ctx.Err())
	}
	if maxGrowth.set && !flat && len(ss) >= 8 {
		return fmt.Errorf("bench soak: memory is not flat: %s", worst)
	}
	return nil
}

// soakWork is the workload of bench soak and what it has found.
type soakWork struct {
	rt                            *core.Runtime
	scal, axpy, gemm, nowork      *core.Codelet
	size, chain, indep, order, nb int
	rng                           *rand.Rand

	tasks  int64    // tasks submitted
	failed int      // tasks that failed as they should
	bad    int      // wrong results or unexpected outcomes
	msgs   []string // the first few of them
}

func newSoakWork(rt *core.Runtime, size, chain, indep, order, nb int) *soakWork {
	cpu := func(k string, modes ...core.Mode) *core.Codelet {
		return &core.Codelet{Name: "soak_" + k, Kernels: map[core.Arch]string{core.CPU: k}, Modes: modes}
	}
	return &soakWork{rt: rt, size: size, chain: chain, indep: indep, order: order, nb: nb, rng: rand.New(rand.NewPCG(1, 2)),
		scal: cpu(blasarg.ScalF32, core.RW), axpy: cpu(blasarg.AxpyF32, core.R, core.RW),
		gemm:   cpu(blasarg.GemmF32, core.R, core.R, core.RW),
		nowork: cpu("no_such_kernel")}
}

// mismatch counts a wrong result and keeps its description.
func (w *soakWork) mismatch(format string, args ...any) {
	w.bad++
	if len(w.msgs) < 5 {
		w.msgs = append(w.msgs, fmt.Sprintf(format, args...))
	}
}

func (w *soakWork) submit(t *core.Task) error {
	if err := w.rt.Submit(t); err != nil {
		return fmt.Errorf("submit %s: %w", t.TaskName(), err)
	}
	w.tasks++
	return nil
}

// round runs one round of the workload; it returns the runtime's
// unexpected errors and counts wrong results with mismatch.
func (w *soakWork) round(r int) error {
	if err := w.failing(r); err != nil {
		return err
	}
	for _, kind := range []string{"data", "deps", "tags"} {
		if err := w.chainRound(r, kind); err != nil {
			return fmt.Errorf("%s chain: %w", kind, err)
		}
	}
	if err := w.independent(); err != nil {
		return fmt.Errorf("independent tasks: %w", err)
	}
	if err := w.partition(r%2 == 1); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	if err := w.rt.WaitForAll(); err != nil {
		return fmt.Errorf("wait for all: %w", err)
	}
	return nil
}

// failing soaks the error paths: a task whose kernel fails (a malformed
// argument), which loses the data it writes (unregistered lost in even
// rounds, written anew in odd ones), and a task no worker can run.
func (w *soakWork) failing(r int) error {
	z := make([]float32, 16)
	h, err := core.RegisterVector(w.rt, z)
	if err != nil {
		return err
	}
	t := &core.Task{Codelet: w.scal, Handles: []*core.Handle{h}, Arg: []byte{1, 2, 3}, Name: "soak_failing"}
	if err := w.submit(t); err != nil {
		return err
	}
	if err := w.rt.Wait(t); errors.Is(err, core.ErrTaskFailed) {
		w.failed++
	} else {
		w.mismatch("a scal task with a 3-byte argument returned %v, want %v", err, core.ErrTaskFailed)
	}
	if err := h.Lost(); !errors.Is(err, core.ErrDataLost) {
		w.mismatch("the failed task's data: Lost() = %v, want %v", err, core.ErrDataLost)
	}
	if r%2 == 0 {
		// Unregistered lost: the error says so, z keeps its zeros.
		if err := h.Unregister(); !errors.Is(err, core.ErrDataLost) {
			w.mismatch("unregister of the lost data returned %v, want %v", err, core.ErrDataLost)
		}
	} else {
		// Written anew under an Acquire in W mode, which ends the loss.
		if err := h.Acquire(core.W); err != nil {
			return err
		}
		for i := range z {
			z[i] = 7
		}
		if err := errors.Join(h.Release(), h.Unregister()); err != nil {
			return err
		}
	}
	want := float32(7 * (r % 2))
	for i, v := range z {
		if v != want {
			w.mismatch("the failed task's vector after unregister, element %d: %g, want %g", i, v, want)
			break
		}
	}
	if err := w.rt.WaitForAll(); !errors.Is(err, core.ErrTaskFailed) {
		w.mismatch("wait for all after the failing task returned %v, want %v", err, core.ErrTaskFailed)
	}
	if err := w.rt.Submit(&core.Task{Codelet: w.nowork}); !errors.Is(err, core.ErrNoWorker) {
		w.mismatch("a task with an unknown kernel: submit returned %v, want %v", err, core.ErrNoWorker)
	}
	return nil
}

// chainRound runs chain pairs x = 2x; x = y + x on a fresh vector, with y
// all ones, ordered by the data (kind "data"), by explicit dependencies
// ("deps") or by tags ("tags"), the last two submitted tail first. x ends
// as 2^chain*x0 + 2^chain - 1, which only the right order gives.
func (w *soakWork) chainRound(r int, kind string) error {
	n := w.size/2 + w.rng.IntN(w.size)
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i%5), 1
	}
	hx, err := core.RegisterVector(w.rt, x)
	if err != nil {
		return err
	}
	hy, err := core.RegisterVector(w.rt, y)
	if err != nil {
		return err
	}
	two, one := blasarg.ScalArg{Alpha: 2}.Encode(), blasarg.AxpyArg{Alpha: 1}.Encode()
	ts := make([]*core.Task, 2*w.chain)
	for i := 0; i < w.chain; i++ {
		ts[2*i] = &core.Task{Codelet: w.scal, Handles: []*core.Handle{hx}, Arg: two}
		ts[2*i+1] = &core.Task{Codelet: w.axpy, Handles: []*core.Handle{hy, hx}, Arg: one}
	}
	base := core.TagID(r) << 8
	for i := len(ts) - 1; kind != "data" && i >= 0; i-- {
		ts[i].NoSequentialConsistency = true
		if kind == "tags" {
			ts[i].Tag, ts[i].UseTag = base+core.TagID(i), true
		}
		if i == 0 {
			break
		}
		if kind == "deps" {
			err = w.rt.DeclareDeps(ts[i], ts[i-1])
		} else {
			err = w.rt.DeclareTagDeps(base+core.TagID(i), base+core.TagID(i-1))
		}
		if err != nil {
			return err
		}
	}
	for k := range ts {
		i := k
		if kind != "data" {
			i = len(ts) - 1 - k
		}
		if err := w.submit(ts[i]); err != nil {
			return err
		}
	}
	if kind == "tags" {
		err = w.rt.TagWait(base + core.TagID(len(ts)-1))
	} else {
		err = w.rt.Wait(ts[len(ts)-1])
	}
	if err != nil {
		return err
	}
	if err := hx.Acquire(core.R); err != nil {
		return err
	}
	p := float32(int(1) << w.chain)
	for i, v := range x {
		if want := p*float32(i%5) + p - 1; v != want {
			w.mismatch("%s chain of %d, element %d of %d: %g, want %g", kind, len(ts), i, n, v, want)
			break
		}
	}
	if err := errors.Join(hx.Release(), hx.Unregister(), hy.Unregister()); err != nil {
		return err
	}
	for i := 0; kind == "tags" && i < len(ts); i++ {
		if err := w.rt.TagRemove(base + core.TagID(i)); err != nil {
			return err
		}
	}
	return nil
}

// independent registers w.indep vectors of random lengths, scales each by 3
// in a task of its own, and checks what Unregister writes back.
func (w *soakWork) independent() error {
	three := blasarg.ScalArg{Alpha: 3}.Encode()
	vs := make([][]float32, w.indep)
	hs := make([]*core.Handle, w.indep)
	for k := range vs {
		vs[k] = make([]float32, 1+w.rng.IntN(4096))
		for i := range vs[k] {
			vs[k][i] = float32(i % 7)
		}
		h, err := core.RegisterVector(w.rt, vs[k])
		if err != nil {
			return err
		}
		hs[k] = h
		if err := w.submit(&core.Task{Codelet: w.scal, Handles: []*core.Handle{h}, Arg: three}); err != nil {
			return err
		}
	}
	for k, h := range hs {
		if err := h.Unregister(); err != nil {
			return err
		}
		for i, v := range vs[k] {
			if want := 3 * float32(i%7); v != want {
				w.mismatch("independent vector %d, element %d of %d: %g, want %g", k, i, len(vs[k]), v, want)
				break
			}
		}
	}
	return nil
}

// partition cuts a matrix of changing order into nb x nb tiles, at once or
// through a partition plan, scales tile (i, j) by 1+(i+j)%3, adds A*B (all
// ones) to the diagonal tiles, gathers it back and checks it.
func (w *soakWork) partition(plan bool) error {
	bs := max(1, (w.order/2+w.rng.IntN(w.order/2+1))/w.nb)
	n := bs * w.nb
	m := make([]float32, n*n)
	for i := range m {
		m[i] = float32(i % 3)
	}
	ones := make([]float32, bs*bs)
	for i := range ones {
		ones[i] = 1
	}
	whole, err := core.RegisterMatrix(w.rt, m, n, n, n)
	if err != nil {
		return err
	}
	a, err := core.RegisterMatrix(w.rt, ones, bs, bs, bs)
	if err != nil {
		return err
	}
	var p *core.Plan
	var tiles []*core.Handle
	if plan {
		if p, err = whole.Plan(core.MatrixTiles(w.nb, w.nb)); err == nil {
			err = p.Submit()
			tiles = p.Children()
		}
	} else {
		tiles, err = whole.Partition(core.MatrixTiles(w.nb, w.nb))
	}
	if err != nil {
		return err
	}
	gemm := blasarg.GemmArg{Alpha: 1, Beta: 1}.Encode()
	for j := 0; j < w.nb; j++ {
		for i := 0; i < w.nb; i++ {
			f := blasarg.ScalArg{Alpha: float64(1 + (i+j)%3)}.Encode()
			t := tiles[i+j*w.nb]
			if err := w.submit(&core.Task{Codelet: w.scal, Handles: []*core.Handle{t}, Arg: f}); err != nil {
				return err
			}
			if i == j {
				if err := w.submit(&core.Task{Codelet: w.gemm, Handles: []*core.Handle{a, a, t}, Arg: gemm}); err != nil {
					return err
				}
			}
		}
	}
	if plan {
		err = p.UnpartitionSubmit()
	} else {
		err = whole.Unpartition()
	}
	if err != nil {
		return err
	}
	if err := whole.Acquire(core.R); err != nil {
		return err
	}
check:
	for c := 0; c < n; c++ {
		for r := 0; r < n; r++ {
			i, j := r/bs, c/bs
			want := float32((r+c*n)%3) * float32(1+(i+j)%3)
			if i == j {
				want += float32(bs)
			}
			if v := m[r+c*n]; v != want {
				w.mismatch("matrix %dx%d in %dx%d tiles (plan %v), element (%d, %d): %g, want %g", n, n, w.nb, w.nb, plan, r, c, v, want)
				break check
			}
		}
	}
	errs := []error{whole.Release()}
	if plan {
		errs = append(errs, p.Clean())
	}
	return errors.Join(append(errs, whole.Unregister(), a.Unregister())...)
}

// writeHeapProfile writes the live heap's profile to path.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	werr := pprof.WriteHeapProfile(f)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("memprofile %s: %w", path, werr)
	}
	return nil
}

// soakSample is one sample of bench soak; sizes in MiB.
type soakSample struct {
	at         time.Duration
	tasks      int64
	rss, shmem float64 // this process: resident, of which shared memory (the arena)
	plugins    float64 // the plugin processes' resident memory, together
	heap       float64 // Go heap in use
	goroutines int
}

// soakMetrics are the sampled quantities the verdict looks at.
var soakMetrics = []struct {
	name, unit string
	get        func(soakSample) float64
}{
	{"rss", "MiB", func(s soakSample) float64 { return s.rss }},
	{"plugins", "MiB", func(s soakSample) float64 { return s.plugins }},
	{"heap", "MiB", func(s soakSample) float64 { return s.heap }},
	{"goroutines", "", func(s soakSample) float64 { return float64(s.goroutines) }},
}

// sampler keeps the samples.
type sampler struct {
	gc      bool
	start   time.Time
	samples []soakSample
}

func (s *sampler) take(tasks int64) {
	if s.gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := procStatus("self")
	smp := soakSample{at: time.Since(s.start), tasks: tasks, rss: st["VmRSS"], shmem: st["RssShmem"],
		heap: float64(ms.HeapInuse) / (1 << 20), goroutines: runtime.NumGoroutine()}
	for _, pid := range childPids() {
		smp.plugins += procStatus(pid)["VmRSS"]
	}
	s.samples = append(s.samples, smp)
}

// procStatus reads the kB fields of /proc/PID/status, in MiB.
func procStatus(pid string) map[string]float64 {
	out := map[string]float64{}
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if v, found := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && found {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				out[k] = n / 1024
			}
		}
	}
	return out
}

// childPids lists the processes this one started (the plugins), from
// every thread's children list.
func childPids() []string {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		pids = append(pids, strings.Fields(string(b))...)
	}
	return pids
}

// printSamples prints the samples, at most about 60 rows of them.
func printSamples(out io.Writer, ss []soakSample) {
	fmt.Fprintf(out, "%9s %10s %9s %9s %11s %9s %10s\n", "time_s", "tasks", "rss_MiB", "shm_MiB", "plugins_MiB", "heap_MiB", "goroutines")
	stride := max(1, (len(ss)+59)/60)
	for i, s := range ss {
		if i%stride == 0 || i == len(ss)-1 {
			fmt.Fprintf(out, "%9.1f %10d %9.1f %9.1f %11.1f %9.2f %10d\n", s.at.Seconds(), s.tasks, s.rss, s.shmem, s.plugins, s.heap, s.goroutines)
		}
	}
}

// soakGrowth compares the mean of the last quarter of the samples with the
// mean of the second quarter (the first is warm-up).
type soakGrowth struct {
	from, to    float64
	pct, perMin float64
}

func growth(ss []soakSample, get func(soakSample) float64) (soakGrowth, bool) {
	q := len(ss) / 4
	if q < 2 {
		return soakGrowth{}, false
	}
	mean := func(part []soakSample) (v, t float64) {
		for _, s := range part {
			v += get(s)
			t += s.at.Minutes()
		}
		return v / float64(len(part)), t / float64(len(part))
	}
	from, t0 := mean(ss[q : 2*q])
	to, t1 := mean(ss[len(ss)-q:])
	g := soakGrowth{from: from, to: to}
	if from > 0 {
		g.pct = (to - from) / from * 100
	}
	if t1 > t0 {
		g.perMin = (to - from) / (t1 - t0)
	}
	return g, true
}
