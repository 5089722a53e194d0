package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Stream writes a trace file while the runtime runs. The engine's batches
// (Write) are encoded into a chunk under mu; a full chunk goes to the
// writer goroutine, which writes it to the file and returns it to the
// free list. The chunks are allocated once: a producer that finds none
// free waits for the writer, so memory stays bounded however long the
// run, and no event is dropped. A file named .json is converted to Chrome
// JSON by Close: converting as the run goes cost the dependency chain 30
// to 40% on two cores, against 5% for the native records.
//
// Every other record (submit, ready and edge records from the submitting
// goroutines, transfers, plugin and communication events) goes to a side
// buffer under a lock of its own, which Write splices into the chunk
// before its batch: a task's submit record then precedes whatever the
// engine records of it, and the application's goroutine never waits for
// the engine's lock, which it took twice per task before (submit and
// ready), against once per engine round now. The side buffer keeps its
// own time cursor (records.last): the splice says where it stands with a
// cursor record when the chunk's differs (format 5).
//
// The split gained a few points of tracing's cost on independent tasks
// and none shown on the chains (docs/design/tracing.md, Cost); it stays
// because a submitter then never waits behind an engine round's batch,
// and the engine takes the submitters' lock once per round only. Rejected: the
// engine encoding the submit records itself from a list the submitter
// fills (no better: the engine is on the chain's path too, and reads the
// task from another core's cache).
type Stream struct {
	mu sync.Mutex
	// r is the chunk being filled and its time cursor.
	r      records
	closed bool
	origin int64
	side   side
	// run is the last run record in the chunks, which the next run, edge
	// and ready records may refer to (format 7). Run records go to the
	// chunks only, so the file's last run record is this one.
	run lastRun

	free chan []byte
	full chan []byte
	done chan struct{}
	sink *nativeSink
	// werr is the writer goroutine's first error; read after done.
	werr error
	// path and format are Create's: Close converts a Chrome file.
	path   string
	format Format
}

// Chunks: nChunks of chunkSize bytes and the side buffer's sideSize are
// all the stream buffers.
const (
	chunkSize = 64 << 10
	nChunks   = 4
	sideSize  = 16 << 10
)

// BufferBytes is the memory a Stream buffers at most, beyond a record
// larger than a chunk (a task with thousands of handles).
const BufferBytes = chunkSize*nChunks + sideSize

// records is a sequence of encoded records and its time cursor: the time
// (since origin) the last submit, ready, run or edge record in it gave.
// Those records write theirs as the difference from it, a short varint,
// where a time since origin takes five bytes.
type records struct {
	a    appender
	last int64
}

// time writes t (since origin) as the difference from the cursor.
func (r *records) time(t int64) {
	r.a.i(t - r.last)
	r.last = t
}

// edge writes an edge record; times since origin.
func (r *records) edge(from, to uint64, fromWorker int, fromStart, fromEnd int64) {
	a := &r.a
	a.b = append(a.b, kindEdge)
	a.u(from)
	a.u(to)
	a.i(int64(fromWorker))
	if fromWorker >= 0 {
		r.time(fromStart)
		a.i(fromEnd - fromStart)
	}
}

// side is the buffer of the records other than the engine's batches
// (Stream); its own lock guards it and the interned names, which only its
// records use.
type side struct {
	mu sync.Mutex
	r  records
	// base is the cursor before r's records: where a reader's must stand
	// when they are spliced.
	base   int64
	closed bool
	names  map[string]uint64
	// canon are the interned strings by id-1; lastName is the one interned
	// last, lastID its id.
	canon    []string
	lastName string
	lastID   uint64
	// prev is the last submission recorded, which a repeat record
	// repeats; its strings are canon's.
	prev submitted
}

// lastRun is what a next-run, hop or edge-from-run record takes from
// the run record before it: the task, its worker and times (since
// origin), its footprint, flags and implementation.
type lastRun struct {
	ok         bool
	id         uint64
	worker     int32
	footprint  uint32
	flags      uint64
	impl       int16
	start, end int64
}

// submitted is what a repeat record repeats of the submission before it.
type submitted struct {
	ok                   bool
	id                   uint64
	name, codelet, model string
	priority             int64
	tag                  uint64
	hasTag               bool
	flops                float64
	iter                 [2]int64
	nIter                uint8
	// handles are the handles' numbers and modes.
	handles []Access
}

// same says whether e is prev but for its id, time and tag, with its
// handles' descriptions as the file has them: a repeat record (or
// repeat-tag, for another tag) then says it all.
func (p *submitted) same(e *SubmitEvent) bool {
	if !p.ok || e.Name != p.name || e.Codelet != p.codelet || e.Model != p.model || e.Priority != p.priority ||
		e.HasTag != p.hasTag || e.Flops != p.flops || e.NIter != p.nIter || e.Iter != p.iter ||
		len(e.Handles) != len(p.handles) {
		return false
	}
	for i := range e.Handles {
		h, q := &e.Handles[i], &p.handles[i]
		if h.Handle != q.Handle || h.Mode != q.Mode || !h.Mark.current(h) {
			return false
		}
	}
	return true
}

// keep makes e, whose names the side interned as name, codelet and model,
// the submission a repeat record repeats.
func (x *side) keep(e *SubmitEvent, name, codelet, model uint64) {
	p := &x.prev
	p.ok, p.id = true, e.ID
	p.name, p.codelet, p.model = x.canonical(name), x.canonical(codelet), x.canonical(model)
	p.priority, p.tag, p.hasTag, p.flops, p.iter, p.nIter = e.Priority, e.Tag, e.HasTag, e.Flops, e.Iter, e.NIter
	p.handles = p.handles[:0]
	for _, h := range e.Handles {
		// Numbers and modes only: a kept mark would keep its handle alive.
		p.handles = append(p.handles, Access{Handle: h.Handle, Mode: h.Mode})
	}
}

// canonical is the string interned as id, "" for 0.
func (x *side) canonical(id uint64) string {
	if id == 0 {
		return ""
	}
	return x.canon[id-1]
}

// Format is a trace file's format.
type Format int

// The formats Create writes.
const (
	// Native is the compact format of this package (Magic, records).
	Native Format = iota
	// Chrome is Chrome's trace-event JSON, as Perfetto and
	// chrome://tracing read it.
	Chrome
	// Perfetto is Perfetto's protobuf trace (perfetto.go).
	Perfetto
)

// FormatOf picks the format of a trace file by its extension: .json is
// Chrome JSON, .pftrace and .perfetto-trace Perfetto's protobuf, anything
// else the native format. Extensions of the files the tools derive from a
// trace (.svg, .html, .dot, .rec, .paje) are refused.
func FormatOf(path string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		return Chrome, nil
	case ".pftrace", ".perfetto-trace":
		return Perfetto, nil
	case ".svg", ".html", ".htm", ".dot", ".rec", ".paje":
		return 0, fmt.Errorf("trace file %s: a trace is .json (Chrome/Perfetto), .pftrace (Perfetto) or native (any other extension, .trace say); starpu trace view, dot, rec and paje derive %s files from it", path, ext)
	}
	return Native, nil
}

// Create creates the trace file path, in the format its extension names
// (FormatOf), and starts the stream. origin is time 0 on the clock of the
// times the producers give (wire.Now), wall its Unix time in ns.
func Create(path string, origin, wall int64) (*Stream, error) {
	format, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace file: %w", err)
	}
	s, err := NewStream(f, origin, wall)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace file %s: %w", path, err)
	}
	s.path, s.format = path, format
	return s, nil
}

// NewStream starts a stream writing a native trace to w, which Close
// closes.
func NewStream(w io.WriteCloser, origin, wall int64) (*Stream, error) {
	s := &Stream{origin: origin,
		free: make(chan []byte, nChunks), full: make(chan []byte, nChunks), done: make(chan struct{})}
	s.side.names = map[string]uint64{}
	var err error
	if s.sink, err = newNativeSink(w, wall); err != nil {
		return nil, err
	}
	s.r.a.b = make([]byte, 0, chunkSize)
	s.side.r.a.b = make([]byte, 0, sideSize)
	for range nChunks - 1 {
		s.free <- make([]byte, 0, chunkSize)
	}
	go s.writer()
	return s, nil
}

func (s *Stream) writer() {
	defer close(s.done)
	for c := range s.full {
		if s.werr == nil {
			s.werr = s.sink.write(c)
		}
		s.free <- c[:0]
	}
}

// begin locks the stream and makes room for a record of about need bytes;
// false when the stream is closed (then it is unlocked).
func (s *Stream) begin(need int) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.flushIfFull(need)
	return true
}

// sideBegin locks the side buffer for a record of about need bytes,
// splicing it first when it would grow past sideSize; false when the
// stream is closed (then it is unlocked).
func (s *Stream) sideBegin(need int) bool {
	x := &s.side
	x.mu.Lock()
	if !x.closed && len(x.r.a.b) > 0 && len(x.r.a.b)+need > sideSize {
		x.mu.Unlock() // mu goes first: see splice
		s.mu.Lock()
		if !s.closed {
			s.splice(false)
		}
		s.mu.Unlock()
		x.mu.Lock()
	}
	if x.closed {
		x.mu.Unlock()
		return false
	}
	return true
}

// splice moves the side buffer's records into the chunk, after a cursor
// record when the chunk's cursor is not the side's base; close closes the
// side buffer. mu held; it takes the side's lock (always in this order).
func (s *Stream) splice(close bool) {
	x := &s.side
	x.mu.Lock()
	if n := len(x.r.a.b); n > 0 {
		s.flushIfFull(n + 1 + binary.MaxVarintLen64)
		if x.base != s.r.last {
			s.r.a.b = append(s.r.a.b, kindCursor)
			s.r.a.i(x.base)
		}
		s.r.a.b = append(s.r.a.b, x.r.a.b...)
		s.r.last = x.r.last
		x.base = x.r.last
		x.r.a.b = x.r.a.b[:0]
	}
	x.closed = x.closed || close
	x.mu.Unlock()
}

// name interns str, writing its name record first if it is new; 0 for "".
// Called between sideBegin and the record that uses it.
func (s *side) name(str string) uint64 {
	if str == "" {
		return 0
	}
	// Most tasks in a row share their codelet: skip the map for them.
	if str == s.lastName {
		return s.lastID
	}
	id, ok := s.names[str]
	if !ok {
		// A copy is kept, never str itself: the producers' arguments
		// then stay on their stacks.
		c := strings.Clone(str)
		s.canon = append(s.canon, c)
		id = uint64(len(s.canon))
		s.names[c] = id
		s.r.a.b = append(s.r.a.b, kindName)
		s.r.a.u(id)
		s.r.a.str(c)
	}
	s.lastName, s.lastID = s.canon[id-1], id
	return id
}

// SubmitEvent is what a task's submission records.
type SubmitEvent struct {
	ID uint64
	// Name is the task's (Task.Name, else its codelet's), Codelet its
	// codelet's name, Model its performance model's.
	Name, Codelet, Model string
	Time                 int64
	Priority             int64
	Tag                  uint64
	HasTag               bool
	Flops                float64
	Iter                 [2]int64
	NIter                uint8
	Handles              []Access
}

// HandleMark is what a stream last wrote of one handle: its size,
// footprint and label. A submit record names its handles only; a handle
// record with their description goes before it when the mark says the
// description changed, or was never written. A producer keeps one mark
// per handle and passes it in each Access; the stream reads and writes it
// under its lock, so that concurrent submissions of one handle agree on
// what the file holds.
type HandleMark struct {
	size      uint64
	footprint uint32
	written   bool
	name      string
}

// current says whether the file describes h as the mark says it does: no
// handle record is due. False for a nil mark.
func (m *HandleMark) current(h *Access) bool {
	return m != nil && m.written && m.size == h.Size && m.footprint == h.Footprint && m.name == h.Name
}

// Submit records a task's submission: as a repeat record when it is the
// previous one's but for its id and time (native.go, version 6), or
// repeat-tag when its tag differs too (version 7).
func (s *Stream) Submit(e *SubmitEvent) {
	need := 64 + len(e.Name) + len(e.Codelet) + len(e.Model) + 80*len(e.Handles) // a handle: name, handle and (handle, mode) records
	for i := range e.Handles {
		// By index: a copy of the Access would stall on the stores
		// that just built it (perf annotate: a third of this function).
		need += len(e.Handles[i].Name)
	}
	if !s.sideBegin(need) {
		return
	}
	x := &s.side
	if x.prev.same(e) {
		a := &x.r.a
		// Without a tag, the tag field says nothing (a reader has 0).
		if !e.HasTag || e.Tag == x.prev.tag {
			a.b = append(a.b, kindRepeat)
			a.i(int64(e.ID - x.prev.id))
			x.r.time(e.Time - s.origin)
		} else {
			// A chain by tags: the tag one more, most often.
			a.b = append(a.b, kindRepeatTag)
			a.i(int64(e.ID - x.prev.id))
			x.r.time(e.Time - s.origin)
			a.i(int64(e.Tag - x.prev.tag))
		}
		x.prev.id, x.prev.tag = e.ID, e.Tag
		x.mu.Unlock()
		return
	}
	name, codelet, model := x.name(e.Name), x.name(e.Codelet), x.name(e.Model)
	for i := range e.Handles {
		x.handle(&e.Handles[i])
	}
	a := &x.r.a
	a.b = append(a.b, kindSubmit)
	a.u(e.ID)
	a.u(name)
	a.u(codelet)
	a.u(model)
	x.r.time(e.Time - s.origin)
	a.i(e.Priority)
	var flags uint64
	if e.HasTag {
		flags |= submitTag
	}
	if e.Flops != 0 {
		flags |= submitFlops
	}
	a.u(flags)
	if e.HasTag {
		a.u(e.Tag)
	}
	if e.Flops != 0 {
		a.u(math.Float64bits(e.Flops))
	}
	a.u(uint64(e.NIter))
	for k := range int(e.NIter) {
		a.i(e.Iter[k])
	}
	a.u(uint64(len(e.Handles)))
	for _, h := range e.Handles {
		a.u(h.Handle)
		a.u(uint64(h.Mode))
	}
	x.keep(e, name, codelet, model)
	x.mu.Unlock()
}

// handle writes h's handle record, unless its mark says the file has its
// description already; the side's lock held.
func (s *side) handle(h *Access) {
	m := h.Mark
	if m.current(h) {
		return
	}
	label := s.name(h.Name)
	a := &s.r.a
	a.b = append(a.b, kindHandle)
	a.u(h.Handle)
	a.u(h.Size)
	a.u(uint64(h.Footprint))
	a.u(label)
	if m != nil {
		*m = HandleMark{size: h.Size, footprint: h.Footprint, written: true, name: h.Name}
	}
}

// Ready records that task id's dependencies were met at t.
func (s *Stream) Ready(id uint64, t int64) {
	if !s.sideBegin(24) {
		return
	}
	x := &s.side
	x.r.a.b = append(x.r.a.b, kindReady)
	x.r.a.u(id)
	x.r.time(t - s.origin)
	x.mu.Unlock()
}

// Run records task id's execution on worker from start to end.
func (s *Stream) Run(id uint64, worker int, start, end int64, footprint uint32, failed bool) {
	s.Write([]Rec{{Kind: RecRun, ID: id, Worker: int32(worker), Start: start, End: end, Footprint: footprint, Failed: failed,
		Impl: -1, Predicted: -1, PredictedTransfer: -1}}, nil)
}

// Edge records that task from's completion released a dependency of task
// to; from ran on worker fromWorker (-1: nowhere) from fromStart to
// fromEnd.
func (s *Stream) Edge(from, to uint64, fromWorker int, fromStart, fromEnd int64) {
	if !s.sideBegin(64) {
		return
	}
	s.side.r.edge(from, to, fromWorker, fromStart-s.origin, fromEnd-s.origin)
	s.side.mu.Unlock()
}

// RecKind says what a Rec records.
type RecKind uint8

// The records a producer may batch.
const (
	// RecRun is Run(ID, Worker, Start, End, Footprint, Failed), with
	// the fields only a Rec has (Posted, the predictions, the sleep, Impl,
	// TeamLen).
	RecRun RecKind = iota
	// RecEdge is Edge(ID, To, Worker, Start, End): ID released To.
	RecEdge
	// RecReady is Ready(ID, Start).
	RecReady
)

// Rec is a run, edge or ready record kept by a producer that writes them
// in batches: the engine keeps its round's and writes them once it has
// woken the workers and policies, so that tracing adds no lock or
// encoding to the dependency hop. It holds no pointer (a parallel task's
// team is in Write's teams): keeping and clearing a round's costs no
// write barrier.
type Rec struct {
	Kind           RecKind
	Failed, Posted bool
	// Impl is the implementation that ran (Task's), -1 unknown.
	Impl int16
	// TeamLen is the size of the team of the combined worker a parallel
	// task ran on, whose workers are the next TeamLen of Write's teams,
	// the master (Worker) first; 0 for a task on one worker.
	TeamLen   uint16
	Worker    int32
	Footprint uint32
	ID, To    uint64
	// Start and End are a run's times, or an edge's predecessor's; Start
	// a ready record's time.
	Start, End int64
	// Predicted and PredictedTransfer are a run's predictions (Task's),
	// -1 unknown; both unknown, the record leaves them out.
	Predicted, PredictedTransfer int64
	// SleepStart and SleepEnd are when the run's worker slept before it
	// (Task's), 0 none.
	SleepStart, SleepEnd int64
}

// maxRec bounds a batched record's size: a run record with predictions,
// a sleep and an implementation takes up to 92 bytes, plus its team's
// (recLen).
const maxRec = 96

// recLen bounds r's encoded size.
func recLen(r *Rec) int {
	return maxRec + binary.MaxVarintLen64*(1+int(r.TeamLen))
}

// Write records recs, in order, under one lock, after the side buffer's
// records; teams holds the teams of their parallel runs, in order
// (Rec.TeamLen).
func (s *Stream) Write(recs []Rec, teams []int) {
	if !s.begin(maxRec) {
		return
	}
	s.splice(false)
	a := &s.r.a
	for i := 0; i < len(recs); i++ {
		r := &recs[i]
		s.flushIfFull(recLen(r))
		switch r.Kind {
		case RecRun:
			teams = s.writeRun(r, teams)
		case RecEdge:
			p := &s.run
			if !p.ok || r.ID != p.id || r.Worker != p.worker || r.Start-s.origin != p.start || r.End-s.origin != p.end {
				s.r.edge(r.ID, r.To, int(r.Worker), r.Start-s.origin, r.End-s.origin)
				break
			}
			// From the task of the last run record, as a chain's hop
			// is, and its successor ready at its end, most often.
			k := kindEdgeRun
			if i+1 < len(recs) && recs[i+1].Kind == RecReady && recs[i+1].ID == r.To && recs[i+1].Start == r.End {
				k = kindHop
				i++
			}
			a.b = append(a.b, k)
			a.i(int64(r.To - r.ID))
		case RecReady:
			a.b = append(a.b, kindReady)
			a.u(r.ID)
			s.r.time(r.Start - s.origin)
		}
	}
	s.mu.Unlock()
}

// writeRun encodes run record r, whose team, if any, starts teams, and
// returns the teams after it: as a next-run record when its worker,
// footprint, flags and implementation are the last run record's and it
// has no sleep and no team (a chain's tasks, or a worker's of one
// codelet), 5 to 7 bytes where a run record takes 10 to 14; mu held.
func (s *Stream) writeRun(r *Rec, teams []int) []int {
	a := &s.r.a
	var flags uint64
	if r.Failed {
		flags |= flagFailed
	}
	if r.Posted {
		flags |= runPosted
	}
	pred := r.Predicted >= 0 || r.PredictedTransfer >= 0
	if pred {
		flags |= runPredicted
	}
	slept := r.SleepEnd != 0
	if slept {
		flags |= runSlept
	}
	if r.Impl >= 0 {
		flags |= runImpl
	}
	// A team of one is a task on one worker.
	team := r.TeamLen > 1
	if team {
		flags |= runTeam
	}
	p := &s.run
	start := r.Start - s.origin
	if p.ok && !slept && !team && r.Worker == p.worker && r.Footprint == p.footprint && flags == p.flags && r.Impl == p.impl {
		a.b = append(a.b, kindRunNext)
		a.i(int64(r.ID - p.id))
		s.r.time(start)
		a.i(r.End - r.Start)
		if pred {
			a.i(r.Predicted)
			a.i(r.PredictedTransfer)
		}
	} else {
		a.b = append(a.b, kindRun)
		a.u(r.ID)
		a.i(int64(r.Worker))
		s.r.time(start)
		a.i(r.End - r.Start)
		a.u(uint64(r.Footprint))
		a.u(flags)
		if pred {
			a.i(r.Predicted)
			a.i(r.PredictedTransfer)
		}
		if slept {
			// Before the start: short varints.
			a.i(r.Start - r.SleepStart)
			a.i(r.Start - r.SleepEnd)
		}
		if r.Impl >= 0 {
			a.u(uint64(r.Impl))
		}
		if team {
			a.u(uint64(r.TeamLen))
			for _, w := range teams[:r.TeamLen] {
				a.u(uint64(w))
			}
		}
	}
	// Field by field: a composite literal goes through a temporary
	// whose copy stalls on the stores that built it.
	p.ok, p.id, p.worker, p.footprint, p.flags, p.impl = true, r.ID, r.Worker, r.Footprint, flags, r.Impl
	p.start, p.end = start, r.End-s.origin
	return teams[r.TeamLen:]
}

// Transfer records a copy between memory nodes; its times are on the
// producers' clock.
func (s *Stream) Transfer(x Transfer) {
	if !s.sideBegin(72) {
		return
	}
	a := &s.side.r.a
	a.b = append(a.b, kindXfer)
	a.u(uint64(x.Src))
	a.u(uint64(x.Dst))
	a.u(x.Bytes)
	a.u(x.Handle)
	a.i(x.Start - s.origin)
	a.i(x.End - s.origin)
	if x.Failed {
		a.u(flagFailed)
	} else {
		a.u(0)
	}
	s.side.mu.Unlock()
}

// Plugin records a plugin process event at t (producers' clock): name is
// the plugin's (driver-cpu, sched-dmda), note how an exit happened.
func (s *Stream) Plugin(t int64, kind PluginKind, name string, pid int, note string) {
	if !s.sideBegin(48 + 2*(len(name)+len(note))) {
		return
	}
	x := &s.side
	n, m := x.name(name), x.name(note)
	a := &x.r.a
	a.b = append(a.b, kindPlugin)
	a.i(t - s.origin)
	a.u(uint64(kind))
	a.u(uint64(pid))
	a.u(n)
	a.u(m)
	x.mu.Unlock()
}

// Comm records a point-to-point communication; its times are on the
// producers' clock.
func (s *Stream) Comm(c Comm) {
	if !s.sideBegin(72) {
		return
	}
	var flags uint64
	if c.Send {
		flags |= commSend
	}
	if c.Failed {
		flags |= flagFailed
	}
	a := &s.side.r.a
	a.b = append(a.b, kindComm)
	a.u(flags)
	a.i(int64(c.Peer))
	a.i(c.Tag)
	a.u(c.Bytes)
	a.u(c.Handle)
	a.i(c.Start - s.origin)
	a.i(c.End - s.origin)
	s.side.mu.Unlock()
}

// Describe records the workers and memory nodes once they exist, so
// that a reader knows each worker's memory node before its tasks (the
// states' fetching needs it); Close describes them again.
func (s *Stream) Describe(workers []Worker, nodes []Node) {
	if !s.begin(0) {
		return
	}
	s.describe(workers, nodes)
	s.mu.Unlock()
}

// describe writes worker and node records; mu held.
func (s *Stream) describe(workers []Worker, nodes []Node) {
	for _, w := range workers {
		s.flushIfFull(32 + len(w.Arch) + len(w.Name))
		a := &s.r.a
		a.b = append(a.b, kindWorker)
		a.u(uint64(w.ID))
		a.i(int64(w.Node))
		a.str(w.Arch)
		a.str(w.Name)
	}
	for _, n := range nodes {
		s.flushIfFull(16 + len(n.Name))
		a := &s.r.a
		a.b = append(a.b, kindNode)
		a.u(uint64(n.ID))
		a.str(n.Name)
	}
}

// Close describes the workers and memory nodes, marks the trace complete,
// waits for the writer and closes the file. Records given after Close are
// ignored. It returns the first write error.
func (s *Stream) Close(workers []Worker, nodes []Node) error {
	if !s.begin(0) {
		return errors.New("trace: closed twice")
	}
	s.splice(true)
	s.describe(workers, nodes)
	s.r.a.b = append(s.r.a.b, kindEnd)
	s.closed = true
	s.full <- s.r.a.b
	s.r.a.b = nil
	close(s.full)
	s.mu.Unlock()
	<-s.done
	err := s.werr
	if cerr := s.sink.close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case s.format == Chrome:
		err = convertFile(s.path)
	case s.format == Perfetto:
		err = convertPerfettoFile(s.path)
	}
	if err != nil && s.path != "" {
		err = fmt.Errorf("trace file %s: %w", s.path, err)
	}
	return err
}

// flushIfFull hands the chunk to the writer when need more bytes would
// overflow it; mu held.
func (s *Stream) flushIfFull(need int) {
	if len(s.r.a.b) > 0 && len(s.r.a.b)+need > chunkSize {
		s.full <- s.r.a.b
		s.r.a.b = <-s.free
	}
}

// nativeSink writes the records as they are, after the header.
type nativeSink struct {
	w  io.WriteCloser
	bw *bufio.Writer
}

func newNativeSink(w io.WriteCloser, wall int64) (*nativeSink, error) {
	var a appender
	a.b = append(a.b, Magic...)
	a.i(wall)
	// The header goes out at once: the file is a (truncated) trace from
	// the start.
	if _, err := w.Write(a.b); err != nil {
		return nil, err
	}
	return &nativeSink{w: w, bw: bufio.NewWriterSize(w, chunkSize)}, nil
}

func (n *nativeSink) write(c []byte) error {
	_, err := n.bw.Write(c)
	return err
}

func (n *nativeSink) close() error {
	err := n.bw.Flush()
	if cerr := n.w.Close(); err == nil {
		err = cerr
	}
	return err
}

// convertFile turns the native trace in path into Chrome JSON, through a
// temporary file in the same directory renamed over it. On failure the
// native trace stays, which starpu trace reads.
func convertFile(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	return replaceFile(path, "JSON", func(w io.Writer) error { return ConvertChrome(w, in) })
}
