package core

// Accessors for core/mpi, which uses only core's public API.

// LocalWritten tells the runtime that the application wrote the handle's
// RAM replicate in place, at LocalPointer, while holding the handle in RAM
// in a writing mode (Acquire or AcquireCB with W or RW). For data
// registered from Go memory, that memory is brought up to date from the
// replicate, so that Release keeps the write instead of copying the
// registered memory over it (what Release does after the application
// wrote the registered memory itself). For data that lives in the arena
// (Malloc, RegisterNoHome, RegisterSame) it does nothing. core/mpi
// receives MPI messages straight into the replicate this way.
func (h *Handle) LocalWritten() {
	h.mu.Lock()
	if h.home != nil {
		h.copyHomeOut()
	}
	h.mu.Unlock()
}

// ReductionMethods are the codelets SetReductionMethods gave the handle,
// or nils when it has none: core/mpi runs them to combine the REDUX
// contributions of several ranks.
func (h *Handle) ReductionMethods() (redux, init *Codelet) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.acc == nil || h.acc.red == nil {
		return nil, nil
	}
	return h.acc.red.redCl, h.acc.red.initCl
}

// ReserveThreads tells the runtime that n more goroutines lock their
// threads and block in system calls or cgo calls for as long as it runs
// (core/mpi's progression goroutine). Go lets such a goroutine keep its P
// while it blocks until its sysmon thread takes the P back, tens of µs
// later at best, so with fewer Ps than such threads every wake-up of one
// waits for that: the runtime raises GOMAXPROCS to leave each its P, as it
// does for its own engine and for in-process plugins, and puts it back at
// Shutdown unless someone else changed it meanwhile. It does nothing once
// the runtime is shut down.
func (rt *Runtime) ReserveThreads(n int) {
	if n <= 0 {
		return
	}
	rt.ctxs.mu.Lock()
	defer rt.ctxs.mu.Unlock()
	if rt.shutdown.Load() {
		return
	}
	rt.reserveThreads(n)
}
