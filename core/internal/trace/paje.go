package trace

// Paje, the text format ViTE draws and StarVZ reads, as StarPU's
// starpu_fxt_tool writes it (paje.trace). A Paje file opens with one
// %EventDef block per event kind (its number and the names and types of
// its fields); each line after is an event: its number, then its fields
// separated by spaces, strings with spaces in double quotes. The events
// define container types (a hierarchy), state, event, link types and
// their values, then create containers, set states, start and end links
// and destroy the containers, in time order. The header and the type
// hierarchy are StarPU's (src/debug/traces/starpu_paje.c), so that tools
// written for its traces find what they look for:
//
//	MPIP "MPI Program" > P "Program" > Mn "Memory Node" > T "Thread" (a worker)
//	                                                    > Mm "Memory Manager"
//	                                                    > MPICt "MPI Communication Thread"
//
// A worker's thread state (type S) is the codelet it executes (values
// named after the codelets, as StarPU's; a parallel task's on every
// member of its team), Fi (FetchingInput), Sc
// (Scheduling), Sl (Sleeping, StarPU's value for a worker asleep waiting
// for work) or Id (Idle: awake and waiting, where StarPU would show
// Overhead; see states.go). A transfer is a link of type L from the source node's
// memory manager to the destination's. A communication with another rank
// is two MPIev events on the MPI thread (posted, completed): its peer's
// containers are in that rank's own trace, so a link cannot join them.
// Plugin process events are prog_event events on the program. Times are
// milliseconds since Init, as StarPU's.

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// pajeHeader defines the events, with StarPU's numbers and fields.
const pajeHeader = `%EventDef	PajeDefineContainerType	1
%	Alias	string
%	ContainerType	string
%	Name	string
%EndEventDef
%EventDef	PajeDefineEventType	2
%	Alias	string
%	ContainerType	string
%	Name	string
%EndEventDef
%EventDef	PajeDefineStateType	3
%	Alias	string
%	ContainerType	string
%	Name	string
%EndEventDef
%EventDef	PajeDefineLinkType	5
%	Alias	string
%	ContainerType	string
%	SourceContainerType	string
%	DestContainerType	string
%	Name	string
%EndEventDef
%EventDef	PajeDefineEntityValue	6
%	Alias	string
%	EntityType	string
%	Name	string
%	Color	color
%EndEventDef
%EventDef	PajeCreateContainer	7
%	Time	date
%	Alias	string
%	Type	string
%	Container	string
%	Name	string
%EndEventDef
%EventDef	PajeDestroyContainer	8
%	Time	date
%	Name	string
%	Type	string
%EndEventDef
%EventDef	PajeNewEvent	9
%	Time	date
%	Type	string
%	Container	string
%	Value	string
%EndEventDef
%EventDef	PajeSetState	10
%	Time	date
%	Container	string
%	Type	string
%	Value	string
%EndEventDef
%EventDef	PajeStartLink	18
%	Time	date
%	Type	string
%	Container	string
%	Value	string
%	SourceContainer	string
%	Key	string
%EndEventDef
%EventDef	PajeEndLink	19
%	Time	date
%	Type	string
%	Container	string
%	Value	string
%	DestContainer	string
%	Key	string
%EndEventDef
`

// pajeTypes is the type hierarchy and the fixed state values.
const pajeTypes = `1	MPIP	0	"MPI Program"
1	P	MPIP	"Program"
1	Mn	P	"Memory Node"
1	T	Mn	"Thread"
1	Mm	Mn	"Memory Manager"
1	MPICt	T	"MPI Communication Thread"
2	prog_event	P	"program event type"
2	MPIev	MPICt	"MPI event type"
3	S	T	"Thread State"
5	L	P	Mm	Mm	"Links between two Memory Managers"
6	Fi	S	FetchingInput	"1.0 .1 1.0"
6	Sc	S	Scheduling	".7 .36 .0"
6	Sl	S	Sleeping	".9 .1 .0"
6	Id	S	Idle	".9 .9 .9"
`

// pajeEvent is one timed line, sorted by time before writing.
type pajeEvent struct {
	t    int64
	line string
}

// pajeQuote makes s one Paje string field.
func pajeQuote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `"`, "'"), "\n", " ") + `"`
}

// pajeTime writes ns as milliseconds.
func pajeTime(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 6, 64) }

// pajeColour turns a "#rrggbb" colour into Paje's "r g b" in [0, 1].
func pajeColour(c string) string {
	var r, g, b int
	if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return "0.5 0.5 0.5"
	}
	return fmt.Sprintf("%.3f %.3f %.3f", float64(r)/255, float64(g)/255, float64(b)/255)
}

// WritePaje writes t as a Paje trace (paje.trace), s being its summary
// (the codelets' colours follow the chart's).
func (t *Trace) WritePaje(w io.Writer, s Summary) error {
	bw := bufio.NewWriterSize(w, chunkSize)
	bw.WriteString(pajeHeader)
	bw.WriteString(pajeTypes)
	// A state value per codelet, named after it, coloured as in the chart.
	value := map[string]string{}
	for i, c := range s.Codelets {
		alias := "cl" + strconv.Itoa(i)
		value[c.Name] = alias
		fill := colour(i)
		col := "0.5 0.5 0.5"
		if strings.HasPrefix(fill, "#") {
			col = pajeColour(fill)
		}
		fmt.Fprintf(bw, "6\t%s\tS\t%s\t%s\n", alias, pajeQuote(c.Name), pajeQuote(col))
	}
	// The containers, at time 0, parents first.
	var end int64
	for _, x := range t.Tasks {
		end = max(end, x.End, x.Submit)
	}
	for _, x := range t.Transfers {
		end = max(end, x.End)
	}
	for _, x := range t.States {
		end = max(end, x.End)
	}
	for _, x := range t.Comms {
		end = max(end, x.End)
	}
	for _, x := range t.Plugins {
		end = max(end, x.Time)
	}
	type container struct{ alias, typ string }
	var made []container
	create := func(alias, typ, parent, name string) {
		fmt.Fprintf(bw, "7\t%s\t%s\t%s\t%s\t%s\n", pajeTime(0), alias, typ, parent, pajeQuote(name))
		made = append(made, container{alias, typ})
	}
	create("MPIroot", "MPIP", "0", "root")
	create("p0", "P", "MPIroot", "program")
	nodes := map[int]bool{}
	nodeOf := func(n int) string {
		if !nodes[n] {
			nodes[n] = true
			create("mn"+strconv.Itoa(n), "Mn", "p0", t.NodeName(n))
			create("mm"+strconv.Itoa(n), "Mm", "mn"+strconv.Itoa(n), t.NodeName(n)+" manager")
		}
		return "mn" + strconv.Itoa(n)
	}
	for _, n := range t.Nodes {
		nodeOf(n.ID)
	}
	workers := map[int]bool{}
	for _, wk := range t.Workers {
		workers[wk.ID] = true
		create("t"+strconv.Itoa(wk.ID), "T", nodeOf(wk.Node), wk.Name)
	}
	for _, x := range t.Transfers {
		nodeOf(x.Src)
		nodeOf(x.Dst)
	}
	if len(t.Comms) > 0 {
		// Under a thread: StarPU's MPI thread is one. A container of its
		// own in RAM's node holds it.
		create("tmpi", "T", nodeOf(0), "MPI thread")
		create("mpict", "MPICt", "tmpi", "MPI communications")
	}

	// The timed events.
	var evs []pajeEvent
	add := func(t int64, format string, a ...any) {
		evs = append(evs, pajeEvent{t, fmt.Sprintf(format, a...)})
	}
	type seg struct {
		start, end int64
		val        string
	}
	segs := map[int][]seg{}
	var one [1]int
	for _, x := range t.Tasks {
		if !x.Ran {
			continue
		}
		// A team's task is its codelet's state on every member's thread.
		for _, w := range x.ranOn(&one) {
			if workers[w] {
				segs[w] = append(segs[w], seg{x.Start, x.End, value[x.Kind()]})
			}
		}
	}
	for _, st := range t.States {
		if !workers[st.Worker] {
			continue
		}
		v := "Id"
		switch st.Kind {
		case StateFetching:
			v = "Fi"
		case StateScheduling:
			v = "Sc"
		case StateSleeping:
			v = "Sl"
		}
		segs[st.Worker] = append(segs[st.Worker], seg{st.Start, st.End, v})
	}
	for wid, ss := range segs {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
		c := "t" + strconv.Itoa(wid)
		for i, x := range ss {
			add(x.start, "10\t%s\t%s\tS\t%s", pajeTime(x.start), c, x.val)
			// A gap the states do not cover (a trace without them) is
			// idle.
			if i+1 == len(ss) || ss[i+1].start > x.end {
				add(x.end, "10\t%s\t%s\tS\tId", pajeTime(x.end), c)
			}
		}
	}
	for i, x := range t.Transfers {
		key := "xfer" + strconv.Itoa(i)
		v := pajeQuote(fmt.Sprintf("handle %d, %d bytes", x.Handle, x.Bytes))
		add(x.Start, "18\t%s\tL\tp0\t%s\tmm%d\t%s", pajeTime(x.Start), v, x.Src, key)
		add(x.End, "19\t%s\tL\tp0\t%s\tmm%d\t%s", pajeTime(x.End), v, x.Dst, key)
	}
	for _, c := range t.Comms {
		what := pajeQuote(fmt.Sprintf("%s, tag %d, %d bytes", commName(c), c.Tag, c.Bytes))
		add(c.Start, "9\t%s\tMPIev\tmpict\t%s", pajeTime(c.Start), pajeQuote(strings.Trim(what, `"`)+": posted"))
		done := "completed"
		if c.Failed {
			done = "failed"
		}
		add(c.End, "9\t%s\tMPIev\tmpict\t%s", pajeTime(c.End), pajeQuote(strings.Trim(what, `"`)+": "+done))
	}
	for _, p := range t.Plugins {
		v := fmt.Sprintf("%s %s (pid %d)", p.Kind, p.Name, p.Pid)
		if p.Note != "" {
			v += ": " + p.Note
		}
		add(p.Time, "9\t%s\tprog_event\tp0\t%s", pajeTime(p.Time), pajeQuote(v))
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	for _, e := range evs {
		bw.WriteString(e.line)
		bw.WriteByte('\n')
	}
	// Children before their parents.
	for i := len(made) - 1; i >= 0; i-- {
		fmt.Fprintf(bw, "8\t%s\t%s\t%s\n", pajeTime(end), made[i].alias, made[i].typ)
	}
	return bw.Flush()
}
