package core

// Errors; documented in docs/user-guide.md.

import "errors"

// Errors a caller can test for with errors.Is. Each is wrapped with the
// details of what was wrong.
var (
	// ErrNoWorker: no worker can execute the task (StarPU's -ENODEV).
	ErrNoWorker = errors.New("no worker can execute the task")
	// ErrInvalidTask: the task or its codelet is malformed.
	ErrInvalidTask = errors.New("invalid task")
	// ErrInvalidData: a registration's shape or buffer is wrong.
	ErrInvalidData = errors.New("invalid data registration")
	// ErrUnregistered: a handle was used after Unregister.
	ErrUnregistered = errors.New("handle is unregistered")
	// ErrPluginCrashed: a plugin process died; the tasks it held failed.
	ErrPluginCrashed = errors.New("plugin process crashed")
	// ErrShutdown: the runtime is shut down.
	ErrShutdown = errors.New("runtime is shut down")
	// ErrTaskFailed: the kernel returned an error.
	ErrTaskFailed = errors.New("task failed")
	// ErrDeadlock: a blocking call (Acquire, FetchOnNode, ...) was made from
	// a task or data callback, where waiting could never end (StarPU's
	// -EDEADLK).
	ErrDeadlock = errors.New("blocking call from a callback would deadlock")
	// ErrDriverCall: RunDriver, DriverInit, DriverRunOnce or DriverDeinit
	// was called on a worker that is not application-driven
	// (Options.NotLaunchedDrivers), or in a state the call does not fit.
	ErrDriverCall = errors.New("application-driven worker call refused")
)
