package mpi

// Waiting across ranks, statistics, shutdown.

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"time"

	"github.com/starpu-go/starpu/core/mpi/internal/mpib"
)

// quiesce waits until this rank has nothing left to do: no task and no
// transfer in flight. Transfers wait for tasks and tasks for transfers,
// so it waits for both until both are over.
func (c *Comm) quiesce() []error {
	var errs []error
	for {
		if err := c.rt.WaitForAll(); err != nil {
			errs = append(errs, err)
		}
		c.mu.Lock()
		idle := c.idle
		c.mu.Unlock()
		select {
		case <-idle:
		case <-c.failed:
			// Transfers in flight are being abandoned: give them the time.
			select {
			case <-idle:
			case <-time.After(2 * failGrace):
			}
		}
		c.mu.Lock()
		n := len(c.xfers)
		c.mu.Unlock()
		if n == 0 && c.rt.NSubmitted() == 0 {
			return errs
		}
		if c.failure() != nil && n > 0 {
			return append(errs, fmt.Errorf("mpi: %d transfers still in flight after the failure", n))
		}
	}
}

// takeErrs returns the transfer failures not yet reported, and the
// run's failure.
func (c *Comm) takeErrs() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := c.errs
	c.errs = nil
	if c.failErr != nil && !containsErr(errs, c.failErr) {
		errs = append(errs, c.failErr)
	}
	return errs
}

func containsErr(errs []error, target error) bool {
	for _, e := range errs {
		if errors.Is(e, target) {
			return true
		}
	}
	return false
}

// collective runs f, a collective every rank takes part in. It fails at
// once, or as soon as it becomes known, when a rank cannot take part
// (it said goodbye, died, or the run failed); the MPI collective is then
// abandoned (MPI is finalized over it).
func (c *Comm) collective(what string, f func(ctx context.Context) error) error {
	c.mu.Lock()
	if err := c.usable(); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("mpi: %s: %w", what, err)
	}
	if c.failErr != nil {
		c.mu.Unlock()
		return fmt.Errorf("mpi: %s: %w", what, c.failErr)
	}
	if c.coll != nil {
		c.mu.Unlock()
		return fmt.Errorf("mpi: %s: another collective is in progress: collectives are made one at a time, in the same order on every rank", what)
	}
	for i, p := range c.peers {
		if i == c.rank {
			continue
		}
		switch {
		case p.gone != nil:
			c.mu.Unlock()
			return fmt.Errorf("mpi: %s: %w", what, p.gone)
		case p.bye && p.byeColls <= c.ncoll:
			c.mu.Unlock()
			return fmt.Errorf("mpi: %s: %w: rank %d has called Shutdown after %d collectives, this is rank %d's collective %d", what, ErrGraphMismatch, i, p.byeColls, c.rank, c.ncoll+1)
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	c.coll = cancel
	c.ncoll++
	c.mu.Unlock()
	err := f(ctx)
	c.mu.Lock()
	c.coll = nil
	if err != nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("mpi: %s: %w", what, err)
	}
	return nil
}

// Barrier waits until every rank called Barrier (StarPU's
// starpu_mpi_barrier). Tasks and transfers go on meanwhile.
func (c *Comm) Barrier() error {
	return c.collective("barrier", c.mc.Barrier)
}

// WaitForAll waits until every rank has no task and no transfer left
// (StarPU's starpu_mpi_wait_for_all): the local wait for tasks and
// transfers, then a reduction over every rank that also checks that the
// data messages sent were all received (an error wrapping
// ErrGraphMismatch otherwise). It returns the failures of the tasks and
// of the detached transfers (Insert's among them) since the last one.
func (c *Comm) WaitForAll() error {
	errs := c.quiesce()
	errs = append(errs, c.takeErrs()...)
	var sent, recvd int64
	c.mu.Lock()
	for _, p := range c.peers {
		sent += p.sentMsgs
		recvd += p.recvMsgs
	}
	c.mu.Unlock()
	var sums []int64
	err := c.collective("wait for all", func(ctx context.Context) error {
		var err error
		sums, err = c.mc.Allreduce(ctx, []int64{sent, recvd}, mpib.Sum)
		return err
	})
	switch {
	case err != nil:
		errs = append(errs, err)
	case sums[0] != sums[1]:
		errs = append(errs, fmt.Errorf("mpi: wait for all: %w: the ranks sent %d data messages in all and received %d", ErrGraphMismatch, sums[0], sums[1]))
	}
	return errors.Join(errs...)
}

// PeerStats are the data messages exchanged with one rank.
type PeerStats struct {
	Rank                        int
	SentMsgs, SentBytes         int64
	ReceivedMsgs, ReceivedBytes int64
}

// Stats are the data messages this rank exchanged with each rank
// (StarPU's starpu_mpi_comm_amounts_retrieve, with counts and what was
// received too), indexed by rank.
func (c *Comm) Stats() []PeerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PeerStats, c.size)
	for i, p := range c.peers {
		out[i] = PeerStats{Rank: i, SentMsgs: p.sentMsgs, SentBytes: p.sentBytes, ReceivedMsgs: p.recvMsgs, ReceivedBytes: p.recvBytes}
	}
	return out
}

// printStats writes the statistics as StarPU's STARPU_MPI_STATS does:
// what this rank sent in all, then to each rank, with rates over the
// run's time.
func (c *Comm) printStats() {
	st := c.Stats()
	secs := time.Since(c.start).Seconds()
	var total int64
	for _, p := range st {
		total += p.SentBytes
	}
	w := c.opt.Output
	fmt.Fprintf(w, "[starpu_comm_stats][%d] TOTAL:\t%d B\t%f MB\t%f B/s\t%f MB/s\n", c.rank, total, float64(total)/(1<<20), float64(total)/secs, float64(total)/(1<<20)/secs)
	for _, p := range st {
		if p.Rank == c.rank || p.SentMsgs+p.ReceivedMsgs == 0 {
			continue
		}
		fmt.Fprintf(w, "[starpu_comm_stats][%d:%d]\t%d B\t%f MB\t%f B/s\t%f MB/s\t(%d messages; received %d B in %d messages)\n",
			c.rank, p.Rank, p.SentBytes, float64(p.SentBytes)/(1<<20), float64(p.SentBytes)/secs, float64(p.SentBytes)/(1<<20)/secs,
			p.SentMsgs, p.ReceivedBytes, p.ReceivedMsgs)
	}
}

// Shutdown ends the MPI layer of this rank (StarPU's starpu_mpi_shutdown):
// it reduces the REDUX contributions still pending (Redux), waits for
// its tasks and transfers, says goodbye to the other ranks
// and waits for theirs (at most Options.ShutdownTimeout), prints the
// statistics when asked, and finalizes MPI. The runtime stays up: shut it
// down after. It returns the failures not yet reported; after a rank
// died MPI is not finalized (MPI_Finalize would wait for it), and mpirun
// reports this rank as ending without MPI_Finalize.
func (c *Comm) Shutdown() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("mpi: shutdown: %w", ErrShutdown)
	}
	c.mu.Unlock()
	var errs []error
	if err := c.reduceAll(); err != nil {
		errs = append(errs, fmt.Errorf("mpi: shutdown: %w", err))
	}
	errs = append(errs, c.quiesce()...)
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	errs = append(errs, c.takeErrs()...)
	wait := c.opt.ShutdownTimeout
	if c.failure() != nil {
		// The others were told and are on their way out, or dead.
		wait = min(wait, 10*time.Second)
	}
	deadline := time.Now().Add(wait)
	if err := c.sayBye(deadline); err != nil {
		errs = append(errs, fmt.Errorf("mpi: shutdown: %w", err))
	}
	if err := c.awaitByes(deadline); err != nil {
		errs = append(errs, fmt.Errorf("mpi: shutdown: %w", err))
	}
	// A failure told while waiting.
	if err := c.failure(); err != nil && !containsErr(errs, err) {
		errs = append(errs, err)
	}
	if c.sigs != nil {
		signal.Stop(c.sigs)
		close(c.sigs)
	}
	c.watch.stopWatch()
	c.stopControl()
	if c.opt.Stats {
		c.printStats()
	}
	// OpenMPI finalizes over an abandoned collective; not with a dead
	// rank, where MPI_Finalize waits for it.
	c.mu.Lock()
	finalize := true
	for _, p := range c.peers {
		if p.dead {
			finalize = false
		}
	}
	c.mu.Unlock()
	if finalize {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.mc.Finalize(ctx); err != nil {
			errs = append(errs, fmt.Errorf("mpi: shutdown: %w", err))
		}
		cancel()
	} else {
		errs = append(errs, errors.New("mpi: shutdown: MPI not finalized after the failure"))
	}
	return errors.Join(errs...)
}
