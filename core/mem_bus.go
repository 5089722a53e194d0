package core

// Bus measurements; design note: docs/design/perfmodel.md.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// BusLink is the measured speed of transfers from one memory node to
// another.
type BusLink struct {
	Src, Dst string
	// MBps is the bandwidth in 10^6 bytes per second for large transfers;
	// LatencyUs the time of a tiny transfer, ring round trip included.
	MBps      float64
	LatencyUs float64
}

// Bus measurement sizes: large enough for a steady bandwidth, small enough
// to measure at the first start on a new machine in well under a second.
const (
	busProbeSize = 16 << 20
	busProbeReps = 4
	busTinyReps  = 50
)

// MeasureBus measures, with real copies through the drivers, the bandwidth
// and latency from RAM to every device memory node and back, and between
// device nodes with a peer link (driver.MemoryNode.Peers): the best of
// reps copies of size bytes, and the median of tiny copies.
func (rt *Runtime) MeasureBus(ctx context.Context, size uint64, reps int) ([]BusLink, error) {
	if err := rt.usable(); err != nil {
		return nil, err
	}
	if size == 0 || reps <= 0 {
		return nil, fmt.Errorf("measure bus: size %d and reps %d must be positive", size, reps)
	}
	var out []BusLink
	for _, nd := range rt.nodes[1:] {
		if nd.worker == nil {
			continue
		}
		up, down, err := rt.measureNode(ctx, nd, size, reps)
		if err != nil {
			return nil, fmt.Errorf("measure bus to %s: %w", nd.name, err)
		}
		out = append(out, up, down)
	}
	for _, nd := range rt.nodes[1:] {
		for _, p := range nd.peers {
			l, err := rt.measurePeer(ctx, nd, rt.nodes[p], size, reps)
			if err != nil {
				return nil, fmt.Errorf("measure bus from %s to %s: %w", nd.name, rt.nodes[p].name, err)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// CalibrateBus measures the bus as MeasureBus does and records the links
// in the bus model: the one the runtime predicts transfers with, and its
// file in the model directory (bus/<host>.json), which it returns. Links
// measured before and not again (nodes absent now) are kept. With RAM only
// there is nothing to measure or save: no link and no file.
func (rt *Runtime) CalibrateBus(ctx context.Context, size uint64, reps int) ([]BusLink, string, error) {
	links, err := rt.MeasureBus(ctx, size, reps)
	if err != nil || len(links) == 0 {
		return links, "", err
	}
	dir := rt.modelDir()
	bus := rt.bus
	if bus == nil {
		// No model in use (RAM only, or the measure at start failed):
		// the file's is updated for the next start.
		if bus, _, err = perfmodel.LoadBus(dir); err != nil {
			rt.log.Warn("bus model unreadable; writing it again", "error", err)
			bus = &perfmodel.Bus{}
		}
	}
	for _, l := range links {
		if err := bus.Set(l.Src, l.Dst, l.MBps, l.LatencyUs); err != nil {
			return nil, "", fmt.Errorf("bus model: %w", err)
		}
	}
	if err := bus.Save(dir); err != nil {
		return nil, "", fmt.Errorf("save the bus model: %w", err)
	}
	return links, perfmodel.BusPath(dir), nil
}

func (rt *Runtime) measureNode(ctx context.Context, nd *memNode, size uint64, reps int) (up, down BusLink, err error) {
	host, err := rt.arena.Alloc(size)
	if err != nil {
		return up, down, err
	}
	defer rt.arena.Free(host)
	clear(rt.arena.Bytes(host))
	buf, err := rt.engine.busAlloc(ctx, nd, size)
	if err != nil {
		return up, down, err
	}
	defer rt.engine.busFree(nd, buf)
	if up, err = rt.engine.timeCopies(ctx, BusLink{Src: "RAM", Dst: nd.name}, nd, size, reps, func(c *wire.Copy) {
		c.DstNode, c.SrcBuffer, c.DstBuffer = nd.local, host.Offset, buf
	}); err != nil {
		return up, down, err
	}
	down, err = rt.engine.timeCopies(ctx, BusLink{Src: nd.name, Dst: "RAM"}, nd, size, reps, func(c *wire.Copy) {
		c.SrcNode, c.SrcBuffer, c.DstBuffer = nd.local, buf, host.Offset
	})
	return up, down, err
}

// measurePeer measures copies from device node a to its peer b, posted to
// a's worker as the coherency protocol posts them.
func (rt *Runtime) measurePeer(ctx context.Context, a, b *memNode, size uint64, reps int) (BusLink, error) {
	l := BusLink{Src: a.name, Dst: b.name}
	e := rt.engine
	src, err := e.busAlloc(ctx, a, size)
	if err != nil {
		return l, err
	}
	defer e.busFree(a, src)
	dst, err := e.busAlloc(ctx, b, size)
	if err != nil {
		return l, err
	}
	defer e.busFree(b, dst)
	return e.timeCopies(ctx, l, a, size, reps, func(c *wire.Copy) {
		c.SrcNode, c.DstNode, c.SrcBuffer, c.DstBuffer = a.local, b.local, src, dst
	})
}

// busAlloc allocates size bytes on nd for a measure, outside the node's
// accounting (the runtime measures before any data is there).
func (e *engine) busAlloc(ctx context.Context, nd *memNode, size uint64) (uint64, error) {
	return e.syncDevice(ctx, func(x *xfer) (int, func([]byte)) {
		e.nextBuf++
		a := wire.Alloc{ID: x.id, Node: nd.local, Buffer: e.nextBuf, Size: size}
		return wire.AllocSize, a.Encode
	}, nd)
}

func (e *engine) busFree(nd *memNode, buf uint64) {
	e.call(func() { f := wire.Free{Node: nd.local, Buffer: buf}; e.postCtl(nd.worker, wire.FreeSize, f.Encode) })
}

// timeCopies fills l with the best time of reps copies of size bytes and
// the median time of tiny ones, each a Copy of one range that set fills
// in, posted to nd's worker and waited for.
func (e *engine) timeCopies(ctx context.Context, l BusLink, nd *memNode, size uint64, reps int, set func(*wire.Copy)) (BusLink, error) {
	copyOnce := func(n uint64) (time.Duration, error) {
		t0 := time.Now()
		_, err := e.syncDevice(ctx, func(x *xfer) (int, func([]byte)) {
			c := wire.Copy{ID: x.id, Ranges: []wire.CopyRange{{Len: n}}}
			set(&c)
			return wire.CopyLen(1), c.Encode
		}, nd)
		return time.Since(t0), err
	}
	best := time.Duration(1<<63 - 1)
	for i := 0; i < reps; i++ {
		d, err := copyOnce(size)
		if err != nil {
			return l, err
		}
		best = min(best, d)
	}
	var tiny []time.Duration
	for i := 0; i < busTinyReps; i++ {
		d, err := copyOnce(8)
		if err != nil {
			return l, err
		}
		tiny = append(tiny, d)
	}
	sort.Slice(tiny, func(i, j int) bool { return tiny[i] < tiny[j] })
	l.MBps = float64(size) / best.Seconds() / 1e6
	l.LatencyUs = float64(tiny[len(tiny)/2].Nanoseconds()) / 1e3
	return l, nil
}

// syncDevice posts one device-memory message built by msg for a new
// transfer on nd's worker and waits for its completion. For an Alloc it
// returns the buffer number.
func (e *engine) syncDevice(ctx context.Context, msg func(x *xfer) (int, func([]byte)), nd *memNode) (uint64, error) {
	type result struct {
		buf uint64
		err error
	}
	done := make(chan result, 1)
	e.call(func() {
		x := e.newXfer()
		size, enc := msg(x)
		buf := e.nextBuf
		x.then = append(x.then, func(err error) { done <- result{buf, err} })
		e.postCtl(nd.worker, size, enc)
	})
	select {
	case r := <-done:
		return r.buf, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// loadBus reads the bus model from the model directory, measuring and
// saving it first when a link between the machine's nodes is missing.
func (rt *Runtime) loadBus(ctx context.Context) error {
	if !rt.multiNode {
		return nil
	}
	dir := rt.modelDir()
	bus, _, err := perfmodel.LoadBus(dir)
	if err != nil {
		rt.log.Warn("bus model unreadable; measuring it again", "error", err)
		bus = &perfmodel.Bus{}
	}
	missing := false
	for _, nd := range rt.nodes[1:] {
		if nd.worker == nil {
			continue
		}
		if _, ok := bus.Predict("RAM", nd.name, 1); !ok {
			missing = true
		}
		if _, ok := bus.Predict(nd.name, "RAM", 1); !ok {
			missing = true
		}
		for _, p := range nd.peers {
			if _, ok := bus.Predict(nd.name, rt.nodes[p].name, 1); !ok {
				missing = true
			}
		}
	}
	if missing {
		size := uint64(busProbeSize)
		for _, nd := range rt.nodes[1:] {
			if nd.worker != nil {
				size = min(size, nd.capacity/2)
			}
		}
		if size == 0 {
			return nil
		}
		links, err := rt.MeasureBus(ctx, size, busProbeReps)
		if err != nil {
			// Schedulers then work without transfer predictions.
			rt.log.Warn("cannot measure the bus; no transfer predictions", "error", err)
			return nil
		}
		for _, l := range links {
			if err := bus.Set(l.Src, l.Dst, l.MBps, l.LatencyUs); err != nil {
				return fmt.Errorf("bus model: %w", err)
			}
		}
		if err := bus.Save(dir); err != nil {
			rt.log.Warn("cannot save the bus model", "dir", dir, "error", err)
		}
	}
	rt.bus = bus
	return nil
}

func (rt *Runtime) modelDir() string {
	if rt.cfg.ModelDir != "" {
		return rt.cfg.ModelDir
	}
	return perfmodel.DefaultDir(rt.getenv)
}

// Bus returns the bus model's links: measured bandwidth and latency between
// memory nodes (nil with RAM only).
func (rt *Runtime) Bus() []BusLink {
	if rt.bus == nil {
		return nil
	}
	var out []BusLink
	for _, l := range rt.bus.Links() {
		out = append(out, BusLink{Src: l.Src, Dst: l.Dst, MBps: l.MBps, LatencyUs: l.LatencyUs})
	}
	return out
}
