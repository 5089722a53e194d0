package trace

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// pfField is one decoded protobuf field.
type pfField struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

// pfDecode splits a message into its fields, failing on malformed input.
// (Not a t.Helper: it runs millions of times in the long test.)
func pfDecode(t testing.TB, b []byte) []pfField {
	out := make([]pfField, 0, 8)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		f := pfField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			t.Fatalf("field %d: unexpected wire type %d", num, typ)
		}
		if n < 0 {
			t.Fatalf("field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
		out = append(out, f)
	}
	return out
}

func pfGet(fs []pfField, num protowire.Number) (pfField, bool) {
	for _, f := range fs {
		if f.num == num {
			return f, true
		}
	}
	return pfField{}, false
}

// pfEv is a TrackEvent as decoded.
type pfEv struct {
	ts          int64
	track       uint64
	typ         uint64
	name, cat   string
	job         uint64 // its "job" annotation, 0 none
	flows, ends []uint64
}

// pfOut is a slice or instant as trace processor builds it.
type pfOut struct {
	row        string // its track's name less a lane's " #N"
	name, cat  string
	start, end int64
	job        uint64
	instant    bool
}

// pfSummary is what checkPerfetto found in a Perfetto trace.
type pfSummary struct {
	tracks  map[uint64]string // uuid -> name
	slices  map[string]int    // "track name/event name" -> complete slices
	instant int
	// out holds the slices and instants in trace processor's order;
	// pairs the flows, as the job numbers of their two slices, earlier
	// first; dangling the jobs of slices whose flow nothing ends.
	out      []pfOut
	pairs    [][2]uint64
	dangling []uint64
	// taskOrder is the job numbers of the task slices in file order.
	taskOrder []uint64
}

// checkPerfetto decodes a Perfetto trace, checks the order the writer
// promises (perfetto.go's header) and builds it as trace processor does.
// In file order: every packet on the one sequence, the first clearing the
// incremental state, every track described before its events and its
// parent before it, every name interned before use, and on each track
// the BEGIN and END events in time order. Then, like trace processor
// (events stably sorted by timestamp; per track a BEGIN opens a slice, an
// END closes it, an instant nests in what is open): no slice opens inside
// another on one track (the lanes), only flow anchors nest, and every
// flow that ends started.
func checkPerfetto(t testing.TB, data []byte) pfSummary {
	t.Helper()
	s := pfSummary{tracks: map[uint64]string{}, slices: map[string]int{}}
	names := map[uint64]string{}
	strs := map[string]string{}
	intern := func(b []byte) string {
		if v, ok := strs[string(b)]; ok {
			return v
		}
		v := string(b)
		strs[v] = v
		return v
	}
	lastBE := map[uint64]int64{}
	var evs []pfEv
	for i, p := range pfDecode(t, data) {
		if p.num != pfTracePacket || p.typ != protowire.BytesType {
			t.Fatalf("Trace field %d, want packets (1)", p.num)
		}
		pkt := pfDecode(t, p.b)
		if f, ok := pfGet(pkt, pfSequenceID); !ok || f.v != pfSequence {
			t.Fatalf("packet %d: not on sequence %d", i, pfSequence)
		}
		flags, _ := pfGet(pkt, pfSequenceFlags)
		if i == 0 && flags.v&pfSeqCleared == 0 {
			t.Fatal("the first packet does not clear the incremental state")
		}
		if td, ok := pfGet(pkt, pfTrackDescriptor); ok {
			fs := pfDecode(t, td.b)
			uuid, _ := pfGet(fs, pfTDUUID)
			name := ""
			if n, ok := pfGet(fs, pfTDName); ok {
				name = string(n.b)
			}
			if pd, ok := pfGet(fs, pfTDProcess); ok {
				pn, _ := pfGet(pfDecode(t, pd.b), pfPDName)
				name = string(pn.b)
			}
			if par, ok := pfGet(fs, pfTDParent); ok {
				if _, ok := s.tracks[par.v]; !ok {
					t.Fatalf("track %d (%s) has parent %d, not described before", uuid.v, name, par.v)
				}
			}
			if _, dup := s.tracks[uuid.v]; dup {
				t.Fatalf("track %d described twice", uuid.v)
			}
			s.tracks[uuid.v] = name
			continue
		}
		te, ok := pfGet(pkt, pfTrackEvent)
		if !ok {
			t.Fatalf("packet %d holds neither a track nor an event", i)
		}
		if flags.v&pfSeqNeeds == 0 {
			t.Fatalf("packet %d: an event with interned names does not say it needs the incremental state", i)
		}
		if id, ok := pfGet(pkt, pfInternedData); ok {
			for _, en := range pfDecode(t, id.b) {
				fs := pfDecode(t, en.b)
				iid, _ := pfGet(fs, pfENIID)
				n, _ := pfGet(fs, pfENName)
				if _, dup := names[iid.v]; dup {
					t.Fatalf("name %d interned twice", iid.v)
				}
				names[iid.v] = string(n.b)
			}
		}
		ts, ok := pfGet(pkt, pfTimestamp)
		if !ok {
			t.Fatalf("packet %d: an event without a timestamp", i)
		}
		e := pfEv{ts: int64(ts.v)}
		for _, f := range pfDecode(t, te.b) {
			switch f.num {
			case pfTETrackUUID:
				e.track = f.v
			case pfTEType:
				e.typ = f.v
			case pfTENameIID:
				n, ok := names[f.v]
				if !ok {
					t.Fatalf("packet %d names %d, not interned", i, f.v)
				}
				e.name = n
			case pfTECategories:
				e.cat = intern(f.b)
			case pfTEFlowIDs:
				e.flows = append(e.flows, f.v)
			case pfTETerminateIDs:
				e.ends = append(e.ends, f.v)
			case pfTEAnnotations:
				fs := pfDecode(t, f.b)
				if n, _ := pfGet(fs, pfDAName); string(n.b) == "job" {
					v, _ := pfGet(fs, pfDAUint)
					e.job = v.v
				}
			}
		}
		track, ok := s.tracks[e.track]
		if !ok {
			t.Fatalf("event on track %d, not described", e.track)
		}
		if e.typ != pfSliceEnd && e.name == "" {
			t.Fatalf("packet %d: an event without a name", i)
		}
		if e.typ == pfSliceBegin || e.typ == pfSliceEnd {
			if last, ok := lastBE[e.track]; ok && e.ts < last {
				t.Fatalf("track %s: a slice's events go back from %d to %d in the file", track, last, e.ts)
			}
			lastBE[e.track] = e.ts
		}
		if e.typ == pfSliceBegin && e.cat == "task" {
			s.taskOrder = append(s.taskOrder, e.job)
		}
		evs = append(evs, e)
	}
	// As trace processor: sorted by time, stably.
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].ts < evs[j].ts })
	open := map[uint64]int{} // track -> its open slice in s.out, if any
	active := map[uint64]int{}
	flowAt := func(k int, e *pfEv) {
		for _, id := range e.flows {
			if prev, ok := active[id]; ok {
				s.pairs = append(s.pairs, pair(&s.out[prev], &s.out[k]))
			}
			active[id] = k
		}
		for _, id := range e.ends {
			prev, ok := active[id]
			if !ok {
				t.Fatalf("flow %d ends at %s (job %d) before it starts", id, e.name, e.job)
			}
			s.pairs = append(s.pairs, pair(&s.out[prev], &s.out[k]))
			delete(active, id)
		}
	}
	for i := range evs {
		e := &evs[i]
		track := s.tracks[e.track]
		row, _, _ := strings.Cut(track, " #")
		switch e.typ {
		case pfSliceBegin:
			if k, ok := open[e.track]; ok {
				t.Fatalf("track %s: %s at %d begins inside %s", track, e.name, e.ts, s.out[k].name)
			}
			open[e.track] = len(s.out)
			s.out = append(s.out, pfOut{row: row, name: e.name, cat: e.cat, start: e.ts, job: e.job})
			flowAt(len(s.out)-1, e)
		case pfSliceEnd:
			k, ok := open[e.track]
			if !ok {
				t.Fatalf("track %s: a slice ends at %d that did not begin", track, e.ts)
			}
			delete(open, e.track)
			s.out[k].end = e.ts
			s.slices[track+"/"+s.out[k].name]++
		case pfInstant:
			if k, ok := open[e.track]; ok && e.cat != "dep" {
				t.Fatalf("track %s: instant %s nests in %s", track, e.name, s.out[k].name)
			}
			s.instant++
			s.out = append(s.out, pfOut{row: row, name: e.name, cat: e.cat, start: e.ts, end: e.ts, job: e.job, instant: true})
			flowAt(len(s.out)-1, e)
		default:
			t.Fatalf("event type %d", e.typ)
		}
	}
	for tr, k := range open {
		t.Errorf("track %s: %s never ends", s.tracks[tr], s.out[k].name)
	}
	for _, k := range active {
		s.dangling = append(s.dangling, s.out[k].job)
	}
	return s
}

// pair is a flow between two slices, as their jobs, earlier first (as
// trace processor orders them).
func pair(a, b *pfOut) [2]uint64 {
	if b.start < a.start {
		a, b = b, a
	}
	return [2]uint64{a.job, b.job}
}

// pfSet is a multiset of strings: counted and hashed, and kept when
// small so that a difference can be shown.
type pfSet struct {
	n   int
	sum uint64
	m   map[string]int
}

func (p *pfSet) add(k string) {
	h := fnv.New64a()
	h.Write([]byte(k))
	p.n++
	p.sum += h.Sum64()
	if p.m != nil {
		p.m[k]++
	}
}

// pk is a multiset key: parts joined by "|".
func pk(parts ...any) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('|')
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}

// pfSets is what a Perfetto trace should hold, by kind.
type pfSets map[string]*pfSet

func (ps pfSets) add(kind, k string, detail bool) {
	p := ps[kind]
	if p == nil {
		p = &pfSet{}
		if detail {
			p.m = map[string]int{}
		}
		ps[kind] = p
	}
	p.add(k)
}

// wantPerfetto is what a Perfetto trace of tr should hold: each task
// (a team's on each member), state, transfer, communication, plugin
// event and flow once.
func wantPerfetto(tr *Trace, detail bool) pfSets {
	ps := pfSets{}
	wname := map[int]string{}
	for _, w := range tr.Workers {
		wname[w.ID] = w.Name
	}
	byID := map[uint64]*Task{}
	for _, x := range tr.Tasks {
		byID[x.ID] = x
	}
	for _, x := range tr.Tasks {
		name := x.Name
		if name == "" {
			name = "task"
		}
		switch {
		case x.Ran:
			ps.add("task", pk(wname[x.Worker], name, x.Start, x.End, x.ID), detail)
			if len(x.Team) > 1 {
				for _, w := range x.Team[1:] {
					ps.add("task", pk(wname[w], x.memberName(), x.Start, x.End, x.ID), detail)
				}
			}
			for _, p := range x.Preds {
				if q := byID[p]; q != nil && q.Ran {
					ps.add("flow", pk(p, x.ID), detail)
				}
			}
		case x.Submitted:
			t := x.Submit
			if x.Ready != 0 {
				t = x.Ready
			}
			ps.add("task", pk("tasks that ran nowhere", name, t, t, x.ID), detail)
		}
	}
	for _, st := range tr.States {
		ps.add("state", pk(wname[st.Worker], st.Kind, st.Start, st.End), detail)
	}
	for _, x := range tr.Transfers {
		ps.add("transfer", pk(tr.NodeName(x.Src)+" -> "+tr.NodeName(x.Dst), x.Start, x.End), detail)
	}
	for _, c := range tr.Comms {
		ps.add("comm", pk("rank "+strconv.Itoa(c.Peer), commName(c), c.Start, c.End), detail)
	}
	for _, p := range tr.Plugins {
		ps.add("plugin", pk(p.Name, p.Kind.String()+" "+p.Name, p.Time), detail)
	}
	return ps
}

// gotPerfetto is wantPerfetto's view of a decoded trace.
func gotPerfetto(s pfSummary, detail bool) pfSets {
	ps := pfSets{}
	for _, o := range s.out {
		switch o.cat {
		case "task":
			ps.add("task", pk(o.row, o.name, o.start, o.end, o.job), detail)
		case "state":
			ps.add("state", pk(o.row, o.name, o.start, o.end), detail)
		case "transfer":
			ps.add("transfer", pk(o.row, o.start, o.end), detail)
		case "comm":
			ps.add("comm", pk(o.row, o.name, o.start, o.end), detail)
		case "plugin":
			ps.add("plugin", pk(o.row, o.name, o.start), detail)
		}
	}
	for _, p := range s.pairs {
		ps.add("flow", pk(p[0], p[1]), detail)
	}
	return ps
}

// comparePerfetto reports the kinds in which got and want differ.
func comparePerfetto(t testing.TB, got, want pfSets) {
	t.Helper()
	for _, kind := range []string{"task", "state", "transfer", "comm", "plugin", "flow"} {
		g, w := got[kind], want[kind]
		if g == nil {
			g = &pfSet{}
		}
		if w == nil {
			w = &pfSet{}
		}
		if g.n == w.n && g.sum == w.sum {
			continue
		}
		t.Errorf("%s: %d in the trace, want %d (or not the same ones)", kind, g.n, w.n)
		for k, n := range w.m {
			if g.m[k] != n {
				t.Errorf("  %s %q: %d, want %d", kind, k, g.m[k], n)
			}
		}
		for k, n := range g.m {
			if _, ok := w.m[k]; !ok {
				t.Errorf("  %s %q: %d, want none", kind, k, n)
			}
		}
	}
}

func TestWritePerfetto(t *testing.T) {
	s, f := testStream(t)
	record(s)
	if err := s.Close(testWorkers, testNodes); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(bytes.NewReader(f.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// Both ways: streaming, and read whole then written (what a JSON
	// document gets).
	for _, p := range []struct {
		name    string
		convert func(w io.Writer, native []byte) error
	}{
		{"stream", func(w io.Writer, native []byte) error { return ConvertPerfetto(w, bytes.NewReader(native)) }},
		{"in memory", func(w io.Writer, native []byte) error {
			tr, err := Read(bytes.NewReader(native))
			if err != nil {
				return err
			}
			return tr.WritePerfetto(w)
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := p.convert(&b, f.Bytes()); err != nil {
				t.Fatal(err)
			}
			got := checkPerfetto(t, b.Bytes())
			comparePerfetto(t, gotPerfetto(got, true), wantPerfetto(tr, true))
			for _, k := range []string{"w0/a", "w1/b[0]", "w0/scheduling", "w1/fetching", "RAM -> opencl_0/transfer", "rank 1/send to 1"} {
				if got.slices[k] != 1 {
					t.Errorf("%d slices %s, want 1: %v", got.slices[k], k, got.slices)
				}
			}
			// Three plugin events and the task that ran nowhere; the
			// edge 1 -> 2 (1 -> 3 goes to a task that ran nowhere).
			if got.instant != 4 || len(got.pairs) != 1 || len(got.dangling) != 0 {
				t.Errorf("%d instants, flows %v, dangling %v; want 4, [[1 2]], none", got.instant, got.pairs, got.dangling)
			}
			var tracks []string
			for _, n := range got.tracks {
				tracks = append(tracks, n)
			}
			for _, n := range []string{"starpu workers", "bus", "plugin processes", "driver-cpu", "communications", "tasks that ran nowhere"} {
				if !strings.Contains(strings.Join(tracks, "|"), n) {
					t.Errorf("no track %q among %v", n, tracks)
				}
			}
			// A Perfetto file is not read back, and says so.
			if _, err := Read(bytes.NewReader(b.Bytes())); err == nil || !strings.Contains(err.Error(), "ui.perfetto.dev") {
				t.Errorf("Read of a Perfetto trace: %v", err)
			}
		})
	}
}

// TestPerfettoLanes: tasks that overlap on one worker (an asynchronous
// driver) go to a second track, so that no slice nests in another.
func TestPerfettoLanes(t *testing.T) {
	tr := &Trace{Workers: []Worker{{ID: 0, Name: "gpu"}}, Tasks: []*Task{
		ran(1, "k", 0, 0, 10), ran(2, "k", 0, 5, 15), ran(3, "k", 0, 10, 20), ran(4, "k", 0, 12, 13),
	}}
	for _, x := range tr.Tasks {
		x.Predicted, x.PredictedTransfer = -1, -1
	}
	var b bytes.Buffer
	if err := tr.WritePerfetto(&b); err != nil {
		t.Fatal(err)
	}
	got := checkPerfetto(t, b.Bytes())
	want := map[string]int{"gpu/k": 2, "gpu #2/k": 1, "gpu #3/k": 1}
	if fmt.Sprint(got.slices) != fmt.Sprint(want) {
		t.Errorf("slices %v, want %v", got.slices, want)
	}
}

// TestPerfettoPlace: a row deals slices to the first lane free by their
// start, and adds one when none is.
func TestPerfettoPlace(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ends       []int64
		start, end int64
		lane       int
	}{
		{name: "first lane free", ends: []int64{10, 5}, start: 10, end: 12, lane: 0},
		{name: "second lane free", ends: []int64{10, 5}, start: 7, end: 12, lane: 1},
		{name: "a new lane", ends: []int64{10, 5}, start: 4, end: 12, lane: 2},
		{name: "an end before its start takes no time", ends: []int64{10}, start: 10, end: 3, lane: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &pfRow{name: "w0", ends: append([]int64(nil), tc.ends...), uuids: make([]uint64, len(tc.ends))}
			lane := r.place(tc.start, tc.end)
			if lane != tc.lane || r.ends[lane] != max(tc.start, tc.end) || len(r.uuids) != len(r.ends) {
				t.Errorf("place: lane %d, ends %v; want lane %d", lane, r.ends, tc.lane)
			}
		})
	}
}

// TestPerfettoOrder: what the order rules are for. Ties at one timestamp
// on one worker (a state that begins as a task ends, tasks of no
// duration), an asynchronous worker, an edge read after its
// predecessor's slice was written: trace processor's sort must nest none
// of them wrongly, and the tasks are written in the order of their run
// records (by end), not sorted by start.
func TestPerfettoOrder(t *testing.T) {
	var f memFile
	s, err := NewStream(&f, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Worker{{ID: 0, Name: "cpu"}, {ID: 1, Name: "gpu"}}
	s.Describe(ws, nil)
	for id := uint64(1); id <= 8; id++ {
		s.Submit(&SubmitEvent{ID: id, Name: fmt.Sprint("t", id), Codelet: "k", Time: 0})
	}
	run := func(id uint64, w int32, start, end int64) Rec {
		return Rec{Kind: RecRun, ID: id, Worker: w, Start: start, End: end, Predicted: -1, PredictedTransfer: -1}
	}
	edge := func(from, to uint64, w int32, start, end int64) Rec {
		return Rec{Kind: RecEdge, ID: from, To: to, Worker: w, Start: start, End: end}
	}
	s.Ready(1, 5)
	s.Write([]Rec{run(1, 0, 10, 20), edge(1, 2, 0, 10, 20)}, nil)
	s.Ready(2, 20)
	s.Write([]Rec{run(2, 0, 20, 20), run(3, 0, 20, 20), edge(2, 4, 0, 20, 20)}, nil) // no duration, back to back
	// The gpu runs 5 and 6 at once; 6 ends first.
	s.Write([]Rec{run(6, 1, 12, 18), run(5, 1, 10, 30), edge(6, 7, 1, 12, 18)}, nil)
	s.Write([]Rec{run(4, 0, 25, 40), run(7, 0, 40, 50)}, nil)
	// 3's edge comes late (end dependencies): its slice was written.
	s.Write([]Rec{edge(3, 8, 0, 20, 20), run(8, 1, 50, 60)}, nil)
	if err := s.Close(ws, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(bytes.NewReader(f.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	c := newPfConverter(&b, 4) // a small window: 3's slice leaves it
	if err := c.convert(bytes.NewReader(f.Bytes())); err != nil {
		t.Fatal(err)
	}
	got := checkPerfetto(t, b.Bytes())
	comparePerfetto(t, gotPerfetto(got, true), wantPerfetto(tr, true))
	if want := []uint64{1, 2, 3, 6, 5, 4, 7, 8}; fmt.Sprint(got.taskOrder) != fmt.Sprint(want) {
		t.Errorf("tasks in the file %v, want the run records' order %v", got.taskOrder, want)
	}
	if c.s.anchors != 1 {
		t.Errorf("%d flows from an anchor, want 1 (3 -> 8)", c.s.anchors)
	}
	for _, want := range []string{"gpu #2/t5", "cpu/t2", "cpu/t3"} {
		if got.slices[want] != 1 {
			t.Errorf("no slice %s: %v", want, got.slices)
		}
	}
}

// failWriter fails every write.
type failWriter struct{}

var errDiskFull = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestConvertPerfettoInputs: what ConvertPerfetto does with a trace cut
// short, a JSON document, something else, and a writer that fails.
func TestConvertPerfettoInputs(t *testing.T) {
	s, f := testStream(t)
	record(s)
	if err := s.Close(testWorkers, testNodes); err != nil {
		t.Fatal(err)
	}
	native := f.Bytes()
	var js bytes.Buffer
	if err := ConvertChrome(&js, bytes.NewReader(native)); err != nil {
		t.Fatal(err)
	}
	// Cut in the middle of the last record (task 2's run: closed with no
	// workers, the end record follows it): task 2 is left submitted, not
	// run.
	var f2 memFile
	s2, err := NewStream(&f2, origin, 42)
	if err != nil {
		t.Fatal(err)
	}
	record(s2)
	if err := s2.Close(nil, nil); err != nil {
		t.Fatal(err)
	}
	cut := f2.Bytes()[:f2.Len()-3]
	for _, tc := range []struct {
		name string
		in   []byte
		w    io.Writer
		ran  int    // task slices
		err  string // what the error says
		is   error
	}{
		{name: "complete", in: native, ran: 2},
		{name: "cut short", in: cut, ran: 1},
		{name: "a JSON document", in: js.Bytes(), ran: 2},
		{name: "not a trace", in: []byte("hello"), err: "neither a native trace"},
		{name: "empty", in: nil, err: "empty file"},
		{name: "the writer fails", in: native, w: failWriter{}, err: "disk full", is: errDiskFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			w := tc.w
			if w == nil {
				w = &b
			}
			err := ConvertPerfetto(w, bytes.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || tc.is != nil && !errors.Is(err, tc.is) {
					t.Fatalf("ConvertPerfetto: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := checkPerfetto(t, b.Bytes())
			n := 0
			for _, o := range got.out {
				if o.cat == "task" && !o.instant {
					n++
				}
			}
			if n != tc.ran {
				t.Errorf("%d tasks ran, want %d", n, tc.ran)
			}
		})
	}
}

// TestCreatePerfetto: a .pftrace trace file is converted at Close.
func TestCreatePerfetto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.pftrace")
	s, err := Create(path, origin, 42)
	if err != nil {
		t.Fatal(err)
	}
	record(s)
	if err := s.Close(testWorkers, testNodes); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := checkPerfetto(t, data); got.slices["w0/a"] != 1 {
		t.Errorf("converted file lacks task a: %v", got.slices)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// longRun writes n tasks through a stream to path, as the engine would:
// four workers, the fourth asynchronous (two tasks at once), each task
// released by the previous one and by the one four before, submitted 64
// ahead; a copy every 10 tasks, a communication every 100, a plugin
// restart every 50000, a synchronisation task every 500 (it runs nowhere),
// and every 1000th task's edge to a late successor recorded 5000 tasks
// after it ran (end dependencies). It returns the jobs in the order of
// their run records and the number of late edges.
func longRun(t testing.TB, path string, n int) (runOrder []uint64, late int) {
	s, err := Create(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Worker{{ID: 0, Name: "cpu0"}, {ID: 1, Name: "cpu1"}, {ID: 2, Name: "cpu2"}, {ID: 3, Name: "cuda0", Node: 1}}
	nodes := []Node{{ID: 0, Name: "RAM"}, {ID: 1, Name: "cuda_0"}}
	s.Describe(ws, nodes)
	hs := []Access{{Handle: 1, Mode: ModeR | ModeW, Size: 4096, Name: "A"}, {Handle: 2, Mode: ModeR, Size: 64}}
	const ahead = 64
	lateBase := uint64(1) << 40 // the late successors' and sync tasks' jobs
	submit := func(id uint64, tt int64) {
		s.Submit(&SubmitEvent{ID: id, Name: "gemm", Codelet: "gemm", Time: tt, Handles: hs})
	}
	for i := 1; i <= ahead; i++ {
		submit(uint64(i), 0)
	}
	type lateEdge struct {
		from, to   uint64
		w          int32
		start, end int64
		at         int
	}
	var pending []lateEdge
	for i := 1; i <= n; i++ {
		id := uint64(i)
		tt := int64(i) * 100
		if i+ahead <= n {
			submit(id+ahead, tt)
		}
		w := int32(i % 4)
		start, end := tt+50, tt+350
		if w == 3 {
			end = tt + 750 // overlaps its next task, 400 later
		}
		s.Ready(id, tt)
		recs := []Rec{{Kind: RecRun, ID: id, Worker: w, Start: start, End: end, Predicted: -1, PredictedTransfer: -1}}
		runOrder = append(runOrder, id)
		for _, succ := range []uint64{id + 1, id + 4} {
			if succ <= uint64(n) {
				recs = append(recs, Rec{Kind: RecEdge, ID: id, To: succ, Worker: w, Start: start, End: end})
			}
		}
		if i%500 == 0 {
			sync := lateBase + id
			s.Submit(&SubmitEvent{ID: sync, Name: "sync", Time: tt})
			recs = append(recs, Rec{Kind: RecEdge, ID: id, To: sync, Worker: w, Start: start, End: end},
				Rec{Kind: RecEdge, ID: sync, To: lateBase + 1 + id, Worker: -1})
		}
		if i%1000 == 0 && i+5000 <= n {
			succ := lateBase + 2 + id
			s.Submit(&SubmitEvent{ID: succ, Name: "late", Codelet: "late", Time: tt})
			pending = append(pending, lateEdge{from: id, to: succ, w: w, start: start, end: end, at: i + 5000})
		}
		s.Write(recs, nil)
		if i%10 == 0 {
			s.Transfer(Transfer{Src: 0, Dst: 1, Bytes: 4096, Handle: 1, Start: tt, End: tt + 150 + int64(i%3)*100})
		}
		if i%100 == 0 {
			s.Comm(Comm{Send: i%200 == 0, Peer: 1 + i%3, Tag: int64(i), Bytes: 64, Start: tt, End: tt + 500})
		}
		if i%50000 == 0 {
			s.Plugin(tt, PluginExit, "driver-cuda", 100, "exited")
			s.Plugin(tt+1, PluginStart, "driver-cuda", 101, "")
		}
		for len(pending) > 0 && pending[0].at == i {
			e := pending[0]
			pending = pending[1:]
			late++
			s.Write([]Rec{{Kind: RecEdge, ID: e.from, To: e.to, Worker: e.w, Start: e.start, End: e.end},
				{Kind: RecRun, ID: e.to, Worker: 0, Start: tt + 10, End: tt + 20, Predicted: -1, PredictedTransfer: -1}}, nil)
			runOrder = append(runOrder, e.to)
		}
	}
	if err := s.Close(ws, nodes); err != nil {
		t.Fatal(err)
	}
	return runOrder, late
}

// TestPerfettoLong converts a run of 200000 tasks, streaming: the live
// heap stays flat (the converter holds no more for more tasks), and every
// task, state, transfer, communication, plugin event and flow of the
// trace is in the output once, in trace processor's view of it.
func TestPerfettoLong(t *testing.T) {
	if testing.Short() {
		t.Skip("a long run")
	}
	// make test runs this package under the race detector, ten times
	// slower (for one goroutine here): a shorter run there.
	n := 200_000
	if raceBuild() {
		n = 50_000
	}
	dir := t.TempDir()
	native := filepath.Join(dir, "run.trace")
	runOrder, late := longRun(t, native, n)
	in, err := os.Open(native)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	outPath := filepath.Join(dir, "run.pftrace")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	c := newPfConverter(out, pfWindow)
	// The live heap after a collection, every n/2 records (about a tenth
	// of the run): the first samples see the converter fill its window
	// and its pools, the later ones must not see it grow.
	var heap []uint64
	c.probeEvery = n / 2
	c.probe = func() {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		heap = append(heap, m.HeapAlloc)
	}
	if err := c.convert(in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if len(heap) < 8 {
		t.Fatalf("%d heap samples", len(heap))
	}
	// Reading the trace whole allocated 3 KB a task: 150 MB here at the
	// least.
	base, top := heap[2], heap[2]
	for _, h := range heap[2:] {
		top = max(top, h)
	}
	t.Logf("live heap every %d records (KiB): %v; %d tasks held at most, %d flows from anchors", c.probeEvery, kib(heap), c.maxTasks, c.s.anchors)
	if top > base+4<<20 {
		t.Errorf("live heap grew from %d to %d KiB converting %d tasks: %v", base>>10, top>>10, n, heap)
	}
	if c.maxTasks > 80 {
		t.Errorf("%d tasks held at once; the run has at most 64 submitted ahead, and the late ones", c.maxTasks)
	}
	if c.s.anchors != late || late < n/2000 {
		t.Errorf("%d flows from an anchor, want the %d late edges", c.s.anchors, late)
	}
	data, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	got := checkPerfetto(t, data)
	if fmt.Sprint(got.taskOrder) != fmt.Sprint(runOrder) {
		t.Errorf("the tasks are not in the file in the order of their run records")
	}
	tr, err := ReadFile(native)
	if err != nil {
		t.Fatal(err)
	}
	comparePerfetto(t, gotPerfetto(got, false), wantPerfetto(tr, false))
	if len(got.dangling) != 0 {
		t.Errorf("%d flows start and never end: %v", len(got.dangling), got.dangling[:min(len(got.dangling), 10)])
	}
	if got.slices["cuda0 #2/gemm"] == 0 {
		t.Errorf("the asynchronous worker has no second lane: %d tracks", len(got.tracks))
	}
}

func kib(v []uint64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = x >> 10
	}
	return out
}

// raceBuild says the test binary has the race detector.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// BenchmarkConvertPerfetto is the conversion of one task of a chain (its
// submit, ready, run and edge records) to Perfetto's protobuf, as Close
// does for a .pftrace file.
func BenchmarkConvertPerfetto(b *testing.B) {
	var f memFile
	s, err := NewStream(&f, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	hs := []Access{{Handle: 1, Mode: ModeR | ModeW, Size: 4}}
	for i := range b.N {
		task(s, uint64(i), hs)
	}
	if err := s.Close(nil, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := ConvertPerfetto(io.Discard, bytes.NewReader(f.Bytes())); err != nil {
		b.Fatal(err)
	}
}
