package mpi

// Insert: owner-computes over the ranks.

import (
	"errors"
	"fmt"

	"github.com/starpu-go/starpu/core"
)

// access is one handle of a task with its registration and the union of
// the modes the task gives it.
type access struct {
	d    *datum
	mode core.Mode
}

func (a access) reads() bool  { return a.mode&core.R != 0 }
func (a access) writes() bool { return a.mode&core.W != 0 }
func (a access) redux() bool  { return a.mode == core.Redux }

// Insert is StarPU's starpu_mpi_task_insert: every rank calls it with the
// same arguments, in the same order (from one goroutine, or ordered as if
// from one). The arguments are core.Runtime.Insert's
// (core.Data, core.Value, core.Priority, ...). The rank that runs the task
// is the owner of the data it writes; when several ranks own written
// data, or none is written, the rank owning the most bytes of the data
// the task reads among them (StarPU's MOST_R_DATA policy; the lowest rank
// on a tie; rank 0 for a task without data). Then:
//
//   - the owners of the data the task reads send it to that rank, unless
//     it holds the current value already (the cache; see Flush);
//   - that rank builds and submits the task, and returns it; the others
//     return a nil task;
//   - data written for another owner goes back to its owner after the task.
//
// A REDUX access does not choose the rank: the task contributes to the
// datum where it runs, and Redux combines the contributions on the
// owner (see Redux). A non-REDUX access to a datum with contributions
// pending on other ranks reduces them first.
//
// Every handle must be registered (Register): one that is not is an error
// wrapping ErrNotRegistered, on every rank, and nothing is sent; so is a
// REDUX access to a handle without reduction methods
// (ErrNoReductionMethods). The task's options that concern the task
// itself (callbacks, tags, TaskDeps) hold on the rank that runs it.
func (c *Comm) Insert(cl *core.Codelet, args ...core.InsertArg) (*core.Task, error) {
	return c.insert(-1, cl, args)
}

// InsertOn is Insert with the task run by rank (StarPU's
// STARPU_EXECUTE_ON_NODE): the data it reads go there, and the data it
// writes go back to their owners.
func (c *Comm) InsertOn(rank int, cl *core.Codelet, args ...core.InsertArg) (*core.Task, error) {
	if rank < 0 || rank >= c.size {
		return nil, fmt.Errorf("mpi: insert: execute on rank %d: out of range (%d ranks)", rank, c.size)
	}
	return c.insert(rank, cl, args)
}

// InsertOnData is Insert with the task run by the owner of h (StarPU's
// STARPU_EXECUTE_ON_DATA).
func (c *Comm) InsertOnData(h *core.Handle, cl *core.Codelet, args ...core.InsertArg) (*core.Task, error) {
	d, err := c.lookup(h)
	if err != nil {
		return nil, fmt.Errorf("mpi: insert: execute on data: %w", err)
	}
	return c.insert(d.owner, cl, args)
}

func (c *Comm) insert(xrank int, cl *core.Codelet, args []core.InsertArg) (*core.Task, error) {
	if err := c.failure(); err != nil {
		return nil, fmt.Errorf("mpi: insert: %w", err)
	}
	c.mu.Lock()
	err := c.usable()
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("mpi: insert: %w", err)
	}
	// Every rank builds the task: the options are checked alike on every
	// rank, and the handles and modes read from the result.
	t, err := c.rt.BuildTask(cl, args...)
	if err != nil {
		return nil, fmt.Errorf("mpi: insert: %w", err)
	}
	acc, err := c.accesses(t)
	if err != nil {
		return nil, fmt.Errorf("mpi: insert %s: %w", t.TaskName(), err)
	}
	exec := xrank
	if exec < 0 {
		exec = c.execRank(acc)
	}
	var errs []error
	// Contributions pending elsewhere come before any other access.
	for _, a := range acc {
		if !a.redux() && c.pending(a.d) {
			if err := c.reduce(a.d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Data read: from the owners to the executing rank.
	for _, a := range acc {
		if !a.reads() || a.d.owner == exec {
			continue
		}
		switch c.rank {
		case a.d.owner:
			if c.cacheSend(a.d, exec) {
				if err := c.IsendDetached(a.d.h, exec, a.d.tag, nil); err != nil {
					errs = append(errs, err)
				}
			}
		case exec:
			if c.cacheRecv(a.d) {
				if err := c.IrecvDetached(a.d.h, a.d.owner, a.d.tag, nil); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// REDUX data: the executing rank contributes, from the neutral element
	// when it does not own the datum.
	for _, a := range acc {
		if a.redux() && c.contribute(a.d, exec) && c.rank == exec {
			if err := c.initContribution(a.d.h); err != nil {
				errs = append(errs, err)
			}
		}
	}
	var ret *core.Task
	if c.rank == exec {
		if err := c.rt.Submit(t); err != nil {
			errs = append(errs, err)
		}
		ret = t
	}
	// Data written: back to the owners, and every copy is stale.
	for _, a := range acc {
		if !a.writes() {
			continue
		}
		if a.d.owner != exec {
			switch c.rank {
			case exec:
				if err := c.IsendDetached(a.d.h, a.d.owner, a.d.tag, nil); err != nil {
					errs = append(errs, err)
				}
			case a.d.owner:
				if err := c.IrecvDetached(a.d.h, exec, a.d.tag, nil); err != nil {
					errs = append(errs, err)
				}
			}
		}
		c.mu.Lock()
		a.d.invalidate()
		c.mu.Unlock()
	}
	if len(errs) > 0 {
		return ret, fmt.Errorf("mpi: insert %s: %w", t.TaskName(), errors.Join(errs...))
	}
	return ret, nil
}

// accesses lists t's handles, each once with the union of its modes, and
// their registrations.
func (c *Comm) accesses(t *core.Task) ([]access, error) {
	modes := t.Modes
	if t.Codelet != nil && t.Codelet.NBuffers != core.VariableBuffers {
		modes = t.Codelet.Modes
	}
	var acc []access
	seen := map[*core.Handle]int{}
	for i, h := range t.Handles {
		m := modes[i] &^ (core.Locality | core.Commute)
		d, err := c.lookup(h)
		if err != nil {
			return nil, fmt.Errorf("handle %d: %w", i, err)
		}
		if m == core.Scratch {
			continue
		}
		if m == core.Redux {
			if err := reduxMethods(h); err != nil {
				return nil, fmt.Errorf("handle %d: %w", i, err)
			}
		}
		if j, ok := seen[h]; ok {
			if (acc[j].mode == core.Redux) != (m == core.Redux) {
				return nil, fmt.Errorf("handle %d (%s): REDUX and another access to the same handle in one task", i, h)
			}
			acc[j].mode |= m
			continue
		}
		seen[h] = len(acc)
		acc = append(acc, access{d: d, mode: m})
	}
	return acc, nil
}

// execRank is the rank that runs a task with accesses acc: the owner of
// its written data, or else the candidate owning the most bytes it reads.
func (c *Comm) execRank(acc []access) int {
	cand := map[int]bool{}
	for _, a := range acc {
		if a.writes() {
			cand[a.d.owner] = true
		}
	}
	if len(cand) == 1 {
		for r := range cand {
			return r
		}
	}
	if len(cand) == 0 {
		for _, a := range acc {
			cand[a.d.owner] = true
		}
	}
	if len(cand) == 0 {
		return 0
	}
	read := make([]uint64, c.size)
	for _, a := range acc {
		if a.reads() {
			read[a.d.owner] += a.d.h.Size()
		}
	}
	best := -1
	for r := 0; r < c.size; r++ {
		if cand[r] && (best < 0 || read[r] > read[best]) {
			best = r
		}
	}
	return best
}
