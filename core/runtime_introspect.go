package core

// Introspection; documented in docs/user-guide.md.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/driver"
)

// WorkerInfo describes one worker.
type WorkerInfo struct {
	ID     int
	Arch   driver.Arch
	Unit   string
	Node   int
	Driver string
	// Pid is the driver plugin's process, or 0 for an in-process driver.
	Pid int
	// AppDriven: the application runs this worker
	// (Options.NotLaunchedDrivers).
	AppDriven bool
}

// Workers lists the runtime's workers.
func (rt *Runtime) Workers() []WorkerInfo {
	out := make([]WorkerInfo, 0, len(rt.workers))
	for _, w := range rt.workers {
		wi := WorkerInfo{ID: w.id, Arch: w.drv.fp.Arch, Unit: w.drv.fp.Units[w.spec.Unit].Name, Node: w.node, Driver: w.drv.name}
		if p, _ := w.drv.current(); p != nil {
			wi.Pid = p.Pid()
		}
		wi.AppDriven = rt.isAppDriven(w)
		out = append(out, wi)
	}
	return out
}

// MemoryNodeInfo describes a memory node.
type MemoryNodeInfo struct {
	ID          int
	Kind        string
	Description string
}

// MemoryNodes lists the memory nodes: RAM (the shared-memory arena) first.
func (rt *Runtime) MemoryNodes() []MemoryNodeInfo {
	used, free := rt.arena.HeapStats()
	nodes := []MemoryNodeInfo{{ID: 0, Kind: "RAM", Description: fmt.Sprintf("shared-memory arena (memfd), %d MiB reserved, %d MiB in use, %d MiB free", rt.arena.Size()>>20, used>>20, free>>20)}}
	for _, n := range rt.nodes[1:] {
		desc := fmt.Sprintf("%s, %d MiB (driver-%s)", n.drv.fp.Nodes[n.local-1].Name, n.capacity>>20, n.drv.name)
		if n.worker == nil {
			desc += ", no worker: unused"
		}
		if len(n.peers) > 0 {
			names := make([]string, len(n.peers))
			for i, p := range n.peers {
				names[i] = rt.nodes[p].name
			}
			desc += ", direct copies to " + strings.Join(names, ", ")
		}
		nodes = append(nodes, MemoryNodeInfo{ID: n.id, Kind: n.name, Description: desc})
	}
	return nodes
}

// DriverNote is what a loaded driver that found no device says about why.
type DriverNote struct {
	Driver string
	Note   string
}

// DriverNotes lists the device drivers that did not start (turned off by
// STARPU_N<NAME>=0, or failing) and the loaded drivers that run no worker,
// with the reason each gives (no platform, devices of a kind not enabled,
// ...).
func (rt *Runtime) DriverNotes() []DriverNote {
	out := append([]DriverNote(nil), rt.failedDrivers...)
	for _, d := range rt.drivers {
		if len(d.workers) == 0 {
			note := d.fp.Note
			if note == "" {
				note = "no device found"
			}
			out = append(out, DriverNote{Driver: "driver-" + d.name, Note: note})
		}
	}
	return out
}

// SchedPid is the process of the global context's scheduler plugin, or 0
// for an in-process policy.
func (rt *Runtime) SchedPid() int {
	if p := rt.global.plugin(); p != nil {
		return p.Pid()
	}
	return 0
}

// SchedName is the scheduling policy in use.
func (rt *Runtime) SchedName() string { return rt.cfg.Sched }

// PluginsWhere says where the runtime found its plugins: "in DIR" for an
// explicit plugin directory, else the search path with what each of its
// directories held.
func (rt *Runtime) PluginsWhere() string {
	if rt.pluginsWhere == "" {
		return "nowhere: the drivers and the scheduler run in process"
	}
	return rt.pluginsWhere
}

// PluginInfo describes a plugin binary in the plugin directory.
type PluginInfo struct {
	Name    string
	Kind    string
	Version string
	Path    string
	// Status is "loaded (pid N)", "available", or why it could not start.
	Status string
}

// ProbePlugins lists every plugin the runtime can use (the application
// itself as driver-cpu when it hosts its kernels): those the runtime
// loaded, and the others after starting each once to ask its version.
func (rt *Runtime) ProbePlugins(ctx context.Context) ([]PluginInfo, error) {
	byLabel := rt.cands
	if byLabel == nil {
		var err error
		if byLabel, _, err = findPlugins(rt.cfg); err != nil {
			return nil, err
		}
	}
	loaded := map[string]*loader.Plugin{}
	for _, d := range rt.drivers {
		if p, _ := d.current(); p != nil {
			loaded[p.Path] = p
		}
	}
	if p := rt.global.plugin(); p != nil {
		loaded[p.Path] = p
	}
	var out []PluginInfo
	for _, c := range byLabel { // out is sorted below
		pi := PluginInfo{Name: string(c.Kind) + "-" + c.Name, Kind: string(c.Kind), Path: c.Path}
		if p, ok := loaded[c.Path]; ok {
			pi.Version = p.Info.Version
			pi.Status = fmt.Sprintf("loaded (pid %d)", p.Pid())
		} else if p, err := rt.launch(ctx, c); err != nil {
			pi.Status = "error: " + err.Error()
		} else {
			pi.Version = p.Info.Version
			pi.Status = "available"
			p.Kill()
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// EngineCPU is the CPU time the engine goroutine has used since Init: the
// core's one goroutine that every completion, release and placement
// passes through, so its time per task says how far from saturation a run
// is (bench overhead prints it). It reads the kernel's accounting of the
// engine's OS thread (the goroutine keeps its thread for life), so it is
// Linux only; it fails once the engine stopped.
func (rt *Runtime) EngineCPU() (time.Duration, error) {
	var tid int32
	if rt.engine != nil {
		tid = rt.engine.tid.Load()
	}
	if tid == 0 {
		return 0, errors.New("engine CPU time: the engine is not running")
	}
	path := fmt.Sprintf("/proc/self/task/%d/schedstat", tid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("engine CPU time: %w", err)
	}
	return parseSchedstat(path, b)
}

// parseSchedstat reads the time on CPU from a thread's schedstat file
// ("run-time-ns wait-time-ns timeslices").
func parseSchedstat(path string, b []byte) (time.Duration, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("engine CPU time: %s is empty", path)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("engine CPU time: %s: %w", path, err)
	}
	return time.Duration(ns), nil
}
