package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/core"
)

// The progress line of `starpu run`: on a terminal, once a run has lasted
// progressDelay, a line with the tasks done, in flight and the rate,
// redrawn every progressEvery and erased at the end. Never when stdout or
// stderr is not a terminal: a log or a pipe gets no carriage returns.
const (
	progressDelay = 2 * time.Second
	progressEvery = 250 * time.Millisecond
)

// progressSource is what the line reads: a *core.Runtime.
type progressSource interface {
	Progress() core.Progress
}

// progressLine draws the line from its own goroutine until Stop.
type progressLine struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// isTerminal tells whether f is a terminal (a character device that
// answers TCGETS: /dev/null does not).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// startProgress starts the line for command cmd on a runtime: only for
// `run` commands, and only when stdout and stderr are terminals.
func (f *runtimeFlags) startProgress(rt *core.Runtime) {
	if !strings.HasPrefix(f.cmd, "run ") || !isTerminal(os.Stdout) || !isTerminal(os.Stderr) {
		return
	}
	f.progress = startProgress(rt, os.Stderr, progressDelay, progressEvery)
}

// startProgress draws src's progress on w after delay, every every.
func startProgress(src progressSource, w io.Writer, delay, every time.Duration) *progressLine {
	p := &progressLine{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(src, w, delay, every)
	return p
}

func (p *progressLine) run(src progressSource, w io.Writer, delay, every time.Duration) {
	defer close(p.done)
	start := time.Now()
	select {
	case <-p.stop:
		return
	case <-time.After(delay):
	}
	t := time.NewTicker(every)
	defer t.Stop()
	drawn := false
	defer func() {
		if drawn {
			fmt.Fprint(w, "\r\033[K")
		}
	}()
	for {
		s := src.Progress()
		if s.Stopped {
			return
		}
		el := time.Since(start)
		fmt.Fprintf(w, "\r\033[K%d tasks done, %d in flight, %.0f tasks/s, %.1f s", s.Done, s.InFlight, float64(s.Done)/el.Seconds(), el.Seconds())
		drawn = true
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// Stop erases the line and waits for its goroutine; nil does nothing.
func (p *progressLine) Stop() {
	if p == nil {
		return
	}
	p.once.Do(func() { close(p.stop) })
	<-p.done
}
