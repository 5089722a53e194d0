package driver

// Application-driven workers: StarPU's not-launched drivers.
//
// StarPU lets an application keep some workers for itself
// (starpu_conf.not_launched_drivers) and run them on threads it owns, with
// starpu_driver_run or the starpu_driver_init / run_once / deinit triple:
// a worker that must run on the GUI's main thread, on a thread the
// application pinned or set up, or whose progress the application
// interleaves with its own work. Here a worker runs in its driver's
// process, so only a driver in the application's process can hand one
// over: such a driver implements AppDriven, and the core
// (core.Options.NotLaunchedDrivers, core/plugin_appdriven.go) calls
// AppWorker's methods on the application's goroutines.
//
// The driver keeps the whole ring protocol (Rings): a held worker is the
// same worker as a launched one, minus the loop. Rejected: handing the
// core the driver's Rings and a function per message, so that the core
// wrote the loop (the core would then own the driver's batching, chain
// and failure rules, which Rings keeps in one place); and a gRPC form of
// this interface (a plugin's worker cannot run on a thread of another
// process).

import "time"

// AppDriven is implemented by an in-process driver whose workers an
// application may run on goroutines of its own instead of ones the driver
// starts. It is Go only: never served over gRPC.
type AppDriven interface {
	Driver
	// Hold, called before Init, makes Init open the rings of the workers
	// with these IDs but start no loop for them; AppWorker hands them out.
	// An ID Init then does not get is an error of Init.
	Hold(ids []int) error
	// AppWorker returns held worker id, once Init ran.
	AppWorker(id int) (AppWorker, error)
}

// AppWorker is one held worker. RunOnce, Refuse and Idle take the
// worker's rings: the caller makes sure no two of them run at once, and
// that none runs once Deinit began. HasWork and Wake may be called from
// any goroutine.
type AppWorker interface {
	// RunOnce takes at most one task off the worker's rings and runs it to
	// its end on the calling goroutine, then posts its completion
	// (StarPU's run_once); it reports whether it took one and never waits
	// for one.
	RunOnce() (bool, error)
	// Refuse is RunOnce failing the task with err's text instead of
	// running it: what is left to do with the tasks of a worker nobody
	// will run.
	Refuse(err error) (bool, error)
	// Idle sleeps on the worker's bell until a task waits, wake() is true
	// or timeout passes, and reports whether one of the first two happened
	// (Rings.Idle).
	Idle(wake func() bool, timeout time.Duration) bool
	// HasWork reports whether a task waits on the worker's rings.
	HasWork() bool
	// Wake wakes an Idle under way, so that it checks its wake again.
	Wake()
}
