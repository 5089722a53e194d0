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
// the workers' states, transfers and communications are slices (a BEGIN
// and an END event); plugin events and tasks that ran nowhere are
// instants. Slices that overlap on one row (a driver running tasks
// asynchronously) go to extra lanes, child tracks named "ROW #2", ...:
// Perfetto nests slices on a track by time and would draw overlapping
// ones as wrongly nested. A dependency is a flow from the predecessor's
// slice to the successor's. Event names are interned (one sequence, its
// incremental state cleared by the first packet): a million tasks of
// four codelets name four strings.
//
// Timestamps are nanoseconds since the runtime's Init, on the trace's
// own clock (Perfetto's default, BOOTTIME, is only a label here).
// Packets come in time order across tracks, so that each track's are
// monotonic, a slice's END after its BEGIN.
//
// Rejected: streaming from the native records as ConvertChrome does.
// Perfetto wants a slice's BEGIN before its END on the sequence in time
// order, and the native trace writes a task once it has ended, in
// completion order; sorting needs the run in memory (about 200 bytes a
// task), which `starpu trace perfetto` and Shutdown's conversion accept.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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

// pfAnnot is one debug annotation.
type pfAnnot struct {
	name string
	kind byte // 'b', 'u', 'i', 's'
	u    uint64
	i    int64
	s    string
}

// pfEvent is one TrackEvent before encoding.
type pfEvent struct {
	ts          int64
	track       uint64
	typ         uint64
	name, cat   string
	annots      []pfAnnot
	flows, ends []uint64
}

// pfSlice is a slice or instant on a row, before lanes are assigned.
type pfSlice struct {
	start, end int64
	instant    bool
	name, cat  string
	annots     []pfAnnot
	flows      []uint64 // flows that start at this slice
	ends       []uint64 // flows that end here
}

// pfRow is one row of a group (a worker, a link): its lanes become
// tracks.
type pfRow struct {
	group  int
	name   string
	slices []pfSlice
}

// Track uuids: a group's process track is its pid; a row's lane l is
// rowBase + row*laneStride + l.
const (
	pfRowBase    = 1 << 16
	pfLaneStride = 1 << 10
)

var pfGroups = [...]string{1: "starpu workers", 2: "bus", 3: "tasks that ran nowhere", 4: "plugin processes", 5: "communications"}

// WritePerfetto writes t as a Perfetto protobuf trace.
func (t *Trace) WritePerfetto(w io.Writer) error {
	rows := t.perfettoRows()
	pw := &pfWriter{bw: bufio.NewWriterSize(w, chunkSize), names: map[string]uint64{}}
	// Tracks first: each group that has rows, then its rows' lanes.
	var evs [][]pfEvent
	used := map[int]bool{}
	for _, r := range rows {
		used[r.group] = true
	}
	for g := range pfGroups {
		if used[g] {
			pw.track(uint64(g), 0, pfGroups[g], g)
		}
	}
	for i, r := range rows {
		lanes := assignLanes(r.slices)
		for l := range lanes {
			name := r.name
			if l > 0 {
				name += " #" + strconv.Itoa(l+1)
			}
			uuid := uint64(pfRowBase + i*pfLaneStride + l)
			pw.track(uuid, uint64(r.group), name, 0)
			evs = append(evs, laneEvents(uuid, lanes[l]))
		}
	}
	// Then the events of every lane, merged by time: each lane's are in
	// order already.
	pos := make([]int, len(evs))
	for {
		best := -1
		for k, e := range evs {
			if pos[k] < len(e) && (best < 0 || e[pos[k]].ts < evs[best][pos[best]].ts) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		pw.event(&evs[best][pos[best]])
		pos[best]++
		if pw.err != nil {
			return pw.err
		}
	}
	if pw.err != nil {
		return pw.err
	}
	return pw.bw.Flush()
}

// perfettoRows gathers the rows and their slices.
func (t *Trace) perfettoRows() []pfRow {
	var rows []pfRow
	rowOf := map[[2]int]int{}
	row := func(group, key int, name string) *pfRow {
		k := [2]int{group, key}
		i, ok := rowOf[k]
		if !ok {
			i = len(rows)
			rowOf[k] = i
			rows = append(rows, pfRow{group: group, name: name})
		}
		return &rows[i]
	}
	for _, w := range t.Workers {
		row(1, w.ID, w.Name)
	}
	// Flows: one per dependency between two tasks that ran.
	byID := make(map[uint64]*Task, len(t.Tasks))
	for _, x := range t.Tasks {
		byID[x.ID] = x
	}
	starts := map[uint64][]uint64{}
	var flow uint64
	ends := map[uint64][]uint64{}
	for _, x := range t.Tasks {
		if !x.Ran {
			continue
		}
		for _, p := range x.Preds {
			if q := byID[p]; q != nil && q.Ran {
				flow++
				starts[p] = append(starts[p], flow)
				ends[x.ID] = append(ends[x.ID], flow)
			}
		}
	}
	for _, x := range t.Tasks {
		s := pfSlice{name: x.Name, cat: "task", annots: taskAnnots(x)}
		if s.name == "" {
			s.name = "task"
		}
		if x.Ran {
			s.start, s.end, s.flows, s.ends = x.Start, x.End, starts[x.ID], ends[x.ID]
			r := row(1, x.Worker, fmt.Sprintf("worker %d", x.Worker))
			r.slices = append(r.slices, s)
			continue
		}
		if x.Submitted {
			s.instant, s.start = true, x.Submit
			if x.Ready != 0 {
				s.start = x.Ready
			}
			r := row(3, 0, "tasks that ran nowhere")
			r.slices = append(r.slices, s)
		}
	}
	for _, st := range t.States {
		s := pfSlice{start: st.Start, end: st.End, name: st.Kind.String(), cat: "state"}
		if st.Task != 0 {
			s.annots = []pfAnnot{{name: "next", kind: 'u', u: st.Task}}
		}
		r := row(1, st.Worker, fmt.Sprintf("worker %d", st.Worker))
		r.slices = append(r.slices, s)
	}
	for _, x := range t.Transfers {
		s := pfSlice{start: x.Start, end: x.End, name: "transfer", cat: "transfer", annots: []pfAnnot{
			{name: "bytes", kind: 'u', u: x.Bytes}, {name: "handle", kind: 'u', u: x.Handle}}}
		if x.Failed {
			s.annots = append(s.annots, pfAnnot{name: "failed", kind: 'b', u: 1})
		}
		r := row(2, x.Src*256+x.Dst, t.NodeName(x.Src)+" -> "+t.NodeName(x.Dst))
		r.slices = append(r.slices, s)
	}
	pluginRow := map[string]int{}
	for _, p := range t.Plugins {
		k, ok := pluginRow[p.Name]
		if !ok {
			k = len(pluginRow)
			pluginRow[p.Name] = k
		}
		s := pfSlice{instant: true, start: p.Time, name: p.Kind.String() + " " + p.Name, cat: "plugin",
			annots: []pfAnnot{{name: "pid", kind: 'i', i: int64(p.Pid)}}}
		if p.Note != "" {
			s.annots = append(s.annots, pfAnnot{name: "note", kind: 's', s: p.Note})
		}
		r := row(4, k, p.Name)
		r.slices = append(r.slices, s)
	}
	for _, c := range t.Comms {
		s := pfSlice{start: c.Start, end: c.End, name: commName(c), cat: "comm", annots: []pfAnnot{
			{name: "tag", kind: 'i', i: c.Tag}, {name: "bytes", kind: 'u', u: c.Bytes}, {name: "handle", kind: 'u', u: c.Handle}}}
		if c.Failed {
			s.annots = append(s.annots, pfAnnot{name: "failed", kind: 'b', u: 1})
		}
		r := row(5, c.Peer, "rank "+strconv.Itoa(c.Peer))
		r.slices = append(r.slices, s)
	}
	return rows
}

// taskAnnots is what a task's slice says about it.
func taskAnnots(x *Task) []pfAnnot {
	a := []pfAnnot{{name: "job", kind: 'u', u: x.ID}}
	if x.Codelet != "" {
		a = append(a, pfAnnot{name: "codelet", kind: 's', s: x.Codelet})
	}
	if x.Submitted {
		a = append(a, pfAnnot{name: "submit_ns", kind: 'i', i: x.Submit})
	}
	if x.Ready != 0 {
		a = append(a, pfAnnot{name: "ready_ns", kind: 'i', i: x.Ready})
	}
	if x.Ran {
		a = append(a, pfAnnot{name: "footprint", kind: 's', s: strconv.FormatUint(uint64(x.Footprint), 16)})
	}
	if x.Predicted >= 0 {
		a = append(a, pfAnnot{name: "predicted_ns", kind: 'i', i: x.Predicted})
	}
	if x.PredictedTransfer >= 0 {
		a = append(a, pfAnnot{name: "predicted_transfer_ns", kind: 'i', i: x.PredictedTransfer})
	}
	if x.Posted {
		a = append(a, pfAnnot{name: "posted", kind: 'b', u: 1})
	}
	if x.Failed {
		a = append(a, pfAnnot{name: "failed", kind: 'b', u: 1})
	}
	if len(x.Iter) > 0 {
		a = append(a, pfAnnot{name: "iteration", kind: 'i', i: x.Iter[0]})
	}
	if x.HasTag {
		a = append(a, pfAnnot{name: "tag", kind: 'u', u: x.Tag})
	}
	if len(x.Handles) > 0 {
		var b strings.Builder
		for i, h := range x.Handles {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d:%s:%d", h.Handle, ModeString(h.Mode), h.Size)
			if h.Name != "" {
				b.WriteString(":" + h.Name)
			}
		}
		a = append(a, pfAnnot{name: "handles", kind: 's', s: b.String()})
	}
	return a
}

// assignLanes sorts a row's slices by start and deals them to lanes in
// which none overlaps another: the first lane whose last slice has ended.
func assignLanes(s []pfSlice) [][]pfSlice {
	sort.SliceStable(s, func(i, j int) bool { return s[i].start < s[j].start })
	var lanes [][]pfSlice
	var ends []int64
	for _, x := range s {
		end := x.end
		if x.instant {
			end = x.start
		}
		l := 0
		for l < len(lanes) && ends[l] > x.start {
			l++
		}
		if l == len(lanes) {
			lanes = append(lanes, nil)
			ends = append(ends, 0)
		}
		lanes[l] = append(lanes[l], x)
		ends[l] = max(end, x.start)
	}
	return lanes
}

// laneEvents turns a lane's slices, in order and not overlapping, into
// events in time order.
func laneEvents(track uint64, s []pfSlice) []pfEvent {
	out := make([]pfEvent, 0, 2*len(s))
	for _, x := range s {
		e := pfEvent{ts: x.start, track: track, typ: pfSliceBegin, name: x.name, cat: x.cat, annots: x.annots, flows: x.flows, ends: x.ends}
		if x.instant {
			e.typ = pfInstant
			out = append(out, e)
			continue
		}
		out = append(out, e, pfEvent{ts: max(x.end, x.start), track: track, typ: pfSliceEnd})
	}
	return out
}

// pfWriter encodes packets.
type pfWriter struct {
	bw      *bufio.Writer
	names   map[string]uint64
	started bool // the first packet, which clears the incremental state, is out
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
	var hdr [2 * binaryMaxVarint]byte
	h := protowire.AppendTag(hdr[:0], pfTracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(pw.pkt)))
	if _, err := pw.bw.Write(h); err != nil {
		pw.err = err
		return
	}
	if _, err := pw.bw.Write(pw.pkt); err != nil {
		pw.err = err
	}
}

const binaryMaxVarint = 10

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

// track writes a TrackDescriptor; pid > 0 makes it a process track.
func (pw *pfWriter) track(uuid, parent uint64, name string, pid int) {
	pw.seq(0)
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

// event writes a TrackEvent packet, interning its name.
func (pw *pfWriter) event(e *pfEvent) {
	var iid uint64
	var fresh bool
	if e.typ != pfSliceEnd {
		iid = pw.names[e.name]
		if iid == 0 {
			iid = uint64(len(pw.names) + 1)
			pw.names[e.name] = iid
			fresh = true
		}
	}
	pw.seq(pfSeqNeeds)
	pw.pkt = protowire.AppendTag(pw.pkt, pfTimestamp, protowire.VarintType)
	pw.pkt = protowire.AppendVarint(pw.pkt, uint64(max(e.ts, 0)))
	if fresh {
		n := protowire.AppendTag(pw.sub[:0], pfENIID, protowire.VarintType)
		n = protowire.AppendVarint(n, iid)
		n = protowire.AppendTag(n, pfENName, protowire.BytesType)
		n = protowire.AppendString(n, e.name)
		d := protowire.AppendTag(pw.msg[:0], pfIDEventNames, protowire.BytesType)
		d = protowire.AppendBytes(d, n)
		pw.pkt = protowire.AppendTag(pw.pkt, pfInternedData, protowire.BytesType)
		pw.pkt = protowire.AppendBytes(pw.pkt, d)
		pw.sub, pw.msg = n, d
	}
	m := protowire.AppendTag(pw.msg[:0], pfTEType, protowire.VarintType)
	m = protowire.AppendVarint(m, e.typ)
	m = protowire.AppendTag(m, pfTETrackUUID, protowire.VarintType)
	m = protowire.AppendVarint(m, e.track)
	if e.typ != pfSliceEnd {
		m = protowire.AppendTag(m, pfTENameIID, protowire.VarintType)
		m = protowire.AppendVarint(m, iid)
		m = protowire.AppendTag(m, pfTECategories, protowire.BytesType)
		m = protowire.AppendString(m, e.cat)
	}
	for _, a := range e.annots {
		d := protowire.AppendTag(pw.sub[:0], pfDAName, protowire.BytesType)
		d = protowire.AppendString(d, a.name)
		switch a.kind {
		case 'b':
			d = protowire.AppendTag(d, pfDABool, protowire.VarintType)
			d = protowire.AppendVarint(d, a.u)
		case 'u':
			d = protowire.AppendTag(d, pfDAUint, protowire.VarintType)
			d = protowire.AppendVarint(d, a.u)
		case 'i':
			d = protowire.AppendTag(d, pfDAInt, protowire.VarintType)
			d = protowire.AppendVarint(d, uint64(a.i))
		case 's':
			d = protowire.AppendTag(d, pfDAString, protowire.BytesType)
			d = protowire.AppendString(d, a.s)
		}
		pw.sub = d
		m = protowire.AppendTag(m, pfTEAnnotations, protowire.BytesType)
		m = protowire.AppendBytes(m, d)
	}
	for _, f := range e.flows {
		m = protowire.AppendTag(m, pfTEFlowIDs, protowire.Fixed64Type)
		m = protowire.AppendFixed64(m, f)
	}
	for _, f := range e.ends {
		m = protowire.AppendTag(m, pfTETerminateIDs, protowire.Fixed64Type)
		m = protowire.AppendFixed64(m, f)
	}
	pw.msg = m
	pw.pkt = protowire.AppendTag(pw.pkt, pfTrackEvent, protowire.BytesType)
	pw.pkt = protowire.AppendBytes(pw.pkt, m)
	pw.packet()
}

// convertPerfettoFile turns the native trace in path into a Perfetto
// trace, through a temporary file renamed over it; on failure the native
// trace stays.
func convertPerfettoFile(path string) error {
	t, err := ReadFile(path)
	if err != nil {
		return fmt.Errorf("convert to Perfetto (the native trace is left): %w", err)
	}
	return replaceFile(path, "Perfetto", t.WritePerfetto)
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
