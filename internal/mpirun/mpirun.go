// Package mpirun starts a program on several MPI ranks with OpenMPI's
// mpirun, on this machine, and collects what each rank reported: the
// harness of the tests (and benchmarks) that run real ranks from go test.
//
// The program is started with EnvBody naming what each rank runs and
// EnvDir a directory where each rank, through Report, writes how it ended.
// A rank that dies without reporting is named in the result, with the
// lines mpirun printed about it; a run that outlives its context is
// stopped (mpirun, then its process group), never left to hang.
package mpirun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvBody names, in a rank's environment, the body it runs; EnvDir is
// the directory its report goes to.
const (
	EnvBody = "STARPU_MPIRUN_BODY"
	EnvDir  = "STARPU_MPIRUN_DIR"
)

// ErrRanks is wrapped by Result.Err when a rank failed or did not report.
var ErrRanks = errors.New("mpirun: ranks failed")

// Job is a program to run on NP ranks.
type Job struct {
	NP   int
	Prog string
	Args []string
	// Body is what the ranks run (EnvBody).
	Body string
	// Env is added to the ranks' environment (NAME=value).
	Env []string
	// MPIArgs are extra mpirun options.
	MPIArgs []string
	// Timeout bounds the run; 0 means a minute.
	Timeout time.Duration
}

// RankResult is how one rank ended.
type RankResult struct {
	Rank int
	// Reported is set when the rank called Report; Err is the error it
	// reported ("" for success).
	Reported bool
	Err      string
	// Output is the rank's standard output and error, untagged.
	Output string
}

// Result is how a run ended.
type Result struct {
	Ranks []RankResult
	// Output is everything mpirun printed, tags included.
	Output string
	// ExitErr is mpirun's own exit error, nil when it exited with 0.
	ExitErr error
	// TimedOut is set when the run was stopped at its timeout.
	TimedOut bool
}

// Err says what went wrong: a timeout, a rank that reported an error or
// did not report, or mpirun failing; nil when every rank succeeded.
func (r *Result) Err() error {
	var errs []error
	if r.TimedOut {
		errs = append(errs, errors.New("mpirun: timed out"))
	}
	for _, rr := range r.Ranks {
		switch {
		case !rr.Reported:
			errs = append(errs, fmt.Errorf("rank %d died without reporting%s", rr.Rank, r.about(rr.Rank)))
		case rr.Err != "":
			errs = append(errs, fmt.Errorf("rank %d: %s", rr.Rank, rr.Err))
		}
	}
	if len(errs) == 0 && r.ExitErr != nil {
		errs = append(errs, fmt.Errorf("mpirun: %w", r.ExitErr))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w\n--- output ---\n%s", ErrRanks, errors.Join(errs...), tail(r.Output, 4000))
}

// about is what mpirun said about rank, if anything.
func (r *Result) about(rank int) string {
	re := regexp.MustCompile(`(?m)process rank ` + strconv.Itoa(rank) + `\b.*|Process name: \[\[\d+,\d+\],` + strconv.Itoa(rank) + `\][^\n]*\n\s*Exit code:\s*\d+`)
	if m := re.FindString(r.Output); m != "" {
		return " (mpirun: " + strings.Join(strings.Fields(m), " ") + ")"
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Available says why mpirun cannot be used here, or nil.
func Available() error {
	if _, err := exec.LookPath("mpirun"); err != nil {
		return fmt.Errorf("mpirun not found (install openmpi-bin): %w", err)
	}
	return nil
}

// Argv is the mpirun command line of j: all ranks on this machine,
// oversubscribed, unbound (Go schedules its own threads), over shared
// memory, with each output line tagged with its rank; as root, with
// OpenMPI's permission to run as root.
func Argv(j Job) []string {
	a := []string{"mpirun", "-np", strconv.Itoa(j.NP), "--oversubscribe", "--bind-to", "none",
		"--mca", "btl", "self,vader", "--tag-output"}
	if os.Geteuid() == 0 {
		a = append(a, "--allow-run-as-root")
	}
	a = append(a, j.MPIArgs...)
	a = append(a, j.Prog)
	return append(a, j.Args...)
}

var tagLine = regexp.MustCompile(`^\[\d+,(\d+)\]<(stdout|stderr)>:\s?(.*)$`)

// Run runs j and waits for it, at most its timeout: then mpirun is
// asked to stop (SIGTERM, which it passes to the ranks), and five
// seconds later its whole process group is killed.
func Run(ctx context.Context, j Job) (*Result, error) {
	if j.NP <= 0 {
		return nil, fmt.Errorf("mpirun: %d ranks", j.NP)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	if j.Timeout <= 0 {
		j.Timeout = time.Minute
	}
	dir, err := os.MkdirTemp("", "starpu-mpirun-")
	if err != nil {
		return nil, fmt.Errorf("mpirun: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	argv := Argv(j)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), EnvBody+"="+j.Body, EnvDir+"="+dir)
	cmd.Env = append(cmd.Env, j.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	if cmd.Process != nil {
		// Whatever is left of the job.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res := &Result{Output: out.String(), ExitErr: runErr, TimedOut: ctx.Err() != nil}
	per := make([][]string, j.NP)
	for _, line := range strings.Split(res.Output, "\n") {
		m := tagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if r, err := strconv.Atoi(m[1]); err == nil && r < j.NP {
			per[r] = append(per[r], m[3])
		}
	}
	for r := 0; r < j.NP; r++ {
		rr := RankResult{Rank: r, Output: strings.Join(per[r], "\n")}
		if b, err := os.ReadFile(filepath.Join(dir, reportName(r))); err == nil {
			rr.Reported = true
			if s := string(b); s != "ok" {
				rr.Err = strings.TrimPrefix(s, "error: ")
			}
		}
		res.Ranks = append(res.Ranks, rr)
	}
	return res, nil
}

func reportName(rank int) string { return fmt.Sprintf("rank-%d", rank) }

// Rank is this process's rank as mpirun set it in the environment, or -1.
func Rank() int {
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"} {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && os.Getenv(k) != "" {
			return v
		}
	}
	return -1
}

// Body is the body this process was started to run as a rank, or "".
func Body() string { return os.Getenv(EnvBody) }

// Report records how this rank ended (err nil for success) for the
// parent's Result, and returns the exit code the rank should end with.
func Report(err error) int {
	dir := os.Getenv(EnvDir)
	msg, code := "ok", 0
	if err != nil {
		msg, code = "error: "+err.Error(), 1
	}
	if dir == "" {
		return code
	}
	name := filepath.Join(dir, reportName(Rank()))
	tmp := name + ".tmp"
	if werr := os.WriteFile(tmp, []byte(msg), 0o644); werr == nil {
		_ = os.Rename(tmp, name)
	}
	return code
}

// Main runs, when this process is a rank started by Run, the body it was
// started for and exits with Report's code; otherwise it returns at
// once. Call it first thing in TestMain (or main).
func Main(bodies map[string]func() error) {
	b := Body()
	if b == "" {
		return
	}
	f, ok := bodies[b]
	if !ok {
		os.Exit(Report(fmt.Errorf("no rank body %q", b)))
	}
	os.Exit(Report(f()))
}
