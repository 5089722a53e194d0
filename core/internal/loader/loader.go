package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// DefaultStartTimeout bounds a plugin's start (process start and go-plugin
// handshake) and then its PluginInfo call when Options.StartTimeout is zero.
// A plugin starts in milliseconds; the margin is for loaded machines.
const DefaultStartTimeout = 10 * time.Second

// KillGrace is how long Kill lets a plugin shut down gracefully before it
// kills the plugin's process group with SIGKILL.
const KillGrace = 2 * time.Second

// killWait bounds the wait, after the SIGKILL, for go-plugin to see the
// process gone: the process dies at once, so only a process that left the
// plugin's group and holds its pipes makes Kill wait this long.
const killWait = pipeGrace + time.Second

// Options are what Launch needs besides the candidate.
type Options struct {
	// Arena is the core's shared-memory arena, passed to the plugin as file
	// descriptor base.ArenaFD. Required.
	Arena *shm.Arena
	// Logger receives go-plugin's messages about the process and the
	// plugin's own log lines, named "<kind>-<name>" (the binary's name).
	// Nil discards them.
	Logger hclog.Logger
	// StartTimeout bounds the start and the handshake, then the PluginInfo
	// call; zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Heartbeat, when not zero, is the arena offset of the plugin's
	// heartbeat word, given to it in base.EnvHeartbeat.
	Heartbeat uint64
}

// Plugin is a running plugin process.
type Plugin struct {
	Candidate
	// Info is what the plugin said it is; Kind and Name match the
	// candidate's and APIVersions holds base.APIVersion.
	Info *base.Info

	client  *plugin.Client
	runner  *procRunner
	sockDir string
	logger  hclog.Logger
	raw     any
	pid     int
	// killedFor is why KillNow killed the plugin, if it did.
	killedFor atomic.Pointer[string]
}

// ErrDiedStarting is wrapped by Launch's error when the plugin process
// died on its own before it served (a crash, a kill from outside), as
// opposed to one the loader refused and killed.
var ErrDiedStarting = errors.New("the plugin process died while starting")

// diedStarting is a Launch error that is ErrDiedStarting, with the
// loader's words for it.
type diedStarting struct{ error }

func (diedStarting) Is(target error) bool { return target == ErrDiedStarting }

// Launch starts candidate c as a plugin process and checks it is the plugin
// its file name says.
//
// The binary, its directory and every directory above them must be
// writable only by their owner, and owned by the current user or root
// (a directory above may be writable by all if its sticky bit is set, as
// /tmp is): else Launch refuses it with an error wrapping ErrUnsafePath
// that names the path and its mode.
//
// The process gets the arena as file descriptor base.ArenaFD; SIGKILL when
// the core dies; a process group of its own, which Kill and every failure
// kill whole, so that nothing the plugin started survives it; standard
// input on /dev/null; and an environment made of the core's variables on
// the allow-list (passEnv, passEnvPrefixes: PATH, HOME, TMPDIR, the
// locale, STARPU_*, OPENBLAS_*, OMP_*, POCL_*, OCL_*, CUDA_*,
// LD_LIBRARY_PATH, the Go runtime's; the whole environment when
// c.InheritEnv), OPENBLAS_NUM_THREADS=1 (a worker is one thread; BLAS
// libraries must not start their own), the core's log level
// (base.EnvLogLevel), c.Env and go-plugin's variables. The gRPC connection
// is authenticated both ways by go-plugin's AutoMTLS (certificates made
// for this launch), over a unix socket in a directory private to this
// launch (mode 0700), which is removed when the process exits or is
// killed.
//
// Every failure kills the process group and returns an error that names
// the plugin and its path and says what happened: binary missing, not
// executable, unsafe, not a starpu plugin (handshake refused, or not
// answered within the start timeout), exited during start (with its exit
// status and the end of its stderr), or not the kind or name its file name
// says.
//
// ctx bounds the PluginInfo call; the process start itself is bounded by
// opt.StartTimeout.
func Launch(ctx context.Context, c Candidate, opt Options) (*Plugin, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("plugin %s (%s): %s", c.Label(), c.Path, fmt.Sprintf(format, args...))
	}
	if !knownKind(c.Kind) {
		return nil, fail("unknown plugin kind %q", c.Kind)
	}
	if opt.Arena == nil {
		return nil, fail("no shared-memory arena to give it")
	}
	fi, err := os.Stat(c.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fail("binary missing")
	case err != nil:
		return nil, fail("%v", err)
	case !fi.Mode().IsRegular():
		return nil, fail("not a regular file (%s)", fi.Mode())
	case fi.Mode().Perm()&0o111 == 0 || unix.Access(c.Path, unix.X_OK) != nil:
		return nil, fail("not executable (mode %s)", fi.Mode().Perm())
	}
	if err := checkTrusted(c.Path); err != nil {
		return nil, fmt.Errorf("plugin %s (%s): refused: %w", c.Label(), c.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail("%v", err)
	}

	logger := opt.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	timeout := opt.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	named := logger.Named(c.Label())

	// go-plugin makes the socket directory inside this one, and removes it
	// in Kill; the runner removes this one when the process exits, killed
	// or not, so that no socket is left behind (and the next core removes
	// those of a core that was killed).
	sockDir, err := newSockDir()
	if err != nil {
		return nil, fail("socket directory: %v", err)
	}
	p := &Plugin{Candidate: c, sockDir: sockDir, logger: named}
	inherited := pluginEnv(os.Environ())
	if c.InheritEnv {
		inherited = os.Environ()
	}
	env := slices.Concat(inherited, []string{
		"OPENBLAS_NUM_THREADS=1",
		base.EnvLogLevel + "=" + logLevel(logger),
	}, c.Env)
	if opt.Heartbeat != 0 {
		env = append(env, base.EnvHeartbeat+"="+strconv.FormatUint(opt.Heartbeat, 10))
	}
	stderr := &tailWriter{max: 8 << 10}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake,
		VersionedPlugins: pluginSets(c.Label()),
		RunnerFunc: func(l hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
			cmd := exec.Command(c.Path, c.Args...)
			// spec.Env holds go-plugin's variables (cookie, protocol
			// versions, client certificate, socket directory): they come
			// last, and the last of duplicates wins.
			cmd.Env = slices.Concat(env, spec.Env)
			cmd.ExtraFiles = []*os.File{opt.Arena.File()} // fd 3 == base.ArenaFD
			p.runner = newProcRunner(l, cmd, p.removeSockDir)
			p.runner.sockDir = sockDir
			p.runner.chatty = c.Chatty
			return p.runner, nil
		},
		UnixSocketConfig: &plugin.UnixSocketConfig{TempDir: sockDir},
		AutoMTLS:         true,
		// The environment is the allow-list above, not the core's.
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// go-plugin names the plugin's log lines after the binary, which is
		// "<kind>-<name>"; naming this logger too would name them twice.
		Logger:       logger,
		StartTimeout: timeout,
		Stderr:       stderr,
		// What the plugin writes to os.Stdout and os.Stderr (not through
		// its logger) ends in the core's log, not on the core's terminal.
		SyncStdout: named.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
		SyncStderr: named.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	})
	p.client = client

	var rpc plugin.ClientProtocol
	rpc, err = client.Client() // forks on the spawn thread (procRunner.Start)
	if err != nil {
		p.Kill() // waits for the process, so its exit status is known
		why := startFailure(err, p.runner, timeout, stderr)
		if p.runner != nil && p.runner.diedAlone() {
			// Gone before the loader killed it: it died on its own
			// while starting, a crash the core may answer with a
			// restart.
			return nil, diedStarting{fail("%s", why)}
		}
		return nil, fail("%s", why)
	}
	p.pid = p.runner.pid
	killFail := func(format string, args ...any) (*Plugin, error) {
		p.Kill()
		return nil, fail(format, args...)
	}
	raw, err := rpc.Dispense(string(c.Kind))
	if err != nil {
		return killFail("dispense %s: %v", c.Kind, err)
	}
	bp, ok := raw.(base.Plugin)
	if !ok {
		return killFail("dispensed %T, not a plugin", raw)
	}
	p.raw = raw

	infoCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := bp.PluginInfo(infoCtx)
	switch {
	case err != nil:
		return killFail("plugin info: %v", err)
	case info.Kind != c.Kind:
		return killFail("wrong kind: it is a %q plugin named %q, not a %q plugin", info.Kind, info.Name, c.Kind)
	case info.Name != c.Name:
		return killFail("wrong name: it says it is %s-%s", info.Kind, info.Name)
	case !slices.Contains(info.APIVersions, base.APIVersion):
		return killFail("speaks plugin API versions %v, not %d", info.APIVersions, base.APIVersion)
	}
	p.Info = info
	named.Debug("plugin started", "path", c.Path, "pid", p.pid, "version", info.Version)
	return p, nil
}

// pluginSets is what the core can dispense from a plugin process: the
// client half of every kind, labelled for errors.
func pluginSets(label string) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		base.APIVersion: {
			string(base.KindDriver):    &driver.Plugin{Name: label},
			string(base.KindScheduler): &sched.Plugin{Name: label},
			string(base.KindInterface): &iface.Plugin{Name: label},
		},
	}
}

// logLevel is the level to give a plugin: the core's, so that the plugin
// does not format lines the core drops.
func logLevel(l hclog.Logger) string {
	lv := l.GetLevel()
	if lv == hclog.NoLevel || lv == hclog.Off {
		return "info"
	}
	return lv.String()
}

// startFailure says why client.Client() failed, from go-plugin's error, the
// process's exit status and its stderr. r is nil when go-plugin failed
// before making the runner.
func startFailure(err error, r *procRunner, timeout time.Duration, stderr *tailWriter) string {
	msg := err.Error()
	var ps *os.ProcessState
	if r != nil && r.exited() {
		ps = r.cmd.ProcessState
	}
	exited := ps != nil && ps.Exited()
	var what string
	const unrecognized = "Unrecognized remote plugin message: "
	switch {
	case r != nil && r.refused.Load() != nil:
		what = "handshake refused: " + *r.refused.Load()
	case r == nil || r.pid == 0:
		what = "cannot start it: " + msg
	case strings.HasPrefix(msg, "incompatible API version with plugin"):
		// go-plugin's "Plugin version: N, Client versions: [M]".
		what = fmt.Sprintf("refused: it speaks another plugin API version than this runtime (%d): it comes from another release; rebuild it against this one, or install a matching release (make install). go-plugin says: %s",
			base.APIVersion, firstLine(msg))
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		what = fmt.Sprintf("not a starpu plugin: no go-plugin handshake within %s", timeout)
	case strings.HasPrefix(msg, unrecognized) && firstLine(msg[len(unrecognized):]) != "":
		what = fmt.Sprintf("handshake refused, not a starpu plugin: it printed %q where the go-plugin handshake was expected",
			firstLine(msg[len(unrecognized):]))
		if exited {
			what += fmt.Sprintf(" (exit status %d)", ps.ExitCode())
		}
	case exited:
		what = fmt.Sprintf("exited during start with exit status %d", ps.ExitCode())
	case ps != nil && !r.diedAlone():
		// The loader killed it, for go-plugin's error: say that, not
		// "died during start (signal: killed)".
		what = "handshake failed, and the loader killed it: " + firstLine(msg)
	case ps != nil && !ps.Success():
		what = fmt.Sprintf("died during start (%s)", ps)
	default:
		what = "handshake failed: " + firstLine(msg)
	}
	if tail := stderr.Tail(10); tail != "" {
		what += "; its stderr ends with:\n" + tail
	}
	return what
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// Driver is the plugin as a driver.Driver: the gRPC client adapter. It is an
// error if the plugin is of another kind.
func (p *Plugin) Driver() (driver.Driver, error) {
	if d, ok := p.raw.(driver.Driver); ok {
		return d, nil
	}
	return nil, fmt.Errorf("plugin %s is a %s plugin, not a driver", p.Label(), p.Kind)
}

// Scheduler is the plugin as a sched.Scheduler: the gRPC client adapter. It
// is an error if the plugin is of another kind.
func (p *Plugin) Scheduler() (sched.Scheduler, error) {
	if s, ok := p.raw.(sched.Scheduler); ok {
		return s, nil
	}
	return nil, fmt.Errorf("plugin %s is a %s plugin, not a scheduler", p.Label(), p.Kind)
}

// Interface is the plugin as an iface.Interface: the gRPC client adapter.
// It is an error if the plugin is of another kind.
func (p *Plugin) Interface() (iface.Interface, error) {
	if i, ok := p.raw.(iface.Interface); ok {
		return i, nil
	}
	return nil, fmt.Errorf("plugin %s is a %s plugin, not a data interface", p.Label(), p.Kind)
}

// Exited reports whether the plugin process has exited: crashed, killed or
// shut down by Kill. Calls to an exited plugin fail with errors wrapping
// base.ErrPluginExited.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Done is closed when the plugin process has exited, for the core to watch
// for crashes without polling Exited.
func (p *Plugin) Done() <-chan struct{} {
	if d, ok := p.raw.(interface{ Done() <-chan struct{} }); ok {
		return d.Done()
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Pid is the plugin process's id.
func (p *Plugin) Pid() int { return p.pid }

// Kill stops the plugin and waits for its process to end: gracefully
// first (go-plugin asks it to stop), then, if it has not exited within
// KillGrace whatever its state (a stopped process included), with SIGKILL
// to its whole process group. It returns within KillGrace plus a few
// seconds at worst, and removes the plugin's socket directory. It may be
// called more than once.
func (p *Plugin) Kill() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.client.Kill()
	}()
	grace := time.NewTimer(KillGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		p.logger.Warn("plugin did not stop within the grace period; killing its process group", "grace", KillGrace, "pid", p.pid)
		if p.runner != nil {
			p.runner.Kill(context.Background())
		}
		select {
		case <-done:
		case <-time.After(killWait):
			p.logger.Error("plugin process group killed, but go-plugin still waits for it", "pid", p.pid)
		}
	}
	p.removeSockDir()
}

// KillNow sends SIGKILL to the plugin's process group at once, without
// the graceful stop Kill tries first, and records why: for a plugin that
// no longer answers (stopped, hung), which the caller then handles as
// crashed once Exited reports it. It does not wait.
func (p *Plugin) KillNow(why string) {
	p.killedFor.CompareAndSwap(nil, &why)
	p.logger.Error("killing the plugin", "pid", p.pid, "reason", why)
	if p.runner != nil {
		p.runner.Kill(context.Background())
	}
}

// KilledFor is why KillNow killed the plugin, or "".
func (p *Plugin) KilledFor() string {
	if w := p.killedFor.Load(); w != nil {
		return *w
	}
	return ""
}

// removeSockDir removes the directory holding the plugin's socket.
func (p *Plugin) removeSockDir() {
	if err := os.RemoveAll(p.sockDir); err != nil {
		p.logger.Warn("cannot remove the plugin's socket directory", "dir", p.sockDir, "error", err)
	}
}
