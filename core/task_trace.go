package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// tracer records task executions for a Chrome trace-event file.
type tracer struct {
	mu     sync.Mutex
	events []traceEvent
}

type traceEvent struct {
	worker     int
	name       string
	start, end int64
	failed     bool
	// iter holds the task's iterations (IterationPush), innermost first.
	iter  [2]int64
	niter uint8
	// bufs are the task's handles that have a name or coordinates.
	bufs []traceBuffer
}

func (t *tracer) add(worker int, j *job, start, end int64, failed bool) {
	e := traceEvent{worker: worker, name: j.name(), start: start, end: end, failed: failed, bufs: traceBuffers(j)}
	if x := j.ext.Load(); x != nil {
		e.iter, e.niter = x.iter, x.niter
	}
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

// chromeEvent is one entry of the Chrome trace-event format (as read by
// Perfetto and chrome://tracing): a complete event ("X") or metadata ("M").
type chromeEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes the timelines of the workers, one row per worker, as a
// Chrome trace-event JSON document. Init must have had Options.Trace set.
func (rt *Runtime) WriteTrace(w io.Writer) error {
	if rt.trace == nil {
		return errors.New("write trace: tracing was not enabled (Options.Trace)")
	}
	rt.trace.mu.Lock()
	evs := append([]traceEvent(nil), rt.trace.events...)
	rt.trace.mu.Unlock()
	var origin int64
	for i, e := range evs {
		if i == 0 || e.start < origin {
			origin = e.start
		}
	}
	out := make([]chromeEvent, 0, len(evs)+len(rt.workers)+1)
	out = append(out, chromeEvent{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "starpu workers"}})
	for _, w := range rt.workers {
		out = append(out, chromeEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: w.id,
			Args: map[string]any{"name": fmt.Sprintf("worker %d (%s %s)", w.id, w.drv.fp.Arch, w.drv.fp.Units[w.spec.Unit].Name)}})
	}
	for _, e := range evs {
		ce := chromeEvent{Name: e.name, Ph: "X", Ts: float64(e.start-origin) / 1e3, Dur: float64(e.end-e.start) / 1e3, Pid: 1, Tid: e.worker}
		if e.failed || e.niter > 0 || len(e.bufs) > 0 {
			ce.Args = map[string]any{}
		}
		if e.failed {
			ce.Args["failed"] = true
		}
		if e.niter > 0 {
			ce.Args["iteration"] = e.iter[0]
		}
		if e.niter > 1 {
			ce.Args["outer_iteration"] = e.iter[1]
		}
		if len(e.bufs) > 0 {
			bufs := make([]map[string]any, len(e.bufs))
			for i, b := range e.bufs {
				m := map[string]any{"index": b.index, "handle": b.handle}
				if b.label.name != "" {
					m["name"] = b.label.name
				}
				if b.label.coords != nil {
					m["coordinates"] = b.label.coords
				}
				bufs[i] = m
			}
			ce.Args["buffers"] = bufs
		}
		out = append(out, ce)
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": out, "displayTimeUnit": "ms"})
}
