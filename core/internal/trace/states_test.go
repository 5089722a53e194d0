package trace

import (
	"reflect"
	"testing"
)

func TestClassify(t *testing.T) {
	type piece struct {
		k    StateKind
		s, e int64
	}
	for _, tc := range []struct {
		name   string
		g0, g1 int64
		ready  int64
		sleep  [2]int64
		fetch  [][2]int64
		want   []piece
	}{
		{"ready before the gap: all scheduling", 10, 20, 5, [2]int64{}, nil, []piece{{StateScheduling, 10, 20}}},
		{"ready at the end: all idle", 10, 20, 20, [2]int64{}, nil, []piece{{StateIdle, 10, 20}}},
		{"ready inside", 10, 20, 14, [2]int64{}, nil, []piece{{StateIdle, 10, 14}, {StateScheduling, 14, 20}}},
		{"a fetch splits the idle", 0, 100, 80, [2]int64{}, [][2]int64{{20, 30}}, []piece{{StateIdle, 0, 20}, {StateFetching, 20, 30}, {StateIdle, 30, 80}, {StateScheduling, 80, 100}}},
		{"overlapping fetches merge, out of order", 0, 100, 0, [2]int64{}, [][2]int64{{40, 60}, {10, 50}}, []piece{{StateScheduling, 0, 10}, {StateFetching, 10, 60}, {StateScheduling, 60, 100}}},
		{"touching fetches merge", 0, 10, 0, [2]int64{}, [][2]int64{{0, 5}, {5, 10}}, []piece{{StateFetching, 0, 10}}},
		{"a fetch inside another", 0, 10, 0, [2]int64{}, [][2]int64{{0, 8}, {2, 4}}, []piece{{StateFetching, 0, 8}, {StateScheduling, 8, 10}}},
		{"a sleep in the idle", 0, 100, 80, [2]int64{10, 70}, nil, []piece{{StateIdle, 0, 10}, {StateSleeping, 10, 70}, {StateIdle, 70, 80}, {StateScheduling, 80, 100}}},
		{"a sleep past ready: scheduling", 0, 100, 50, [2]int64{10, 90}, nil, []piece{{StateIdle, 0, 10}, {StateSleeping, 10, 50}, {StateScheduling, 50, 100}}},
		{"a sleep across a fetch: fetching", 0, 100, 100, [2]int64{10, 90}, [][2]int64{{30, 40}}, []piece{{StateIdle, 0, 10}, {StateSleeping, 10, 30}, {StateFetching, 30, 40}, {StateSleeping, 40, 90}, {StateIdle, 90, 100}}},
		{"a sleep from before the gap: clipped", 0, 100, 100, [2]int64{-50, 20}, nil, []piece{{StateSleeping, 0, 20}, {StateIdle, 20, 100}}},
		{"a sleep outside the gap: none", 0, 100, 100, [2]int64{-50, -10}, nil, []piece{{StateIdle, 0, 100}}},
		{"a sleep after the ready time only: scheduling", 0, 100, 20, [2]int64{30, 90}, nil, []piece{{StateIdle, 0, 20}, {StateScheduling, 20, 100}}},
		{"a sleep covering the gap", 10, 20, 30, [2]int64{0, 40}, nil, []piece{{StateSleeping, 10, 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []piece
			classify(tc.g0, tc.g1, tc.ready, tc.sleep, tc.fetch, func(k StateKind, s, e int64) { got = append(got, piece{k, s, e}) })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStateDeriver: the transfers that count are those of the task's
// handles to its worker's node, within the gap; the deriver keeps the
// last few per handle.
func TestStateDeriver(t *testing.T) {
	var got []State
	d := newStateDeriver(func(s State) { got = append(got, s) })
	d.worker(Worker{ID: 0, Node: 1})
	d.worker(Worker{ID: 1, Node: 0})
	d.seen(0)
	d.transfer(Transfer{Dst: 1, Handle: 7, Start: 2, End: 4}) // worker 0's
	d.transfer(Transfer{Dst: 0, Handle: 7, Start: 4, End: 6}) // to worker 1's node
	d.transfer(Transfer{Dst: 1, Handle: 8, Start: 5, End: 7}) // not task 1's handle
	d.transfer(Transfer{Dst: 1, Handle: 7, Start: 6, End: 7, Failed: true})
	for i := range xferSlots + 2 { // older copies of handle 9 fall out
		d.transfer(Transfer{Dst: 1, Handle: 9, Start: int64(100 + i), End: int64(101 + i)})
	}
	d.run(&Task{ID: 1, Worker: 0, Ready: 1, Submitted: true, Start: 10, End: 20, Handles: []Access{{Handle: 7}}})
	d.run(&Task{ID: 2, Worker: 0, Ready: 15, Submitted: true, Start: 110, End: 120, Handles: []Access{{Handle: 9}}})
	// Worker 1 slept from before its gap to 25, task 3 ready at 30.
	d.run(&Task{ID: 3, Worker: 1, Ready: 30, Submitted: true, Start: 40, End: 50, SleepStart: -5, SleepEnd: 25})
	d.finish()
	want := []State{
		{0, StateIdle, 0, 1, 1}, {0, StateScheduling, 1, 2, 1}, {0, StateFetching, 2, 4, 1}, {0, StateScheduling, 4, 10, 1},
		{0, StateScheduling, 20, 102, 2}, {0, StateFetching, 102, 106, 2}, {0, StateScheduling, 106, 110, 2},
		{1, StateSleeping, 0, 25, 3}, {1, StateIdle, 25, 30, 3}, {1, StateScheduling, 30, 40, 3},
		{1, StateIdle, 50, 120, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
