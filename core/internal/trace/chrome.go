package trace

// Chrome trace-event JSON: ConvertChrome turns native records into
// events as it reads them (Stream.Close does for .json files, and
// `starpu trace json`), and readChrome reads the document back. A task is one complete event ("X") on its worker's row (pid 1,
// tid the worker), with its job number, submit and ready times, handles
// and the jobs that released it in args; a dependency is also a flow
// (ph "s" in the predecessor, "f" in the successor) so that Perfetto draws
// the arrow; a transfer is a complete event on its bus link's row (pid 2).
// A parallel task that ran on a team is a complete event on each member's
// row, named "NAME (team of N, master W)" on the other members, with the
// same args (its team in "team"); its flows start and end on its master's.
// A worker's states between tasks (states.go: idle, sleeping,
// scheduling, fetching) are complete events of category "state" on its
// row; plugin process events are instants on
// pid 4, one row per plugin; communications complete events on pid 5,
// one row per peer rank.
// Submissions wait in the sink until their task runs: the sink holds what
// the runtime holds, the tasks submitted and not yet run.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

type chromeSink struct {
	bw     *bufio.Writer
	wall   int64
	names  map[uint64]string
	tasks  map[uint64]*pendingTask
	links  map[[2]int]bool
	nflow  uint64
	n      int // events written
	scrat  []byte
	ws     []Worker
	ns     []Node
	closed bool // the end record was seen
	// nowhere: some task ran nowhere (the row of pid 3 exists).
	nowhere bool
	// free are written tasks, for reuse.
	free []*pendingTask
	st   *stateDeriver
	serr error // the first error writing a state
	// plugins are the rows of pid 4 by plugin name; exited the plugins
	// whose next start is a restart; peers the rows of pid 5.
	plugins map[string]int
	exited  map[string]bool
	peers   map[int]bool
}

// pendingTask is a submitted task that has not run yet.
type pendingTask struct {
	Task
	flows []uint64
}

// ConvertChrome reads a native trace from r and writes it to w as a
// Chrome trace-event JSON document. Its memory holds the tasks submitted
// and not yet run at each point of the trace, as the runtime did. A trace
// cut short converts up to its last whole record, marked incomplete.
func ConvertChrome(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<16)
	head := make([]byte, len(Magic))
	version := 0
	if _, err := io.ReadFull(br, head); err == nil {
		version = nativeVersion(head)
	}
	if version == 0 {
		return fmt.Errorf("%w: not a native trace", errCorrupt)
	}
	wall, err := binary.ReadVarint(br)
	if err != nil {
		return fmt.Errorf("%w: %w", errCorrupt, truncated(err))
	}
	c := &chromeSink{bw: bufio.NewWriterSize(w, chunkSize), wall: wall, names: map[uint64]string{},
		tasks: map[uint64]*pendingTask{}, links: map[[2]int]bool{}, plugins: map[string]int{}, exited: map[string]bool{}, peers: map[int]bool{}}
	c.st = newStateDeriver(c.state)
	if _, err := c.bw.WriteString("{\"traceEvents\":[\n"); err != nil {
		return err
	}
	if err := c.consume(br, version); err != nil && !errors.Is(err, errTruncated) {
		return err
	}
	return c.finish()
}

func (c *chromeSink) pending(id uint64) *pendingTask {
	p := c.tasks[id]
	if p == nil {
		if n := len(c.free); n > 0 {
			p, c.free = c.free[n-1], c.free[:n-1]
			iter, hs, preds, team, flows := p.Iter[:0], p.Handles[:0], p.Preds[:0], p.Team[:0], p.flows[:0]
			*p = pendingTask{Task: newTask(id), flows: flows}
			p.Iter, p.Handles, p.Preds, p.Team = iter, hs, preds, team
		} else {
			p = &pendingTask{Task: newTask(id)}
		}
		c.tasks[id] = p
	}
	return p
}

// done forgets p, written: its memory serves the next task.
func (c *chromeSink) done(p *pendingTask) {
	delete(c.tasks, p.ID)
	c.free = append(c.free, p)
}

// us writes ns as microseconds with three decimals.
func us(b []byte, ns int64) []byte {
	return strconv.AppendFloat(b, float64(ns)/1e3, 'f', 3, 64)
}

func (c *chromeSink) event(b []byte) error {
	if c.n > 0 {
		if _, err := c.bw.WriteString(",\n"); err != nil {
			return err
		}
	}
	c.n++
	_, err := c.bw.Write(b)
	return err
}

// consume converts the records of a native trace of the given version
// until the end of br.
func (c *chromeSink) consume(br io.ByteReader, version int) error {
	r := newReader(br, version)
	for {
		k, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch k {
		case kindName:
			id := r.u()
			c.names[id] = r.str()
		case kindCursor:
			r.cursor()
		case kindHandle:
			r.handle(c.names)
		case kindSubmit, kindRepeat, kindRepeatTag:
			p := c.pending(r.submitID(k))
			r.submission(k, &p.Task, c.names)
			p.Submitted = true
			c.st.seen(p.Submit)
		case kindReady:
			p := c.pending(r.u())
			p.Ready = r.time()
			c.st.seen(p.Ready)
		case kindRun, kindRunNext:
			p := c.pending(r.runID(k))
			r.run(k, &p.Task)
			if r.err == nil {
				c.st.run(&p.Task)
				if err = c.serr; err == nil {
					err = c.task(p)
				}
				c.done(p)
			}
		case kindEdge, kindEdgeRun, kindHop:
			from, to, w, s, e := r.edge(k)
			if q := c.tasks[from]; w < 0 && q != nil && q.Submitted && !q.Ran && r.err == nil {
				// A task releases its successors once it has run or,
				// when it runs nowhere, terminated: this one is over.
				if err = c.instant(q); err != nil {
					return err
				}
				c.done(q)
			}
			p := c.pending(to)
			p.Preds = append(p.Preds, from)
			if w >= 0 && r.err == nil {
				c.nflow++
				p.flows = append(p.flows, c.nflow)
				b := append(c.scrat[:0], `{"name":"dep","cat":"dep","ph":"s","id":`...)
				b = strconv.AppendUint(b, c.nflow, 10)
				b = append(b, `,"ts":`...)
				b = us(b, s+(e-s)/2)
				b = append(b, `,"pid":1,"tid":`...)
				b = strconv.AppendInt(b, w, 10)
				b = append(b, '}')
				c.scrat = b
				err = c.event(b)
			}
			if k == kindHop && r.err == nil {
				p.Ready = e
				c.st.seen(e)
			}
		case kindXfer:
			x := Transfer{Src: int(r.u()), Dst: int(r.u()), Bytes: r.u(), Handle: r.u(), Start: r.i(), End: r.i()}
			x.Failed = r.u()&flagFailed != 0
			if r.err == nil {
				c.st.transfer(x)
				err = c.transfer(x)
			}
		case kindWorker:
			w := Worker{ID: int(r.u()), Node: int(r.i()), Arch: r.str()}
			w.Name = r.str()
			c.st.worker(w)
			c.ws = putWorker(c.ws, w)
		case kindNode:
			c.ns = putNode(c.ns, Node{ID: int(r.u()), Name: r.str()})
		case kindPlugin:
			p := r.plugin(c.names)
			if r.err == nil {
				err = c.plugin(p)
			}
		case kindComm:
			x := r.comm()
			if r.err == nil {
				err = c.comm(x)
			}
		case kindEnd:
			c.closed = true
		default:
			return fmt.Errorf("%w: unknown record kind %d", errCorrupt, k)
		}
		if r.err != nil {
			return r.err
		}
		if err != nil {
			return err
		}
	}
}

// taskArgs is a task's args in its event.
func taskArgs(b []byte, p *Task) []byte {
	b = append(b, `"args":{"id":`...)
	b = strconv.AppendUint(b, p.ID, 10)
	if p.Submitted {
		b = append(b, `,"submit":`...)
		b = us(b, p.Submit)
	}
	if p.Ready != 0 {
		b = append(b, `,"ready":`...)
		b = us(b, p.Ready)
	}
	if p.Priority != 0 {
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, p.Priority, 10)
	}
	if p.Codelet != "" {
		b = append(b, `,"codelet":`...)
		b = strconv.AppendQuote(b, p.Codelet)
	}
	if p.Model != "" {
		b = append(b, `,"model":`...)
		b = strconv.AppendQuote(b, p.Model)
	}
	if p.HasTag {
		b = append(b, `,"tag":`...)
		b = strconv.AppendUint(b, p.Tag, 10)
	}
	if p.Flops != 0 {
		b = append(b, `,"flops":`...)
		b = strconv.AppendFloat(b, p.Flops, 'g', -1, 64)
	}
	if p.Ran {
		b = append(b, `,"footprint":"`...)
		b = strconv.AppendUint(b, uint64(p.Footprint), 16)
		b = append(b, '"')
	}
	if p.Failed {
		b = append(b, `,"failed":true`...)
	}
	if p.Posted {
		b = append(b, `,"posted":true`...)
	}
	if p.Predicted >= 0 {
		b = append(b, `,"predicted":`...)
		b = us(b, p.Predicted)
	}
	if p.PredictedTransfer >= 0 {
		b = append(b, `,"predicted_transfer":`...)
		b = us(b, p.PredictedTransfer)
	}
	if p.SleepEnd != 0 {
		b = append(b, `,"sleep_start":`...)
		b = us(b, p.SleepStart)
		b = append(b, `,"sleep_end":`...)
		b = us(b, p.SleepEnd)
	}
	if p.Impl >= 0 {
		b = append(b, `,"impl":`...)
		b = strconv.AppendInt(b, int64(p.Impl), 10)
	}
	if len(p.Team) > 0 {
		b = append(b, `,"team":[`...)
		for i, w := range p.Team {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(w), 10)
		}
		b = append(b, ']')
	}
	if len(p.Iter) > 0 {
		b = append(b, `,"iteration":`...)
		b = strconv.AppendInt(b, p.Iter[0], 10)
	}
	if len(p.Iter) > 1 {
		b = append(b, `,"outer_iteration":`...)
		b = strconv.AppendInt(b, p.Iter[1], 10)
	}
	if len(p.Preds) > 0 {
		b = append(b, `,"deps":[`...)
		for i, d := range p.Preds {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, d, 10)
		}
		b = append(b, ']')
	}
	if len(p.Handles) > 0 {
		b = append(b, `,"handles":[`...)
		for i, h := range p.Handles {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = strconv.AppendUint(b, h.Handle, 10)
			b = append(b, `,"mode":"`...)
			b = append(b, ModeString(h.Mode)...)
			b = append(b, `","size":`...)
			b = strconv.AppendUint(b, h.Size, 10)
			if h.Footprint != 0 {
				b = append(b, `,"footprint":"`...)
				b = strconv.AppendUint(b, uint64(h.Footprint), 16)
				b = append(b, '"')
			}
			if h.Name != "" {
				b = append(b, `,"name":`...)
				b = strconv.AppendQuote(b, h.Name)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func (c *chromeSink) task(p *pendingTask) error {
	name := p.Name
	if name == "" {
		name = "task"
	}
	var one [1]int
	for i, w := range p.ranOn(&one) {
		if i == 1 {
			name = p.memberName()
		}
		b := append(c.scrat[:0], `{"name":`...)
		b = strconv.AppendQuote(b, name)
		b = append(b, `,"cat":"task","ph":"X","ts":`...)
		b = us(b, p.Start)
		b = append(b, `,"dur":`...)
		b = us(b, p.End-p.Start)
		b = append(b, `,"pid":1,"tid":`...)
		b = strconv.AppendInt(b, int64(w), 10)
		b = append(b, ',')
		b = taskArgs(b, &p.Task)
		b = append(b, '}')
		c.scrat = b
		if err := c.event(b); err != nil {
			return err
		}
	}
	for _, f := range p.flows {
		b := append(c.scrat[:0], `{"name":"dep","cat":"dep","ph":"f","bp":"e","id":`...)
		b = strconv.AppendUint(b, f, 10)
		b = append(b, `,"ts":`...)
		b = us(b, p.Start)
		b = append(b, `,"pid":1,"tid":`...)
		b = strconv.AppendInt(b, int64(p.Worker), 10)
		b = append(b, '}')
		c.scrat = b
		if err := c.event(b); err != nil {
			return err
		}
	}
	return nil
}

// linkTid is a bus link's row.
func linkTid(src, dst int) int { return src*256 + dst }

func (c *chromeSink) transfer(x Transfer) error {
	c.links[[2]int{x.Src, x.Dst}] = true
	b := append(c.scrat[:0], `{"name":"transfer","cat":"transfer","ph":"X","ts":`...)
	b = us(b, x.Start)
	b = append(b, `,"dur":`...)
	b = us(b, x.End-x.Start)
	b = append(b, `,"pid":2,"tid":`...)
	b = strconv.AppendInt(b, int64(linkTid(x.Src, x.Dst)), 10)
	b = append(b, `,"args":{"src":`...)
	b = strconv.AppendInt(b, int64(x.Src), 10)
	b = append(b, `,"dst":`...)
	b = strconv.AppendInt(b, int64(x.Dst), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendUint(b, x.Bytes, 10)
	b = append(b, `,"handle":`...)
	b = strconv.AppendUint(b, x.Handle, 10)
	if x.Failed {
		b = append(b, `,"failed":true`...)
	}
	b = append(b, `}}`...)
	c.scrat = b
	return c.event(b)
}

// putWorker adds w to ws, replacing the worker of its number: the native
// trace describes the workers at Init and again at Close.
func putWorker(ws []Worker, w Worker) []Worker {
	for i := range ws {
		if ws[i].ID == w.ID {
			ws[i] = w
			return ws
		}
	}
	return append(ws, w)
}

// putNode is putWorker for nodes.
func putNode(ns []Node, n Node) []Node {
	for i := range ns {
		if ns[i].ID == n.ID {
			ns[i] = n
			return ns
		}
	}
	return append(ns, n)
}

// state writes a worker's state, as the deriver finds them (it cannot
// return an error: the first is kept).
func (c *chromeSink) state(st State) {
	if c.serr != nil {
		return
	}
	b := append(c.scrat[:0], `{"name":"`...)
	b = append(b, st.Kind.String()...)
	b = append(b, `","cat":"state","ph":"X","ts":`...)
	b = us(b, st.Start)
	b = append(b, `,"dur":`...)
	b = us(b, st.End-st.Start)
	b = append(b, `,"pid":1,"tid":`...)
	b = strconv.AppendInt(b, int64(st.Worker), 10)
	if st.Task != 0 {
		b = append(b, `,"args":{"next":`...)
		b = strconv.AppendUint(b, st.Task, 10)
		b = append(b, '}')
	}
	b = append(b, '}')
	c.scrat = b
	c.serr = c.event(b)
}

// plugin writes a plugin process event as an instant on the plugin's row
// of pid 4.
func (c *chromeSink) plugin(p PluginEvent) error {
	switch p.Kind {
	case PluginExit:
		c.exited[p.Name] = true
	case PluginStart:
		if c.exited[p.Name] {
			p.Kind, c.exited[p.Name] = PluginRestart, false
		}
	}
	tid, ok := c.plugins[p.Name]
	if !ok {
		tid = len(c.plugins)
		c.plugins[p.Name] = tid
	}
	b := append(c.scrat[:0], `{"name":`...)
	b = strconv.AppendQuote(b, p.Kind.String()+" "+p.Name)
	b = append(b, `,"cat":"plugin","ph":"i","s":"p","ts":`...)
	b = us(b, p.Time)
	b = append(b, `,"pid":4,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, `,"args":{"plugin":`...)
	b = strconv.AppendQuote(b, p.Name)
	b = append(b, `,"event":"`...)
	b = append(b, p.Kind.String()...)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(p.Pid), 10)
	if p.Note != "" {
		b = append(b, `,"note":`...)
		b = strconv.AppendQuote(b, p.Note)
	}
	b = append(b, `}}`...)
	c.scrat = b
	return c.event(b)
}

// commName names a communication's slice.
func commName(x Comm) string {
	if x.Send {
		return "send to " + strconv.Itoa(x.Peer)
	}
	return "recv from " + strconv.Itoa(x.Peer)
}

// comm writes a communication as a complete event on its peer's row of
// pid 5.
func (c *chromeSink) comm(x Comm) error {
	c.peers[x.Peer] = true
	b := append(c.scrat[:0], `{"name":`...)
	b = strconv.AppendQuote(b, commName(x))
	b = append(b, `,"cat":"comm","ph":"X","ts":`...)
	b = us(b, x.Start)
	b = append(b, `,"dur":`...)
	b = us(b, x.End-x.Start)
	b = append(b, `,"pid":5,"tid":`...)
	b = strconv.AppendInt(b, int64(x.Peer), 10)
	b = append(b, `,"args":{"send":`...)
	b = strconv.AppendBool(b, x.Send)
	b = append(b, `,"peer":`...)
	b = strconv.AppendInt(b, int64(x.Peer), 10)
	b = append(b, `,"tag":`...)
	b = strconv.AppendInt(b, x.Tag, 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendUint(b, x.Bytes, 10)
	b = append(b, `,"handle":`...)
	b = strconv.AppendUint(b, x.Handle, 10)
	if x.Failed {
		b = append(b, `,"failed":true`...)
	}
	b = append(b, `}}`...)
	c.scrat = b
	return c.event(b)
}

// chromeMeta is the document's otherData: what the events do not say.
type chromeMeta struct {
	Origin   int64    `json:"origin_unix_ns"`
	Complete bool     `json:"complete"`
	Workers  []Worker `json:"workers"`
	Nodes    []Node   `json:"nodes"`
}

func metaEvent(pid, tid int, kind, name string) []byte {
	b, _ := json.Marshal(map[string]any{"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": map[string]string{"name": name}})
	return b
}

// instant writes a task that ran nowhere (a synchronisation task, a task
// that failed before running) as an instant at its ready or submit time,
// on a row of its own.
func (c *chromeSink) instant(p *pendingTask) error {
	c.nowhere = true
	t := p.Submit
	if p.Ready != 0 {
		t = p.Ready
	}
	name := p.Name
	if name == "" {
		name = "sync"
	}
	b := append(c.scrat[:0], `{"name":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"cat":"task","ph":"i","s":"t","ts":`...)
	b = us(b, t)
	b = append(b, `,"pid":3,"tid":0,`...)
	b = taskArgs(b, &p.Task)
	b = append(b, '}')
	c.scrat = b
	return c.event(b)
}

func (c *chromeSink) finish() error {
	// Tasks that never ran (synchronisation tasks, tasks that failed
	// before running): instants at their submission, on their own row.
	var left []*pendingTask
	for _, p := range c.tasks {
		if p.Submitted {
			left = append(left, p)
		}
	}
	sort.Slice(left, func(i, j int) bool { return left[i].ID < left[j].ID })
	for _, p := range left {
		if err := c.instant(p); err != nil {
			return err
		}
	}
	c.st.finish()
	if c.serr != nil {
		return c.serr
	}
	meta := [][]byte{metaEvent(1, 0, "process_name", "starpu workers")}
	for _, w := range c.ws {
		meta = append(meta, metaEvent(1, w.ID, "thread_name", w.Name))
	}
	if len(c.links) > 0 {
		meta = append(meta, metaEvent(2, 0, "process_name", "bus"))
		name := func(n int) string {
			for _, x := range c.ns {
				if x.ID == n {
					return x.Name
				}
			}
			return fmt.Sprintf("node %d", n)
		}
		var links [][2]int
		for l := range c.links {
			links = append(links, l)
		}
		sort.Slice(links, func(i, j int) bool { return linkTid(links[i][0], links[i][1]) < linkTid(links[j][0], links[j][1]) })
		for _, l := range links {
			meta = append(meta, metaEvent(2, linkTid(l[0], l[1]), "thread_name", name(l[0])+" -> "+name(l[1])))
		}
	}
	if c.nowhere {
		meta = append(meta, metaEvent(3, 0, "process_name", "tasks that ran nowhere"))
	}
	if len(c.plugins) > 0 {
		meta = append(meta, metaEvent(4, 0, "process_name", "plugin processes"))
		names := make([]string, len(c.plugins))
		for name, tid := range c.plugins {
			names[tid] = name
		}
		for tid, name := range names {
			meta = append(meta, metaEvent(4, tid, "thread_name", name))
		}
	}
	if len(c.peers) > 0 {
		meta = append(meta, metaEvent(5, 0, "process_name", "communications"))
		peers := make([]int, 0, len(c.peers))
		for p := range c.peers {
			peers = append(peers, p)
		}
		sort.Ints(peers)
		for _, p := range peers {
			meta = append(meta, metaEvent(5, p, "thread_name", "rank "+strconv.Itoa(p)))
		}
	}
	for _, m := range meta {
		if err := c.event(m); err != nil {
			return err
		}
	}
	other, err := json.Marshal(chromeMeta{Origin: c.wall, Complete: c.closed, Workers: c.ws, Nodes: c.ns})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.bw, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"starpu\":%s}}\n", other)
	return c.bw.Flush()
}

// chromeDoc is a Chrome trace document as readChrome reads it.
type chromeDoc struct {
	TraceEvents []chromeIn `json:"traceEvents"`
	OtherData   struct {
		StarPU *chromeMeta `json:"starpu"`
	} `json:"otherData"`
}

type chromeIn struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	Ts   float64         `json:"ts"`
	Dur  float64         `json:"dur"`
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	Args json.RawMessage `json:"args"`
}

type chromeTaskArgs struct {
	ID        *uint64  `json:"id"`
	Submit    *float64 `json:"submit"`
	Ready     *float64 `json:"ready"`
	Priority  int64    `json:"priority"`
	Codelet   string   `json:"codelet"`
	Model     string   `json:"model"`
	Tag       *uint64  `json:"tag"`
	Flops     float64  `json:"flops"`
	Footprint string   `json:"footprint"`
	Failed    bool     `json:"failed"`
	Posted    bool     `json:"posted"`
	Predicted *float64 `json:"predicted"`
	PredXfer  *float64 `json:"predicted_transfer"`
	SleepFrom *float64 `json:"sleep_start"`
	SleepTo   *float64 `json:"sleep_end"`
	Impl      *int     `json:"impl"`
	Team      []int    `json:"team"`
	Iteration *int64   `json:"iteration"`
	Outer     *int64   `json:"outer_iteration"`
	Deps      []uint64 `json:"deps"`
	Handles   []struct {
		ID        uint64 `json:"id"`
		Mode      string `json:"mode"`
		Size      uint64 `json:"size"`
		Footprint string `json:"footprint"`
		Name      string `json:"name"`
	} `json:"handles"`
	// Name is a thread_name's.
	Name string `json:"name"`
}

type chromeStateArgs struct {
	Next uint64 `json:"next"`
}

type chromePluginArgs struct {
	Plugin string `json:"plugin"`
	Event  string `json:"event"`
	Pid    int    `json:"pid"`
	Note   string `json:"note"`
}

type chromeCommArgs struct {
	Send   bool   `json:"send"`
	Peer   int    `json:"peer"`
	Tag    int64  `json:"tag"`
	Bytes  uint64 `json:"bytes"`
	Handle uint64 `json:"handle"`
	Failed bool   `json:"failed"`
}

type chromeXferArgs struct {
	Src, Dst int
	Bytes    uint64
	Handle   uint64
	Failed   bool
}

func nsOf(us float64) int64 { return int64(math.Round(us * 1e3)) }

func parseMode(s string) uint8 {
	var m uint8
	for _, c := range s {
		switch c {
		case 'R':
			m |= ModeR
		case 'W':
			m |= ModeW
		case 'S':
			m |= ModeScratch
		case 'X':
			m |= ModeRedux
		case 'C':
			m |= ModeCommute
		}
	}
	return m
}

// readChrome reads a Chrome trace-event document: the runtime's streamed
// one, or WriteTrace's (no job numbers: the tasks are numbered in order).
func readChrome(r io.Reader) (*Trace, error) {
	var doc chromeDoc
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	t := &Trace{Format: "json"}
	b := newBuilder(t)
	var anon uint64 = 1 << 62
	for _, e := range doc.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "thread_name" && e.Pid == 1:
			var a chromeTaskArgs
			if json.Unmarshal(e.Args, &a) == nil {
				b.worker(Worker{ID: e.Tid, Name: a.Name})
			}
		case e.Cat == "state" && e.Ph == "X":
			var a chromeStateArgs
			if len(e.Args) > 0 {
				if err := json.Unmarshal(e.Args, &a); err != nil {
					return nil, fmt.Errorf("%w: state args: %w", errCorrupt, err)
				}
			}
			k := parseState(e.Name)
			if k == 0 {
				return nil, fmt.Errorf("%w: unknown worker state %q", errCorrupt, e.Name)
			}
			t.States = append(t.States, State{Worker: e.Tid, Kind: k, Start: nsOf(e.Ts), End: nsOf(e.Ts + e.Dur), Task: a.Next})
		case e.Cat == "plugin" && e.Ph == "i":
			var a chromePluginArgs
			if err := json.Unmarshal(e.Args, &a); err != nil {
				return nil, fmt.Errorf("%w: plugin event args: %w", errCorrupt, err)
			}
			p := PluginEvent{Time: nsOf(e.Ts), Name: a.Plugin, Pid: a.Pid, Note: a.Note}
			for k := PluginStart; k <= PluginRestart; k++ {
				if k.String() == a.Event {
					p.Kind = k
				}
			}
			if p.Kind == 0 {
				return nil, fmt.Errorf("%w: unknown plugin event %q", errCorrupt, a.Event)
			}
			t.Plugins = append(t.Plugins, p)
		case e.Cat == "comm" && e.Ph == "X":
			var a chromeCommArgs
			if err := json.Unmarshal(e.Args, &a); err != nil {
				return nil, fmt.Errorf("%w: communication args: %w", errCorrupt, err)
			}
			t.Comms = append(t.Comms, Comm{Send: a.Send, Peer: a.Peer, Tag: a.Tag, Bytes: a.Bytes, Handle: a.Handle,
				Start: nsOf(e.Ts), End: nsOf(e.Ts + e.Dur), Failed: a.Failed})
		case e.Cat == "transfer" && e.Ph == "X":
			var a chromeXferArgs
			if err := json.Unmarshal(e.Args, &a); err != nil {
				return nil, fmt.Errorf("%w: transfer args: %w", errCorrupt, err)
			}
			t.Transfers = append(t.Transfers, Transfer{Src: a.Src, Dst: a.Dst, Bytes: a.Bytes, Handle: a.Handle,
				Start: nsOf(e.Ts), End: nsOf(e.Ts + e.Dur), Failed: a.Failed})
		case (e.Cat == "task" || e.Cat == "") && e.Pid != 2 && (e.Ph == "X" || e.Ph == "i"):
			var a chromeTaskArgs
			if len(e.Args) > 0 {
				if err := json.Unmarshal(e.Args, &a); err != nil {
					return nil, fmt.Errorf("%w: task args: %w", errCorrupt, err)
				}
			}
			if len(a.Team) > 1 && e.Tid != a.Team[0] {
				break // a team member's copy: its master's event has it all
			}
			id := anon
			if a.ID != nil {
				id = *a.ID
			} else {
				anon++
			}
			x := b.task(id)
			x.Name, x.Codelet, x.Model, x.Priority, x.Flops, x.Failed = e.Name, a.Codelet, a.Model, a.Priority, a.Flops, a.Failed
			x.Posted = a.Posted
			if a.Predicted != nil {
				x.Predicted = nsOf(*a.Predicted)
			}
			if a.PredXfer != nil {
				x.PredictedTransfer = nsOf(*a.PredXfer)
			}
			if a.SleepFrom != nil && a.SleepTo != nil {
				x.SleepStart, x.SleepEnd = nsOf(*a.SleepFrom), nsOf(*a.SleepTo)
			}
			if a.Impl != nil {
				x.Impl = *a.Impl
			}
			if len(a.Team) > 0 {
				x.Team = a.Team
			}
			if a.Tag != nil {
				x.Tag, x.HasTag = *a.Tag, true
			}
			if a.Submit != nil {
				x.Submit, x.Submitted = nsOf(*a.Submit), true
			}
			if a.Ready != nil {
				x.Ready = nsOf(*a.Ready)
			}
			if a.Iteration != nil {
				x.Iter = append(x.Iter, *a.Iteration)
				if a.Outer != nil {
					x.Iter = append(x.Iter, *a.Outer)
				}
			}
			if fp, err := strconv.ParseUint(a.Footprint, 16, 32); err == nil {
				x.Footprint = uint32(fp)
			}
			for _, h := range a.Handles {
				acc := Access{Handle: h.ID, Mode: parseMode(h.Mode), Size: h.Size, Name: h.Name}
				if fp, err := strconv.ParseUint(h.Footprint, 16, 32); err == nil {
					acc.Footprint = uint32(fp)
				}
				x.Handles = append(x.Handles, acc)
			}
			for _, d := range a.Deps {
				b.edge(d, id)
			}
			if e.Ph == "X" {
				x.Ran, x.Worker, x.Start, x.End = true, e.Tid, nsOf(e.Ts), nsOf(e.Ts+e.Dur)
			}
		}
	}
	if m := doc.OtherData.StarPU; m != nil {
		t.Origin, t.Complete = m.Origin, m.Complete
		for _, w := range m.Workers {
			b.worker(w)
		}
		for _, n := range m.Nodes {
			b.node(n)
		}
	} else {
		// WriteTrace's document is written whole, at the end.
		t.Complete = true
	}
	b.finish()
	return t, nil
}
