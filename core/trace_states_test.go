package core_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/internal/trace"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// A worker left idle longer than its spin falls asleep on its doorbell,
// its driver plugin says so with its next task's completion, and the
// trace read back has a sleeping state before that task, covering most of
// the gap; each handle carries its footprint, which for a task of one
// handle is the task's (the performance model's key).
func TestTraceSleepAndFootprints(t *testing.T) {
	const gap = 60 * time.Millisecond
	path := filepath.Join(t.TempDir(), "sleep.trace")
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	// A short spin: each poll's yield may give the CPU away for
	// milliseconds on a loaded machine, and the test wants the gap slept.
	cfg.SpinIters = 20
	rt, err := core.Init(context.Background(), core.Options{Config: cfg, TraceFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	x, y, z := make([]float32, 16), make([]float32, 16), make([]float32, 32)
	var hs []*core.Handle
	for _, v := range [][]float32{x, y, z} {
		h, err := core.RegisterVector(rt, v)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	scal := &core.Codelet{Name: "scal_sleep", Kernels: scalOnCPU.Kernels, Modes: []core.Mode{core.RW}, Model: core.HistoryModel}
	var ids []uint64
	for i, h := range hs {
		if i > 0 {
			time.Sleep(gap)
		}
		task := &core.Task{Codelet: scal, Handles: []*core.Handle{h}, Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true}
		if err := rt.Submit(task); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID())
	}
	tr := shutdownRead(t, rt, path, hs...)
	if tf, err := core.ReadTraceFile(path); err != nil {
		t.Fatal(err)
	} else if s := tf.Summary().Sleeping; s <= 0 {
		t.Errorf("the trace's summary gives %v of sleep; want some", s)
	}
	byID := map[uint64]*trace.Task{}
	for _, x := range tr.Tasks {
		byID[x.ID] = x
	}
	var fps []uint32
	for i, id := range ids {
		x := byID[id]
		if x == nil || !x.Ran || len(x.Handles) != 1 {
			t.Fatalf("task %d: %+v, want it run with one handle", id, x)
		}
		fps = append(fps, x.Handles[0].Footprint)
		if x.Footprint != x.Handles[0].Footprint {
			t.Errorf("task %d: footprint %x, its only handle's %x: want them equal", id, x.Footprint, x.Handles[0].Footprint)
		}
		if i == 0 {
			continue
		}
		prev := byID[ids[i-1]]
		var slept int64
		for _, st := range tr.States {
			if st.Task != id || st.Worker != x.Worker || st.Kind != trace.StateSleeping {
				continue
			}
			if st.Start < prev.End || st.End > x.Start {
				t.Errorf("task %d: sleeping from %d to %d, outside the gap %d..%d", id, st.Start, st.End, prev.End, x.Start)
			}
			slept += st.End - st.Start
		}
		// The rest of the gap is the spin before the sleep and the
		// wake-up after the task was ready (scheduling): short, but long
		// on a loaded machine.
		if g := x.Start - prev.End; slept < g*4/10 {
			t.Errorf("task %d: sleeping %v of the %v gap before it (submitted %v after its predecessor ended); want most of it", id, time.Duration(slept), time.Duration(g), gap)
		}
	}
	if fps[0] != fps[1] || fps[0] == fps[2] || fps[0] == 0 {
		t.Errorf("handle footprints %x: want the two vectors of 16 float32 alike, the one of 32 apart", fps)
	}
}
