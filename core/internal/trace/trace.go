// Package trace records what the runtime did and reads it back. It knows
// events, not the runtime: the core (core/task_trace.go) turns what
// happens into events and names the workers.
//
// Two ways in: a Recorder keeps task executions in memory for
// Runtime.WriteTrace (WriteChrome encodes them); a Stream writes a trace
// file while the runtime runs, with bounded memory, in the native format
// (native.go) or as Chrome trace-event JSON (chrome.go). Read turns
// either file back into a Trace, with the workers' states between tasks
// derived from it (states.go), which analysis.go summarises (per worker,
// per codelet, the critical path) and render.go, dot.go, perfetto.go and
// paje.go write as an SVG or HTML Gantt chart, a dag.dot graph, StarPU's
// tasks.rec, a Perfetto protobuf trace and a Paje trace.
package trace

import (
	"encoding/json"
	"io"
	"sync"
)

// Buffer is a labelled handle in a task's event: its index among the
// task's handles, the handle's description and its name and coordinates,
// when set.
type Buffer struct {
	Index  int
	Handle string
	Name   string
	Coords []int
}

// Event is one task execution on a worker; Start and End are nanoseconds
// on one monotonic clock.
type Event struct {
	Worker     int
	Name       string
	Start, End int64
	Failed     bool
	// Iter holds the task's iterations (IterationPush), innermost first;
	// NIter says how many are set.
	Iter  [2]int64
	NIter uint8
	// Buffers are the task's handles that have a name or coordinates.
	Buffers []Buffer
}

// Worker names one timeline row: a worker, its memory node and
// architecture.
type Worker struct {
	ID   int
	Name string
	Node int
	Arch string
}

// Recorder collects events from any goroutine.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Add records e.
func (r *Recorder) Add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// chromeEvent is one entry of the Chrome trace-event format: a complete
// event ("X") or metadata ("M").
type chromeEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteChrome writes evs as a Chrome trace-event JSON document, one row
// per worker, times relative to the earliest start.
func WriteChrome(w io.Writer, workers []Worker, evs []Event) error {
	var origin int64
	for i, e := range evs {
		if i == 0 || e.Start < origin {
			origin = e.Start
		}
	}
	out := make([]chromeEvent, 0, len(evs)+len(workers)+1)
	out = append(out, chromeEvent{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "starpu workers"}})
	for _, wk := range workers {
		out = append(out, chromeEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: wk.ID, Args: map[string]any{"name": wk.Name}})
	}
	for _, e := range evs {
		ce := chromeEvent{Name: e.Name, Ph: "X", Ts: float64(e.Start-origin) / 1e3, Dur: float64(e.End-e.Start) / 1e3, Pid: 1, Tid: e.Worker}
		if e.Failed || e.NIter > 0 || len(e.Buffers) > 0 {
			ce.Args = map[string]any{}
		}
		if e.Failed {
			ce.Args["failed"] = true
		}
		if e.NIter > 0 {
			ce.Args["iteration"] = e.Iter[0]
		}
		if e.NIter > 1 {
			ce.Args["outer_iteration"] = e.Iter[1]
		}
		if len(e.Buffers) > 0 {
			bufs := make([]map[string]any, len(e.Buffers))
			for i, b := range e.Buffers {
				m := map[string]any{"index": b.Index, "handle": b.Handle}
				if b.Name != "" {
					m["name"] = b.Name
				}
				if b.Coords != nil {
					m["coordinates"] = b.Coords
				}
				bufs[i] = m
			}
			ce.Args["buffers"] = bufs
		}
		out = append(out, ce)
	}
	return json.NewEncoder(w).Encode(map[string]any{"traceEvents": out, "displayTimeUnit": "ms"})
}
