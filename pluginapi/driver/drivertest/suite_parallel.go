package drivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// parallelTasks checks the teams of a driver whose fingerprint sets
// Parallel (driver.Teams): parallel tasks of every team size, FORKJOIN
// with the harness's task and SPMD with its Team task, between sequential
// tasks on both rings of every worker, each answered once, by the
// master; a failing kernel in a team, reported by the master; and a team
// that can never form (its task posted to the master alone, as when the
// core stops before posting the rest), which Deinit must not wait for.
func parallelTasks(t *testing.T, h Harness) {
	r := h.rig(t)
	if !r.FP.Parallel {
		t.Skip("the driver runs every task on one worker (Fingerprint.Parallel unset)")
	}
	if len(r.Workers) < 2 {
		t.Skip("a team needs two workers; the harness runs one")
	}
	tasks := h.ok(r)
	warm(r, tasks)
	n := len(r.Workers)
	var ids []uint64
	var checks []func() error
	for round := range 24 {
		size := 2 + round%(n-1)
		var members []*Worker
		for k := range size {
			members = append(members, r.Workers[(round+k)%n])
		}
		// Sequential tasks on every worker around the teams, on the
		// scheduler ring every other round: a member busy with one must
		// still come to its team.
		for _, w := range r.Workers {
			ids = append(ids, w.Run(tasks[w.Index], w.Sched != nil && round%2 == 0))
		}
		ids = append(ids, r.RunTeam(tasks[members[0].Index], wire.ExecForkJoin, 100+round, members...))
		if h.Team != nil {
			task, check := h.Team(members[0], size)
			ids = append(ids, r.RunTeam(task, wire.ExecSPMD, 200+round, members...))
			checks = append(checks, check)
		}
		for _, w := range r.Workers {
			ids = append(ids, w.Run(tasks[w.Index], w.Sched != nil && round%2 == 1))
		}
	}
	r.OK(ids...)
	for i, check := range checks {
		if err := check(); err != nil {
			t.Fatalf("SPMD team task %d: %v", i, err)
		}
	}
	if h.Fail != nil {
		msg := message(100)
		if got := r.Failed(r.RunTeam(h.Fail(r.W(0), msg), wire.ExecForkJoin, 300, r.Workers[:2]...)); !strings.Contains(got, msg) {
			t.Fatalf("a team whose kernel failed with %q reported %q", msg, got)
		}
		r.OK(r.W(1).Run(tasks[1], false)) // the other member goes on
	}

	// A team that never forms: the task reaches the master only.
	e := wire.Exec{ID: r.ID(), Kernel: uint32(tasks[0].Kernel), Flags: tasks[0].Flags | wire.ExecForkJoin, Buffers: tasks[0].Buffers, Arg: tasks[0].Arg,
		Combined: 400, Members: []int32{int32(r.W(0).Spec.ID), int32(r.W(1).Spec.ID)}}
	r.sent[e.ID] = r.W(0)
	r.W(0).Send(e.Len(), e.Encode)
	time.Sleep(20 * time.Millisecond) // the master waits for its teammate
	r.Timeout = deinitLimit
	start := time.Now()
	if err := r.Deinit(); err != nil {
		t.Fatalf("Deinit with a team half formed: %v", err)
	}
	r.Timeout = h.Timeout
	if c, ok := r.got[e.ID]; !ok || !c.Failed {
		t.Fatalf("a team whose member stopped before joining it: completion %+v (received: %v; Deinit took %v), want a failure from the master", c, ok, time.Since(start))
	}
	strays(r)
}
