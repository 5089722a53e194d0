package loader

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
	"golang.org/x/sys/unix"
)

// pipeGrace is how long the pipes of an exited plugin stay open for
// go-plugin to read what is left in them. Every writer in the plugin's
// process group is dead by then, so the readers see the end of the pipes
// at once; only a process that left the group (setsid) and kept them open
// makes the runner close them itself after pipeGrace.
const pipeGrace = 2 * time.Second

// procRunner is the go-plugin runner.Runner of a plugin process. It replaces
// go-plugin's own, which signals the plugin process alone and waits for its
// pipes to close, so that a plugin that starts children (a shell script
// running a program in the background) could hang the core's Kill until the
// children exit, and leave them behind.
//
// The runner starts the plugin as the leader of a process group of its own
// (Setpgid), with SIGKILL as its parent-death signal (Pdeathsig: see
// onSpawnThread), standard input on /dev/null, and standard output and
// error on pipes. A reaper goroutine waits for the leader to exit,
// whatever ends it, and then, before reaping it (so that its pid, which is
// the group's id, cannot be reused yet), SIGKILLs the whole group: no
// process the plugin started outlives it and the pipes close. Then it runs
// onExit (which removes the plugin's socket directory).
type procRunner struct {
	logger hclog.Logger
	cmd    *exec.Cmd
	onExit func()

	stdout, stderr *os.File // read ends of the pipes
	pid            int      // the leader's pid and the group's id; 0 until started
	done           chan struct{}

	mu      sync.Mutex
	reaped  bool // the leader is reaped or being reaped: pid may be reused
	waitErr error
	// killedLive: Kill found the leader running, so its death is the
	// loader's doing, not its own.
	killedLive bool

	// sockDir is where the plugin must listen; out reads its standard
	// output through the handshake guard, which keeps in refused why it
	// refused the handshake line (handshake.go).
	sockDir string
	chatty  bool // Candidate.Chatty
	out     io.ReadCloser
	refused atomic.Pointer[string]
}

var _ runner.Runner = (*procRunner)(nil)

func newProcRunner(logger hclog.Logger, cmd *exec.Cmd, onExit func()) *procRunner {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return &procRunner{logger: logger, cmd: cmd, onExit: onExit, done: make(chan struct{})}
}

// Start implements runner.Runner. It forks on the spawn thread; the
// handshake that follows is waited for on the caller's goroutine, so that
// several plugins start at once.
func (r *procRunner) Start(context.Context) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	// Nil stdin is /dev/null: the plugin is not in the terminal's
	// foreground process group, so reading the terminal would stop it.
	r.cmd.Stdin = nil
	r.cmd.Stdout, r.cmd.Stderr = outW, errW
	r.logger.Debug("starting plugin", "path", r.cmd.Path)
	onSpawnThread(func() { err = r.cmd.Start() })
	// The child has its copies: the pipes end when the last process of
	// the plugin's group closes them.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	r.stdout, r.stderr = outR, errR
	r.out = &handshakeGuard{r: outR, dir: r.sockDir, refused: &r.refused, chatty: r.chatty, logger: r.logger}
	r.pid = r.cmd.Process.Pid
	go r.reap()
	return nil
}

// reap waits for the leader to exit, kills its group, reaps the leader and
// cleans up.
func (r *procRunner) reap() {
	var info unix.Siginfo
	var err error
	for {
		// WNOWAIT: the leader stays a zombie, holding its pid, until
		// cmd.Wait below reaps it.
		err = unix.Waitid(unix.P_PID, r.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		// Not expected (ECHILD if the process ignores SIGCHLD): the
		// group is killed after the leader is reaped instead.
		r.logger.Warn("cannot wait for the plugin process without reaping it", "pid", r.pid, "error", err)
	}
	r.mu.Lock()
	if err == nil {
		r.killLocked()
	}
	r.reaped = true
	r.mu.Unlock()
	werr := r.cmd.Wait()
	if err != nil {
		_ = unix.Kill(-r.pid, unix.SIGKILL)
	}
	r.mu.Lock()
	r.waitErr = werr
	r.mu.Unlock()
	close(r.done)
	if r.onExit != nil {
		r.onExit()
	}
	time.AfterFunc(pipeGrace, func() {
		r.stdout.Close()
		r.stderr.Close()
	})
}

// killLocked sends SIGKILL to the leader and its group; r.mu is held and
// the leader is not reaped. A stopped process dies of SIGKILL too.
func (r *procRunner) killLocked() {
	if r.pid <= 0 || r.reaped {
		return
	}
	_ = unix.Kill(-r.pid, unix.SIGKILL) // the group
	_ = unix.Kill(r.pid, unix.SIGKILL)  // the leader, should it have left it
}

// Kill implements runner.Runner: SIGKILL to the plugin's process group. It
// does not wait; Wait does.
func (r *procRunner) Kill(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid > 0 && !r.reaped && !r.killedLive && r.runningLocked() {
		r.killedLive = true
	}
	r.killLocked()
	return nil
}

// runningLocked reports whether the leader has not exited yet (an exited
// one is a zombie until reap reaps it). r.mu held, the leader not reaped.
func (r *procRunner) runningLocked() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, r.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0
}

// diedAlone reports whether the reaped leader died without the loader
// killing it while it ran: it exited or crashed (an exit status or a
// signal other than the loader's SIGKILL, which cannot replace the status
// of a process already exiting), or was killed from outside before the
// loader tried.
func (r *procRunner) diedAlone() bool {
	select {
	case <-r.done:
	default:
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.killedLive {
		return true
	}
	ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && (ws.Exited() || ws.Signaled() && ws.Signal() != syscall.SIGKILL)
}

// Wait implements runner.Runner: it waits until the plugin process is
// reaped.
func (r *procRunner) Wait(context.Context) error {
	if r.pid == 0 {
		return errors.New("plugin process not started")
	}
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitErr
}

// exited reports whether the plugin process has been reaped.
func (r *procRunner) exited() bool {
	if r.pid == 0 {
		return false
	}
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Stdout implements runner.Runner.
func (r *procRunner) Stdout() io.ReadCloser { return r.out }

// Stderr implements runner.Runner.
func (r *procRunner) Stderr() io.ReadCloser { return r.stderr }

// Name implements runner.Runner: the binary's path.
func (r *procRunner) Name() string { return r.cmd.Path }

// ID implements runner.Runner: the pid, empty until started (go-plugin's
// Kill does nothing then).
func (r *procRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

// Diagnose implements runner.Runner; the loader says itself what went wrong.
func (r *procRunner) Diagnose(context.Context) string { return "" }

// PluginToHost implements runner.AddrTranslator: the plugin is on this host.
func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin implements runner.AddrTranslator: the plugin is on this host.
func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
