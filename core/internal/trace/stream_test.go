package trace

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// memFile is an in-memory trace file.
type memFile struct {
	bytes.Buffer
	closed bool
}

func (m *memFile) Close() error { m.closed = true; return nil }

const origin = 1_000_000 // the producers' clock at time 0

var (
	testWorkers = []Worker{{ID: 0, Name: "w0", Node: 0, Arch: "cpu"}, {ID: 1, Name: "w1", Node: 1, Arch: "opencl"}}
	testNodes   = []Node{{ID: 0, Name: "RAM"}, {ID: 1, Name: "opencl_0"}}
)

// record writes a small run through a stream: a task released by
// another, a synchronisation task, a transfer, a plugin that dies and
// restarts, a communication.
func record(s *Stream) {
	s.Describe(testWorkers, testNodes)
	s.Plugin(origin+5, PluginStart, "driver-cpu", 100, "")
	s.Submit(&SubmitEvent{ID: 1, Name: "a", Codelet: "gemm", Model: "m", Time: origin + 10, Priority: 3, Tag: 7, HasTag: true, Flops: 2e9,
		Iter: [2]int64{4, 9}, NIter: 2, Handles: []Access{{Handle: 5, Mode: ModeR | ModeW, Size: 64, Footprint: 0xa5a5a5a5, Name: "A"}, {Handle: 6, Mode: ModeR, Size: 32, Footprint: 6}}})
	s.Submit(&SubmitEvent{ID: 2, Name: "b[0]", Codelet: "gemm", Time: origin + 20, Handles: []Access{{Handle: 5, Mode: ModeR, Size: 64, Footprint: 0xa5a5a5a5, Name: "A"}}})
	s.Submit(&SubmitEvent{ID: 3, Name: "sync", Time: origin + 25})
	s.Ready(1, origin+30)
	s.Transfer(Transfer{Src: 0, Dst: 1, Bytes: 64, Handle: 5, Start: origin + 35, End: origin + 40})
	s.Write([]Rec{
		{Kind: RecRun, ID: 1, Worker: 0, Start: origin + 40, End: origin + 100, Footprint: 0xbeef, Posted: true, Predicted: 55, PredictedTransfer: 0, Impl: 1},
		{Kind: RecEdge, ID: 1, To: 2, Worker: 0, Start: origin + 40, End: origin + 100},
		{Kind: RecEdge, ID: 1, To: 3, Worker: 0, Start: origin + 40, End: origin + 100},
	}, nil)
	s.Comm(Comm{Send: true, Peer: 1, Tag: -3, Bytes: 64, Handle: 5, Start: origin + 50, End: origin + 60})
	s.Plugin(origin+60, PluginExit, "driver-cpu", 100, "was killed: heartbeat")
	s.Plugin(origin+70, PluginStart, "driver-cpu", 101, "")
	s.Ready(2, origin+110)
	s.Run(2, 1, origin+120, origin+150, 0xbeef, true)
}

func wantTrace(format string) *Trace {
	return &Trace{
		Origin:  42,
		Workers: []Worker{{ID: 0, Name: "w0", Node: 0, Arch: "cpu"}, {ID: 1, Name: "w1", Node: 1, Arch: "opencl"}},
		Nodes:   []Node{{ID: 0, Name: "RAM"}, {ID: 1, Name: "opencl_0"}},
		Tasks: []*Task{
			{ID: 1, Name: "a", Codelet: "gemm", Model: "m", Priority: 3, Tag: 7, HasTag: true, Flops: 2e9, Iter: []int64{4, 9},
				Handles:   []Access{{Handle: 5, Mode: ModeR | ModeW, Size: 64, Footprint: 0xa5a5a5a5, Name: "A"}, {Handle: 6, Mode: ModeR, Size: 32, Footprint: 6}},
				Submitted: true, Ran: true, Submit: 10, Ready: 30, Worker: 0, Start: 40, End: 100, Footprint: 0xbeef,
				Posted: true, Predicted: 55, PredictedTransfer: 0, Impl: 1},
			{ID: 2, Name: "b[0]", Codelet: "gemm", Handles: []Access{{Handle: 5, Mode: ModeR, Size: 64, Footprint: 0xa5a5a5a5, Name: "A"}}, Preds: []uint64{1},
				Submitted: true, Ran: true, Submit: 20, Ready: 110, Worker: 1, Start: 120, End: 150, Footprint: 0xbeef, Failed: true,
				Predicted: -1, PredictedTransfer: -1, Impl: -1},
			{ID: 3, Name: "sync", Preds: []uint64{1}, Submitted: true, Submit: 25, Worker: -1, Predicted: -1, PredictedTransfer: -1, Impl: -1},
		},
		Transfers: []Transfer{{Src: 0, Dst: 1, Bytes: 64, Handle: 5, Start: 35, End: 40}},
		// Worker 0 (RAM) waits for task 1 from the first submission, then
		// idles to the end; worker 1 (opencl_0) waits for task 2, and
		// the copy of handle 5 to its node is its fetching.
		States: []State{
			{Worker: 0, Kind: StateIdle, Start: 10, End: 30, Task: 1},
			{Worker: 0, Kind: StateScheduling, Start: 30, End: 40, Task: 1},
			{Worker: 0, Kind: StateIdle, Start: 100, End: 150},
			{Worker: 1, Kind: StateIdle, Start: 10, End: 35, Task: 2},
			{Worker: 1, Kind: StateFetching, Start: 35, End: 40, Task: 2},
			{Worker: 1, Kind: StateIdle, Start: 40, End: 110, Task: 2},
			{Worker: 1, Kind: StateScheduling, Start: 110, End: 120, Task: 2},
		},
		Plugins: []PluginEvent{
			{Time: 5, Kind: PluginStart, Name: "driver-cpu", Pid: 100},
			{Time: 60, Kind: PluginExit, Name: "driver-cpu", Pid: 100, Note: "was killed: heartbeat"},
			{Time: 70, Kind: PluginRestart, Name: "driver-cpu", Pid: 101},
		},
		Comms:    []Comm{{Send: true, Peer: 1, Tag: -3, Bytes: 64, Handle: 5, Start: 50, End: 60}},
		Complete: true,
		Format:   format,
	}
}

func TestStreamRoundTrip(t *testing.T) {
	workers, nodes := testWorkers, testNodes
	for _, tc := range []struct {
		format Format
		name   string
	}{{Native, "native"}, {Chrome, "json"}} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := testStream(t)
			record(s)
			if err := s.Close(workers, nodes); err != nil {
				t.Fatal(err)
			}
			if !f.closed {
				t.Error("Close did not close the file")
			}
			s.Run(9, 0, 1, 2, 0, false) // after Close: ignored, the engine's batch
			s.Ready(9, 3)               // and the side buffer's
			file := f.Bytes()
			if tc.format == Chrome {
				var j bytes.Buffer
				if err := ConvertChrome(&j, bytes.NewReader(file)); err != nil {
					t.Fatal(err)
				}
				file = j.Bytes()
			}
			got, err := Read(bytes.NewReader(file))
			if err != nil {
				t.Fatalf("Read: %v\n%s", err, f.String())
			}
			want := wantTrace(tc.name)
			if !reflect.DeepEqual(got, want) {
				for i := range min(len(got.Tasks), len(want.Tasks)) {
					if !reflect.DeepEqual(got.Tasks[i], want.Tasks[i]) {
						t.Errorf("task %d:\n got %+v\nwant %+v", i, got.Tasks[i], want.Tasks[i])
					}
				}
				t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// An edge from a task that ran may come before that task's run record: a
// dependency on a task that ended is recorded by the submitting goroutine
// while the engine still holds the run record for the end of its round.
// Every reader keeps both the run and the edge; only an edge from a task
// that ran nowhere (worker -1) ends it.
func TestEdgeBeforeRun(t *testing.T) {
	s, f := testStream(t)
	s.Describe(testWorkers, testNodes)
	s.Submit(&SubmitEvent{ID: 1, Name: "a", Time: origin + 10})
	s.Submit(&SubmitEvent{ID: 2, Name: "b", Time: origin + 20})
	s.Edge(1, 2, 0, origin+30, origin+40)
	s.Ready(2, origin+45)
	s.Write([]Rec{{Kind: RecRun, ID: 1, Worker: 0, Start: origin + 30, End: origin + 40, Impl: -1, Predicted: -1, PredictedTransfer: -1}}, nil)
	s.Run(2, 1, origin+50, origin+60, 0, false)
	native, both := closeReadBoth(t, s, f)
	for name, got := range both {
		if len(got.Tasks) != 2 {
			t.Fatalf("%s: %d tasks, want 2", name, len(got.Tasks))
		}
		a, b := got.Tasks[0], got.Tasks[1]
		if a.Name != "a" || !a.Ran || a.Worker != 0 || a.End != 40 || !b.Ran || !reflect.DeepEqual(b.Preds, []uint64{1}) {
			t.Errorf("%s: a %+v\nb %+v\nwant both run, b after a", name, a, b)
		}
	}
	var pf bytes.Buffer
	if err := ConvertPerfetto(&pf, bytes.NewReader(native)); err != nil {
		t.Fatal(err)
	}
	ran, instants := 0, 0
	for _, o := range checkPerfetto(t, pf.Bytes()).out {
		if o.cat == "task" {
			if o.instant {
				instants++
			} else {
				ran++
			}
		}
	}
	if ran != 2 || instants != 0 {
		t.Errorf("perfetto: %d task slices and %d instants, want 2 and 0", ran, instants)
	}
}

// blockedFile stalls writes until release is closed.
type blockedFile struct {
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blockedFile) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	b.n += len(p)
	b.mu.Unlock()
	return len(p), nil
}
func (b *blockedFile) Close() error { return nil }

// A producer faster than the disk waits for it instead of buffering
// without bound, and loses nothing.
func TestStreamBoundedMemory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(s *Stream, i int)
	}{
		{"the engine's batches", func(s *Stream, i int) { s.Run(uint64(i), 0, int64(i), int64(i+1), 0, false) }},
		{"the side buffer", func(s *Stream, i int) { s.Ready(uint64(i), int64(i)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &blockedFile{release: make(chan struct{})}
			// The native header is written at once: let it through.
			go func() { f.release <- struct{}{} }()
			s, err := NewStream(f, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			const n = 200_000 // over 1 MB of records, 4 times the buffers
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range n {
					tc.record(s, i)
				}
			}()
			select {
			case <-done:
				t.Fatal("the producer wrote 1 MB through a stalled file: the stream buffers without bound")
			case <-time.After(200 * time.Millisecond):
			}
			close(f.release)
			<-done
			if err := s.Close(nil, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The side buffer's records and the engine's batches interleave in the
// file with their times intact, whichever goroutines write them and
// whenever the side buffer is spliced (by a batch, or because it filled
// up): the cursor records keep the two time cursors apart. A version 4
// file (no cursor record) still reads.
func TestStreamSideCursor(t *testing.T) {
	t.Run("interleaved", func(t *testing.T) {
		s, f := testStream(t)
		s.Submit(&SubmitEvent{ID: 1, Name: "a", Time: origin + 10})
		s.Run(1, 0, origin+40, origin+45, 0, false)
		s.Submit(&SubmitEvent{ID: 2, Name: "b", Time: origin + 20}) // before the chunk's cursor (45)
		s.Ready(2, origin+50)
		s.Run(2, 0, origin+60, origin+70, 0, false)
		if err := s.Close(nil, nil); err != nil {
			t.Fatal(err)
		}
		got, err := Read(bytes.NewReader(f.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		// Task 1 has no ready record: it was ready at its submission.
		want := [][4]int64{{10, 10, 40, 45}, {20, 50, 60, 70}}
		for i, x := range got.Tasks {
			if g := [4]int64{x.Submit, x.Ready, x.Start, x.End}; g != want[i] {
				t.Errorf("task %d: submit, ready, start, end %v, want %v", x.ID, g, want[i])
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		s, f := testStream(t)
		const producers, per = 4, 3000 // several side splices by overflow
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					id := uint64(p*per + i + 1)
					s.Submit(&SubmitEvent{ID: id, Name: "t", Time: origin + int64(id)*10})
					s.Ready(id, origin+int64(id)*10+3)
					s.Edge(id, id+1, -1, 0, 0)
				}
			}()
		}
		wg.Add(1)
		go func() { // the engine: runs of tasks whose submission is recorded
			defer wg.Done()
			for id := uint64(1); id <= producers*per; id++ {
				s.Write([]Rec{{Kind: RecRun, ID: 1e6 + id, Worker: 0, Start: origin + int64(id)*7, End: origin + int64(id)*7 + 5, Impl: -1, Predicted: -1, PredictedTransfer: -1}}, nil)
			}
		}()
		wg.Wait()
		if err := s.Close(nil, nil); err != nil {
			t.Fatal(err)
		}
		got, err := Read(bytes.NewReader(f.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range got.Tasks {
			switch {
			case x.ID > 1e6:
				id := int64(x.ID - 1e6)
				if x.Start != id*7 || x.End != id*7+5 {
					t.Fatalf("run %d: %d to %d, want %d to %d", x.ID, x.Start, x.End, id*7, id*7+5)
				}
			case x.Submitted:
				id := int64(x.ID)
				if x.Submit != id*10 || x.Ready != id*10+3 {
					t.Fatalf("task %d: submitted %d, ready %d; want %d, %d", x.ID, x.Submit, x.Ready, id*10, id*10+3)
				}
			}
			n++
		}
		if want := 2*producers*per + 1; n != want { // the last edge's successor was never submitted
			t.Errorf("%d tasks read back, want %d", n, want)
		}
	})
	t.Run("version 4", func(t *testing.T) {
		s, f := testStream(t)
		// Side records then batches only: no cursor record is needed.
		s.Submit(&SubmitEvent{ID: 1, Name: "a", Time: origin + 10})
		s.Ready(1, origin+30)
		s.Run(1, 0, origin+40, origin+45, 0, false)
		if err := s.Close(nil, nil); err != nil {
			t.Fatal(err)
		}
		v5 := f.Bytes()
		v4 := append([]byte(magicV4), v5[len(Magic):]...)
		for name, file := range map[string][]byte{"5": v5, "4": v4} {
			got, err := Read(bytes.NewReader(file))
			if err != nil {
				t.Fatalf("version %s: %v", name, err)
			}
			if x := got.Tasks[0]; x.Submit != 10 || x.Ready != 30 || x.Start != 40 || x.End != 45 {
				t.Errorf("version %s: %+v", name, x)
			}
		}
		// A cursor record in a version 4 trace is corrupt.
		a := appender{b: []byte(magicV4)}
		a.i(42)
		a.b = append(a.b, kindCursor)
		a.i(5)
		if _, err := Read(bytes.NewReader(a.b)); !errors.Is(err, errCorrupt) {
			t.Errorf("a cursor record in version 4: %v, want a corrupt trace", err)
		}
	})
}

// failingFile fails every write after the header.
type failingFile struct{ writes int }

func (f *failingFile) Write(p []byte) (int, error) {
	f.writes++
	if f.writes > 1 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}
func (f *failingFile) Close() error { return nil }

func TestStreamWriteError(t *testing.T) {
	s, err := NewStream(&failingFile{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50_000 { // several chunks: the writer fails, producers go on
		s.Ready(uint64(i), int64(i))
	}
	if err := s.Close(nil, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Close = %v, want the write error", err)
	}
}

// A run record's sleep goes through both formats: the task keeps it, and
// the states split the gap with it (sleeping from 12 to 30, where task 1
// became ready: its worker woke past that, which is scheduling).
func TestStreamSleepRoundTrip(t *testing.T) {
	for _, format := range []string{"native", "json"} {
		t.Run(format, func(t *testing.T) {
			s, f := testStream(t)
			s.Describe(testWorkers[:1], testNodes[:1])
			s.Submit(&SubmitEvent{ID: 1, Name: "a", Time: origin + 10})
			s.Ready(1, origin+30)
			s.Write([]Rec{{Kind: RecRun, ID: 1, Worker: 0, Start: origin + 40, End: origin + 100, Predicted: -1, PredictedTransfer: -1,
				SleepStart: origin + 12, SleepEnd: origin + 35}}, nil)
			if err := s.Close(testWorkers[:1], testNodes[:1]); err != nil {
				t.Fatal(err)
			}
			file := f.Bytes()
			if format == "json" {
				var j bytes.Buffer
				if err := ConvertChrome(&j, bytes.NewReader(file)); err != nil {
					t.Fatal(err)
				}
				file = j.Bytes()
			}
			got, err := Read(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Tasks) != 1 || got.Tasks[0].SleepStart != 12 || got.Tasks[0].SleepEnd != 35 {
				t.Fatalf("tasks %+v: want task 1 asleep from 12 to 35", got.Tasks)
			}
			want := []State{{0, StateIdle, 10, 12, 1}, {0, StateSleeping, 12, 30, 1}, {0, StateScheduling, 30, 40, 1}}
			if !reflect.DeepEqual(got.States, want) {
				t.Fatalf("states %v, want %v", got.States, want)
			}
		})
	}
}

// A version 1 trace (no handle footprints, no sleeps) still reads, and
// converts.
func TestReadVersion1(t *testing.T) {
	a := appender{b: []byte(magicV1)}
	a.i(42)
	a.b = append(a.b, kindName)
	a.u(1)
	a.str("scal")
	a.b = append(a.b, kindSubmit)
	for _, v := range []uint64{7, 1, 1, 0} { // id, name, codelet, model
		a.u(v)
	}
	a.i(10) // submit time
	a.i(0)  // priority
	a.u(0)  // flags
	a.u(0)  // iterations
	a.u(1)  // one handle: number, mode, size, label
	for _, v := range []uint64{5, ModeR | ModeW, 64, 0} {
		a.u(v)
	}
	a.b = append(a.b, kindRun)
	a.u(7)
	a.i(0)
	a.i(20)
	a.i(30)
	a.u(0xbeef)
	a.u(0)
	a.b = append(a.b, kindEnd)
	want := &Task{ID: 7, Name: "scal", Codelet: "scal", Handles: []Access{{Handle: 5, Mode: ModeR | ModeW, Size: 64}},
		Submitted: true, Ran: true, Submit: 10, Start: 20, End: 30, Footprint: 0xbeef, Predicted: -1, PredictedTransfer: -1, Impl: -1}
	var j bytes.Buffer
	if err := ConvertChrome(&j, bytes.NewReader(a.b)); err != nil {
		t.Fatalf("ConvertChrome: %v", err)
	}
	for name, in := range map[string][]byte{"native": a.b, "json": j.Bytes()} {
		got, err := Read(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Complete || len(got.Tasks) != 1 || !reflect.DeepEqual(got.Tasks[0], want) {
			t.Fatalf("%s: complete %v, tasks %+v; want %+v", name, got.Complete, got.Tasks, want)
		}
	}
}

// A trace cut anywhere reads up to its last whole record.
func TestReadTruncated(t *testing.T) {
	s, f := testStream(t)
	record(s)
	if err := s.Close(nil, nil); err != nil {
		t.Fatal(err)
	}
	full := f.Bytes()
	for cut := len(Magic) + 1; cut < len(full); cut++ {
		got, err := Read(bytes.NewReader(full[:cut]))
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(full), err)
		}
		if got.Complete {
			t.Fatalf("cut at %d of %d: read as complete", cut, len(full))
		}
	}
	got, err := Read(bytes.NewReader(full))
	if err != nil || !got.Complete || len(got.Tasks) != 3 {
		t.Fatalf("whole trace: %v, complete %v, %d tasks", err, got != nil && got.Complete, len(got.Tasks))
	}
}

func TestReadRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty file"},
		{"text", "hello", "neither a native trace"},
		{"bad json", `{"traceEvents": [`, "corrupt trace"},
		{"unknown record", Magic + "\x00\x63", "unknown record kind 99"},
		{"repeat first", Magic + "\x00\x0e\x02\x02", "a repeat record before any submit record"},
		{"repeat in version 5", magicV5 + "\x00\x0e\x02\x02", "a repeat record in a version 5 trace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// WriteTrace's documents (no job numbers) read too.
func TestReadWriteTraceDocument(t *testing.T) {
	var b bytes.Buffer
	evs := []Event{{Worker: 0, Name: "a", Start: 1000, End: 3000}, {Worker: 1, Name: "b", Start: 2000, End: 2500, Iter: [2]int64{1}, NIter: 1}}
	if err := WriteChrome(&b, []Worker{{ID: 0, Name: "w0"}, {ID: 1, Name: "w1"}}, evs); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Tasks) != 2 || !tr.Complete || len(tr.Workers) != 2 || tr.Workers[1].Name != "w1" {
		t.Fatalf("read %+v", tr)
	}
	if x := tr.Tasks[1]; x.Name != "b" || x.Worker != 1 || x.End-x.Start != 500 || !x.Ran || len(x.Iter) != 1 {
		t.Errorf("task b read as %+v", x)
	}
}

func TestFormatOf(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Format
		err  bool
	}{
		{"run.json", Chrome, false},
		{"RUN.JSON", Chrome, false},
		{"run.trace", Native, false},
		{"run", Native, false},
		{"run.svg", 0, true},
		{"dag.dot", 0, true},
		{"tasks.rec", 0, true},
	} {
		got, err := FormatOf(tc.path)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("FormatOf(%q) = %v, %v; want %v, error %v", tc.path, got, err, tc.want, tc.err)
		}
	}
}

func BenchmarkStreamRun(b *testing.B) {
	s, err := NewStream(nopFile{io.Discard}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		s.Run(uint64(i), 0, int64(i), int64(i)+10, 0, false)
	}
	if err := s.Close(nil, nil); err != nil {
		b.Fatal(err)
	}
}

type nopFile struct{ io.Writer }

func (nopFile) Close() error { return nil }

// BenchmarkStreamTask records what one task of a chain costs: its
// submission, ready, run and edge records.
func BenchmarkStreamTask(b *testing.B) {
	s, err := NewStream(nopFile{io.Discard}, 0, 0)
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
}

func task(s *Stream, id uint64, hs []Access) {
	t := int64(id)
	s.Submit(&SubmitEvent{ID: id, Name: "empty", Codelet: "empty", Time: t, Handles: hs})
	s.Ready(id, t)
	s.Run(id, 0, t, t+10, 0, false)
	s.Edge(id, id+1, 0, t, t+10)
}

// BenchmarkConvertChrome is the conversion of one such task to JSON, as
// Close does for a .json file.
func BenchmarkConvertChrome(b *testing.B) {
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
	if err := ConvertChrome(io.Discard, bytes.NewReader(f.Bytes())); err != nil {
		b.Fatal(err)
	}
}

// Create writes .json files as Chrome JSON once closed, and refuses to
// start where it cannot write.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, format string
	}{{"native", "run.trace", "native"}, {"json", "run.json", "json"}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			s, err := Create(path, origin, 42)
			if err != nil {
				t.Fatal(err)
			}
			record(s)
			if err := s.Close([]Worker{{ID: 0, Name: "w0"}, {ID: 1, Name: "w1"}}, nil); err != nil {
				t.Fatal(err)
			}
			tr, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Format != tc.format || !tr.Complete || len(tr.Tasks) != 3 {
				t.Errorf("read back as %s, complete %v, %d tasks", tr.Format, tr.Complete, len(tr.Tasks))
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
	if _, err := Create(filepath.Join(dir, "none", "t.json"), 0, 0); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "none", "t.json")) {
		t.Errorf("Create in a missing directory: %v; want an error naming the file", err)
	}
}

// A native trace cut short converts to JSON up to where it stops.
func TestConvertChromeTruncated(t *testing.T) {
	s, f := testStream(t)
	record(s)
	if err := s.Close(nil, nil); err != nil {
		t.Fatal(err)
	}
	full := f.Bytes()
	for _, cut := range []int{len(Magic) + 1, len(full) / 2, len(full) - 1} {
		var j bytes.Buffer
		if err := ConvertChrome(&j, bytes.NewReader(full[:cut])); err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		tr, err := Read(&j)
		if err != nil {
			t.Fatalf("cut at %d: the JSON does not read: %v", cut, err)
		}
		if tr.Complete {
			t.Errorf("cut at %d: read as complete", cut)
		}
	}
	if err := ConvertChrome(io.Discard, strings.NewReader(`{"traceEvents":[]}`)); err == nil {
		t.Error("ConvertChrome took JSON for a native trace")
	}
}

// BenchmarkStreamRound is the engine's side of a dependency hop with a
// trace: a run, an edge and a ready record written as one round.
func BenchmarkStreamRound(b *testing.B) {
	s, err := NewStream(nopFile{io.Discard}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	round := make([]Rec, 3)
	for i := range b.N {
		id, t := uint64(i), int64(i)
		round[0] = Rec{Kind: RecRun, ID: id, Worker: 1, Start: t, End: t + 10, Footprint: 0xbeef}
		round[1] = Rec{Kind: RecEdge, ID: id, To: id + 1, Worker: 1, Start: t, End: t + 10}
		round[2] = Rec{Kind: RecReady, ID: id + 1, Start: t + 12}
		s.Write(round, nil)
	}
	if err := s.Close(nil, nil); err != nil {
		b.Fatal(err)
	}
}

// A handle's description goes to the file once, and again when it
// changed: each task reads back the description it was submitted with.
func TestStreamHandleMarks(t *testing.T) {
	s, f := testStream(t)
	var mark HandleMark
	descs := []Access{
		{Handle: 5, Size: 64, Footprint: 0xa5, Name: "A"},
		{Handle: 5, Size: 64, Footprint: 0xa5, Name: "A"}, // unchanged
		{Handle: 5, Size: 64, Footprint: 0xa5, Name: "B"}, // renamed
		{Handle: 5, Size: 32, Footprint: 0x5a, Name: "B"}, // another shape
		{Handle: 5, Size: 32, Footprint: 0x5a, Name: "B"},
	}
	var grew []int
	for i, d := range descs {
		d.Mode, d.Mark = ModeR, &mark
		n := len(s.side.r.a.b)
		s.Submit(&SubmitEvent{ID: uint64(i + 1), Name: "t", Time: origin + int64(i), Handles: []Access{d}})
		grew = append(grew, len(s.side.r.a.b)-n)
	}
	if grew[1] >= grew[0] || grew[4] != grew[1] || grew[2] <= grew[1] || grew[3] <= grew[1] {
		t.Errorf("submit records took %v bytes: want the handle described in the 1st, 3rd and 4th only", grew)
	}
	if err := s.Close(nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(f.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != len(descs) {
		t.Fatalf("%d tasks, want %d", len(got.Tasks), len(descs))
	}
	for i, d := range descs {
		d.Mode = ModeR
		if x := got.Tasks[i]; x.Submit != int64(i) || !reflect.DeepEqual(x.Handles, []Access{d}) {
			t.Errorf("task %d submitted at %d with %+v, want at %d with %+v", i+1, x.Submit, x.Handles, i, d)
		}
	}
}

// testStream is a stream writing to an in-memory file.
func testStream(t *testing.T) (*Stream, *memFile) {
	t.Helper()
	f := &memFile{}
	s, err := NewStream(f, origin, 42)
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

// closeReadBoth closes s, which writes to f, and reads the trace back as
// written ("native") and converted to Chrome JSON ("json").
func closeReadBoth(t *testing.T, s *Stream, f *memFile) (native []byte, traces map[string]*Trace) {
	t.Helper()
	if err := s.Close(testWorkers, testNodes); err != nil {
		t.Fatal(err)
	}
	native = f.Bytes()
	var js bytes.Buffer
	if err := ConvertChrome(&js, bytes.NewReader(native)); err != nil {
		t.Fatal(err)
	}
	traces = map[string]*Trace{}
	for name, in := range map[string][]byte{"native": native, "json": js.Bytes()} {
		got, err := Read(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		traces[name] = got
	}
	return native, traces
}

// TestStreamRepeat: a submission that is the previous one but for its id
// and time is a repeat record of a few bytes, and any difference, a
// handle's description included, gives a whole submit record; the native
// reader and both converters read each task as it was submitted.
func TestStreamRepeat(t *testing.T) {
	s, f := testStream(t)
	var m5, m6 HandleMark
	h5 := func(mode uint8, name string) []Access {
		return []Access{{Handle: 5, Mode: mode, Size: 64, Footprint: 9, Name: name, Mark: &m5}}
	}
	rw := h5(ModeR|ModeW, "A")
	two := append(h5(ModeR, "A"), Access{Handle: 6, Mode: ModeW, Size: 8, Footprint: 3, Mark: &m6})
	var tag uint64 // the last submission's
	for _, tc := range []struct {
		why    string
		e      SubmitEvent
		repeat bool
	}{
		{"first", SubmitEvent{ID: 1, Name: "t", Codelet: "c", Model: "m", Handles: rw}, false},
		{"same", SubmitEvent{ID: 2, Name: "t", Codelet: "c", Model: "m", Handles: rw}, true},
		{"an id further on", SubmitEvent{ID: 4, Name: "t", Codelet: "c", Model: "m", Handles: rw}, true},
		{"an id before", SubmitEvent{ID: 3, Name: "t", Codelet: "c", Model: "m", Handles: rw}, true},
		{"name", SubmitEvent{ID: 5, Name: "u", Codelet: "c", Model: "m", Handles: rw}, false},
		{"codelet", SubmitEvent{ID: 6, Name: "u", Codelet: "d", Model: "m", Handles: rw}, false},
		{"model", SubmitEvent{ID: 7, Name: "u", Codelet: "d", Handles: rw}, false},
		{"priority", SubmitEvent{ID: 8, Name: "u", Codelet: "d", Priority: 2, Handles: rw}, false},
		{"same again", SubmitEvent{ID: 9, Name: "u", Codelet: "d", Priority: 2, Handles: rw}, true},
		{"mode", SubmitEvent{ID: 10, Name: "u", Codelet: "d", Priority: 2, Handles: h5(ModeR, "A")}, false},
		{"label", SubmitEvent{ID: 11, Name: "u", Codelet: "d", Priority: 2, Handles: h5(ModeR, "B")}, false},
		{"one handle more", SubmitEvent{ID: 12, Name: "u", Codelet: "d", Priority: 2, Handles: two}, false},
		{"two handles, same", SubmitEvent{ID: 13, Name: "u", Codelet: "d", Priority: 2, Handles: two}, true},
		{"tag", SubmitEvent{ID: 14, Name: "u", Priority: 2, Tag: 3, HasTag: true}, false},
		{"same tag", SubmitEvent{ID: 15, Name: "u", Priority: 2, Tag: 3, HasTag: true}, true},
		{"another tag", SubmitEvent{ID: 16, Name: "u", Priority: 2, Tag: 4, HasTag: true}, true},
		{"flops", SubmitEvent{ID: 17, Name: "u", Priority: 2, Tag: 4, HasTag: true, Flops: 1e6}, false},
		{"iteration", SubmitEvent{ID: 18, Name: "u", Priority: 2, Tag: 4, HasTag: true, Flops: 1e6, Iter: [2]int64{1}, NIter: 1}, false},
		{"next iteration", SubmitEvent{ID: 19, Name: "u", Priority: 2, Tag: 4, HasTag: true, Flops: 1e6, Iter: [2]int64{2}, NIter: 1}, false},
		{"same iteration", SubmitEvent{ID: 20, Name: "u", Priority: 2, Tag: 4, HasTag: true, Flops: 1e6, Iter: [2]int64{2}, NIter: 1}, true},
		{"no handles", SubmitEvent{ID: 21, Name: "u"}, false},
		{"no handles again", SubmitEvent{ID: 22, Name: "u"}, true},
		{"a tag value, but no tag", SubmitEvent{ID: 23, Name: "u", Tag: 9}, true},
	} {
		tc.e.Time = origin + int64(tc.e.ID)*100
		n := len(s.side.r.a.b)
		s.Submit(&tc.e)
		// A repeat record: kind, a one-byte id difference, a two-byte
		// time; a repeat-tag record, and a one-byte tag difference.
		limit := 4
		if tc.e.Tag != tag {
			limit = 5
		}
		tag = tc.e.Tag
		if grew := len(s.side.r.a.b) - n; (grew <= limit) != tc.repeat {
			t.Errorf("%s: the submission took %d bytes, want a repeat record %v", tc.why, grew, tc.repeat)
		}
		s.Run(tc.e.ID, 0, tc.e.Time+10, tc.e.Time+20, 0, false)
	}
	native, both := closeReadBoth(t, s, f)
	for name, got := range both {
		if len(got.Tasks) != 23 {
			t.Fatalf("%s: %d tasks, want 23", name, len(got.Tasks))
		}
		for _, x := range got.Tasks {
			id := int64(x.ID)
			if x.Submit != id*100 || x.Start != id*100+10 {
				t.Errorf("%s: task %d submitted at %d, ran at %d; want %d, %d", name, id, x.Submit, x.Start, id*100, id*100+10)
			}
		}
		// Spot checks of the fields a repeat record gives.
		for _, c := range []struct {
			id                   int
			name, codelet, model string
			priority             int64
			handles              int
		}{{3, "t", "c", "m", 0, 1}, {9, "u", "d", "", 2, 1}, {13, "u", "d", "", 2, 2}, {22, "u", "", "", 0, 0}} {
			x := got.Tasks[c.id-1]
			if x.Name != c.name || x.Codelet != c.codelet || x.Model != c.model || x.Priority != c.priority || len(x.Handles) != c.handles {
				t.Errorf("%s: task %d %+v, want %+v", name, c.id, x, c)
			}
		}
		if x := got.Tasks[12]; !reflect.DeepEqual(x.Handles, []Access{
			{Handle: 5, Mode: ModeR, Size: 64, Footprint: 9, Name: "A"}, {Handle: 6, Mode: ModeW, Size: 8, Footprint: 3}}) {
			t.Errorf("%s: task 13's handles %+v", name, x.Handles)
		}
		if x := got.Tasks[19]; !x.HasTag || x.Tag != 4 || x.Flops != 1e6 || !reflect.DeepEqual(x.Iter, []int64{2}) {
			t.Errorf("%s: task 20 %+v, want tag 4, 1e6 flops, iteration 2", name, x)
		}
		for id, tag := range map[int]uint64{14: 3, 15: 3, 16: 4, 23: 0} {
			if x := got.Tasks[id-1]; x.HasTag != (tag != 0) || x.Tag != tag {
				t.Errorf("%s: task %d %+v, want tag %d", name, id, x, tag)
			}
		}
	}
	var pf bytes.Buffer
	if err := ConvertPerfetto(&pf, bytes.NewReader(native)); err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for k, n := range checkPerfetto(t, pf.Bytes()).slices {
		ran[k[strings.LastIndexByte(k, '/')+1:]] += n
	}
	if ran["t"] != 4 || ran["u"] != 19 {
		t.Errorf("Perfetto task slices %v, want 4 t and 19 u", ran)
	}
}

// A version 4 submit record naming a handle no handle record described
// is a corrupt trace.
func TestReadUndescribedHandle(t *testing.T) {
	a := appender{b: []byte(magicV4)}
	a.i(42)
	a.b = append(a.b, kindSubmit)
	for _, v := range []uint64{7, 0, 0, 0} { // id, name, codelet, model
		a.u(v)
	}
	a.i(10) // Δ submit time
	a.i(0)  // priority
	a.u(0)  // flags
	a.u(0)  // iterations
	a.u(1)  // one handle: number, mode
	a.u(5)
	a.u(ModeR)
	a.b = append(a.b, kindEnd)
	_, err := Read(bytes.NewReader(a.b))
	if !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "handle 5, described nowhere") {
		t.Fatalf("Read: %v, want a corrupt trace naming handle 5", err)
	}
}

// A version 3 trace (times since 0, handles described in each submit
// record, edges with their predecessor's times) still reads, and
// converts with its dependency arrow.
func TestReadVersion3(t *testing.T) {
	a := appender{b: []byte(magicV3)}
	a.i(42)
	a.b = append(a.b, kindName)
	a.u(1)
	a.str("scal")
	a.b = append(a.b, kindName)
	a.u(2)
	a.str("x")
	for _, id := range []uint64{7, 8} {
		a.b = append(a.b, kindSubmit)
		for _, v := range []uint64{id, 1, 1, 0} { // id, name, codelet, model
			a.u(v)
		}
		a.i(10) // submit time
		a.i(0)  // priority
		a.u(0)  // flags
		a.u(0)  // iterations
		a.u(1)  // one handle: number, mode, size, footprint, label
		for _, v := range []uint64{5, ModeR | ModeW, 64, 0xa5, 2} {
			a.u(v)
		}
	}
	a.b = append(a.b, kindReady)
	a.u(7)
	a.i(15)
	a.b = append(a.b, kindRun)
	a.u(7)
	for _, v := range []int64{0, 20, 30} { // worker, start, end
		a.i(v)
	}
	a.u(0xbeef)
	a.u(0)
	a.b = append(a.b, kindEdge)
	a.u(7)
	a.u(8)
	for _, v := range []int64{0, 20, 30} { // 7's worker, start, end
		a.i(v)
	}
	a.b = append(a.b, kindEnd)
	var j bytes.Buffer
	if err := ConvertChrome(&j, bytes.NewReader(a.b)); err != nil {
		t.Fatalf("ConvertChrome: %v", err)
	}
	if !strings.Contains(j.String(), `"ph":"s"`) {
		t.Errorf("JSON has no dependency arrow:\n%s", j.String())
	}
	h := []Access{{Handle: 5, Mode: ModeR | ModeW, Size: 64, Footprint: 0xa5, Name: "x"}}
	got, err := Read(bytes.NewReader(a.b))
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{
		{ID: 7, Name: "scal", Codelet: "scal", Handles: h, Submitted: true, Ran: true, Submit: 10, Ready: 15, Start: 20, End: 30,
			Footprint: 0xbeef, Predicted: -1, PredictedTransfer: -1, Impl: -1},
		{ID: 8, Name: "scal", Codelet: "scal", Handles: h, Submitted: true, Submit: 10, Worker: -1, Preds: []uint64{7}, Predicted: -1, PredictedTransfer: -1, Impl: -1},
	}
	if len(got.Tasks) != 2 {
		t.Fatalf("tasks %+v, want jobs 7 and 8", got.Tasks)
	}
	for i := range want {
		if x := got.Tasks[i]; !reflect.DeepEqual(*x, want[i]) {
			t.Errorf("task %d:\n got %+v\nwant %+v", i, *x, want[i])
		}
	}
}

// TestStreamRunRefs: run, edge and ready records that repeat or refer to
// the run record before them (a chain's: the worker, footprint, flags and
// implementation of the task before, an edge from it and its successor
// ready at its end) are written as next-run, edge-from-run and hop
// records (format 7), and anything else as whole records; the native
// reader and both converters read each task as it ran.
func TestStreamRunRefs(t *testing.T) {
	s, f := testStream(t)
	run := func(id uint64, w int32, start, end int64) Rec {
		return Rec{Kind: RecRun, ID: id, Worker: w, Start: origin + start, End: origin + end, Footprint: 7, Posted: true,
			Predicted: 40, PredictedTransfer: 0, Impl: 0}
	}
	edge := func(from, to uint64, r Rec) Rec {
		return Rec{Kind: RecEdge, ID: from, To: to, Worker: r.Worker, Start: r.Start, End: r.End}
	}
	ready := func(id uint64, t int64) Rec { return Rec{Kind: RecReady, ID: id, Start: origin + t} }
	r1, r2, r3 := run(1, 0, 100, 150), run(2, 0, 160, 200), run(3, 1, 210, 260)
	r2.Predicted = 41
	r4 := run(4, 1, 270, 300)
	r4.SleepStart, r4.SleepEnd = origin+262, origin+265
	r5, r6 := run(5, 1, 310, 320), run(6, 1, 330, 340)
	r6.Failed = true
	r7 := run(7, 0, 350, 400)
	r7.TeamLen = 2
	r8, r9 := run(8, 0, 410, 420), run(9, 0, 430, 440)
	r8.Impl = 1
	r9.Impl = 1
	for id := uint64(1); id <= 11; id++ {
		s.Submit(&SubmitEvent{ID: id, Name: "c", Time: origin + 10})
	}
	s.Write([]Rec{
		r1, edge(1, 2, r1), ready(2, 150), // a hop
		r2, edge(2, 3, r2), ready(3, 200), edge(2, 4, r2), // next run, hop, edge from it
		r3, edge(3, 5, r3), ready(5, 255), // another worker: a whole run; ready before the end
		r4, r5, r6, // a sleep, then flags that differ: whole runs
		edge(5, 7, r5), r7, // an edge from another task than the last run's; a team
	}, []int{0, 1})
	s.Edge(3, 10, 1, origin+210, origin+260) // the side buffer's, between two batches
	s.Ready(10, origin+405)
	s.Write([]Rec{edge(7, 8, r7), r8, r9, edge(9, 11, r9), ready(11, 440)}, nil) // from the last batch's run; another implementation
	_, both := closeReadBoth(t, s, f)
	type want struct {
		worker     int
		start, end int64
		ready      int64
		preds      []uint64
		predicted  int64
		failed     bool
		impl       int
		team       []int
		sleep      [2]int64
	}
	wants := map[uint64]want{
		1:  {0, 100, 150, 10, nil, 40, false, 0, nil, [2]int64{}},
		2:  {0, 160, 200, 150, []uint64{1}, 41, false, 0, nil, [2]int64{}},
		3:  {1, 210, 260, 200, []uint64{2}, 40, false, 0, nil, [2]int64{}},
		4:  {1, 270, 300, 10, []uint64{2}, 40, false, 0, nil, [2]int64{262, 265}},
		5:  {1, 310, 320, 255, []uint64{3}, 40, false, 0, nil, [2]int64{}},
		6:  {1, 330, 340, 10, nil, 40, true, 0, nil, [2]int64{}},
		7:  {0, 350, 400, 10, []uint64{5}, 40, false, 0, []int{0, 1}, [2]int64{}},
		8:  {0, 410, 420, 10, []uint64{7}, 40, false, 1, nil, [2]int64{}},
		9:  {0, 430, 440, 10, nil, 40, false, 1, nil, [2]int64{}},
		10: {-1, 0, 0, 405, []uint64{3}, -1, false, -1, nil, [2]int64{}},
		11: {-1, 0, 0, 440, []uint64{9}, -1, false, -1, nil, [2]int64{}},
	}
	for name, got := range both {
		if len(got.Tasks) != len(wants) {
			t.Fatalf("%s: %d tasks, want %d", name, len(got.Tasks), len(wants))
		}
		for _, x := range got.Tasks {
			w := wants[x.ID]
			ran := w.worker >= 0
			if x.Ran != ran || x.Worker != w.worker || x.Start != w.start || x.End != w.end || x.Ready != w.ready ||
				!reflect.DeepEqual(x.Preds, w.preds) || x.Failed != w.failed || x.Impl != w.impl ||
				!reflect.DeepEqual(x.Team, w.team) || x.SleepStart != w.sleep[0] || x.SleepEnd != w.sleep[1] ||
				ran && (x.Predicted != w.predicted || x.Footprint != 7 || !x.Posted) {
				t.Errorf("%s: task %d\n got %+v\nwant %+v", name, x.ID, *x, w)
			}
		}
	}

	// A chain's run, edge and ready records take 6 bytes or so a task
	// (20 in format 6).
	s, f = testStream(t)
	s.Write([]Rec{run(1, 0, 0, 1)}, nil)
	n0 := len(s.r.a.b)
	const tasks = 1000
	for i := int64(1); i < tasks; i++ {
		prev := run(uint64(i), 0, 2*i-2, 2*i-1)
		s.Write([]Rec{edge(uint64(i), uint64(i+1), prev), ready(uint64(i+1), 2*i-1), run(uint64(i+1), 0, 2*i, 2*i+1)}, nil)
	}
	if per := float64(len(s.r.a.b)-n0) / (tasks - 1); per > 8 {
		t.Errorf("a chain's task took %.1f bytes, want at most 8", per)
	}
	native, both := closeReadBoth(t, s, f)
	for name, got := range both {
		for _, x := range got.Tasks {
			i := int64(x.ID)
			if x.Start != 2*i-2 || x.End != 2*i-1 || i > 1 && (x.Ready != 2*i-3 || !reflect.DeepEqual(x.Preds, []uint64{x.ID - 1})) {
				t.Fatalf("%s: task %d %+v", name, i, *x)
			}
		}
	}
	var pf bytes.Buffer
	if err := ConvertPerfetto(&pf, bytes.NewReader(native)); err != nil {
		t.Fatal(err)
	}
	// Each task but the first was ready at its predecessor's end, 1 ns
	// before its start: that is its worker's scheduling state.
	got := checkPerfetto(t, pf.Bytes())
	if len(got.pairs) != tasks-1 || got.slices["worker 0/scheduling"] != tasks-1 {
		t.Errorf("Perfetto: %d dependency flows and slices %v, want %d flows and as many scheduling states", len(got.pairs), got.slices, tasks-1)
	}
}

// Records that refer to the last run record are refused before version 7
// and before any run record; a repeat-tag record before version 7.
func TestReadRunRefsRejects(t *testing.T) {
	for _, tc := range []struct {
		magic string
		kind  byte
		want  string
	}{
		{magicV6, kindRunNext, "kind 15 in a version 6 trace"},
		{magicV6, kindHop, "kind 17 in a version 6 trace"},
		{magicV6, kindRepeatTag, "a repeat-tag record in a version 6 trace"},
		{Magic, kindRunNext, "kind 15 before any run record"},
		{Magic, kindEdgeRun, "kind 16 before any run record"},
		{Magic, kindHop, "kind 17 before any run record"},
	} {
		a := appender{b: []byte(tc.magic)}
		a.i(42)
		a.b = append(a.b, tc.kind)
		a.i(1)
		a.i(5)
		a.i(5)
		a.b = append(a.b, kindEnd)
		if _, err := Read(bytes.NewReader(a.b)); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q kind %d: %v, want a corrupt trace saying %q", tc.magic, tc.kind, err, tc.want)
		}
	}
}

// A next-run record after a run record with a sleep or a team would
// repeat fields that differ from task to task: the writer never makes
// one, and a reader refuses it as corrupt.
func TestReadNextRunRepeatsNoSleepOrTeam(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags uint64
		extra []uint64 // the run record's fields after its flags
	}{
		{"sleep", runSlept, []uint64{4, 2}}, // start - sleep start, start - sleep end (zigzag)
		{"team", runTeam, []uint64{2, 0, 1}},
	} {
		a := appender{b: []byte(Magic)}
		a.i(42)
		a.b = append(a.b, kindRun)
		a.u(7)  // id
		a.i(0)  // worker
		a.i(20) // Δstart
		a.i(10) // duration
		a.u(0)  // footprint
		a.u(tc.flags)
		for _, v := range tc.extra {
			a.u(v)
		}
		a.b = append(a.b, kindRunNext)
		a.i(1)  // id 8
		a.i(15) // Δstart
		a.i(10) // duration
		a.b = append(a.b, kindEnd)
		if _, err := Read(bytes.NewReader(a.b)); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "job 8's next-run record repeats a sleep or a team") {
			t.Errorf("%s: %v, want a corrupt trace naming job 8's next-run record", tc.name, err)
		}
	}
}
