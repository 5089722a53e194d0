package mpi

// Watching the other ranks' processes on this host.
//
// MPI (OpenMPI 4 over shared memory) does not tell a rank that a peer
// died: a receive from it just never completes. mpirun notices, and ends
// the job with SIGTERM (see Comm.onSignal); to name the dead rank, and to
// stop cleanly when mpirun does not end the job, each rank watches the
// processes of the ranks on its own host through pidfds, learnt at Init
// by an MPI_Allgather of (pid, start time, host and pid namespace).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// procInfo identifies a rank's process: its pid, its start time (clock
// ticks after boot, from /proc) and a key for its host and pid namespace.
type procInfo struct {
	pid   int
	start uint64
	host  uint64
}

const procInfoSize = 24

// exitGrace is how long a peer's exit waits for its goodbye, which may
// still be on its way, before it counts as a death.
const exitGrace = 500 * time.Millisecond

// watcher watches the processes of the ranks on this host.
type watcher struct {
	c     *Comm
	infos []procInfo
	// mu guards fds (rank -> pidfd), dead and watchedAll: every other
	// rank's process was watched from the start (it runs on this host).
	mu         sync.Mutex
	fds        map[int]int
	dead       map[int]bool
	watchedAll bool
	// stop wakes the polling goroutine to end it; done is closed when it
	// ended.
	stop int
	done chan struct{}
}

func selfInfo() (procInfo, error) {
	start, err := startTime(os.Getpid())
	if err != nil {
		return procInfo{}, err
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return procInfo{}, err
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return procInfo{}, err
	}
	h := fnv.New64a()
	h.Write(boot)
	h.Write([]byte(ns))
	return procInfo{pid: os.Getpid(), start: start, host: h.Sum64()}, nil
}

// startTime is field 22 of /proc/pid/stat: when the process started.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// startWatch learns every rank's process and starts watching those on
// this host. Without /proc (or pidfds), the watch is off: mpirun's
// SIGTERM is then the only sign of a death.
func (c *Comm) startWatch(ctx context.Context) error {
	w := &watcher{c: c, fds: map[int]int{}, dead: map[int]bool{}, stop: -1, done: make(chan struct{})}
	c.watch = w
	me, serr := selfInfo()
	b := make([]byte, procInfoSize)
	if serr == nil {
		binary.LittleEndian.PutUint64(b, uint64(me.pid))
		binary.LittleEndian.PutUint64(b[8:], me.start)
		binary.LittleEndian.PutUint64(b[16:], me.host)
	}
	all, err := c.mc.Allgather(ctx, b)
	if err != nil {
		return fmt.Errorf("exchange process identities: %w", err)
	}
	for _, v := range all {
		w.infos = append(w.infos, procInfo{
			pid:   int(binary.LittleEndian.Uint64(v)),
			start: binary.LittleEndian.Uint64(v[8:]),
			host:  binary.LittleEndian.Uint64(v[16:]),
		})
	}
	if serr != nil {
		c.log.Warn("cannot watch the ranks on this host", "error", serr)
		close(w.done)
		return nil
	}
	for r, in := range w.infos {
		if r == c.rank || in.host != me.host || in.pid == 0 {
			continue
		}
		if st, err := startTime(in.pid); err != nil || st != in.start {
			continue // not the same process after all
		}
		fd, err := unix.PidfdOpen(in.pid, 0)
		if err != nil {
			c.log.Warn("cannot watch a rank's process", "peer", r, "pid", in.pid, "error", err)
			continue
		}
		w.fds[r] = fd
	}
	w.mu.Lock()
	w.watchedAll = len(w.fds) == len(w.infos)-1
	w.mu.Unlock()
	if len(w.fds) == 0 {
		close(w.done)
		return nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		w.closeFds()
		close(w.done)
		return nil
	}
	w.stop = efd
	go w.run()
	return nil
}

// run polls the pidfds until every peer is gone or stopWatch.
func (w *watcher) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		fds := []unix.PollFd{{Fd: int32(w.stop), Events: unix.POLLIN}}
		ranks := []int{-1}
		for r, fd := range w.fds {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			ranks = append(ranks, r)
		}
		w.mu.Unlock()
		if len(fds) == 1 {
			return
		}
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			w.c.log.Error("watching the ranks' processes", "error", err)
			return
		}
		if fds[0].Revents != 0 {
			return
		}
		for i, f := range fds[1:] {
			if f.Revents == 0 {
				continue
			}
			r := ranks[i+1]
			w.mu.Lock()
			_ = unix.Close(w.fds[r])
			delete(w.fds, r)
			w.mu.Unlock()
			go w.exited(r)
		}
	}
}

// exited handles the exit of rank r's process: after a goodbye it is the
// end of a run; otherwise r died, and the run fails.
func (w *watcher) exited(r int) {
	c := w.c
	deadline := time.Now().Add(exitGrace)
	for {
		c.mu.Lock()
		bye := c.peers[r].bye
		c.mu.Unlock()
		if bye {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	err := w.deathError(r)
	w.mu.Lock()
	w.dead[r] = true
	w.mu.Unlock()
	c.mu.Lock()
	p := &c.peers[r]
	p.dead = true
	if p.gone == nil {
		p.gone = err
	}
	c.mu.Unlock()
	c.fail(err, true)
}

func (w *watcher) deathError(r int) error {
	return fmt.Errorf("%w: rank %d (pid %d) exited without shutting down MPI", ErrRankGone, r, w.infos[r].pid)
}

// watchesAll reports whether w watched from the start the process of
// every other rank of a job of size ranks: they all run on this host.
func (w *watcher) watchesAll(size int) bool {
	if w == nil {
		return size == 1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watchedAll
}

// deadNow names the ranks whose processes on this host have exited
// without a goodbye, including those whose exit is not handled yet.
func (w *watcher) deadNow() []error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for r := range w.infos {
		if w.dead[r] {
			errs = append(errs, w.deathError(r))
			continue
		}
		fd, ok := w.fds[r]
		if !ok {
			continue
		}
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(p, 0); err == nil && n > 0 {
			w.c.mu.Lock()
			bye := w.c.peers[r].bye
			w.c.mu.Unlock()
			if !bye {
				errs = append(errs, w.deathError(r))
			}
		}
	}
	return errs
}

// stopWatch ends the watch.
func (w *watcher) stopWatch() {
	if w.stop >= 0 {
		var one [8]byte
		binary.LittleEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(w.stop, one[:])
	}
	<-w.done
	w.closeFds()
	if w.stop >= 0 {
		_ = unix.Close(w.stop)
		w.stop = -1
	}
}

func (w *watcher) closeFds() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r, fd := range w.fds {
		_ = unix.Close(fd)
		delete(w.fds, r)
	}
}
