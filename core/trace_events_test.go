package core_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
)

// TraceComm records communications with their peer, tag, size, handle
// and times, on the trace's clock; without a trace file it does nothing.
func TestTraceComm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "comm.trace")
	cfg := testConfig(pluginDir)
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg, TraceFile: path})
	h, err := core.RegisterVector(rt, make([]float32, 16))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	comms := []core.CommEvent{
		{Send: true, Peer: 1, Tag: 7, Bytes: 64, Handle: h, Start: t0, End: t0.Add(5 * time.Millisecond)},
		{Peer: 3, Tag: -2, Bytes: 8, Start: t0.Add(time.Millisecond), End: t0.Add(1500 * time.Microsecond), Failed: true},
	}
	for _, c := range comms {
		rt.TraceComm(c)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	rt.TraceComm(comms[0]) // after Shutdown: ignored
	tf, err := core.ReadTraceFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := tf.Summary().Comms; n != 2 {
		t.Fatalf("%d communications in the trace, want 2", n)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc bytes.Buffer
	if err := core.ConvertTraceToJSON(&doc, f); err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(doc.Bytes(), &parsed); err != nil {
		t.Fatal(err)
	}
	type got struct {
		name      string
		peer      int
		dur       float64
		tag       float64
		bytes     float64
		hasHandle bool
		failed    bool
	}
	var gots []got
	var starts []float64
	for _, e := range parsed.TraceEvents {
		if e.Cat == "comm" {
			_, failed := e.Args["failed"]
			gots = append(gots, got{e.Name, e.Tid, e.Dur, e.Args["tag"].(float64), e.Args["bytes"].(float64), e.Args["handle"].(float64) != 0, failed})
			starts = append(starts, e.Ts)
		}
	}
	want := []got{{"send to 1", 1, 5000, 7, 64, true, false}, {"recv from 3", 3, 500, -2, 8, false, true}}
	if !slices.Equal(gots, want) {
		t.Fatalf("communications %+v, want %+v", gots, want)
	}
	if d := starts[1] - starts[0]; d != 1000 {
		t.Errorf("the second starts %v µs after the first, want 1000", d)
	}

	// Without a trace file, TraceComm is a no-op.
	plain := start(t, core.Options{Config: cfg})
	plain.TraceComm(comms[0])
}

// A driver plugin that dies and restarts shows in the trace: its start,
// its exit (how it ended) and its restart, with the scheduler's start.
func TestTracePluginRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "restart.trace")
	cfg := testConfig(crashyDir)
	cfg.PluginRestarts = 1
	rt := start(t, core.Options{Config: cfg, TraceFile: path})
	// The crashy test driver is built as driver-cpu.
	crash := &core.Codelet{Name: "crash", Kernels: map[driver.Arch]string{driver.CPU: "test_exit"}, Modes: []core.Mode{core.RW}}
	hc, _ := core.RegisterVector(rt, []float32{0})
	before := rt.Workers()[0].Pid
	if err := rt.Submit(&core.Task{Codelet: crash, Handles: []*core.Handle{hc}, Synchronous: true}); !errors.Is(err, core.ErrPluginCrashed) {
		t.Fatalf("the task that kills its driver: %v, want ErrPluginCrashed", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for pid := rt.Workers()[0].Pid; pid == 0 || pid == before; pid = rt.Workers()[0].Pid {
		if time.Now().After(deadline) {
			t.Fatal("the driver was not restarted within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	hc.Unregister() // lost with the driver: its error is not this test's
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	tf, err := core.ReadTraceFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := tf.Summary().Plugins
	var driverEvents []string
	for _, p := range got {
		if p == "start driver-cpu" || p == "exit driver-cpu" || p == "restart driver-cpu" {
			driverEvents = append(driverEvents, p)
		}
	}
	if want := []string{"start driver-cpu", "exit driver-cpu", "restart driver-cpu"}; !slices.Equal(driverEvents, want) {
		t.Errorf("driver events %v (all: %v), want %v", driverEvents, got, want)
	}
	if !slices.Contains(got, "start sched-"+cfg.Sched) {
		t.Errorf("plugin events %v lack the scheduler's start", got)
	}
}
