package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/starpu-go/starpu/core"
)

// bandwidth measures transfers between RAM and every device memory node,
// and between device nodes with a peer link (GPUs with peer access),
// through the drivers' own copy path, and saves the result as the bus model
// the schedulers use (like StarPU's bus calibration).
func bandwidth(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("bench bandwidth", "[flags]", "Measure the bandwidth and latency of copies between RAM and every device memory\nnode, and between devices with a direct (peer) link, through the drivers, and\nsave them as the bus model the schedulers use.")
	var rf runtimeFlags
	rf.registerSome(c.FlagSet, 0)
	c.refuse("it runs no task (it copies through the drivers directly)", "sched", "trace")
	c.refuse("it measures copies between RAM and the devices, in which no CPU worker takes part", "ncpu")
	fs := c.FlagSet
	size := fs.Int("size", 64<<20, "bytes per large transfer")
	reps := fs.Int("reps", 10, "large transfers per direction (the best counts)")
	if err := c.parse(args, out); err != nil {
		return err
	}
	const cmd = "bench bandwidth"
	if err := checkFlags(checkFlag(cmd, "size", *size, 1, maxTransfer), checkFlag(cmd, "reps", *reps, 1, maxIters)); err != nil {
		return err
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	links, saved, err := rt.CalibrateBus(ctx, uint64(*size), *reps)
	if ferr := rf.finish(rt); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if len(links) == 0 {
		msg := "bench bandwidth: no device memory node, only RAM"
		for _, n := range rt.DriverNotes() {
			msg += fmt.Sprintf("; %s: %s", n.Driver, n.Note)
		}
		return fmt.Errorf("%s", msg)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tTO\tMB/s\tLATENCY (us)")
	for _, l := range links {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\n", l.Src, l.Dst, l.MBps, l.LatencyUs)
	}
	tw.Flush()
	fmt.Fprintf(out, "bus model saved to %s\n", saved)
	// The key=value line gives the first device's figures.
	var h2d, d2h core.BusLink
	for _, l := range links {
		if l.Src == "RAM" && h2d.Dst == "" {
			h2d = l
		}
		if l.Dst == "RAM" && d2h.Src == "" {
			d2h = l
		}
	}
	kv(out, "bandwidth", map[string]any{"device": h2d.Dst, "size": *size, "h2d_mbps": h2d.MBps, "d2h_mbps": d2h.MBps,
		"latency_us": (h2d.LatencyUs + d2h.LatencyUs) / 2, "links": len(links)})
	return nil
}
