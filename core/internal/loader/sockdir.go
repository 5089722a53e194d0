package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// sockDirPrefix starts the name of the directory, in os.TempDir(), that
// holds one plugin's socket: "starpu-plugin-<core pid>-<random>".
const sockDirPrefix = "starpu-plugin-"

// newSockDir makes the private directory (mode 0700) for one plugin's
// socket. Its name carries the core's pid, so that a later core can remove
// the directories of a core that was killed before it could.
func newSockDir() (string, error) {
	sweepOnce.Do(func() { sweepStaleSockDirs(hclog.NewNullLogger()) })
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", sockDirPrefix, os.Getpid()))
}

var sweepOnce sync.Once

// RemoveOwnSockDirs removes the socket directories of this process's
// plugins, for a process about to exit without shutting its runtime down
// (an MPI rank that mpirun ends): its plugins die with it (their parent
// death signal), and nothing else would remove them before the next run's
// sweep.
func RemoveOwnSockDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-*", sockDirPrefix, os.Getpid())))
	for _, m := range matches {
		os.RemoveAll(m)
	}
}

// sweepStaleSockDirs removes the socket directories left by cores of this
// user that are gone: a core killed with SIGKILL cannot remove its own, and
// its plugins die with it. A directory whose core still runs, or that is
// not a directory of this user, is left alone.
func sweepStaleSockDirs(log hclog.Logger) {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), sockDirPrefix+"*-*"))
	for _, m := range matches {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(m), sockDirPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue // the core runs (or its pid was reused): keep it
		}
		fi, err := os.Lstat(m)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		if err := os.RemoveAll(m); err != nil {
			log.Debug("cannot remove a stale plugin socket directory", "dir", m, "error", err)
		}
	}
}
