package trace

// The native format: a header, then records, each a kind byte followed by
// varint fields. It is what the runtime streams while it runs (see
// Stream); Read turns it back into a Trace.
//
//	header:   Magic, origin (zigzag varint, Unix ns of time 0)
//	name:     id (uvarint), length (uvarint), bytes        strings, interned
//	handle:   handle, size, footprint, label              before the first submit
//	                                                      naming it, and again
//	                                                      when one of them changed
//	submit:   id, name, codelet, model, Δt, priority, flags, [tag], [flops bits],
//	          niter, iter..., nh, nh x (handle, mode)
//	repeat:   id - previous submit's id (zigzag), Δt   a submit record with the
//	                                                   previous one's other fields
//	repeat-tag: the same, then tag - previous tag (zigzag): a repeat with
//	          another tag
//	ready:    id, Δt
//	run:      id, worker, Δstart, end - start, footprint, flags,
//	          [predicted, predicted transfer]        when flags has runPredicted
//	          [start - sleep start, start - sleep end] when flags has runSlept
//	          [implementation]                       when flags has runImpl
//	          [n, n x worker]                        when flags has runTeam: the
//	                                                 team, the master (worker) first
//	edge:     from, to, from's worker (-1: it ran nowhere),
//	          [Δ from's start, from's end - start]   when it ran
//	next-run: id - last run's id (zigzag), Δstart, end - start,
//	          [predicted, predicted transfer]        a run record with the last
//	                                                 run record's worker, footprint,
//	                                                 flags and implementation
//	edge-run: to - last run's id (zigzag)            an edge from the last run
//	                                                 record's task
//	hop:      to - last run's id (zigzag)            the same, and to was ready
//	                                                 at that task's end
//	xfer:     src, dst, bytes, handle, start, end, flags
//	worker:   id, node, arch (string), name (string)
//	node:     id, name (string)
//	plugin:   t, kind (1 start, 2 exit), pid, name (string), note (string)
//	comm:     flags (send, failed), peer, tag, bytes, handle, start, end
//	cursor:   t                                    the time the next Δ count from
//	end:      nothing: the runtime closed the trace
//
// Worker and node records come twice: once the workers exist (Init), so
// that a converter reading the file in order knows each worker's memory
// node, and again at Close. Readers keep the last.
//
// Records were added to version 1 without a new magic: a reader of the
// first ones stops at an unknown kind with an error naming it, and a
// trace written before them reads as one with no plugin or
// communication events. Version 2 adds a field to an existing record
// (each handle's footprint in submit) and the run flag runSlept, which an
// older reader would misread rather than refuse: it has a magic of its
// own, which those readers do not recognise. Version 1 traces still read,
// with no handle footprints and no sleeping. Version 3 adds the run flags
// runImpl and runTeam (the implementation that ran, a parallel task's
// team), whose fields a version 2 reader would misread as the next
// record: a magic of its own again. Version 1 and 2 traces read with
// every implementation unknown and every task on one worker. Version 4
// shrinks a task's records from about 70 bytes to about 40, which costs
// less to encode with tracing on: the handle record describes a handle
// once (versions 1 to 3 repeat size, footprint and label in every
// submit record's handles), the times of submit, ready and run records
// are differences (Δ) from the previous such time, as is the start of an
// edge record's predecessor (versions 1 to 3: since time 0; differences
// are a few microseconds, two bytes, where a time since 0 takes five),
// a run's end is its duration, and an edge from a task that ran nowhere
// has no times.
//
// Version 5 adds the cursor record: the submitting goroutines write their
// records into a buffer of their own, with its own time cursor, which the
// engine splices into the file between its batches (Stream); a cursor
// record before the spliced records sets the reader's cursor to the
// buffer's. A version 4 reader would misread those records' times. And a
// task ready at its submission gets no ready record: a task that ran
// without one was ready at its submit time.
//
// Version 6 adds the repeat record: a submission whose names, priority,
// tag, flops, iteration and handles (numbers and modes, their
// descriptions unchanged) are those of the submit or repeat record before
// it, as in a loop submitting one codelet on the same data, is that
// record's id difference and time, 3 bytes where a submit record takes
// about 12, and costs the submitting goroutine, the chain's bottleneck
// with tracing on, no encoding (docs/design/tracing.md, Cost). A version
// 5 reader would stop at its kind; it has a magic of its own to say why.
//
// Version 7 adds four records. Three refer to the last run record in the
// file (run records only go to the stream's chunks, never to its side
// buffer, so the writer's last one is the reader's): next-run, a run
// record with that one's worker, footprint, flags and implementation
// (no sleep, no team: their fields differ from task to task), and
// edge-run and hop, an edge from that one's task, whose worker and times
// it has, hop adding that the successor was ready at its end. That is
// the engine's whole record of a chain's hop: about 10 bytes per task
// where version 6 took 28 (the run, edge and ready records), and
// encoding them was most of what a trace cost the engine's goroutine
// (docs/design/tracing.md, Cost). Edge-run and hop records leave the
// time cursor where it was. The fourth, repeat-tag, is a repeat record
// with another tag, as a chain by tags submits. A version 6 reader would
// stop at their kinds.
//
// Other times are nanoseconds since the runtime's Init (time 0), zigzag
// varints; ids and sizes are uvarints; strings in name records are
// referred to by id, 0 meaning none.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Magic opens a native trace file; magicV6 to magicV1 opened those of
// versions 6 to 1.
const (
	Magic   = "STARPU-TRACE 7\n"
	magicV6 = "STARPU-TRACE 6\n"
	magicV5 = "STARPU-TRACE 5\n"
	magicV4 = "STARPU-TRACE 4\n"
	magicV3 = "STARPU-TRACE 3\n"
	magicV2 = "STARPU-TRACE 2\n"
	magicV1 = "STARPU-TRACE 1\n"
)

// nativeVersion is the version of the native trace whose first bytes are
// head, 0 for none.
func nativeVersion(head []byte) int {
	switch string(head) {
	case Magic:
		return 7
	case magicV6:
		return 6
	case magicV5:
		return 5
	case magicV4:
		return 4
	case magicV3:
		return 3
	case magicV2:
		return 2
	case magicV1:
		return 1
	}
	return 0
}

// Record kinds.
const (
	kindName      byte = 1
	kindSubmit    byte = 2
	kindReady     byte = 3
	kindRun       byte = 4
	kindEdge      byte = 5
	kindXfer      byte = 6
	kindWorker    byte = 7
	kindNode      byte = 8
	kindEnd       byte = 9
	kindPlugin    byte = 10
	kindComm      byte = 11
	kindHandle    byte = 12
	kindCursor    byte = 13
	kindRepeat    byte = 14
	kindRunNext   byte = 15
	kindEdgeRun   byte = 16
	kindHop       byte = 17
	kindRepeatTag byte = 18
)

// Submit record flags.
const (
	submitTag   = 1 << 0
	submitFlops = 1 << 1
)

// Run, transfer and comm record flags.
const (
	flagFailed = 1 << 0
	// runPredicted: the run record carries the models' predictions.
	runPredicted = 1 << 1
	// runPosted: the policy posted the task to its worker itself.
	runPosted = 1 << 2
	// runSlept: the run record carries when its worker slept before it
	// (version 2).
	runSlept = 1 << 3
	// runImpl: the run record carries the index of the implementation
	// that ran (version 3).
	runImpl = 1 << 4
	// runTeam: the task ran on a team of workers (a parallel task on a
	// combined worker), which the record lists (version 3).
	runTeam = 1 << 5
	// commSend: the communication is a send (else a receive).
	commSend = 1 << 1
)

// Access is one handle a task accesses: the handle's number, the access
// mode (pluginapi/kernel.Mode bits), its size in bytes, its footprint (a
// hash of its shape, as performance models key tasks on; 0 unknown: a
// version 1 trace) and its name (set with Handle.SetName), if any.
type Access struct {
	Handle    uint64
	Size      uint64
	Name      string
	Footprint uint32
	Mode      uint8
	// Mark is the producer's for this handle (HandleMark), nil for none:
	// the stream then describes the handle at every submission. Readers
	// leave it nil.
	Mark *HandleMark
}

// Mode bits, as pluginapi/kernel defines them.
const (
	ModeR       = 1 << 0
	ModeW       = 1 << 1
	ModeScratch = 1 << 2
	ModeRedux   = 1 << 3
	ModeCommute = 1 << 4
)

// ModeString writes m as StarPU's tasks.rec does: R, W, RW, S (scratch),
// X (reduction), with C appended for commute.
func ModeString(m uint8) string {
	s := ""
	if m&ModeR != 0 {
		s += "R"
	}
	if m&ModeW != 0 {
		s += "W"
	}
	if m&ModeScratch != 0 {
		s += "S"
	}
	if m&ModeRedux != 0 {
		s += "X"
	}
	if m&ModeCommute != 0 {
		s += "C"
	}
	return s
}

// appender builds records; its methods append to b.
type appender struct{ b []byte }

func (a *appender) u(v uint64) { a.b = binary.AppendUvarint(a.b, v) }
func (a *appender) i(v int64)  { a.b = binary.AppendVarint(a.b, v) }
func (a *appender) str(s string) {
	a.u(uint64(len(s)))
	a.b = append(a.b, s...)
}

// reader decodes records from a byte stream of a native trace of the
// given version.
type reader struct {
	r       io.ByteReader
	version int
	buf     []byte
	err     error
	// last is the last submit, ready, run or edge time (version 4), handles
	// the handle records read.
	last    int64
	handles map[uint64]Access
	// prev is the last submit or repeat record read: what a repeat record
	// repeats (version 6).
	prev Task
	// prevOK says a submit record was read.
	prevOK bool
	// lastRun is the last run record read: what a next-run,
	// edge-from-run or hop record refers to (version 7).
	lastRun lastRun
}

func newReader(br io.ByteReader, version int) *reader {
	return &reader{r: br, version: version, handles: map[uint64]Access{}}
}

// handle reads a handle record (version 4), which describes the handle
// in the submit records that follow.
func (r *reader) handle(names map[uint64]string) {
	h := Access{Handle: r.u(), Size: r.u(), Footprint: uint32(r.u())}
	h.Name = names[r.u()]
	if r.err == nil {
		r.handles[h.Handle] = h
	}
}

// time reads a submit, ready, run or edge time: since time 0 before version 4,
// else a difference from the last one.
func (r *reader) time() int64 {
	if r.version < 4 {
		return r.i()
	}
	r.last += r.i()
	return r.last
}

// cursor reads a cursor record (version 5): the time the next
// differences count from.
func (r *reader) cursor() {
	if r.version < 5 {
		r.err = fmt.Errorf("%w: a cursor record in a version %d trace", errCorrupt, r.version)
		return
	}
	r.last = r.i()
}

func (r *reader) u() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.err = truncated(err)
	}
	return v
}

func (r *reader) i() int64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(r.r)
	if err != nil {
		r.err = truncated(err)
	}
	return v
}

// maxString bounds a string's length, so that a corrupt length cannot ask
// for gigabytes; maxTeam a team's size and maxImpl an implementation's
// index likewise.
const (
	maxString = 1 << 20
	maxTeam   = 1 << 16
	maxImpl   = 1 << 16
)

func (r *reader) str() string {
	n := r.u()
	if r.err != nil {
		return ""
	}
	if n > maxString {
		r.err = fmt.Errorf("%w: string of %d bytes", errCorrupt, n)
		return ""
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	for k := range b {
		c, err := r.r.ReadByte()
		if err != nil {
			r.err = truncated(err)
			return ""
		}
		b[k] = c
	}
	return string(b)
}

var errCorrupt = errors.New("corrupt trace")

// errTruncated marks a record cut short: the runtime did not close the
// trace (it crashed, or the file is being written).
var errTruncated = errors.New("trace ends in the middle of a record")

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errTruncated
	}
	return err
}

// readNative reads the records after the magic of the given version into
// t.
func readNative(br io.ByteReader, version int, t *Trace) error {
	r := newReader(br, version)
	t.Origin = r.i()
	if r.err != nil {
		return r.err
	}
	names := map[uint64]string{}
	b := newBuilder(t)
	d := newStateDeriver(func(s State) { t.States = append(t.States, s) })
	defer func() {
		d.finish()
		b.finish()
	}()
	for {
		k, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil // not closed: Complete stays false
		}
		if err != nil {
			return err
		}
		switch k {
		case kindName:
			id := r.u()
			names[id] = r.str()
		case kindSubmit, kindRepeat, kindRepeatTag:
			task := b.task(r.submitID(k))
			r.submission(k, task, names)
			if r.err == nil {
				task.Submitted = true
				d.seen(task.Submit)
			}
		case kindCursor:
			r.cursor()
		case kindHandle:
			r.handle(names)
		case kindReady:
			task := b.task(r.u())
			task.Ready = r.time()
			d.seen(task.Ready)
		case kindRun, kindRunNext:
			task := b.task(r.runID(k))
			r.run(k, task)
			if r.err == nil {
				d.run(task)
			}
		case kindEdge, kindEdgeRun, kindHop:
			from, to, _, _, end := r.edge(k)
			b.edge(from, to)
			if k == kindHop && r.err == nil {
				task := b.task(to)
				task.Ready = end
				d.seen(end)
			}
		case kindXfer:
			x := Transfer{Src: int(r.u()), Dst: int(r.u()), Bytes: r.u(), Handle: r.u(), Start: r.i(), End: r.i()}
			x.Failed = r.u()&flagFailed != 0
			if r.err == nil {
				t.Transfers = append(t.Transfers, x)
				d.transfer(x)
			}
		case kindWorker:
			w := Worker{ID: int(r.u()), Node: int(r.i()), Arch: r.str()}
			w.Name = r.str()
			b.worker(w)
			d.worker(w)
		case kindNode:
			n := Node{ID: int(r.u()), Name: r.str()}
			b.node(n)
		case kindPlugin:
			p := r.plugin(names)
			if r.err == nil {
				b.plugin(p)
			}
		case kindComm:
			c := r.comm()
			if r.err == nil {
				t.Comms = append(t.Comms, c)
			}
		case kindEnd:
			if r.err == nil {
				t.Complete = true
			}
		default:
			return fmt.Errorf("%w: unknown record kind %d", errCorrupt, k)
		}
		if r.err != nil {
			if errors.Is(r.err, errTruncated) {
				return nil
			}
			return r.err
		}
	}
}

// edge reads an edge record of kind k (kindEdge, or kindEdgeRun and
// kindHop, from the last run record's task): from released to; from ran
// on worker w (-1: nowhere) from start to end. A hop record also says
// that to was ready at end.
func (r *reader) edge(k byte) (from, to uint64, w, start, end int64) {
	if k != kindEdge {
		r.afterRun(k)
		p := &r.lastRun
		return p.id, p.id + uint64(r.i()), int64(p.worker), p.start, p.end
	}
	from, to, w = r.u(), r.u(), r.i()
	switch {
	case r.version < 4:
		start, end = r.i(), r.i()
	case w >= 0:
		start = r.time()
		end = start + r.i()
	}
	return from, to, w, start, end
}

// submitID reads the job number of a submit record of kind k (kindSubmit
// or kindRepeat): a repeat record gives its difference from the previous
// one's.
func (r *reader) submitID(k byte) uint64 {
	if k == kindSubmit {
		r.prev.ID = r.u()
		return r.prev.ID
	}
	switch {
	case k == kindRepeatTag && r.version < 7:
		r.err = fmt.Errorf("%w: a repeat-tag record in a version %d trace", errCorrupt, r.version)
	case r.version < 6:
		r.err = fmt.Errorf("%w: a repeat record in a version %d trace", errCorrupt, r.version)
	case !r.prevOK:
		r.err = fmt.Errorf("%w: a repeat record before any submit record", errCorrupt)
	}
	r.prev.ID += uint64(r.i())
	return r.prev.ID
}

// submission reads the rest of a submit record of kind k, after the job
// number (submitID), into x, reusing its Iter and Handles.
func (r *reader) submission(k byte, x *Task, names map[uint64]string) {
	if r.err != nil {
		return
	}
	if k == kindSubmit {
		r.submit(x, names)
		r.prevOK = r.err == nil
		repeated(&r.prev, x)
		return
	}
	repeated(x, &r.prev)
	x.Submit = r.time()
	if k == kindRepeatTag {
		r.prev.Tag += uint64(r.i())
		x.Tag = r.prev.Tag
	}
	for i, h := range x.Handles {
		// The latest description, as a submit record's handles get.
		a := r.handles[h.Handle]
		a.Mode = h.Mode
		x.Handles[i] = a
	}
}

// repeated copies into dst what a repeat record repeats of src, reusing
// dst's Iter and Handles.
func repeated(dst, src *Task) {
	dst.Name, dst.Codelet, dst.Model = src.Name, src.Codelet, src.Model
	dst.Priority, dst.Tag, dst.HasTag, dst.Flops = src.Priority, src.Tag, src.HasTag, src.Flops
	dst.Iter = append(dst.Iter[:0], src.Iter...)
	dst.Handles = append(dst.Handles[:0], src.Handles...)
}

// submit reads a submit record's fields after the job number into x,
// reusing its Iter and Handles.
func (r *reader) submit(x *Task, names map[uint64]string) {
	x.Name, x.Codelet, x.Model = names[r.u()], names[r.u()], names[r.u()]
	x.Submit = r.time()
	x.Priority = r.i()
	flags := r.u()
	if flags&submitTag != 0 {
		x.Tag, x.HasTag = r.u(), true
	}
	if flags&submitFlops != 0 {
		x.Flops = math.Float64frombits(r.u())
	}
	n := r.u()
	if r.err == nil && n > 2 {
		r.err = fmt.Errorf("%w: %d iteration levels", errCorrupt, n)
		return
	}
	x.Iter = x.Iter[:0]
	for range n {
		x.Iter = append(x.Iter, r.i())
	}
	nh := r.u()
	if r.err == nil && nh > maxString {
		r.err = fmt.Errorf("%w: %d handles", errCorrupt, nh)
		return
	}
	x.Handles = x.Handles[:0]
	if r.err == nil && nh > uint64(cap(x.Handles)) {
		x.Handles = make([]Access, 0, nh)
	}
	for k := uint64(0); k < nh && r.err == nil; k++ {
		id, mode := r.u(), uint8(r.u())
		if r.version >= 4 {
			a, ok := r.handles[id]
			if !ok && r.err == nil {
				r.err = fmt.Errorf("%w: job %d accesses handle %d, described nowhere before", errCorrupt, x.ID, id)
			}
			a.Mode = mode
			x.Handles = append(x.Handles, a)
			continue
		}
		a := Access{Handle: id, Mode: mode, Size: r.u()}
		if r.version >= 2 {
			a.Footprint = uint32(r.u())
		}
		a.Name = names[r.u()]
		x.Handles = append(x.Handles, a)
	}
}

// afterRun checks that a record of kind k, which refers to the last run
// record, may be read: version 7, after a run record.
func (r *reader) afterRun(k byte) {
	switch {
	case r.err != nil:
	case r.version < 7:
		r.err = fmt.Errorf("%w: a record of kind %d in a version %d trace", errCorrupt, k, r.version)
	case !r.lastRun.ok:
		r.err = fmt.Errorf("%w: a record of kind %d before any run record", errCorrupt, k)
	}
}

// runID reads the job number of a run record of kind k (kindRun or
// kindRunNext): a next-run record gives its difference from the last
// run record's.
func (r *reader) runID(k byte) uint64 {
	if k == kindRun {
		return r.u()
	}
	r.afterRun(k)
	return r.lastRun.id + uint64(r.i())
}

// run reads a run record's fields of kind k after the job number into x:
// a next-run record (version 7) has the times and predictions only, and
// the last run record's worker, footprint, flags and implementation.
func (r *reader) run(k byte, x *Task) {
	if r.version >= 5 && x.Submitted && x.Ready == 0 {
		x.Ready = x.Submit // ready at its submission: no ready record
	}
	next := k == kindRunNext
	var flags uint64
	switch {
	case next:
		x.Worker, x.Footprint, flags = int(r.lastRun.worker), r.lastRun.footprint, r.lastRun.flags
		x.Start = r.time()
		x.End = x.Start + r.i()
		if r.err == nil && flags&(runSlept|runTeam) != 0 {
			r.err = fmt.Errorf("%w: job %d's next-run record repeats a sleep or a team", errCorrupt, x.ID)
		}
	case r.version >= 4:
		x.Worker = int(r.i())
		x.Start = r.time()
		x.End = x.Start + r.i()
	default:
		x.Worker = int(r.i())
		x.Start, x.End = r.i(), r.i()
	}
	if !next {
		x.Footprint = uint32(r.u())
		flags = r.u()
	}
	x.Failed = flags&flagFailed != 0
	x.Posted = flags&runPosted != 0
	if flags&runPredicted != 0 {
		x.Predicted, x.PredictedTransfer = r.i(), r.i()
	}
	x.SleepStart, x.SleepEnd = 0, 0
	if flags&runSlept != 0 {
		s, e := r.i(), r.i()
		x.SleepStart, x.SleepEnd = x.Start-s, x.Start-e
		if r.err == nil && x.SleepEnd < x.SleepStart {
			r.err = fmt.Errorf("%w: job %d slept from %d to %d ns", errCorrupt, x.ID, x.SleepStart, x.SleepEnd)
		}
	}
	x.Impl = -1
	switch {
	case flags&runImpl == 0:
	case next:
		x.Impl = int(r.lastRun.impl)
	default:
		v := r.u()
		if r.err == nil && v > maxImpl {
			r.err = fmt.Errorf("%w: job %d ran implementation %d", errCorrupt, x.ID, v)
		}
		x.Impl = int(v)
	}
	// Reused, as Iter and Handles: nil for a task read afresh.
	x.Team = x.Team[:0]
	if flags&runTeam != 0 {
		r.team(x)
	}
	x.Ran = r.err == nil
	if x.Ran && x.Worker >= math.MinInt32 && x.Worker <= math.MaxInt32 && x.Impl <= math.MaxInt16 {
		r.lastRun = lastRun{ok: true, id: x.ID, worker: int32(x.Worker), footprint: x.Footprint, flags: flags, impl: int16(x.Impl), start: x.Start, end: x.End}
	}
}

// team reads a run record's team into x: its size, then its workers, the
// master first, which is the worker the record names.
func (r *reader) team(x *Task) {
	n := r.u()
	if r.err == nil && (n < 2 || n > maxTeam) {
		r.err = fmt.Errorf("%w: job %d ran on a team of %d workers", errCorrupt, x.ID, n)
		return
	}
	for k := uint64(0); k < n && r.err == nil; k++ {
		w := r.u()
		if r.err == nil && w > math.MaxInt32 {
			r.err = fmt.Errorf("%w: job %d ran on a team with worker %d", errCorrupt, x.ID, w)
		}
		x.Team = append(x.Team, int(w))
	}
	if r.err == nil && x.Team[0] != x.Worker {
		r.err = fmt.Errorf("%w: job %d ran on worker %d, but its team's master is %d", errCorrupt, x.ID, x.Worker, x.Team[0])
	}
}

// plugin reads a plugin record.
func (r *reader) plugin(names map[uint64]string) PluginEvent {
	p := PluginEvent{Time: r.i(), Kind: PluginKind(r.u()), Pid: int(r.u())}
	p.Name, p.Note = names[r.u()], names[r.u()]
	if r.err == nil && p.Kind != PluginStart && p.Kind != PluginExit {
		r.err = fmt.Errorf("%w: plugin event of kind %d", errCorrupt, p.Kind)
	}
	return p
}

// comm reads a comm record.
func (r *reader) comm() Comm {
	flags := r.u()
	c := Comm{Send: flags&commSend != 0, Failed: flags&flagFailed != 0}
	c.Peer, c.Tag, c.Bytes, c.Handle = int(r.i()), r.i(), r.u(), r.u()
	c.Start, c.End = r.i(), r.i()
	return c
}
