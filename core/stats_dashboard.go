package core

// The live dashboard's runtime side: what a snapshot holds and how it is
// taken; design note: docs/design/tracing.md.
//
// A snapshot is taken when the page asks for one (core/internal/dashboard
// serves it and shares one among the requests of a tenth of a second),
// never on a timer and never per task: with the dashboard off nothing of
// this runs, and with it on a task costs what it did. A sample reads:
//   - counters the runtime always keeps: the per-codelet, per-worker
//     execution counts and times (workerTotals), the pending and ready
//     counts, the contexts' pending counts;
//   - what the engine goroutine owns (which worker holds which task, the
//     contexts' queues, device memory, restart counts), through one call
//     on the engine's mailbox that walks engine.jobs under jobsMu (the
//     lock a push takes), at most dashWalkMax of them;
//   - the plugins' state: their processes, heartbeat words, errors.
//
// The engine call is bounded by the sample's deadline: a stuck engine
// costs the snapshot its engine part (Snapshot.Engine says why), not the
// page. Locks that a pusher may hold while it waits for the engine
// (SchedContext.mu) are taken on the server's goroutine, never inside the
// engine call.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/internal/dashboard"
	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// listenDashboard binds the dashboard's address, when one is configured
// (Options.Dashboard, else config dashboard / $STARPU_DASHBOARD), so that a
// bad address or a port in use fails Init before any plugin starts.
func (rt *Runtime) listenDashboard(opt Options) error {
	addr := opt.Dashboard
	if addr == "" {
		addr = rt.cfg.Dashboard
	}
	if addr == "" {
		return nil
	}
	s, err := dashboard.Listen(addr)
	if err != nil {
		return err
	}
	if tok := rt.getenv(config.EnvDashboardToken); tok != "" {
		s.SetToken(tok)
	}
	if s.Exposed() {
		rt.log.Warn("the live dashboard listens beyond this machine: anyone who reaches it sees the runtime's pids, codelets and errors; bind it to 127.0.0.1, or set "+config.EnvDashboardToken, "address", s.Addr())
	}
	rt.dash = s
	return nil
}

// serveDashboard starts answering, once the runtime is up.
func (rt *Runtime) serveDashboard() {
	if rt.dash == nil {
		return
	}
	rt.dash.Serve(rt.dashboardSnapshot, rt.log.Named("dashboard").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}))
	rt.log.Info("live dashboard", "url", "http://"+rt.dash.Addr()+"/")
}

// stopDashboard stops the server before the engine stops: a request under
// way gets its answer (or its engine part times out) first.
func (rt *Runtime) stopDashboard() error {
	if rt.dash == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dashboard.SampleTimeout+time.Second)
	defer cancel()
	return rt.dash.Close(ctx)
}

// DashboardAddr is the address the live dashboard serves on (host:port,
// with the port chosen when the configured one was 0), or "" when it is
// off.
func (rt *Runtime) DashboardAddr() string {
	if rt.dash == nil {
		return ""
	}
	return rt.dash.Addr()
}

// dashWalkMax bounds the tasks a sample's walk over engine.jobs visits:
// each costs a cache miss or two (20 to 150 ns, more once the tasks no
// longer fit in the caches), and the walk holds jobsMu and the engine
// goroutine, so that an unbounded walk over a million ready tasks would
// pause the runtime for tens of milliseconds per sample. Past it the
// queue counts are lower bounds (Snapshot.Walked).
const dashWalkMax = 4096

// engineView is what a snapshot reads on the engine goroutine.
type engineView struct {
	ctxs     []*SchedContext
	queued   []int    // per worker: tasks assigned, not completed
	current  []string // per worker: the name of its oldest task
	oldest   []uint64
	inPolicy []int // per context: tasks its policy holds, unassigned
	assigned []int // per context: tasks assigned to workers
	ctxRest  []int // per context: restarts
	restarts []int // per driver: restarts
	// walked of tracked tasks (engine.jobs) were counted.
	walked, tracked int
	nodes           []dashboard.Node // device nodes
}

// view collects the engine's part of a snapshot. Engine goroutine.
func (e *engine) view() *engineView {
	rt := e.rt
	ctxs := *e.ctxs.Load()
	nw, nc := len(rt.workers), len(ctxs)
	v := &engineView{
		ctxs:   ctxs,
		queued: make([]int, nw), current: make([]string, nw), oldest: make([]uint64, nw),
		inPolicy: make([]int, nc), assigned: make([]int, nc), ctxRest: make([]int, nc),
	}
	ctxIndex := func(c *SchedContext) int {
		for i, x := range ctxs {
			if x == c {
				return i
			}
		}
		return -1
	}
	e.jobsMu.Lock()
	v.tracked = e.jobs.len()
	e.jobs.each(func(j *job) bool {
		if v.walked == dashWalkMax {
			return false
		}
		v.walked++
		id := j.id
		c := 0 // the global context holds most
		if j.sctx != ctxs[0] {
			if c = ctxIndex(j.sctx); c < 0 {
				return true
			}
		}
		w := int(j.worker)
		if w < 0 || w >= nw {
			v.inPolicy[c]++
			return true
		}
		v.assigned[c]++
		v.queued[w]++
		if v.current[w] == "" || id < v.oldest[w] {
			v.current[w], v.oldest[w] = j.name(), id
		}
		return true
	})
	e.jobsMu.Unlock()
	for _, d := range rt.drivers {
		v.restarts = append(v.restarts, d.restarts)
	}
	for i, c := range ctxs {
		v.ctxRest[i] = c.restarts
	}
	for _, n := range rt.nodes[1:] {
		var cached uint64
		for size, bufs := range n.cache {
			cached += size * uint64(len(bufs))
		}
		v.nodes = append(v.nodes, dashboard.Node{ID: n.id, Name: n.name, Kind: n.drv.fp.Nodes[n.local-1].Name,
			Used: n.used, Capacity: n.capacity, Cached: cached, Replicates: len(n.reps)})
	}
	return v
}

// dashboardSnapshot is the dashboard's Source.
func (rt *Runtime) dashboardSnapshot(ctx context.Context) dashboard.Snapshot {
	s := dashboard.Snapshot{
		UptimeS:  time.Since(rt.clock.base).Seconds(),
		Sched:    rt.cfg.Sched,
		Stopping: rt.shutdown.Load(),
		Engine:   "ok",
		Tasks:    dashboard.Tasks{Pending: rt.waits.pending.Load(), Ready: rt.waits.nready.Load()},
	}
	// The engine first: it answers within a round while the rest is read.
	ch := make(chan *engineView, 1)
	rt.engine.call(func() { ch <- rt.engine.view() })

	// Each driver is read once, for its row and its workers' states to
	// agree: its process may die while the sample is taken.
	beats := rt.heartbeatAges()
	drivers := make([]dashboard.Plugin, len(rt.drivers))
	for i, d := range rt.drivers {
		drivers[i] = driverPlugin(d, beats)
	}
	totals := rt.workerTotals()
	for i, w := range rt.workers {
		drv := drivers[w.driverIdx]
		dw := dashboard.Worker{ID: w.id, Name: rt.workerName(w), Arch: string(w.drv.fp.Arch), Node: w.node,
			Driver: drv.Name, Pid: drv.Pid, Done: totals[i].tasks, ExecNs: int64(totals[i].exec), State: "idle"}
		switch {
		case drv.State == "restarting":
			dw.State = "restarting"
		case drv.Health == "failed":
			dw.State = "dead"
		}
		s.Tasks.Done += dw.Done
		s.Workers = append(s.Workers, dw)
	}
	used, free := rt.arena.HeapStats()
	rt.handles.mu.Lock()
	nh := len(rt.handles.set)
	rt.handles.mu.Unlock()
	s.Nodes = []dashboard.Node{{ID: 0, Name: "RAM", Kind: "shared-memory arena", Used: used, Capacity: used + free, Replicates: nh}}
	ctxs := *rt.engine.ctxs.Load()
	procs := make([]*loader.Plugin, len(ctxs))
	global := -1
	others := int64(0)
	for i, c := range ctxs {
		procs[i] = c.plugin()
		dc := dashboard.Context{ID: c.id, Name: c.name, Policy: c.policy, Workers: c.Workers(), Pending: c.pending.Load(), State: "ok"}
		if c == rt.global {
			// Its pending counts only the tasks submitted to it by name.
			global = i
		} else {
			others += dc.Pending
		}
		switch {
		case c.broken.Load() != nil:
			dc.State = "broken: " + (*c.broken.Load()).Error()
		case c.restarting.Load():
			dc.State = "restarting"
		}
		s.Contexts = append(s.Contexts, dc)
	}
	if global >= 0 {
		s.Contexts[global].Pending = max(0, s.Tasks.Pending-others)
	}

	var v *engineView
	select {
	case v = <-ch:
	case <-ctx.Done():
		s.Engine = fmt.Sprintf("no answer within %s: its round is stuck (queues and device memory left out)", dashboard.SampleTimeout)
	}
	if v != nil {
		for i := range s.Workers {
			w := &s.Workers[i]
			w.Queued, w.Current = v.queued[i], v.current[i]
			if w.Queued > 0 && w.State == "idle" {
				w.State = "busy"
			}
		}
		for i, c := range ctxs {
			if k := slices.Index(v.ctxs, c); k >= 0 {
				s.Contexts[i].Queued, s.Contexts[i].Assigned = v.inPolicy[k], v.assigned[k]
			}
		}
		s.Nodes = append(s.Nodes, v.nodes...)
		s.Walked, s.Tracked = v.walked, v.tracked
	}
	if v != nil {
		for i := range drivers {
			drivers[i].Restarts = v.restarts[i]
		}
	}
	s.Plugins = append(drivers, rt.otherPlugins(ctxs, procs, v, beats)...)
	return s
}

// heartbeatAges is how old each watched plugin's last heartbeat is, in
// milliseconds.
func (rt *Runtime) heartbeatAges() map[*loader.Plugin]float64 {
	ages := map[*loader.Plugin]float64{}
	now := wire.Now()
	rt.beats.mu.Lock()
	defer rt.beats.mu.Unlock()
	for _, w := range rt.beats.watched {
		ages[w.p] = float64(now-rt.beatWord(w.slot).Load()) / 1e6
	}
	return ages
}

// processState fills p from plugin process pp (nil: in process).
func processState(p *dashboard.Plugin, pp *loader.Plugin, beats map[*loader.Plugin]float64) {
	p.HeartbeatAgeMs = -1
	if pp == nil {
		p.State, p.Health = "in process", "ok"
		return
	}
	p.Pid = pp.Pid()
	if age, ok := beats[pp]; ok {
		p.HeartbeatAgeMs = age
	}
	if pp.Exited() {
		p.State, p.Health, p.Error = "exited", "failed", "the process "+exitNote(pp)
		return
	}
	p.State, p.Health = "running", "ok"
}

// driverPlugin describes driver d, but for its restart count (the
// engine's).
func driverPlugin(d *driverInst, beats map[*loader.Plugin]float64) dashboard.Plugin {
	p := dashboard.Plugin{Name: "driver-" + d.name, Kind: "driver"}
	pp, _ := d.current()
	processState(&p, pp, beats)
	switch {
	case d.restarting.Load():
		p.State, p.Health = "restarting", "failed"
	case d.dead.Load() && p.Health == "ok":
		// Seen dead by the engine, though the process is a new one.
		p.State, p.Health = "dead", "failed"
	case len(d.workers) == 0 && p.Health == "ok":
		p.State, p.Health, p.Error = "no device", "off", d.fp.Note
		if p.Error == "" {
			p.Error = "no device found"
		}
	}
	return p
}

// otherPlugins describes the drivers that did not start, the policies of
// ctxs (whose processes are procs) and the data interfaces; v, when the
// engine answered, gives the policies' restart counts.
func (rt *Runtime) otherPlugins(ctxs []*SchedContext, procs []*loader.Plugin, v *engineView, beats map[*loader.Plugin]float64) []dashboard.Plugin {
	var out []dashboard.Plugin
	for _, n := range rt.failedDrivers {
		out = append(out, dashboard.Plugin{Name: n.Driver, Kind: "driver", State: "not started", Health: "off", HeartbeatAgeMs: -1, Error: n.Note})
	}
	for i, c := range ctxs {
		p := dashboard.Plugin{Name: "sched-" + c.policy, Kind: "sched", Context: c.name}
		processState(&p, procs[i], beats)
		if v != nil {
			if k := slices.Index(v.ctxs, c); k >= 0 {
				p.Restarts = v.ctxRest[k]
			}
		}
		switch {
		case c.broken.Load() != nil:
			p.State, p.Health, p.Error = "broken", "failed", (*c.broken.Load()).Error()
		case c.restarting.Load():
			p.State, p.Health = "restarting", "failed"
		}
		out = append(out, p)
	}
	rt.ifaces.mu.Lock()
	ifaces := append([]*ifaceInst(nil), rt.ifaces.list...)
	rt.ifaces.mu.Unlock()
	for _, in := range ifaces {
		p := dashboard.Plugin{Name: "iface-" + in.name, Kind: "iface"}
		processState(&p, in.proc, beats)
		out = append(out, p)
	}
	return out
}
