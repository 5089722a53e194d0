package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by ApplyEnv and Load. They keep StarPU's names
// where StarPU has one.
const (
	EnvConfig     = "STARPU_CONFIG"      // configuration file path (Load)
	EnvSched      = "STARPU_SCHED"       // scheduling policy name
	EnvNCPU       = "STARPU_NCPU"        // CPU workers: integer >= 0, or -1
	EnvPluginDir  = "STARPU_PLUGIN_DIR"  // the one plugin directory, searched alone
	EnvPluginPath = "STARPU_PLUGIN_PATH" // directories searched first, ':'-separated
	EnvQueueDepth = "STARPU_QUEUE_DEPTH" // tasks handed to a worker ahead, 1..64
	EnvSpinIters  = "STARPU_SPIN_ITERS"  // polls before sleeping, >= 0
	EnvArenaSize  = "STARPU_ARENA_SIZE"  // arena size, see ParseSize
	EnvLogLevel   = "STARPU_LOG_LEVEL"   // trace|debug|info|warn|error|off
	EnvCalibrate  = "STARPU_CALIBRATE"   // performance model calibration, 0..2
	// EnvHistoryMaxError: percent a sample may lie from its history
	// entry's mean before it is left out as an outlier, >= 1.
	EnvHistoryMaxError = "STARPU_HISTORY_MAX_ERROR"
	EnvModelDir        = "STARPU_PERF_MODEL_DIR"
	// The submission throttle (Config.LimitMaxSubmitted): tasks, >= 0.
	EnvLimitMaxSubmitted = "STARPU_LIMIT_MAX_SUBMITTED_TASKS"
	EnvLimitMinSubmitted = "STARPU_LIMIT_MIN_SUBMITTED_TASKS"
	// EnvPluginTimeout: a Go duration ("10s"), or seconds; 0 turns the
	// heartbeat check off.
	EnvPluginTimeout = "STARPU_PLUGIN_TIMEOUT"
	// EnvPluginRestarts: how many times a dead driver plugin is started
	// again, >= 0.
	EnvPluginRestarts = "STARPU_PLUGIN_RESTARTS"
	// StarPU's watchdog: timeout and delay in microseconds, crash 0 or 1.
	EnvWatchdogTimeout = "STARPU_WATCHDOG_TIMEOUT"
	EnvWatchdogCrash   = "STARPU_WATCHDOG_CRASH"
	// EnvChainTasks: 0 turns task chaining off, 1 on (the default).
	EnvChainTasks    = "STARPU_CHAIN_TASKS"
	EnvWatchdogDelay = "STARPU_WATCHDOG_DELAY"
	// EnvDashboard: the live dashboard's address, host:port.
	EnvDashboard = "STARPU_DASHBOARD"
	// EnvDashboardToken: when set, the dashboard answers only requests
	// that carry it (?token=, a cookie, or Authorization: Bearer).
	EnvDashboardToken = "STARPU_DASHBOARD_TOKEN"
	// The combined workers' sizes (Config.MinWorkerSize, MaxWorkerSize):
	// integers >= 0.
	EnvMinWorkerSize = "STARPU_MIN_WORKERSIZE"
	EnvMaxWorkerSize = "STARPU_MAX_WORKERSIZE"
)

// ApplyEnv overrides c's values with those of the StarPU environment
// variables (EnvSched, EnvNCPU, ...). A variable that is unset or empty leaves
// the value alone. A malformed value is an error naming the variable and the
// value; all such errors are reported together and c is then left unchanged.
// A nil getenv means os.Getenv.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	n := *c
	var errs []error
	bad := func(name, val, why string) {
		errs = append(errs, fmt.Errorf("environment variable %s=%q: %s", name, val, why))
	}
	lookup := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv(name))
		return v, v != ""
	}
	integer := func(name string, dst *int, min, max int, want string) {
		raw := getenv(name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < min || i > max {
			bad(name, raw, "want "+want)
			return
		}
		*dst = i
	}

	if v, ok := lookup(EnvSched); ok {
		n.Sched = v
	}
	if v, ok := lookup(EnvPluginDir); ok {
		// Relative to the working directory, as a path typed in a shell
		// is; made absolute now, so that it names one directory for the
		// life of the process and in messages.
		if abs, err := filepath.Abs(v); err == nil {
			v = abs
		}
		n.PluginDir = v
	}
	if v, ok := lookup(EnvPluginPath); ok {
		var dirs []string
		for _, d := range filepath.SplitList(v) {
			if d == "" {
				continue
			}
			if abs, err := filepath.Abs(d); err == nil {
				d = abs
			}
			dirs = append(dirs, d)
		}
		n.PluginPath = dedupeDirs(append(dirs, n.PluginPath...))
	}
	integer(EnvNCPU, &n.NCPU, -1, int(^uint(0)>>1), "an integer >= 0, or -1 for one worker per core")
	integer(EnvQueueDepth, &n.QueueDepth, MinQueueDepth, MaxQueueDepth,
		fmt.Sprintf("an integer in %d..%d", MinQueueDepth, MaxQueueDepth))
	integer(EnvSpinIters, &n.SpinIters, 0, int(^uint(0)>>1), "an integer >= 0")
	integer(EnvCalibrate, &n.Calibrate, 0, 2, "0, 1 or 2")
	integer(EnvHistoryMaxError, &n.HistoryMaxError, 1, math.MaxInt32, "a percentage >= 1")
	integer(EnvLimitMaxSubmitted, &n.LimitMaxSubmitted, 0, math.MaxInt32, "a number of tasks >= 0 (0: no limit)")
	integer(EnvLimitMinSubmitted, &n.LimitMinSubmitted, 0, math.MaxInt32, "a number of tasks >= 0")
	if v, ok := lookup(EnvModelDir); ok {
		n.ModelDir = v
	}
	if v, ok := lookup(EnvPluginTimeout); ok {
		if d, err := ParseDuration(v); err != nil {
			bad(EnvPluginTimeout, getenv(EnvPluginTimeout), err.Error())
		} else {
			n.PluginTimeout = d
		}
	}
	integer(EnvPluginRestarts, &n.PluginRestarts, 0, 1<<20, "an integer >= 0")
	micros := func(name string, dst *time.Duration) {
		var us int
		integer(name, &us, 0, int(time.Duration(1<<62)/time.Microsecond), "a whole number of microseconds >= 0")
		if us > 0 || getenv(name) != "" {
			*dst = time.Duration(us) * time.Microsecond
		}
	}
	micros(EnvWatchdogTimeout, &n.WatchdogTimeout)
	micros(EnvWatchdogDelay, &n.WatchdogDelay)
	crash := -1
	integer(EnvWatchdogCrash, &crash, 0, 1, "0 or 1")
	if crash >= 0 {
		n.WatchdogCrash = crash == 1
	}
	integer(EnvMinWorkerSize, &n.MinWorkerSize, 0, math.MaxInt32, "an integer >= 0 (below 2 means 2)")
	integer(EnvMaxWorkerSize, &n.MaxWorkerSize, 0, math.MaxInt32, "an integer >= 0 (0: no bound, 1: no combined worker)")
	chain := -1
	integer(EnvChainTasks, &chain, 0, 1, "0 or 1")
	if chain >= 0 {
		n.NoChain = chain == 0
	}
	if v, ok := lookup(EnvArenaSize); ok {
		if sz, err := ParseSize(v); err != nil {
			bad(EnvArenaSize, getenv(EnvArenaSize), err.Error())
		} else {
			n.ArenaSize = sz
		}
	}
	if v, ok := lookup(EnvDashboard); ok {
		if err := checkAddr(v); err != nil {
			bad(EnvDashboard, getenv(EnvDashboard), err.Error())
		} else {
			n.Dashboard = v
		}
	}
	if v, ok := lookup(EnvLogLevel); ok {
		if l := strings.ToLower(v); validLogLevel(l) {
			n.LogLevel = l
		} else {
			bad(EnvLogLevel, getenv(EnvLogLevel), "want one of "+strings.Join(LogLevels, ", "))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	*c = n
	return nil
}

// ParseDuration parses a duration as a Go duration ("10s", "1m30s",
// "250ms") or a plain number of seconds ("10", "0.5"); it must not be
// negative.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("want a duration such as 10s or 250ms, or seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("want a duration >= 0")
	}
	return d, nil
}

// Load builds the runtime's configuration: Default(), overlaid by the
// configuration file (explicitPath if non-empty, else the file named by
// STARPU_CONFIG, else none), overlaid by the environment (ApplyEnv), with
// StarPU's policy aliases resolved (ResolveSchedAliases), then validated.
// A nil getenv means os.Getenv.
func Load(getenv func(string) string, explicitPath string) (*Config, error) {
	return LoadWithDefaults(Default(), getenv, explicitPath)
}

// LoadWithDefaults is Load starting from defaults instead of Default(), for a
// caller with defaults of its own (another plugin directory, say). defaults is
// not modified; nil means Default().
func LoadWithDefaults(defaults *Config, getenv func(string) string, explicitPath string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c *Config
	if defaults == nil {
		c = Default()
	} else {
		c = defaults.Clone()
	}
	path := explicitPath
	if path == "" {
		path = strings.TrimSpace(getenv(EnvConfig))
	}
	if path != "" {
		if err := c.DecodeFile(path); err != nil {
			return nil, err
		}
	}
	if err := c.ApplyEnv(getenv); err != nil {
		return nil, err
	}
	c.ResolveSchedAliases()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
