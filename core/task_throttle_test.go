package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
)

// TestSubmitThrottle: with LimitMaxSubmitted 4 and LimitMinSubmitted 2, a
// fifth Submit waits while four gated tasks are pending, and goes on once
// they drain to two or fewer; a submit from a callback is never held.
func TestSubmitThrottle(t *testing.T) {
	cfg := testConfig(pluginDir)
	cfg.LimitMaxSubmitted, cfg.LimitMinSubmitted = 4, 2
	rt, err := core.Init(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	const gate core.TagID = 500
	for i := range 4 {
		tag := core.TagID(501 + i)
		if err := rt.DeclareTagDeps(tag, gate); err != nil {
			t.Fatal(err)
		}
		if err := rt.Submit(&core.Task{Codelet: emptyCl, UseTag: true, Tag: tag}); err != nil {
			t.Fatal(err)
		}
	}
	if n := rt.NSubmitted(); n != 4 {
		t.Fatalf("NSubmitted = %d after four gated tasks", n)
	}
	fifth := make(chan error, 1)
	go func() { fifth <- rt.Submit(&core.Task{Codelet: emptyCl}) }()
	select {
	case err := <-fifth:
		t.Fatalf("the fifth Submit returned (%v) while four tasks were pending: not held", err)
	case <-time.After(100 * time.Millisecond):
	}
	if n := rt.NSubmitted(); n != 4 {
		t.Fatalf("NSubmitted = %d while the fifth Submit is held, want 4", n)
	}
	rt.TagNotifyFromApps(gate)
	if err := <-fifth; err != nil {
		t.Fatalf("the fifth Submit after the gate opened: %v", err)
	}

	// A callback submitting while the limit is reached is not held: it
	// would wait for its own task's completion. Three gated tasks and the
	// callback's own task make four pending while the callback runs.
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tag := core.TagID(601 + i)
		if err := rt.DeclareTagDeps(tag, 600); err != nil {
			t.Fatal(err)
		}
		if err := rt.Submit(&core.Task{Codelet: emptyCl, UseTag: true, Tag: tag}); err != nil {
			t.Fatal(err)
		}
	}
	fromCallback := make(chan error, 1)
	withCallback := &core.Task{Codelet: emptyCl, Callback: func(*core.Task) {
		fromCallback <- rt.Submit(&core.Task{Codelet: emptyCl})
	}}
	if err := rt.Submit(withCallback); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fromCallback:
		if err != nil {
			t.Fatalf("submit from a callback at the limit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a submit from a callback was held at the limit: the completion path is stuck")
	}
	rt.TagNotifyFromApps(600)
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
}

// TestContextWaitForNSubmitted: a context's WaitForNSubmitted returns once
// no more than n of its tasks are pending, counting only its own.
func TestContextWaitForNSubmitted(t *testing.T) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	c, err := rt.CreateSchedContext("half", []int{1}, "")
	if err != nil {
		t.Fatal(err)
	}
	const gate core.TagID = 700
	for i := range 3 {
		tag := core.TagID(701 + i)
		if err := rt.DeclareTagDeps(tag, gate); err != nil {
			t.Fatal(err)
		}
		if err := rt.Submit(&core.Task{Codelet: emptyCl, UseTag: true, Tag: tag, SchedContext: c}); err != nil {
			t.Fatal(err)
		}
	}
	// Gated tasks outside the context do not count.
	if err := rt.DeclareTagDeps(800, 801); err != nil {
		t.Fatal(err)
	}
	if err := rt.Submit(&core.Task{Codelet: emptyCl, UseTag: true, Tag: 800}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForNSubmitted(3); err != nil {
		t.Fatalf("WaitForNSubmitted(3) with three pending: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.WaitForNSubmitted(0) }()
	select {
	case err := <-done:
		t.Fatalf("WaitForNSubmitted(0) returned (%v) with three tasks pending", err)
	case <-time.After(100 * time.Millisecond):
	}
	rt.TagNotifyFromApps(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForNSubmitted(-1); err == nil {
		t.Fatal("WaitForNSubmitted(-1) accepted")
	}
	rt.TagNotifyFromApps(801)
}
