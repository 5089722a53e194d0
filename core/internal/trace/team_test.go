package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// teamWorkers are three CPU workers in RAM: 1 and 2 form a team.
var teamWorkers = []Worker{{ID: 0, Name: "w0", Arch: "cpu"}, {ID: 1, Name: "w1", Arch: "cpu"}, {ID: 2, Name: "w2", Arch: "cpu"}}

// recordTeam writes a parallel task (job 1, codelet pgemm, implementation
// 0) run by the team of workers 1 (master, asleep from 12 to 18 before
// it) and 2 from 30 to 90, then job 2 (scal, implementation 1), which job
// 1 released, on worker 2 from 100 to 120.
func recordTeam(t *testing.T) []byte {
	t.Helper()
	s, f := testStream(t)
	s.Describe(teamWorkers, testNodes[:1])
	s.Submit(&SubmitEvent{ID: 1, Name: "pgemm", Codelet: "pgemm", Time: origin + 10})
	s.Submit(&SubmitEvent{ID: 2, Name: "scal", Codelet: "scal", Time: origin + 15})
	s.Ready(1, origin+20)
	s.Write([]Rec{
		{Kind: RecRun, ID: 1, Worker: 1, Start: origin + 30, End: origin + 90, Predicted: -1, PredictedTransfer: -1,
			SleepStart: origin + 12, SleepEnd: origin + 18, Impl: 0, TeamLen: 2},
		{Kind: RecEdge, ID: 1, To: 2, Worker: 1, Start: origin + 30, End: origin + 90},
		{Kind: RecReady, ID: 2, Start: origin + 90},
	}, []int{1, 2})
	s.Write([]Rec{{Kind: RecRun, ID: 2, Worker: 2, Start: origin + 100, End: origin + 120, Predicted: -1, PredictedTransfer: -1, Impl: 1}}, nil)
	if err := s.Close(teamWorkers, testNodes[:1]); err != nil {
		t.Fatal(err)
	}
	return f.Bytes()
}

// teamStates are recordTeam's states: worker 2 waits for job 1 as its
// master does (without the master's sleep), and is executing, not idle,
// while it runs; worker 0 ran nothing.
var teamStates = []State{
	{1, StateIdle, 10, 12, 1}, {1, StateSleeping, 12, 18, 1}, {1, StateIdle, 18, 20, 1}, {1, StateScheduling, 20, 30, 1},
	{1, StateIdle, 90, 120, 0},
	{2, StateIdle, 10, 20, 1}, {2, StateScheduling, 20, 30, 1},
	{2, StateScheduling, 90, 100, 2},
}

// A run record's implementation and team read back, natively and through
// the JSON conversion (whose members' copies of the task do not read as
// tasks of their own), and the states and the summary count the team's
// task on both members.
func TestStreamTeamRoundTrip(t *testing.T) {
	native := recordTeam(t)
	for _, format := range []string{"native", "json"} {
		t.Run(format, func(t *testing.T) {
			file := native
			if format == "json" {
				var j bytes.Buffer
				if err := ConvertChrome(&j, bytes.NewReader(native)); err != nil {
					t.Fatal(err)
				}
				file = j.Bytes()
			}
			tr, err := Read(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Tasks) != 2 {
				t.Fatalf("%d tasks, want 2: %+v", len(tr.Tasks), tr.Tasks)
			}
			for _, c := range []struct {
				worker, impl int
				team         []int
			}{{1, 0, []int{1, 2}}, {2, 1, nil}} {
				x := tr.Tasks[c.impl]
				if !x.Ran || x.Worker != c.worker || x.Impl != c.impl || !reflect.DeepEqual(x.Team, c.team) {
					t.Errorf("job %d ran %v on worker %d, implementation %d, team %v; want worker %d, implementation %d, team %v",
						x.ID, x.Ran, x.Worker, x.Impl, x.Team, c.worker, c.impl, c.team)
				}
			}
			if !reflect.DeepEqual(tr.States, teamStates) {
				t.Errorf("states\n %v\nwant\n %v", tr.States, teamStates)
			}
			s := tr.Summarize()
			var got [][2]int64
			for _, w := range s.Workers {
				got = append(got, [2]int64{int64(w.Tasks), w.Executing})
			}
			// Worker 0 is described but ran nothing.
			if want := [][2]int64{{0, 0}, {1, 60}, {2, 80}}; !reflect.DeepEqual(got, want) {
				t.Errorf("per worker tasks and executing time %v, want %v", got, want)
			}
			if len(s.Codelets) != 2 || s.Codelets[0].Name != "pgemm" || s.Codelets[0].Count != 1 || s.Codelets[0].Total != 60 {
				t.Errorf("codelets %+v: want pgemm once, 60 ns", s.Codelets)
			}
			if want := float64(140) / (90 * 3); s.Efficiency != want {
				t.Errorf("efficiency %v, want %v", s.Efficiency, want)
			}
		})
	}
}

// The JSON trace has the team's task on both members, the other member's
// named after its team, each with the implementation and the team in its
// args; the dependency's flow leaves from the master.
func TestChromeTeam(t *testing.T) {
	var j bytes.Buffer
	if err := ConvertChrome(&j, bytes.NewReader(recordTeam(t))); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name, Cat, Ph string
			Tid           int
			Args          struct {
				Impl *int
				Team []int
			}
		}
	}
	if err := json.Unmarshal(j.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	type slice struct {
		tid  int
		name string
		impl int
		team string
	}
	var got []slice
	flows := map[string]int{}
	for _, e := range doc.TraceEvents {
		switch {
		case e.Cat == "task" && e.Ph == "X":
			s := slice{tid: e.Tid, name: e.Name, impl: -1, team: fmt.Sprint(e.Args.Team)}
			if e.Args.Impl != nil {
				s.impl = *e.Args.Impl
			}
			got = append(got, s)
		case e.Cat == "dep":
			flows[e.Ph] = e.Tid
		}
	}
	want := []slice{{1, "pgemm", 0, "[1 2]"}, {2, "pgemm (team of 2, master 1)", 0, "[1 2]"}, {2, "scal", 1, "[]"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("task slices %+v, want %+v", got, want)
	}
	if flows["s"] != 1 || flows["f"] != 2 {
		t.Errorf("the flow from job 1 to job 2 goes from worker %d to %d, want 1 to 2", flows["s"], flows["f"])
	}
}

// pfTaskAnnots is, per task slice of a Perfetto trace ("track/name"), its
// impl and team annotations ("-" where it has none).
func pfTaskAnnots(t *testing.T, data []byte) map[string]string {
	t.Helper()
	tracks := map[uint64]string{}
	names := map[uint64]string{}
	out := map[string]string{}
	for _, p := range pfDecode(t, data) {
		pkt := pfDecode(t, p.b)
		if td, ok := pfGet(pkt, pfTrackDescriptor); ok {
			fs := pfDecode(t, td.b)
			uuid, _ := pfGet(fs, pfTDUUID)
			n, _ := pfGet(fs, pfTDName)
			tracks[uuid.v] = string(n.b)
			continue
		}
		if id, ok := pfGet(pkt, pfInternedData); ok {
			for _, en := range pfDecode(t, id.b) {
				fs := pfDecode(t, en.b)
				iid, _ := pfGet(fs, pfENIID)
				n, _ := pfGet(fs, pfENName)
				names[iid.v] = string(n.b)
			}
		}
		te, ok := pfGet(pkt, pfTrackEvent)
		if !ok {
			continue
		}
		fs := pfDecode(t, te.b)
		if cat, _ := pfGet(fs, pfTECategories); string(cat.b) != "task" {
			continue
		}
		track, _ := pfGet(fs, pfTETrackUUID)
		name, _ := pfGet(fs, pfTENameIID)
		impl, team := "-", "-"
		for _, f := range fs {
			if f.num != pfTEAnnotations {
				continue
			}
			a := pfDecode(t, f.b)
			switch n, _ := pfGet(a, pfDAName); string(n.b) {
			case "impl":
				v, _ := pfGet(a, pfDAInt)
				impl = fmt.Sprint(v.v)
			case "team":
				v, _ := pfGet(a, pfDAString)
				team = string(v.b)
			}
		}
		out[tracks[track.v]+"/"+names[name.v]] = impl + " " + team
	}
	return out
}

// The Perfetto trace has the team's task on both members' tracks, with
// its implementation and team, and the flow from the master's slice;
// streamed and written from memory alike.
func TestPerfettoTeam(t *testing.T) {
	native := recordTeam(t)
	tr, err := Read(bytes.NewReader(native))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		convert func(io.Writer) error
	}{
		{"stream", func(w io.Writer) error { return ConvertPerfetto(w, bytes.NewReader(native)) }},
		{"in memory", tr.WritePerfetto},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := c.convert(&b); err != nil {
				t.Fatal(err)
			}
			got := checkPerfetto(t, b.Bytes())
			comparePerfetto(t, gotPerfetto(got, true), wantPerfetto(tr, true))
			want := map[string]string{"w1/pgemm": "0 1 2", "w2/pgemm (team of 2, master 1)": "0 1 2", "w2/scal": "1 -"}
			if a := pfTaskAnnots(t, b.Bytes()); !reflect.DeepEqual(a, want) {
				t.Errorf("task slices' impl and team %v, want %v", a, want)
			}
			if !reflect.DeepEqual(got.pairs, [][2]uint64{{1, 2}}) {
				t.Errorf("flows %v, want [[1 2]]", got.pairs)
			}
		})
	}
}

// In the Paje trace the team's codelet is the state of both members'
// threads.
func TestPajeTeam(t *testing.T) {
	tr, err := Read(bytes.NewReader(recordTeam(t)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tr.WritePaje(&b, tr.Summarize()); err != nil {
		t.Fatal(err)
	}
	checkPaje(t, b.Bytes())
	alias := map[string]string{} // codelet -> its state value
	set := map[string][]string{} // thread -> the values set, in order
	for _, l := range strings.Split(b.String(), "\n") {
		f := strings.Split(l, "\t")
		switch {
		case len(f) == 5 && f[0] == "6" && f[2] == "S":
			alias[strings.Trim(f[3], `"`)] = f[1]
		case len(f) == 5 && f[0] == "10":
			set[f[2]] = append(set[f[2]], f[4])
		}
	}
	pgemm, scal := alias["pgemm"], alias["scal"]
	// WritePaje sets Id where each thread's last segment ends: after scal
	// on t2, after the idle state that ends the run on t1.
	want := map[string][]string{
		"t1": {"Id", "Sl", "Id", "Sc", pgemm, "Id", "Id"},
		"t2": {"Id", "Sc", pgemm, "Sc", scal, "Id"},
	}
	if pgemm == "" || scal == "" || !reflect.DeepEqual(set, want) {
		t.Errorf("thread states %v, want %v (codelet values %v)", set, want, alias)
	}
}

// The state deriver counts a team's task on every member: a member is not
// idle while it runs, and only the master's record says when it slept.
func TestStateDeriverTeam(t *testing.T) {
	for _, tc := range []struct {
		name string
		team []int
		want []State
	}{
		{"on one worker", nil, []State{
			{0, StateSleeping, 0, 5, 1}, {0, StateIdle, 5, 10, 1},
			{1, StateIdle, 0, 30, 2},
		}},
		{"on a team", []int{0, 1}, []State{
			{0, StateSleeping, 0, 5, 1}, {0, StateIdle, 5, 10, 1},
			{1, StateIdle, 0, 10, 1}, {1, StateIdle, 20, 30, 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []State
			d := newStateDeriver(func(s State) { got = append(got, s) })
			d.seen(0)
			d.run(&Task{ID: 1, Worker: 0, Team: tc.team, Start: 10, End: 20, SleepStart: 0, SleepEnd: 5})
			d.run(&Task{ID: 2, Worker: 1, Start: 30, End: 40})
			d.finish()
			want := append(tc.want, State{0, StateIdle, 20, 40, 0})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}

// A run record without the version 3 flags, written by the previous
// version or by these, reads as a task on one worker whose
// implementation is unknown; version 3's flags read as written, in
// version 3 (times since 0) and version 4 (start a difference, end a
// duration).
func TestReadRunFlags(t *testing.T) {
	impl := func(a *appender) uint64 { a.u(2); return runImpl }
	team := func(a *appender) uint64 {
		a.u(3)
		a.u(4)
		a.u(0)
		a.u(5)
		return runTeam
	}
	for _, tc := range []struct {
		name  string
		magic string
		extra func(a *appender) uint64 // appends the fields, returns the flags
		impl  int
		team  []int
	}{
		{"version 2", magicV2, nil, -1, nil},
		{"version 3, no flag", magicV3, nil, -1, nil},
		{"version 3, implementation", magicV3, impl, 2, nil},
		{"version 3, team", magicV3, team, -1, []int{4, 0, 5}},
		{"version 4, no flag", Magic, nil, -1, nil},
		{"version 4, implementation", Magic, impl, 2, nil},
		{"version 4, team", Magic, team, -1, []int{4, 0, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := appender{b: []byte(tc.magic)}
			a.i(42)
			a.b = append(a.b, kindRun)
			a.u(7)  // job
			a.i(4)  // worker
			a.i(20) // start
			if tc.magic == Magic {
				a.i(10) // duration
			} else {
				a.i(30) // end
			}
			a.u(0xbeef) // footprint
			var fields appender
			var flags uint64
			if tc.extra != nil {
				flags = tc.extra(&fields)
			}
			a.u(flags)
			a.b = append(a.b, fields.b...)
			a.b = append(a.b, kindEnd)
			var j bytes.Buffer
			if err := ConvertChrome(&j, bytes.NewReader(a.b)); err != nil {
				t.Fatalf("ConvertChrome: %v", err)
			}
			for format, in := range map[string][]byte{"native": a.b, "json": j.Bytes()} {
				tr, err := Read(bytes.NewReader(in))
				if err != nil {
					t.Fatalf("%s: %v", format, err)
				}
				if len(tr.Tasks) != 1 {
					t.Fatalf("%s: tasks %+v, want job 7", format, tr.Tasks)
				}
				if x := tr.Tasks[0]; !x.Ran || x.Worker != 4 || x.Start != 20 || x.End != 30 || x.Impl != tc.impl || !reflect.DeepEqual(x.Team, tc.team) {
					t.Errorf("%s: job 7 ran %v on worker %d from %d to %d, implementation %d, team %#v; want worker 4, 20 to 30, implementation %d, team %#v",
						format, x.Ran, x.Worker, x.Start, x.End, x.Impl, x.Team, tc.impl, tc.team)
				}
			}
		})
	}
}

// A team the run record cannot have is a corrupt trace.
func TestReadBadTeam(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []uint64
		want    string
	}{
		{"of one", []uint64{4}, "a team of 1 workers"},
		{"another master", []uint64{5, 4}, "its team's master is 5"},
		{"a worker out of range", []uint64{4, 1 << 40}, "a team with worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := appender{b: []byte(Magic)}
			a.i(42)
			a.b = append(a.b, kindRun)
			for _, v := range []uint64{7, 8, 20, 30} { // job, worker 4 (zigzag), start 10, end 15
				a.u(v)
			}
			a.u(0) // footprint
			a.u(runTeam)
			a.u(uint64(len(tc.members)))
			for _, m := range tc.members {
				a.u(m)
			}
			a.b = append(a.b, kindEnd)
			if _, err := Read(bytes.NewReader(a.b)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// The chart draws the team's task on both members' rows, its tooltip
// naming the implementation and the team.
func TestWriteSVGTeam(t *testing.T) {
	tr, err := Read(bytes.NewReader(recordTeam(t)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tr.WriteSVG(&b, tr.Summarize(), SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	const title = "pgemm (job 1): 60 ns, from 30 ns to 90 ns, implementation 0, on a team of 2 (workers [1 2], master 1)"
	if n := strings.Count(b.String(), title); n != 2 {
		t.Errorf("%d boxes titled %q, want one per member:\n%s", n, title, b.String())
	}
}
