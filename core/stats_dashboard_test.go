package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// dashSnapshot is /api/snapshot as the page reads it: the field names are
// the contract between the server and the page.
type dashSnapshot struct {
	Sched    string `json:"sched"`
	Engine   string `json:"engine"`
	Stopping bool   `json:"stopping"`
	Tasks    struct {
		Pending, Ready, Done int64
		Throughput           float64 `json:"throughput"`
		IntervalS            float64 `json:"interval_s"`
	} `json:"tasks"`
	Workers []struct {
		ID      int     `json:"id"`
		Name    string  `json:"name"`
		Pid     int     `json:"pid"`
		State   string  `json:"state"`
		Current string  `json:"current"`
		Queued  int     `json:"queued"`
		Done    int64   `json:"done"`
		Busy    float64 `json:"busy"`
	} `json:"workers"`
	Contexts []struct {
		Name    string `json:"name"`
		Policy  string `json:"policy"`
		Workers []int  `json:"workers"`
		Pending int64  `json:"pending"`
		State   string `json:"state"`
	} `json:"contexts"`
	Nodes []struct {
		Name       string `json:"name"`
		Used       uint64 `json:"used"`
		Capacity   uint64 `json:"capacity"`
		Replicates int    `json:"replicates"`
	} `json:"nodes"`
	Plugins []dashPlugin `json:"plugins"`
}

type dashPlugin struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`
	Pid      int     `json:"pid"`
	State    string  `json:"state"`
	Health   string  `json:"health"`
	Restarts int     `json:"restarts"`
	BeatMs   float64 `json:"heartbeat_age_ms"`
	Error    string  `json:"error"`
}

func (s *dashSnapshot) plugin(t *testing.T, name string) dashPlugin {
	t.Helper()
	for _, p := range s.Plugins {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no plugin %s in the snapshot: %+v", name, s.Plugins)
	return dashPlugin{}
}

// getSnapshot fetches and decodes the dashboard's snapshot.
func getSnapshot(t *testing.T, addr string) *dashSnapshot {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /api/snapshot: %s, %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var s dashSnapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decode snapshot: %v", err)
	}
	return &s
}

// runGemms runs n 64x64 products on each of two matrices and waits.
func runGemms(t *testing.T, rt *core.Runtime, n int) {
	t.Helper()
	const order = 64
	a := make([]float32, order*order)
	for i := range a {
		a[i] = 1
	}
	ha, err := core.RegisterMatrix(rt, a, order, order, order)
	if err != nil {
		t.Fatal(err)
	}
	gemm := &core.Codelet{Name: "gemm", Kernels: map[driver.Arch]string{driver.CPU: blasarg.GemmF32}, Modes: []core.Mode{core.R, core.R, core.RW}}
	arg := blasarg.GemmArg{Alpha: 1, Beta: 0}.Encode()
	var cs []*core.Handle
	for range 2 {
		h, err := core.RegisterMatrix(rt, make([]float32, order*order), order, order, order)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, h)
	}
	for i := range n {
		for _, hc := range cs {
			if err := rt.Submit(&core.Task{Codelet: gemm, Handles: []*core.Handle{ha, ha, hc}, Arg: arg}); err != nil {
				t.Fatalf("task %d: %v", i, err)
			}
		}
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for _, h := range append(cs, ha) {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDashboardSnapshot: the JSON endpoint reports the real workers, the
// tasks they ran, the memory nodes and the plugins, and the page and the
// endpoint answer only what they serve.
func TestDashboardSnapshot(t *testing.T) {
	cfg := testConfig(pluginDir)
	rt, err := core.Init(context.Background(), core.Options{Config: cfg, Dashboard: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	addr := rt.DashboardAddr()
	if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("DashboardAddr = %q, want 127.0.0.1 and the port chosen", addr)
	}
	first := getSnapshot(t, addr)
	if first.Tasks.Done != 0 || first.Tasks.IntervalS != 0 {
		t.Errorf("first snapshot: done %d, interval %v; want 0, 0", first.Tasks.Done, first.Tasks.IntervalS)
	}
	if _, err := rt.CreateSchedContext("side", []int{1}, "eager"); err != nil {
		t.Fatal(err)
	}
	const per = 20
	runGemms(t, rt, per)
	time.Sleep(150 * time.Millisecond) // past the server's MinInterval: a new sample
	s := getSnapshot(t, addr)

	if s.Sched != cfg.Sched || s.Engine != "ok" || s.Stopping {
		t.Errorf("sched %q engine %q stopping %v", s.Sched, s.Engine, s.Stopping)
	}
	workers := rt.Workers()
	if len(s.Workers) != len(workers) {
		t.Fatalf("%d workers in the snapshot, the runtime has %d", len(s.Workers), len(workers))
	}
	var done int64
	for i, w := range s.Workers {
		want := fmt.Sprintf("worker %d (%s %s)", workers[i].ID, workers[i].Arch, workers[i].Unit)
		if w.Name != want || w.Pid != workers[i].Pid || w.Pid == 0 {
			t.Errorf("worker %d: name %q pid %d, want %q pid %d", i, w.Name, w.Pid, want, workers[i].Pid)
		}
		if w.State != "idle" || w.Queued != 0 || w.Current != "" {
			t.Errorf("worker %d after WaitForAll: state %q, %d queued, current %q", i, w.State, w.Queued, w.Current)
		}
		if w.Busy < 0 || w.Busy > 1 {
			t.Errorf("worker %d: busy %v", i, w.Busy)
		}
		done += w.Done
	}
	if s.Tasks.Done != 2*per || done != 2*per {
		t.Errorf("tasks done %d, workers' sum %d; want %d", s.Tasks.Done, done, 2*per)
	}
	if s.Tasks.IntervalS <= 0 || s.Tasks.Throughput <= 0 || s.Tasks.Pending != 0 {
		t.Errorf("tasks: %+v; want an interval, a throughput and nothing pending", s.Tasks)
	}
	if len(s.Nodes) == 0 || s.Nodes[0].Name != "RAM" || s.Nodes[0].Capacity == 0 || s.Nodes[0].Used > s.Nodes[0].Capacity {
		t.Errorf("nodes: %+v", s.Nodes)
	}
	if len(s.Contexts) != 2 || s.Contexts[0].Name != core.GlobalSchedContextName || s.Contexts[1].Name != "side" ||
		s.Contexts[1].Policy != "eager" || len(s.Contexts[1].Workers) != 1 || s.Contexts[1].State != "ok" {
		t.Errorf("contexts: %+v", s.Contexts)
	}
	drv := s.plugin(t, "driver-cpu")
	if drv.Health != "ok" || drv.State != "running" || drv.Pid != workers[0].Pid || drv.BeatMs < 0 || drv.BeatMs > 5000 {
		t.Errorf("driver-cpu: %+v; want running, beating, pid %d", drv, workers[0].Pid)
	}
	for _, name := range []string{"sched-" + cfg.Sched, "sched-eager"} {
		if p := s.plugin(t, name); p.Health != "ok" || p.Pid == 0 || p.Kind != "sched" {
			t.Errorf("%s: %+v", name, p)
		}
	}

	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", http.StatusOK, "text/html; charset=utf-8"},
		{"GET", "/nothing", http.StatusNotFound, ""},
		{"POST", "/api/snapshot", http.StatusMethodNotAllowed, ""},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.ctype != "" && resp.Header.Get("Content-Type") != c.ctype) {
			t.Errorf("%s %s: %s %q", c.method, c.path, resp.Status, resp.Header.Get("Content-Type"))
		}
		if c.path == "/" && !strings.Contains(string(body), `fetch("api/snapshot"`) {
			t.Errorf("GET /: not the dashboard page")
		}
	}

	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/api/snapshot"); err == nil {
		t.Error("the dashboard still answers after Shutdown")
	}
}

// TestDashboardKilledDriver: a driver plugin killed under the runtime shows
// as failed, or as restarted once its restart is through.
func TestDashboardKilledDriver(t *testing.T) {
	for _, c := range []struct {
		restarts int
		health   string
		state    string
		nrestart int
	}{
		{0, "failed", "exited", 0},
		{1, "ok", "running", 1},
	} {
		t.Run(fmt.Sprintf("restarts=%d", c.restarts), func(t *testing.T) {
			cfg := testConfig(pluginDir)
			cfg.PluginRestarts = c.restarts
			rt, err := core.Init(context.Background(), core.Options{Config: cfg, Dashboard: "127.0.0.1:0"})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Shutdown()
			pid := rt.Workers()[0].Pid
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				s := getSnapshot(t, rt.DashboardAddr())
				p := s.plugin(t, "driver-cpu")
				if p.Health == c.health && p.State == c.state && p.Restarts == c.nrestart && (c.restarts == 0 || p.Pid != pid) {
					if c.restarts == 0 && (!strings.Contains(p.Error, "exited") || s.Workers[0].State != "dead") {
						t.Errorf("dead driver: %+v, worker state %q", p, s.Workers[0].State)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("driver-cpu after SIGKILL: %+v; want health %s, state %s, %d restarts", p, c.health, c.state, c.nrestart)
				}
				time.Sleep(120 * time.Millisecond)
			}
		})
	}
}

// TestDashboardAddress: the address comes from the config, the
// environment or Options; a bad one or a port in use fails Init with an
// error naming it; none leaves the dashboard off.
func TestDashboardAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	env := func(addr string) func(string) string {
		vars := map[string]string{config.EnvPluginDir: pluginDir, config.EnvNCPU: "1", config.EnvModelDir: modelDir, config.EnvDashboard: addr}
		return func(k string) string { return vars[k] }
	}
	for _, c := range []struct {
		name    string
		opt     core.Options
		wantErr string // "" when Init succeeds
		on      bool
	}{
		{"off", core.Options{Getenv: env("")}, "", false},
		{"environment", core.Options{Getenv: env("127.0.0.1:0")}, "", true},
		{"options over config", core.Options{Config: withDashboard(busy.Addr().String()), Dashboard: "127.0.0.1:0"}, "", true},
		{"port in use", core.Options{Getenv: env(busy.Addr().String())}, busy.Addr().String(), false},
		{"no port", core.Options{Dashboard: "localhost", Config: testConfig(pluginDir)}, `"localhost"`, false},
		{"port out of range", core.Options{Getenv: env("127.0.0.1:70000")}, "STARPU_DASHBOARD", false},
		{"named port", core.Options{Dashboard: "127.0.0.1:http", Config: testConfig(pluginDir)}, "not a number", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt, err := core.Init(context.Background(), c.opt)
			if c.wantErr != "" {
				if err == nil {
					rt.Shutdown()
					t.Fatalf("Init succeeded; want an error naming %s", c.wantErr)
				}
				if !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(strings.ToLower(err.Error()), "dashboard") {
					t.Fatalf("Init: %v; want an error about the dashboard naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Shutdown()
			if on := rt.DashboardAddr() != ""; on != c.on {
				t.Fatalf("DashboardAddr = %q, want on = %v", rt.DashboardAddr(), c.on)
			}
			if c.on {
				getSnapshot(t, rt.DashboardAddr())
			}
		})
	}
}

func withDashboard(addr string) *config.Config {
	c := testConfig(pluginDir)
	c.Dashboard = addr
	return c
}

// TestDashboardConcurrent: pages polling at once while tasks run share
// samples and all get answers; Shutdown is not held up by them.
func TestDashboardConcurrent(t *testing.T) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), Dashboard: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := rt.DashboardAddr()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := http.Get("http://" + addr + "/api/snapshot")
				if err != nil {
					errs <- err
					return
				}
				var s dashSnapshot
				err = json.NewDecoder(resp.Body).Decode(&s)
				resp.Body.Close()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	runGemms(t, rt, 50)
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
	if err := rt.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDashboardSample is one dashboard sample of a runtime with the
// real plugins, idle: the counters, the plugins' state and the round trip
// to the engine goroutine.
func BenchmarkDashboardSample(b *testing.B) {
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), Dashboard: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Shutdown()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if s := rt.SampleDashboard(ctx); s.Engine != "ok" {
			b.Fatalf("engine: %s", s.Engine)
		}
	}
}
