package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
)

// teamRecorder records what the host tells a ParallelPolicy.
type teamRecorder struct {
	pinned
	calls [][]int // the IDs of each SetCombinedWorkers
}

func (r *teamRecorder) SetCombinedWorkers(cs []Worker) {
	var ids []int
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	r.calls = append(r.calls, ids)
}

func TestHostCombinedWorkers(t *testing.T) {
	cpu := func(ids ...int) []Worker {
		var ws []Worker
		for _, id := range ids {
			ws = append(ws, Worker{ID: id, Arch: driver.CPU})
		}
		return ws
	}
	team := func(id int, members ...int) Worker { return Worker{ID: id, Arch: driver.CPU, Members: members} }
	bad := []struct {
		name     string
		combined []Worker
		want     string
	}{
		{"negative id", []Worker{team(-1, 0, 1)}, "must not be negative"},
		{"a worker's id", []Worker{team(1, 0, 2)}, "taken by another worker"},
		{"twice", []Worker{team(5, 0, 1), team(5, 2, 3)}, "taken by another worker"},
		{"no member", []Worker{team(5)}, "has no member"},
		{"itself a member", []Worker{team(5, 0, 5)}, "member 5 is not a worker"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			h := &Host{policy: &teamRecorder{}, workers: cpu(0, 1, 2, 3)}
			if err := h.initCombined(tt.combined); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("initCombined: %v, want an error saying %q", err, tt.want)
			}
		})
	}

	// The policy hears of the combined workers whose members it has, at
	// Init and whenever a change of workers changes them.
	rec := &teamRecorder{}
	h := &Host{policy: rec, workers: cpu(0, 1, 2, 3)}
	if err := h.initCombined([]Worker{team(4, 0, 1), team(5, 2, 3), team(6, 0, 1, 2, 3)}); err != nil {
		t.Fatal(err)
	}
	h.updateCombined(true)
	steps := []struct {
		workers []Worker
	}{
		{cpu(0, 1, 2)},       // 3 leaves: 5 and 6 go
		{cpu(0, 2)},          // 1 leaves: 4 goes
		{cpu(0, 2)},          // no change: no call
		{cpu(0, 2, 1, 3)},    // back: all three
		{cpu(0, 2, 1, 3, 7)}, // a worker without team: no call
	}
	for _, s := range steps {
		h.workers = s.workers
		h.updateCombined(false)
	}
	if got, want := fmt.Sprint(rec.calls), "[[4 5 6] [4] [] [4 5 6]]"; got != want {
		t.Fatalf("SetCombinedWorkers calls %s, want %s", got, want)
	}
}
