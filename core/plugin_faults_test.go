package core_test

// Fault paths of the core that only a misbehaving plugin reaches: a worker
// completing a task another worker runs (engine.go, drainCompletions), a
// data interface plugin answering nonsense (data_iface.go, dataErr), and a
// context deleted while its policy restarts (sched_context.go, Delete;
// sched_restart.go, restartSched).
//
// Each test was checked to fail without the handling it covers: the
// handling was disabled in a scratch copy of the tree (so that the core
// files in the working tree were never touched) and the test run there:
//
//   - TestCompletionFromWrongWorkerIgnored: the block in drainCompletions
//     that re-tracks a task completed by a worker it was not assigned to
//     (`if j != nil && j.worker >= 0 && int(j.worker) != w.id {`) turned
//     off with `false &&`: "task X is finished (callback run 1 times)
//     while worker 0 still holds it: the engine took worker 1's completion
//     of a task assigned to worker 0".
//   - TestIfaceBadReplyIsPluginFault: dataErr's ErrBadReply branch removed
//     (every refusal blamed on the data): the describe, contents and
//     partition subtests fail with errors wrapping ErrInvalidData; the
//     refused subtest, the other side of the classification, still passes.
//   - TestDeleteDuringSchedRestart: (a) Delete's fallback
//     `if err != nil { rt.engine.sync(func() { rt.engine.moveTasks(c) }) }`
//     removed: the tasks the dead policy held stay with the deleted
//     context and the abandoned restart fails them with ErrPluginCrashed
//     (most of the 73 tasks fail); (b) restartSched's two `if c.deleted`
//     checks removed: the restarted instance is swapped into the deleted
//     context ("scheduler plugin restarted" logged) and its process is
//     left running after Shutdown; the test fails saying both.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

// startBounded is start whose Shutdown, at cleanup, may not hang the test
// binary: a test that found tasks hung fails, and its runtime (which would
// wait for them forever) is abandoned after a while.
func startBounded(t *testing.T, opt core.Options) *core.Runtime {
	t.Helper()
	rt, err := core.Init(context.Background(), opt)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- rt.Shutdown() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("Shutdown hung for 15 s: the runtime is abandoned")
		}
	})
	return rt
}

// waitBounded waits for every task, failing the test if that takes longer
// than d, and returns their errors.
func waitBounded(t *testing.T, rt *core.Runtime, d time.Duration, what string, ts ...*core.Task) []error {
	t.Helper()
	errs := make([]error, len(ts))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, tk := range ts {
			errs[i] = rt.Wait(tk)
		}
	}()
	select {
	case <-done:
		return errs
	case <-time.After(d):
		var stuck []string
		for _, tk := range ts {
			if s := tk.Status(); s != core.StatusFinished {
				stuck = append(stuck, fmt.Sprintf("%d (%s): %v", tk.ID(), tk.TaskName(), s))
			}
		}
		t.Fatalf("%s: hung for %v; tasks not finished: %v", what, d, stuck)
		return nil
	}
}

// ---------------------------------------------------------------------
// 1. A completion from the wrong worker.

// twoFaced is an in-process CPU driver with two workers running one
// kernel, twofaced_scal, that multiplies a float32 vector in RAM by the
// float32 after the argument's first byte. That byte gives the worker
// that runs the task a part:
//
//   - 'H' (hold): the worker publishes the task's ID on held and holds the
//     task until release is closed, then runs it and completes it;
//   - 'F' (forge): the worker takes the held task's ID, posts a completion
//     for it on its own completion ring (a task it was never given), and
//     then runs its own task and completes it on the same ring, after the
//     forged one: once the core has its own task's completion, it has read
//     the forged one.
type twoFaced struct {
	arena   *shm.Arena
	held    chan uint64
	release chan struct{}
	forged  atomic.Int32
	stop    chan struct{}
	stopped atomic.Bool
	wg      sync.WaitGroup
}

const twoFacedKernel = "twofaced_scal"

func newTwoFaced() *twoFaced {
	return &twoFaced{held: make(chan uint64, 1), release: make(chan struct{}), stop: make(chan struct{})}
}

func twoFacedArg(part byte, alpha float32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{part}, math.Float32bits(alpha))
}

func (d *twoFaced) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "twofaced", Version: "test", APIVersions: []int{base.APIVersion}}, nil
}
func (d *twoFaced) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }
func (d *twoFaced) SetConfig(context.Context, base.Config) error       { return nil }
func (d *twoFaced) LoadKernel(context.Context, driver.KernelSource) (int, error) {
	return 0, errors.New("twofaced: no source kernels")
}
func (d *twoFaced) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	return &driver.Fingerprint{Arch: driver.CPU, Units: []driver.Unit{{Name: "tf0"}, {Name: "tf1"}}, Kernels: []string{twoFacedKernel}}, nil
}

func (d *twoFaced) Init(_ context.Context, req *driver.InitRequest) error {
	for _, spec := range req.Workers {
		disp, err := shm.OpenRing(d.arena.Bytes(spec.Dispatch))
		if err != nil {
			return err
		}
		comp, err := shm.OpenRing(d.arena.Bytes(spec.Completion))
		if err != nil {
			return err
		}
		bell, coreBell := d.arena.Bell(spec.Bell), d.arena.Bell(spec.CoreBell)
		post := func(c wire.Completion) bool {
			b, _ := comp.ReserveWait(wire.CompletionLen(len(c.Err)), func() bool { return !d.stopped.Load() })
			if b == nil {
				return false
			}
			c.Encode(b)
			comp.Commit()
			return true
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			ready := func() bool { return !disp.Empty() || d.stopped.Load() }
			var e wire.Exec
			for !d.stopped.Load() {
				bell.Wait(ready, 100, 50*time.Millisecond)
				for msg := disp.Peek(); msg != nil; msg = disp.Peek() {
					if wire.Type(msg) != wire.TypeExec || e.Decode(msg) != nil {
						disp.Release()
						continue
					}
					id, bufs, arg := e.ID, append([]wire.BufferDesc(nil), e.Buffers...), append([]byte(nil), e.Arg...)
					disp.Release()
					c := wire.Completion{ID: id, StartNs: wire.Now()}
					switch arg[0] {
					case 'H':
						d.held <- id
						select {
						case <-d.release:
						case <-d.stop:
							return
						}
					case 'F':
						var victim uint64
						select {
						case victim = <-d.held:
						case <-d.stop:
							return
						}
						now := wire.Now()
						if !post(wire.Completion{ID: victim, StartNs: now, EndNs: now}) {
							return
						}
						d.forged.Add(1)
					}
					alpha := math.Float32frombits(binary.LittleEndian.Uint32(arg[1:]))
					for _, b := range bufs {
						v := d.arena.Bytes(base.Span{Offset: b.Offset, Size: b.Layout.NX * 4})
						for i := 0; i+4 <= len(v); i += 4 {
							binary.LittleEndian.PutUint32(v[i:], math.Float32bits(alpha*math.Float32frombits(binary.LittleEndian.Uint32(v[i:]))))
						}
					}
					c.EndNs = wire.Now()
					if !post(c) {
						return
					}
					coreBell.Ring()
				}
			}
		}()
	}
	return nil
}

func (d *twoFaced) Deinit(context.Context) error {
	if d.stopped.CompareAndSwap(false, true) {
		close(d.stop)
	}
	d.wg.Wait()
	return nil
}

// A worker that posts a completion for a task assigned to another worker
// is not believed: the task stays running, and completes once, with its
// result, when the worker that has it completes it.
func TestCompletionFromWrongWorkerIgnored(t *testing.T) {
	drv := newTwoFaced()
	cfg := testConfig(pluginDir)
	cfg.NCPU = 2
	rt := startBounded(t, core.Options{
		Config: cfg,
		Drivers: []core.DriverFactory{func(a *shm.Arena, _ hclog.Logger) (driver.Driver, error) {
			drv.arena = a
			return drv, nil
		}},
		Scheduler: func(a *shm.Arena, _ hclog.Logger) (sched.Scheduler, error) {
			return sched.NewHost(a, ws.New(), base.Info{Name: "ws", Version: "test"}), nil
		},
	})
	t.Cleanup(func() {
		select {
		case <-drv.release:
		default:
			close(drv.release) // let a held task go if the test failed early
		}
	})
	cl := &core.Codelet{Name: "twofaced", Kernels: map[driver.Arch]string{driver.CPU: twoFacedKernel}, Modes: []core.Mode{core.RW}}
	x, y := []float32{1, 2, 3}, []float32{1, 2, 3}
	hx, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	hy, err := core.RegisterVector(rt, y)
	if err != nil {
		t.Fatal(err)
	}
	var xCalls, yCalls atomic.Int32
	tx := &core.Task{Codelet: cl, Handles: []*core.Handle{hx}, Arg: twoFacedArg('H', 2), Name: "X",
		ExecuteOnWorker: true, Worker: 0, Callback: func(*core.Task) { xCalls.Add(1) }}
	ty := &core.Task{Codelet: cl, Handles: []*core.Handle{hy}, Arg: twoFacedArg('F', 3), Name: "Y",
		ExecuteOnWorker: true, Worker: 1, Callback: func(*core.Task) { yCalls.Add(1) }}
	for _, tk := range []*core.Task{tx, ty} {
		if err := rt.Submit(tk); err != nil {
			t.Fatal(err)
		}
	}
	// Y's completion follows the forged one on worker 1's ring: once Y is
	// done, the engine has read the forged completion of X.
	if err := waitBounded(t, rt, 5*time.Second, "Y, completed after its worker forged X's completion", ty)[0]; err != nil {
		t.Fatalf("Y: %v", err)
	}
	if n := drv.forged.Load(); n != 1 {
		t.Fatalf("worker 1 forged %d completions, want 1", n)
	}
	if s, n := tx.Status(), xCalls.Load(); s == core.StatusFinished || n != 0 {
		t.Fatalf("task X is %v (callback run %d times) while worker 0 still holds it: the engine took worker 1's completion of a task assigned to worker 0", s, n)
	}
	close(drv.release)
	if err := waitBounded(t, rt, 5*time.Second, "X, completed by its own worker", tx)[0]; err != nil {
		t.Fatalf("X, completed by its own worker: %v", err)
	}
	if p, err := rt.Profiling(tx); err != nil || p.Worker != 0 {
		t.Fatalf("X ran on worker %d (%v), want 0", p.Worker, err)
	}
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*core.Handle{hx, hy} {
		if err := h.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	if x[0] != 2 || x[1] != 4 || x[2] != 6 || y[0] != 3 || y[1] != 6 || y[2] != 9 {
		t.Fatalf("x = %v, y = %v; want [2 4 6], [3 6 9]", x, y)
	}
	if a, b := xCalls.Load(), yCalls.Load(); a != 1 || b != 1 {
		t.Fatalf("callbacks ran %d times for X and %d for Y, want once each", a, b)
	}
}

// ---------------------------------------------------------------------
// 2. A data interface plugin that answers nonsense.

// garbageIfaceEnv, when set, makes this test binary serve garbageCore as
// the interface plugin iface-garbage instead of running tests: the core
// starts it from a plugin directory holding a link to the binary, as it
// starts any plugin (the variable passes the loader's allow-list).
const garbageIfaceEnv = "STARPU_CORE_TEST_GARBAGE_IFACE"

func init() {
	if os.Getenv(garbageIfaceEnv) != "" {
		iface.Serve(func(*shm.Arena, hclog.Logger) (iface.Interface, error) { return garbageCore{}, nil })
		os.Exit(0)
	}
}

// garbageCore is an interface plugin whose answers depend on the metadata
// (or filter) asked about:
//
//   - "sound": a datum of two parts, 8 and 4 bytes, described correctly;
//   - "refuse": an error, the plugin refusing the application's data;
//   - "garbage-describe": a description naming an interface ID, which the
//     core assigns (a reply the client refuses: base.ErrBadReply);
//   - "garbage-contents": a sound description without the parts, and one
//     of three parts when asked to check the two parts given (ErrBadReply);
//   - filter "extra": one child more than asked for (ErrBadReply);
//   - "no-plan" and "half-plan": sound, but without a copy plan, or with
//     one that moves the first part only (data_iface_test.go).
type garbageCore struct{}

var garbageParts = []uint64{8, 4}

func garbageDesc(parts []uint64) *iface.Description {
	n, _ := iface.RegionLen(parts)
	return &iface.Description{Name: "garbage", Buffers: parts, Size: 12, Layout: kernel.Layout{ElemSize: 1, NX: 12, LD: n}}
}

func (garbageCore) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindInterface, Name: "garbage", Version: "test", APIVersions: []int{base.APIVersion}}, nil
}
func (garbageCore) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }
func (garbageCore) SetConfig(context.Context, base.Config) error       { return nil }

func (garbageCore) Describe(_ context.Context, meta []byte, parts []base.Span) (*iface.Description, error) {
	switch string(meta) {
	case "refuse":
		return nil, errors.New("rows do not add up")
	case "garbage-describe":
		d := garbageDesc(garbageParts)
		d.Layout.Interface = kernel.Vector
		return d, nil
	case "garbage-contents":
		if parts != nil {
			return garbageDesc([]uint64{8, 4, 4}), nil
		}
	}
	return garbageDesc(garbageParts), nil
}

func (garbageCore) CopyPlan(_ context.Context, meta []byte) ([]iface.Range, error) {
	switch string(meta) {
	case "no-plan":
		return nil, nil
	case "half-plan":
		return []iface.Range{{Buffer: 0, Len: 8}}, nil
	}
	return []iface.Range{{Buffer: 0, Len: 8}, {Buffer: 1, Len: 4}}, nil
}

func (garbageCore) Pack(_ context.Context, _ []byte, _ []base.Span, dst base.Span) (uint64, error) {
	return 0, nil
}
func (garbageCore) Unpack(context.Context, []byte, base.Span, []base.Span) error { return nil }
func (garbageCore) Compare(_ context.Context, a, b []byte) (bool, error) {
	return bytes.Equal(a, b), nil
}
func (garbageCore) Display(_ context.Context, meta []byte) (string, error) {
	return "garbage(" + string(meta) + ")", nil
}

func (garbageCore) Partition(_ context.Context, filter string, _ []byte, _ []base.Span, nparts int) ([]iface.Child, error) {
	if filter != "extra" {
		return nil, fmt.Errorf("no filter %q", filter)
	}
	kids := make([]iface.Child, nparts+1)
	for i := range kids {
		kids[i] = iface.Child{Meta: []byte("sound"), Desc: *garbageDesc([]uint64{4}),
			Ranges: []iface.PartRange{{Part: 0, Offset: 0, ChildPart: 0, Len: 4}}}
		kids[i].Desc.Size = 4
	}
	return kids, nil
}

// A data interface plugin process that answers nonsense is at fault, not
// the application: the error of RegisterInterface or Partition wraps
// base.ErrBadReply and names the plugin, and does not wrap ErrInvalidData
// (nor ErrPluginCrashed: the process lives and its sound answers are used
// afterwards). A plugin that refuses the data is the data's fault:
// ErrInvalidData. Each of the core's three classifying calls (Describe of
// the metadata, Describe of the contents, Partition) is covered.
func TestIfaceBadReplyIsPluginFault(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "iface-garbage")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(garbageIfaceEnv, "1")
	opt := setups[1].opts() // in-process driver and policy: the plugin directory holds the interface only
	opt.Config.PluginDir = dir
	rt := startBounded(t, opt)
	parts := func() [][]byte { return [][]byte{make([]byte, 8), make([]byte, 4)} }
	pluginFault := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, base.ErrBadReply) || errors.Is(err, core.ErrInvalidData) ||
			errors.Is(err, core.ErrPluginCrashed) || !strings.Contains(err.Error(), "iface-garbage") {
			t.Fatalf("%s: error %v;\nwant one naming iface-garbage, wrapping base.ErrBadReply, not core.ErrInvalidData nor core.ErrPluginCrashed", what, err)
		}
	}
	t.Run("describe", func(t *testing.T) {
		h, err := rt.RegisterInterface("garbage", []byte("garbage-describe"), parts())
		pluginFault(t, "RegisterInterface answered with a description naming an interface ID", err)
		if h != nil {
			t.Fatal("a handle was registered")
		}
	})
	t.Run("contents", func(t *testing.T) {
		h, err := rt.RegisterInterface("garbage", []byte("garbage-contents"), parts())
		pluginFault(t, "RegisterInterface answered, about the contents, with a description of other parts", err)
		if h != nil {
			t.Fatal("a handle was registered")
		}
	})
	t.Run("partition", func(t *testing.T) {
		h, err := rt.RegisterInterface("garbage", []byte("sound"), parts())
		if err != nil {
			t.Fatalf("sound registration after bad replies: %v", err)
		}
		kids, err := h.Partition(core.PluginFilter("extra", 2))
		pluginFault(t, "Partition answered with a child too many", err)
		if kids != nil {
			t.Fatalf("%d children", len(kids))
		}
		// The handle is left as it was: not held, not partitioned.
		if err := h.Unregister(); err != nil {
			t.Fatalf("Unregister after the failed partition: %v", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		_, err := rt.RegisterInterface("garbage", []byte("refuse"), parts())
		if !errors.Is(err, core.ErrInvalidData) || errors.Is(err, base.ErrBadReply) || !strings.Contains(err.Error(), "rows do not add up") {
			t.Fatalf("RegisterInterface refused by the plugin: error %v, want core.ErrInvalidData with the plugin's reason", err)
		}
	})
}

// ---------------------------------------------------------------------
// 3. Delete of a context while its policy restarts.

// logWatch is a log sink that keeps what the runtime logs and tells when a
// line containing a given string has been written.
type logWatch struct {
	mu    sync.Mutex
	buf   strings.Builder
	waits map[string]chan struct{}
}

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for sub, ch := range l.waits {
		if strings.Contains(l.buf.String(), sub) {
			close(ch)
			delete(l.waits, sub)
		}
	}
	return len(p), nil
}

// when returns a channel closed once a line containing sub is logged.
func (l *logWatch) when(sub string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(l.buf.String(), sub) {
		close(ch)
		return ch
	}
	if l.waits == nil {
		l.waits = map[string]chan struct{}{}
	}
	if old, ok := l.waits[sub]; ok {
		return old
	}
	l.waits[sub] = ch
	return ch
}

func (l *logWatch) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), sub)
}

func (l *logWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// liveChildren returns the pids of this process's children named comm
// that have not exited.
func liveChildren(t *testing.T, comm string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 || s[open+1:end] != comm || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A context is deleted while its policy's plugin process restarts after a
// crash: Delete goes ahead (it does not wait for the restart, nor fail),
// the tasks the dead policy held, those submitted during the restart and
// those that become ready later go to the global context, and every task
// completes once with its result; the restart is abandoned and its new
// policy process stopped. No wait is unbounded: a hang fails the test.
func TestDeleteDuringSchedRestart(t *testing.T) {
	cfg := testConfig(crashyDir)
	crashOnce(t, cfg)
	logs := &logWatch{}
	rt := startBounded(t, core.Options{Config: cfg,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "core", Level: hclog.Warn, Output: logs})})
	c, err := rt.CreateSchedContext("phoenix", []int{0, 1}, "crashy")
	if err != nil {
		t.Fatal(err)
	}
	restarting := logs.when("scheduler plugin exited; restarting it")

	var tasks []*core.Task
	var calls []*atomic.Int32
	submit := func(tk *core.Task) {
		t.Helper()
		n := new(atomic.Int32)
		tk.SchedContext, tk.Callback = c, func(*core.Task) { n.Add(1) }
		if err := rt.Submit(tk); err != nil {
			t.Fatal(err)
		}
		tasks, calls = append(tasks, tk), append(calls, n)
	}
	scal3 := func(ys [][]float32, hs []*core.Handle) {
		for i := range ys {
			ys[i] = []float32{1, float32(i)}
			if hs[i], err = core.RegisterVector(rt, ys[i]); err != nil {
				t.Fatal(err)
			}
			submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{hs[i]}, Arg: blasarg.ScalArg{Alpha: 3}.Encode()})
		}
	}
	// Both workers busy, so that the policy holds what follows unassigned:
	// a read-write chain (a task lost or run twice shows in x) and
	// independent tasks; then the task that kills the policy.
	sleep := &core.Codelet{Name: "sleep", Kernels: map[driver.Arch]string{driver.CPU: "test_sleep"}}
	for range 2 {
		submit(&core.Task{Codelet: sleep, Arg: binary.LittleEndian.AppendUint64(nil, uint64(300*time.Millisecond))})
	}
	x := []float32{1}
	hx, err := core.RegisterVector(rt, x)
	if err != nil {
		t.Fatal(err)
	}
	const chain = 20
	for range chain {
		submit(&core.Task{Codelet: scalF32, Handles: []*core.Handle{hx}, Arg: blasarg.ScalArg{Alpha: 2}.Encode()})
	}
	ys, hs := make([][]float32, 40), make([]*core.Handle, 40)
	scal3(ys, hs)
	submit(&core.Task{Codelet: emptyCL, Priority: 99})

	select {
	case <-restarting:
	case <-time.After(5 * time.Second):
		t.Fatalf("no restart of the context's policy began within 5 s; log:\n%s", logs)
	}
	// Submitted while the policy restarts: held for its next instance.
	zs, hz := make([][]float32, 10), make([]*core.Handle, 10)
	scal3(zs, hz)

	if logs.has("scheduler plugin restart") {
		t.Fatalf("the restart was over before Delete: the test did not delete during a restart; log:\n%s", logs)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- c.Delete() }()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("Delete during the restart: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Delete during the policy's restart hung")
	}
	if err := rt.Submit(&core.Task{Codelet: emptyCL, SchedContext: c}); !errors.Is(err, core.ErrSchedContextDeleted) {
		t.Fatalf("submit to the deleted context: %v, want ErrSchedContextDeleted", err)
	}

	errs := waitBounded(t, rt, 10*time.Second, "tasks of a context deleted while its policy restarted", tasks...)
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("task %d (%s): %v", i, tasks[i].TaskName(), err))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d tasks failed; the first: %s", len(failed), len(tasks), failed[0])
	}
	if err := hx.Unregister(); err != nil {
		t.Fatal(err)
	}
	if x[0] != 1<<chain {
		t.Errorf("x = %v after a chain of %d doublings, want %d: a task ran twice or not at all", x[0], chain, 1<<chain)
	}
	for _, set := range []struct {
		v [][]float32
		h []*core.Handle
	}{{ys, hs}, {zs, hz}} {
		for i, h := range set.h {
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			if set.v[i][0] != 3 || set.v[i][1] != 3*float32(i) {
				t.Errorf("y = %v, want [3 %d]", set.v[i], 3*i)
			}
		}
	}
	for i, n := range calls {
		if k := n.Load(); k != 1 {
			t.Errorf("task %d (%s) completed %d times, want once", i, tasks[i].TaskName(), k)
		}
	}

	if err := rt.Submit(&core.Task{Codelet: emptyCL, Synchronous: true}); err != nil {
		t.Fatalf("task in the global context afterwards: %v", err)
	}

	// Shutdown waits for the restart to end (abandoned: the context is
	// gone); then no policy process of the context may be left.
	down := make(chan error, 1)
	go func() { down <- rt.Shutdown() }()
	select {
	case err := <-down:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown hung")
	}
	if logs.has("scheduler plugin restarted") {
		t.Errorf("the restarted policy was installed in the deleted context; log:\n%s", logs)
	}
	var left []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if left = liveChildren(t, "sched-crashy"); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("sched-crashy processes %v still run after their context was deleted during the restart and the runtime shut down", left)
	}

	// Every task of the context succeeded, as after a Delete without a
	// crash (TestContextDelete): its WaitForAll has nothing to report once
	// the restart is over.
	t.Run("context WaitForAll", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- c.WaitForAll() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the context deleted during its policy's restart is left broken: WaitForAll returns %q although every task succeeded", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("WaitForAll of the deleted context hung")
		}
	})
}
