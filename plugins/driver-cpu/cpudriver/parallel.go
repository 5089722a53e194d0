package cpudriver

// Parallel tasks (docs/design/scheduling.md, "Parallel tasks"): the
// workers of a combined worker meet in driver.Teams; every member runs an
// SPMD kernel with its rank, the master alone a FORKJOIN one, whose
// goroutines use the cores the other members leave idle while they wait.
// Only the master posts the completion.

import (
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// runTeam runs w's part of the parallel task in w.exec, or refuses it
// (refuse not nil: the application runs no task on w), and reports whether
// w posts the task's completion, with its error.
func (d *Driver) runTeam(w *worker, refuse error) (post bool, err error) {
	id := w.rings.Spec.ID
	if refuse != nil {
		return d.teams.Fail(id, &w.exec, refuse)
	}
	return d.teams.Run(id, &w.exec, func(int) error { return d.execute(w) })
}

// setTeam fills a kernel's view of its combined worker from e, for the
// worker with the given ID: empty for a task on one worker.
func setTeam(t *kernel.Team, e *wire.Exec, worker int) {
	t.Members = t.Members[:0]
	t.Combined, t.Rank = 0, 0
	if e.Flags&wire.ExecParallel == 0 {
		return
	}
	for _, m := range e.Members {
		t.Members = append(t.Members, int(m))
	}
	t.Combined, t.Rank = int(e.Combined), e.Rank(worker)
}
