package core

// Init, Options, Shutdown; design note: docs/design/plugins.md.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/internal/dashboard"
	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// DriverFactory builds a driver in the application's process, over the
// runtime's arena. Tests use it to run a driver without a plugin process.
type DriverFactory func(a *shm.Arena, log hclog.Logger) (driver.Driver, error)

// SchedulerFactory builds a scheduler in the application's process.
type SchedulerFactory func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error)

// Options configures Init.
type Options struct {
	// Config is used as is when set; otherwise the configuration is loaded
	// from ConfigFile (or $STARPU_CONFIG) and the environment.
	Config     *config.Config
	ConfigFile string
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// Logger receives the runtime's and the plugins' log lines.
	Logger hclog.Logger
	// Drivers and Scheduler, when set, run in process instead of the
	// plugins of the plugin directory.
	Drivers   []DriverFactory
	Scheduler SchedulerFactory
	// Trace records every task's execution for WriteTrace.
	Trace bool
	// TraceFile, when set, is created at Init and receives a trace as the
	// run goes, complete once Shutdown returns: a .json file Chrome/Perfetto
	// JSON, any other the native format `starpu trace` reads
	// (docs/design/tracing.md). $STARPU_TRACE sets it when empty.
	TraceFile string
	// TracePaused starts the trace (TraceFile, Trace) paused, as StarPU's
	// starpu_fxt_autostart_profiling(0): nothing is recorded until
	// ResumeTrace.
	TracePaused bool
	// Profiling records when each task is submitted (see SetProfiling).
	Profiling bool
	// Calibrate makes codelets with several implementations run them in
	// turn, so that performance models measure each; STARPU_CALIBRATE=1 or
	// 2 (config calibrate) does too.
	Calibrate bool
	// Kernels are CPU kernels compiled into the application: when set, the
	// runtime starts this program again as its CPU driver, hosting them, in
	// place of the plugin directory's driver-cpu (plugin_kernelhost.go).
	// Compose libraries here: the standard one is kernels.Library() of
	// plugins/driver-cpu/kernels. A name given twice is an error. With
	// NotLaunchedDrivers, this process hosts them instead.
	Kernels []kernel.Kernel
	// NotLaunchedDrivers are the CPU workers the application runs on
	// goroutines of its own (StarPU's not_launched_drivers), with
	// Runtime.RunDriver or DriverInit, DriverRunOnce and DriverDeinit;
	// their tasks wait until it does. The CPU driver then runs in this
	// process, over Kernels (or is the one Drivers gives, which must
	// implement driver.AppDriven), and starts its other workers itself
	// (plugin_appdriven.go).
	NotLaunchedDrivers []DriverID
	// Dashboard, when set, is the address (host:port; port 0 picks one)
	// the live dashboard serves on while the runtime runs, in place of
	// config dashboard ($STARPU_DASHBOARD); see Runtime.DashboardAddr. It
	// has no authentication: bind it to localhost.
	Dashboard string
}

// Runtime is one instance of the runtime: its plugins, workers, data and
// tasks. Everything global lives behind it.
type Runtime struct {
	// hostedKernels is how many kernels the application hosts as its own
	// CPU driver (Options.Kernels, plugin_kernelhost.go); 0 when it does
	// not.
	hostedKernels int
	// Set at Init and read-only after: configuration, logging, the
	// shared arena, drivers, workers and memory nodes.
	cfg    *config.Config
	log    hclog.Logger
	getenv func(string) string
	arena  *shm.Arena

	drivers []*driverInst
	workers []*workerState
	// nodes are the memory nodes, RAM first; multiNode is set when there
	// is more than RAM, and the data layer runs its coherency protocol.
	nodes     []*memNode
	multiNode bool
	// chains: tasks are queued behind their only unfinished predecessor
	// (task_chain.go); set when the engine starts.
	chains bool
	bus    *perfmodel.Bus
	// failedDrivers are the device drivers that did not start.
	failedDrivers []DriverNote
	// teams are the combined workers parallel tasks may run on
	// (task_parallel.go).
	teams combinedTable
	// maxExec is the largest Exec message a dispatch ring carries and
	// calibrate whether tasks spread over every architecture to build
	// their models.
	maxExec   int
	calibrate bool

	// The global scheduler and its process (nil in process); the engine
	// goroutine and the restart protocol own them (sched_restart.go).
	sched  sched.Scheduler
	schedP *loader.Plugin
	engine *engine
	// global holds every worker at Init. cands are the plugins found in
	// the plugin directory (nil until needed when everything runs in
	// process) and schedFactory Options.Scheduler.
	global       *SchedContext
	cands        map[string]loader.Candidate
	schedFactory SchedulerFactory
	// pluginsWhere says where cands were looked for, for messages.
	pluginsWhere string

	// Each subsystem's state, with the lock that guards it; their types
	// say the discipline and live beside the code that uses them.
	ctxs     ctxTable        // scheduling contexts (sched_context.go)
	codelets codeletTable    // codelets seen (task_codelet.go)
	models   modelTable      // performance models (task_models.go)
	waits    waitState       // pending tasks, idle waits, failures (task.go)
	tags     tagTable        // tags (task_tags.go)
	iters    iterTable       // iteration numbers (task_status.go)
	orders   orderTable      // per-worker execution orders (task_status.go)
	clock    profilingClock  // profiling and trace times (task_status.go)
	handles  handleSet       // registered handles (data.go)
	ifaces   ifaceTable      // data interface plugins (data_iface.go)
	access   accessRT        // access modes and arbitration (data_access.go)
	cbs      callbackThreads // threads running callbacks (data_acquire.go)
	restarts restartState    // plugin restarts (plugin_restart.go)
	apps     appTable        // application-driven workers (plugin_appdriven.go)
	beats    heartbeats      // plugins' heartbeat slots (plugin_health.go)
	threads  threadBudget    // GOMAXPROCS for in-process plugins

	nextJob    atomic.Uint64
	nextHandle atomic.Uint64

	broken   atomic.Pointer[error]
	shutdown atomic.Bool
	trace    *tracer // nil unless something is observed (task_trace.go)
	// fails are the jobs failed where they were pushed (failLater); nlost
	// counts the handles whose data a failed task lost (data_lost.go).
	fails failQueue
	nlost atomic.Int32
	// dash is the live dashboard's server, nil when off
	// (stats_dashboard.go).
	dash *dashboard.Server
}

// threadBudget is what reserveThreads raised GOMAXPROCS for: busy counts
// the busy threads of the engine, the application, in-process plugins and
// extensions (ReserveThreads), and saved is GOMAXPROCS before they raised
// it. Init touches it alone; CreateSchedContext, ReserveThreads and
// restoreThreads hold ctxs.mu.
type threadBudget struct {
	busy, saved int
}

// driverInst is one loaded driver and the workers it runs.
type driverInst struct {
	name        string
	drv         driver.Driver
	proc        *loader.Plugin // nil in process
	fp          *driver.Fingerprint
	kernelIndex map[string]int
	workers     []*workerState
	dead        atomic.Bool
	nodeBase    int // runtime number of the driver's node 1
	// pmu guards proc and drv once the engine runs: a restart swaps them
	// (plugin_restart.go); restarts counts the restarts (engine
	// goroutine), restarting is set from a death to the end of its
	// restart.
	pmu        sync.Mutex
	restarts   int
	restarting atomic.Bool
	// fenced: the process died and what it committed to its workers'
	// completion rings was read; anything read there until a new process
	// is swapped in is stale and dropped (engine goroutine).
	fenced bool
	// loaded are the kernels compiled from codelets' sources, by name and
	// source.
	loadMu sync.Mutex
	loaded map[string]int
}

// current is the driver's plugin process (nil in process) and client.
func (d *driverInst) current() (*loader.Plugin, driver.Driver) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	return d.proc, d.drv
}

// Init starts a runtime: it loads the configuration, creates the
// shared-memory arena, starts the driver and scheduler plugins, and brings up
// one worker per device unit.
func Init(ctx context.Context, opt Options) (_ *Runtime, err error) {
	if os.Getenv(EnvKernelHost) != "" {
		HostKernels(opt.Kernels...) // never returns
	}
	cfg := opt.Config
	if cfg == nil {
		getenv := opt.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		if cfg, err = config.Load(getenv, opt.ConfigFile); err != nil {
			return nil, err
		}
	} else if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opt.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "starpu", Level: hclog.LevelFromString(cfg.LogLevel), Output: os.Stderr})
	}
	getenv := opt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg = selectSched(ctx, cfg, log, os.Stderr) // StarPU's aliases and STARPU_SCHED=help (sched_select.go)
	rt := &Runtime{cfg: cfg, log: log, getenv: getenv}
	rt.tags.byID = map[TagID]*tagState{}
	rt.handles.set = map[*Handle]struct{}{}
	rt.restarts.stop = make(chan struct{})
	rt.waits.idle = sync.NewCond(&rt.waits.mu)
	rt.calibrate = opt.Calibrate || cfg.Calibrate > 0
	rt.clock.profiling.Store(opt.Profiling)
	rt.clock.base, rt.clock.baseNs = time.Now(), wire.Now()
	if err := rt.initTrace(opt); err != nil { // Options.Trace, TraceFile, STARPU_*_STATS (task_trace.go)
		return nil, err
	}
	defer rt.closeTraceOnError(&err)
	defer func() {
		if err != nil {
			rt.teardown()
		}
	}()
	if err := rt.listenDashboard(opt); err != nil { // before any plugin starts (stats_dashboard.go)
		return nil, err
	}
	if err := rt.createArena(); err != nil {
		return nil, err
	}
	if opt, err = rt.initAppDrivers(opt); err != nil { // Options.NotLaunchedDrivers (plugin_appdriven.go)
		return nil, err
	}
	var cands map[string]loader.Candidate
	if len(opt.Drivers) == 0 || opt.Scheduler == nil {
		if cands, rt.pluginsWhere, err = findPlugins(cfg); err != nil {
			return nil, err
		}
	}
	if err := useKernelHost(opt, cands); err != nil {
		return nil, err
	}
	rt.hostedKernels = len(opt.Kernels)
	rt.cands, rt.schedFactory = cands, opt.Scheduler
	// The scheduler's process starts while the drivers' do.
	sl := rt.prelaunchSched(ctx, opt.Scheduler, cands)
	defer sl.drop()
	if err := rt.loadDrivers(ctx, opt.Drivers, cands); err != nil {
		return nil, err
	}
	if err := rt.loadScheduler(ctx, opt.Scheduler, cands, sl); err != nil {
		return nil, err
	}
	if err := rt.checkPluginBlocks(cands); err != nil {
		return nil, err
	}
	if err := rt.start(ctx); err != nil {
		return nil, err
	}
	if err := rt.loadBus(ctx); err != nil {
		return nil, err
	}
	for _, x := range cfg.Contexts {
		if _, err := rt.createContext(ctx, x); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	rt.serveDashboard()
	if tr := rt.trace; tr != nil {
		// STARPU_WORKER_STATS splits the workers' time from here: the
		// plugins' start is not time a worker could have run tasks.
		tr.started = time.Now()
	}
	return rt, nil
}

func (rt *Runtime) createArena() error {
	size := rt.cfg.ArenaSize
	if size == 0 {
		size = defaultArenaSize()
	}
	a, err := shm.Create(size, controlBytes(maxWorkers))
	if err != nil {
		return fmt.Errorf("create shared-memory arena: %w", err)
	}
	rt.arena = a
	return rt.initHeartbeats()
}

func available(cands map[string]loader.Candidate, kind base.Kind) []string {
	var names []string
	for _, c := range cands {
		if c.Kind == kind {
			names = append(names, c.Name)
		}
	}
	sort.Strings(names)
	return names
}

// driverOff reports whether driver plugin name is turned off, its process
// not started: STARPU_N<NAME> is 0, as STARPU_NCUDA=0 and STARPU_NOPENCL=0
// ask (and the same for a vendor's driver-<name>). The CPU driver's count
// is ncpu (config).
func (rt *Runtime) driverOff(name string) bool {
	env := "STARPU_N" + strings.ToUpper(name)
	if n, err := strconv.Atoi(strings.TrimSpace(rt.getenv(env))); err != nil || n != 0 {
		return false
	}
	rt.failedDrivers = append(rt.failedDrivers, DriverNote{Driver: "driver-" + name, Note: "not started: " + env + " is 0"})
	return true
}

// configure checks a plugin's config block against its schema and applies it.
func (rt *Runtime) configure(ctx context.Context, p base.Plugin, name string) error {
	blk, ok := rt.cfg.Plugins[name]
	if !ok {
		return nil
	}
	schema, err := p.ConfigSchema(ctx)
	if err != nil {
		return fmt.Errorf("plugin %s: config schema: %w", name, err)
	}
	if err := schema.Validate(blk.Config); err != nil {
		return fmt.Errorf("config for plugin %s: %w", name, err)
	}
	if err := p.SetConfig(ctx, blk.Config); err != nil {
		return fmt.Errorf("plugin %s: set config: %w", name, err)
	}
	return nil
}

func (rt *Runtime) loadDrivers(ctx context.Context, factories []DriverFactory, cands map[string]loader.Candidate) error {
	type loaded struct {
		name string
		drv  driver.Driver
		proc *loader.Plugin
		// restarts are those used while it started (startDriverPlugin).
		restarts int
	}
	var ls []loaded
	if len(factories) > 0 {
		for _, f := range factories {
			d, err := f(rt.arena, rt.log)
			if err != nil {
				return fmt.Errorf("in-process driver: %w", err)
			}
			info, err := d.PluginInfo(ctx)
			if err != nil {
				return fmt.Errorf("in-process driver: %w", err)
			}
			ls = append(ls, loaded{name: info.Name, drv: d})
		}
	} else {
		// The CPU driver is the one this runtime needs; other drivers load
		// when present.
		names := available(cands, base.KindDriver)
		if f := rt.apps.cpu; f != nil {
			// The application runs CPU workers: the CPU driver runs here
			// (plugin_appdriven.go).
			d, err := f(rt.arena, rt.log)
			if err != nil {
				return fmt.Errorf("in-process driver-cpu: %w", err)
			}
			ls = append(ls, loaded{name: "cpu", drv: d})
		}
		names = slices.DeleteFunc(names, func(n string) bool {
			if n == "cpu" {
				return rt.cfg.NCPU == 0 || rt.apps.cpu != nil
			}
			return rt.driverOff(n)
		})
		// The processes start side by side: a start is mostly waiting
		// for the new process to handshake.
		type start struct {
			loaded
			err error
		}
		starts := make([]start, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Go(func() {
				p, d, used, err := rt.startDriverPlugin(ctx, n, cands["driver-"+n], 0)
				starts[i] = start{loaded{name: n, drv: d, proc: p, restarts: used}, err}
			})
		}
		wg.Wait()
		for _, s := range starts {
			if s.err == nil {
				ls = append(ls, s.loaded)
				continue
			}
			if s.name == "cpu" {
				for _, o := range starts {
					if o.proc != nil {
						o.proc.Kill()
					}
				}
				return kernelHostHint(cands["driver-cpu"], s.err)
			}
			// A device driver that cannot start (no OpenCL library, say)
			// costs its devices, not the runtime.
			rt.log.Warn("driver plugin did not start; running without it", "driver", "driver-"+s.name, "error", s.err)
			rt.failedDrivers = append(rt.failedDrivers, DriverNote{Driver: "driver-" + s.name, Note: "did not start: " + s.err.Error()})
		}
	}
	// Each driver describes its devices (Fingerprint: pocl, say, takes a
	// good part of a start to find its platform) side by side too.
	type probe struct {
		di         *driverInst
		fp         *driver.Fingerprint
		configured bool
		err        error
	}
	probes := make([]probe, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		di := &driverInst{name: l.name, drv: l.drv, proc: l.proc, restarts: l.restarts}
		rt.drivers = append(rt.drivers, di) // Init's failure path stops them all
		probes[i].di = di
		wg.Go(func() {
			pr := &probes[i]
			for {
				pr.configured = false
				if pr.err = rt.configure(ctx, di.drv, "driver-"+di.name); pr.err == nil {
					pr.configured = true
					pr.fp, pr.err = di.drv.Fingerprint(ctx)
				}
				if pr.err == nil || !died(di.proc, pr.err) {
					return
				}
				// Killed before it answered: started again, while it
				// has restarts, as one that died during its start.
				if pr.err = rt.restartStarting(ctx, di, pr.err); pr.err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, pr := range probes {
		di, fp, err := pr.di, pr.fp, pr.err
		if err != nil && !pr.configured {
			return err
		}
		if err == nil && di.proc == nil {
			// A plugin's reply is checked by its client; an in-process
			// driver's here.
			err = fp.Check()
		}
		if err != nil && di.proc != nil && di.name != "cpu" {
			// A device driver that cannot describe its devices (a bad
			// STARPU_LIMIT_OPENCL_MEM, say) costs its devices, like one
			// that does not start.
			di.proc.Kill()
			rt.drivers = slices.DeleteFunc(rt.drivers, func(d *driverInst) bool { return d == di })
			rt.log.Warn("driver plugin failed its fingerprint; running without it", "driver", "driver-"+di.name, "error", err)
			rt.failedDrivers = append(rt.failedDrivers, DriverNote{Driver: "driver-" + di.name, Note: "did not start: fingerprint: " + err.Error()})
			continue
		}
		if err != nil {
			return fmt.Errorf("driver-%s: fingerprint: %w", di.name, err)
		}
		di.fp = fp
		di.kernelIndex = make(map[string]int, len(fp.Kernels))
		for i, k := range fp.Kernels {
			di.kernelIndex[k] = i
		}
	}
	if rt.cfg.NCPU != 0 && rt.driverFor(driver.CPU) == nil {
		return fmt.Errorf("no CPU driver: no plugin driver-cpu %s (found drivers: %v)", rt.pluginsWhere, available(cands, base.KindDriver))
	}
	return nil
}

// checkPluginBlocks rejects config blocks for plugins that do not exist, so
// that a misspelt plugin name does not silently drop its configuration.
func (rt *Runtime) checkPluginBlocks(cands map[string]loader.Candidate) error {
	known := map[string]bool{"sched-" + rt.cfg.Sched: true}
	for _, d := range rt.drivers {
		known["driver-"+d.name] = true
	}
	for name := range cands {
		known[name] = true
	}
	var names []string
	for name := range rt.cfg.Plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !known[name] {
			var all []string
			for k := range known {
				all = append(all, k)
			}
			sort.Strings(all)
			return fmt.Errorf("config has a block for plugin %q, which is not found %s (plugins: %v)", name, rt.pluginsWhere, all)
		}
	}
	return nil
}

func (rt *Runtime) driverFor(a driver.Arch) *driverInst {
	for _, d := range rt.drivers {
		if d.fp.Arch == a {
			return d
		}
	}
	return nil
}

// schedLaunch is the scheduler plugin's start, under way while the drivers
// start (Init); nil when there is none to start.
type schedLaunch struct {
	done chan struct{}
	p    *loader.Plugin
	err  error
}

// prelaunchSched starts the configured scheduler plugin's process, unless
// f runs the scheduler in process or no such plugin is found
// (loadScheduler then says so).
func (rt *Runtime) prelaunchSched(ctx context.Context, f SchedulerFactory, cands map[string]loader.Candidate) *schedLaunch {
	c, ok := cands["sched-"+rt.cfg.Sched]
	if f != nil || !ok {
		return nil
	}
	sl := &schedLaunch{done: make(chan struct{})}
	go func() {
		defer close(sl.done)
		sl.p, sl.err = rt.launch(ctx, c)
	}()
	return sl
}

// take waits for the start and hands its plugin over; the next take or
// drop has nothing.
func (sl *schedLaunch) take() (*loader.Plugin, error) {
	<-sl.done
	p, err := sl.p, sl.err
	sl.p, sl.err = nil, errors.New("scheduler plugin taken twice")
	return p, err
}

// drop kills the started plugin unless take handed it over: Init failed
// before it needed it.
func (sl *schedLaunch) drop() {
	if sl == nil {
		return
	}
	if p, _ := sl.take(); p != nil {
		p.Kill()
	}
}

func (rt *Runtime) loadScheduler(ctx context.Context, f SchedulerFactory, cands map[string]loader.Candidate, sl *schedLaunch) error {
	if f != nil {
		s, err := f(rt.arena, rt.log)
		if err != nil {
			return fmt.Errorf("in-process scheduler: %w", err)
		}
		rt.sched = s
	} else {
		name := rt.cfg.Sched
		if _, ok := cands["sched-"+name]; !ok || sl == nil {
			return fmt.Errorf("unknown scheduler %q: no plugin sched-%s %s (available: %v)", name, name, rt.pluginsWhere, available(cands, base.KindScheduler))
		}
		p, err := sl.take()
		if err != nil {
			return err
		}
		rt.schedP = p
		if rt.sched, err = p.Scheduler(); err != nil {
			return err
		}
	}
	if err := rt.configure(ctx, rt.sched, "sched-"+rt.cfg.Sched); err != nil {
		return err
	}
	logSched(ctx, rt.log, rt.cfg, rt.sched)
	return nil
}

// start creates the workers, their rings, and starts drivers, scheduler and
// the engine.
func (rt *Runtime) start(ctx context.Context) error {
	e, err := newEngine(rt)
	if err != nil {
		return err
	}
	rt.engine = e
	for _, d := range rt.drivers {
		n := len(d.fp.Units)
		if d.fp.Arch == driver.CPU && rt.cfg.NCPU > 0 {
			n = rt.cfg.NCPU
			if n > len(d.fp.Units) {
				rt.log.Warn("more CPU workers than cores: workers will share cores", "ncpu", n, "cores", len(d.fp.Units))
			}
		}
		if len(d.fp.Units) == 0 {
			n = 0
		}
		req := &driver.InitRequest{SpinIters: rt.cfg.SpinIters}
		for u := 0; u < n; u++ {
			if len(rt.workers) >= maxWorkers {
				return fmt.Errorf("too many workers: at most %d", maxWorkers)
			}
			w, err := e.addWorker(d, u%len(d.fp.Units))
			if err != nil {
				return err
			}
			req.Workers = append(req.Workers, w.spec)
		}
		if err := rt.holdAppWorkers(d); err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		if d.proc == nil {
			rt.reserveThreads(n)
		}
		err := d.drv.Init(ctx, req)
		for err != nil && died(d.proc, err) {
			// Killed during Init: started again, while it has restarts.
			if err = rt.restartStarting(ctx, d, err); err != nil {
				break
			}
			err = d.drv.Init(ctx, req)
		}
		if err != nil {
			return fmt.Errorf("driver-%s: init: %w", d.name, err)
		}
		if err := rt.openAppWorkers(d); err != nil {
			return err
		}
	}
	if len(rt.workers) == 0 {
		return errors.New("no worker: every driver is disabled or found no device")
	}
	if err := rt.setupNodes(); err != nil {
		return err
	}
	rt.setupArchKeys()
	rt.formCombined()
	for _, w := range rt.workers {
		rt.global.workers = append(rt.global.workers, w.id)
	}
	if rt.schedP == nil {
		rt.reserveThreads(1)
	}
	// The engine's thread and the application's, whatever the plugins:
	// under mpirun's default binding of a rank to one core, Go starts
	// with one P, which the engine's sleep would hold.
	rt.reserveThreads(0)
	if err := rt.sched.Init(ctx, rt.schedInit(rt.global.workers, rt.global.rings)); err != nil {
		return fmt.Errorf("scheduler %s: init: %w", rt.cfg.Sched, err)
	}
	rt.traceDescribe() // the workers exist now (task_trace.go)
	e.start()
	return nil
}

// reserveThreads makes room in Go's scheduler for n more threads that an
// in-process plugin locks and keeps busy (workers, a policy host), or
// that an extension locks and blocks in system calls (ReserveThreads): each
// polls its ring on a locked thread, and one that sleeps on a futex keeps its
// P until Go's sysmon takes it back, so with fewer Ps than such threads a
// dependency hop waited for sysmon (0.5 ms per task with GOMAXPROCS=2
// instead of a few µs). The engine's thread and the application's are
// counted at the first reservation. Plugin processes size their own (the
// CPU driver keeps a P idle beside its workers).
func (rt *Runtime) reserveThreads(n int) {
	if rt.threads.busy == 0 {
		rt.threads.busy = 2
	}
	rt.threads.busy += n
	if cur := runtime.GOMAXPROCS(0); cur < rt.threads.busy {
		rt.log.Debug("raising GOMAXPROCS for the threads that block", "from", cur, "to", rt.threads.busy)
		if rt.threads.saved == 0 {
			rt.threads.saved = cur
		}
		runtime.GOMAXPROCS(rt.threads.busy)
	}
}

// restoreThreads undoes reserveThreads once the in-process plugins stopped,
// unless someone else changed GOMAXPROCS meanwhile.
func (rt *Runtime) restoreThreads() {
	rt.ctxs.mu.Lock()
	defer rt.ctxs.mu.Unlock()
	if rt.threads.saved > 0 && runtime.GOMAXPROCS(0) == rt.threads.busy {
		runtime.GOMAXPROCS(rt.threads.saved)
	}
	rt.threads.saved = 0
}

// usable reports why the runtime cannot take work, if it cannot.
func (rt *Runtime) usable() error {
	if rt.shutdown.Load() {
		return ErrShutdown
	}
	if p := rt.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// Shutdown waits for the submitted tasks, writes every registered handle
// back, stops the plugins and removes the shared memory.
func (rt *Runtime) Shutdown() error {
	if !rt.shutdown.CompareAndSwap(false, true) {
		return ErrShutdown
	}
	rt.watchAppDrivers() // nobody may be running an application-driven worker (plugin_appdriven.go)
	taskErr := rt.WaitForAll()
	rt.saveModels()
	var errs []error
	if err := rt.unregisterAll(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, rt.teardown())
	errs = append(errs, rt.closeTrace()) // after the engine stopped (task_trace.go)
	if len(errs) > 0 && taskErr != nil {
		rt.log.Debug("tasks failed before shutdown", "error", taskErr)
	}
	return errors.Join(errs...)
}

// teardown stops whatever Init started, in reverse order. Each Deinit gets
// a deadline of its own, so that a hung plugin (stopped, deadlocked) costs
// a bounded time and the others still get theirs; then Kill ends the
// plugin process, by SIGKILL if it does not exit in time.
func (rt *Runtime) teardown() error {
	const deinitTimeout = 5 * time.Second
	// deinit calls f, the Deinit of plugin p (nil: in process).
	deinit := func(p *loader.Plugin, f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), deinitTimeout)
		defer cancel()
		err := f(ctx)
		if p != nil && errors.Is(err, context.DeadlineExceeded) {
			// Not a bare "context deadline exceeded": say what the
			// process is doing, which is then killed.
			err = fmt.Errorf("no answer to Deinit within %v from pid %d (%s); killed: %w", deinitTimeout, p.Pid(), procState(p.Pid()), err)
		}
		return err
	}
	// The dashboard first, while the engine still answers it.
	errs := []error{rt.stopDashboard()}
	// Then restarts, while the engine runs their last steps.
	rt.restarts.mu.Lock()
	if !rt.restarts.off {
		rt.restarts.off = true
		close(rt.restarts.stop)
	}
	rt.restarts.mu.Unlock()
	rt.restarts.wg.Wait()
	if rt.engine != nil {
		rt.engine.stop()
	}
	// The global policy: the one Init started, or its restarted instance.
	s, sp := rt.sched, rt.schedP
	if rt.global != nil {
		s, sp = rt.global.sched, rt.global.plugin()
	}
	if s != nil && rt.engine != nil && rt.engine.started {
		if sp == nil || !sp.Exited() {
			if err := deinit(sp, s.Deinit); err != nil {
				errs = append(errs, fmt.Errorf("scheduler deinit: %w", err))
			}
		}
	}
	if sp != nil {
		sp.Kill()
	}
	if rt.engine != nil {
		for _, c := range (*rt.engine.ctxs.Load())[1:] {
			if rt.engine.started && (c.proc == nil || !c.proc.Exited()) {
				if err := deinit(c.proc, c.sched.Deinit); err != nil {
					errs = append(errs, fmt.Errorf("%s: scheduler deinit: %w", c, err))
				}
			}
			if c.proc != nil {
				c.proc.Kill()
			}
		}
	}
	rt.ifaces.mu.Lock()
	for _, in := range rt.ifaces.list {
		in.proc.Kill()
	}
	rt.ifaces.mu.Unlock()
	// The application's goroutines leave the rings before the driver stops.
	errs = append(errs, rt.closeAppDrivers(deinitTimeout))
	for _, d := range rt.drivers {
		if len(d.workers) > 0 && (d.proc == nil || !d.proc.Exited()) {
			if err := deinit(d.proc, d.drv.Deinit); err != nil {
				errs = append(errs, fmt.Errorf("driver-%s deinit: %w", d.name, err))
			}
		}
		if d.proc != nil {
			d.proc.Kill()
		}
	}
	rt.restoreThreads()
	if rt.arena != nil && !rt.apps.stuck {
		if err := rt.arena.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
