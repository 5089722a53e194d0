package core

// Trace files read back, for `starpu trace`; design note:
// docs/design/tracing.md.

import (
	"fmt"
	"io"
	"time"

	"github.com/starpu-go/starpu/core/internal/trace"
)

// TraceFile is a trace file read back (Options.TraceFile, $STARPU_TRACE,
// in either format): what `starpu trace` summarises and draws.
type TraceFile struct {
	t   *trace.Trace
	sum trace.Summary
}

// ReadTraceFile reads the trace in file path, native or Chrome JSON. A
// trace the runtime did not close (it crashed, or still runs) reads up to
// its last whole record; Complete says which. When there is no file path
// but an MPI run wrote one per rank under that name (run.trace:
// run.rank0.trace, run.rank1.trace, ...), it reads them all, merged on one
// time axis, each rank's rows and numbers its own.
func ReadTraceFile(path string) (*TraceFile, error) {
	t, err := trace.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	return &TraceFile{t: t, sum: t.Summarize()}, nil
}

// TraceRankFiles lists the files of the multi-rank trace whose base name
// is path (run.trace: run.rank0.trace, ...), by rank; nil when there are
// none, an error when a rank's is missing.
func TraceRankFiles(path string) ([]string, error) { return trace.RankFiles(path) }

// TraceSummary is the gist of a trace: the figures `starpu trace
// summary` starts with.
type TraceSummary struct {
	// Tasks counts the tasks submitted or run, Ran those that ran on a
	// worker, Transfers the copies between memory nodes.
	Tasks, Ran, Failed, Transfers int
	// Workers counts the timeline rows.
	Workers int
	// Makespan runs from the first task's start to the last one's end.
	Makespan time.Duration
	// CriticalPath is the longest chain of dependent tasks weighted by
	// their execution times, CriticalTasks its length in tasks.
	CriticalPath  time.Duration
	CriticalTasks int
	// Efficiency is the workers' executing time over Makespan times
	// Workers.
	Efficiency float64
	// Codelets is the number of tasks per codelet.
	Codelets map[string]int
	// Fetching, Scheduling, Sleeping and Idle are the workers' time
	// between tasks within the makespan, summed over the workers: waiting
	// for their next task's data, for a ready task to start, asleep on
	// their doorbell with no task ready, awake with no task ready.
	Fetching, Scheduling, Sleeping, Idle time.Duration
	// Plugins are the plugin process events, as "start driver-cpu",
	// "exit driver-cpu", "restart driver-cpu", in order; Comms counts the
	// communications with other processes (TraceComm).
	Plugins []string
	Comms   int
	// Complete: the runtime closed the trace.
	Complete bool
}

// Summary returns the trace's figures.
func (f *TraceFile) Summary() TraceSummary {
	s := f.sum
	out := TraceSummary{Tasks: s.Tasks, Ran: s.Ran, Failed: s.Failed, Transfers: len(f.t.Transfers), Workers: len(s.Workers),
		Makespan: time.Duration(s.Makespan), CriticalPath: time.Duration(s.CriticalPath), CriticalTasks: len(s.CriticalTasks),
		Efficiency: s.Efficiency, Codelets: map[string]int{}, Complete: f.t.Complete}
	for _, c := range s.Codelets {
		out.Codelets[c.Name] = c.Count
	}
	for _, w := range s.Workers {
		out.Fetching += time.Duration(w.Fetching)
		out.Scheduling += time.Duration(w.Scheduling)
		out.Sleeping += time.Duration(w.Sleeping)
		out.Idle += time.Duration(w.Idle)
	}
	for _, p := range f.t.Plugins {
		out.Plugins = append(out.Plugins, p.Kind.String()+" "+p.Name)
	}
	out.Comms = len(f.t.Comms)
	return out
}

// WriteSummary prints the summary: per worker its executing and idle
// time, per codelet its count and times, the critical path against the
// makespan, the parallel efficiency, and the transfers per bus link.
func (f *TraceFile) WriteSummary(w io.Writer) error { return f.t.WriteSummary(w, f.sum) }

// WriteSVG draws the trace as a self-contained SVG Gantt chart: one row
// per worker and per bus link, tasks coloured by codelet, idle gaps, the
// critical path outlined in red.
func (f *TraceFile) WriteSVG(w io.Writer, title string) error {
	return f.t.WriteSVG(w, f.sum, trace.SVGOptions{Title: title})
}

// WriteHTML writes an HTML page holding the chart (zoomable) and the
// summary; it loads nothing from the network.
func (f *TraceFile) WriteHTML(w io.Writer, title string) error {
	return f.t.WriteHTML(w, f.sum, trace.SVGOptions{Title: title})
}

// WriteDot writes the task graph in Graphviz's dot language, as StarPU's
// dag.dot, the critical path in red.
func (f *TraceFile) WriteDot(w io.Writer) error { return f.t.WriteDot(w, f.sum) }

// WritePerfetto writes the trace in Perfetto's protobuf format (open it in
// ui.perfetto.dev): a track per worker, bus link, plugin process and peer
// rank, slices for tasks, worker states, transfers and communications,
// flows for the dependencies.
func (f *TraceFile) WritePerfetto(w io.Writer) error { return f.t.WritePerfetto(w) }

// WritePaje writes the trace in the Paje format StarPU's starpu_fxt_tool
// writes (paje.trace), for ViTE and StarVZ.
func (f *TraceFile) WritePaje(w io.Writer) error { return f.t.WritePaje(w, f.sum) }

// WriteTasksRec writes the tasks in StarPU's tasks.rec format.
func (f *TraceFile) WriteTasksRec(w io.Writer) error { return f.t.WriteTasksRec(w) }

// ConvertTraceToPerfetto reads a trace from src and writes it to dst in
// Perfetto's protobuf format, what a .pftrace trace file holds after
// Shutdown. A native trace streams: memory holds the tasks submitted and
// not yet run, the workers' and handles' state and a fixed window of
// slices, whatever the run's length; one cut short (a crashed run)
// converts up to its last whole record. A JSON document is read whole.
func ConvertTraceToPerfetto(dst io.Writer, src io.Reader) error {
	if err := trace.ConvertPerfetto(dst, src); err != nil {
		return fmt.Errorf("convert trace: %w", err)
	}
	return nil
}

// ConvertTraceToJSON reads a native trace from src and writes it to dst as
// Chrome/Perfetto trace-event JSON, the document a .json trace file holds
// after Shutdown. It streams: its memory holds the tasks submitted and not
// yet run at each point of the trace. A trace cut short (a crashed run)
// converts up to its last whole record.
func ConvertTraceToJSON(dst io.Writer, src io.Reader) error {
	if err := trace.ConvertChrome(dst, src); err != nil {
		return fmt.Errorf("convert trace: %w", err)
	}
	return nil
}
