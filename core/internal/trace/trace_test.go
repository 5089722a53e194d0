package trace

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
)

func TestWriteChrome(t *testing.T) {
	type ev struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	}
	for _, tc := range []struct {
		name string
		evs  []Event
		want []ev // the task events, after the metadata
	}{
		{"empty", nil, nil},
		{"origin is the earliest start", []Event{
			{Worker: 1, Name: "b", Start: 5000, End: 7000},
			{Worker: 0, Name: "a", Start: 3000, End: 4000},
		}, []ev{
			{Name: "b", Ph: "X", Ts: 2, Dur: 2, Tid: 1},
			{Name: "a", Ph: "X", Ts: 0, Dur: 1, Tid: 0},
		}},
		{"args", []Event{{
			Worker: 0, Name: "f", Start: 0, End: 1000, Failed: true, Iter: [2]int64{3, 7}, NIter: 2,
			Buffers: []Buffer{{Index: 1, Handle: "h2", Name: "A", Coords: []int{1, 2}}, {Index: 0, Handle: "h1"}},
		}}, []ev{{Name: "f", Ph: "X", Ts: 0, Dur: 1, Tid: 0, Args: map[string]any{
			"failed": true, "iteration": 3.0, "outer_iteration": 7.0,
			"buffers": []any{
				map[string]any{"index": 1.0, "handle": "h2", "name": "A", "coordinates": []any{1.0, 2.0}},
				map[string]any{"index": 0.0, "handle": "h1"},
			},
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			workers := []Worker{{ID: 0, Name: "worker 0"}, {ID: 1, Name: "worker 1"}}
			if err := WriteChrome(&b, workers, tc.evs); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				TraceEvents []ev `json:"traceEvents"`
			}
			if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b.String())
			}
			meta := 1 + len(workers)
			if len(doc.TraceEvents) != meta+len(tc.evs) {
				t.Fatalf("%d events, want %d", len(doc.TraceEvents), meta+len(tc.evs))
			}
			if n := doc.TraceEvents[2].Args["name"]; n != "worker 1" {
				t.Errorf("worker row named %v", n)
			}
			if got := doc.TraceEvents[meta:]; len(tc.want) > 0 && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestRecorderConcurrent(t *testing.T) {
	var r Recorder
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				r.Add(Event{Worker: w, Start: int64(i)})
			}
		}()
	}
	wg.Wait()
	if n := len(r.Events()); n != 400 {
		t.Fatalf("%d events recorded, want 400", n)
	}
}
