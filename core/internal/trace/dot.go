package trace

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// WriteDot writes the task graph as starpu_fxt_tool's dag.dot does: one
// node "task_ID" per task, filled with its codelet's colour, and one edge
// per dependency; the critical path's nodes and edges are red.
func (t *Trace) WriteDot(w io.Writer, s Summary) error {
	bw := bufio.NewWriter(w)
	fills := map[string]string{}
	for i, c := range s.Codelets {
		fills[c.Name] = colour(i)
	}
	crit := map[uint64]bool{}
	for _, id := range s.CriticalTasks {
		crit[id] = true
	}
	next := map[uint64]uint64{}
	for i := 1; i < len(s.CriticalTasks); i++ {
		next[s.CriticalTasks[i-1]] = s.CriticalTasks[i]
	}
	bw.WriteString("digraph G {\n\tcolor=white\n\trankdir=LR;\n")
	for _, x := range t.Tasks {
		fill := fills[x.Kind()]
		if fill == "" || fill[0] != '#' {
			fill = "#dddddd" // ran nowhere, or an HSL colour dot cannot read
		}
		name := x.Name
		if name == "" {
			name = "sync"
		}
		extra := ""
		if crit[x.ID] {
			extra = ", color=\"#d62728\", penwidth=3"
		}
		fmt.Fprintf(bw, "\t \"task_%d\" [ style=filled, label=%s, fillcolor=\"%s\"%s]\n", x.ID, strconv.Quote(name), fill, extra)
	}
	for _, x := range t.Tasks {
		for _, p := range x.Preds {
			extra := ""
			if next[p] == x.ID {
				extra = " [color=\"#d62728\", penwidth=3]"
			}
			fmt.Fprintf(bw, "\t \"task_%d\"->\"task_%d\"%s\n", p, x.ID, extra)
		}
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// WriteTasksRec writes one record per task in StarPU's tasks.rec format
// (GNU recutils: "Field: value" lines, a blank line between records), as
// starpu_fxt_tool does; times are milliseconds since the runtime's start.
func (t *Trace) WriteTasksRec(w io.Writer) error {
	bw := bufio.NewWriter(w)
	node := map[int]int{}
	for _, wk := range t.Workers {
		node[wk.ID] = wk.Node
	}
	msf := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 6, 64) }
	order := 0
	for _, x := range t.Tasks {
		if x.Name != "" {
			fmt.Fprintf(bw, "Name: %s\n", x.Name)
		}
		if x.Model != "" {
			fmt.Fprintf(bw, "Model: %s\n", x.Model)
		}
		fmt.Fprintf(bw, "JobId: %d\n", x.ID)
		if x.Submitted {
			order++
			fmt.Fprintf(bw, "SubmitOrder: %d\n", order)
		}
		fmt.Fprintf(bw, "Priority: %d\n", x.Priority)
		if len(x.Preds) > 0 {
			bw.WriteString("DependsOn:")
			for _, p := range x.Preds {
				fmt.Fprintf(bw, " %d", p)
			}
			bw.WriteByte('\n')
		}
		if x.HasTag {
			fmt.Fprintf(bw, "Tag: %x\n", x.Tag)
		}
		if x.Ran && x.Worker >= 0 {
			fmt.Fprintf(bw, "WorkerId: %d\n", x.Worker)
			fmt.Fprintf(bw, "MemoryNode: %d\n", node[x.Worker])
		}
		if x.Submitted {
			fmt.Fprintf(bw, "SubmitTime: %s\n", msf(x.Submit))
		}
		if x.Ready != 0 {
			fmt.Fprintf(bw, "ReadyTime: %s\n", msf(x.Ready))
		}
		if x.Ran {
			fmt.Fprintf(bw, "StartTime: %s\n", msf(x.Start))
			fmt.Fprintf(bw, "EndTime: %s\n", msf(x.End))
			fmt.Fprintf(bw, "Footprint: %x\n", x.Footprint)
		}
		if x.Flops != 0 {
			fmt.Fprintf(bw, "GFlop: %f\n", x.Flops/1e9)
		}
		if len(x.Iter) > 0 {
			// Outermost first, as StarPU numbers the levels.
			bw.WriteString("Iteration:")
			for k := len(x.Iter) - 1; k >= 0; k-- {
				fmt.Fprintf(bw, " %d", x.Iter[k])
			}
			bw.WriteByte('\n')
		}
		if len(x.Handles) > 0 {
			bw.WriteString("Handles:")
			for _, h := range x.Handles {
				fmt.Fprintf(bw, " %x", h.Handle)
			}
			bw.WriteString("\nModes:")
			for _, h := range x.Handles {
				fmt.Fprintf(bw, " %s", ModeString(h.Mode))
			}
			bw.WriteString("\nSizes:")
			for _, h := range x.Handles {
				fmt.Fprintf(bw, " %d", h.Size)
			}
			bw.WriteByte('\n')
			// Ours, beside StarPU's per-handle lists: each handle's
			// footprint, hexadecimal as the task's. A trace of version 1
			// has none.
			if slices.ContainsFunc(x.Handles, func(h Access) bool { return h.Footprint != 0 }) {
				bw.WriteString("Footprints:")
				for _, h := range x.Handles {
					fmt.Fprintf(bw, " %x", h.Footprint)
				}
				bw.WriteByte('\n')
			}
		}
		bw.WriteString("MPIRank: 0\n\n")
	}
	return bw.Flush()
}
