package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
)

type fakeProgress struct {
	done    atomic.Int64
	stopped atomic.Bool
}

func (f *fakeProgress) Progress() core.Progress {
	return core.Progress{Done: f.done.Add(10), InFlight: 3, Stopped: f.stopped.Load()}
}

func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		name      string
		run       time.Duration // how long the "run" lasts before Stop
		stopSelf  bool          // the runtime shuts down first
		wantLine  bool
		wantClear bool
	}{
		{name: "short run: no line", run: 0},
		{name: "long run: a line, erased", run: 60 * time.Millisecond, wantLine: true, wantClear: true},
		{name: "runtime shut down: the line goes", run: 60 * time.Millisecond, stopSelf: true, wantLine: true, wantClear: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			src := &fakeProgress{}
			p := startProgress(src, &out, 20*time.Millisecond, 5*time.Millisecond)
			time.Sleep(c.run)
			if c.stopSelf {
				src.stopped.Store(true)
				<-p.done // it stops on its own
			}
			p.Stop()
			p.Stop() // twice is fine
			s := out.String()
			if got := strings.Contains(s, "tasks done, 3 in flight"); got != c.wantLine {
				t.Errorf("line drawn: %v, want %v (%q)", got, c.wantLine, s)
			}
			if got := strings.HasSuffix(s, "\r\033[K") && s != ""; got != c.wantClear {
				t.Errorf("line erased at the end: %v, want %v (%q)", got, c.wantClear, s)
			}
		})
	}
	var p *progressLine
	p.Stop() // a nil line: no terminal
}

// Files and pipes are not terminals: no progress line in logs.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, x := range []*os.File{f, w, null} {
		if isTerminal(x) {
			t.Errorf("%s taken for a terminal", x.Name())
		}
	}
}
