package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/internal/syncbuf"
	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/internal/mpirun"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

var (
	scalF64  = &core.Codelet{Name: "scal", Kernels: map[driver.Arch]string{driver.CPU: blasarg.ScalF64}, Modes: []core.Mode{core.RW}}
	axpyF64  = &core.Codelet{Name: "axpy", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AxpyF64}, Modes: []core.Mode{core.R, core.RW}}
	dotF64   = &core.Codelet{Name: "dot", Kernels: map[driver.Arch]string{driver.CPU: blasarg.DotF64}, Modes: []core.Mode{core.R, core.R, core.W}}
	reduxVar = &core.Codelet{Name: "redux", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.Redux}}
)

func TestMain(m *testing.M) {
	// Started by mpirun as a rank: run the body and exit.
	mpirun.Main(map[string]func() error{
		"pingpong":     rankPingPong,
		"chain":        rankChain,
		"tag twice":    rankTagTwice,
		"unregistered": rankUnregistered,
		"dies":         rankDies,
		"early":        rankEarly,
		"bench":        rankBench,
		"redux":        rankRedux,
		"csr":          rankCSR,
		"truncate":     rankTruncate,
		"unreg-send":   rankUnregisterInFlight,
		"watchdog":     rankWatchdog,
		"wait":         rankWait,
	})
	os.Exit(m.Run())
}

// rankExe is the test binary mpirun starts as each rank; it skips the
// test where there is no MPI to run it with.
func rankExe(t *testing.T) string {
	t.Helper()
	if !mpi.Built() {
		t.Skip("built without MPI (nompi tag)")
	}
	if err := mpirun.Available(); err != nil {
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestRanks runs each body on real ranks under mpirun and checks how
// every rank ended.
func TestRanks(t *testing.T) {
	exe := rankExe(t)
	// failsNaming expects the run to end, rank dead to report nothing or
	// an error, and every other rank an error naming rank dead.
	failsNaming := func(dead int, deadReports bool) func(t *testing.T, res *mpirun.Result) {
		return func(t *testing.T, res *mpirun.Result) {
			if res.TimedOut {
				t.Fatalf("the run hung:\n%s", res.Output)
			}
			name := fmt.Sprintf("rank %d", dead)
			for _, rr := range res.Ranks {
				t.Logf("rank %d: reported %v: %s", rr.Rank, rr.Reported, rr.Err)
				switch {
				case rr.Rank == dead && !deadReports:
					if rr.Reported {
						t.Errorf("rank %d reported %q, it should have died first", rr.Rank, rr.Err)
					}
				case rr.Rank == dead:
				case !rr.Reported:
					t.Errorf("rank %d did not report: it should have stopped with an error naming %s", rr.Rank, name)
				case !strings.Contains(rr.Err, name):
					t.Errorf("rank %d reported %q, want an error naming %s", rr.Rank, rr.Err, name)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", res.Output)
			}
		}
	}
	// statsPrinted expects success, and STARPU_MPI_STATS's lines from
	// rank 0 about rank 1.
	statsPrinted := func(t *testing.T, res *mpirun.Result) {
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		out := res.Ranks[0].Output
		for _, want := range []string{"[starpu_comm_stats][0] TOTAL:", "[starpu_comm_stats][0:1]\t"} {
			if !strings.Contains(out, want) {
				t.Errorf("rank 0's output lacks %q:\n%s", want, out)
			}
		}
	}
	// commsTraced expects success, and each rank's trace file (STARPU_TRACE
	// under mpirun: one file per rank) to hold its sends and receives.
	traceDir := t.TempDir()
	commsTraced := func(t *testing.T, res *mpirun.Result) {
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		for _, rr := range res.Ranks {
			f, err := core.ReadTraceFile(filepath.Join(traceDir, fmt.Sprintf("run.rank%d.trace", rr.Rank)))
			if err != nil {
				t.Fatal(err)
			}
			var sum strings.Builder
			if err := f.WriteSummary(&sum); err != nil {
				t.Fatal(err)
			}
			// The ping-pong sends to and receives from its neighbours.
			if n := f.Summary().Comms; n < 2 || !strings.Contains(sum.String(), "peer rank") {
				t.Errorf("rank %d's trace holds %d communications, want its sends and receives:\n%s", rr.Rank, n, sum.String())
			}
		}
		// By its base name, the ranks' traces merged: every rank's
		// workers and communications, on one time axis.
		m, err := core.ReadTraceFile(filepath.Join(traceDir, "run.trace"))
		if err != nil {
			t.Fatal(err)
		}
		var sum strings.Builder
		if err := m.WriteSummary(&sum); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"rank -> peer rank", "0 -> 1", "1 -> 0", "rank 1 "} {
			if !strings.Contains(sum.String(), want) {
				t.Errorf("merged trace's summary lacks %q:\n%s", want, sum.String())
			}
		}
	}
	tests := []struct {
		name  string
		np    int
		body  string
		env   []string
		check func(t *testing.T, res *mpirun.Result) // nil: every rank succeeds
	}{
		{name: "ping-pong 2 ranks", np: 2, body: "pingpong"},
		{name: "ping-pong 4 ranks", np: 4, body: "pingpong"},
		{name: "owner-computes chain 2 ranks", np: 2, body: "chain"},
		{name: "owner-computes chain 4 ranks", np: 4, body: "chain"},
		{name: "owner-computes chain without cache", np: 2, body: "chain", env: []string{"STARPU_MPI_CACHE=0"}},
		{name: "communications traced", np: 2, body: "pingpong", env: []string{"STARPU_TRACE=" + filepath.Join(traceDir, "run.trace")}, check: commsTraced},
		{name: "STARPU_MPI_STATS", np: 2, body: "pingpong", env: []string{"STARPU_MPI_STATS=1"}, check: statsPrinted},
		{name: "STARPU_COMM_STATS", np: 2, body: "pingpong", env: []string{"STARPU_COMM_STATS=1"}, check: statsPrinted}, // StarPU 1.3's name
		{name: "watchdog names the receive", np: 2, body: "watchdog", env: []string{"WATCHDOG_DIR=" + t.TempDir()}},
		{name: "REDUX 2 ranks", np: 2, body: "redux"},
		{name: "REDUX 4 ranks", np: 4, body: "redux"},
		{name: "REDUX without cache", np: 2, body: "redux", env: []string{"STARPU_MPI_CACHE=0"}},
		{name: "tag registered twice", np: 2, body: "tag twice"},
		{name: "message larger than the handle", np: 2, body: "truncate"},
		{name: "unregister during a detached send", np: 2, body: "unreg-send"},
		{name: "handle without owner", np: 4, body: "unregistered"},
		{name: "rank dies 2 ranks", np: 2, body: "dies", check: failsNaming(1, false)},
		{name: "rank dies 4 ranks", np: 4, body: "dies", check: failsNaming(1, false)},
		{name: "rank shuts down early 2 ranks", np: 2, body: "early", check: failsNaming(1, true)},
		{name: "rank shuts down early 4 ranks", np: 4, body: "early", check: failsNaming(1, true)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := mpirun.Run(context.Background(), mpirun.Job{NP: tc.np, Prog: exe, Args: []string{"-test.run=^$"}, Body: tc.body, Env: tc.env, Timeout: 90 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d ranks, %v", tc.np, time.Since(start).Round(time.Millisecond))
			if tc.check != nil {
				tc.check(t, res)
				return
			}
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRanksInterrupted: mpirun ending a job whose ranks are all alive
// (its SIGTERM, as on Ctrl-C or a time limit) makes each rank say that no
// rank died, rather than blame a rank on another host. mpirun gets the
// signal once every rank is waiting (files in READY_DIR).
func TestRanksInterrupted(t *testing.T) {
	exe := rankExe(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			a, _ := os.Stat(filepath.Join(dir, "ready-0"))
			b, _ := os.Stat(filepath.Join(dir, "ready-1"))
			if a != nil && b != nil {
				cancel() // mpirun gets SIGTERM
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	res, err := mpirun.Run(ctx, mpirun.Job{NP: 2, Prog: exe, Args: []string{"-test.run=^$"}, Body: "wait", Env: []string{"READY_DIR=" + dir}, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range res.Ranks {
		if !strings.Contains(rr.Output, "got SIGTERM") || !strings.Contains(rr.Output, "no rank died: every rank runs on this host and is alive") {
			t.Errorf("rank %d's output:\n%s\nwant it to say no rank died", rr.Rank, rr.Output)
		}
	}
}

// rankWait: each rank says it is ready (a file in READY_DIR), then waits
// for data no rank sends, until mpirun ends the job.
func rankWait() error {
	n, err := start(mpi.Options{})
	if err != nil {
		return err
	}
	c := n.c
	var v float64
	h, err := core.RegisterVariable(n.rt, &v)
	if err != nil {
		return n.stop(err)
	}
	if err := os.WriteFile(filepath.Join(os.Getenv("READY_DIR"), fmt.Sprintf("ready-%d", c.Rank())), nil, 0o644); err != nil {
		return n.stop(err)
	}
	err = c.Recv(h, 1-c.Rank(), 9)
	if err == nil {
		err = errors.New("a receive nobody sent completed")
	}
	return n.stop(err)
}

// node is one rank's runtime and MPI layer.
type node struct {
	rt  *core.Runtime
	c   *mpi.Comm
	dir string
}

// start brings up a runtime with one in-process CPU worker, and MPI over
// it.
func start(opt mpi.Options) (*node, error) { return startN(opt, 1) }

// startN is start with ncpu CPU workers, which also host the test's own
// kernels; tune, when given, changes the configuration and options.
func startN(opt mpi.Options, ncpu int, tune ...func(*config.Config, *core.Options)) (*node, error) {
	dir, err := os.MkdirTemp("", "starpu-mpi-test-")
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.NCPU = ncpu
	cfg.ArenaSize = 128 << 20
	cfg.ModelDir = dir
	// Ranks that register data of interface plugins are told where to
	// find them (TestRanksCSR).
	cfg.PluginDir = os.Getenv(config.EnvPluginDir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	copt := core.Options{
		Config: cfg,
		Drivers: []core.DriverFactory{func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
			return cpudriver.New(a, log, cpudriver.WithKernels(append(kernels.Library(), kernel.Kernel{Name: "test_dot_acc_f64", Func: dotAcc})...)), nil
		}},
		Scheduler: func(a *shm.Arena, log hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
		},
	}
	for _, f := range tune {
		f(cfg, &copt)
	}
	rt, err := core.Init(ctx, copt)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := mpi.Init(ctx, rt, opt)
	if err != nil {
		rt.Shutdown()
		os.RemoveAll(dir)
		return nil, err
	}
	return &node{rt: rt, c: c, dir: dir}, nil
}

// stop shuts MPI and the runtime down; err is the body's error, which
// comes first.
func (n *node) stop(err error) error {
	if err != nil {
		// Reported at once: when a rank died, mpirun may kill this one
		// during Shutdown.
		mpirun.Report(err)
	}
	errs := []error{err}
	if serr := n.c.Shutdown(); serr != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w", serr))
	}
	if serr := n.rt.Shutdown(); serr != nil {
		errs = append(errs, fmt.Errorf("runtime shutdown: %w", serr))
	}
	os.RemoveAll(n.dir)
	return errors.Join(errs...)
}

func run(opt mpi.Options, body func(n *node) error) error {
	n, err := start(opt)
	if err != nil {
		return err
	}
	return n.stop(body(n))
}

// dotAcc is the test's kernel test_dot_acc_f64: result += x.y. Buffers:
// [vector x R, vector y R, variable result RW (REDUX)].
func dotAcc(ctx *kernel.Context) error {
	x, y, r := ctx.Buffers[0].Float64s(), ctx.Buffers[1].Float64s(), ctx.Buffers[2].Float64s()
	for i := range x {
		r[0] += x[i] * y[i]
	}
	return nil
}

func eq(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// rankPingPong: a vector goes around the ranks, each adding its rank
// (a scal then an axpy task), and a strided matrix goes from rank 0 to
// every other rank and back, through each form of the transfers.
func rankPingPong() error {
	return run(mpi.Options{}, func(n *node) error {
		c, rt := n.c, n.rt
		// A P each for the engine, the application, the worker, the
		// policy host and MPI's progression goroutine (Init reserves it):
		// mpirun binds a rank to one core, where Go would start with one.
		if got := runtime.GOMAXPROCS(0); got < 5 {
			return fmt.Errorf("GOMAXPROCS = %d, want at least 5", got)
		}
		me, np := c.Rank(), c.Size()
		const len = 1000
		x := make([]float64, len)
		one := make([]float64, len)
		for i := range x {
			one[i] = 1
			if me == 0 {
				x[i] = float64(i)
			}
		}
		hx, err := core.RegisterVector(rt, x)
		if err != nil {
			return err
		}
		hone, err := core.RegisterVector(rt, one)
		if err != nil {
			return err
		}
		// Around the ring: rank r receives from r-1, doubles, adds r, sends
		// to r+1; rank 0 starts and ends it.
		next, prev := (me+1)%np, (me+np-1)%np
		if me == 0 {
			if err := c.Send(hx, next, 1); err != nil {
				return err
			}
			if err := c.Recv(hx, prev, 1); err != nil {
				return err
			}
			if err := hx.Acquire(core.R); err != nil {
				return err
			}
			for i, v := range x {
				want := float64(i)
				for r := 1; r < np; r++ {
					want = 2*want + float64(r)
				}
				if !eq(v, want) {
					hx.Release()
					return fmt.Errorf("ring: x[%d] = %v, want %v", i, v, want)
				}
			}
			hx.Release()
		} else {
			// Detached receive with a callback, tasks on the data, and a
			// waited-for Isend.
			got := make(chan error, 1)
			if err := c.IrecvDetached(hx, prev, 1, func(err error) { got <- err }); err != nil {
				return err
			}
			if _, err := rt.Insert(scalF64, core.Data(core.RW, hx), core.ClArgs(blasarg.ScalArg{Alpha: 2}.Encode())); err != nil {
				return err
			}
			if _, err := rt.Insert(axpyF64, core.Data(core.R, hone), core.Data(core.RW, hx), core.ClArgs(blasarg.AxpyArg{Alpha: float64(me)}.Encode())); err != nil {
				return err
			}
			r, err := c.Isend(hx, next, 1)
			if err != nil {
				return err
			}
			if err := r.Wait(); err != nil {
				return err
			}
			if done, err := r.Test(); !done || err != nil {
				return fmt.Errorf("Test after Wait: %v, %v", done, err)
			}
			if err := <-got; err != nil {
				return fmt.Errorf("receive callback: %w", err)
			}
		}

		// A 5x3 matrix with leading dimension 8 in arena memory: only its
		// elements travel, the gaps keep their own values on each rank.
		m, err := core.Malloc[float64](rt, 8*3)
		if err != nil {
			return err
		}
		for i := range m {
			m[i] = -1
		}
		if me == 0 {
			for j := 0; j < 3; j++ {
				for i := 0; i < 5; i++ {
					m[i+8*j] = float64(10*j + i)
				}
			}
		}
		hm, err := core.RegisterMatrix(rt, m, 8, 5, 3)
		if err != nil {
			return err
		}
		if me == 0 {
			for r := 1; r < np; r++ {
				if err := c.Send(hm, r, 2); err != nil {
					return err
				}
			}
			for r := 1; r < np; r++ {
				if err := c.Recv(hm, r, 3); err != nil {
					return err
				}
			}
		} else {
			if err := c.Recv(hm, 0, 2); err != nil {
				return err
			}
			if err := hm.Acquire(core.RW); err != nil {
				return err
			}
			for j := 0; j < 3; j++ {
				for i := 0; i < 8; i++ {
					want := float64(10*j + i)
					if i >= 5 {
						want = -1
					}
					if m[i+8*j] != want {
						hm.Release()
						return fmt.Errorf("matrix (%d, %d) = %v, want %v", i, j, m[i+8*j], want)
					}
					if i < 5 {
						m[i+8*j]++
					}
				}
			}
			hm.Release()
			if err := c.Send(hm, 0, 3); err != nil {
				return err
			}
		}
		if me == 0 {
			if err := hm.Acquire(core.R); err != nil {
				return err
			}
			for j := 0; j < 3; j++ {
				for i := 0; i < 5; i++ {
					if want := float64(10*j+i) + 1; m[i+8*j] != want {
						hm.Release()
						return fmt.Errorf("matrix back: (%d, %d) = %v, want %v", i, j, m[i+8*j], want)
					}
				}
			}
			hm.Release()
		}
		if err := c.WaitForAll(); err != nil {
			return err
		}
		// Statistics: rank 0 sent the vector and the matrix to rank 1
		// (and the matrix to the others).
		st := c.Stats()
		if me == 0 && (st[1].SentMsgs != 2 || st[1].SentBytes != 8*len+8*15) {
			return fmt.Errorf("stats to rank 1: %+v, want 2 messages of %d bytes in all", st[1], 8*len+8*15)
		}
		if err := hm.Unregister(); err != nil {
			return err
		}
		return core.Free(rt, m)
	})
}

// rankChain: K vectors owned round-robin; a chain of axpy tasks through
// Insert, an InsertOn override, reads that hit the cache, a flush; the
// results are gathered on rank 0 and checked against the same
// computation made locally; the message counts show the cache.
func rankChain() error {
	return run(mpi.Options{}, func(n *node) error {
		c, rt := n.c, n.rt
		me, np := c.Rank(), c.Size()
		const K, L = 8, 64
		init := func(k, i int) float64 { return float64(k) + float64(i)/100 }
		xs := make([][]float64, K)
		hs := make([]*core.Handle, K)
		ref := make([][]float64, K)
		for k := range xs {
			xs[k], ref[k] = make([]float64, L), make([]float64, L)
			for i := range ref[k] {
				ref[k][i] = init(k, i)
				if k%np == me {
					xs[k][i] = init(k, i)
				}
			}
			var err error
			if k%np == me || k%2 == 0 {
				hs[k], err = core.RegisterVector(rt, xs[k])
			} else {
				// Others' data without Go memory behind it.
				hs[k], err = rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 8, NX: L})
			}
			if err != nil {
				return err
			}
			if err := c.Register(hs[k], int64(100+k), k%np); err != nil {
				return err
			}
		}
		axpy := func(a float64, x, y int) error {
			_, err := c.Insert(axpyF64, core.Data(core.R, hs[x]), core.Data(core.RW, hs[y]), core.ClArgs(blasarg.AxpyArg{Alpha: a}.Encode()))
			for i := range ref[y] {
				ref[y][i] += a * ref[x][i]
			}
			return err
		}
		for k := 1; k < K; k++ {
			if err := axpy(0.5, k-1, k); err != nil {
				return err
			}
		}
		// x0 scaled on the last rank: it goes there and back.
		t, err := c.InsertOn(np-1, scalF64, core.Data(core.RW, hs[0]), core.ClArgs(blasarg.ScalArg{Alpha: 3}.Encode()))
		if err != nil {
			return err
		}
		if (t != nil) != (me == np-1) {
			return fmt.Errorf("InsertOn(%d) returned task %v on rank %d", np-1, t, me)
		}
		for i := range ref[0] {
			ref[0][i] *= 3
		}
		// dot = x2.x3 into a variable of rank 0, computed on the last
		// rank (write-only there: nothing to receive first, the result
		// goes back).
		var dot float64
		hd, err := core.RegisterVariable(rt, &dot)
		if err != nil {
			return err
		}
		if err := c.Register(hd, 99, 0); err != nil {
			return err
		}
		if _, err := c.InsertOn(np-1, dotF64, core.Data(core.R, hs[2]), core.Data(core.R, hs[3]), core.Data(core.W, hd)); err != nil {
			return err
		}
		wantDot := 0.0
		for i := range ref[2] {
			wantDot += ref[2][i] * ref[3][i]
		}
		// x4 scaled where x5 lives.
		if _, err := c.InsertOnData(hs[5], scalF64, core.Data(core.RW, hs[4]), core.ClArgs(blasarg.ScalArg{Alpha: 2}.Encode())); err != nil {
			return err
		}
		for i := range ref[4] {
			ref[4][i] *= 2
		}
		// REDUX on a handle without reduction methods is refused on every
		// rank, and nothing is sent for it.
		if _, err := c.Insert(reduxVar, core.Data(core.Redux, hd)); !errors.Is(err, mpi.ErrNoReductionMethods) {
			return fmt.Errorf("Insert with REDUX without reduction methods: %v, want ErrNoReductionMethods", err)
		}
		if err := c.WaitForAll(); err != nil {
			return err
		}
		if me == 0 {
			if err := hd.Acquire(core.R); err != nil {
				return err
			}
			got := dot
			hd.Release()
			if !eq(got, wantDot) {
				return fmt.Errorf("dot computed on rank %d = %v, want %v", np-1, got, wantDot)
			}
		}
		before := c.Stats()
		// Twice x1 += x0 on rank 1: x0 goes to rank 1 once (twice
		// without the cache).
		for range 2 {
			if err := axpy(1, 0, 1); err != nil {
				return err
			}
		}
		if err := c.WaitForAll(); err != nil {
			return err
		}
		mid := c.Stats()
		want := int64(1)
		if os.Getenv("STARPU_MPI_CACHE") == "0" {
			want = 2
		}
		if me == 0 {
			if d := mid[1].SentMsgs - before[1].SentMsgs; d != want {
				return fmt.Errorf("two reads of x0 on rank 1 sent it %d times, want %d", d, want)
			}
		}
		// After a flush, it goes again.
		c.FlushAll()
		if err := axpy(1, 0, 1); err != nil {
			return err
		}
		if err := c.WaitForAll(); err != nil {
			return err
		}
		if me == 0 {
			if d := c.Stats()[1].SentMsgs - mid[1].SentMsgs; d != 1 {
				return fmt.Errorf("a read of x0 on rank 1 after FlushAll sent it %d times, want once", d)
			}
		}
		// Gather on rank 0 and check.
		for k := range hs {
			if err := c.GetDataOnNode(hs[k], 0); err != nil {
				return err
			}
		}
		if err := c.WaitForAll(); err != nil {
			return err
		}
		if err := c.Unregister(hd); err != nil {
			return err
		}
		for k, h := range hs {
			if me != 0 {
				if err := c.Unregister(h); err != nil {
					return err
				}
				continue
			}
			if err := h.Acquire(core.R); err != nil {
				return err
			}
			got := xs[k]
			if h.LocalPointer() != nil && k%np != 0 && k%2 == 1 {
				got = (*[L]float64)(h.LocalPointer())[:]
			}
			for i := range got {
				if !eq(got[i], ref[k][i]) {
					h.Release()
					return fmt.Errorf("x%d[%d] = %v, want %v", k, i, got[i], ref[k][i])
				}
			}
			h.Release()
			if err := c.Unregister(h); err != nil {
				return err
			}
		}
		return nil
	})
}

// rankTagTwice: a tag registered twice is refused on every rank, as are
// a handle registered twice and owners and tags out of range.
func rankTagTwice() error {
	return run(mpi.Options{}, func(n *node) error {
		c, rt := n.c, n.rt
		var a, b float64
		ha, _ := core.RegisterVariable(rt, &a)
		hb, _ := core.RegisterVariable(rt, &b)
		if err := c.Register(ha, 7, 0); err != nil {
			return err
		}
		bad := []struct {
			what string
			err  error
			want string
		}{
			{"tag 7 again", c.Register(hb, 7, 1), "already registered"},
			{"handle again", c.Register(ha, 8, 0), "already registered with tag 7"},
			{"owner out of range", c.Register(hb, 9, c.Size()), "out of range"},
			{"negative tag", c.Register(hb, -1, 0), "out of range"},
			{"tag above the maximum", c.Register(hb, c.TagMax()+1, 0), "out of range"},
		}
		for _, tc := range bad {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				return fmt.Errorf("%s: %v, want an error saying %q", tc.what, tc.err, tc.want)
			}
		}
		if err := c.Register(hb, 7, 1); !errors.Is(err, mpi.ErrTagInUse) {
			return fmt.Errorf("tag 7 again: %v is not ErrTagInUse", err)
		}
		if owner, ok := c.Owner(ha); !ok || owner != 0 {
			return fmt.Errorf("Owner: %d, %v", owner, ok)
		}
		if tag, ok := c.Tag(ha); !ok || tag != 7 {
			return fmt.Errorf("Tag: %d, %v", tag, ok)
		}
		// Once unregistered, the tag is free again.
		if err := c.Unregister(ha); err != nil {
			return err
		}
		return c.Register(hb, 7, 1)
	})
}

// rankUnregistered: a handle with no owner used in Insert is an error on
// every rank, and nothing hangs after it.
func rankUnregistered() error {
	return run(mpi.Options{}, func(n *node) error {
		c, rt := n.c, n.rt
		x, y := make([]float64, 4), make([]float64, 4)
		hx, _ := core.RegisterVector(rt, x)
		hy, _ := core.RegisterVector(rt, y)
		if err := c.Register(hy, 1, c.Size()-1); err != nil {
			return err
		}
		_, err := c.Insert(axpyF64, core.Data(core.R, hx), core.Data(core.RW, hy), core.ClArgs(blasarg.AxpyArg{Alpha: 1}.Encode()))
		if !errors.Is(err, mpi.ErrNotRegistered) || !strings.Contains(err.Error(), "has no owner rank") {
			return fmt.Errorf("Insert with an unregistered handle: %v, want ErrNotRegistered", err)
		}
		return c.WaitForAll()
	})
}

// rankDies: rank 1 exits without a word while rank 0 waits for data
// from it and the others wait for every rank.
func rankDies() error {
	n, err := start(mpi.Options{})
	if err != nil {
		return err
	}
	c := n.c
	var v float64
	h, _ := core.RegisterVariable(n.rt, &v)
	switch c.Rank() {
	case 1:
		time.Sleep(200 * time.Millisecond)
		os.Exit(3)
	case 0:
		err = c.Recv(h, 1, 5)
	default:
		err = c.Barrier()
	}
	if err == nil {
		err = errors.New("the wait ended without an error")
	}
	return n.stop(err)
}

// rankEarly: rank 1 shuts down at once, while rank 0 waits for data
// from it and the others wait for every rank.
func rankEarly() error {
	n, err := start(mpi.Options{})
	if err != nil {
		return err
	}
	c := n.c
	var v float64
	h, _ := core.RegisterVariable(n.rt, &v)
	switch c.Rank() {
	case 1:
		return n.stop(nil)
	case 0:
		err = c.Recv(h, 1, 5)
	default:
		err = c.Barrier()
	}
	if err == nil {
		err = errors.New("the wait ended without an error")
	}
	return n.stop(err)
}

// TestBenchPingPong measures the ping-pong of a handle through the runtime
// (Send and Recv of arena data, each ordered with the tasks), against
// which mpib's TestBenchPingPong is the raw reference; it runs with
// STARPU_MPI_BENCH=1 only.
func TestBenchPingPong(t *testing.T) {
	if os.Getenv("STARPU_MPI_BENCH") != "1" {
		t.Skip("set STARPU_MPI_BENCH=1 to measure")
	}
	if !mpi.Built() {
		t.Skip("built without MPI (nompi tag)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := mpirun.Run(context.Background(), mpirun.Job{NP: 2, Prog: exe, Args: []string{"-test.run=^$"}, Body: "bench", Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Ranks[0].Output + "\n" + res.Ranks[1].Output)
}

// rankBench: ping-pong of 8 bytes and 4 MiB in arena memory between
// ranks 0 and 1, through the runtime and raw (Comm.PingPong, which
// starpu bench mpi prints too); rank 0 prints the one-way times and
// bandwidths (medians of 5 alternated rounds).
func rankBench() error {
	spin, _ := strconv.Atoi(os.Getenv("STARPU_MPI_BENCH_SPIN"))
	return run(mpi.Options{SpinPolls: spin}, func(n *node) error {
		c, rt := n.c, n.rt
		me := c.Rank()
		res, err := c.PingPong(context.Background(), mpi.PingPongOptions{Sizes: []int{8, 4 << 20}, Tag: 1})
		if err != nil {
			return err
		}
		for _, r := range res {
			if me == 0 {
				fmt.Printf("ping-pong %d B one-way: runtime handle %.2f us (%.1f MB/s), raw MPI %.2f us (%.1f MB/s)\n", r.Size,
					float64(r.Runtime.Nanoseconds())/1e3, float64(r.Size)/r.Runtime.Seconds()/1e6,
					float64(r.Raw.Nanoseconds())/1e3, float64(r.Size)/r.Raw.Seconds()/1e6)
			}
		}
		// The owner-computes walk: every rank inserts the same tasks on
		// vectors of rank 0; rank 1 skips them all, rank 0 submits them.
		const nh, nt = 1000, 20000
		hs := make([]*core.Handle, nh)
		for i := range hs {
			h, err := rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 8, NX: 1})
			if err != nil {
				return err
			}
			if err := c.Register(h, int64(10+i), 0); err != nil {
				return err
			}
			hs[i] = h
		}
		arg := core.ClArgs(blasarg.ScalArg{Alpha: 1}.Encode())
		if err := c.Barrier(); err != nil {
			return err
		}
		start := time.Now()
		for i := range nt {
			if _, err := c.Insert(scalF64, core.Data(core.RW, hs[i%nh]), arg); err != nil {
				return err
			}
		}
		per := time.Since(start) / nt
		if err := c.WaitForAll(); err != nil {
			return err
		}
		what := "skipped"
		if me == 0 {
			what = "submitted"
		}
		fmt.Printf("rank %d: Insert of a task it %s: %.2f us each (%d handles registered)\n", me, what, float64(per.Nanoseconds())/1e3, nh)
		for _, h := range hs {
			if err := c.Unregister(h); err != nil {
				return err
			}
		}
		return nil
	})
}

// rankTruncate: rank 0 sends 8 float64 where rank 1 receives into a handle
// of 4: rank 1's Recv fails with ErrGraphMismatch saying the message is
// larger than the handle (it was MPI's bare MPI_ERR_TRUNCATE), and both
// ranks' Shutdown says the graphs differed.
func rankTruncate() error {
	n, err := start(mpi.Options{})
	if err != nil {
		return err
	}
	defer os.RemoveAll(n.dir)
	c, rt := n.c, n.rt
	size := 8
	if c.Rank() == 1 {
		size = 4
	}
	h, err := core.RegisterVector(rt, make([]float64, size))
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		err = c.Send(h, 1, 3)
	} else if err = c.Recv(h, 0, 3); errors.Is(err, mpi.ErrGraphMismatch) && strings.Contains(err.Error(), "larger than the handle's 32 bytes") {
		err = nil
	} else {
		err = fmt.Errorf("Recv of a message too large: %v, want ErrGraphMismatch saying so", err)
	}
	h.Unregister()
	if serr := c.Shutdown(); !errors.Is(serr, mpi.ErrGraphMismatch) {
		err = errors.Join(err, fmt.Errorf("shutdown: %v, want ErrGraphMismatch", serr))
	}
	rt.Shutdown()
	return err
}

// rankWatchdog: rank 0 waits for a vector from rank 1, a task reading it
// waiting too, and rank 1 sends it only once rank 0's watchdog has said
// so, naming the receive it waits for (a file in $WATCHDOG_DIR tells rank
// 1: events, not durations, order the ranks).
func rankWatchdog() error {
	var logged syncbuf.Buffer
	n, err := startN(mpi.Options{}, 1, func(cfg *config.Config, o *core.Options) {
		cfg.WatchdogTimeout = 100 * time.Millisecond
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: io.MultiWriter(&logged, os.Stderr), Level: hclog.Warn})
	})
	if err != nil {
		return err
	}
	c, rt := n.c, n.rt
	x := make([]float64, 4)
	if c.Rank() == 1 {
		x[0] = 7
	}
	h, err := core.RegisterVector(rt, x)
	if err != nil {
		return n.stop(err)
	}
	flag := filepath.Join(os.Getenv("WATCHDOG_DIR"), "sent")
	deadline := time.Now().Add(60 * time.Second)
	if c.Rank() == 1 {
		for _, err := os.Stat(flag); err != nil; _, err = os.Stat(flag) {
			if time.Now().After(deadline) {
				return n.stop(errors.New("rank 0 never said its watchdog spoke"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		err = c.Send(h, 0, 5)
		h.Unregister()
		return n.stop(err)
	}
	if err := c.IrecvDetached(h, 1, 5, nil); err != nil {
		return n.stop(err)
	}
	reader := &core.Task{Codelet: &core.Codelet{Name: "empty_r", Kernels: map[core.Arch]string{core.CPU: blasarg.Empty}, Modes: []core.Mode{core.R}}, Handles: []*core.Handle{h}}
	if err := rt.Submit(reader); err != nil {
		return n.stop(err)
	}
	want := "receive of " + h.String() + " from rank 1 (tag 5), posted"
	for !strings.Contains(logged.String(), want) {
		if time.Now().After(deadline) {
			os.WriteFile(flag, nil, 0o644)
			return n.stop(fmt.Errorf("the watchdog never named %q; log:\n%s", want, logged.String()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logged.String(), "watchdog: no task completed") {
		err = fmt.Errorf("log:\n%s\nwant the watchdog's line", logged.String())
	}
	if werr := os.WriteFile(flag, nil, 0o644); werr != nil {
		return n.stop(werr)
	}
	err = errors.Join(err, rt.Wait(reader))
	h.Unregister()
	if err == nil && x[0] != 7 {
		err = fmt.Errorf("received %v, want 7", x[0])
	}
	return n.stop(err)
}

// rankUnregisterInFlight: rank 0 sends two large vectors with detached
// sends that rank 1 receives late, and unregisters them at once, one with
// Comm.Unregister and one with Handle.Unregister: both wait for the send,
// as starpu_data_unregister does (they failed with "still acquired by the
// application"), and rank 1 receives the data whole.
func rankUnregisterInFlight() error {
	return run(mpi.Options{}, func(n *node) error {
		c, rt := n.c, n.rt
		const size = 1 << 20 // past the eager limit: the send waits for the receive
		var hs [2]*core.Handle
		var xs [2][]float64
		for k := range hs {
			xs[k] = make([]float64, size)
			if c.Rank() == 0 {
				for i := range xs[k] {
					xs[k][i] = float64(i + k)
				}
			}
			h, err := core.RegisterVector(rt, xs[k])
			if err != nil {
				return err
			}
			if err := c.Register(h, int64(10+k), 0); err != nil {
				return err
			}
			hs[k] = h
		}
		if c.Rank() == 0 {
			sent := make(chan error, 2)
			for k, h := range hs {
				if err := c.IsendDetached(h, 1, int64(20+k), func(err error) { sent <- err }); err != nil {
					return err
				}
			}
			if err := c.Unregister(hs[0]); err != nil {
				return fmt.Errorf("Comm.Unregister during a detached send: %w", err)
			}
			if err := hs[1].Unregister(); err != nil {
				return fmt.Errorf("Handle.Unregister during a detached send: %w", err)
			}
			for range hs {
				if err := <-sent; err != nil {
					return err
				}
			}
			return nil
		}
		time.Sleep(300 * time.Millisecond) // the sends wait meanwhile
		for k, h := range hs {
			if err := c.Recv(h, 0, int64(20+k)); err != nil {
				return err
			}
			if err := c.Unregister(h); err != nil {
				return err
			}
			for i, v := range xs[k] {
				if v != float64(i+k) {
					return fmt.Errorf("vector %d: x[%d] = %v, want %v", k, i, v, i+k)
				}
			}
		}
		return nil
	})
}
