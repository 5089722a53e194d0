package trace

// Perfetto's protobuf trace format, for runs too large for JSON: the
// Perfetto UI (ui.perfetto.dev) and trace_processor load it. The file is a
// perfetto.protos.Trace: a sequence of TracePacket messages, each
// written as field 1 of Trace (tag, length, bytes), so that packets append
// one after another. Encoded by hand with protowire: Perfetto publishes
// no Go module, and the handful of messages used here do not justify
// generated code for its whole schema.
//
// Field numbers, from Perfetto's public protos (github.com/google/perfetto,
// protos/perfetto/trace/):
//
//	Trace (trace.proto):                 packet 1
//	TracePacket (trace_packet.proto):    timestamp 8, trusted_packet_sequence_id 10,
//	                                     track_event 11, interned_data 12,
//	                                     sequence_flags 13 (1 INCREMENTAL_STATE_CLEARED,
//	                                     2 NEEDS_INCREMENTAL_STATE), track_descriptor 60
//	TrackDescriptor (track_event/track_descriptor.proto):
//	                                     uuid 1, name 2, process 3, parent_uuid 5
//	ProcessDescriptor (process_descriptor.proto): pid 1, process_name 6
//	TrackEvent (track_event/track_event.proto):
//	                                     debug_annotations 4, type 9 (1 SLICE_BEGIN,
//	                                     2 SLICE_END, 3 INSTANT), name_iid 10,
//	                                     track_uuid 11, categories 22,
//	                                     flow_ids 47 (fixed64), terminating_flow_ids 48 (fixed64)
//	DebugAnnotation (debug_annotation.proto): bool_value 2, uint_value 3,
//	                                     int_value 4, string_value 6, name 10
//	InternedData (interned_data.proto):  event_names 2
//	EventName:                           iid 1, name 2
//
// Layout. A process track per group of rows (pid 1 workers, 2 bus links,
// 3 tasks that ran nowhere, 4 plugin processes, 5 communications), a
// child track per row: a worker, a bus link, a plugin, a peer rank. Tasks,
// the workers' states (any StateKind, by its name), transfers and
// communications are slices (a BEGIN and an END event); plugin events and
// tasks that ran nowhere are instants. Slices that overlap on one row (a
// driver running tasks asynchronously) go to extra lanes, child tracks
// named "ROW #2", ...: Perfetto nests the slices of a track and would
// draw overlapping ones as wrongly nested. A dependency between two tasks
// that ran is a flow from the predecessor's slice to the successor's. A
// parallel task that ran on a team is a slice on every member's row,
// named "NAME (team of N, master W)" on the members other than its
// master, with the same annotations (its team in "team"); its flows
// start and end on its master's.
// Event names are interned (one sequence, its incremental state cleared
// by the first packet): a million tasks of four codelets name four
// strings.
//
// Timestamps are nanoseconds since the runtime's Init, on the trace's
// own clock (Perfetto's default, BOOTTIME, is only a label here).
//
// Order. The conversion streams the native records (ConvertPerfetto), as
// ConvertChrome does, and does not sort: trace processor does. What it
// does with a file, read in Perfetto's source (src/trace_processor/ at
// commit ec5d16b, August 2026):
//
//   - sorter/trace_sorter.h: every timestamped packet goes through the
//     TraceSorter, which sorts "events parsed from the trace stream in
//     arbitrary order"; it extracts early only on the tracing service's
//     flush and read-buffer events (TracingServiceEvent), which this file
//     never has, so the whole file is sorted at its end
//     (ExtractEventsForced), by (timestamp, position in the file): a
//     stable sort. The UI runs the same trace processor (WebAssembly).
//   - importers/proto/proto_trace_reader.cc: sequence_flags and
//     interned_data are handled when a packet is tokenized, in file
//     order, and each packet keeps the interning state it saw; so a name
//     must be interned before its first use in the file, whatever the
//     timestamps. track_event_tokenizer.cc reserves a track when its
//     descriptor is tokenized: descriptors come before their tracks'
//     events in the file too (at timestamp 0, as the synthetic TrackEvent
//     guide, docs/reference/synthetic-track-event.md, advises a descriptor
//     timestamped before its events).
//   - importers/proto/track_event_event_importer.h: after the sort, a
//     BEGIN opens a slice on its track's stack, an END closes the top one,
//     an instant is a slice of no duration nested in what is open. So on
//     one track the events are in time order here, and at one timestamp
//     an END is written before the BEGIN that follows it (the sort keeps
//     file order at equal timestamps).
//   - Flows: "the direction of the flows between events is inferred from
//     the events' timestamps" (track_event.proto, flow_ids), and
//     common/flow_tracker.cc orders the two slices of a flow by their
//     start, not by which event was parsed first.
//
// So packets go out in the order of the native records, within three
// rules: descriptors and names before their first use, each track's
// slices in time order (END before a BEGIN at the same time), and a
// flow's id on both of its slices. A task is written when its run record
// is read, that is when it ended: across tracks the file is not in time
// order. trace processor holds the whole trace in memory anyway.
//
// The window. A flow's id must be on an event of the predecessor's
// slice, and the native trace writes a task's dependency edges after its
// run record (at its termination, in the same engine round unless
// end dependencies or write-through hold it). The writer keeps the last
// pfWindow slices unwritten, in order, so that the flows of edges read
// later go on the predecessor's BEGIN. An edge read after its
// predecessor left the window is drawn from an instant ("dep", category
// dep, with the predecessor's job number) in the middle of the
// predecessor's time on its worker's first track: exact for a worker
// that never ran two tasks at once, on the first lane otherwise. A flow
// whose successor never runs is taken back from a predecessor still in
// the window; one already written keeps an id that nothing ends, which
// trace processor ignores.
//
// Memory: the tasks submitted and not yet run (as ConvertChrome), the
// state derivation's (workers, handles), the rows and their lanes, the
// names interned (as the native trace's own name table), and the window.
//
// Rejected: reading the whole trace into memory and sorting it (what
// this writer did first: 3 KB allocated a task, 7 GB resident to convert
// two million tasks, so a run of tens of millions could not be converted
// where it ran); a reorder
// window flushed by a watermark, for a file nearly in time order (a
// task's run record comes when it ends, so no watermark bounds how late
// an event is: the window would grow with the longest task, or the file
// still not be sorted, and trace processor sorts either way); an
// external merge sort through temporary files, for strict order (nothing
// reads it that needs it, for twice the disk traffic and a temporary
// file as large as the output at Shutdown); legacy (v1) flow events, as
// the JSON trace's, bound to the slice open on a track at their time
// (they need the predecessor's lane all the same, and trace processor
// keeps their ids apart from flow_ids, so both ends would be v1).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Perfetto field numbers (see the header).
const (
	pfTracePacket = 1

	pfTimestamp       = 8
	pfSequenceID      = 10
	pfTrackEvent      = 11
	pfInternedData    = 12
	pfSequenceFlags   = 13
	pfTrackDescriptor = 60

	pfTDUUID    = 1
	pfTDName    = 2
	pfTDProcess = 3
	pfTDParent  = 5

	pfPDPid  = 1
	pfPDName = 6

	pfTEAnnotations  = 4
	pfTEType         = 9
	pfTENameIID      = 10
	pfTETrackUUID    = 11
	pfTECategories   = 22
	pfTEFlowIDs      = 47
	pfTETerminateIDs = 48

	pfDABool   = 2
	pfDAUint   = 3
	pfDAInt    = 4
	pfDAString = 6
	pfDAName   = 10

	pfIDEventNames = 2
	pfENIID        = 1
	pfENName       = 2

	pfSliceBegin = 1
	pfSliceEnd   = 2
	pfInstant    = 3

	pfSeqCleared = 1
	pfSeqNeeds   = 2

	// pfSequence is the one packet sequence this writer uses.
	pfSequence = 1
)

// Track uuids: a group's process track is its pid; the lanes of the rows
// take pfRowBase, pfRowBase+1, ... as they are first written, so that the
// uuid every event carries is a one- or two-byte varint.
const pfRowBase = 16

// pfWindow is how many slices the writer holds before writing them (see
// the header), pfWindowBytes how many bytes of annotations at most: a
// task with a thousand handles says 20 KB.
const (
	pfWindow      = 4096
	pfWindowBytes = 4 << 20
)

// The groups of rows, by pid.
const (
	pfWorkers = 1 + iota
	pfBus
	pfNowhere
	pfPlugins
	pfComms
	pfNGroups
)

// pfGroupName names a group's process track.
func pfGroupName(g int) string {
	switch g {
	case pfWorkers:
		return "starpu workers"
	case pfBus:
		return "bus"
	case pfNowhere:
		return "tasks that ran nowhere"
	case pfPlugins:
		return "plugin processes"
	}
	return "communications"
}

// pfRow is one row of a group (a worker, a bus link, a plugin, a peer):
// its lanes are tracks.
type pfRow struct {
	group int
	name  string
	// ends holds per lane the end of its last slice; uuids the lane's
	// track, 0 until it is described.
	ends  []int64
	uuids []uint64
}

// place deals a slice to the first lane whose last slice has ended by its
// start, adding a lane when none has. Slices reach a row in the order
// they ended (the records'), so each lane's are in time order and never
// overlap.
func (r *pfRow) place(start, end int64) int {
	end = max(end, start)
	for l, e := range r.ends {
		if e <= start {
			r.ends[l] = end
			return l
		}
	}
	r.ends = append(r.ends, end)
	r.uuids = append(r.uuids, 0)
	return len(r.ends) - 1
}

// pfKey finds a row: its group and what tells it apart there.
type pfKey struct {
	group, a, b int
	name        string
}

// pfSlice is a slice or an instant not written yet.
type pfSlice struct {
	job        uint64 // the task's job number; 0 for another slice
	row        *pfRow
	lane       int
	start, end int64
	instant    bool
	name, cat  string
	annots     []byte   // encoded TrackEvent debug_annotations fields
	flows      []uint64 // flows that start here
	ends       []uint64 // flows that end here
}

// pfFlow is a dependency drawn as a flow: its id, its predecessor (which
// ran on worker from start to end) and whether the id is on the
// predecessor's slice (else an anchor instant carries it).
type pfFlow struct {
	id         uint64
	pred       uint64
	worker     int
	start, end int64
	held       bool
}

// pfTask is a submitted task that has not run yet, and the flows that end
// at it.
type pfTask struct {
	Task
	flows []pfFlow
}

// pfSink turns tasks, states, transfers and events into packets, in the
// order it is given them (see the header's rules).
type pfSink struct {
	pw   pfWriter
	rows map[pfKey]*pfRow
	// uuid is the last track uuid given to a lane.
	uuid uint64
	// groups says which process tracks are described.
	groups [pfNGroups]bool
	// win is a ring of the slices not written yet, oldest at head; byJob
	// finds a task's slice in it.
	win     []pfSlice
	head, n int
	byJob   map[uint64]int
	// held is the bytes of annotations the window holds.
	held    int
	nflow   uint64
	wnames  map[int]string
	nodes   []Node
	scratch []byte
	// anchors counts the flows drawn from an anchor instant.
	anchors int
}

// newPfSink is a sink writing to w that holds window slices.
func newPfSink(w io.Writer, window int) *pfSink {
	return &pfSink{pw: pfWriter{bw: bufio.NewWriterSize(w, chunkSize), names: map[string]uint64{}},
		rows: map[pfKey]*pfRow{}, uuid: pfRowBase - 1, win: make([]pfSlice, window), byJob: map[uint64]int{}, wnames: map[int]string{}}
}

// row finds or makes the row of k; name names a new one.
func (s *pfSink) row(k pfKey, name func() string) *pfRow {
	r := s.rows[k]
	if r == nil {
		r = &pfRow{group: k.group, name: name(), ends: []int64{math.MinInt64}, uuids: []uint64{0}}
		s.rows[k] = r
	}
	return r
}

// workerRow is worker id's row, named by its worker record if one came.
func (s *pfSink) workerRow(id int) *pfRow {
	return s.row(pfKey{group: pfWorkers, a: id}, func() string {
		if n, ok := s.wnames[id]; ok {
			return n
		}
		return "worker " + strconv.Itoa(id)
	})
}

// worker names worker w's row and describes it, so that every worker has
// a track, busy or not.
func (s *pfSink) worker(w Worker) {
	if _, ok := s.wnames[w.ID]; !ok {
		s.wnames[w.ID] = w.Name
	}
	s.track(s.workerRow(w.ID), 0)
}

// nodeName names memory node n for the bus links' rows.
func (s *pfSink) nodeName(n int) string {
	for _, x := range s.nodes {
		if x.ID == n {
			return x.Name
		}
	}
	return "node " + strconv.Itoa(n)
}

// track is the uuid of a row's lane: at its first use, its descriptor is
// written, and its group's before it.
func (s *pfSink) track(r *pfRow, lane int) uint64 {
	if u := r.uuids[lane]; u != 0 {
		return u
	}
	if !s.groups[r.group] {
		s.groups[r.group] = true
		s.pw.track(uint64(r.group), 0, pfGroupName(r.group), r.group)
	}
	name := r.name
	if lane > 0 {
		name += " #" + strconv.Itoa(lane+1)
	}
	s.uuid++
	r.uuids[lane] = s.uuid
	s.pw.track(s.uuid, uint64(r.group), name, 0)
	return s.uuid
}

// push returns a slice of the window to fill, writing the oldest when the
// window is full; i is its place, for byJob.
func (s *pfSink) push() (int, *pfSlice) {
	for s.n == len(s.win) || s.n > 0 && s.held > pfWindowBytes {
		s.evict()
	}
	i := (s.head + s.n) % len(s.win)
	s.n++
	x := &s.win[i]
	*x = pfSlice{annots: x.annots[:0], flows: x.flows[:0], ends: x.ends[:0]}
	return i, x
}

// evict writes the oldest slice of the window.
func (s *pfSink) evict() {
	x := &s.win[s.head]
	if x.job != 0 && s.byJob[x.job] == s.head {
		delete(s.byJob, x.job)
	}
	s.head = (s.head + 1) % len(s.win)
	s.n--
	s.held -= len(x.annots)
	uuid := s.track(x.row, x.lane)
	if x.instant {
		s.pw.event(x.start, uuid, pfInstant, x.name, x.cat, x.annots, x.flows, x.ends)
	} else {
		s.pw.event(x.start, uuid, pfSliceBegin, x.name, x.cat, x.annots, x.flows, x.ends)
		s.pw.event(max(x.end, x.start), uuid, pfSliceEnd, "", "", nil, nil, nil)
	}
	if cap(x.annots) > pfWindowBytes/pfWindow {
		x.annots = nil // a task with many handles: do not keep its buffer
	}
}

// slice places a slice on row r and returns it to fill (name, category,
// annotations).
func (s *pfSink) slice(r *pfRow, start, end int64) (int, *pfSlice) {
	lane := r.place(start, end)
	i, x := s.push()
	x.row, x.lane, x.start, x.end = r, lane, start, end
	return i, x
}

// instant puts an instant on lane 0 of r: instants do not overlap.
func (s *pfSink) instant(r *pfRow, t int64) *pfSlice {
	_, x := s.push()
	x.row, x.start, x.end, x.instant = r, t, t, true
	return x
}

// task writes x, which ran, with the flows that end at it.
func (s *pfSink) task(x *Task, flows []pfFlow) {
	for _, f := range flows {
		if !f.held {
			s.anchor(f)
		}
	}
	i, sl := s.slice(s.workerRow(x.Worker), x.Start, x.End)
	sl.job, sl.name, sl.cat = x.ID, x.Name, "task"
	if sl.name == "" {
		sl.name = "task"
	}
	sl.annots = s.taskAnnots(sl.annots, x)
	for _, f := range flows {
		sl.ends = append(sl.ends, f.id)
	}
	s.byJob[x.ID] = i
	s.held += len(sl.annots)
	// A team's other members ran it too: a slice on each, with no flow
	// (those start and end on the master's) and out of byJob.
	if len(x.Team) < 2 {
		return
	}
	name := x.memberName()
	for _, w := range x.Team[1:] {
		_, m := s.slice(s.workerRow(w), x.Start, x.End)
		m.name, m.cat = name, "task"
		m.annots = s.taskAnnots(m.annots, x)
		s.held += len(m.annots)
	}
}

// anchor draws flow f from an instant in its predecessor's time, on its
// worker's first lane: the predecessor's slice left the window.
func (s *pfSink) anchor(f pfFlow) {
	s.anchors++
	x := s.instant(s.workerRow(f.worker), f.start+(max(f.end, f.start)-f.start)/2)
	x.name, x.cat = "dep", "dep"
	x.annots = pfAnnot(x.annots, "job", pfDAUint, f.pred, nil)
	x.flows = append(x.flows, f.id)
	s.held += len(x.annots)
}

// flow starts a flow from pred, which ran on worker from start to end, to
// a successor that has not run yet: on pred's slice if the window holds
// it.
func (s *pfSink) flow(pred uint64, worker int, start, end int64) pfFlow {
	s.nflow++
	f := pfFlow{id: s.nflow, pred: pred, worker: worker, start: start, end: end}
	if i, ok := s.byJob[pred]; ok {
		s.win[i].flows = append(s.win[i].flows, f.id)
		f.held = true
	}
	return f
}

// unflow takes back the flows to a successor that did not run, from the
// predecessors the window still holds.
func (s *pfSink) unflow(flows []pfFlow) {
	for _, f := range flows {
		i, ok := s.byJob[f.pred]
		if !f.held || !ok {
			continue
		}
		ids := s.win[i].flows
		for k, id := range ids {
			if id == f.id {
				s.win[i].flows = append(ids[:k], ids[k+1:]...)
				break
			}
		}
	}
}

// nowhere writes a task that ran nowhere (a synchronisation task, one
// that failed before running) as an instant at its ready or submit time.
func (s *pfSink) nowhere(x *Task) {
	t := x.Submit
	if x.Ready != 0 {
		t = x.Ready
	}
	sl := s.instant(s.row(pfKey{group: pfNowhere}, func() string { return "tasks that ran nowhere" }), t)
	sl.name, sl.cat = x.Name, "task"
	if sl.name == "" {
		sl.name = "task"
	}
	sl.annots = s.taskAnnots(sl.annots, x)
	s.held += len(sl.annots)
}

// state writes a worker's state between tasks.
func (s *pfSink) state(st State) {
	_, x := s.slice(s.workerRow(st.Worker), st.Start, st.End)
	x.name, x.cat = st.Kind.String(), "state"
	if st.Task != 0 {
		x.annots = pfAnnot(x.annots, "next", pfDAUint, st.Task, nil)
	}
	s.held += len(x.annots)
}

// transfer writes a copy on its bus link's row.
func (s *pfSink) transfer(t Transfer) {
	r := s.row(pfKey{group: pfBus, a: t.Src, b: t.Dst}, func() string { return s.nodeName(t.Src) + " -> " + s.nodeName(t.Dst) })
	_, x := s.slice(r, t.Start, t.End)
	x.name, x.cat = "transfer", "transfer"
	x.annots = pfAnnot(x.annots, "bytes", pfDAUint, t.Bytes, nil)
	x.annots = pfAnnot(x.annots, "handle", pfDAUint, t.Handle, nil)
	if t.Failed {
		x.annots = pfAnnot(x.annots, "failed", pfDABool, 1, nil)
	}
	s.held += len(x.annots)
}

// plugin writes a plugin event (its Kind already a restart where it is
// one).
func (s *pfSink) plugin(p PluginEvent) {
	x := s.instant(s.row(pfKey{group: pfPlugins, name: p.Name}, func() string { return p.Name }), p.Time)
	x.name, x.cat = p.Kind.String()+" "+p.Name, "plugin"
	x.annots = pfAnnot(x.annots, "pid", pfDAInt, uint64(p.Pid), nil)
	if p.Note != "" {
		x.annots = pfAnnot(x.annots, "note", pfDAString, 0, []byte(p.Note))
	}
	s.held += len(x.annots)
}

// comm writes a communication on its peer's row.
func (s *pfSink) comm(c Comm) {
	r := s.row(pfKey{group: pfComms, a: c.Peer}, func() string { return "rank " + strconv.Itoa(c.Peer) })
	_, x := s.slice(r, c.Start, c.End)
	x.name, x.cat = commName(c), "comm"
	x.annots = pfAnnot(x.annots, "tag", pfDAInt, uint64(c.Tag), nil)
	x.annots = pfAnnot(x.annots, "bytes", pfDAUint, c.Bytes, nil)
	x.annots = pfAnnot(x.annots, "handle", pfDAUint, c.Handle, nil)
	if c.Failed {
		x.annots = pfAnnot(x.annots, "failed", pfDABool, 1, nil)
	}
	s.held += len(x.annots)
}

// close writes what the window holds and flushes.
func (s *pfSink) close() error {
	for s.n > 0 {
		s.evict()
	}
	if s.pw.err != nil {
		return s.pw.err
	}
	return s.pw.bw.Flush()
}

// taskAnnots appends what a task's slice says about it.
func (s *pfSink) taskAnnots(b []byte, x *Task) []byte {
	b = pfAnnot(b, "job", pfDAUint, x.ID, nil)
	if x.Codelet != "" {
		b = pfAnnot(b, "codelet", pfDAString, 0, []byte(x.Codelet))
	}
	if x.Submitted {
		b = pfAnnot(b, "submit_ns", pfDAInt, uint64(x.Submit), nil)
	}
	if x.Ready != 0 {
		b = pfAnnot(b, "ready_ns", pfDAInt, uint64(x.Ready), nil)
	}
	if x.Ran {
		s.scratch = strconv.AppendUint(s.scratch[:0], uint64(x.Footprint), 16)
		b = pfAnnot(b, "footprint", pfDAString, 0, s.scratch)
	}
	if x.Predicted >= 0 {
		b = pfAnnot(b, "predicted_ns", pfDAInt, uint64(x.Predicted), nil)
	}
	if x.PredictedTransfer >= 0 {
		b = pfAnnot(b, "predicted_transfer_ns", pfDAInt, uint64(x.PredictedTransfer), nil)
	}
	if x.Posted {
		b = pfAnnot(b, "posted", pfDABool, 1, nil)
	}
	if x.Failed {
		b = pfAnnot(b, "failed", pfDABool, 1, nil)
	}
	if x.Impl >= 0 {
		b = pfAnnot(b, "impl", pfDAInt, uint64(x.Impl), nil)
	}
	if len(x.Team) > 0 {
		h := s.scratch[:0]
		for i, w := range x.Team {
			if i > 0 {
				h = append(h, ' ')
			}
			h = strconv.AppendInt(h, int64(w), 10)
		}
		s.scratch = h
		b = pfAnnot(b, "team", pfDAString, 0, h)
	}
	if len(x.Iter) > 0 {
		b = pfAnnot(b, "iteration", pfDAInt, uint64(x.Iter[0]), nil)
	}
	if x.HasTag {
		b = pfAnnot(b, "tag", pfDAUint, x.Tag, nil)
	}
	if len(x.Handles) > 0 {
		h := s.scratch[:0]
		for i, a := range x.Handles {
			if i > 0 {
				h = append(h, ' ')
			}
			h = strconv.AppendUint(h, a.Handle, 10)
			h = append(h, ':')
			h = append(h, ModeString(a.Mode)...)
			h = append(h, ':')
			h = strconv.AppendUint(h, a.Size, 10)
			if a.Name != "" {
				h = append(h, ':')
				h = append(h, a.Name...)
			}
		}
		s.scratch = h
		b = pfAnnot(b, "handles", pfDAString, 0, h)
	}
	return b
}

// pfAnnot appends a TrackEvent debug annotation named name: a varint v in
// field (bool, uint or int value), or str as the string value.
func pfAnnot(b []byte, name string, field protowire.Number, v uint64, str []byte) []byte {
	n := protowire.SizeTag(pfDAName) + protowire.SizeBytes(len(name)) + protowire.SizeTag(field)
	if field == pfDAString {
		n += protowire.SizeBytes(len(str))
	} else {
		n += protowire.SizeVarint(v)
	}
	b = protowire.AppendTag(b, pfTEAnnotations, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, pfDAName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	if field == pfDAString {
		b = protowire.AppendTag(b, field, protowire.BytesType)
		return protowire.AppendBytes(b, str)
	}
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// ConvertPerfetto reads a trace from r and writes it to w as a Perfetto
// protobuf trace. A native trace streams: memory holds the tasks
// submitted and not yet run at each point, the workers' and handles'
// state, and a fixed window of slices (see the header), whatever the
// run's length; one cut short converts up to its last whole record. A
// JSON document is read whole first (Read) and written as WritePerfetto
// does.
func ConvertPerfetto(w io.Writer, r io.Reader) error {
	return newPfConverter(w, pfWindow).convert(r)
}

// newPfConverter is a converter to w holding window slices.
func newPfConverter(w io.Writer, window int) *pfConverter {
	c := &pfConverter{s: newPfSink(w, window), tasks: map[uint64]*pfTask{}, names: map[uint64]string{}, exited: map[string]bool{}}
	c.st = newStateDeriver(c.s.state)
	return c
}

// convert reads the trace in r and writes it.
func (c *pfConverter) convert(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<16)
	version := 0
	if head, err := br.Peek(len(Magic)); err == nil {
		version = nativeVersion(head)
	}
	if version == 0 {
		t, err := Read(br)
		if err != nil {
			return err
		}
		return t.writePerfetto(c.s)
	}
	if _, err := br.Discard(len(Magic)); err != nil {
		return err
	}
	if _, err := binary.ReadVarint(br); err != nil { // the wall clock of time 0
		return fmt.Errorf("%w: %w", errCorrupt, truncated(err))
	}
	if err := c.consume(br, version); err != nil && !errors.Is(err, errTruncated) {
		return err
	}
	return c.finish()
}

// pfConverter reads native records in order into a pfSink.
type pfConverter struct {
	s      *pfSink
	st     *stateDeriver
	names  map[uint64]string
	tasks  map[uint64]*pfTask
	free   []*pfTask
	exited map[string]bool // plugins whose next start is a restart
	// maxTasks is the most tasks held at once (for the tests).
	maxTasks int
	// probe, when set, is called every probeEvery records (for the
	// tests' memory measurements).
	probe      func()
	probeEvery int
}

// pending is task id, submitted and not run yet, made on its first
// record from a free one.
func (c *pfConverter) pending(id uint64) *pfTask {
	p := c.tasks[id]
	if p == nil {
		if n := len(c.free); n > 0 {
			p, c.free = c.free[n-1], c.free[:n-1]
			iter, hs, team, flows := p.Iter[:0], p.Handles[:0], p.Team[:0], p.flows[:0]
			*p = pfTask{Task: newTask(id), flows: flows}
			p.Iter, p.Handles, p.Team = iter, hs, team
		} else {
			p = &pfTask{Task: newTask(id)}
		}
		c.tasks[id] = p
		c.maxTasks = max(c.maxTasks, len(c.tasks))
	}
	return p
}

// done forgets p, written: its memory serves the next task.
func (c *pfConverter) done(p *pfTask) {
	delete(c.tasks, p.ID)
	c.free = append(c.free, p)
}

// ranNowhere writes p, which will not run, and takes back the flows to it.
func (c *pfConverter) ranNowhere(p *pfTask) {
	c.s.unflow(p.flows)
	c.s.nowhere(&p.Task)
	c.done(p)
}

// consume converts the records of a native trace of the given version
// until the end of br.
func (c *pfConverter) consume(br io.ByteReader, version int) error {
	r := newReader(br, version)
	for n := 1; ; n++ {
		if c.probe != nil && n%c.probeEvery == 0 {
			c.probe()
		}
		k, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch k {
		case kindName:
			id := r.u()
			c.names[id] = r.str()
		case kindCursor:
			r.cursor()
		case kindHandle:
			r.handle(c.names)
		case kindSubmit, kindRepeat, kindRepeatTag:
			p := c.pending(r.submitID(k))
			r.submission(k, &p.Task, c.names)
			p.Submitted = true
			c.st.seen(p.Submit)
		case kindReady:
			p := c.pending(r.u())
			p.Ready = r.time()
			c.st.seen(p.Ready)
		case kindRun, kindRunNext:
			p := c.pending(r.runID(k))
			r.run(k, &p.Task)
			if r.err == nil {
				c.st.run(&p.Task)
				c.s.task(&p.Task, p.flows)
				c.done(p)
			}
		case kindEdge, kindEdgeRun, kindHop:
			from, to, w, s, e := r.edge(k)
			if r.err != nil {
				break
			}
			if q := c.tasks[from]; w < 0 && q != nil && q.Submitted && !q.Ran {
				// A task releases its successors once it has run or,
				// when it runs nowhere, terminated: this one is over.
				c.ranNowhere(q)
			}
			if w >= 0 {
				p := c.pending(to)
				p.flows = append(p.flows, c.s.flow(from, int(w), s, e))
				if k == kindHop {
					p.Ready = e
					c.st.seen(e)
				}
			}
		case kindXfer:
			x := Transfer{Src: int(r.u()), Dst: int(r.u()), Bytes: r.u(), Handle: r.u(), Start: r.i(), End: r.i()}
			x.Failed = r.u()&flagFailed != 0
			if r.err == nil {
				c.st.transfer(x)
				c.s.transfer(x)
			}
		case kindWorker:
			w := Worker{ID: int(r.u()), Node: int(r.i()), Arch: r.str()}
			w.Name = r.str()
			if r.err == nil {
				c.st.worker(w)
				c.s.worker(w)
			}
		case kindNode:
			n := Node{ID: int(r.u()), Name: r.str()}
			if r.err == nil {
				c.s.nodes = putNode(c.s.nodes, n)
			}
		case kindPlugin:
			p := r.plugin(c.names)
			if r.err == nil {
				switch p.Kind {
				case PluginExit:
					c.exited[p.Name] = true
				case PluginStart:
					if c.exited[p.Name] {
						p.Kind, c.exited[p.Name] = PluginRestart, false
					}
				}
				c.s.plugin(p)
			}
		case kindComm:
			x := r.comm()
			if r.err == nil {
				c.s.comm(x)
			}
		case kindEnd:
		default:
			return fmt.Errorf("%w: unknown record kind %d", errCorrupt, k)
		}
		if r.err != nil {
			return r.err
		}
		if c.s.pw.err != nil {
			return c.s.pw.err // the writer failed: stop reading
		}
	}
}

// finish writes the tasks that never ran, in job order, the workers'
// last states and what the window holds.
func (c *pfConverter) finish() error {
	var left []*pfTask
	for _, p := range c.tasks {
		if p.Submitted {
			left = append(left, p)
		}
	}
	sort.Slice(left, func(i, j int) bool { return left[i].ID < left[j].ID })
	for _, p := range left {
		c.ranNowhere(p)
	}
	c.st.finish()
	return c.s.close()
}

// WritePerfetto writes t as a Perfetto protobuf trace, through the
// writer ConvertPerfetto streams into: t's tasks, states, transfers and
// events are given to it in the order a native trace would have them (by
// end time), each task's flows after it.
func (t *Trace) WritePerfetto(w io.Writer) error { return t.writePerfetto(newPfSink(w, pfWindow)) }

func (t *Trace) writePerfetto(s *pfSink) error {
	s.nodes = append(s.nodes, t.Nodes...)
	for _, wk := range t.Workers {
		s.worker(wk)
	}
	// An item is one thing to give the sink, at a time; at equal times a
	// state goes before the task that follows it.
	type item struct {
		at    int64
		state bool
		do    func()
	}
	var items []item
	byID := make(map[uint64]*Task, len(t.Tasks))
	for _, x := range t.Tasks {
		byID[x.ID] = x
	}
	succs := map[uint64][]uint64{}
	for _, x := range t.Tasks {
		for _, p := range x.Preds {
			if q := byID[p]; x.Ran && q != nil && q.Ran {
				succs[p] = append(succs[p], x.ID)
			}
		}
	}
	flows := map[uint64][]pfFlow{}
	for _, x := range t.Tasks {
		switch {
		case x.Ran:
			items = append(items, item{at: x.End, do: func() {
				s.task(x, flows[x.ID])
				delete(flows, x.ID)
				for _, succ := range succs[x.ID] {
					flows[succ] = append(flows[succ], s.flow(x.ID, x.Worker, x.Start, x.End))
				}
			}})
		case x.Submitted:
			at := x.Submit
			if x.Ready != 0 {
				at = x.Ready
			}
			items = append(items, item{at: at, do: func() { s.nowhere(x) }})
		}
	}
	for _, st := range t.States {
		items = append(items, item{at: st.End, state: true, do: func() { s.state(st) }})
	}
	for _, x := range t.Transfers {
		items = append(items, item{at: x.End, do: func() { s.transfer(x) }})
	}
	for _, p := range t.Plugins {
		items = append(items, item{at: p.Time, do: func() { s.plugin(p) }})
	}
	for _, c := range t.Comms {
		items = append(items, item{at: c.End, do: func() { s.comm(c) }})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].at != items[j].at {
			return items[i].at < items[j].at
		}
		return items[i].state && !items[j].state
	})
	for _, it := range items {
		it.do()
		if s.pw.err != nil {
			return s.pw.err
		}
	}
	return s.close()
}

// pfWriter encodes packets.
type pfWriter struct {
	bw      *bufio.Writer
	names   map[string]uint64
	started bool // the first packet, which clears the incremental state, is out
	hdr     []byte
	pkt     []byte
	msg     []byte
	sub     []byte
	err     error
}

// packet writes pkt as one TracePacket of the Trace.
func (pw *pfWriter) packet() {
	if pw.err != nil {
		return
	}
	h := protowire.AppendTag(pw.hdr[:0], pfTracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(pw.pkt)))
	pw.hdr = h
	if _, err := pw.bw.Write(h); err != nil {
		pw.err = err
		return
	}
	if _, err := pw.bw.Write(pw.pkt); err != nil {
		pw.err = err
	}
}

// seq starts a packet on the sequence; the first clears its incremental
// state (the interned names).
func (pw *pfWriter) seq(flags uint64) {
	pw.pkt = protowire.AppendTag(pw.pkt[:0], pfSequenceID, protowire.VarintType)
	pw.pkt = protowire.AppendVarint(pw.pkt, pfSequence)
	if !pw.started {
		pw.started = true
		flags |= pfSeqCleared
	}
	if flags != 0 {
		pw.pkt = protowire.AppendTag(pw.pkt, pfSequenceFlags, protowire.VarintType)
		pw.pkt = protowire.AppendVarint(pw.pkt, flags)
	}
}

// track writes a TrackDescriptor, at time 0 (before any event); pid > 0
// makes it a process track.
func (pw *pfWriter) track(uuid, parent uint64, name string, pid int) {
	pw.seq(0)
	pw.pkt = protowire.AppendTag(pw.pkt, pfTimestamp, protowire.VarintType)
	pw.pkt = protowire.AppendVarint(pw.pkt, 0)
	m := protowire.AppendTag(pw.msg[:0], pfTDUUID, protowire.VarintType)
	m = protowire.AppendVarint(m, uuid)
	if parent != 0 {
		m = protowire.AppendTag(m, pfTDParent, protowire.VarintType)
		m = protowire.AppendVarint(m, parent)
	}
	if pid > 0 {
		p := protowire.AppendTag(pw.sub[:0], pfPDPid, protowire.VarintType)
		p = protowire.AppendVarint(p, uint64(pid))
		p = protowire.AppendTag(p, pfPDName, protowire.BytesType)
		p = protowire.AppendString(p, name)
		m = protowire.AppendTag(m, pfTDProcess, protowire.BytesType)
		m = protowire.AppendBytes(m, p)
		pw.sub = p
	} else {
		m = protowire.AppendTag(m, pfTDName, protowire.BytesType)
		m = protowire.AppendString(m, name)
	}
	pw.msg = m
	pw.pkt = protowire.AppendTag(pw.pkt, pfTrackDescriptor, protowire.BytesType)
	pw.pkt = protowire.AppendBytes(pw.pkt, m)
	pw.packet()
}

// event writes a TrackEvent packet, interning its name (an END has
// none); annots are encoded debug_annotations fields.
func (pw *pfWriter) event(ts int64, track, typ uint64, name, cat string, annots []byte, flows, ends []uint64) {
	var iid uint64
	var fresh bool
	if typ != pfSliceEnd {
		iid = pw.names[name]
		if iid == 0 {
			iid = uint64(len(pw.names) + 1)
			pw.names[name] = iid
			fresh = true
		}
	}
	pw.seq(pfSeqNeeds)
	pw.pkt = protowire.AppendTag(pw.pkt, pfTimestamp, protowire.VarintType)
	pw.pkt = protowire.AppendVarint(pw.pkt, uint64(max(ts, 0)))
	if fresh {
		n := protowire.AppendTag(pw.sub[:0], pfENIID, protowire.VarintType)
		n = protowire.AppendVarint(n, iid)
		n = protowire.AppendTag(n, pfENName, protowire.BytesType)
		n = protowire.AppendString(n, name)
		d := protowire.AppendTag(pw.msg[:0], pfIDEventNames, protowire.BytesType)
		d = protowire.AppendBytes(d, n)
		pw.pkt = protowire.AppendTag(pw.pkt, pfInternedData, protowire.BytesType)
		pw.pkt = protowire.AppendBytes(pw.pkt, d)
		pw.sub, pw.msg = n, d
	}
	m := protowire.AppendTag(pw.msg[:0], pfTEType, protowire.VarintType)
	m = protowire.AppendVarint(m, typ)
	m = protowire.AppendTag(m, pfTETrackUUID, protowire.VarintType)
	m = protowire.AppendVarint(m, track)
	if typ != pfSliceEnd {
		m = protowire.AppendTag(m, pfTENameIID, protowire.VarintType)
		m = protowire.AppendVarint(m, iid)
		m = protowire.AppendTag(m, pfTECategories, protowire.BytesType)
		m = protowire.AppendString(m, cat)
	}
	m = append(m, annots...)
	for _, f := range flows {
		m = protowire.AppendTag(m, pfTEFlowIDs, protowire.Fixed64Type)
		m = protowire.AppendFixed64(m, f)
	}
	for _, f := range ends {
		m = protowire.AppendTag(m, pfTETerminateIDs, protowire.Fixed64Type)
		m = protowire.AppendFixed64(m, f)
	}
	pw.msg = m
	pw.pkt = protowire.AppendTag(pw.pkt, pfTrackEvent, protowire.BytesType)
	pw.pkt = protowire.AppendBytes(pw.pkt, m)
	pw.packet()
}

// convertPerfettoFile turns the native trace in path into a Perfetto
// trace, streaming, through a temporary file renamed over it; on failure
// the native trace stays.
func convertPerfettoFile(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("convert to Perfetto (the native trace is left): %w", err)
	}
	defer in.Close()
	return replaceFile(path, "Perfetto", func(w io.Writer) error { return ConvertPerfetto(w, in) })
}

// replaceFile writes path anew through write, via a temporary file in the
// same directory renamed over it, keeping its permissions.
func replaceFile(path, what string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("convert to %s (the native trace is left): %w", what, err)
	}
	bw := bufio.NewWriterSize(tmp, chunkSize)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		if st, serr := os.Stat(path); serr == nil {
			err = tmp.Chmod(st.Mode().Perm())
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("convert to %s (the native trace is left): %w", what, err)
	}
	return nil
}
