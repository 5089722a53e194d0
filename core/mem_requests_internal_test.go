package core

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Prefetches leave a node's queue by priority, then in arrival order, at
// most maxPrefetches at a time; idle prefetches only when the node is idle
// and no prefetch is queued or in flight.
func TestPrefetchQueueOrder(t *testing.T) {
	var n nodeRequests
	reqs := map[string]*dataReq{}
	for _, r := range []struct {
		name string
		kind reqKind
		prio int
	}{
		{"a", reqPrefetch, 0}, {"b", reqPrefetch, 5}, {"c", reqPrefetch, 0}, {"d", reqPrefetch, -3},
		{"idle1", reqIdle, 1}, {"idle9", reqIdle, 9}, {"idle1b", reqIdle, 1},
	} {
		q := &dataReq{kind: r.kind, prio: r.prio}
		reqs[r.name] = q
		n.add(q)
	}
	name := func(q *dataReq) string {
		for k, v := range reqs {
			if v == q {
				return k
			}
		}
		return "none"
	}
	steps := []struct {
		idle   bool
		issued int
		want   string
	}{
		{false, 0, "b"},
		{false, 1, "a"},
		{true, 2, "none"}, // two in flight
		{false, 1, "c"},
		{true, 0, "d"},
		{true, 1, "none"},  // idle ones wait for the prefetch in flight
		{false, 0, "none"}, // and for an idle node
		{true, 0, "idle9"},
		{true, 0, "idle1"},
		{true, 0, "idle1b"},
		{true, 0, "none"},
	}
	for i, s := range steps {
		n.issued = s.issued
		if got := name(n.next(s.idle)); got != s.want {
			t.Fatalf("step %d (idle %v, %d issued): next is %s, want %s", i, s.idle, s.issued, got, s.want)
		}
	}
}

// streamCopy carries bytes between runs that do not line up.
func TestStreamCopy(t *testing.T) {
	src := []byte("abcdefghij")
	dst := make([]byte, 12)
	for i := range dst {
		dst[i] = '.'
	}
	streamCopy(dst, []wire.CopyRange{{SrcOffset: 0, Len: 3}, {SrcOffset: 4, Len: 3}, {SrcOffset: 8, Len: 4}},
		src, []wire.CopyRange{{SrcOffset: 1, Len: 5}, {SrcOffset: 7, Len: 3}, {SrcOffset: 0, Len: 2}})
	if got, want := string(dst), "bcd.efh.ijab"; got != want {
		t.Fatalf("dst = %q, want %q", got, want)
	}
}
