package mpi

// Registered data and the communication cache.

import (
	"errors"
	"fmt"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/mpi/internal/mpib"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// datum is a handle registered with the MPI layer: its tag, its owner,
// and what the cache knows of it. Guarded by Comm.mu.
type datum struct {
	h     *core.Handle
	tag   int64
	owner int
	// sent[r], on the owner: rank r holds the current value (it was sent
	// there since the last write).
	sent []bool
	// received, on another rank: this rank holds the owner's current
	// value.
	received bool
	// contrib[r]: rank r, not the owner, holds a REDUX contribution to d
	// not yet brought to the owner (Redux). Alike on every rank.
	contrib []bool
}

// invalidate forgets every copy of d's value: it is being written.
func (d *datum) invalidate() {
	clear(d.sent)
	d.received = false
}

// Register gives h its MPI tag and its owner rank (StarPU's
// starpu_mpi_data_register): every rank registers every datum the graph
// uses, the owner with the data, the others with a handle of the same
// shape (core.Runtime.RegisterNoHome, Handle.RegisterSame) that receives
// copies. The tag names the datum in messages: it must be unique
// (ErrTagInUse) and lie in [0, TagMax].
func (c *Comm) Register(h *core.Handle, tag int64, owner int) error {
	if h == nil {
		return fmt.Errorf("mpi: register: nil handle")
	}
	if owner < 0 || owner >= c.size {
		return fmt.Errorf("mpi: register %s with tag %d: owner rank %d out of range (%d ranks)", h, tag, owner, c.size)
	}
	if tag < 0 || tag > c.TagMax() {
		return fmt.Errorf("mpi: register %s: tag %d out of range (0 to %d)", h, tag, c.TagMax())
	}
	if h.LocalPointer() == nil && h.Size() > 0 {
		return fmt.Errorf("mpi: register %s: %w", h, core.ErrUnregistered)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	if d, ok := c.byTag[tag]; ok {
		return fmt.Errorf("mpi: register %s: %w: tag %d is %s's", h, ErrTagInUse, tag, d.h)
	}
	if d, ok := c.byH[h]; ok {
		return fmt.Errorf("mpi: register %s with tag %d: already registered with tag %d", h, tag, d.tag)
	}
	d := &datum{h: h, tag: tag, owner: owner, sent: make([]bool, c.size), contrib: make([]bool, c.size)}
	c.byH[h], c.byTag[tag] = d, d
	return nil
}

// Owner is the rank that owns h, and whether h is registered (StarPU's
// starpu_mpi_data_get_rank).
func (c *Comm) Owner(h *core.Handle) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byH[h]; ok {
		return d.owner, true
	}
	return -1, false
}

// Tag is h's tag, and whether h is registered (StarPU's
// starpu_mpi_data_get_tag).
func (c *Comm) Tag(h *core.Handle) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byH[h]; ok {
		return d.tag, true
	}
	return -1, false
}

// Unregister drops h's MPI registration (its tag may then be registered
// again) and unregisters it from the runtime (Handle.Unregister), after
// the transfers and tasks using it. On the owner, the registered memory
// then holds the final value; on other ranks, whatever copy they held.
// REDUX contributions to h not yet reduced are reduced first (Redux): the
// owner and the ranks that contributed must then all call Unregister at
// the same point of the graph.
func (c *Comm) Unregister(h *core.Handle) error {
	var rerr error
	c.mu.Lock()
	d, ok := c.byH[h]
	c.mu.Unlock()
	if ok {
		if c.pending(d) {
			rerr = c.reduce(d)
		}
		c.mu.Lock()
		delete(c.byH, h)
		delete(c.byTag, d.tag)
		c.mu.Unlock()
	}
	return errors.Join(rerr, h.Unregister())
}

// Flush forgets which ranks hold copies of h (StarPU's
// starpu_mpi_cache_flush): the next task that needs h elsewhere gets it
// sent again. Every rank must call it at the same point of the graph.
func (c *Comm) Flush(h *core.Handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byH[h]; ok {
		d.invalidate()
	}
}

// FlushAll is Flush of every registered handle (StarPU's
// starpu_mpi_cache_flush_all_data).
func (c *Comm) FlushAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.byH {
		d.invalidate()
	}
}

// lookup is h's registration, or an error wrapping ErrNotRegistered.
func (c *Comm) lookup(h *core.Handle) (*datum, error) {
	if h == nil {
		return nil, fmt.Errorf("mpi: nil handle")
	}
	c.mu.Lock()
	d, ok := c.byH[h]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s has no owner rank: register it with Comm.Register on every rank", ErrNotRegistered, h)
	}
	return d, nil
}

// runs are the ranges of h's RAM replicate that hold its data, from
// LocalPointer: one for contiguous data, one per column of a strided
// matrix, ... They go as one message.
func runs(h *core.Handle) []mpib.Run {
	l := h.Layout()
	es := int(l.ElemSize)
	var rs []mpib.Run
	switch {
	case l.Interface == kernel.Void:
		return nil
	case l.Interface == kernel.Matrix && l.LD != l.NX:
		for j := 0; j < int(l.NY); j++ {
			rs = append(rs, mpib.Run{Off: j * int(l.LD) * es, Len: int(l.NX) * es})
		}
	case l.Interface == kernel.Block && l.LD == l.NX && l.LDZ != l.NX*l.NY:
		for k := 0; k < int(l.NZ); k++ {
			rs = append(rs, mpib.Run{Off: k * int(l.LDZ) * es, Len: int(l.NX*l.NY) * es})
		}
	case l.Interface == kernel.Block && l.LD != l.NX:
		for k := 0; k < int(l.NZ); k++ {
			for j := 0; j < int(l.NY); j++ {
				rs = append(rs, mpib.Run{Off: (k*int(l.LDZ) + j*int(l.LD)) * es, Len: int(l.NX) * es})
			}
		}
	case l.Interface >= kernel.FirstPluginInterface:
		// A plugin interface's region, as allocated.
		rs = []mpib.Run{{Off: 0, Len: int(h.AllocatedSize())}}
	default:
		rs = []mpib.Run{{Off: 0, Len: int(h.Size())}}
	}
	return rs
}

func runsLen(rs []mpib.Run) int {
	n := 0
	for _, r := range rs {
		n += r.Len
	}
	return n
}
