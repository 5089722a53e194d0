// Package config holds the runtime's configuration: defaults, overlaid by an
// HCL file (as HashiCorp tools do), overlaid in turn by environment variables
// that keep StarPU's names (STARPU_SCHED, STARPU_NCPU, ...).
//
// The usual entry point is Load:
//
//	cfg, err := config.Load(os.Getenv, flagConfigPath)
//
// which reads the file named by the explicit path or by STARPU_CONFIG, applies
// the environment and validates the result.
package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// Default values of the configuration.
const (
	// DefaultSched is the scheduling policy used when none is configured.
	DefaultSched = "ws"
	// DefaultNCPU asks for one CPU worker per core.
	DefaultNCPU = -1
	// DefaultQueueDepth is how many tasks are handed to one worker ahead.
	DefaultQueueDepth = 4
	// DefaultSpinIters is how many polls a waiter makes before sleeping on a
	// doorbell.
	DefaultSpinIters = 2000
	// DefaultLogLevel is the log level used when none is configured.
	DefaultLogLevel = "warn"
	// DefaultHistoryMaxError is StarPU's STARPU_HISTORY_MAX_ERROR default,
	// in percent.
	DefaultHistoryMaxError = 50
	// DefaultPluginRestarts is how many times a driver plugin that dies is
	// started again.
	DefaultPluginRestarts = 3
	// DefaultPluginTimeout is how long a plugin process may miss its
	// heartbeat before it is reported, killed and handled as crashed.
	DefaultPluginTimeout = 10 * time.Second
	// MinPluginTimeout is the shortest plugin timeout accepted: three
	// heartbeats (pluginapi/base.HeartbeatEvery, checked by a test), so
	// that a plugin one beat late is not killed as hung.
	MinPluginTimeout = 300 * time.Millisecond
	// PluginSubdir is the directory, beside the executable, in which plugin
	// binaries are looked for by default.
	PluginSubdir = "plugins"
)

// Bounds on the queue depth.
const (
	// MinQueueDepth is the smallest accepted queue depth.
	MinQueueDepth = 1
	// MaxQueueDepth is the largest accepted queue depth.
	MaxQueueDepth = 64
)

// LogLevels lists the accepted log levels, from the most to the least verbose.
var LogLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

// Config is the runtime's configuration.
type Config struct {
	// PluginDir, when set, is the one directory plugin binaries are taken
	// from; PluginPath is then not searched. Default: unset. A relative
	// plugin_dir in a
	// configuration file is relative to the file's directory (DecodeFile;
	// Decode and Parse, which have no file, refuse it); a relative
	// STARPU_PLUGIN_DIR is relative to the working directory, and made
	// absolute by ApplyEnv. The loader refuses a plugin directory that
	// others than the current user or root could write.
	PluginDir string
	// PluginPath is the plugin search path, used when PluginDir is unset:
	// for each plugin name, the first of these directories that holds
	// one wins. Default: DefaultPluginPath; STARPU_PLUGIN_PATH puts its
	// directories first.
	PluginPath []string
	// Sched is the name of the scheduling policy. Default "ws".
	// StarPU's names served by another policy with a setting (dmdas,
	// dmdar: SchedAliases) are resolved by ResolveSchedAliases, which
	// Load calls; SchedHelp asks for the list of policies.
	Sched string
	// SchedAlias is the alias Sched was given as ("dmdas" for Sched
	// "dmda"), set by ResolveSchedAliases; empty otherwise.
	SchedAlias string
	// NCPU is the number of CPU workers; -1 means one per core (the default).
	NCPU int
	// QueueDepth is how many tasks are handed to one worker ahead, 1..64
	// (default 4).
	QueueDepth int
	// SpinIters is how many polls a waiter makes before sleeping on a
	// doorbell, >= 0 (default 2000). The engine and the policy host poll
	// only while their recent waits were short (shm.Spinner).
	SpinIters int
	// ArenaSize is the size in bytes of the shared-memory arena; 0 means the
	// caller's default.
	ArenaSize uint64
	// LogLevel is one of trace, debug, info, warn, error or off (default
	// "warn").
	LogLevel string
	// Calibrate is StarPU's STARPU_CALIBRATE: 0 calibrates performance
	// models until they are calibrated, 1 keeps calibrating, 2 drops the
	// stored models and starts again.
	Calibrate int
	// HistoryMaxError is StarPU's STARPU_HISTORY_MAX_ERROR: how far, in
	// percent, a sample may lie from its history entry's mean before it
	// counts as an outlier and is left out (docs/design/perfmodel.md).
	// 0 means DefaultHistoryMaxError.
	HistoryMaxError int
	// LimitMaxSubmitted, when > 0, bounds the tasks submitted and not yet
	// completed (StarPU's STARPU_LIMIT_MAX_SUBMITTED_TASKS): a Submit
	// that finds that many waits until no more than LimitMinSubmitted are
	// left (STARPU_LIMIT_MIN_SUBMITTED_TASKS; default 9/10 of the
	// maximum), so that an application submitting a large graph holds a
	// bounded number of tasks in memory. Submits from a callback are
	// never held: that would stop the completions they wait for.
	LimitMaxSubmitted int
	LimitMinSubmitted int
	// PluginRestarts is how many times, in the life of a runtime, a driver
	// or scheduler plugin whose process dies is started again (with a
	// backoff): a driver's workers come back and the tasks that can be
	// retried without a wrong result run again; a scheduler is handed the
	// tasks it held. 0 turns restarts off. A plugin block's restarts
	// attribute overrides it for that plugin (RestartsFor). Default
	// DefaultPluginRestarts.
	PluginRestarts int
	// PluginTimeout is how long a plugin process may stay silent (miss its
	// heartbeat: stopped, frozen or hung) before the runtime reports it,
	// kills it and handles it as crashed; 0 turns the check off. Default
	// DefaultPluginTimeout. It also bounds how long Shutdown waits for an
	// application-driven worker nobody runs (core.Options.NotLaunchedDrivers;
	// DefaultPluginTimeout when 0) before failing its tasks.
	PluginTimeout time.Duration
	// WatchdogTimeout is StarPU's STARPU_WATCHDOG_TIMEOUT: when no task
	// has completed for this long while tasks are pending, the runtime
	// logs an error (again each period it lasts); 0 (the default) turns
	// the watchdog off. WatchdogCrash (STARPU_WATCHDOG_CRASH) aborts the
	// process instead, with every goroutine's stack, as StarPU aborts.
	// WatchdogDelay (STARPU_WATCHDOG_DELAY) delays the first check after
	// Init.
	WatchdogTimeout time.Duration
	WatchdogCrash   bool
	// NoChain turns off task chaining (config chain_tasks = false,
	// STARPU_CHAIN_TASKS=0): a task whose only unfinished predecessor is
	// queued on a worker is then scheduled once it is ready, like any
	// other, instead of being queued behind that predecessor at once
	// (docs/design/hot-path.md, "Chains").
	NoChain       bool
	WatchdogDelay time.Duration
	// MinWorkerSize and MaxWorkerSize bound the combined workers the
	// runtime forms for parallel tasks (StarPU's STARPU_MIN_WORKERSIZE and
	// STARPU_MAX_WORKERSIZE; config min_worker_size, max_worker_size):
	// teams of MinWorkerSize consecutive CPU workers, then of twice that,
	// and so on while at most MaxWorkerSize, plus one of every CPU worker
	// when it is not larger. MinWorkerSize below 2 means 2 (the default);
	// MaxWorkerSize 0 means no bound (the default), 1 forms none.
	MinWorkerSize, MaxWorkerSize int
	// ModelDir is where performance models and the bus model are stored;
	// empty means $STARPU_PERF_MODEL_DIR, $STARPU_HOME/.starpu/sampling or
	// $HOME/.starpu/sampling.
	ModelDir string
	// Plugins holds the per-plugin configuration blocks, keyed by plugin name
	// as written in `plugin "driver-cpu" { ... }`.
	Plugins map[string]Plugin
	// Contexts are the scheduling contexts created at Init, from
	// `context "name" { ... }` blocks, in file order.
	Contexts []Context
	// Dashboard, when set, is the address (host:port) the live dashboard
	// serves on while the runtime runs; port 0 picks a free port
	// (Runtime.DashboardAddr says which). It has no authentication: bind
	// it to localhost (127.0.0.1:8090) or put it behind a proxy. Default:
	// unset, no dashboard; $STARPU_DASHBOARD sets it.
	Dashboard string

	// userPlugins are the plugin blocks as they were before
	// ResolveSchedAliases put a global alias's setting into one; nil when
	// it did not. Never modified once set, so copies may share it.
	userPlugins map[string]Plugin
}

// Context declares a scheduling context: a set of workers scheduled by their
// own instance of a policy.
type Context struct {
	// Name is the block's label; Runtime.Context finds the context by it.
	Name string
	// Workers are worker IDs (as Runtime.Workers numbers them).
	Workers []int
	// Sched is the policy's name; empty means the runtime's Sched.
	Sched string
	// Config, when not nil, configures this context's policy instance in
	// place of the policy's plugin block.
	Config base.Config
}

// Plugin is the configuration of one plugin, from a `plugin "name" { config {
// ... } }` block.
type Plugin struct {
	// Name is the plugin's name, the block's label (for example "sched-ws").
	Name string
	// Config holds the attributes of the block's config body. It is never nil
	// for a plugin decoded from a file.
	Config base.Config
	// Restarts, when not nil, replaces PluginRestarts for this plugin (the
	// block's restarts attribute): 0 lets it stay dead, for users who
	// prefer to stop.
	Restarts *int
}

// Default returns the default configuration: no PluginDir, and
// DefaultPluginPath as the search path.
func Default() *Config {
	return &Config{
		PluginPath: DefaultPluginPath(),
		Sched:      DefaultSched,
		NCPU:       DefaultNCPU,
		QueueDepth: DefaultQueueDepth,
		SpinIters:  DefaultSpinIters,
		LogLevel:   DefaultLogLevel,
		Plugins:    map[string]Plugin{},

		PluginTimeout:  DefaultPluginTimeout,
		PluginRestarts: DefaultPluginRestarts,
	}
}

// InstalledPlugins is where `make install PREFIX=...` puts the plugins,
// under the prefix.
const InstalledPlugins = "lib/starpu/plugins"

// DefaultPluginPath is where plugins are looked for when nothing says
// where, in order:
//   - "plugins" beside the running executable (the build tree's bin/, or
//     a directory an application ships with its plugins);
//   - ../lib/starpu/plugins from the executable (a program installed in
//     $PREFIX/bin beside an installation);
//   - the user's ~/.local/lib/starpu/plugins (make install
//     PREFIX=~/.local);
//   - ../lib/starpu/plugins from the starpu tool found on PATH (whatever
//     prefix it was installed under: `go run` and `go test` of an
//     application, whose binaries live in the build cache, find an
//     installation this way);
//   - /usr/local/lib/starpu/plugins (make install's default prefix).
//
// Directories that cannot be located are left out; duplicates are removed.
func DefaultPluginPath() []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs,
			filepath.Join(filepath.Dir(exe), PluginSubdir),
			filepath.Join(filepath.Dir(exe), "..", InstalledPlugins))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".local", InstalledPlugins))
	}
	if tool, err := exec.LookPath("starpu"); err == nil {
		if abs, err := filepath.Abs(tool); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
			dirs = append(dirs, filepath.Join(filepath.Dir(abs), "..", InstalledPlugins))
		}
	}
	dirs = append(dirs, filepath.Join("/usr/local", InstalledPlugins))
	return dedupeDirs(dirs)
}

// dedupeDirs cleans dirs and drops repeats, keeping the first.
func dedupeDirs(dirs []string) []string {
	out := dirs[:0:0]
	for _, d := range dirs {
		d = filepath.Clean(d)
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// SubmitLimits are the bounds of the submission throttle: max 0 means
// none; min is LimitMinSubmitted, or 9/10 of max when unset.
func (c *Config) SubmitLimits() (max, min int) {
	max, min = c.LimitMaxSubmitted, c.LimitMinSubmitted
	if max > 0 && min == 0 {
		min = max * 9 / 10
	}
	return max, min
}

// PluginDirs are the directories plugins are taken from: PluginDir alone
// when it is set, else PluginPath.
func (c *Config) PluginDirs() []string {
	if c.PluginDir != "" {
		return []string{c.PluginDir}
	}
	return c.PluginPath
}

// Clone returns a deep copy of c: changing the copy's plugin map or plugin
// configurations leaves c untouched.
func (c *Config) Clone() *Config {
	n := *c
	n.PluginPath = slices.Clone(c.PluginPath)
	n.Contexts = slices.Clone(c.Contexts)
	for i, x := range n.Contexts {
		x.Workers = slices.Clone(x.Workers)
		if x.Config != nil {
			x.Config = maps.Clone(x.Config)
		}
		n.Contexts[i] = x
	}
	n.Plugins = make(map[string]Plugin, len(c.Plugins))
	for k, p := range c.Plugins {
		if p.Config != nil {
			p.Config = maps.Clone(p.Config)
		}
		n.Plugins[k] = p
	}
	return &n
}

// RestartsFor is how many times the named plugin may be restarted: its
// block's restarts attribute, or PluginRestarts.
func (c *Config) RestartsFor(name string) int {
	if p, ok := c.Plugins[name]; ok && p.Restarts != nil {
		return *p.Restarts
	}
	return c.PluginRestarts
}

// Plugin returns the configuration of the named plugin, or an empty one when
// the configuration has no block for it. The result is never nil.
func (c *Config) Plugin(name string) base.Config {
	if p, ok := c.Plugins[name]; ok && p.Config != nil {
		return p.Config
	}
	return base.Config{}
}

// Validate checks that the configuration is usable: a plugin
// directory and scheduler, NCPU >= -1, QueueDepth in 1..64, SpinIters >= 0, a
// known log level and plugin entries keyed by their names. All problems found
// are reported together.
func (c *Config) Validate() error {
	var errs []error
	if c.PluginDir == "" && len(c.PluginPath) == 0 {
		errs = append(errs, errors.New("plugin_dir: must not be empty when there is no plugin search path"))
	}
	if strings.TrimSpace(c.Sched) == "" {
		errs = append(errs, errors.New("sched: must not be empty"))
	}
	if c.NCPU < -1 {
		errs = append(errs, fmt.Errorf("ncpu: %d is invalid (want >= 0, or -1 for one worker per core)", c.NCPU))
	}
	if c.QueueDepth < MinQueueDepth || c.QueueDepth > MaxQueueDepth {
		errs = append(errs, fmt.Errorf("queue_depth: %d is out of range %d..%d", c.QueueDepth, MinQueueDepth, MaxQueueDepth))
	}
	if c.SpinIters < 0 {
		errs = append(errs, fmt.Errorf("spin_iters: %d is invalid (want >= 0)", c.SpinIters))
	}
	if !validLogLevel(c.LogLevel) {
		errs = append(errs, fmt.Errorf("log_level: unknown level %q (want one of %s)", c.LogLevel, strings.Join(LogLevels, ", ")))
	}
	switch {
	case c.LimitMaxSubmitted < 0:
		errs = append(errs, fmt.Errorf("limit_max_submitted_tasks: %d is invalid (want >= 0; 0 = no limit)", c.LimitMaxSubmitted))
	case c.LimitMinSubmitted < 0:
		errs = append(errs, fmt.Errorf("limit_min_submitted_tasks: %d is invalid (want >= 0)", c.LimitMinSubmitted))
	case c.LimitMinSubmitted > 0 && c.LimitMaxSubmitted == 0:
		errs = append(errs, fmt.Errorf("limit_min_submitted_tasks: %d means nothing without limit_max_submitted_tasks", c.LimitMinSubmitted))
	case c.LimitMinSubmitted >= c.LimitMaxSubmitted && c.LimitMaxSubmitted > 0:
		errs = append(errs, fmt.Errorf("limit_min_submitted_tasks: %d is not below limit_max_submitted_tasks %d", c.LimitMinSubmitted, c.LimitMaxSubmitted))
	}
	if c.Calibrate < 0 || c.Calibrate > 2 {
		errs = append(errs, fmt.Errorf("calibrate: %d is invalid (want 0, 1 or 2)", c.Calibrate))
	}
	if c.HistoryMaxError < 0 {
		errs = append(errs, fmt.Errorf("history_max_error: %d is invalid (want a percentage of at least 1, or 0 for the default %d)", c.HistoryMaxError, DefaultHistoryMaxError))
	}
	if c.PluginRestarts < 0 {
		errs = append(errs, fmt.Errorf("plugin_restarts: %d is invalid (want >= 0)", c.PluginRestarts))
	}
	switch {
	case c.MinWorkerSize < 0:
		errs = append(errs, fmt.Errorf("min_worker_size: %d is invalid (want >= 0; below 2 means 2)", c.MinWorkerSize))
	case c.MaxWorkerSize < 0:
		errs = append(errs, fmt.Errorf("max_worker_size: %d is invalid (want >= 0; 0 means no bound)", c.MaxWorkerSize))
	case c.MaxWorkerSize > 1 && max(c.MinWorkerSize, 2) > c.MaxWorkerSize:
		errs = append(errs, fmt.Errorf("min_worker_size %d is above max_worker_size %d: no combined worker could be formed (max_worker_size = 1 turns them off)", c.MinWorkerSize, c.MaxWorkerSize))
	}
	if c.Dashboard != "" {
		if err := checkAddr(c.Dashboard); err != nil {
			errs = append(errs, fmt.Errorf("dashboard: %w", err))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"plugin_timeout", c.PluginTimeout}, {"watchdog_timeout", c.WatchdogTimeout}, {"watchdog_delay", c.WatchdogDelay}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is invalid (want >= 0)", d.name, d.v))
		}
	}
	if c.PluginTimeout > 0 && c.PluginTimeout < MinPluginTimeout {
		errs = append(errs, fmt.Errorf("plugin_timeout: %s is shorter than %s: plugins beat every 100ms, and every one would be killed as hung (want 0 to turn the check off, or at least %s)", c.PluginTimeout, MinPluginTimeout, MinPluginTimeout))
	}
	for _, k := range sortedKeys(c.Plugins) {
		p := c.Plugins[k]
		switch {
		case k == "":
			errs = append(errs, errors.New("plugin: empty plugin name"))
		case p.Name != k:
			errs = append(errs, fmt.Errorf("plugin %q: entry is named %q", k, p.Name))
		}
	}
	names := map[string]bool{}
	for _, x := range c.Contexts {
		switch {
		case strings.TrimSpace(x.Name) == "":
			errs = append(errs, errors.New("context: empty context name"))
		case names[x.Name]:
			errs = append(errs, fmt.Errorf("context %q: declared twice", x.Name))
		case len(x.Workers) == 0:
			errs = append(errs, fmt.Errorf("context %q: no workers", x.Name))
		}
		names[x.Name] = true
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
}

func validLogLevel(l string) bool {
	for _, v := range LogLevels {
		if l == v {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
