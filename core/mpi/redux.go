package mpi

// REDUX over the ranks: StarPU-MPI's starpu_mpi_redux_data.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/starpu-go/starpu/core"
)

// ErrNoReductionMethods is returned, wrapped, for a handle given a REDUX
// access through Insert, or passed to Redux, that has no reduction
// methods (Handle.SetReductionMethods) on this rank.
var ErrNoReductionMethods = errors.New("handle has no reduction methods")

// Redux brings every rank's REDUX contribution to h to its owner and
// combines them there (StarPU's starpu_mpi_redux_data). Every rank calls
// it at the same point of the graph.
//
// A task inserted with a REDUX access to h runs where Insert decides (the
// owner of the other data it writes, InsertOn's rank, or the owner of the
// most data it reads), and contributes there: on the owner straight into
// h's value, elsewhere into a local contribution that the handle's init
// codelet set to the neutral element before that rank's first such task.
// Redux then sends each contribution to the owner, which folds it into
// h with the handle's reduction codelet; ranks that contributed nothing
// send nothing. After it, the owner holds the reduced value and copies
// held elsewhere are stale (the cache forgets them).
//
// Every rank must give h the same reduction methods
// (Handle.SetReductionMethods) before its first REDUX access: a handle
// without them is an error wrapping ErrNoReductionMethods, as an
// unregistered one is ErrNotRegistered, on every rank. A task that
// accesses h in another mode while contributions are pending, and
// GetDataOnNode, Unregister and Shutdown, reduce them first, as StarPU
// reduces a handle's per-worker contributions before any other access;
// Redux makes the point explicit. The transfers and reduction tasks are
// submitted and Redux returns at once: WaitForAll waits for them.
func (c *Comm) Redux(h *core.Handle) error {
	if err := c.failure(); err != nil {
		return fmt.Errorf("mpi: redux: %w", err)
	}
	c.mu.Lock()
	err := c.usable()
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("mpi: redux: %w", err)
	}
	d, err := c.lookup(h)
	if err != nil {
		return fmt.Errorf("mpi: redux: %w", err)
	}
	if err := reduxMethods(h); err != nil {
		return fmt.Errorf("mpi: redux: %w", err)
	}
	return c.reduce(d)
}

// reduxMethods says why h cannot take REDUX accesses over the ranks.
func reduxMethods(h *core.Handle) error {
	if redux, _ := h.ReductionMethods(); redux == nil {
		return fmt.Errorf("%w: %s: call Handle.SetReductionMethods on every rank before its REDUX accesses", ErrNoReductionMethods, h)
	}
	return nil
}

// pending says whether ranks other than d's owner hold contributions to
// it not yet reduced.
func (c *Comm) pending(d *datum) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(d.contrib, true)
}

// contribute records that rank r contributes to d through a REDUX task,
// and says whether its contribution must be initialised first (its first
// since the last reduction, on a rank that does not own d).
func (c *Comm) contribute(d *datum, r int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The value changes: every copy is stale.
	d.invalidate()
	if r == d.owner || d.contrib[r] {
		return false
	}
	d.contrib[r] = true
	return true
}

// initContribution submits the init codelet of h on h, this rank's
// contribution to a datum it does not own.
func (c *Comm) initContribution(h *core.Handle) error {
	_, initCl := h.ReductionMethods()
	t := &core.Task{Codelet: initCl, Handles: []*core.Handle{h}, Detach: true, Name: "mpi redux init " + h.String()}
	if initCl.NBuffers == core.VariableBuffers {
		t.Modes = []core.Mode{core.W}
	}
	if err := c.rt.Submit(t); err != nil {
		return fmt.Errorf("initialise the REDUX contribution to %s: %w", h, err)
	}
	return nil
}

// reduce brings the pending contributions to d to its owner, where the
// reduction codelet folds each into d, in rank order.
func (c *Comm) reduce(d *datum) error {
	c.mu.Lock()
	var from []int
	for r, ok := range d.contrib {
		if ok {
			from = append(from, r)
		}
	}
	clear(d.contrib)
	d.invalidate()
	c.mu.Unlock()
	switch {
	case len(from) == 0:
		return nil
	case c.rank == d.owner:
		var errs []error
		for _, r := range from {
			if err := c.fold(d, r); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("mpi: redux %s: %w", d.h, errors.Join(errs...))
		}
	case slices.Contains(from, c.rank):
		if err := c.IsendDetached(d.h, d.owner, d.tag, nil); err != nil {
			return fmt.Errorf("mpi: redux %s: %w", d.h, err)
		}
	}
	return nil
}

// fold receives rank r's contribution to d, on its owner, into a
// temporary handle, and folds it into d with the reduction codelet.
func (c *Comm) fold(d *datum, r int) error {
	redCl, _ := d.h.ReductionMethods()
	tmp, err := d.h.RegisterSame()
	if err != nil {
		return fmt.Errorf("contribution of rank %d: %w", r, err)
	}
	// Gated behind d: the receive must not be posted before the receives
	// of d itself from r submitted earlier, which use the same tag. Once
	// received, tmp goes after the reduction task, which is submitted
	// before the receive completes (an unregistered handle cannot be
	// received into: it is unregistered only then).
	received := func(error) {
		if err := tmp.UnregisterSubmit(); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, fmt.Errorf("mpi: redux %s: contribution of rank %d: %w", d.h, r, err))
			c.mu.Unlock()
		}
	}
	if _, err := c.transfer(false, tmp, r, d.tag, true, received, d.h); err != nil {
		return fmt.Errorf("contribution of rank %d: %w", r, err)
	}
	t := &core.Task{Codelet: redCl, Handles: []*core.Handle{d.h, tmp}, Detach: true, Name: fmt.Sprintf("mpi redux %s from rank %d", d.h, r)}
	if redCl.NBuffers == core.VariableBuffers {
		t.Modes = []core.Mode{core.RW, core.R}
	}
	if err := c.rt.Submit(t); err != nil {
		return fmt.Errorf("contribution of rank %d: %w", r, err)
	}
	return nil
}

// reduceAll reduces every datum with pending contributions, in tag order
// (the same on every rank).
func (c *Comm) reduceAll() error {
	c.mu.Lock()
	var ds []*datum
	for _, d := range c.byTag {
		if slices.Contains(d.contrib, true) {
			ds = append(ds, d)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(ds, func(a, b *datum) int { return cmp.Compare(a.tag, b.tag) })
	var errs []error
	for _, d := range ds {
		if err := c.reduce(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
