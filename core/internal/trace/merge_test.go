package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two ranks' traces, the second started 1 ms later: one time axis, rows
// and numbers per rank, and the base name finds the rank files.
func TestMergeRanks(t *testing.T) {
	rank := func(origin int64, peer int) *Trace {
		task := newTask(7)
		task.Ran, task.Worker, task.Start, task.End, task.Preds = true, 0, 100, 200, []uint64{6}
		task.Handles = []Access{{Handle: 3}}
		return &Trace{Origin: origin, Complete: true, Format: "native",
			Workers:   []Worker{{ID: 0, Name: "CPU 0", Arch: "cpu"}},
			Nodes:     []Node{{ID: 0, Name: "RAM"}},
			Tasks:     []*Task{&task},
			States:    []State{{Worker: 0, Kind: StateIdle, Start: 0, End: 100}},
			Transfers: []Transfer{{Src: 0, Dst: 0, Handle: 3, Start: 50, End: 60}},
			Comms:     []Comm{{Send: peer == 1, Peer: peer, Bytes: 8, Start: 150, End: 160}}}
	}
	m, err := Merge([]*Trace{rank(1_000_000_000, 1), rank(1_001_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Workers) != 2 || m.Workers[1].ID != 1 || m.Workers[1].Name != "rank 1 CPU 0" || m.Nodes[1].ID != 1 {
		t.Fatalf("workers %+v, nodes %+v", m.Workers, m.Nodes)
	}
	a, b := m.Tasks[0], m.Tasks[1]
	if a.ID == b.ID || b.Worker != 1 || b.Start != 1_000_100 || b.End != 1_000_200 || a.Start != 100 || b.Preds[0] != 6|1<<rankShift || b.Handles[0].Handle == a.Handles[0].Handle {
		t.Fatalf("tasks %+v and %+v: want rank 1's shifted by 1 ms, on worker 1, with numbers of its own", *a, *b)
	}
	if s := m.States[1]; s.Worker != 1 || s.End != 1_000_100 {
		t.Fatalf("rank 1's state %+v", s)
	}
	if x := m.Transfers[1]; x.Src != 1 || x.Start != 1_000_050 {
		t.Fatalf("rank 1's transfer %+v", x)
	}
	if c := m.Comms[1]; c.Rank != 1 || c.Peer != 0 || c.Start != 1_000_150 {
		t.Fatalf("rank 1's communication %+v", c)
	}
	var sum strings.Builder
	if err := m.WriteSummary(&sum, m.Summarize()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "rank -> peer rank") || !strings.Contains(sum.String(), "1 -> 0") {
		t.Errorf("summary of the merged trace:\n%s\nwant the communications per rank and peer", sum.String())
	}
	if _, err := Merge([]*Trace{rank(0, 1), rank(5, 0)}); err == nil || !strings.Contains(err.Error(), "rank 0's trace does not say when it started") {
		t.Errorf("Merge of a trace without an origin: %v", err)
	}

	dir := t.TempDir()
	base := filepath.Join(dir, "run.trace")
	if _, err := ReadFile(base); err == nil || !strings.Contains(err.Error(), "nor rank files") {
		t.Errorf("ReadFile of a base name without rank files: %v", err)
	}
	for _, f := range []string{"run.rank0.trace", "run.rank2.trace"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := RankFiles(base); err == nil || !strings.Contains(err.Error(), "rank 1's is missing") {
		t.Errorf("RankFiles with rank 1 missing: %v", err)
	}
}
