package trace

import (
	"bytes"
	"encoding/xml"
	"reflect"
	"strings"
	"testing"
)

// ran is a task that ran on worker w from start to end, released by
// preds.
func ran(id uint64, name string, w int, start, end int64, preds ...uint64) *Task {
	return &Task{ID: id, Name: name, Codelet: name, Worker: w, Start: start, End: end, Ran: true, Submitted: true, Preds: preds}
}

func TestCriticalPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tasks []*Task
		want  int64
		path  []uint64
	}{
		{"empty", nil, 0, nil},
		{"one", []*Task{ran(1, "a", 0, 0, 5)}, 5, []uint64{1}},
		{"chain", []*Task{ran(1, "a", 0, 0, 5), ran(2, "a", 0, 10, 12, 1), ran(3, "a", 1, 20, 27, 2)}, 14, []uint64{1, 2, 3}},
		{"the heavier branch", []*Task{
			ran(1, "a", 0, 0, 1), ran(2, "b", 0, 1, 11, 1), ran(3, "c", 1, 1, 4, 1), ran(4, "d", 0, 11, 12, 2, 3),
		}, 12, []uint64{1, 2, 4}},
		{"ids out of order", []*Task{ran(1, "x", 0, 5, 6, 9), ran(9, "head", 0, 0, 3)}, 4, []uint64{9, 1}},
		{"a task that ran nowhere weighs nothing", []*Task{
			ran(1, "a", 0, 0, 2), {ID: 2, Name: "sync", Worker: -1, Preds: []uint64{1}, Submitted: true}, ran(3, "b", 0, 3, 6, 2),
		}, 5, []uint64{1, 2, 3}},
		{"independent", []*Task{ran(1, "a", 0, 0, 2), ran(2, "a", 1, 0, 7)}, 7, []uint64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Trace{}
			b := newBuilder(tr)
			for _, x := range tc.tasks {
				*b.task(x.ID) = *x
			}
			b.finish()
			got, path := tr.CriticalPath()
			if got != tc.want || !reflect.DeepEqual(path, tc.path) {
				t.Errorf("CriticalPath = %d, %v; want %d, %v", got, path, tc.want, tc.path)
			}
		})
	}
}

func sample() *Trace {
	tr := &Trace{Complete: true, Format: "native",
		Workers: []Worker{{ID: 0, Name: "cpu0"}, {ID: 1, Name: "cpu1"}},
		Nodes:   []Node{{ID: 0, Name: "RAM"}, {ID: 1, Name: "opencl_0"}},
		Tasks: []*Task{
			ran(1, "potrf", 0, 0, 40),
			ran(2, "trsm", 0, 40, 60, 1),
			ran(3, "trsm", 1, 50, 80, 1),
			ran(4, "gemm", 0, 80, 100, 2, 3),
		},
		Transfers: []Transfer{{Src: 0, Dst: 1, Bytes: 1000, Start: 10, End: 20}, {Src: 0, Dst: 1, Bytes: 3000, Start: 30, End: 40}},
		States: []State{
			{Worker: 0, Kind: StateScheduling, Start: 60, End: 80, Task: 4},
			{Worker: 1, Kind: StateIdle, Start: 0, End: 10, Task: 3},
			{Worker: 1, Kind: StateSleeping, Start: 10, End: 30, Task: 3},
			{Worker: 1, Kind: StateFetching, Start: 30, End: 40, Task: 3},
			{Worker: 1, Kind: StateScheduling, Start: 40, End: 50, Task: 3},
			{Worker: 1, Kind: StateIdle, Start: 80, End: 120}, // past the makespan: clipped
		},
	}
	tr.Tasks[0].Handles = []Access{{Handle: 0x1a, Mode: ModeR | ModeW, Size: 4096, Footprint: 0xc0ffee, Name: "A[0]"}}
	return tr
}

func TestSummarize(t *testing.T) {
	s := sample().Summarize()
	if s.Start != 0 || s.End != 100 || s.Makespan != 100 || s.Tasks != 4 || s.Ran != 4 {
		t.Errorf("window %d..%d (%d), %d tasks, %d ran", s.Start, s.End, s.Makespan, s.Tasks, s.Ran)
	}
	wantW := []WorkerSummary{{Worker: Worker{ID: 0, Name: "cpu0"}, Tasks: 3, Executing: 80, Scheduling: 20},
		{Worker: Worker{ID: 1, Name: "cpu1"}, Tasks: 1, Executing: 30, Fetching: 10, Scheduling: 10, Sleeping: 20, Idle: 30}}
	if !reflect.DeepEqual(s.Workers, wantW) {
		t.Errorf("workers %+v, want %+v", s.Workers, wantW)
	}
	wantC := []CodeletSummary{{"trsm", 2, 50, 25, 20, 30}, {"potrf", 1, 40, 40, 40, 40}, {"gemm", 1, 20, 20, 20, 20}}
	if !reflect.DeepEqual(s.Codelets, wantC) {
		t.Errorf("codelets %+v, want %+v", s.Codelets, wantC)
	}
	if s.CriticalPath != 90 || !reflect.DeepEqual(s.CriticalTasks, []uint64{1, 3, 4}) {
		t.Errorf("critical path %d %v, want 90 [1 3 4]", s.CriticalPath, s.CriticalTasks)
	}
	if s.Efficiency != 110.0/200 {
		t.Errorf("efficiency %v, want 0.55", s.Efficiency)
	}
	if len(s.Links) != 1 || s.Links[0].Bytes != 4000 || s.Links[0].Count != 2 || s.Links[0].Busy != 20 {
		t.Errorf("links %+v", s.Links)
	}
	var b bytes.Buffer
	if err := sample().WriteSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "do not cover") {
		t.Errorf("summary says states are missing, when they cover the makespan:\n%s", b.String())
	}
	for _, want := range []string{"fetching", "scheduling", "sleeping", "makespan: 0.000 ms", "critical path: 0.000 ms over 3 tasks, 90.0% of the makespan", "parallel efficiency: 55.0%", "trsm", "RAM -> opencl_0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteSVG(t *testing.T) {
	tr := sample()
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"svg", func(b *bytes.Buffer) error { return tr.WriteSVG(b, tr.Summarize(), SVGOptions{Title: "t <1>"}) }},
		{"html", func(b *bytes.Buffer) error { return tr.WriteHTML(b, tr.Summarize(), SVGOptions{Title: "t <1>"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			svg := out[strings.Index(out, "<svg"):]
			svg = svg[:strings.Index(svg, "</svg>")+len("</svg>")]
			if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
				t.Fatalf("the SVG is not well-formed XML: %v", err)
			}
			for _, want := range []string{
				"potrf (job 1)", "trsm (job 3)", // one box per task
				"transfer of handle 0, 1000 bytes", // the bus row
				"RAM -&gt; opencl_0",
				"scheduling 20 ns, from 60 ns to 80 ns, before job 4", // worker 0's state
				"fetching 10 ns", "idle 10 ns", "sleeping 20 ns",      // worker 1's
				"handle 26 RW, 4096 bytes, footprint 00c0ffee, A[0]", // task 1's handle
				`<polyline`, // the critical path
				"critical path: 3 tasks",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("%s lacks %q", tc.name, want)
				}
			}
			// Without states, the gaps are idle.
			noStates := sample()
			noStates.States = nil
			var plain bytes.Buffer
			if err := noStates.WriteSVG(&plain, noStates.Summarize(), SVGOptions{}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plain.String(), "idle 20 ns") {
				t.Error("a trace with no states does not draw worker 0's gap as idle")
			}
			if n := strings.Count(out, `stroke="#d62728" stroke-width="1.5"`); n != 4 { // 3 tasks + the legend
				t.Errorf("%d boxes outlined as critical, want 3 and the legend's", n)
			}
			// Self-contained: nothing to fetch.
			for _, bad := range []string{"src=", "href=", "@import", "url("} {
				if strings.Contains(out, bad) {
					t.Errorf("%s refers to something outside (%q)", tc.name, bad)
				}
			}
		})
	}
}

// Tasks too small to see merge: a million of them draw as a few boxes per
// pixel column, as opaque as they are busy.
func TestWriteSVGMergesTinyTasks(t *testing.T) {
	tr := &Trace{Workers: []Worker{{ID: 0, Name: "w"}}}
	const n = 100_000
	for i := range n {
		tr.Tasks = append(tr.Tasks, ran(uint64(i+1), "empty", 0, int64(i)*10, int64(i)*10+2))
	}
	var b bytes.Buffer
	if err := tr.WriteSVG(&b, tr.Summarize(), SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	rects := strings.Count(b.String(), "<rect")
	if rects > 5000 {
		t.Errorf("%d rectangles for %d tiny tasks: they should merge", rects, n)
	}
	if !strings.Contains(b.String(), `fill-opacity="0.25"`) {
		t.Error("merged boxes of a worker busy a fifth of the time should be faint")
	}
}

func TestWriteDot(t *testing.T) {
	tr := sample()
	var b bytes.Buffer
	if err := tr.WriteDot(&b, tr.Summarize()); err != nil {
		t.Fatal(err)
	}
	want := `digraph G {
	color=white
	rankdir=LR;
	 "task_1" [ style=filled, label="potrf", fillcolor="#ff7f0e", color="#d62728", penwidth=3]
	 "task_2" [ style=filled, label="trsm", fillcolor="#1f77b4"]
	 "task_3" [ style=filled, label="trsm", fillcolor="#1f77b4", color="#d62728", penwidth=3]
	 "task_4" [ style=filled, label="gemm", fillcolor="#2ca02c", color="#d62728", penwidth=3]
	 "task_1"->"task_2"
	 "task_1"->"task_3" [color="#d62728", penwidth=3]
	 "task_2"->"task_4"
	 "task_3"->"task_4" [color="#d62728", penwidth=3]
}
`
	if b.String() != want {
		t.Errorf("dot:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteTasksRec(t *testing.T) {
	tr := sample()
	tr.Tasks[0].Submit, tr.Tasks[0].Ready, tr.Tasks[0].HasTag, tr.Tasks[0].Tag = 1_500_000, 2_000_000, true, 0x2a
	tr.Tasks[0].Iter = []int64{3, 1} // innermost first
	var b bytes.Buffer
	if err := tr.WriteTasksRec(&b); err != nil {
		t.Fatal(err)
	}
	recs := strings.Split(strings.TrimSpace(b.String()), "\n\n")
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4:\n%s", len(recs), b.String())
	}
	want := `Name: potrf
JobId: 1
SubmitOrder: 1
Priority: 0
Tag: 2a
WorkerId: 0
MemoryNode: 0
SubmitTime: 1.500000
ReadyTime: 2.000000
StartTime: 0.000000
EndTime: 0.000040
Footprint: 0
Iteration: 1 3
Handles: 1a
Modes: RW
Sizes: 4096
Footprints: c0ffee
MPIRank: 0`
	if recs[0] != want {
		t.Errorf("first record:\n%s\nwant\n%s", recs[0], want)
	}
	if !strings.Contains(recs[3], "DependsOn: 2 3\n") {
		t.Errorf("gemm's record lacks its dependencies:\n%s", recs[3])
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[uint8]string{ModeR: "R", ModeW: "W", ModeR | ModeW: "RW", ModeScratch: "S", ModeRedux: "X", ModeR | ModeW | ModeCommute: "RWC"} {
		if got := ModeString(m); got != want {
			t.Errorf("ModeString(%#x) = %q, want %q", m, got, want)
		}
		if got := parseMode(want); got != m {
			t.Errorf("parseMode(%q) = %#x, want %#x", want, got, m)
		}
	}
}
