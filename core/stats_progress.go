package core

// How far a run is, for progress lines; design note:
// docs/design/tracing.md.

// Progress is how far the runtime is, read without slowing it down.
type Progress struct {
	// Done counts the tasks executed on workers since Init, from the
	// per-codelet counts the runtime always keeps.
	Done int64
	// InFlight counts the tasks submitted and not yet completed
	// (NSubmitted).
	InFlight int64
	// Stopped: Shutdown has begun.
	Stopped bool
}

// Progress returns how far the runtime is. It sums a few counters per
// codelet and worker: call it a few times a second, not per task.
func (rt *Runtime) Progress() Progress {
	p := Progress{InFlight: rt.waits.pending.Load(), Stopped: rt.shutdown.Load()}
	rt.codelets.mu.Lock()
	cls := append([]*Codelet(nil), rt.codelets.order...)
	rt.codelets.mu.Unlock()
	for _, cl := range cls {
		v, ok := rt.codelets.byPtr.Load(cl)
		if !ok {
			continue
		}
		ci := v.(*codeletInfo)
		for w := range ci.stats {
			p.Done += ci.stats[w].n.Load()
		}
	}
	return p
}
