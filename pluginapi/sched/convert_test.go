package sched

import (
	"reflect"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
)

// TestInitConvert: an InitRequest survives initToProto then initFromProto
// unchanged; a nil request comes back empty.
func TestInitConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *InitRequest
		// want is what comes back, when it is not in.
		want *InitRequest
	}{
		{"nil", nil, &InitRequest{}},
		{"empty", &InitRequest{}, nil},
		{"zero worker and ring", &InitRequest{Workers: []Worker{{}}, WorkerRings: []WorkerRing{{}}}, nil},
		{"every field", &InitRequest{
			Workers: []Worker{{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CUDA, Node: 1}},
			Rings: RingRefs{
				Events:    base.Span{Offset: 0, Size: 1 << 16},
				Decisions: base.Span{Offset: 1 << 16, Size: 1 << 16},
				Bell:      7,
				CoreBell:  8,
			},
			WorkerRings:   []WorkerRing{{Worker: 0, Ring: base.Span{Offset: 1 << 17, Size: 4096}, Bell: 9}},
			QueueDepth:    2,
			MaxQueueDepth: 16,
			QueuedWork:    250 * time.Microsecond,
			SpinIters:     100,
			Combined:      []Worker{{ID: 2, Arch: driver.CPU, Members: []int{0, 3}}},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			if got := initFromProto(initToProto(tc.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip gave %+v, want %+v", got, want)
			}
		})
	}
}
