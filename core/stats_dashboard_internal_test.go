package core

import (
	"fmt"
	"testing"
)

// BenchmarkDashboardEngineView is the engine's part of a dashboard sample
// with n tasks pushed and not completed: the walk over engine.jobs that
// holds jobsMu, the lock every push takes.
func BenchmarkDashboardEngineView(b *testing.B) {
	for _, n := range []int{0, 1000, dashWalkMax, 100000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			rt := &Runtime{nodes: []*memNode{{name: "RAM"}}}
			for i := range 2 {
				rt.workers = append(rt.workers, &workerState{id: i})
			}
			e := &engine{rt: rt, jobs: newJobTable()}
			c := &SchedContext{name: GlobalSchedContextName}
			e.ctxs.Store(&[]*SchedContext{c})
			cl := &Codelet{Name: "empty"}
			for i := range n {
				// A third of them on each worker, the rest in the policy.
				e.jobs.put(&job{id: uint64(i), worker: int32(i%3 - 1), sctx: c, task: &Task{Codelet: cl}})
			}
			b.ReportAllocs()
			for b.Loop() {
				v := e.view()
				if got, want := v.queued[0]+v.queued[1]+v.inPolicy[0], min(n, dashWalkMax); got != want || v.tracked != n {
					b.Fatalf("view counts %d of %d tasks, want %d of %d", got, v.tracked, want, n)
				}
			}
		})
	}
}

// TestDashboardEngineView: the view counts each worker's tasks and names
// its oldest, counts the policies' tasks per context, and stops its walk
// at dashWalkMax, saying so.
func TestDashboardEngineView(t *testing.T) {
	rt := &Runtime{nodes: []*memNode{{name: "RAM"}}}
	for i := range 2 {
		rt.workers = append(rt.workers, &workerState{id: i})
	}
	e := &engine{rt: rt, jobs: newJobTable()}
	global, other := &SchedContext{name: GlobalSchedContextName}, &SchedContext{name: "other"}
	e.ctxs.Store(&[]*SchedContext{global, other})
	add := func(id uint64, worker int32, c *SchedContext, name string) {
		e.jobs.put(&job{id: id, worker: worker, sctx: c, task: &Task{Codelet: &Codelet{Name: name}}})
	}
	add(7, 0, global, "second")
	add(5, 0, global, "first")
	add(9, 1, other, "third")
	add(10, -1, global, "waiting")
	add(11, -1, other, "waiting")
	add(12, -1, other, "waiting")
	v := e.view()
	if v.queued[0] != 2 || v.queued[1] != 1 || v.current[0] != "first" || v.current[1] != "third" {
		t.Errorf("workers: queued %v, current %q", v.queued, v.current)
	}
	if v.inPolicy[0] != 1 || v.inPolicy[1] != 2 || v.assigned[0] != 2 || v.assigned[1] != 1 {
		t.Errorf("contexts: in policy %v, assigned %v", v.inPolicy, v.assigned)
	}
	if v.walked != 6 || v.tracked != 6 {
		t.Errorf("walked %d of %d, want 6 of 6", v.walked, v.tracked)
	}
	for i := range 2 * dashWalkMax {
		add(uint64(100+i), -1, global, "many")
	}
	if v := e.view(); v.walked != dashWalkMax || v.tracked != 6+2*dashWalkMax || v.inPolicy[0]+v.inPolicy[1]+v.assigned[0]+v.assigned[1] != dashWalkMax {
		t.Errorf("past the bound: walked %d of %d, counted %v %v", v.walked, v.tracked, v.inPolicy, v.assigned)
	}
}
