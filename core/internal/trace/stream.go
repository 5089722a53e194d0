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

// Stream writes a trace file while the runtime runs. Producers (any
// goroutine) encode native records into a chunk under mu; a full chunk
// goes to the writer goroutine, which writes it to the file and returns
// it to the free list. The chunks are allocated once: a producer that
// finds none free waits for the writer, so memory stays bounded however
// long the run, and no event is dropped. A file named .json is converted
// to Chrome JSON by Close: converting as the run goes cost the dependency
// chain 30 to 40% on two cores, against 5% for the native records.
type Stream struct {
	mu    sync.Mutex
	a     appender // the chunk being filled
	names map[string]uint64
	// canon are the interned strings by id-1; lastName is the one interned
	// last, lastID its id.
	canon    []string
	lastName string
	lastID   uint64
	closed   bool
	origin   int64
	// last is the time (since origin) the last submit, ready, run or edge
	// record gave: those records write theirs as the difference from it,
	// a short varint, where a time since origin takes five bytes.
	last int64

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

// Chunks: nChunks of chunkSize bytes are all the stream buffers.
const (
	chunkSize = 64 << 10
	nChunks   = 4
)

// BufferBytes is the memory a Stream buffers at most, beyond a record
// larger than a chunk (a task with thousands of handles).
const BufferBytes = chunkSize * nChunks

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
	s := &Stream{names: map[string]uint64{}, origin: origin,
		free: make(chan []byte, nChunks), full: make(chan []byte, nChunks), done: make(chan struct{})}
	var err error
	if s.sink, err = newNativeSink(w, wall); err != nil {
		return nil, err
	}
	s.a.b = make([]byte, 0, chunkSize)
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
	if len(s.a.b) > 0 && len(s.a.b)+need > chunkSize {
		s.full <- s.a.b
		s.a.b = <-s.free
	}
	return true
}

// name interns str, writing its name record first if it is new; 0 for "".
// Called between begin and the record that uses it.
func (s *Stream) name(str string) uint64 {
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
		s.a.b = append(s.a.b, kindName)
		s.a.u(id)
		s.a.str(c)
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

// Submit records a task's submission.
func (s *Stream) Submit(e *SubmitEvent) {
	need := 64 + len(e.Name) + len(e.Codelet) + len(e.Model) + 80*len(e.Handles) // a handle: name, handle and (handle, mode) records
	for _, h := range e.Handles {
		need += len(h.Name)
	}
	if !s.begin(need) {
		return
	}
	name, codelet, model := s.name(e.Name), s.name(e.Codelet), s.name(e.Model)
	for i := range e.Handles {
		s.handle(&e.Handles[i])
	}
	a := &s.a
	a.b = append(a.b, kindSubmit)
	a.u(e.ID)
	a.u(name)
	a.u(codelet)
	a.u(model)
	s.time(e.Time)
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
	s.mu.Unlock()
}

// handle writes h's handle record, unless its mark says the file has its
// description already; mu held.
func (s *Stream) handle(h *Access) {
	m := h.Mark
	if m != nil && m.written && m.size == h.Size && m.footprint == h.Footprint && m.name == h.Name {
		return
	}
	label := s.name(h.Name)
	a := &s.a
	a.b = append(a.b, kindHandle)
	a.u(h.Handle)
	a.u(h.Size)
	a.u(uint64(h.Footprint))
	a.u(label)
	if m != nil {
		*m = HandleMark{size: h.Size, footprint: h.Footprint, written: true, name: h.Name}
	}
}

// time writes t (producers' clock) as the difference from the last
// submit, ready, run or edge time; mu held.
func (s *Stream) time(t int64) {
	t -= s.origin
	s.a.i(t - s.last)
	s.last = t
}

// Ready records that task id's dependencies were met at t.
func (s *Stream) Ready(id uint64, t int64) {
	if !s.begin(24) {
		return
	}
	s.a.b = append(s.a.b, kindReady)
	s.a.u(id)
	s.time(t)
	s.mu.Unlock()
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
	if !s.begin(64) {
		return
	}
	s.edge(from, to, fromWorker, fromStart, fromEnd)
	s.mu.Unlock()
}

// edge writes an edge record; mu held.
func (s *Stream) edge(from, to uint64, fromWorker int, fromStart, fromEnd int64) {
	a := &s.a
	a.b = append(a.b, kindEdge)
	a.u(from)
	a.u(to)
	a.i(int64(fromWorker))
	if fromWorker >= 0 {
		s.time(fromStart)
		a.i(fromEnd - fromStart)
	}
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

// Write records recs, in order, under one lock; teams holds the teams of
// their parallel runs, in order (Rec.TeamLen).
func (s *Stream) Write(recs []Rec, teams []int) {
	if !s.begin(maxRec) {
		return
	}
	a := &s.a
	for i := range recs {
		r := &recs[i]
		s.flushIfFull(recLen(r))
		switch r.Kind {
		case RecRun:
			a.b = append(a.b, kindRun)
			a.u(r.ID)
			a.i(int64(r.Worker))
			s.time(r.Start)
			a.i(r.End - r.Start)
			a.u(uint64(r.Footprint))
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
			teams = teams[r.TeamLen:]
		case RecEdge:
			s.edge(r.ID, r.To, int(r.Worker), r.Start, r.End)
		case RecReady:
			a.b = append(a.b, kindReady)
			a.u(r.ID)
			s.time(r.Start)
		}
	}
	s.mu.Unlock()
}

// Transfer records a copy between memory nodes; its times are on the
// producers' clock.
func (s *Stream) Transfer(x Transfer) {
	if !s.begin(72) {
		return
	}
	a := &s.a
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
	s.mu.Unlock()
}

// Plugin records a plugin process event at t (producers' clock): name is
// the plugin's (driver-cpu, sched-dmda), note how an exit happened.
func (s *Stream) Plugin(t int64, kind PluginKind, name string, pid int, note string) {
	if !s.begin(48 + 2*(len(name)+len(note))) {
		return
	}
	n, m := s.name(name), s.name(note)
	a := &s.a
	a.b = append(a.b, kindPlugin)
	a.i(t - s.origin)
	a.u(uint64(kind))
	a.u(uint64(pid))
	a.u(n)
	a.u(m)
	s.mu.Unlock()
}

// Comm records a point-to-point communication; its times are on the
// producers' clock.
func (s *Stream) Comm(c Comm) {
	if !s.begin(72) {
		return
	}
	var flags uint64
	if c.Send {
		flags |= commSend
	}
	if c.Failed {
		flags |= flagFailed
	}
	a := &s.a
	a.b = append(a.b, kindComm)
	a.u(flags)
	a.i(int64(c.Peer))
	a.i(c.Tag)
	a.u(c.Bytes)
	a.u(c.Handle)
	a.i(c.Start - s.origin)
	a.i(c.End - s.origin)
	s.mu.Unlock()
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
		s.a.b = append(s.a.b, kindWorker)
		s.a.u(uint64(w.ID))
		s.a.i(int64(w.Node))
		s.a.str(w.Arch)
		s.a.str(w.Name)
	}
	for _, n := range nodes {
		s.flushIfFull(16 + len(n.Name))
		s.a.b = append(s.a.b, kindNode)
		s.a.u(uint64(n.ID))
		s.a.str(n.Name)
	}
}

// Close describes the workers and memory nodes, marks the trace complete,
// waits for the writer and closes the file. Records given after Close are
// ignored. It returns the first write error.
func (s *Stream) Close(workers []Worker, nodes []Node) error {
	if !s.begin(0) {
		return errors.New("trace: closed twice")
	}
	s.describe(workers, nodes)
	s.a.b = append(s.a.b, kindEnd)
	s.closed = true
	s.full <- s.a.b
	s.a.b = nil
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
	if len(s.a.b) > 0 && len(s.a.b)+need > chunkSize {
		s.full <- s.a.b
		s.a.b = <-s.free
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
