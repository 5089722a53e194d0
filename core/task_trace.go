package core

// The trace; documented in docs/user-guide.md.

import (
	"errors"
	"fmt"
	"io"

	"github.com/starpu-go/starpu/core/internal/trace"
)

// traceTask records j's execution on worker from start to end (wire clock
// nanoseconds) when tracing is on.
func (rt *Runtime) traceTask(worker int, j *job, start, end int64, failed bool) {
	e := trace.Event{Worker: worker, Name: j.name(), Start: start, End: end, Failed: failed, Buffers: traceBuffers(j)}
	if x := j.ext.Load(); x != nil {
		e.Iter, e.NIter = x.iter, x.niter
	}
	rt.trace.Add(e)
}

// WriteTrace writes the timelines of the workers, one row per worker, as a
// Chrome trace-event JSON document. Init must have had Options.Trace set.
func (rt *Runtime) WriteTrace(w io.Writer) error {
	if rt.trace == nil {
		return errors.New("write trace: tracing was not enabled (Options.Trace)")
	}
	workers := make([]trace.Worker, len(rt.workers))
	for i, w := range rt.workers {
		workers[i] = trace.Worker{ID: w.id, Name: fmt.Sprintf("worker %d (%s %s)", w.id, w.drv.fp.Arch, w.drv.fp.Units[w.spec.Unit].Name)}
	}
	return trace.WriteChrome(w, workers, rt.trace.Events())
}
