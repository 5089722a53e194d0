package core

// The trace and the statistics printed at Shutdown; design note:
// docs/design/tracing.md.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/core/internal/trace"
	"github.com/starpu-go/starpu/core/internal/tsc"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Environment variables that turn observation on, with StarPU's names
// where StarPU has them.
const (
	// EnvTrace names a trace file written from Init to Shutdown
	// (Options.TraceFile).
	EnvTrace = "STARPU_TRACE"
	// EnvWorkerStats=1 prints each worker's tasks and executing time at
	// Shutdown.
	EnvWorkerStats = "STARPU_WORKER_STATS"
	// EnvWorkerStatsFile names the file EnvWorkerStats writes to, instead
	// of stderr.
	EnvWorkerStatsFile = "STARPU_WORKER_STATS_FILE"
	// EnvBusStats=1 prints the bytes and transfers per bus link at
	// Shutdown.
	EnvBusStats = "STARPU_BUS_STATS"
	// EnvBusStatsFile names the file EnvBusStats writes to, instead of
	// stderr.
	EnvBusStatsFile = "STARPU_BUS_STATS_FILE"
	// EnvProfiling=1 turns profiling on at Init (SetProfiling).
	EnvProfiling = "STARPU_PROFILING"
)

// tracer is what watches the runtime when something asked for it:
// Options.Trace's in-memory recorder, a trace file, the statistics printed
// at Shutdown. rt.trace is nil otherwise, and every hook on the hot path
// is one nil check.
type tracer struct {
	mem    *trace.Recorder // Options.Trace, for WriteTrace
	stream *trace.Stream   // Options.TraceFile or $STARPU_TRACE
	path   string
	// clock reads wire.Now's clock from the CPU's counter for the
	// submit records' times, in half the time (core/internal/tsc); with
	// stream only.
	clock *tsc.Clock

	workerStats, busStats bool
	workerFile, busFile   string
	started               time.Time
	// paused: PauseTrace; tasks submitted meanwhile are not traced.
	paused atomic.Bool

	// Engine goroutine only (read at Shutdown once it stopped): the
	// copies posted and not yet completed, by transfer ID, the completed
	// ones per bus link, and the round's records (flushRound).
	xfers map[uint64]xferInfo
	links map[[2]int]*linkStat
	round []trace.Rec
	teams []int // the teams of round's parallel runs (trace.Rec.TeamLen)
	// asleep is, by worker, the sleep the completions of its copies and
	// allocations reported since its last task's (first start, last
	// end): it belongs to the gap before its next task.
	asleep [][2]int64
}

// xferInfo is what a transfer's completion does not say.
type xferInfo struct {
	src, dst int
	bytes    uint64
	handle   uint64
}

// linkStat is a bus link's transfers, for STARPU_BUS_STATS.
type linkStat struct {
	n, bytes uint64
	busy     int64
}

// envFlag reads a 0/1 variable: unset or empty is off, a number is on
// unless 0 (StarPU reads them with atoi), anything else an error.
func envFlag(getenv func(string) string, name string) (bool, error) {
	v := getenv(name)
	if v == "" {
		return false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want 0 or 1: %w", name, v, err)
	}
	return n != 0, nil
}

// initTrace sets up what Options and the environment ask to observe. The
// trace file is created here, before any plugin starts: a path that
// cannot be written fails Init, naming it.
func (rt *Runtime) initTrace(opt Options) error {
	var tr tracer
	var err error
	if tr.workerStats, err = envFlag(rt.getenv, EnvWorkerStats); err != nil {
		return err
	}
	if tr.busStats, err = envFlag(rt.getenv, EnvBusStats); err != nil {
		return err
	}
	prof, err := envFlag(rt.getenv, EnvProfiling)
	if err != nil {
		return err
	}
	if prof {
		rt.clock.profiling.Store(true)
	}
	tr.workerFile, tr.busFile = rt.getenv(EnvWorkerStatsFile), rt.getenv(EnvBusStatsFile)
	if opt.Trace {
		tr.mem = &trace.Recorder{}
	}
	tr.path = opt.TraceFile
	if tr.path == "" {
		tr.path = rt.getenv(EnvTrace)
	}
	if tr.path != "" {
		tr.path = rankPath(tr.path, rt.getenv)
		if tr.stream, err = trace.Create(tr.path, rt.clock.baseNs, rt.clock.base.UnixNano()); err != nil {
			return err
		}
		tr.clock = tsc.New(wire.Now)
	}
	if tr.mem == nil && tr.stream == nil && !tr.workerStats && !tr.busStats {
		return nil
	}
	tr.started = rt.clock.base
	tr.paused.Store(opt.TracePaused)
	tr.xfers = map[uint64]xferInfo{}
	tr.links = map[[2]int]*linkStat{}
	rt.trace = &tr
	return nil
}

// rankPath gives each process of an MPI run its own trace file: under
// mpirun (OpenMPI's OMPI_COMM_WORLD_RANK, or PMI_RANK), run.trace becomes
// run.rank1.trace for rank 1, as StarPU's FxT traces get one file per rank.
func rankPath(path string, getenv func(string) string) string {
	rank := getenv("OMPI_COMM_WORLD_RANK")
	if rank == "" {
		rank = getenv("PMI_RANK")
	}
	if rank == "" {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".rank" + rank + ext
}

// closeTraceOnError closes the trace file when Init fails after creating
// it (deferred by Init, after its teardown): the file holds what ran.
func (rt *Runtime) closeTraceOnError(err *error) {
	if *err != nil && rt.trace != nil && rt.trace.stream != nil {
		rt.trace.flushRound()
		rt.trace.stream.Close(rt.traceWorkers(), rt.traceNodes())
	}
}

// closeTrace ends the observation at Shutdown, once the engine stopped:
// it completes the trace file and prints the statistics asked for.
func (rt *Runtime) closeTrace() error {
	tr := rt.trace
	if tr == nil {
		return nil
	}
	var errs []error
	if tr.stream != nil {
		tr.flushRound()
		// Submit calls racing Shutdown may still reach the hooks: the
		// stream ignores them once closed.
		errs = append(errs, tr.stream.Close(rt.traceWorkers(), rt.traceNodes()))
	}
	if tr.workerStats {
		errs = append(errs, writeStats(tr.workerFile, func(w io.Writer) { rt.writeWorkerStats(w, time.Since(tr.started)) }))
	}
	if tr.busStats {
		errs = append(errs, writeStats(tr.busFile, rt.writeBusStats))
	}
	return errors.Join(errs...)
}

// writeStats writes a summary to the file named, or to stderr.
func writeStats(file string, write func(io.Writer)) error {
	if file == "" {
		write(os.Stderr)
		return nil
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("statistics: %w", err)
	}
	write(f)
	if err := f.Close(); err != nil {
		return fmt.Errorf("statistics: %w", err)
	}
	return nil
}

func (rt *Runtime) workerName(w *workerState) string {
	return fmt.Sprintf("worker %d (%s %s)", w.id, w.drv.fp.Arch, w.drv.fp.Units[w.spec.Unit].Name)
}

func (rt *Runtime) traceWorkers() []trace.Worker {
	out := make([]trace.Worker, len(rt.workers))
	for i, w := range rt.workers {
		out[i] = trace.Worker{ID: w.id, Name: rt.workerName(w), Node: w.node, Arch: string(w.drv.fp.Arch)}
	}
	return out
}

func (rt *Runtime) traceNodes() []trace.Node {
	out := make([]trace.Node, len(rt.nodes))
	for i, n := range rt.nodes {
		out[i] = trace.Node{ID: n.id, Name: n.name}
	}
	return out
}

// submit records j's submission: its names, and its handles with their
// modes, sizes and footprints (Submit, after the checks).
func (tr *tracer) submit(rt *Runtime, j *job) {
	if !tr.recording() {
		return
	}
	j.traced = true
	if tr.stream == nil {
		return
	}
	t := j.task
	// Field by field, not a composite literal: the literal, with calls
	// among its fields, is built in a temporary and copied, and the copy
	// stalls on the stores that just built it (perf annotate: half the
	// hook's own samples). The handles likewise go in place.
	var e trace.SubmitEvent
	e.ID, e.Name, e.Model = j.id, j.name(), t.ModelName()
	e.Time = tr.clock.Now()
	e.Priority, e.Tag, e.HasTag, e.Flops = int64(t.Priority), uint64(t.Tag), t.UseTag, t.Flops
	if t.Codelet != nil {
		e.Codelet = t.Codelet.Name
	}
	if rt.iters.depth.Load() > 0 {
		rt.iters.mu.Lock()
		n := len(rt.iters.stack)
		for k := 0; k < 2 && k < n; k++ {
			e.Iter[k] = int64(rt.iters.stack[n-1-k])
			e.NIter++
		}
		rt.iters.mu.Unlock()
	}
	var acc [8]trace.Access
	hs := acc[:0]
	if len(t.Handles) > len(acc) {
		hs = make([]trace.Access, 0, len(t.Handles))
	}
	hs = hs[:len(t.Handles)]
	for i, h := range t.Handles {
		a := &hs[i]
		a.Handle, a.Size, a.Footprint, a.Mark = h.id, h.size, h.footprint(), &h.traceMark
		if i < len(j.modes) {
			a.Mode = uint8(j.modes[i] &^ Locality)
		}
		if l := h.x.label.Load(); l != nil {
			a.Name = l.name
		}
	}
	e.Handles = hs
	tr.stream.Submit(&e)
}

// ready records that j's dependencies are met and it goes to a policy
// (pushLocked). releasedBy >= 0 says the engine goroutine released it (a
// task completion did): the record then waits for the end of the round,
// and its time is when the last of the predecessors the engine terminated
// ended (chainReadyNs), as a chained job's: the moment its dependencies
// were met, where the clock would add the core's delay in hearing of it
// (which the reader's states count as scheduling, after the ready time,
// all the same), and costs the engine no clock read. A job waiting for
// data locks (arbitered) reads the clock: it goes to a policy when it
// gets them. A job ready at its submission (readyAtSubmit) gets no
// record: a reader takes the submit record's time for the ready time of
// a task that ran without one (format 5), which spares the submitting
// goroutine, the bottleneck of independent tasks, a clock read and a
// record per task; the two times differ by the dependency check.
func (tr *tracer) ready(j *job, releasedBy int32) {
	switch {
	case tr.stream == nil || !j.traced || releasedBy == readyAtSubmit:
	case releasedBy >= 0:
		r := tr.rec(trace.RecReady)
		r.ID, r.Start = j.id, j.chainReadyNs
		if r.Start == 0 || j.arb {
			r.Start = wire.Now()
		}
	default:
		tr.stream.Ready(j.id, wire.Now())
	}
}

// readyAt records that chained job j's dependencies were met at ns (its
// predecessor's end: it may have started before the core heard of it).
// engine says the engine goroutine calls: the record then waits for the
// end of its round, as ready's.
func (tr *tracer) readyAt(j *job, ns int64, engine bool) {
	switch {
	case tr.stream == nil || !j.traced:
	case engine:
		r := tr.rec(trace.RecReady)
		r.ID, r.Start = j.id, ns
	default:
		tr.stream.Ready(j.id, ns)
	}
}

// edge records that pred's termination released a dependency of succ
// (terminate); engine says the engine goroutine terminates pred (its
// completion on a worker). Acquisitions are not tasks: their edges are left
// out.
func (tr *tracer) edge(pred, succ *job, engine bool) {
	switch {
	case tr.stream == nil || pred.task == nil || succ.task == nil || !pred.traced || !succ.traced:
	case engine:
		r := tr.rec(trace.RecEdge)
		r.ID, r.To, r.Worker, r.Start, r.End = pred.id, succ.id, pred.worker, pred.start, pred.end
	default:
		tr.stream.Edge(pred.id, succ.id, int(pred.worker), pred.start, pred.end)
	}
}

// rec appends a record of kind to the round and returns it, zero but
// for its kind, for the caller to fill in place: appending a composite
// literal builds it in a temporary and copies it, and the copy stalls on
// the stores that just built it (perf annotate: half the hooks' samples,
// on the engine's thread).
func (tr *tracer) rec(kind trace.RecKind) *trace.Rec {
	tr.round = append(tr.round, trace.Rec{})
	r := &tr.round[len(tr.round)-1]
	r.Kind = kind
	return r
}

// flushRound writes the records the engine kept during its round, at its
// end, once the workers and policies it had work for were woken: tracing
// then adds one clock read (the ready time) and no lock or encoding to a
// dependency hop.
func (tr *tracer) flushRound() {
	if len(tr.round) == 0 {
		return
	}
	tr.stream.Write(tr.round, tr.teams)
	tr.round, tr.teams = tr.round[:0], tr.teams[:0]
}

// traceTask records j's execution on worker from start to end, with the
// implementation it ran and, for a parallel task, its team (worker is
// its master), and the worker's sleep on its doorbell since its previous
// completion, from sleep0 to sleep1 (0, 0: none; wire clock
// nanoseconds); engine goroutine.
func (rt *Runtime) traceTask(worker int, j *job, start, end, sleep0, sleep1 int64, failed bool) {
	tr := rt.trace
	if !j.traced {
		return
	}
	if tr.stream != nil {
		if worker < len(tr.asleep) && tr.asleep[worker][1] != 0 {
			sleep0, sleep1 = mergeSleep(tr.asleep[worker], sleep0, sleep1)
			tr.asleep[worker] = [2]int64{}
		}
		teamLen := tr.team(j.comb)
		r := tr.rec(trace.RecRun)
		r.ID, r.Worker, r.Start, r.End, r.Footprint, r.Failed = j.id, int32(worker), start, end, j.footprint, failed
		r.Posted, r.Predicted, r.PredictedTransfer, r.SleepStart, r.SleepEnd = j.posted, j.predicted, j.predictedTransfer, sleep0, sleep1
		r.Impl, r.TeamLen = int16(j.impl), teamLen
	}
	if tr.mem == nil {
		return
	}
	e := trace.Event{Worker: worker, Name: j.name(), Start: start, End: end, Failed: failed, Buffers: traceBuffers(j)}
	if x := j.ext.Load(); x != nil {
		e.Iter, e.NIter = x.iter, x.niter
	}
	tr.mem.Add(e)
}

// team lists the worker IDs of combined worker c, the master first, in
// the round's teams, as a run record lists a parallel task's team, and
// returns their number (trace.Rec.TeamLen); 0 for none.
func (tr *tracer) team(c *combinedWorker) uint16 {
	if c == nil {
		return 0
	}
	for _, id := range c.ids {
		tr.teams = append(tr.teams, int(id))
	}
	return uint16(len(c.ids))
}

// slept keeps the sleep a worker reported on the completion of a copy or
// an allocation (from s to e, 0 none) for its next task's record: the
// trace has states per worker between tasks only; engine goroutine.
func (tr *tracer) slept(worker int, s, e int64) {
	if e == 0 || tr.stream == nil || worker < 0 || !tr.recording() {
		return
	}
	if worker >= len(tr.asleep) {
		tr.asleep = append(tr.asleep, make([][2]int64, worker+1-len(tr.asleep))...)
	}
	tr.asleep[worker][0], tr.asleep[worker][1] = mergeSleep(tr.asleep[worker], s, e)
}

// mergeSleep joins the sleep from s to e (0, 0: none) to kept's: the
// first start to the last end.
func mergeSleep(kept [2]int64, s, e int64) (int64, int64) {
	switch {
	case kept[1] == 0:
		return s, e
	case e == 0:
		return kept[0], kept[1]
	}
	return min(kept[0], s), max(kept[1], e)
}

// xferPosted notes a copy of h from node src to dst posted as transfer
// id (postCopy); engine goroutine.
func (tr *tracer) xferPosted(id uint64, h *Handle, src, dst int) {
	if tr.stream == nil && !tr.busStats {
		return
	}
	var n uint64
	for _, r := range h.copyPlan() {
		n += r.Len
	}
	tr.xfers[id] = xferInfo{src: src, dst: dst, bytes: n, handle: h.id}
}

// xferDone records the completion of transfer id, if it was a copy;
// engine goroutine.
func (tr *tracer) xferDone(id uint64, start, end int64, failed bool) {
	x, ok := tr.xfers[id]
	if !ok {
		return // an allocation
	}
	delete(tr.xfers, id)
	if tr.stream != nil && tr.recording() {
		tr.stream.Transfer(trace.Transfer{Src: x.src, Dst: x.dst, Bytes: x.bytes, Handle: x.handle, Start: start, End: end, Failed: failed})
	}
	if tr.busStats && !failed {
		l := tr.links[[2]int{x.src, x.dst}]
		if l == nil {
			l = &linkStat{}
			tr.links[[2]int{x.src, x.dst}] = l
		}
		l.n++
		l.bytes += x.bytes
		l.busy += end - start
	}
}

// traceDescribe writes the workers and memory nodes into the trace file once
// they exist (start, before the engine runs), so that a converter
// reading it in order knows each worker's node.
func (rt *Runtime) traceDescribe() {
	if tr := rt.trace; tr != nil && tr.stream != nil {
		tr.stream.Describe(rt.traceWorkers(), rt.traceNodes())
	}
}

// tracePluginStart records that plugin name's process p started
// (launch). A start after an exit of the same plugin reads back as its
// restart.
func (rt *Runtime) tracePluginStart(name string, p *loader.Plugin) {
	if tr := rt.trace; tr != nil && tr.stream != nil && p != nil {
		tr.stream.Plugin(wire.Now(), trace.PluginStart, name, p.Pid(), "")
	}
}

// tracePluginExit records that the engine found plugin name's process p
// gone (checkPlugins), with how it ended.
func (rt *Runtime) tracePluginExit(name string, p *loader.Plugin) {
	if tr := rt.trace; tr != nil && tr.stream != nil && p != nil {
		tr.stream.Plugin(wire.Now(), trace.PluginExit, name, p.Pid(), exitNote(p))
	}
}

// CommEvent is one point-to-point communication between processes, as a
// communication layer (core/mpi) reports it to the trace: a send to or a
// receive from rank Peer, with its tag, size and handle (nil for a
// message that carries none), posted at Start and completed at End.
type CommEvent struct {
	Send       bool
	Peer       int
	Tag        int64
	Bytes      uint64
	Handle     *Handle
	Start, End time.Time
	// Failed: the communication did not complete.
	Failed bool
}

// TraceComm records c in the trace file, on a row per peer rank (starpu
// trace view, the JSON and Perfetto traces). It is for communication
// layers such as core/mpi, which call it once a communication completes;
// any goroutine may. Without a trace file it costs one nil check.
func (rt *Runtime) TraceComm(c CommEvent) {
	tr := rt.trace
	if tr == nil || tr.stream == nil || !tr.recording() {
		return
	}
	x := trace.Comm{Send: c.Send, Peer: c.Peer, Tag: c.Tag, Bytes: c.Bytes, Failed: c.Failed,
		Start: rt.clock.baseNs + int64(c.Start.Sub(rt.clock.base)), End: rt.clock.baseNs + int64(c.End.Sub(rt.clock.base))}
	if c.Handle != nil {
		x.Handle = c.Handle.id
	}
	tr.stream.Comm(x)
}

// Tracing reports whether a trace file is being written (Options.TraceFile
// or $STARPU_TRACE), paused or not.
func (rt *Runtime) Tracing() bool { return rt.trace != nil && rt.trace.stream != nil }

// recording says whether the trace records now (PauseTrace); nil, no
// trace, does not.
func (tr *tracer) recording() bool { return tr != nil && !tr.paused.Load() }

// PauseTrace stops recording the trace (Options.TraceFile or
// $STARPU_TRACE, and Options.Trace's), as StarPU's
// starpu_fxt_stop_profiling, until ResumeTrace: tasks submitted meanwhile,
// transfers and communications are left out. A task submitted before is
// recorded to its end, and plugin processes' starts and exits always are,
// so the trace holds whole tasks and every process. Statistics
// (STARPU_WORKER_STATS, STARPU_BUS_STATS) keep counting. Without a trace
// it does nothing.
func (rt *Runtime) PauseTrace() {
	if rt.trace != nil {
		rt.trace.paused.Store(true)
	}
}

// ResumeTrace records the trace again after PauseTrace or
// Options.TracePaused, as StarPU's starpu_fxt_start_profiling.
func (rt *Runtime) ResumeTrace() {
	if rt.trace != nil {
		rt.trace.paused.Store(false)
	}
}

// WriteTrace writes the timelines of the workers, one row per worker, as a
// Chrome trace-event JSON document. Init must have had Options.Trace set.
// Options.TraceFile (or $STARPU_TRACE) writes a fuller trace as the run
// goes, with no call.
func (rt *Runtime) WriteTrace(w io.Writer) error {
	if rt.trace == nil || rt.trace.mem == nil {
		return errors.New("write trace: tracing was not enabled (Options.Trace)")
	}
	workers := make([]trace.Worker, len(rt.workers))
	for i, w := range rt.workers {
		workers[i] = trace.Worker{ID: w.id, Name: rt.workerName(w)}
	}
	return trace.WriteChrome(w, workers, rt.trace.mem.Events())
}
