package driver

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

func TestChainSkip(t *testing.T) {
	after := func(id, pred uint64) *wire.Exec {
		return &wire.Exec{ID: id, Flags: wire.ExecAfter, After: uint32(id - pred)}
	}
	var c Chain
	if c.Skip(after(2, 1)) {
		t.Fatal("skipped with no failure recorded")
	}
	c.Failed(5)
	cases := []struct {
		name string
		e    *wire.Exec
		want bool
	}{
		{"after the failed task", after(6, 5), true},
		{"after another task", after(7, 6), false},
		{"after the failed task, not flagged", &wire.Exec{ID: 6}, false},
		{"predecessor submitted later", after(3, 5), true},
	}
	for _, tc := range cases {
		if got := c.Skip(tc.e); got != tc.want {
			t.Errorf("%s: Skip = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A failure stays remembered across a queue's worth of others.
	for id := uint64(100); id < 100+chainMemory-1; id++ {
		c.Failed(id)
	}
	if !c.Skip(after(1000, 5)) {
		t.Error("the failure was forgotten within chainMemory failures")
	}
	c.Failed(999)
	if c.Skip(after(1000, 5)) {
		t.Error("the failure is remembered past chainMemory failures")
	}
}
