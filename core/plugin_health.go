package core

// Heartbeats, watchdog; design note: docs/design/plugins.md.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Plugin health: heartbeats and the watchdog.
//
// A plugin process that dies is seen at once (go-plugin reaps it and
// Exited says so). One that stops answering is not: a SIGSTOPped or
// frozen process keeps its sockets open and its rings still, and the core
// would wait for it forever. So every plugin process beats: the core gives
// it a word in the arena's control region (base.EnvHeartbeat), which the
// plugin SDK overwrites with the monotonic clock every
// base.HeartbeatEvery. The engine reads the words at its liveness check
// (every livenessCheckEvery); a plugin whose word is older than
// plugin_timeout is logged, killed (SIGKILL to its process group) and
// from then on handled like a crashed one, its kill reason in the errors.
//
// The heartbeat lives in shared memory, not in a gRPC health call: reading
// a word costs the engine nothing, and a gRPC call to a stopped process
// would block the caller until its deadline. The SDK beats from a goroutine
// of its own, not from the workers: a kernel may rightly run for minutes,
// and telling a long kernel from a hung one is the watchdog's job, not the
// heartbeat's.
//
// The watchdog is StarPU's (STARPU_WATCHDOG_TIMEOUT, _CRASH, _DELAY): when
// no task has completed on a worker for watchdog_timeout while tasks are
// pending, the engine logs it, once per period it lasts, or aborts the
// process with every goroutine's stack when watchdog_crash is set.

// maxHeartbeats is how many plugin processes can beat at once; slots are
// reused once their plugin has exited. A plugin launched when none is free
// gets no heartbeat (and is not checked).
const maxHeartbeats = 256

// heartbeats are the heartbeat slots and the plugins that beat in them.
type heartbeats struct {
	mu      sync.Mutex
	span    base.Span
	free    []uint64
	watched []watchedPlugin
}

type watchedPlugin struct {
	p    *loader.Plugin
	slot uint64
}

// initHeartbeats carves the heartbeat slots from the arena's control
// region.
func (rt *Runtime) initHeartbeats() error {
	s, err := rt.arena.Carve(maxHeartbeats*8, 64)
	if err != nil {
		return fmt.Errorf("heartbeat slots: %w", err)
	}
	hb := &rt.beats
	hb.span = s
	for i := maxHeartbeats - 1; i >= 0; i-- {
		hb.free = append(hb.free, s.Offset+uint64(i)*8)
	}
	return nil
}

// beatWord is the heartbeat word at arena offset slot.
func (rt *Runtime) beatWord(slot uint64) *atomic.Int64 {
	b := rt.arena.Bytes(base.Span{Offset: slot, Size: 8})
	return (*atomic.Int64)(unsafe.Pointer(&b[0]))
}

// launch starts plugin c with a heartbeat slot, and watches it. The start
// timeout is the loader's default (10 s): a plugin starts in
// milliseconds, and a binary that never answers the handshake costs the
// whole timeout (its process group is then killed).
func (rt *Runtime) launch(ctx context.Context, c loader.Candidate) (*loader.Plugin, error) {
	hb := &rt.beats
	var slot uint64
	hb.mu.Lock()
	if n := len(hb.free); n > 0 && hb.span.Size > 0 {
		slot = hb.free[n-1]
		hb.free = hb.free[:n-1]
		// The plugin beats once it serves; until then, its start counts
		// as a beat.
		rt.beatWord(slot).Store(wire.Now())
	}
	hb.mu.Unlock()
	p, err := loader.Launch(ctx, c, loader.Options{Arena: rt.arena, Logger: rt.log, Heartbeat: slot})
	if err == nil {
		rt.tracePluginStart(c.Label(), p) // task_trace.go
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	switch {
	case slot == 0:
	case err != nil:
		hb.free = append(hb.free, slot)
	default:
		hb.watched = append(hb.watched, watchedPlugin{p: p, slot: slot})
	}
	return p, err
}

// checkHeartbeats kills the plugins silent for longer than plugin_timeout
// and frees the slots of those that exited. Engine goroutine.
func (e *engine) checkHeartbeats() {
	rt := e.rt
	timeout := rt.cfg.PluginTimeout
	hb := &rt.beats
	now := wire.Now()
	hb.mu.Lock()
	defer hb.mu.Unlock()
	live := hb.watched[:0]
	for _, w := range hb.watched {
		if w.p.Exited() {
			hb.free = append(hb.free, w.slot)
			continue
		}
		live = append(live, w)
		if timeout <= 0 || w.p.KilledFor() != "" {
			continue
		}
		if age := time.Duration(now - rt.beatWord(w.slot).Load()); age > timeout {
			w.p.KillNow(fmt.Sprintf("no heartbeat for %s (plugin_timeout %s): the process is stopped or hung", age.Round(time.Millisecond), timeout))
		}
	}
	clear(hb.watched[len(live):])
	hb.watched = live
}

// exitNote says how a plugin process ended, for errors: "exited", or the
// reason it was killed.
func exitNote(p *loader.Plugin) string {
	if why := p.KilledFor(); why != "" {
		return "was killed: " + why
	}
	return "exited"
}

// watchdog is StarPU's: it reports (or aborts on) a stretch of
// watchdog_timeout with tasks pending and none completed. Engine
// goroutine, at each liveness check.
func (e *engine) watchdog(now time.Time) {
	cfg := e.rt.cfg
	if cfg.WatchdogTimeout <= 0 || now.Sub(e.startedAt) < cfg.WatchdogDelay {
		return
	}
	pending := e.rt.waits.pending.Load()
	if e.completed != e.wdCompleted || pending == 0 || e.wdSince.IsZero() {
		e.wdCompleted, e.wdSince = e.completed, now
		return
	}
	idle := now.Sub(e.wdSince)
	if idle < cfg.WatchdogTimeout {
		return
	}
	msg := fmt.Sprintf("watchdog: no task completed for %s while %d are pending (watchdog_timeout, STARPU_WATCHDOG_TIMEOUT)", idle.Round(time.Millisecond), pending)
	e.wdMu.Lock()
	reports := e.wdReports
	e.wdMu.Unlock()
	for _, f := range reports {
		if r := f(); r != "" {
			msg += "; " + r
		}
	}
	if cfg.WatchdogCrash {
		e.rt.log.Error(msg + "; aborting with every goroutine's stack (watchdog_crash, STARPU_WATCHDOG_CRASH)")
		// As StarPU aborts: Go answers SIGABRT with every goroutine's
		// stack and exit status 2.
		syscall.Kill(os.Getpid(), syscall.SIGABRT)
		time.Sleep(time.Second) // unless the application caught SIGABRT
		os.Exit(2)
	}
	e.rt.log.Warn(msg)
	e.wdSince = now // again after another period
}

// AddWatchdogReport adds f to what the watchdog (watchdog_timeout,
// STARPU_WATCHDOG_TIMEOUT) says when no task completed for that long: f
// tells what pending tasks may be waiting for, or "" (core/mpi lists its
// transfers in flight). f runs on the engine goroutine: it must not block
// nor call the runtime.
func (rt *Runtime) AddWatchdogReport(f func() string) {
	e := rt.engine
	e.wdMu.Lock()
	defer e.wdMu.Unlock()
	e.wdReports = append(e.wdReports, f)
}

// procState is what /proc says process pid is doing ("stopped", "running",
// ...), for errors about a plugin that does not answer.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "state unknown"
	}
	// The state follows the command name, which is in parentheses and may
	// hold any byte.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return "state unknown"
	}
	switch b[i+2] {
	case 'T', 't':
		return "stopped"
	case 'R':
		return "running"
	case 'S':
		return "sleeping"
	case 'D':
		return "in uninterruptible sleep"
	case 'Z':
		return "a zombie"
	}
	return "state " + string(b[i+2])
}
