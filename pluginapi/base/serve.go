package base

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
)

// EnvLogLevel is the environment variable through which the core gives a
// plugin process its log level ("trace", "debug", "info", "warn", "error");
// the default is info.
const EnvLogLevel = "STARPU_PLUGIN_LOG_LEVEL"

// NotStartedByRuntime is what a plugin binary prints, before exiting with
// status 1, when it is run by hand rather than by the runtime.
const NotStartedByRuntime = "this binary is a starpu plugin; it is started by the runtime"

// ParentPollInterval is how often a plugin process checks that the core that
// started it is still its parent.
const ParentPollInterval = 200 * time.Millisecond

// EnvHeartbeat is the environment variable through which the core gives a
// plugin process its heartbeat slot: the offset, in the arena, of an
// 8-byte word. ServeKind writes the CLOCK_MONOTONIC time in nanoseconds
// there every HeartbeatEvery; the core reports, kills and handles as
// crashed a plugin whose heartbeat is older than its plugin_timeout
// (stopped, frozen, or too starved to run a goroutine).
const EnvHeartbeat = "STARPU_PLUGIN_HEARTBEAT"

// HeartbeatEvery is how often a plugin process beats.
const HeartbeatEvery = 100 * time.Millisecond

// ServeKind is the body of every plugin's main(), shared by driver.Serve,
// sched.Serve and iface.Serve, which supply open. It
//
//   - refuses to run when not started by the runtime: without the handshake
//     cookie it prints NotStartedByRuntime and go-plugin's own message and
//     exits 1; without the arena (a sealed memfd) at ArenaFD it prints
//     NotStartedByRuntime and exits 1;
//   - builds the plugin's logger: hclog JSON on stderr, which go-plugin on the
//     core side forwards into the core's log under the plugin's name, at the
//     level in EnvLogLevel;
//   - calls open with ArenaFD and the logger to get the plugin to serve (an
//     error is logged and the process exits 1, which the core reports as the
//     plugin exiting during start);
//   - starts a watchdog that exits the process when its parent changes (the
//     core was killed), besides the SIGKILL-on-parent-death the core asks
//     the kernel for;
//   - when EnvHeartbeat names a slot, beats there every HeartbeatEvery, so
//     that the core can tell a live plugin from a stopped or frozen one;
//   - serves the plugin as kind under APIVersion with go-plugin over gRPC
//     until the core shuts it down; when the core asks for mutual TLS (the
//     core's loader always does: go-plugin's AutoMTLS, the core's
//     certificate in PLUGIN_CLIENT_CERT), go-plugin's Serve makes the
//     plugin's certificate and accepts only the core's, with nothing to do
//     here.
//
// Until open returns, the plugin must not write to standard output: it is
// go-plugin's handshake channel, and a stray line makes the core refuse the
// plugin. Once serving, what it writes to os.Stdout and os.Stderr reaches the
// core's log; its logger is the better way.
func ServeKind(kind Kind, open func(arenaFD uintptr, log hclog.Logger) (plugin.Plugin, error)) {
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		fmt.Fprintf(os.Stderr, "%s.\n", NotStartedByRuntime)
		// go-plugin prints its own explanation and exits 1.
		plugin.Serve(&plugin.ServeConfig{HandshakeConfig: Handshake})
		os.Exit(1)
	}
	// The arena is a sealed memfd; F_GET_SEALS fails on anything else. Only
	// testing that the descriptor is open would not do: without one, the Go
	// runtime itself may hold fd 3 (cgroup files read for GOMAXPROCS).
	if _, err := unix.FcntlInt(ArenaFD, unix.F_GET_SEALS, 0); err != nil {
		fmt.Fprintf(os.Stderr, "%s (no shared-memory arena on file descriptor %d).\n", NotStartedByRuntime, ArenaFD)
		os.Exit(1)
	}
	// Subprocesses of the plugin must not inherit the arena.
	unix.CloseOnExec(ArenaFD)

	log := newPluginLogger()
	p, err := open(ArenaFD, log)
	if err != nil {
		log.Error("plugin failed to start", "kind", string(kind), "error", err.Error())
		os.Exit(1)
	}
	go watchParent(log, os.Getppid(), ParentPollInterval, func() { os.Exit(1) })
	if v := os.Getenv(EnvHeartbeat); v != "" {
		if err := startHeartbeat(ArenaFD, v, HeartbeatEvery); err != nil {
			log.Error("no heartbeat: the core will take this plugin for hung", "error", err.Error())
		}
	}

	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			APIVersion: {string(kind): p},
		},
		GRPCServer: plugin.DefaultGRPCServer,
		Logger:     log,
	})
}

// startHeartbeat maps the page of the arena (file descriptor fd) holding
// the heartbeat word at offset slot and writes the monotonic clock there
// every period, from a goroutine of its own, for the life of the process.
func startHeartbeat(fd int, slot string, every time.Duration) error {
	off, err := strconv.ParseUint(slot, 10, 64)
	if err != nil || off%8 != 0 {
		return fmt.Errorf("%s=%q: want an 8-byte aligned arena offset", EnvHeartbeat, slot)
	}
	page := uint64(os.Getpagesize())
	base := off &^ (page - 1)
	mem, err := unix.Mmap(fd, int64(base), int(page), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the heartbeat slot at %d: %w", off, err)
	}
	word := (*atomic.Int64)(unsafe.Pointer(&mem[off-base]))
	beat := func() {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
			word.Store(ts.Nano())
		}
	}
	beat()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for range t.C {
			beat()
		}
	}()
	return nil
}

// newPluginLogger is the logger of a plugin process: JSON lines on stderr,
// which go-plugin parses on the core side and logs under the plugin's name
// at each line's level.
func newPluginLogger() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv(EnvLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// watchParent calls exit when the process's parent is no longer ppid: the
// process that started the plugin is gone and the plugin was handed to
// another reaper.
func watchParent(log hclog.Logger, ppid int, every time.Duration, exit func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if now := os.Getppid(); now != ppid {
			log.Error("the core process is gone; exiting", "parent", ppid, "new_parent", now)
			exit()
			return
		}
	}
}
