package cpudriver

// Workers the application runs (driver.AppDriven): the same worker and
// run_once as a launched one, without the loop, the thread binding or the
// thread of its own. A held worker's thread is the application's, which
// chose it (a GUI's main thread, one it pinned itself): the driver does
// not bind it.

import (
	"errors"
	"fmt"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver"
)

var _ driver.AppDriven = (*Driver)(nil)

// Hold implements driver.AppDriven: Init opens the rings of the workers
// with these IDs and starts no goroutine for them.
func (d *Driver) Hold(ids []int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.workers) > 0 {
		return errors.New("driver-cpu: Hold after Init: the workers are running")
	}
	d.held = make(map[int]bool, len(ids))
	for _, id := range ids {
		d.held[id] = true
	}
	return nil
}

// checkHeld refuses an Init request that lacks a worker Hold named: the
// application would wait for a worker that never comes.
func (d *Driver) checkHeld(req *driver.InitRequest) error {
	for id := range d.held {
		found := false
		for _, s := range req.Workers {
			found = found || s.ID == id
		}
		if !found {
			return fmt.Errorf("driver-cpu: worker %d is held for the application, but Init does not start it", id)
		}
	}
	return nil
}

// AppWorker implements driver.AppDriven.
func (d *Driver) AppWorker(id int) (driver.AppWorker, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.held[id] {
		return nil, fmt.Errorf("driver-cpu: worker %d is not held for the application", id)
	}
	for _, w := range d.workers {
		if w.rings.Spec.ID == id {
			return &appWorker{d: d, w: w, alive: func() bool { return !d.stop.Load() }}, nil
		}
	}
	return nil, fmt.Errorf("driver-cpu: worker %d is not initialised", id)
}

// appWorker is a held worker, run by the application's goroutines.
type appWorker struct {
	d     *Driver
	w     *worker
	alive func() bool // made once: run_once allocates nothing
}

// RunOnce implements driver.AppWorker: the core's dispatch ring first,
// then the scheduler's, as a launched worker's pass.
func (a *appWorker) RunOnce() (bool, error) { return a.once(nil) }

// Refuse implements driver.AppWorker.
func (a *appWorker) Refuse(err error) (bool, error) {
	if err == nil {
		return false, errors.New("driver-cpu: Refuse with no error")
	}
	return a.once(err)
}

func (a *appWorker) once(refuse error) (bool, error) {
	if a.d.stop.Load() {
		return false, fmt.Errorf("driver-cpu: worker %d: the driver is deinitialised", a.w.rings.Spec.ID)
	}
	ran, err := a.d.runOne(a.w, a.w.rings.Dispatch, "dispatch ring", refuse, a.alive)
	if ran || err != nil || a.w.rings.Sched == nil {
		return ran, err
	}
	return a.d.runOne(a.w, a.w.rings.Sched, "scheduler ring", refuse, a.alive)
}

// Idle implements driver.AppWorker; Deinit wakes it too.
func (a *appWorker) Idle(wake func() bool, timeout time.Duration) bool {
	r := a.w.rings
	return r.Idle(func() bool { return r.HasWork() || wake() || a.d.stop.Load() }, timeout)
}

// HasWork implements driver.AppWorker.
func (a *appWorker) HasWork() bool { return a.w.rings.HasWork() }

// Wake implements driver.AppWorker.
func (a *appWorker) Wake() { a.w.rings.Bell.Ring() }
