package driver

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// TestPipeline is the rule: tasks wait while a synchronous one runs or the
// pipeline is full; other messages never wait; depth 0 makes every task
// synchronous.
func TestPipeline(t *testing.T) {
	exec := make([]byte, wire.ExecHeaderSize)
	wire.PutExecHeader(exec, 1, 0, 0, 0, 0)
	copyMsg := make([]byte, wire.CopyHeaderSize)
	(&wire.Copy{ID: 2}).Encode(copyMsg)
	for _, tc := range []struct {
		depth, tasks int
		syncBusy     bool
		exec, other  bool
	}{
		{depth: 2, tasks: 0, exec: true, other: true},
		{depth: 2, tasks: 1, exec: true, other: true},
		{depth: 2, tasks: 2, exec: false, other: true},
		{depth: 2, tasks: 1, syncBusy: true, exec: false, other: true},
		{depth: 1, tasks: 1, exec: false, other: true},
	} {
		p := NewPipeline(tc.depth)
		for i := 0; i < tc.tasks; i++ {
			p.Started(tc.syncBusy && i == 0)
		}
		if got := p.MayTake(exec); got != tc.exec {
			t.Errorf("%+v: take a task: %v", tc, got)
		}
		if got := p.MayTake(copyMsg); got != tc.other {
			t.Errorf("%+v: take a copy: %v", tc, got)
		}
		if p.MayTake(nil) {
			t.Error("took an empty ring's message")
		}
	}
	p := NewPipeline(2)
	p.Started(true)
	if p.MayTake(exec) {
		t.Error("took a task behind a synchronous one")
	}
	p.Ended(true)
	if !p.MayTake(exec) {
		t.Error("a task waits after the synchronous one ended")
	}
	if p.Sync(wire.ExecAsync) || !p.Sync(0) {
		t.Error("depth 2: async-flagged tasks must overlap, unflagged ones not")
	}
	if z := NewPipeline(0); !z.Sync(wire.ExecAsync) || z.depth != 1 {
		t.Errorf("pipeline 0: %+v", z)
	}
}
