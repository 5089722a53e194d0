package trace

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is what `starpu trace summary` prints: where the time went.
// Times are nanoseconds.
type Summary struct {
	// Start and End bound the run's execution: the first task's start
	// and the last task's end; Makespan is End-Start.
	Start, End, Makespan int64
	// Tasks counts the tasks submitted or run; Ran those that ran on a
	// worker; Failed those that failed.
	Tasks, Ran, Failed int
	Workers            []WorkerSummary
	Codelets           []CodeletSummary
	Links              []LinkSummary
	// CriticalPath is the longest chain of dependent tasks, weighted by
	// their execution times: no schedule on any number of workers is
	// shorter. CriticalTasks are its tasks, first to last.
	CriticalPath  int64
	CriticalTasks []uint64
	// Efficiency is the workers' executing time over Makespan times the
	// number of workers.
	Efficiency float64
}

// WorkerSummary is one worker's share of the makespan: executing its
// tasks, and the states between them (states.go), each clipped to the
// makespan.
type WorkerSummary struct {
	Worker Worker
	// Tasks and Executing count the tasks it ran, a parallel task on
	// every member of its team.
	Tasks     int
	Executing int64
	// Fetching: waiting for the transfers of its next task's data;
	// Scheduling: its next task was ready and not running yet (the
	// policy, the dispatch, the wake-up); Sleeping: no task of its was
	// ready and it slept on its doorbell; Idle: no task of its was ready,
	// and it was awake (or its driver did not say).
	Fetching, Scheduling, Sleeping, Idle int64
	// Other is the makespan the rest leave: time the trace says nothing
	// about (a trace from before the states, or cut short).
	Other int64
}

// CodeletSummary is the executions of one codelet (tasks by name).
type CodeletSummary struct {
	Name                  string
	Count                 int
	Total, Mean, Min, Max int64
}

// LinkSummary is the transfers over one bus link.
type LinkSummary struct {
	Src, Dst int
	Count    int
	Bytes    uint64
	Busy     int64
}

// Summarize computes t's summary.
func (t *Trace) Summarize() Summary {
	s := Summary{Tasks: len(t.Tasks)}
	first := true
	byWorker := map[int]*WorkerSummary{}
	for _, w := range t.Workers {
		byWorker[w.ID] = &WorkerSummary{Worker: w}
	}
	byName := map[string]*CodeletSummary{}
	var one [1]int
	for _, x := range t.Tasks {
		if x.Failed {
			s.Failed++
		}
		if !x.Ran {
			continue
		}
		s.Ran++
		if first || x.Start < s.Start {
			s.Start = x.Start
		}
		if first || x.End > s.End {
			s.End = x.End
		}
		first = false
		d := x.Duration()
		// Every member of a team executes its task (and counts it); the
		// codelet counts it once.
		for _, id := range x.ranOn(&one) {
			w := byWorker[id]
			if w == nil {
				w = &WorkerSummary{Worker: Worker{ID: id, Name: fmt.Sprintf("worker %d", id)}}
				byWorker[id] = w
			}
			w.Tasks++
			w.Executing += d
		}
		c := byName[x.Kind()]
		if c == nil {
			c = &CodeletSummary{Name: x.Kind(), Min: d, Max: d}
			byName[x.Kind()] = c
		}
		c.Count++
		c.Total += d
		c.Min, c.Max = min(c.Min, d), max(c.Max, d)
	}
	s.Makespan = s.End - s.Start
	for _, st := range t.States {
		w := byWorker[st.Worker]
		d := min(st.End, s.End) - max(st.Start, s.Start)
		if w == nil || d <= 0 {
			continue
		}
		switch st.Kind {
		case StateFetching:
			w.Fetching += d
		case StateScheduling:
			w.Scheduling += d
		case StateSleeping:
			w.Sleeping += d
		case StateIdle:
			w.Idle += d
		}
	}
	var busy int64
	for _, w := range byWorker {
		w.Other = max(0, s.Makespan-w.Executing-w.Fetching-w.Scheduling-w.Sleeping-w.Idle)
		busy += w.Executing
		s.Workers = append(s.Workers, *w)
	}
	sort.Slice(s.Workers, func(i, j int) bool { return s.Workers[i].Worker.ID < s.Workers[j].Worker.ID })
	if s.Makespan > 0 && len(s.Workers) > 0 {
		s.Efficiency = float64(busy) / (float64(s.Makespan) * float64(len(s.Workers)))
	}
	for _, c := range byName {
		c.Mean = c.Total / int64(c.Count)
		s.Codelets = append(s.Codelets, *c)
	}
	sort.Slice(s.Codelets, func(i, j int) bool {
		a, b := s.Codelets[i], s.Codelets[j]
		if a.Total != b.Total {
			return a.Total > b.Total
		}
		return a.Name < b.Name
	})
	links := map[[2]int]*LinkSummary{}
	for _, x := range t.Transfers {
		l := links[[2]int{x.Src, x.Dst}]
		if l == nil {
			l = &LinkSummary{Src: x.Src, Dst: x.Dst}
			links[[2]int{x.Src, x.Dst}] = l
		}
		l.Count++
		l.Bytes += x.Bytes
		l.Busy += x.End - x.Start
	}
	for _, l := range links {
		s.Links = append(s.Links, *l)
	}
	sort.Slice(s.Links, func(i, j int) bool {
		if s.Links[i].Src != s.Links[j].Src {
			return s.Links[i].Src < s.Links[j].Src
		}
		return s.Links[i].Dst < s.Links[j].Dst
	})
	s.CriticalPath, s.CriticalTasks = t.CriticalPath()
	return s
}

// CriticalPath is the longest path through the task graph, each task
// weighing its execution time (0 for a task that ran nowhere), and its
// tasks in order. Dependencies on tasks the trace does not know (an
// acquisition, say) are ignored; so is a cycle, which a valid trace
// cannot have.
func (t *Trace) CriticalPath() (int64, []uint64) {
	index := make(map[uint64]int, len(t.Tasks))
	for i, x := range t.Tasks {
		index[x.ID] = i
	}
	n := len(t.Tasks)
	indeg := make([]int32, n)
	succs := make([][]int32, n)
	for i, x := range t.Tasks {
		for _, p := range x.Preds {
			if k, ok := index[p]; ok {
				succs[k] = append(succs[k], int32(i))
				indeg[i]++
			}
		}
	}
	dist := make([]int64, n)
	from := make([]int32, n)
	queue := make([]int32, 0, n)
	for i := range t.Tasks {
		from[i] = -1
		if indeg[i] == 0 {
			queue = append(queue, int32(i))
			dist[i] = t.Tasks[i].Duration()
		}
	}
	for q := 0; q < len(queue); q++ {
		i := queue[q]
		for _, k := range succs[i] {
			if d := dist[i] + t.Tasks[k].Duration(); from[k] < 0 || d > dist[k] {
				dist[k], from[k] = d, i
			}
			if indeg[k]--; indeg[k] == 0 {
				queue = append(queue, k)
			}
		}
	}
	best := int32(-1)
	for _, i := range queue {
		if best < 0 || dist[i] > dist[best] {
			best = i
		}
	}
	if best < 0 {
		return 0, nil
	}
	var path []uint64
	for i := best; i >= 0; i = from[i] {
		path = append(path, t.Tasks[i].ID)
	}
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	return dist[best], path
}

// ms formats ns as milliseconds.
func ms(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

func pct(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// WriteSummary prints s as `starpu trace summary` does.
func (t *Trace) WriteSummary(w io.Writer, s Summary) error {
	var b strings.Builder
	state := "complete"
	if !t.Complete {
		state = "incomplete: the runtime did not close it (crashed, killed, or still running)"
	}
	fmt.Fprintf(&b, "trace: %s format, %s\n", t.Format, state)
	if t.Origin != 0 {
		fmt.Fprintf(&b, "started: %s\n", time.Unix(0, t.Origin).Format(time.RFC3339Nano))
	}
	fmt.Fprintf(&b, "tasks: %d, ran on workers: %d, failed: %d; transfers: %d\n", s.Tasks, s.Ran, s.Failed, len(t.Transfers))
	fmt.Fprintf(&b, "makespan: %s (first task start to last task end)\n", ms(s.Makespan))
	fmt.Fprintf(&b, "critical path: %s over %d tasks, %s of the makespan\n", ms(s.CriticalPath), len(s.CriticalTasks), pct(s.CriticalPath, s.Makespan))
	fmt.Fprintf(&b, "parallel efficiency: %.1f%% (executing time / (makespan x %d workers))\n\n", 100*s.Efficiency, len(s.Workers))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\ttasks\texecuting\t%\tfetching\t%\tscheduling\t%\tsleeping\t%\tidle\t%\t")
	other := false
	for _, x := range s.Workers {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Worker.Name, x.Tasks, ms(x.Executing), pct(x.Executing, s.Makespan),
			ms(x.Fetching), pct(x.Fetching, s.Makespan), ms(x.Scheduling), pct(x.Scheduling, s.Makespan), ms(x.Sleeping), pct(x.Sleeping, s.Makespan),
			ms(x.Idle), pct(x.Idle, s.Makespan))
		// Rounding leaves nanoseconds; a trace with no states the makespan.
		other = other || x.Other > s.Makespan/1000
	}
	tw.Flush()
	b.WriteString("fetching: waiting for its next task's data; scheduling: its next task was ready, not yet running;\nsleeping: no task of its was ready, asleep on its doorbell; idle: no task of its was ready, awake\n")
	if other {
		b.WriteString("the states do not cover every worker's makespan: this trace does not record them all\n")
	}
	if len(t.Plugins) > 0 {
		b.WriteByte('\n')
		for _, p := range t.Plugins {
			note := ""
			if p.Note != "" {
				note = ": " + p.Note
			}
			fmt.Fprintf(&b, "plugin %s at %s: %s (pid %d)%s\n", p.Kind, ms(p.Time), p.Name, p.Pid, note)
		}
	}
	b.WriteByte('\n')
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "codelet\tcount\ttotal\tmean\tmin\tmax\t")
	for _, c := range s.Codelets {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", c.Name, c.Count, ms(c.Total), us3(c.Mean), us3(c.Min), us3(c.Max))
	}
	tw.Flush()
	if len(s.Links) > 0 {
		b.WriteByte('\n')
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "bus link\ttransfers\tbytes\tbusy\tMB/s\t")
		for _, l := range s.Links {
			rate := "-"
			if l.Busy > 0 {
				rate = fmt.Sprintf("%.1f", float64(l.Bytes)/(float64(l.Busy)/1e9)/1e6)
			}
			fmt.Fprintf(tw, "%s -> %s\t%d\t%d\t%s\t%s\t\n", t.NodeName(l.Src), t.NodeName(l.Dst), l.Count, l.Bytes, ms(l.Busy), rate)
		}
		tw.Flush()
	}
	if len(t.Comms) > 0 {
		b.WriteByte('\n')
		type peer struct {
			n, bytes [2]uint64
			busy     [2]int64
		}
		peers := map[[2]int]*peer{}
		var ids [][2]int
		for _, c := range t.Comms {
			key := [2]int{c.Rank, c.Peer}
			p := peers[key]
			if p == nil {
				p = &peer{}
				peers[key] = p
				ids = append(ids, key)
			}
			k := 0
			if c.Send {
				k = 1
			}
			p.n[k]++
			p.bytes[k] += c.Bytes
			p.busy[k] += c.End - c.Start
		}
		sort.Slice(ids, func(i, j int) bool {
			return ids[i][0] < ids[j][0] || ids[i][0] == ids[j][0] && ids[i][1] < ids[j][1]
		})
		merged := t.multiRank()
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "peer rank"
		if merged {
			head = "rank -> peer rank"
		}
		fmt.Fprintln(tw, head+"\tsends\tbytes sent\tsending\treceives\tbytes received\treceiving\t")
		for _, id := range ids {
			p := peers[id]
			label := strconv.Itoa(id[1])
			if merged {
				label = fmt.Sprintf("%d -> %d", id[0], id[1])
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t\n", label, p.n[1], p.bytes[1], ms(p.busy[1]), p.n[0], p.bytes[0], ms(p.busy[0]))
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func us3(ns int64) string { return fmt.Sprintf("%.3f us", float64(ns)/1e3) }
