package trace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
func pfDecode(t *testing.T, b []byte) []pfField {
	t.Helper()
	var out []pfField
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

// pfSummary is what the checks found in a Perfetto trace.
type pfSummary struct {
	tracks  map[uint64]string // uuid -> name
	slices  map[string]int    // "track name/event name" -> complete slices
	flows   int
	instant int
}

// checkPerfetto decodes a Perfetto trace and checks its structure: every
// packet on the one sequence, the first clearing the incremental state,
// every track described before use and its parent before it, every name
// interned before use, every slice's begin ended on its track, and
// timestamps monotonic per track.
func checkPerfetto(t *testing.T, data []byte) pfSummary {
	t.Helper()
	s := pfSummary{tracks: map[uint64]string{}, slices: map[string]int{}}
	names := map[uint64]string{}
	last := map[uint64]uint64{}
	open := map[uint64][]string{}
	flowStarts, flowEnds := map[uint64]bool{}, map[uint64]bool{}
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
		fs := pfDecode(t, te.b)
		tr, _ := pfGet(fs, pfTETrackUUID)
		track, ok := s.tracks[tr.v]
		if !ok {
			t.Fatalf("event on track %d, not described", tr.v)
		}
		if ts.v < last[tr.v] {
			t.Fatalf("track %s: time goes back from %d to %d", track, last[tr.v], ts.v)
		}
		last[tr.v] = ts.v
		typ, _ := pfGet(fs, pfTEType)
		name := ""
		if typ.v != pfSliceEnd {
			iid, _ := pfGet(fs, pfTENameIID)
			n, ok := names[iid.v]
			if !ok {
				t.Fatalf("event names %d, not interned", iid.v)
			}
			name = n
		}
		for _, f := range fs {
			switch f.num {
			case pfTEFlowIDs:
				flowStarts[f.v] = true
			case pfTETerminateIDs:
				flowEnds[f.v] = true
			}
		}
		switch typ.v {
		case pfSliceBegin:
			if len(open[tr.v]) > 0 {
				t.Fatalf("track %s: %s begins inside %s", track, name, open[tr.v][0])
			}
			open[tr.v] = append(open[tr.v], name)
		case pfSliceEnd:
			if len(open[tr.v]) == 0 {
				t.Fatalf("track %s: a slice ends that did not begin", track)
			}
			s.slices[track+"/"+open[tr.v][0]]++
			open[tr.v] = open[tr.v][:0]
		case pfInstant:
			s.instant++
		default:
			t.Fatalf("event type %d", typ.v)
		}
	}
	for tr, o := range open {
		if len(o) > 0 {
			t.Errorf("track %s: %s never ends", s.tracks[tr], o[0])
		}
	}
	for f := range flowStarts {
		if !flowEnds[f] {
			t.Errorf("flow %d starts and never ends", f)
		}
	}
	if len(flowStarts) != len(flowEnds) {
		t.Errorf("%d flows start, %d end", len(flowStarts), len(flowEnds))
	}
	s.flows = len(flowStarts)
	return s
}

func TestWritePerfetto(t *testing.T) {
	var f memFile
	s, err := NewStream(&f, origin, 42)
	if err != nil {
		t.Fatal(err)
	}
	record(s)
	if err := s.Close(testWorkers, testNodes); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(bytes.NewReader(f.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tr.WritePerfetto(&b); err != nil {
		t.Fatal(err)
	}
	got := checkPerfetto(t, b.Bytes())
	want := map[string]int{
		"w0/a": 1, "w1/b[0]": 1, // the tasks
		"w0/idle": 2, "w0/scheduling": 1, "w1/idle": 2, "w1/fetching": 1, "w1/scheduling": 1, // their states
		"RAM -> opencl_0/transfer": 1,
		"rank 1/send to 1":         1,
	}
	if fmt.Sprint(got.slices) != fmt.Sprint(want) {
		t.Errorf("slices %v\nwant   %v", got.slices, want)
	}
	// Three plugin events and the task that ran nowhere; the edge 1 -> 2.
	if got.instant != 4 || got.flows != 1 {
		t.Errorf("%d instants, %d flows; want 4, 1", got.instant, got.flows)
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
