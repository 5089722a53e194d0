package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
)

// Trace is a trace read back (Read, ReadFile): what the tools summarise
// and draw. Times are nanoseconds since the runtime's Init.
type Trace struct {
	// Origin is the wall-clock time of time 0, in Unix nanoseconds (0 when
	// the file does not say).
	Origin int64
	// Workers and Nodes name the timeline rows and the memory nodes.
	Workers []Worker
	Nodes   []Node
	// Tasks, in the order of their job numbers.
	Tasks     []*Task
	Transfers []Transfer
	// States are the workers' time between tasks (states.go), per
	// worker in time order.
	States []State
	// Plugins are the plugin processes' starts and exits; Comms the
	// point-to-point communications a communication layer (core/mpi)
	// reported.
	Plugins []PluginEvent
	Comms   []Comm
	// Complete: the runtime closed the trace (Shutdown). A trace that is
	// not complete ends where the run stopped writing it.
	Complete bool
	// Format is "native" or "json".
	Format string
}

// Task is one submission of a task: a job, as StarPU's tasks.rec lists
// them.
type Task struct {
	ID uint64
	// Name is the task's name (Task.Name, else its codelet's); Codelet
	// its codelet's, which the summary groups by; Model its performance
	// model's.
	Name     string
	Codelet  string
	Model    string
	Priority int64
	Tag      uint64
	HasTag   bool
	Flops    float64
	Iter     []int64
	Handles  []Access
	// Preds are the jobs whose completion released this one (data,
	// explicit and tag dependencies), in the order they did.
	Preds []uint64
	// Submitted: its submission was recorded; Ran: it ran on Worker from
	// Start to End. Ready is when its dependencies were met (0 unknown).
	Submitted, Ran bool
	Submit, Ready  int64
	Worker         int
	Start, End     int64
	Footprint      uint32
	Failed         bool
	// The scheduler's decision: Posted says the policy posted the task to
	// its worker itself (the core only learnt where it ran); Predicted and
	// PredictedTransfer are what the performance models expected of the
	// task and of its input's transfers on that worker, -1 unknown.
	Posted                       bool
	Predicted, PredictedTransfer int64
	// SleepStart and SleepEnd bound the sleeps of Worker on its doorbell
	// since its previous completion, as its driver reported them with this
	// task's (the first's start, the last's end); 0 none. The states
	// (states.go) clip them to the gap before the task.
	SleepStart, SleepEnd int64
	// Impl is the index of the codelet's implementation that ran, among
	// those for Worker's architecture (ProfilingInfo.Implementation); -1
	// unknown.
	Impl int
	// Team lists the workers of the combined worker a parallel task ran
	// on, the master (Worker, whose driver timed it) first; nil for a task
	// on one worker. Every member ran it from Start to End.
	Team []int
}

// newTask is a task known by its number only.
func newTask(id uint64) Task {
	return Task{ID: id, Worker: -1, Predicted: -1, PredictedTransfer: -1, Impl: -1}
}

// ranOn lists the workers t ran on: its team, else its worker alone, in
// one (so that a task on one worker costs no allocation).
func (t *Task) ranOn(one *[1]int) []int {
	if len(t.Team) > 0 {
		return t.Team
	}
	one[0] = t.Worker
	return one[:]
}

// memberName names a team task's slice on a member other than its master
// (the Chrome and Perfetto traces draw one on every member): its name,
// the team's size and its master.
func (t *Task) memberName() string {
	name := t.Name
	if name == "" {
		name = "task"
	}
	return fmt.Sprintf("%s (team of %d, master %d)", name, len(t.Team), t.Worker)
}

// Duration is the task's execution time, 0 when it did not run.
func (t *Task) Duration() int64 {
	if !t.Ran {
		return 0
	}
	return t.End - t.Start
}

// Transfer is one copy of a handle between two memory nodes.
type Transfer struct {
	Src, Dst   int
	Bytes      uint64
	Handle     uint64
	Start, End int64
	Failed     bool
}

// PluginKind says what happened to a plugin process.
type PluginKind uint8

// What a PluginEvent records.
const (
	// PluginStart: the process started (at Init, or when an interface or a
	// context's policy is loaded later).
	PluginStart PluginKind = 1
	// PluginExit: the core found it gone (it crashed, or was killed: Note
	// says which).
	PluginExit PluginKind = 2
	// PluginRestart: a start of a plugin that exited before (Read tells
	// it from PluginStart).
	PluginRestart PluginKind = 3
)

func (k PluginKind) String() string {
	switch k {
	case PluginStart:
		return "start"
	case PluginExit:
		return "exit"
	case PluginRestart:
		return "restart"
	}
	return fmt.Sprintf("plugin event %d", uint8(k))
}

// PluginEvent is a plugin process starting or ending: its name
// (driver-cpu, sched-dmda, ...), process id and, for an exit, how it
// ended.
type PluginEvent struct {
	Time int64
	Kind PluginKind
	Name string
	Pid  int
	Note string
}

// Comm is one point-to-point communication between processes (an MPI
// send or receive): the peer's rank, the message tag, its size, the
// handle it carried (0 none), and when it was posted and completed.
type Comm struct {
	Send bool
	// Rank is the rank that recorded it: 0 in one rank's trace, its rank
	// in a merged one (Merge).
	Rank       int
	Peer       int
	Tag        int64
	Bytes      uint64
	Handle     uint64
	Start, End int64
	Failed     bool
}

// Node names a memory node.
type Node struct {
	ID   int
	Name string
}

// builder assembles a Trace from records in any order.
type builder struct {
	t     *Trace
	byID  map[uint64]*Task
	wseen map[int]int
	nseen map[int]int
	// exited are the plugins that exited: their next start is a restart.
	exited map[string]bool
}

func newBuilder(t *Trace) *builder {
	return &builder{t: t, byID: map[uint64]*Task{}, wseen: map[int]int{}, nseen: map[int]int{}, exited: map[string]bool{}}
}

// plugin adds a plugin event; a start of a plugin that exited before is
// its restart.
func (b *builder) plugin(p PluginEvent) {
	switch p.Kind {
	case PluginExit:
		b.exited[p.Name] = true
	case PluginStart:
		if b.exited[p.Name] {
			p.Kind = PluginRestart
			b.exited[p.Name] = false
		}
	}
	b.t.Plugins = append(b.t.Plugins, p)
}

func (b *builder) task(id uint64) *Task {
	if x := b.byID[id]; x != nil {
		return x
	}
	x := new(Task)
	*x = newTask(id)
	b.byID[id] = x
	b.t.Tasks = append(b.t.Tasks, x)
	return x
}

func (b *builder) edge(from, to uint64) {
	if from == to {
		return
	}
	b.task(from)
	x := b.task(to)
	x.Preds = append(x.Preds, from)
}

func (b *builder) worker(w Worker) {
	if i, ok := b.wseen[w.ID]; ok {
		b.t.Workers[i] = w
		return
	}
	b.wseen[w.ID] = len(b.t.Workers)
	b.t.Workers = append(b.t.Workers, w)
}

func (b *builder) node(n Node) {
	if i, ok := b.nseen[n.ID]; ok {
		b.t.Nodes[i] = n
		return
	}
	b.nseen[n.ID] = len(b.t.Nodes)
	b.t.Nodes = append(b.t.Nodes, n)
}

// finish orders what the records gave in any order, and names the
// workers and nodes that ran something but were never described.
func (b *builder) finish() {
	t := b.t
	sort.Slice(t.Tasks, func(i, j int) bool { return t.Tasks[i].ID < t.Tasks[j].ID })
	for _, x := range t.Tasks {
		if x.Ran && x.Worker >= 0 {
			if _, ok := b.wseen[x.Worker]; !ok {
				b.worker(Worker{ID: x.Worker, Name: fmt.Sprintf("worker %d", x.Worker)})
			}
		}
	}
	for _, x := range t.Transfers {
		for _, n := range [2]int{x.Src, x.Dst} {
			if _, ok := b.nseen[n]; !ok {
				b.node(Node{ID: n, Name: fmt.Sprintf("node %d", n)})
			}
		}
	}
	sort.Slice(t.Workers, func(i, j int) bool { return t.Workers[i].ID < t.Workers[j].ID })
	sort.Slice(t.Nodes, func(i, j int) bool { return t.Nodes[i].ID < t.Nodes[j].ID })
	sort.SliceStable(t.Transfers, func(i, j int) bool { return t.Transfers[i].Start < t.Transfers[j].Start })
	sort.SliceStable(t.States, func(i, j int) bool {
		if t.States[i].Worker != t.States[j].Worker {
			return t.States[i].Worker < t.States[j].Worker
		}
		return t.States[i].Start < t.States[j].Start
	})
	sort.SliceStable(t.Comms, func(i, j int) bool { return t.Comms[i].Start < t.Comms[j].Start })
}

// Kind is what the summary and the charts group t by: its codelet, else
// its name.
func (t *Task) Kind() string {
	if t.Codelet != "" {
		return t.Codelet
	}
	return t.Name
}

// NodeName is memory node n's name.
func (t *Trace) NodeName(n int) string {
	for _, x := range t.Nodes {
		if x.ID == n {
			return x.Name
		}
	}
	return fmt.Sprintf("node %d", n)
}

// Read reads a trace in either format: the native one (Magic first) or a
// Chrome trace-event JSON document, as the runtime writes them.
func Read(r io.Reader) (*Trace, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, err := br.Peek(len(Magic))
	if v := nativeVersion(head); err == nil && v > 0 {
		if _, err := br.Discard(len(Magic)); err != nil {
			return nil, err
		}
		t := &Trace{Format: "native"}
		if err := readNative(br, v, t); err != nil {
			return nil, err
		}
		return t, nil
	}
	if head, err := br.Peek(1); err == nil && head[0] == 0x0a {
		// Field 1 of a protobuf message, length-delimited: a Perfetto
		// Trace's first packet.
		return nil, fmt.Errorf("%w: a Perfetto protobuf trace, which starpu trace does not read back: open it in ui.perfetto.dev, or trace the run to a native (.trace) or .json file", errCorrupt)
	}
	first, err := firstNonSpace(br)
	if err != nil {
		return nil, fmt.Errorf("%w: empty file", errCorrupt)
	}
	if first != '{' && first != '[' {
		return nil, fmt.Errorf("%w: neither a native trace (%q) nor a JSON document", errCorrupt, bytes.TrimSpace([]byte(Magic)))
	}
	return readChrome(br)
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if err != nil {
			return 0, err
		}
		if c := b[n-1]; c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			return c, nil
		}
	}
}

// ReadFile reads the trace in file path, or, when there is no such file,
// the rank files of an MPI run whose base name path is, merged (Merge).
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return readRanks(path, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
