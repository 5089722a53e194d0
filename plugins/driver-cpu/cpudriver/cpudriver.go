// Package cpudriver is the CPU driver: it runs one worker per CPU core the
// core asks for, each executing Go kernels by name on buffers that live in the
// shared-memory arena. It is also the SDK for building a CPU driver with extra
// kernels: a custom driver-cpu is `cpudriver.Serve(myKernels...)`.
package cpudriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jaypipes/ghw"
	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Version is the driver's plugin version.
const Version = "0.1.0"

// Driver is the CPU driver.
type Driver struct {
	arena   *shm.Arena
	log     hclog.Logger
	kernels []kernel.Kernel
	units   int
	model   string
	bind    bool
	// cpus are the cores the process may run on, read in New, before any
	// worker binds a thread: read later, through the process's main
	// thread, they would be one core once a worker had bound that thread.
	cpus []int
	// beforeWorkers runs once in Init, before the workers start: the place
	// to pin a BLAS library to one thread.
	beforeWorkers func()
	// warm says whether a SCHED_IDLE thread maps the arena's large spans
	// into this process ahead of the kernels (shm.Warmer).
	warm bool

	mu      sync.Mutex
	warmer  *shm.Warmer
	workers []*worker
	wg      sync.WaitGroup
	stop    atomic.Bool
	// savedProcs is GOMAXPROCS before reserveProcs raised it to procs.
	savedProcs, procs int
	// teams is where the workers meet to run parallel tasks (parallel.go).
	teams *driver.Teams
	// held are the IDs of the workers the application runs (appworker.go).
	held map[int]bool
}

// Option configures a Driver.
type Option func(*Driver)

// WithKernels adds kernels to the driver; a later kernel with the name of an
// earlier one replaces it.
func WithKernels(ks ...kernel.Kernel) Option {
	return func(d *Driver) { d.kernels = append(d.kernels, ks...) }
}

// WithSetup runs f once in Init before the workers start.
func WithSetup(f func()) Option { return func(d *Driver) { d.beforeWorkers = f } }

// New returns a CPU driver over the arena.
func New(a *shm.Arena, log hclog.Logger, opts ...Option) *Driver {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	d := &Driver{arena: a, log: log, units: runtime.NumCPU(), bind: true, warm: true, cpus: allowedCPUs()}
	if info, err := ghw.CPU(ghw.WithDisableWarnings()); err == nil && len(info.Processors) > 0 {
		d.model = info.Processors[0].Model
	}
	for _, o := range opts {
		o(d)
	}
	d.kernels = dedupe(d.kernels)
	return d
}

func dedupe(ks []kernel.Kernel) []kernel.Kernel {
	idx := map[string]int{}
	var out []kernel.Kernel
	for _, k := range ks {
		if i, ok := idx[k.Name]; ok {
			out[i] = k
			continue
		}
		idx[k.Name] = len(out)
		out = append(out, k)
	}
	return out
}

// Serve is the whole main() of a CPU driver plugin hosting the given kernels.
func Serve(opts ...Option) {
	driver.Serve(func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return New(a, log, opts...), nil
	})
}

// PluginInfo implements base.Plugin.
func (d *Driver) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "cpu", Version: Version, APIVersions: []int{base.APIVersion}}, nil
}

// ConfigSchema implements base.Plugin.
func (d *Driver) ConfigSchema(context.Context) (*base.Schema, error) {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "units", Type: base.AttrInt, Doc: "number of CPU units to report (default: the cores this process may run on)"},
		{Name: "bind", Type: base.AttrBool, Default: "true", Doc: "bind each worker thread to its core"},
		{Name: "warm_pages", Type: base.AttrBool, Default: "true", Doc: "map the data the core allocates into this process from an idle-priority thread, ahead of the kernels (first touches of a page cost up to 10 us under shadow paging)"},
	}}, nil
}

// SetConfig implements base.Plugin.
func (d *Driver) SetConfig(ctx context.Context, cfg base.Config) error {
	s, _ := d.ConfigSchema(ctx)
	if err := s.Validate(cfg); err != nil {
		return fmt.Errorf("driver-cpu config: %w", err)
	}
	if v, ok := cfg["units"].(int64); ok {
		if v < 1 {
			return fmt.Errorf("driver-cpu config: units = %d: must be at least 1", v)
		}
		d.units = int(v)
	}
	if v, ok := cfg["bind"].(bool); ok {
		d.bind = v
	}
	if v, ok := cfg["warm_pages"].(bool); ok {
		d.warm = v
	}
	return nil
}

// Fingerprint implements driver.Driver: one unit per core, all on the RAM node.
func (d *Driver) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	fp := &driver.Fingerprint{Arch: driver.CPU, SchedRing: true, Parallel: true}
	for i := 0; i < d.units; i++ {
		name := fmt.Sprintf("CPU %d", i)
		if d.model != "" {
			name += " (" + d.model + ")"
		}
		fp.Units = append(fp.Units, driver.Unit{Name: name, Node: 0})
	}
	for _, k := range d.kernels {
		fp.Kernels = append(fp.Kernels, k.Name)
	}
	return fp, nil
}

// Init implements driver.Driver.
func (d *Driver) Init(_ context.Context, req *driver.InitRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.workers) > 0 {
		return errors.New("driver-cpu: already initialised")
	}
	if d.arena == nil {
		return errors.New("driver-cpu: no shared-memory arena")
	}
	if err := d.checkHeld(req); err != nil {
		return err
	}
	var ws []*worker
	for _, spec := range req.Workers {
		w, err := d.newWorker(spec, req.SpinIters)
		if err != nil {
			return fmt.Errorf("driver-cpu: worker %d: %w", spec.ID, err)
		}
		ws = append(ws, w)
	}
	if d.beforeWorkers != nil {
		d.beforeWorkers()
	}
	d.stop.Store(false)
	d.workers = ws
	d.teams = driver.NewTeams()
	for _, w := range ws {
		d.teams.Join(w.rings.Spec.ID)
	}
	d.reserveProcs(len(ws))
	d.startWarmer()
	for _, w := range ws {
		if d.held[w.rings.Spec.ID] {
			continue // the application runs it (appworker.go)
		}
		d.wg.Add(1)
		go d.run(w)
	}
	return nil
}

// Deinit implements driver.Driver.
func (d *Driver) Deinit(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stop.Store(true)
	for _, w := range d.workers {
		w.rings.Bell.Ring()
		if d.held[w.rings.Spec.ID] {
			d.teams.Leave(w.rings.Spec.ID) // the application runs it no more
		}
	}
	d.wg.Wait()
	d.workers = nil
	d.restoreProcs()
	if d.warmer != nil {
		d.warmer.Stop()
		d.log.Debug("page warmer stopped", "pages", d.warmer.Pages())
		d.warmer = nil
	}
	return nil
}

// startWarmer starts the arena's page warmer (shm.Warmer) unless the
// configuration turned it off or the arena is this process's own (a driver
// linked into the application touches the pages the application wrote).
// A warmer that cannot lower its thread's priority does not run: it would
// compete with the kernels. The caller holds d.mu.
func (d *Driver) startWarmer() {
	if !d.warm || d.arena.Creator() {
		return
	}
	w, err := d.arena.NewWarmer()
	if err != nil {
		d.log.Warn("no page warmer: kernels take the first touch of each page", "error", err)
		return
	}
	d.warmer = w
	go func() {
		if err := w.Run(); err != nil {
			d.log.Warn("no page warmer: kernels take the first touch of each page", "error", err)
		}
	}()
}

// reserveProcs keeps a P idle beside the n worker threads. A worker in a
// kernel is in a cgo call, which Go counts as a system call; with every P in
// one, sysmon takes a P back from each long kernel and hands it to a thread
// it wakes to look for work, which finds none: thousands of useless wake-ups
// a second, each preempting a worker on a small machine. With a P idle,
// sysmon leaves calls shorter than 10 ms alone.
func (d *Driver) reserveProcs(n int) {
	if cur := runtime.GOMAXPROCS(0); cur < n+1 {
		d.savedProcs, d.procs = cur, n+1
		runtime.GOMAXPROCS(n + 1)
	}
}

// restoreProcs undoes reserveProcs unless someone changed GOMAXPROCS since.
func (d *Driver) restoreProcs() {
	if d.savedProcs > 0 && runtime.GOMAXPROCS(0) == d.procs {
		runtime.GOMAXPROCS(d.savedProcs)
	}
	d.savedProcs = 0
}

// LoadKernel implements driver.Driver: CPU kernels are Go functions
// compiled into the driver, so there is no source to load.
func (d *Driver) LoadKernel(_ context.Context, k driver.KernelSource) (int, error) {
	return 0, fmt.Errorf("driver-cpu: cannot load kernel %q from source: CPU kernels are Go functions built into the driver (see cpudriver.WithKernels)", k.Name)
}

type worker struct {
	rings *driver.Rings
	// reused per task, so that run_once allocates nothing
	exec wire.Exec
	kctx kernel.Context
	comp wire.Completion
	// chain remembers the tasks that failed, for those queued behind them.
	chain driver.Chain
}

func (d *Driver) newWorker(spec driver.WorkerSpec, spin int) (*worker, error) {
	r, err := driver.OpenRings(d.arena, spec, spin)
	if err != nil {
		return nil, err
	}
	return &worker{rings: r}, nil
}

// run is StarPU's driver cycle for one worker: init, run_once while running,
// deinit.
func (d *Driver) run(w *worker) {
	defer d.wg.Done()
	// The teams waiting for this worker give up once it is gone.
	defer d.teams.Leave(w.rings.Spec.ID)
	// The goroutine ends locked to its thread, so that Go discards the
	// thread rather than reusing it with a one-core affinity.
	runtime.LockOSThread()
	if d.bind {
		d.bindThread(w.rings.Spec.Unit)
	}
	ready := func() bool { return w.rings.HasWork() || d.stop.Load() }
	for {
		// Deinit ends the tasks sent before it: the worker leaves only
		// after a pass begun once it saw the stop flag finds its rings
		// empty, since a task may land on one ring while it runs the other.
		stopping := d.stop.Load()
		if !stopping && !w.rings.Idle(ready, 200*time.Millisecond) {
			continue
		}
		if err := d.runOnce(w); err != nil {
			d.log.Error("worker stopped", "worker", w.rings.Spec.ID, "error", err)
			return
		}
		if stopping && !w.rings.HasWork() {
			return
		}
	}
}

// runOnce executes every task waiting on the worker's rings: the core's
// dispatch ring, then the scheduler's.
func (d *Driver) runOnce(w *worker) error {
	if err := d.runRing(w, w.rings.Dispatch, "dispatch ring"); err != nil {
		return err
	}
	if w.rings.Sched != nil {
		return d.runRing(w, w.rings.Sched, "scheduler ring")
	}
	return nil
}

func (d *Driver) runRing(w *worker, r *shm.Ring, name string) error {
	alive := func() bool { return !d.stop.Load() }
	for {
		if ran, err := d.runOne(w, r, name, nil, alive); !ran || err != nil {
			return err
		}
		if r == w.rings.Sched && !w.rings.Dispatch.Empty() {
			// A parallel task there may have teammates waiting for this
			// worker: the dispatch ring first (runOnce).
			return nil
		}
	}
}

// runOne runs the task at the head of r, if there is one, and reports
// whether there was; refuse, when not nil, fails it instead of running it.
func (d *Driver) runOne(w *worker, r *shm.Ring, name string, refuse error, alive func() bool) (bool, error) {
	msg := r.Peek()
	if msg == nil {
		return false, r.Err()
	}
	if t := wire.Type(msg); t != wire.TypeExec {
		return false, fmt.Errorf("%s: unexpected message type %d", name, t)
	}
	if err := w.exec.Decode(msg); err != nil {
		return false, err
	}
	c := &w.comp
	*c = wire.Completion{ID: w.exec.ID, StartNs: wire.Now(), Err: c.Err[:0]}
	var err error
	switch {
	case w.chain.Skip(&w.exec):
		c.Skipped = true // its predecessor failed: the core reschedules it
	case w.exec.Flags&wire.ExecParallel != 0:
		var post bool
		if post, err = d.runTeam(w, refuse); !post {
			// The team's master reports the task (parallel.go).
			r.Release()
			w.rings.Completed()
			return true, nil
		}
	case refuse != nil:
		err = refuse
		c.NotRun = true
	default:
		err = d.execute(w)
	}
	c.EndNs = wire.Now()
	if err != nil || c.Skipped {
		w.chain.Failed(w.exec.ID)
	}
	// The completion is committed before the Exec is released: the
	// core reads a drained scheduler ring as "every task posted there
	// has completed" (driver.WorkerSpec.SchedRing).
	if err := w.rings.Post(c, err, alive); err != nil {
		return false, err
	}
	r.Release()
	w.rings.Completed()
	return true, nil
}

func (d *Driver) execute(w *worker) (err error) {
	e := &w.exec
	if int(e.Kernel) >= len(d.kernels) {
		return fmt.Errorf("driver-cpu: kernel index %d out of range (%d kernels)", e.Kernel, len(d.kernels))
	}
	k := &d.kernels[e.Kernel]
	kc := &w.kctx
	kc.Buffers = kc.Buffers[:0]
	for i := range e.Buffers {
		bd := &e.Buffers[i]
		mem, err := d.arena.BytesChecked(base.Span{Offset: bd.Offset, Size: bd.Layout.Len()})
		if err != nil {
			return fmt.Errorf("kernel %s: buffer %d: %w", k.Name, i, err)
		}
		kc.Buffers = append(kc.Buffers, kernel.Buffer{Layout: bd.Layout, Mode: bd.Mode, Bytes: mem})
	}
	kc.Arg = e.Arg
	kc.Worker = w.rings.Spec.ID
	kc.TaskID = e.ID
	setTeam(&kc.Team, e, kc.Worker)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kernel %s panicked: %v", k.Name, r)
		}
	}()
	return k.Func(kc)
}

// bindThread pins the calling thread to the unit's core, as StarPU binds its
// workers, when the process may run there: unit n is the n-th core of the
// process's set. A worker's goroutine may run on the process's main thread,
// whose set is the one sched_getaffinity(pid) reads, so the set comes from
// New: read here, at each worker's start, it was one core once the second
// core's worker had bound the main thread, and the first worker bound to
// that core too, which halved a run's speed.
func (d *Driver) bindThread(unit int) {
	if unit < 0 || unit >= len(d.cpus) {
		return
	}
	var one unix.CPUSet
	one.Set(d.cpus[unit])
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		d.log.Warn("cannot bind worker thread", "unit", unit, "cpu", d.cpus[unit], "error", err)
	}
}

// allowedCPUs lists the cores the process may run on, in order; nil when
// the system will not say.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &set); err != nil {
		return nil
	}
	return cpusIn(set)
}

// cpusIn lists the cores set holds, in order.
func cpusIn(set unix.CPUSet) []int {
	var cpus []int
	for cpu := 0; len(cpus) < set.Count(); cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}
