package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/internal/mpirun"
)

// maxPingPong bounds bench mpi --max-size: one MPI message (a C int of
// bytes), allocated once in each rank's arena.
const maxPingPong = 1 << 30

// benchMPI measures the ping-pong of a vector handle between ranks 0 and
// 1 through the runtime (Send and Recv of the handle) against raw MPI on
// the same arena buffer (mpi.Comm.PingPong), from --min-size to
// --max-size by factors of 4: latency is the one-way time at the smallest
// size, bandwidth the size over the one-way time.
func benchMPI(ctx context.Context, args []string, out io.Writer) (err error) {
	c := newCmd("bench mpi", "[flags]", "Ping-pong between ranks 0 and 1 of an MPI job (mpirun -np 2 starpu bench mpi): a\nvector handle through the runtime against raw MPI on the same buffer, one-way\ntimes and bandwidths, medians of alternated rounds.")
	var rf runtimeFlags
	rf.registerSome(c.FlagSet, withNCPU)
	c.refuse("it runs no task (it sends a handle between ranks)", "sched", "trace")
	fs := c.FlagSet
	minSize := fs.Int("min-size", 8, "smallest message, in bytes")
	maxSize := fs.Int("max-size", 4<<20, "largest message, in bytes (the sizes go from --min-size by factors of 4, and end with this one)")
	rounds := fs.Int("rounds", 5, "rounds of each kind per size, alternated (runtime, raw, raw, runtime, ...); the median counts")
	iters := fs.Int("iters", 0, "round trips per round; 0 sizes them to about 32 MiB each way, between 40 and 500")
	spin := fs.Int("spin", 0, "times the MPI progression goroutine polls before it sleeps (0: the default, 100)")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench mpi"
	if err := checkFlags(checkFlag(cmd, "min-size", *minSize, 1, maxPingPong), checkFlag(cmd, "max-size", *maxSize, *minSize, maxPingPong),
		checkFlag(cmd, "rounds", *rounds, 1, maxIters), checkFlag(cmd, "iters", *iters, 0, maxIters), checkFlag(cmd, "spin", *spin, 0, maxIters)); err != nil {
		return err
	}
	if !mpi.Built() {
		return errors.New("bench mpi: this starpu was built without MPI (the nompi tag, or no cgo)")
	}
	if mpirun.Rank() < 0 {
		return errors.New("bench mpi: not started by mpirun: it measures between two ranks, run it as mpirun -np 2 starpu bench mpi")
	}
	var sizes []int
	for s := *minSize; s < *maxSize; s *= 4 {
		sizes = append(sizes, s)
	}
	sizes = append(sizes, *maxSize)
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if ferr := rf.finish(rt); err == nil {
			err = ferr
		}
	}()
	comm, err := mpi.Init(ctx, rt, mpi.Options{SpinPolls: *spin})
	if err != nil {
		return fmt.Errorf("bench mpi: %w", err)
	}
	defer func() {
		if serr := comm.Shutdown(); err == nil && serr != nil {
			err = fmt.Errorf("bench mpi: %w", serr)
		}
	}()
	if comm.Size() != 2 {
		// Every rank finds the same and shuts MPI down cleanly.
		return fmt.Errorf("bench mpi: the job has %d ranks, the ping-pong needs 2 (mpirun -np 2)", comm.Size())
	}
	opt := mpi.PingPongOptions{Sizes: sizes, Rounds: *rounds}
	if *iters > 0 {
		opt.Iters = func(int) int { return *iters }
	}
	res, err := comm.PingPong(ctx, opt)
	if err != nil {
		return fmt.Errorf("bench mpi: %w", err)
	}
	if comm.Rank() != 0 {
		return nil
	}
	printPingPong(out, res, *rounds)
	return nil
}

// printPingPong writes the table and the kv line: latency at the smallest
// size, bandwidth at the largest, and their ratios runtime/raw. It is
// written in one piece: mpirun's --tag-output tags each piece it reads,
// and would cut the lines the tabwriter writes cell by cell.
func printPingPong(w io.Writer, res []mpi.PingPongResult, rounds int) {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	gbps := func(size int, d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	out := &bytes.Buffer{}
	defer func() { _, _ = w.Write(out.Bytes()) }()
	fmt.Fprintf(out, "bench mpi: ping-pong between ranks 0 and 1, one way (half a round trip), medians of %d alternated rounds each\n", rounds)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SIZE (B)\tRUNTIME (us)\tRAW (us)\tRUNTIME (GB/s)\tRAW (GB/s)\tRUNTIME/RAW BANDWIDTH\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.3f\t%.3f\t%.2f\t\n", r.Size, us(r.Runtime), us(r.Raw), gbps(r.Size, r.Runtime), gbps(r.Size, r.Raw), r.Raw.Seconds()/r.Runtime.Seconds())
	}
	tw.Flush()
	small, large := res[0], res[len(res)-1]
	kv(out, "mpi", map[string]any{
		"ranks": 2, "rounds": rounds, "min_size": small.Size, "max_size": large.Size,
		"lat_runtime_us": us(small.Runtime), "lat_raw_us": us(small.Raw), "lat_ratio": small.Runtime.Seconds() / small.Raw.Seconds(),
		"bw_runtime_gbps": gbps(large.Size, large.Runtime), "bw_raw_gbps": gbps(large.Size, large.Raw), "bw_ratio": large.Raw.Seconds() / large.Runtime.Seconds(),
	})
}
