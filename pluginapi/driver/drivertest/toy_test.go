package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// toy is a small driver for the kit's own tests: two units on RAM that
// read a scheduler ring, and one on a device node whose memory is Go
// slices. Its kernels are "ok" (adds 1 to the float32s of its first
// buffer, after a few microseconds of work) and "fail" (fails with the
// text of its first buffer). A flaw breaks one rule of the contract, so
// that the tests can check the suite catches it.
type toy struct {
	arena *shm.Arena
	flaw  string
	mu    sync.Mutex
	ws    []*toyWorker
	wg    sync.WaitGroup
	stop  atomic.Bool
}

// The toy's flaws, each breaking one rule the suite checks.
const (
	flawNone          = ""
	flawDuplicate     = "duplicate"       // every 100th Exec is answered twice
	flawDrop          = "drop"            // the 500th Exec of the dispatch ring is never answered
	flawNoRing        = "no-ring"         // never rings the core's bell
	flawReleaseEarly  = "release-early"   // releases scheduler-ring tasks before running them
	flawClock         = "clock"           // times tasks with the wall clock
	flawUntruncated   = "untruncated"     // posts errors whole, however long
	flawStopOnError   = "stop-on-error"   // a worker stops at an unknown kernel
	flawDropOnDeinit  = "drop-on-deinit"  // Deinit drops the tasks still queued
	flawExitAfterPass = "exit-after-pass" // a worker stops after its pass over both rings, whatever came on the first since
	flawSlowDrain     = "slow-drain"      // once stopping, a worker sleeps on its bell before every 50th task, though tasks wait
	flawPartialCopy   = "partial-copy"    // copies ranges until one is out of range
	flawNoLimit       = "no-limit"        // allocates beyond the node's bytes
	flawNoReinit      = "no-reinit"       // a second Init fails
	flawNoSleep       = "no-sleep"        // sleeps on its bell without saying so
)

const toyNodeBytes = 64 << 20

func newToy(a *shm.Arena, flaw string) *toy { return &toy{arena: a, flaw: flaw} }

func (d *toy) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "toy", Version: "test", APIVersions: []int{base.APIVersion}}, nil
}

func (d *toy) ConfigSchema(context.Context) (*base.Schema, error) { return &base.Schema{}, nil }

func (d *toy) SetConfig(ctx context.Context, cfg base.Config) error {
	s, _ := d.ConfigSchema(ctx)
	return s.Validate(cfg)
}

func (d *toy) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	return &driver.Fingerprint{
		Arch:      driver.CPU,
		Units:     []driver.Unit{{Name: "toy 0", Node: 0}, {Name: "toy 1", Node: 0}, {Name: "toy device", Node: 1}},
		Nodes:     []driver.MemoryNode{{Name: "toy memory", Bytes: toyNodeBytes}},
		Kernels:   []string{"ok", "fail"},
		SchedRing: true,
	}, nil
}

func (d *toy) LoadKernel(_ context.Context, k driver.KernelSource) (int, error) {
	return 0, fmt.Errorf("toy: no kernel %q from source", k.Name)
}

// toyWorker waits and posts through driver.Rings, as the real drivers
// do, so that the suite runs on it too; the flaws go around it.
type toyWorker struct {
	d                     *toy
	spec                  driver.WorkerSpec
	node                  uint32
	rings                 *driver.Rings
	dispatch, sched, done *shm.Ring
	bell, coreBell        *shm.Bell
	spin                  int
	execs                 int // Execs run so far
	dispatched            int // of which from the dispatch ring
	posted                bool
	bufs                  map[uint64][]byte
	used                  uint64
}

func (d *toy) Init(_ context.Context, req *driver.InitRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ws) > 0 {
		return errors.New("toy: already initialised")
	}
	if d.flaw == flawNoReinit && d.stop.Load() {
		return errors.New("toy: cannot start again")
	}
	fp, _ := d.Fingerprint(context.Background())
	var ws []*toyWorker
	for _, spec := range req.Workers {
		if spec.Unit < 0 || spec.Unit >= len(fp.Units) {
			return fmt.Errorf("toy: unit %d out of range", spec.Unit)
		}
		r, err := driver.OpenRings(d.arena, spec, req.SpinIters)
		if err != nil {
			return fmt.Errorf("toy: worker %d: %w", spec.ID, err)
		}
		w := &toyWorker{d: d, spec: spec, node: uint32(fp.Units[spec.Unit].Node), spin: req.SpinIters, bufs: map[uint64][]byte{},
			rings: r, dispatch: r.Dispatch, sched: r.Sched, done: r.Completion, bell: r.Bell, coreBell: r.CoreBell}
		ws = append(ws, w)
	}
	d.stop.Store(false)
	d.ws = ws
	for _, w := range ws {
		d.wg.Add(1)
		go w.run()
	}
	return nil
}

func (d *toy) Deinit(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stop.Store(true)
	for _, w := range d.ws {
		w.bell.Ring()
	}
	d.wg.Wait()
	d.ws = nil
	return nil
}

func (w *toyWorker) hasWork() bool {
	return !w.dispatch.Empty() || (w.sched != nil && !w.sched.Empty())
}

func (w *toyWorker) run() {
	defer w.d.wg.Done()
	ready := func() bool { return w.hasWork() || w.d.stop.Load() }
	if w.d.flaw == flawExitAfterPass {
		for !w.d.stop.Load() {
			if w.bell.Wait(ready, w.spin, 100*time.Millisecond) && w.pass() != nil {
				return
			}
		}
		return
	}
	for {
		// Read before the pass: a Deinit seen here comes after every
		// message posted before it, which the pass then runs.
		stopping := w.d.stop.Load()
		if stopping && w.d.flaw == flawDropOnDeinit {
			return
		}
		if err := w.pass(); err != nil {
			return
		}
		if stopping && !w.hasWork() {
			return
		}
		if w.d.flaw == flawNoSleep {
			w.bell.Wait(ready, w.spin, 100*time.Millisecond)
		} else {
			w.rings.Idle(ready, 100*time.Millisecond)
		}
	}
}

// pass runs what waits on both rings and rings the core for what it
// posted.
func (w *toyWorker) pass() error {
	defer func() {
		if w.posted && w.d.flaw != flawNoRing {
			w.coreBell.Ring()
		}
		w.posted = false
	}()
	for _, r := range []*shm.Ring{w.dispatch, w.sched} {
		if r == nil {
			continue
		}
		for msg := r.Peek(); msg != nil; msg = r.Peek() {
			early := r == w.sched && w.d.flaw == flawReleaseEarly
			if early {
				msg = append([]byte(nil), msg...)
				r.Release()
				// A window long enough for the suite to see the ring
				// drained before the completion, however loaded the
				// machine (it missed 20 µs now and then).
				time.Sleep(time.Millisecond)
			}
			if r == w.dispatch && wire.Type(msg) == wire.TypeExec {
				w.dispatched++
			}
			if err := w.handle(msg); err != nil {
				return err
			}
			if !early {
				r.Release()
			}
			if w.d.flaw == flawDropOnDeinit && w.d.stop.Load() {
				return errors.New("stopping")
			}
		}
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (w *toyWorker) handle(msg []byte) error {
	if w.d.flaw == flawSlowDrain && w.d.stop.Load() && w.execs%50 == 0 {
		w.rings.Idle(func() bool { return false }, 100*time.Millisecond)
	}
	start := wire.Now()
	c := wire.Completion{StartNs: start}
	var err error
	switch wire.Type(msg) {
	case wire.TypeExec:
		var e wire.Exec
		if err := e.Decode(msg); err != nil {
			return err
		}
		c.ID = e.ID
		w.execs++
		if e.Kernel > 1 && w.d.flaw == flawStopOnError {
			return errors.New("unknown kernel")
		}
		err = w.exec(&e)
		if w.d.flaw == flawDrop && w.dispatched == 500 {
			return nil
		}
		if w.d.flaw == flawDuplicate && w.execs%100 == 0 {
			c.EndNs = wire.Now()
			if err := w.post(&c, err); err != nil {
				return err
			}
		}
	case wire.TypeAlloc:
		var a wire.Alloc
		if err := a.Decode(msg); err != nil {
			return err
		}
		c.ID = a.ID
		err = w.alloc(&a)
	case wire.TypeFree:
		var f wire.Free
		if err := f.Decode(msg); err != nil {
			return err
		}
		if b, ok := w.bufs[f.Buffer]; ok {
			w.used -= uint64(len(b))
			delete(w.bufs, f.Buffer)
		}
		return nil
	case wire.TypeCopy:
		var cp wire.Copy
		if err := cp.Decode(msg); err != nil {
			return err
		}
		c.ID = cp.ID
		err = w.copy(&cp)
	default:
		return fmt.Errorf("message type %d", wire.Type(msg))
	}
	c.EndNs = wire.Now()
	if w.d.flaw == flawClock {
		c.StartNs, c.EndNs = time.Now().UnixNano(), time.Now().UnixNano()
	}
	return w.post(&c, err)
}

func (w *toyWorker) post(c *wire.Completion, err error) error {
	if err == nil || w.d.flaw != flawUntruncated {
		if err := w.rings.Post(c, err, nil); err != nil {
			return err
		}
		w.posted = true
		return nil
	}
	c.Failed, c.Err = true, []byte(err.Error())
	b, rerr := w.done.ReserveWait(wire.CompletionLen(len(c.Err)), func() bool { return true })
	if rerr != nil {
		return rerr
	}
	c.Encode(b)
	w.done.Commit()
	w.posted = true
	return nil
}

// mem is the memory of a buffer descriptor's range.
func (w *toyWorker) mem(node uint32, buf, off, n uint64) ([]byte, error) {
	if node == 0 {
		if off > math.MaxUint64-buf {
			return nil, errors.New("offset overflows")
		}
		return w.d.arena.BytesChecked(base.Span{Offset: buf + off, Size: n})
	}
	if node != w.node {
		return nil, fmt.Errorf("node %d is not this worker's", node)
	}
	b, ok := w.bufs[buf]
	if !ok {
		return nil, fmt.Errorf("buffer %d not allocated", buf)
	}
	if off > uint64(len(b)) || n > uint64(len(b))-off {
		return nil, fmt.Errorf("range [%d, +%d) outside buffer %d of %d bytes", off, n, buf, len(b))
	}
	return b[off : off+n], nil
}

func (w *toyWorker) exec(e *wire.Exec) error {
	if e.Kernel > 1 {
		return fmt.Errorf("toy: kernel index %d out of range (2 kernels)", e.Kernel)
	}
	if len(e.Buffers) == 0 {
		return errors.New("toy: no buffer")
	}
	bd := e.Buffers[0]
	b, err := w.mem(uint32(bd.Node), bd.Offset, 0, bd.Layout.Len())
	if err != nil {
		return err
	}
	if e.Kernel == 1 {
		return errors.New(string(b))
	}
	// 20 µs of work, so that tasks are still queued when
	// Deinit comes.
	for t := wire.Now(); wire.Now()-t < 20000; {
	}
	for i := range view[float32](b) {
		view[float32](b)[i]++
	}
	return nil
}

func (w *toyWorker) alloc(a *wire.Alloc) error {
	if a.Node != w.node || w.node == 0 {
		return fmt.Errorf("alloc on node %d: this worker's device is node %d", a.Node, w.node)
	}
	if _, ok := w.bufs[a.Buffer]; ok {
		return fmt.Errorf("buffer %d allocated already", a.Buffer)
	}
	if a.Size > toyNodeBytes-w.used && w.d.flaw != flawNoLimit {
		return fmt.Errorf("out of memory: %d of %d bytes in use", w.used, toyNodeBytes)
	}
	if a.Size > 1<<30 {
		a.Size = 1 // the flawed toy pretends
	}
	w.bufs[a.Buffer] = make([]byte, a.Size)
	w.used += a.Size
	return nil
}

func (w *toyWorker) copy(c *wire.Copy) error {
	check := w.d.flaw != flawPartialCopy
	if check {
		for i, r := range c.Ranges {
			if _, err := w.mem(c.SrcNode, c.SrcBuffer, r.SrcOffset, r.Len); err != nil {
				return fmt.Errorf("copy range %d: source: %w", i, err)
			}
			if _, err := w.mem(c.DstNode, c.DstBuffer, r.DstOffset, r.Len); err != nil {
				return fmt.Errorf("copy range %d: destination: %w", i, err)
			}
		}
	}
	for i, r := range c.Ranges {
		src, err := w.mem(c.SrcNode, c.SrcBuffer, r.SrcOffset, r.Len)
		if err != nil {
			return fmt.Errorf("copy range %d: source: %w", i, err)
		}
		dst, err := w.mem(c.DstNode, c.DstBuffer, r.DstOffset, r.Len)
		if err != nil {
			// The flawed toy writes what it can.
			if b, ok := w.bufs[c.DstBuffer]; ok && c.DstNode != 0 && r.DstOffset < uint64(len(b)) {
				copy(b[r.DstOffset:], src)
			}
			return fmt.Errorf("copy range %d: destination: %w", i, err)
		}
		copy(dst, src)
	}
	return nil
}

// serveToy is the toy as a plugin process.
func serveToy(flaw string) {
	driver.Serve(func(a *shm.Arena, _ hclog.Logger) (driver.Driver, error) { return newToy(a, flaw), nil })
}
