package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/starpu-go/starpu/core"
)

// traceCmd reads a trace file written with --trace or $STARPU_TRACE, as
// StarPU's starpu_fxt_tool reads FxT traces: summary prints where the
// time went, view draws a Gantt chart, dot and rec write StarPU's dag.dot
// and tasks.rec, json converts a native trace for Perfetto, perfetto
// writes Perfetto's protobuf format and paje StarPU's paje.trace.
func traceCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usagef("trace: which subcommand? (summary, view, dot, rec, json, perfetto, paje)")
	}
	var c *cmdFlags
	var def string // the default output file
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(out, usage)
		return nil
	case "summary":
		c = newCmd("trace summary", "[flags] FILE", "Print where the time of a traced run went: per worker its executing time and\nits states between tasks (fetching, scheduling, sleeping, idle), per codelet\nits tasks and times, the critical path against the makespan, the parallel\nefficiency, and the transfers per bus link.")
	case "view":
		c = newCmd("trace view", "[flags] FILE", "Draw a traced run as a Gantt chart: one row per worker and bus link, tasks\ncoloured by codelet (their handles and footprints on hover), the workers'\nstates between tasks, the critical path in red. An .svg output is\nthe chart alone; .html adds zoom and the summary. Neither needs a network.")
		def = "FILE.html"
	case "dot":
		c = newCmd("trace dot", "[flags] FILE", "Write the task graph of a traced run in Graphviz's dot language (StarPU's\ndag.dot), the critical path in red.")
		def = "FILE.dot"
	case "rec":
		c = newCmd("trace rec", "[flags] FILE", "Write the tasks of a traced run in StarPU's tasks.rec format (recutils).")
		def = "FILE.rec"
	case "json":
		c = newCmd("trace json", "[flags] FILE", "Convert a native trace (a crashed run's too) to Chrome trace-event JSON, which\nPerfetto (ui.perfetto.dev) and chrome://tracing open.")
		def = "FILE.json"
	case "perfetto":
		c = newCmd("trace perfetto", "[flags] FILE", "Write a traced run in Perfetto's protobuf format, which ui.perfetto.dev opens and\nwhich stays compact for large runs: tracks per worker, bus link, plugin and peer\nrank, slices for tasks, worker states, transfers and communications, flows for\nthe dependencies.")
		def = "FILE.pftrace"
	case "paje":
		c = newCmd("trace paje", "[flags] FILE", "Write a traced run in the Paje format of StarPU's starpu_fxt_tool (paje.trace),\nwhich ViTE draws and StarVZ reads.")
		def = "FILE.paje"
	default:
		return usagef("trace: unknown subcommand %q (summary, view, dot, rec, json, perfetto, paje)", args[0])
	}
	c.refuse("it reads a trace file, without starting the runtime", "config", "plugin-dir", "sched", "ncpu", "trace")
	var file *string
	if def != "" {
		file = c.String("o", "", fmt.Sprintf("write to `FILE` (default %s; - for stdout)", def))
	} else {
		c.refuse("it prints to stdout", "o")
	}
	pos, err := c.parseInterspersed(args[1:], out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("%s: want one trace file (written with --trace FILE or STARPU_TRACE=FILE)", c.name)
	}
	in := pos[0]
	dst := ""
	if file != nil {
		dst = *file
	}
	if dst == "" {
		dst = def
		if ext, ok := strings.CutPrefix(def, "FILE"); ok {
			dst = strings.TrimSuffix(in, filepath.Ext(in)) + ext
		}
	}
	if filepath.Clean(dst) == filepath.Clean(in) {
		return usagef("%s: %s would overwrite its input: name another with -o", c.name, in)
	}
	if _, err := os.Stat(in); err != nil && (args[0] == "json" || args[0] == "perfetto") {
		if files, _ := core.TraceRankFiles(in); len(files) > 0 {
			// The converters stream one file; the merge needs them all.
			return fmt.Errorf("%s: %s is the trace of an MPI run, one file per rank (%s): convert each rank's file, or use trace view, summary, paje, dot or rec, which merge them", c.name, in, strings.Join(files, ", "))
		}
	}
	switch args[0] {
	case "json":
		return traceConvert("json", in, dst, out, core.ConvertTraceToJSON)
	case "perfetto":
		return traceConvert("perfetto", in, dst, out, core.ConvertTraceToPerfetto)
	}
	tf, err := core.ReadTraceFile(in)
	if err != nil {
		return err
	}
	if args[0] == "summary" {
		return tf.WriteSummary(out)
	}
	var write func(io.Writer) error
	switch args[0] {
	case "view":
		title := "StarPU trace: " + filepath.Base(in)
		switch ext := strings.ToLower(filepath.Ext(dst)); ext {
		case ".svg":
			write = func(w io.Writer) error { return tf.WriteSVG(w, title) }
		case ".html", ".htm":
			write = func(w io.Writer) error { return tf.WriteHTML(w, title) }
		default:
			if dst != "-" {
				return usagef("trace view: -o %s: want an .svg or .html file", dst)
			}
			write = func(w io.Writer) error { return tf.WriteSVG(w, title) }
		}
	case "dot":
		write = tf.WriteDot
	case "paje":
		write = tf.WritePaje
	default:
		write = tf.WriteTasksRec
	}
	if dst == "-" {
		return write(out)
	}
	if err := writeFile(dst, write); err != nil {
		return err
	}
	s := tf.Summary()
	fmt.Fprintf(out, "trace %s: wrote %s (%d tasks, %d transfers)\n", args[0], dst, s.Tasks, s.Transfers)
	return nil
}

// traceConvert converts the trace in to dst with convert, which streams
// (the json and perfetto subcommands).
func traceConvert(sub, in, dst string, out io.Writer, convert func(io.Writer, io.Reader) error) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	write := func(w io.Writer) error { return convert(w, f) }
	if dst == "-" {
		return write(out)
	}
	if err := writeFile(dst, write); err != nil {
		return err
	}
	fmt.Fprintf(out, "trace %s: wrote %s\n", sub, dst)
	return nil
}

// writeFile writes path through write, and removes it when that fails.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	werr := write(f)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
