package mpi

// Ping-pong through the runtime against raw MPI: starpu bench mpi and
// the package's benchmark test.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// PingPongOptions sets what PingPong measures.
type PingPongOptions struct {
	// Sizes are the message sizes in bytes, each at least 1.
	Sizes []int
	// Iters is the number of round trips of one round, for a size; nil
	// means RoundTrips.
	Iters func(size int) int
	// Rounds is the number of rounds of each kind per size (0: 5): the
	// rounds alternate between the two kinds, and each kind's figure is
	// its median round.
	Rounds int
	// Tag is the MPI tag of the messages; no registered datum may use it.
	Tag int64
}

// PingPongResult is one size's one-way time (half a round trip), median
// of the rounds: through the runtime (Send and Recv of a handle) and raw
// (the binding's MPI calls on the same buffer).
type PingPongResult struct {
	Size         int
	Runtime, Raw time.Duration
	// RuntimeRounds and RawRounds are every round's one-way time.
	RuntimeRounds, RawRounds []time.Duration
}

// RoundTrips is the default number of round trips of a round: about
// 32 MiB each way, between 40 and 500.
func RoundTrips(size int) int { return min(500, max(40, (32<<20)/max(size, 1))) }

// PingPong measures a ping-pong between ranks 0 and 1, for each size, two
// ways on the same arena buffer, registered as a vector handle: through
// the runtime (Send then Recv of the handle on rank 0, Recv then Send on
// rank 1: each an acquisition ordered with the tasks, handed to the
// progression goroutine and released when MPI completes it) and raw (the
// binding's MPI_Isend and MPI_Irecv on the buffer, waited for, while the
// handle is held). Every rank calls it; ranks beyond 1 only join the
// barriers that start each round. The results are rank 0's (rank 1's are
// alike). Nothing else may be in flight on the two ranks meanwhile.
func (c *Comm) PingPong(ctx context.Context, opt PingPongOptions) ([]PingPongResult, error) {
	if c.size < 2 {
		return nil, fmt.Errorf("mpi: ping-pong: %d rank: it needs 2 (run it under mpirun -np 2)", c.size)
	}
	if len(opt.Sizes) == 0 {
		return nil, errors.New("mpi: ping-pong: no size")
	}
	for _, s := range opt.Sizes {
		if s < 1 || s > maxMessage {
			return nil, fmt.Errorf("mpi: ping-pong: size %d out of range (1 to %d bytes)", s, maxMessage)
		}
	}
	if opt.Tag < 0 || opt.Tag > c.TagMax() {
		return nil, fmt.Errorf("mpi: ping-pong: tag %d out of range (0 to %d)", opt.Tag, c.TagMax())
	}
	if opt.Iters == nil {
		opt.Iters = RoundTrips
	}
	if opt.Rounds <= 0 {
		opt.Rounds = 5
	}
	var out []PingPongResult
	for _, size := range opt.Sizes {
		iters := opt.Iters(size)
		if iters < 1 {
			return nil, fmt.Errorf("mpi: ping-pong: %d round trips for %d bytes", iters, size)
		}
		r, err := c.pingPongSize(ctx, size, iters, opt.Rounds, int(opt.Tag))
		if err != nil {
			return nil, fmt.Errorf("mpi: ping-pong of %d bytes: %w", size, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// maxMessage is the largest message: MPI counts are C ints.
const maxMessage = 1<<31 - 1

func (c *Comm) pingPongSize(ctx context.Context, size, iters, rounds, tag int) (res PingPongResult, err error) {
	res.Size = size
	h, err := c.rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 1, NX: uint64(size)})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, h.Unregister()) }()
	for i := range 2 * rounds {
		// Alternated, runtime, raw, raw, runtime, ...: each kind goes
		// first as often as the other.
		raw := (i%2 == 0) == (i%4 >= 2)
		if err := c.Barrier(); err != nil {
			return res, err
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if c.rank > 1 {
			continue
		}
		var d time.Duration
		if raw {
			d, err = c.rawRound(ctx, h, size, iters, tag)
			res.RawRounds = append(res.RawRounds, d)
		} else {
			d, err = c.handleRound(h, iters, int64(tag))
			res.RuntimeRounds = append(res.RuntimeRounds, d)
		}
		if err != nil {
			return res, err
		}
	}
	if c.rank <= 1 {
		res.Runtime, res.Raw = median(res.RuntimeRounds), median(res.RawRounds)
	}
	return res, nil
}

// handleRound times iters round trips of h through the runtime and
// returns the one-way time.
func (c *Comm) handleRound(h *core.Handle, iters int, tag int64) (time.Duration, error) {
	peer := 1 - c.rank
	start := time.Now()
	for range iters {
		if c.rank == 0 {
			if err := c.Send(h, peer, tag); err != nil {
				return 0, err
			}
			if err := c.Recv(h, peer, tag); err != nil {
				return 0, err
			}
		} else {
			if err := c.Recv(h, peer, tag); err != nil {
				return 0, err
			}
			if err := c.Send(h, peer, tag); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start) / time.Duration(2*iters), nil
}

// rawRound times iters round trips of h's buffer through the binding,
// h held meanwhile, and returns the one-way time.
func (c *Comm) rawRound(ctx context.Context, h *core.Handle, size, iters, tag int) (time.Duration, error) {
	if err := h.Acquire(core.RW); err != nil {
		return 0, err
	}
	defer h.Release()
	buf := h.LocalPointer()
	peer := 1 - c.rank
	send := func() error {
		r, err := c.mc.Isend(buf, size, peer, tag, nil)
		if err != nil {
			return err
		}
		_, err = r.Wait(ctx)
		return err
	}
	recv := func() error {
		r, err := c.mc.Irecv(buf, size, peer, tag, nil)
		if err != nil {
			return err
		}
		st, err := r.Wait(ctx)
		if err == nil && st.Count != size {
			err = fmt.Errorf("%w: %d bytes came, want %d", ErrGraphMismatch, st.Count, size)
		}
		return err
	}
	first, second := send, recv
	if c.rank == 1 {
		first, second = recv, send
	}
	start := time.Now()
	for range iters {
		if err := first(); err != nil {
			return 0, err
		}
		if err := second(); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(2*iters), nil
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
