package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
)

// machine prints what starpu_machine_display prints: the plugins found, the
// workers, the combined workers and the memory nodes.
func machine(ctx context.Context, args []string, out io.Writer) error {
	c := newCmd("machine", "[flags]", "Show the plugins found, the workers, the memory nodes and the scheduling\ncontexts of the runtime the flags, the config file and the environment describe.")
	var rf runtimeFlags
	rf.registerSome(c.FlagSet, withSched|withNCPU)
	c.refuse("it runs no task, so the trace would be empty", "trace")
	if err := c.parse(args, out); err != nil {
		return err
	}
	rt, err := rf.start(ctx)
	if err != nil {
		return err
	}
	defer rt.Shutdown()
	plugins, err := rt.ProbePlugins(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "plugins found %s\n\n", rt.PluginsWhere())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tKIND\tVERSION\tSTATUS\tPATH")
	for _, p := range plugins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Kind, p.Version, p.Status, p.Path)
	}
	tw.Flush()
	fmt.Fprintln(out)
	ws := rt.Workers()
	fmt.Fprintf(out, "workers: %d\n", len(ws))
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tARCH\tUNIT\tMEMORY NODE\tDRIVER\tPID")
	for _, w := range ws {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\tdriver-%s\t%d\n", w.ID, w.Arch, w.Unit, w.Node, w.Driver, w.Pid)
	}
	tw.Flush()
	for _, n := range rt.DriverNotes() {
		fmt.Fprintf(out, "%s: no worker: %s\n", n.Driver, n.Note)
	}
	fmt.Fprintln(out)
	cws := rt.CombinedWorkers()
	fmt.Fprintf(out, "combined workers (parallel tasks): %d\n", len(cws))
	for _, c := range cws {
		fmt.Fprintf(out, "  #%d %s, %d workers %v (driver-%s)\n", c.ID, c.Arch, len(c.Members), c.Members, c.Driver)
	}
	fmt.Fprintln(out)
	nodes := rt.MemoryNodes()
	fmt.Fprintf(out, "memory nodes: %d\n", len(nodes))
	for _, n := range nodes {
		fmt.Fprintf(out, "  #%d %s: %s\n", n.ID, n.Kind, n.Description)
	}
	fmt.Fprintln(out)
	cs := rt.SchedContexts()
	fmt.Fprintf(out, "scheduling contexts: %d\n", len(cs))
	for _, c := range cs {
		fmt.Fprintf(out, "  #%d %s: policy %s, workers %v\n", c.ID(), c.Name(), c.Policy(), c.Workers())
	}
	return nil
}
