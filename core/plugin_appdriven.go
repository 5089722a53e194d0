package core

// Application-driven workers; design note: docs/design/plugins.md,
// "Application-driven drivers".
//
// StarPU's not-launched drivers. An application names workers in
// Options.NotLaunchedDrivers (starpu_conf.not_launched_drivers) and runs
// each on a goroutine of its own: RunDriver (starpu_driver_run) until
// RequestDriversTermination (starpu_drivers_request_termination) or
// Shutdown, or DriverInit, DriverRunOnce in its own loop, DriverDeinit.
// Such a worker must run in the application's process, so the CPU driver
// then runs there too (cpudriver over Options.Kernels, in place of the
// driver-cpu plugin), holding those workers back (driver.AppDriven); its
// other workers run on goroutines it starts, as in the plugin.
//
// Protocol. Each held worker is in one mode, changed under appWorker.mu:
//
//	free ──RunDriver──> loop ──(termination, Shutdown, ctx)──> free
//	free ──DriverInit──> init ──DriverDeinit──> free
//	free, init ──(Shutdown finds it abandoned)──> refused
//
// In loop mode the RunDriver goroutine alone takes the worker's rings; in
// init mode a DriverRunOnce does, one at a time (busy). Everything that
// takes the rings counts in active; Shutdown's teardown sets closed under
// mu (so no call starts after it) and waits for active before the CPU
// driver's Deinit and the unmapping of the arena, which the rings live in.
//
// Tasks for a held worker wait until the application runs it, as in
// StarPU. Shutdown must not wait for ever on one nobody runs: while it
// waits for the tasks, a watcher checks every livenessCheckEvery for a
// held worker with a task waiting that no RunDriver runs and no pass has
// touched for plugin_timeout (counted from Shutdown at the earliest). It
// puts that worker in refused mode and fails its tasks from a goroutine of
// its own (AppWorker.Refuse), so that they complete with an error naming
// the worker, and Shutdown returns that error too.
//
// Rejected: running an abandoned worker's tasks on Shutdown's goroutine
// (the application kept that worker for a thread of its own, a GL
// context's say: a kernel run elsewhere may crash or compute wrong);
// failing at once when Shutdown finds a worker not run (the goroutine the
// application started for RunDriver may not have reached it yet); keeping
// the other CPU workers in the driver-cpu plugin beside an in-process
// driver for the held ones (two CPU drivers: kernel indices, scheduler
// rings and chains assume one per architecture, and the held worker runs
// the same kernels in the application's process anyway); a config file
// key or an environment variable (StarPU has none: a held worker needs
// the program's code to run it, so only the program may hold one).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
)

// DriverID names one worker the application runs itself, as StarPU's
// struct starpu_driver does: its architecture and its number among the
// workers of that architecture, from 0 in the order Runtime.Workers lists
// them (StarPU's cpu_id). Only CPU workers can be application-driven.
type DriverID struct {
	Arch  Arch
	Index int
}

// String is the ID as messages write it: "cpu:0".
func (id DriverID) String() string { return fmt.Sprintf("%s:%d", id.Arch, id.Index) }

// appMode is what an application-driven worker is doing; see the header.
type appMode uint8

const (
	appFree    appMode = iota // nobody runs it
	appLoop                   // a RunDriver runs it
	appInit                   // DriverInit made it the application's
	appRefused                // Shutdown found it abandoned: its tasks fail
)

// appWorker is the core's side of one application-driven worker. mu
// guards mode, busy, deinited and last.
type appWorker struct {
	id DriverID
	w  *workerState
	aw driver.AppWorker

	mu   sync.Mutex
	mode appMode
	// busy: a DriverRunOnce is under way; deinited: DriverDeinit ended
	// the last DriverInit (for the error of a DriverRunOnce after it).
	busy, deinited bool
	// last is when a pass or a RunDriver last ended.
	last time.Time

	// closed is set by teardown: every call fails from then on. active
	// counts what takes the rings: RunDriver, DriverRunOnce, refusing.
	closed  atomic.Bool
	active  sync.WaitGroup
	refused atomic.Int64 // tasks failed in refused mode
}

// appTable is the runtime's application-driven workers. want and cpu are
// set by Init, list by start; all three are read-only after Init.
type appTable struct {
	want []DriverID
	// cpu builds the in-process CPU driver when Init uses plugins for the
	// rest; nil when Options.Drivers gives it.
	cpu  DriverFactory
	list []*appWorker
	// terminated is RequestDriversTermination's, for good.
	terminated atomic.Bool
	// The Shutdown watcher's stop and done (nil when none runs), and
	// stuck: a pass outlived teardown's wait, the arena stays mapped.
	stopWatch, watchDone chan struct{}
	stuck                bool
}

// appIdle bounds a RunDriver's sleeps: it checks its stop conditions at
// least this often even if a wake-up were lost.
const appIdle = 200 * time.Millisecond

// initAppDrivers checks Options.NotLaunchedDrivers and, when the drivers
// are plugins, arranges for the CPU driver to run in this process over
// Options.Kernels; it returns opt without the kernels then, which this
// process hosts instead of a kernel-host child.
func (rt *Runtime) initAppDrivers(opt Options) (Options, error) {
	ids := opt.NotLaunchedDrivers
	if len(ids) == 0 {
		return opt, nil
	}
	seen := map[DriverID]bool{}
	for _, id := range ids {
		switch {
		case id.Arch != driver.CPU:
			return opt, fmt.Errorf("Options.NotLaunchedDrivers: %s: only CPU workers can be application-driven: a %s worker runs in its driver plugin's process, where no thread of this application is", id, id.Arch)
		case id.Index < 0:
			return opt, fmt.Errorf("Options.NotLaunchedDrivers: %s: a negative worker number", id)
		case seen[id]:
			return opt, fmt.Errorf("Options.NotLaunchedDrivers: %s is given twice", id)
		case rt.cfg.NCPU == 0:
			return opt, fmt.Errorf("Options.NotLaunchedDrivers: %s: ncpu is 0, so there is no CPU worker", id)
		}
		seen[id] = true
	}
	rt.apps.want = ids
	if len(opt.Drivers) > 0 {
		return opt, nil // the CPU driver among them must be driver.AppDriven
	}
	if len(opt.Kernels) == 0 {
		return opt, fmt.Errorf("Options.NotLaunchedDrivers: %s: the CPU driver then runs in this process and hosts the kernels compiled into it: list them in Options.Kernels (kernels.Library() of plugins/driver-cpu/kernels for the standard ones)", ids[0])
	}
	if err := checkKernels(opt.Kernels); err != nil {
		return opt, err
	}
	ks := opt.Kernels
	rt.apps.cpu = func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return cpudriver.New(a, log.Named("driver-cpu"), cpudriver.WithKernels(ks...)), nil
	}
	opt.Kernels = nil
	return opt, nil
}

// holdAppWorkers tells d which of its workers the application runs,
// before d's Init.
func (rt *Runtime) holdAppWorkers(d *driverInst) error {
	var ids []int
	for _, id := range rt.apps.want {
		if id.Arch != d.fp.Arch {
			continue
		}
		if id.Index >= len(d.workers) {
			return fmt.Errorf("Options.NotLaunchedDrivers: %s: there are %d %s workers, numbered from 0", id, len(d.workers), d.fp.Arch)
		}
		ids = append(ids, d.workers[id.Index].id)
	}
	if len(ids) == 0 {
		return nil
	}
	ad, ok := d.drv.(driver.AppDriven)
	if !ok {
		return fmt.Errorf("Options.NotLaunchedDrivers: driver-%s (Options.Drivers) does not implement driver.AppDriven: the application cannot run its workers", d.name)
	}
	if err := ad.Hold(ids); err != nil {
		return fmt.Errorf("driver-%s: %w", d.name, err)
	}
	return nil
}

// openAppWorkers takes d's held workers once d is initialised.
func (rt *Runtime) openAppWorkers(d *driverInst) error {
	for _, id := range rt.apps.want {
		if id.Arch != d.fp.Arch {
			continue
		}
		w := d.workers[id.Index]
		aw, err := d.drv.(driver.AppDriven).AppWorker(w.id)
		if err != nil {
			return fmt.Errorf("driver-%s: %w", d.name, err)
		}
		rt.apps.list = append(rt.apps.list, &appWorker{id: id, w: w, aw: aw})
	}
	return nil
}

// appWorkerOf finds application-driven worker id, or says why there is
// none.
func (rt *Runtime) appWorkerOf(id DriverID, call string) (*appWorker, error) {
	for _, a := range rt.apps.list {
		if a.id == id {
			return a, nil
		}
	}
	var held []string
	for _, a := range rt.apps.list {
		held = append(held, a.id.String())
	}
	n := 0
	for _, w := range rt.workers {
		if w.drv.fp.Arch != id.Arch {
			continue
		}
		if n == id.Index {
			return nil, fmt.Errorf("%w: %s %s: it is worker %d, which the runtime launched; the application runs only the workers in Options.NotLaunchedDrivers %v", ErrDriverCall, call, id, w.id, held)
		}
		n++
	}
	return nil, fmt.Errorf("%w: %s %s: no such worker (%d %s workers); the application-driven ones are %v", ErrDriverCall, call, id, n, id.Arch, held)
}

// stateErr says why call cannot run a in its mode; mu held.
func (a *appWorker) stateErr(call string) error {
	switch {
	case a.closed.Load():
		return fmt.Errorf("%s %s: %w", call, a.id, ErrShutdown)
	case a.mode == appRefused:
		return fmt.Errorf("%w: %s %s: Shutdown found nobody running it and failed its tasks", ErrDriverCall, call, a.id)
	case a.mode == appLoop:
		return fmt.Errorf("%w: %s %s: a RunDriver is running it", ErrDriverCall, call, a.id)
	case a.mode == appInit && call == "RunDriver":
		return fmt.Errorf("%w: RunDriver %s: DriverInit made it the application's: run it with DriverRunOnce, or call DriverDeinit first", ErrDriverCall, a.id)
	case a.mode == appInit:
		return fmt.Errorf("%w: %s %s: it is initialised already", ErrDriverCall, call, a.id)
	case a.deinited:
		return fmt.Errorf("%w: %s %s after DriverDeinit: call DriverInit again first", ErrDriverCall, call, a.id)
	}
	return fmt.Errorf("%w: %s %s before DriverInit", ErrDriverCall, call, a.id)
}

// RunDriver runs application-driven worker id (Options.NotLaunchedDrivers)
// on the calling goroutine, as StarPU's starpu_driver_run: it runs the
// tasks the scheduler gives the worker, one after the other, with the
// goroutine locked to its OS thread, and sleeps when there is none. It
// returns nil once RequestDriversTermination or Shutdown asks it to, after
// the task under way, and ctx.Err() when ctx ends; it returns nil at once
// if termination was requested before it began. Tasks left on the worker
// wait for the next RunDriver or DriverRunOnce. A kernel it runs must not
// wait for tasks: the worker would wait for itself (blocking calls from it
// fail with ErrDeadlock).
func (rt *Runtime) RunDriver(ctx context.Context, id DriverID) error {
	a, err := rt.appWorkerOf(id, "RunDriver")
	if err != nil {
		return err
	}
	if err := rt.mayBlock("RunDriver"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	a.mu.Lock()
	if a.closed.Load() || a.mode != appFree {
		err := a.stateErr("RunDriver")
		a.mu.Unlock()
		return err
	}
	a.mode = appLoop
	a.active.Add(1)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.mode, a.last = appFree, time.Now()
		a.mu.Unlock()
		a.active.Done()
	}()
	var cancelled atomic.Bool
	stopWake := context.AfterFunc(ctx, func() { cancelled.Store(true); a.aw.Wake() })
	defer stopWake()
	stop := func() bool { return rt.apps.terminated.Load() || a.closed.Load() || cancelled.Load() }
	// The loop runs as a callback does: locked to its thread, where
	// blocking calls from a kernel fail instead of waiting for themselves.
	rt.callback(func() {
		for !stop() && err == nil {
			if !a.aw.Idle(stop, appIdle) {
				continue
			}
			for ran := true; ran && err == nil && !stop(); {
				ran, err = a.aw.RunOnce()
			}
		}
	})
	switch {
	case err != nil:
		return fmt.Errorf("RunDriver %s: %w", id, err)
	case cancelled.Load() && !rt.apps.terminated.Load() && !a.closed.Load():
		return ctx.Err()
	}
	return nil
}

// RequestDriversTermination makes every RunDriver return, now and for
// the rest of the runtime's life, as StarPU's
// starpu_drivers_request_termination does. It does not stop the
// application's own DriverRunOnce loops, nor the workers the runtime
// launched.
func (rt *Runtime) RequestDriversTermination() {
	rt.apps.terminated.Store(true)
	for _, a := range rt.apps.list {
		a.aw.Wake()
	}
}

// DriverInit makes application-driven worker id the application's, to
// run with DriverRunOnce until DriverDeinit (StarPU's starpu_driver_init).
// The kernels run on the thread that calls DriverRunOnce: one that needs
// them on a given thread calls runtime.LockOSThread first and makes every
// DriverRunOnce from that goroutine.
func (rt *Runtime) DriverInit(id DriverID) error {
	a, err := rt.appWorkerOf(id, "DriverInit")
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() || a.mode != appFree {
		return a.stateErr("DriverInit")
	}
	a.mode, a.deinited = appInit, false
	return nil
}

// DriverRunOnce runs at most one task waiting for application-driven
// worker id, to its end, on the calling goroutine (StarPU's
// starpu_driver_run_once); it never waits for a task, and reports whether
// it ran one. The worker must be DriverInit's, and one DriverRunOnce runs
// it at a time. A kernel it runs must not wait for tasks (ErrDeadlock).
func (rt *Runtime) DriverRunOnce(id DriverID) (bool, error) {
	a, err := rt.appWorkerOf(id, "DriverRunOnce")
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	switch {
	case a.closed.Load() || a.mode != appInit:
		err = a.stateErr("DriverRunOnce")
	case a.busy:
		err = fmt.Errorf("%w: DriverRunOnce %s: another DriverRunOnce is running it: one goroutine drives a worker", ErrDriverCall, id)
	}
	if err != nil {
		a.mu.Unlock()
		return false, err
	}
	a.busy = true
	a.active.Add(1)
	a.mu.Unlock()
	var ran bool
	rt.callback(func() { ran, err = a.aw.RunOnce() })
	a.mu.Lock()
	a.busy, a.last = false, time.Now()
	a.mu.Unlock()
	a.active.Done()
	if err != nil {
		return ran, fmt.Errorf("DriverRunOnce %s: %w", id, err)
	}
	return ran, nil
}

// DriverDeinit ends DriverInit (StarPU's starpu_driver_deinit): the
// worker is nobody's again, and its tasks wait for the next DriverInit or
// RunDriver.
func (rt *Runtime) DriverDeinit(id DriverID) error {
	a, err := rt.appWorkerOf(id, "DriverDeinit")
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed.Load() || a.mode != appInit:
		if a.mode == appFree && !a.closed.Load() {
			return fmt.Errorf("%w: DriverDeinit %s: not initialised by DriverInit", ErrDriverCall, id)
		}
		return a.stateErr("DriverDeinit")
	case a.busy:
		return fmt.Errorf("%w: DriverDeinit %s: a DriverRunOnce is running it", ErrDriverCall, id)
	}
	a.mode, a.deinited = appFree, true
	return nil
}

// watchAppDrivers starts Shutdown's watcher over the application-driven
// workers (see the header).
func (rt *Runtime) watchAppDrivers() {
	if len(rt.apps.list) == 0 {
		return
	}
	limit := rt.cfg.PluginTimeout
	if limit <= 0 {
		limit = config.DefaultPluginTimeout
	}
	since := time.Now()
	stop, done := make(chan struct{}), make(chan struct{})
	rt.apps.stopWatch, rt.apps.watchDone = stop, done
	go func() {
		defer close(done)
		tick := time.NewTicker(livenessCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				for _, a := range rt.apps.list {
					rt.refuseIfAbandoned(a, now, since, limit)
				}
			}
		}
	}()
}

// refuseIfAbandoned puts a in refused mode when a task waits for it, no
// RunDriver runs it and no pass touched it for limit since Shutdown.
func (rt *Runtime) refuseIfAbandoned(a *appWorker, now, since time.Time, limit time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() || a.busy || (a.mode != appFree && a.mode != appInit) || !a.aw.HasWork() {
		return
	}
	if now.Sub(since) < limit || now.Sub(a.last) < limit {
		return
	}
	a.mode = appRefused
	a.active.Add(1)
	rt.log.Error("application-driven worker not run during Shutdown: failing its tasks", "driver", a.id.String(), "worker", a.w.id, "after", limit)
	why := fmt.Errorf("not run: worker %d (%s) is application-driven (Options.NotLaunchedDrivers) and nothing ran it for %v while Shutdown waited for its tasks", a.w.id, a.id, limit)
	go func() {
		defer a.active.Done()
		for !a.closed.Load() {
			if !a.aw.Idle(a.closed.Load, appIdle) {
				continue
			}
			for {
				ran, err := a.aw.Refuse(why)
				if err != nil {
					rt.log.Error("failing an abandoned worker's tasks", "driver", a.id.String(), "error", err)
					return
				}
				if !ran {
					break
				}
				a.refused.Add(1)
			}
		}
	}()
}

// closeAppDrivers ends every use of the application-driven workers before
// the CPU driver's Deinit and the arena's unmapping: it stops Shutdown's
// watcher, refuses every later call, wakes RunDriver and waits, at most
// timeout, for what takes the rings. It reports the workers whose tasks
// it failed.
func (rt *Runtime) closeAppDrivers(timeout time.Duration) error {
	if rt.apps.stopWatch != nil {
		close(rt.apps.stopWatch)
		<-rt.apps.watchDone
		rt.apps.stopWatch = nil
	}
	if len(rt.apps.list) == 0 {
		return nil
	}
	for _, a := range rt.apps.list {
		a.mu.Lock()
		a.closed.Store(true)
		a.mu.Unlock()
		a.aw.Wake()
	}
	done := make(chan struct{})
	go func() {
		for _, a := range rt.apps.list {
			a.active.Wait()
		}
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-time.After(timeout):
		rt.apps.stuck = true
		errs = append(errs, fmt.Errorf("an application-driven worker's task still ran %v after Shutdown asked it to stop: the shared-memory arena stays mapped", timeout))
	}
	for _, a := range rt.apps.list {
		a.mu.Lock()
		refused := a.mode == appRefused
		a.mu.Unlock()
		if refused {
			errs = append(errs, fmt.Errorf("worker %d (%s) is application-driven and nothing ran it while Shutdown waited for its tasks: %d of them failed", a.w.id, a.id, a.refused.Load()))
		}
	}
	return errors.Join(errs...)
}

// isAppDriven reports whether the application runs worker w.
func (rt *Runtime) isAppDriven(w *workerState) bool {
	for _, a := range rt.apps.list {
		if a.w == w {
			return true
		}
	}
	return false
}
